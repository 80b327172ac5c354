"""SharedEvaluator: a workload's global plan over the sorted rows of one Spark partition.
Runs in tasks (built inside the task from the pickled bound workers and global plan).

Push-style: ``feed(batch)`` / ``finish()`` return (pattern index, batch) pairs, each
batch in that pattern's own worker output layout (``BoundPlan.worker_schema``) with the
rows and match numbers its own CepWorker would give.

Per chunk of rows:
  1. every pattern's condition VM columns are loaded (its own layout; each distinct
     input column converted once, columns.py),
  2. the shared DAG (cython_ext/shared_dag.pyx) forms each shared pattern's candidate
     matches, evaluating every shared node's conditions once,
  3. each shared pattern's own CepMatcher finishes its candidates (late conjuncts,
     NOT checks, SKIP PAST LAST ROW, measures) -- patterns without a root in the plan
     (``GlobalPlan.unshared``) run their own planned or in-order evaluation on the same
     chunk; SQL:2016-mode patterns run their own MatchWorker on it.

Memory: when every pattern has a WITHIN window (and its own worker could stream, see
CepWorker.streamable), a chunk ends inside the open PARTITION BY group and only the
rows still needed are carried: the DAG's (the oldest live instance, by node window)
and every matcher's (its ``keep``). Each matcher sees the chunk from its own first
kept row on, so rows, match numbers and state are exactly those of its own streaming
run. Otherwise (a pattern without WITHIN, or in SQL:2016 mode) chunks hold whole
groups (the last group stays pending until it ends).
"""
from __future__ import annotations

import time
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa

from cepsql.errors import error_site
from cepsql.sharing.global_plan import GlobalPlan
from cepsql.runtime.adaptive import NO_BOUND
from cepsql.runtime.cep_worker import CepWorker, break_flags, state_limit_error
from cepsql.runtime.pending import PendingRows
from cepsql.runtime.worker import CHUNK_ROWS, raise_vm_error, window_micros
from cepsql.runtime.shared_columns import ColumnLoader, pointer_ready
from cepsql.runtime.workers import BoundWorker
from cepsql.compile.dag_arrays import dag_arrays, leaf_prefilters

Output = list[tuple[int, pa.RecordBatch]]


def _raise_vm_error(worker, matcher) -> None:
    """The pattern's condition VM error, if any, tagged with its worker's error_site (the
    pass runs many patterns: the driver locates the error in that pattern's SQL)."""
    with error_site(getattr(worker.config, "error_site", None)):
        raise_vm_error(matcher.vm_error())


class SharedPass:
    """Picklable: the shared pass as a Spark worker function (mapInArrow /
    applyInArrow build the evaluator inside the task; its Cython state is not shipped)."""

    def __init__(self, global_plan: GlobalPlan, bound_plans: list[BoundWorker],
                 inputs: list[list[tuple[str, str]]] | None = None):
        self.global_plan = global_plan
        self.bound_plans = bound_plans
        self.inputs = inputs

    def __call__(self, batches: Iterable[pa.RecordBatch]
                 ) -> Iterator[tuple[int, pa.RecordBatch]]:
        evaluator = SharedEvaluator(self.global_plan, self.bound_plans, inputs=self.inputs)
        for batch in batches:
            yield from evaluator.feed(batch)
        yield from evaluator.finish()


class SharedEvaluator:
    """Runs ``global_plan`` for patterns whose ``bound_plans[i]`` are their bound
workers (runtime.workers.bind_worker)."""

    def __init__(self, global_plan: GlobalPlan, bound_plans: list[BoundWorker],
                 chunk_rows: int = CHUNK_ROWS,
                 inputs: list[list[tuple[str, str]]] | None = None):
        """``inputs[i]``: (input column, pattern i's own name) for every column pattern
        i's worker reads, when the patterns name their columns alike (the workload's
        shared pass renames each plan's prepared columns); None: the input batches carry
        every pattern's columns under its own names."""
        from cepsql._ext.shared_dag import SharedDag
        self.plan = global_plan
        self.workers = [bp.worker for bp in bound_plans]
        self.inputs = inputs
        self.shared_name = [dict((own, shared) for shared, own in cols) for cols in inputs] \
            if inputs is not None else None
        # SQL:2016-mode patterns (MatchWorker): unshared, run by their own worker on
        # every chunk of whole PARTITION BY groups
        self.generic = {i for i, w in enumerate(self.workers) if not isinstance(w, CepWorker)}
        configs = [w.config for w in self.workers]
        self.shared = sorted({b.pattern for b in global_plan.bindings})
        for p in self.shared:
            if p in self.generic or configs[p].plan_nodes is None:
                raise ValueError(f"pattern {p} has a root in the global plan but is not a "
                                 "planned clause (see dag_unsupported)")
        if any(n.owner in self.generic for n in global_plan.nodes):
            raise ValueError("a DAG node's owner must be a planned CEP pattern")
        keys = {tuple(self._input_name(i, n) for n in c.partition_columns)
                for i, c in enumerate(configs)}
        if len(keys) > 1:
            raise ValueError("the patterns of a shared pass must have the same partitioning")
        self.matchers = [None if i in self.generic else w._new_matcher()
                         for i, w in enumerate(self.workers)]
        # patterns outputting unmatched rows (ALL ROWS PER MATCH WITH UNMATCHED ROWS):
        # their run outputs rows even without a match
        self.unmatched = [i not in self.generic and c.all_rows and c.with_unmatched
                          for i, c in enumerate(configs)]
        # matchers reading their condition columns through pointers into one shared
        # column set (no per-pattern copy of the chunk's columns)
        self.pointers = [i not in self.generic and pointer_ready(w)
                         for i, w in enumerate(self.workers)]
        cep = [i for i in range(len(self.workers)) if i not in self.generic]
        self.loader = ColumnLoader(
            [self.workers[i] for i in cep],
            None if self.shared_name is None else [self.shared_name[i] for i in cep],
            [self.pointers[i] for i in cep])
        arrays = dag_arrays(global_plan, configs)
        # leaf tests that are plain condition columns: computed per chunk with numpy
        arrays["nd_pre"], self.prefilters = leaf_prefilters(global_plan, configs, arrays)
        self.dag = SharedDag(arrays, self.matchers)
        self.dag.max_state = max((m.max_state for m in self.matchers if m is not None),
                                 default=0)
        configs = [c if i not in self.generic else None for i, c in enumerate(configs)]
        times = {self._input_name(i, c.window_column) for i, c in enumerate(configs)
                 if c is not None and c.window_kind == 2}
        times |= {self._input_name(n.owner, configs[n.owner].window_column)
                  for n in global_plan.nodes if n.window_kind == 2}
        if len(times) > 1:
            raise ValueError("time windows of a shared pass must use one ORDER BY column")
        self.time_column = times.pop() if times else None
        # one lookahead for all (the DAG stops where every matcher stops); a deeper
        # lookback only keeps more rows
        cep = [m for m in self.matchers if m is not None]
        self.lookahead = max([m.lookahead for m in cep], default=0)
        self.lookback = max([m.lookback for m in cep], default=0)
        for m in cep:
            m.lookahead, m.lookback = self.lookahead, self.lookback
        self.streaming = not self.generic and all(w.streamable() for w in self.workers) \
            and all(n.window_kind for n in global_plan.nodes)
        self.chunk_rows = chunk_rows
        self.pending = PendingRows(self.workers[0]._group_starts, chunk_rows)
        self.carried = False               # the pending rows start inside an open group
        self.offsets = [0] * len(self.workers)   # per matcher: its first row in pending
        self.matches = [0] * len(self.workers)
        self.seconds = {"columns": 0.0, "dag": 0.0, "finish": 0.0}
        self.peak_rows = 0
        self.runs_skipped = 0   # pattern runs left out: no candidate in a closed chunk

    def _input_name(self, p: int, own: str) -> str:
        """The input column holding pattern p's column ``own``."""
        return own if self.shared_name is None else self.shared_name[p].get(own, own)

    def _view(self, p: int, data):
        """The input (a batch or table) as pattern p's worker names it (zero-copy)."""
        if self.inputs is None:
            return data
        cols = self.inputs[p]
        make = pa.Table.from_arrays if isinstance(data, pa.Table) else \
            pa.RecordBatch.from_arrays
        return make([data.column(s) for s, _ in cols], names=[own for _, own in cols])

    def feed(self, batch: pa.RecordBatch) -> Output:
        """Take the next sorted batch; returns the output it completed."""
        out: Output = []
        for i in range(0, batch.num_rows, self.chunk_rows):
            out += self._feed(batch.slice(i, self.chunk_rows))
        return out

    def _feed(self, batch: pa.RecordBatch) -> Output:
        if batch.num_rows == 0:
            return []
        self.pending.add(batch, key_view=self._view(0, batch))
        if not self.pending.ready:
            return []
        return self._run_pending()

    def _run_pending(self) -> Output:
        starts = self.pending.group_starts()
        if self.streaming:
            table, _ = self.pending.table()
            out = self._process(table, starts, open_last=True)
            keep = min(self.dag.keep, min(self.offsets, default=self.dag.keep))
            self.dag.rebase(keep)
            self.offsets = [o - keep for o in self.offsets]
            self.carried = True
            self.pending.keep(table.slice(keep))
        else:
            cut = int(starts[-1])   # the last group may continue in the next batch
            if cut == 0:
                self.pending.wait_for_more()
                return []
            table, _ = self.pending.table()
            out = self._process(table.slice(0, cut), starts[:-1])
            self.pending.keep(table.slice(cut), group_open=False)
        return out

    def finish(self) -> Output:
        """The end of the input: the open group's output."""
        if not self.pending.rows:
            return []
        table, starts = self.pending.table()
        self.pending.clear()
        return self._process(table, starts)

    # --- plan switches (runtime/shared_adaptive.py) --------------------------------------
    def cut(self) -> Output:
        """Run the pending rows now (as a full chunk would be run): afterwards only the
        open group's carried rows are pending, and the next row fed is the border."""
        if not self.pending.rows or not self.streaming:
            return []
        return self._run_pending()

    def keep_first_before_border(self) -> None:
        """After ``cut``: every pattern outputs only the open group's matches whose first
        row is before the border (the next plan reports the others)."""
        for p, m in enumerate(self.matchers):
            if m is not None:
                border = self.pending.rows - (self.offsets[p] if self.carried else 0)
                m.restrict_first(-NO_BOUND, border, 0)

    def keep_first_from(self, row: int) -> None:
        """Before the first feed: in the first group fed, output only the matches whose
        first row is at or after ``row`` (the rows before are PREV context), held until
        ``release_numbers``."""
        for m in self.matchers:
            if m is not None:
                m.restrict_first(row, NO_BOUND, 1)

    def match_numbers(self) -> list[int]:
        """Per pattern, the matches numbered in its last group (0 for patterns run by
        their own worker)."""
        return [0 if m is None else int(m.match_no) for m in self.matchers]

    def release_numbers(self, bases: list[int]) -> None:
        """Number the held first group's matches after ``bases[p]`` and output them."""
        for m, base in zip(self.matchers, bases):
            if m is not None:
                m.release_numbers(base)

    def run(self, batches: Iterable[pa.RecordBatch]) -> Output:
        """feed every batch, then finish."""
        out: Output = []
        for batch in batches:
            out += self.feed(batch)
        return out + self.finish()

    @property
    def stats(self) -> dict:
        """Instances formed per node, candidates handed to the roots, matches output per
        pattern, the most rows one chunk held, the patterns reading the shared column
        set through pointers, the leaf tests computed per chunk, the patterns' runs left
        out (no candidate to finish in a chunk of whole groups), CPU seconds (of this
        thread: wall time on a shared machine is noise) spent loading columns / in the
        DAG / in the patterns' matchers."""
        return {"node_instances": self.dag.node_instances(),
                "candidates": int(self.dag.candidates),
                "join_attempts": int(self.dag.join_attempts),
                "scans_skipped": int(self.dag.scans_skipped),
                "matches": list(self.matches),
                "peak_rows": self.peak_rows,
                "column_pointers": sum(self.pointers),
                "leaf_prefilters": len(self.prefilters),
                "runs_skipped": self.runs_skipped,
                "seconds": {k: round(v, 4) for k, v in self.seconds.items()}}

    def _prefilter(self, loaded: dict, n: int) -> np.ndarray | None:
        """The chunk's rows accepted by each leaf test of leaf_prefilters: every one
        of its columns true (non-NULL, non-zero), as the condition VM reads them."""
        if not self.prefilters:
            return None
        masks = np.empty((len(self.prefilters), n), dtype=np.bool_)
        scratch = np.empty(n, dtype=np.bool_)
        for k, cols in enumerate(self.prefilters):
            for j, (p, col) in enumerate(cols):
                values, nulls = loaded[p][0][col], loaded[p][1][col]
                if j == 0:
                    np.not_equal(values, 0.0, out=masks[k])
                else:
                    masks[k] &= np.not_equal(values, 0.0, out=scratch)
                if nulls is not self.loader.no_nulls:   # a column with NULLs
                    masks[k] &= np.equal(nulls, 0, out=scratch)
        return masks.view(np.uint8)

    def _process(self, table: pa.Table, starts: np.ndarray, open_last: bool = False
                 ) -> Output:
        started = time.thread_time()
        n = table.num_rows
        self.peak_rows = max(self.peak_rows, n)
        starts = np.unique(starts)
        bounds = np.append(starts, n).astype(np.int64)
        wts = wnulls = None
        if self.time_column is not None:
            wts, wnulls = window_micros(table.column(self.time_column))
        cep = [p for p in range(len(self.workers)) if p not in self.generic]
        loaded = dict(zip(cep, self.loader.load(table)))
        for p, (values, nulls, consts, exact) in loaded.items():
            matcher = self.matchers[p]
            matcher.set_consts(consts)
            if self.pointers[p]:
                matcher.use_column_pointers(values, nulls, 0, exact)
                values, nulls = _no_matrix(n)
                exact = _NO_EXACT
            matcher.set_exact_columns(exact)
            matcher.attach_rows(values, nulls)
        prefilter = self._prefilter(loaded, n)
        loaded_at = time.thread_time()
        try:
            candidates = self.dag.run(bounds, wts, wnulls, int(open_last), int(self.carried),
                                      self.lookahead, self.lookback, prefilter)
        except MemoryError:
            raise state_limit_error(self.dag.max_state, bool(self.dag.limit_hit)) from None
        dag_at = time.thread_time()
        shared = set(self.shared)
        out: Output = []
        gathers = _Gathers(table)
        deferred = []   # (position in out, pattern, worker, output columns to fill)
        closed = not open_last and not self.carried   # whole groups, no carried state
        for p, (worker, matcher) in enumerate(zip(self.workers, self.matchers)):
            if p in self.generic:   # whole groups: its own worker, fresh state
                out += [(p, b) for b in worker(iter(self._view(p, table).to_batches()))
                        if b.num_rows]
                continue
            if closed and p in shared and len(candidates[p][0]) == 0 \
                    and not self.unmatched[p]:
                # nothing to finish and nothing carried: its run would output nothing
                _raise_vm_error(worker, matcher)
                self.runs_skipped += 1
                continue
            values, nulls, _, exact = loaded[p]
            off = self.offsets[p] if self.carried else 0
            if self.pointers[p]:
                if off:   # else the pointers set before the DAG run stand
                    matcher.use_column_pointers(values, nulls, off, exact)
                values, nulls = _no_matrix(n - off)
            elif off:
                values, nulls = values[:, off:], nulls[:, off:]
                matcher.set_exact_columns(exact[:, off:])
            own_bounds = np.append(np.unique(np.maximum(starts - off, 0)), n - off) \
                if off else bounds
            if p in shared:
                cand, rows, comps = candidates[p]
                if off:
                    cand = cand.copy()
                    cand[:, 0] -= off
                    rows = rows - off
                matcher.set_candidates(cand, rows, comps)
            own_time = worker.config.window_kind == 2
            breaks = None
            if worker.config.breaks_column is not None:   # STRICT_CONTIGUITY, unshared
                breaks = break_flags(table.column(self._input_name(
                    p, worker.config.breaks_column)).slice(off))
            try:
                rows, numbers, leaves, aggregates = matcher.run(
                    values, nulls, own_bounds,
                    wts[off:] if own_time else None, wnulls[off:] if own_time else None,
                    int(open_last), int(self.carried), breaks=breaks)
            except MemoryError:
                raise state_limit_error(matcher.max_state, bool(matcher.limit_hit)) from None
            finally:
                matcher.set_candidates(None)
            _raise_vm_error(worker, matcher)
            if open_last:
                self.offsets[p] = off + int(matcher.keep)
            if len(rows) == 0:
                continue
            self.matches[p] += _count_matches(own_bounds, rows, numbers,
                                              worker.config.all_rows)
            names = None if self.shared_name is None else self.shared_name[p]
            own_table = self._view(p, table.slice(off) if off else table) \
                if worker.config.gathered else _ColumnView(table, names, off)
            deferred.append((len(out), p, worker, worker._output_columns(
                own_table, rows, numbers, leaves, aggregates, matcher.list_rows(),
                take=gathers.taker(names, off))))
            out.append(None)   # its batches, once the gathers are made
        if deferred:
            gathers.resolve()
            for at, p, worker, columns in deferred:
                out[at] = [(p, b) for b in worker._output_batches(gathers.fill(columns))]
            out = [x for part in out for x in (part if isinstance(part, list) else [part])]
        self.seconds["columns"] += loaded_at - started
        self.seconds["dag"] += dag_at - loaded_at
        self.seconds["finish"] += time.thread_time() - dag_at
        return out


_NO_EXACT = np.zeros((0, 0, 2), dtype=np.int64)


class _Gather:
    """A placeholder output column: request ``index`` of input column ``source``."""
    __slots__ = ("source", "index")

    def __init__(self, source: str, index: int):
        self.source, self.index = source, index


class _Gathers:
    """The row gathers (passthrough and MEASURES row columns) of every pattern's output
    in a chunk, made with one Arrow take per input column instead of one per pattern
    and column: each pattern records its gathers (taker), resolve() takes each input
    column's rows once, and every pattern gets its slice (zero-copy)."""

    def __init__(self, table: pa.Table):
        self.table = table
        self.requests: dict[str, list[tuple[np.ndarray, np.ndarray | None]]] = {}
        self.taken: dict[tuple[str, int], pa.Array] = {}

    def taker(self, names: dict[str, str] | None, off: int):
        """The take() of a pattern naming its columns by ``names`` (own -> input; None:
        the input's names) whose rows start at input row ``off``."""
        def take(name: str, indices: np.ndarray, mask: np.ndarray | None = None) -> _Gather:
            source = name if names is None else names.get(name, name)
            requests = self.requests.setdefault(source, [])
            requests.append((indices + off if off else indices, mask))
            return _Gather(source, len(requests) - 1)
        return take

    def resolve(self) -> None:
        for source, requests in self.requests.items():
            indices = np.concatenate([i for i, _ in requests])
            mask = None
            if any(m is not None for _, m in requests):
                mask = np.concatenate([np.zeros(len(i), dtype=bool) if m is None else m
                                       for i, m in requests])
            taken = self.table.column(source).take(pa.array(indices, mask=mask))
            if isinstance(taken, pa.ChunkedArray):
                taken = taken.chunk(0) if taken.num_chunks == 1 else taken.combine_chunks()
            at = 0
            for k, (i, _) in enumerate(requests):
                self.taken[source, k] = taken.slice(at, len(i))
                at += len(i)

    def fill(self, columns: list) -> list:
        """The columns with every placeholder replaced by its rows."""
        return [self.taken[c.source, c.index] if isinstance(c, _Gather) else c
                for c in columns]


class _ColumnView:
    """A pattern's input rows (from ``off``) as its worker names the columns, for the
    output's column reads (MIN/MAX and LIST measures), without building a table."""

    def __init__(self, table: pa.Table, names: dict[str, str] | None, off: int):
        self.table, self.names, self.off = table, names, off

    def column(self, own: str):
        col = self.table.column(own if self.names is None else self.names.get(own, own))
        return col.slice(self.off) if self.off else col


def _no_matrix(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The (0, n) matrices run() / attach_rows() take from a matcher in column
    pointer mode (they give the row count only)."""
    return np.empty((0, n), dtype=np.float64), np.empty((0, n), dtype=np.uint8)


def _count_matches(bounds: np.ndarray, rows: np.ndarray, numbers: np.ndarray,
                   all_rows: bool) -> int:
    """Distinct (PARTITION BY group, match number) pairs among the output rows (one row
    per match unless ALL ROWS PER MATCH; unmatched rows have no number)."""
    numbered = numbers >= 0
    if not all_rows:
        return int(np.count_nonzero(numbered))
    group = np.searchsorted(bounds, rows[numbered], side="right").astype(np.int64)
    keys = group * (int(numbers.max(initial=0)) + 1) + numbers[numbered]
    return len(np.unique(keys))
