"""Rows a push-style worker holds until they are worth a call into the evaluator (runs
in tasks, inside every worker's push state).

Every push state (SQL:2016 mode, CEP mode per group or per window, adaptive, shared DAG)
gathers sorted batches until about a chunk of rows is pending, runs the evaluator over
them, and keeps only the rows an undecided match may still read. This class is that
bookkeeping, written once: the batches, the PARTITION BY group starts as offsets into
the pending rows, the last row seen (to tell whether the next batch continues its group)
and the size at which the next call is worth making.
"""
from __future__ import annotations

from typing import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa

GroupStarts = Callable[[pa.RecordBatch, "pa.RecordBatch | None"], np.ndarray]


def with_zero(starts: np.ndarray) -> np.ndarray:
    """Group starts always include row 0 (the chunk's first group, maybe a carried one)."""
    if len(starts) and starts[0] == 0:
        return starts.astype(np.int64)
    return np.concatenate([[0], starts]).astype(np.int64)


def pieces(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """Non-empty batches of at most ``rows`` rows (a large input batch would otherwise be
    one chunk)."""
    for batch in batches:
        for i in range(0, batch.num_rows, rows):
            yield batch.slice(i, rows)


class PendingRows:
    """The rows waiting for the evaluator, with their group starts."""

    def __init__(self, group_starts: GroupStarts, chunk_rows: int):
        self._group_starts = group_starts
        self.chunk_rows = chunk_rows
        self.batches: list[pa.RecordBatch] = []
        self.starts: list[np.ndarray] = []  # group starts, as offsets into the pending rows
        self.rows = 0
        self.previous: pa.RecordBatch | None = None  # the last row added
        self.threshold = chunk_rows

    def add(self, batch: pa.RecordBatch, key_view: pa.RecordBatch | None = None
            ) -> np.ndarray:
        """Append a batch; returns its group starts (offsets into the batch). key_view,
        when given, is the batch as the group-start test reads it (same rows)."""
        view = batch if key_view is None else key_view
        new_starts = self._group_starts(view, self.previous)
        self.starts.append(new_starts + self.rows)
        self.previous = view.slice(view.num_rows - 1)
        self.batches.append(batch)
        self.rows += batch.num_rows
        return new_starts

    @property
    def ready(self) -> bool:
        return self.rows >= self.threshold

    def group_starts(self) -> np.ndarray:
        """The pending rows' group starts (row 0 included)."""
        return with_zero(np.concatenate(self.starts))

    def table(self) -> tuple[pa.Table, np.ndarray]:
        """The pending rows as one table and their group starts."""
        return pa.Table.from_batches(self.batches), self.group_starts()

    def keep(self, rest: pa.Table, *, group_open: bool = True) -> None:
        """Only ``rest`` (the tail of the last table) stays pending. With group_open its
        first row continues a group (a window's carried rows), else it starts one. Rows
        held back (a long undecided match) are retried once the data doubled."""
        self.batches = rest.to_batches()
        self.rows = rest.num_rows
        self.starts = [np.zeros(0 if group_open else 1, dtype=np.int64)]
        self.threshold = max(self.chunk_rows, 2 * self.rows) if group_open else self.chunk_rows

    def wait_for_more(self) -> None:
        """Nothing can be decided yet (one group spans every pending row): wait until
        the pending rows have doubled."""
        self.threshold = 2 * self.rows

    def clear(self) -> None:
        self.batches, self.starts, self.rows = [], [], 0
