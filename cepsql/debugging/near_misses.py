"""Near misses: the longest attempts that did not complete, read off the trace.

An attempt (the search from one start row) that found no match and was not jumped over
by the AFTER MATCH rule is a miss; its length is the longest run of rows it labelled
with every DEFINE holding, and where it stopped is the first step that tried to go one
row further: the variable tried, the conjunct that failed and its operands' values (or
``window``, ``end`` of the slice, ``pruned``).
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from cepsql.debugging.trace import END, EXTENDED, FAILED, MATCH, PRUNED, SKIPPED, WINDOW, Step

_STOPS = (FAILED, WINDOW, END, PRUNED)


@dataclass(frozen=True)
class NearMiss:
    partition: tuple
    attempt: int          # the start row
    rows: tuple[int, ...]  # the rows it labelled
    path: str             # their variables
    stopped_at: str | None  # the variable it tried next
    at_row: int | None
    reason: str | None    # failed / window / end / pruned
    conjunct: str | None
    values: str | None


def near_misses(steps: list[Step], k: int = 10, per_partition: bool = False) -> list[NearMiss]:
    """The ``k`` longest misses (overall, or per partition), longest first; ties by
    partition (its PARTITION BY values ascending, NULL first, as Spark orders them), then
    start row."""
    attempts: dict[tuple, list[Step]] = {}
    for s in steps:
        attempts.setdefault((s.partition, s.attempt), []).append(s)
    misses = [_miss(key, group) for key, group in attempts.items()
              if not any(s.event in (MATCH, SKIPPED) for s in group)]
    misses.sort(key=lambda m: (-len(m.rows), key_order(m.partition), m.attempt))
    if not per_partition:
        return misses[:k]
    kept: dict[tuple, list[NearMiss]] = {}
    for m in misses:
        kept.setdefault(m.partition, [])
        if len(kept[m.partition]) < k:
            kept[m.partition].append(m)
    return sorted((m for group in kept.values() for m in group),
                  key=lambda m: (key_order(m.partition), -len(m.rows), m.attempt))


def key_order(key: tuple) -> tuple:
    """A partition's sort key: its values ascending, NULL first."""
    return tuple((v is not None, v) for v in key)


def _miss(key: tuple, group: list[Step]) -> NearMiss:
    partition, attempt = key
    best: Step | None = None
    for s in group:
        if s.event == EXTENDED and (best is None or _length(s) > _length(best)):
            best = s
    prefix = best.path.split() if best else []
    rows = best.path_rows if best else ()
    stop = next((s for s in group if s.event in _STOPS and _continues(s, prefix, rows)), None)
    return NearMiss(partition, attempt, rows, " ".join(prefix),
                    stop.variable if stop else None, stop.row if stop else None,
                    stop.event if stop else None, stop.conjunct if stop else None,
                    stop.values if stop else None)


def _continues(s: Step, prefix: list[str], rows: tuple[int, ...]) -> bool:
    """Whether the stop s tried one more row after the prefix, or checked exactly it (a
    CEP candidate cut whole by the window or a NOT)."""
    extra = len(s.path_rows) - len(rows)
    return extra in (0, 1) and s.path_rows[:len(rows)] == rows \
        and s.path.split()[:len(prefix)] == prefix


def _length(s: Step) -> int:
    return len(s.path.split())


#: the near-miss frame's columns after the PARTITION BY ones, and their Arrow types
MISS_COLUMNS = {"attempt": "int64", "length": "int64", "rows": "string", "path": "string",
                "stopped_at": "string", "at_row": "int64", "reason": "string",
                "conjunct": "string", "values": "string"}


def misses_frame(partition_columns: list[str], misses: list[NearMiss]):
    """The misses as a pandas DataFrame, one row each."""
    records = [dict(zip(partition_columns, m.partition))
               | {"attempt": m.attempt, "length": len(m.rows),
                  "rows": ", ".join(map(str, m.rows)), "path": m.path,
                  "stopped_at": m.stopped_at, "at_row": m.at_row, "reason": m.reason,
                  "conjunct": m.conjunct, "values": m.values}
               for m in misses]
    columns = partition_columns + list(MISS_COLUMNS)
    frame = pd.DataFrame.from_records(records, columns=columns)
    frame["at_row"] = frame["at_row"].astype("Int64")
    return frame
