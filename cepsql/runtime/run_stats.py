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
import pyarrow.compute as pc

from cepsql.algebra.expressions import ColumnRef, Expr, RowValue, walk
from cepsql.algebra.rowrefs import transform
from cepsql.analyze.relevance import positional_conjuncts, row_local_condition
from cepsql.errors import CepError
from cepsql.exprs.arrow_eval import evaluate_arrow
from cepsql.runtime.worker import row_changes

__all__ = ["ClauseStatistics", "GroupSizes", "PassStatistics", "PositionalCounts",
           "RunStatistics", "STAGES", "merge_counters", "skew"]

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
    # per variable, rows where the conjuncts of its DEFINE that read only the current row
    # and PREV/NEXT of it are all TRUE (None: it has none; PositionalCounts)
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
        return skew(self.partition_rows)


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


def skew(partition_rows: list[int]) -> tuple[int, float] | None:
    """(largest partition's rows, median partition's rows); None without partitions."""
    if not partition_rows:
        return None
    sizes = np.asarray(partition_rows)
    return int(sizes.max()), float(np.median(sizes))


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


@dataclass
class PassStatistics:
    """One shared workload pass (EXPLAIN ANALYZE WORKLOAD): the rows it read from its
    source, per partitioning group the rows kept by the group's relevance filter (None:
    no filter, every row), per clause in the pass (view, rows fed to it, rows it
    returned), and the time: its tasks' per stage (STAGES but input, summed over the
    tasks) and the wall time of its Spark job."""
    source: str
    rows_read: int | None = None
    group_rows: list[int | None] = field(default_factory=list)
    partition_rows: list[int] = field(default_factory=list)  # rows per PARTITION BY group
    clauses: list[tuple[str, int | None, int | None]] = field(default_factory=list)
    task_seconds: dict[str, float] = field(default_factory=dict)
    seconds: float | None = None


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


class PositionalCounts:
    """Per variable, the rows of a sorted stream (PARTITION BY groups contiguous, each in
    ORDER BY order) where every DEFINE conjunct that reads only the current row and
    PREV/NEXT of it (analyze/relevance.py positional_conjuncts) is TRUE, counted batch by
    batch: PREV/NEXT read the rows of the same group at their offsets, NULL past the
    group's edges, as the evaluators give them. Rows whose NEXT rows are not yet fed wait
    for the next batch (``counts`` settles them as the stream's last). ``ansi``: the
    expressions' spark.sql.ansi.enabled (None: the in-process setting)."""

    def __init__(self, spec, columns: list[str], ansi: bool | None = None):
        self.columns = columns  # the PARTITION BY columns
        self.ansi = ansi
        self.reads: dict[tuple[int, Expr], str] = {}  # (offset, value) -> generated column
        self.conditions: dict[str, Expr | None] = {}
        for var, conjuncts in positional_conjuncts(spec).items():
            bound = [transform(c.bound, self._read) for c in conjuncts]
            self.conditions[var] = row_local_condition(bound)  # their AND
        offsets = [offset for offset, _ in self.reads] or [0]
        self.back, self.ahead = max(0, -min(offsets)), max(0, max(offsets))
        self.held: dict[str, int | None] = {v: None if c is None else 0
                                            for v, c in self.conditions.items()}
        self.carry: pa.Table | None = None  # the rows still needed: before + not counted
        self.done = 0  # the carry's leading rows already counted

    @property
    def reads_neighbours(self) -> bool:
        """Whether some conjunct reads PREV/NEXT (then the rows' order matters)."""
        return bool(self.back or self.ahead)

    def add(self, batch: pa.RecordBatch | pa.Table) -> None:
        if batch.num_rows == 0 or not any(c is not None for c in self.conditions.values()):
            return
        table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
        window = table if self.carry is None else pa.concat_tables([self.carry, table])
        start, end = self.done, max(self.done, window.num_rows - self.ahead)
        self._count(window, start, end)
        keep = max(0, end - self.back)
        self.carry, self.done = window.slice(keep), end - keep

    def counts(self) -> dict[str, int | None]:
        """Per variable, the rows counted (None: no such conjunct, or one that cannot be
        evaluated vectorised), the rows still waiting for NEXT rows counted as the last."""
        if self.carry is not None and self.done < self.carry.num_rows:
            self._count(self.carry, self.done, self.carry.num_rows)
            self.done = self.carry.num_rows
        return dict(self.held)

    def _read(self, node: Expr) -> Expr | None:
        """A RowValue becomes a column of the value at its row (generated names)."""
        if not isinstance(node, RowValue):
            return None
        key = (node.ref.physical_offset, node.value)
        name = self.reads.setdefault(key, f"__cep_at{len(self.reads)}")
        return ColumnRef(None, name, node.pos)

    def _count(self, window: pa.Table, start: int, end: int) -> None:
        if end <= start:
            return
        rows = self._shifted(window).slice(start, end - start)
        for var, cond in self.conditions.items():
            if cond is None or self.held[var] is None:
                continue
            if any(isinstance(e, ColumnRef) and e.column not in rows.column_names
                   for e in walk(cond)):  # a value it reads is not vectorisable here
                self.held[var] = None
                continue
            try:
                held = evaluate_arrow(cond, rows, self.ansi)
            except CepError:
                self.held[var] = None
                continue
            if isinstance(held, pa.Scalar):
                self.held[var] += rows.num_rows if held.as_py() is True else 0
            else:
                self.held[var] += int(pc.sum(pc.fill_null(held, False).cast(pa.int64()))
                                      .as_py() or 0)

    def _shifted(self, window: pa.Table) -> pa.Table:
        """The generated columns over window: each value read at its offset within the
        row's group (NULL where that row is outside the window or the group)."""
        n = window.num_rows
        change = np.zeros(n, dtype=bool)
        for name in self.columns:
            col = window.column(name)
            change |= row_changes(col.combine_chunks() if isinstance(col, pa.ChunkedArray)
                                  else col)[0]
        group = np.cumsum(change)
        here = np.arange(n)
        columns, names = [], []
        for (offset, value), name in self.reads.items():
            try:
                values = evaluate_arrow(value, window, self.ansi)
            except CepError:
                continue  # the conditions reading it are not counted
            if isinstance(values, pa.Scalar):
                values = pa.repeat(values, n)
            there = here + offset
            inside = (there >= 0) & (there < n)
            at = np.clip(there, 0, max(n - 1, 0))
            inside &= group[at] == group
            columns.append(values.take(pa.array(at, mask=~inside)))
            names.append(name)
        # (a placeholder column keeps the row count when nothing is read)
        return pa.Table.from_arrays(columns or [pa.nulls(n)], names=names or ["__cep_rows"])

