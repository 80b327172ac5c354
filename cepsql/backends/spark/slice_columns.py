"""The hidden columns a sliced unpartitioned clause carries (slicing.py adds them, the
ordered scan's tasks read them): which slice a copy of a row is evaluated in, and whether
that copy is one lent to a neighbouring slice."""
from __future__ import annotations

__all__ = ["SLICE_COLUMN", "COPY_COLUMN"]

SLICE_COLUMN = "__cep_slice"        # the slice a copy of a row is evaluated in
COPY_COLUMN = "__cep_slice_copy"    # true: SLICE_COLUMN is not the slice whose core holds the row
