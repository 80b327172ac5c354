"""Helpers shared by the SQL:2016 conformance tests (test_sql_core / test_sql_complete /
test_sql_errors): run a statement in-process and turn the pandas result into plain Python
rows (NULL -> None, numpy scalars -> Python, arrays -> lists) so expected rows can be
written by hand."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

import cepsql


def plain(v):
    if isinstance(v, np.ndarray):
        return [plain(x) for x in v.tolist()]
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, np.generic):
        return plain(v.item())
    return v


def run(sql: str, **tables):
    """(column names, rows in output order) of sql over tables, in-process."""
    df = cepsql.match_recognize(sql, **tables)
    rows = [tuple(plain(v) for v in row) for row in df.astype(object).itertuples(index=False)]
    return list(df.columns), rows


def _key(row):
    # None sorts first, then values by type name and value (mixed types never compare)
    return tuple((v is not None, type(v).__name__, v if not isinstance(v, list) else str(v))
                 for v in row)


def run_sorted(sql: str, **tables):
    """Like run, rows sorted (output order between matches/partitions is not specified)."""
    cols, rows = run(sql, **tables)
    return cols, sorted(rows, key=_key)


def srt(rows):
    return sorted(rows, key=_key)


def loc(sql: str, needle: str, nth: int = 1) -> tuple[int, int]:
    """1-based (line, column) of the nth occurrence of needle in sql."""
    pos = -1
    for _ in range(nth):
        pos = sql.index(needle, pos + 1)
    line = sql.count("\n", 0, pos) + 1
    col = pos - (sql.rfind("\n", 0, pos) + 1) + 1
    return line, col
