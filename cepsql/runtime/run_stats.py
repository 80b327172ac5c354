"""What the evaluators counted while a statement ran (partial matches, runs, peak rows held,
plans chosen in the task, adaptive switches) and what the backend measured around them
(rows read and kept, rows per variable, partitions, time per stage): the "actual" side
of EXPLAIN ANALYZE (rendered by explain/analyze.py).

Each worker keeps the counters of its own last run (``MatchWorker.last_stats``); a caller
that wants them passes a ``RunStatistics`` down the call (in-process: ``run_local(...,
stats=RunStatistics())``), which receives one ``ClauseStatistics`` per MATCH_RECOGNIZE
clause run. No module state: concurrent runs each fill their own object, and the threads
of one run work on their own copies of the worker, merged once they are done
(``merge_counters``). The counters are plain integers the evaluators bump in their loops
anyway, so they are always on; the backend's figures are taken only when a
``ClauseStatistics`` is passed."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from cepsql.runtime.worker import row_changes

__all__ = ["ClauseStatistics", "GroupSizes", "RunStatistics", "STAGES", "merge_counters"]

#: the stages EXPLAIN ANALYZE times, in pipeline order
STAGES = ("input", "shuffle+sort", "evaluation", "output")

Counters = dict[str, object]


@dataclass
class ClauseStatistics:
    """One clause run: where the clause starts in the statement (None when its plan was
    run directly, as by ``execute_plan``) and its evaluator's counters (empty when the
    evaluator keeps none, as the SQL:2016 one and the sequence fast path)."""
    position: int | None = None
    counters: Counters = field(default_factory=dict)
    rows_read: int | None = None        # input rows of the clause
    rows_relevant: int | None = None    # rows left by the relevance filter (None: no filter)
    # per variable, rows where the row-local part of its DEFINE is TRUE (None: it has none)
    variable_rows: dict[str, int | None] = field(default_factory=dict)
    partition_rows: list[int] = field(default_factory=list)  # rows per PARTITION BY group
    output_rows: int | None = None      # rows the clause returned
    seconds: dict[str, float] = field(default_factory=dict)  # per STAGES entry
    notes: list[str] = field(default_factory=list)  # how the figures were taken

    def record(self, runs: list[Counters | None]) -> None:
        """Set the counters from the runs of the clause's slices (see merge_counters)."""
        self.counters = merge_counters(runs)

    def add_seconds(self, stage: str, seconds: float) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds

    @property
    def partitions(self) -> int:
        return len(self.partition_rows)

    def skew(self) -> tuple[int, float] | None:
        """(largest partition's rows, median partition's rows); None without partitions."""
        if not self.partition_rows:
            return None
        sizes = np.asarray(self.partition_rows)
        return int(sizes.max()), float(np.median(sizes))


@dataclass
class RunStatistics:
    """The clause runs of one statement, in the order they ran."""
    clauses: list[ClauseStatistics] = field(default_factory=list)

    def clause(self, position: int | None) -> ClauseStatistics:
        """A new entry for a clause about to run (filled as it runs)."""
        self.clauses.append(ClauseStatistics(position))
        return self.clauses[-1]

    @property
    def last(self) -> Counters:
        """The counters of the clause that ran last ({} when none ran)."""
        return self.clauses[-1].counters if self.clauses else {}


def merge_counters(runs: list[Counters | None]) -> Counters:
    """The counters of one clause run in several slices as one run's: peaks (``peak_*``)
    and the ``planned`` flag take the maximum, counts add up, texts (the plan chosen in a
    task) are listed once each."""
    merged: Counters = {}
    for counters in runs:
        for key, value in (counters or {}).items():
            if key not in merged:
                merged[key] = value
            elif isinstance(value, str):
                if value not in str(merged[key]).split("; "):
                    merged[key] = f"{merged[key]}; {value}"
            elif key.startswith("peak_") or key == "planned":
                merged[key] = max(merged[key], value)
            else:
                merged[key] = merged[key] + value
    return merged


class GroupSizes:
    """Rows per PARTITION BY group of a sorted stream (groups contiguous), counted batch by
    batch with the workers' own group test (``row_changes``: NULL equals NULL, NaN NaN)."""

    def __init__(self, columns: list[str]):
        self.columns = columns
        self.closed: list[np.ndarray] = []
        self.open = 0
        self.previous: pa.RecordBatch | pa.Table | None = None  # the last row added

    def add(self, batch: pa.RecordBatch | pa.Table) -> None:
        n = batch.num_rows
        if n == 0:
            return
        change = np.zeros(n, dtype=bool)
        change[0] = self.previous is None
        for name in self.columns:
            col = batch.column(name)
            col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
            change |= row_changes(col)[0]
            if not change[0]:
                last = self.previous.column(name)
                last = last.combine_chunks() if isinstance(last, pa.ChunkedArray) else last
                change[0] = bool(row_changes(pa.concat_arrays([last, col.slice(0, 1)]))[0][1])
        self.previous = batch.slice(n - 1)
        starts = np.flatnonzero(change)
        if not len(starts):
            self.open += n
            return
        if self.open + starts[0]:
            self.closed.append(np.asarray([self.open + starts[0]]))
        self.closed.append(np.diff(starts))
        self.open = n - int(starts[-1])

    def sizes(self) -> list[int]:
        """The groups' row counts so far (the open group's included)."""
        parts = self.closed + ([np.asarray([self.open])] if self.open else [])
        return np.concatenate(parts).astype(np.int64).tolist() if parts else []
