"""SharedEvaluator: a workload's global plan over the sorted rows of one Spark partition.

Push-style: ``feed(batch)`` / ``finish()`` return (pattern index, batch) pairs, each
batch in that pattern's own worker output layout (``BoundPlan.worker_schema``) with the
rows and match numbers its own CepWorker would give.

Per chunk of whole PARTITION BY groups (a group may span input batches; the last group
of the pending rows stays open until its end is seen or the input ends):
  1. every pattern's condition VM columns are loaded (its own layout; each input
     column converted once, columns.py),
  2. the shared DAG (cython_ext/shared_dag.pyx) forms each shared pattern's candidate
     matches, evaluating every shared node's conditions once,
  3. each shared pattern's own CepMatcher finishes its candidates (late conjuncts,
     NOT checks, SKIP PAST LAST ROW, measures) -- patterns without a root in the plan
     (``GlobalPlan.unshared``) run their own planned or in-order evaluation on the same
     chunk.
Node buffers are pruned by window as rows advance; a chunk holds whole groups, so the
rows held follow the largest group (see the module's limits in the report).
"""
from __future__ import annotations

import time
from typing import Iterable

import numpy as np
import pyarrow as pa

from ...sharing.global_plan import GlobalPlan
from ..plan import BoundPlan
from ..worker import CHUNK_ROWS, _with_zero, raise_vm_error, window_micros
from .columns import load_columns
from .dag_arrays import dag_arrays

Output = list[tuple[int, pa.RecordBatch]]


class SharedEvaluator:
    """Runs ``global_plan`` for patterns whose ``bound_plans[i]`` are their BoundPlans."""

    def __init__(self, global_plan: GlobalPlan, bound_plans: list[BoundPlan],
                 chunk_rows: int = CHUNK_ROWS):
        from ..._ext.shared_dag import SharedDag
        self.plan = global_plan
        self.workers = [bp.worker for bp in bound_plans]
        configs = [w.config for w in self.workers]
        self.shared = sorted({b.pattern for b in global_plan.bindings})
        for p in self.shared:
            if configs[p].plan_nodes is None:
                raise ValueError(f"pattern {p} has a root in the global plan but is not a "
                                 "planned clause (see dag_unsupported)")
        keys = {tuple(c.partition_columns) for c in configs}
        if len(keys) > 1:
            raise ValueError("the patterns of a shared pass must have the same partitioning")
        self.matchers = [w._new_matcher() for w in self.workers]
        self.dag = SharedDag(dag_arrays(global_plan, configs),
                             [m.eval_entry() for m in self.matchers], self.matchers)
        times = {c.window_column for c in configs if c.window_kind == 2}
        times |= {configs[n.owner].window_column for n in global_plan.nodes
                  if n.window_kind == 2}
        if len(times) > 1:
            raise ValueError("time windows of a shared pass must use one ORDER BY column")
        self.time_column = times.pop() if times else None
        self.chunk_rows = chunk_rows
        self.pending: list[pa.RecordBatch] = []
        self.starts: list[np.ndarray] = []
        self.pending_rows = 0
        self.previous = None
        self.threshold = chunk_rows
        self.matches = [0] * len(self.workers)
        self.seconds = {"columns": 0.0, "dag": 0.0, "finish": 0.0}

    def feed(self, batch: pa.RecordBatch) -> Output:
        """Take the next sorted batch; returns the output of the groups it completed."""
        if batch.num_rows == 0:
            return []
        self.starts.append(self.workers[0]._group_starts(batch, self.previous)
                           + self.pending_rows)
        self.previous = batch.slice(batch.num_rows - 1)
        self.pending.append(batch)
        self.pending_rows += batch.num_rows
        if self.pending_rows < self.threshold:
            return []
        starts = _with_zero(np.concatenate(self.starts))
        cut = int(starts[-1])   # the last group may continue in the next batch
        if cut == 0:
            self.threshold = 2 * self.pending_rows
            return []
        table = pa.Table.from_batches(self.pending)
        out = self._process(table.slice(0, cut), starts[:-1])
        rest = table.slice(cut)
        self.pending = rest.to_batches()
        self.pending_rows = rest.num_rows
        self.starts = [np.zeros(1, dtype=np.int64)]
        self.threshold = self.chunk_rows
        return out

    def finish(self) -> Output:
        """The end of the input: the open group's output."""
        if not self.pending_rows:
            return []
        table = pa.Table.from_batches(self.pending)
        starts = _with_zero(np.concatenate(self.starts))
        self.pending, self.starts, self.pending_rows = [], [], 0
        return self._process(table, starts)

    def run(self, batches: Iterable[pa.RecordBatch]) -> Output:
        """feed every batch, then finish."""
        out: Output = []
        for batch in batches:
            out += self.feed(batch)
        return out + self.finish()

    @property
    def stats(self) -> dict:
        """Instances formed per node, candidates handed to the roots, matches output per
        pattern, seconds spent loading columns / in the DAG / in the patterns' matchers."""
        return {"node_instances": self.dag.node_instances(),
                "candidates": int(self.dag.candidates),
                "matches": list(self.matches),
                "seconds": {k: round(v, 4) for k, v in self.seconds.items()}}

    def _process(self, table: pa.Table, starts: np.ndarray) -> Output:
        bounds = np.append(np.unique(starts), table.num_rows).astype(np.int64)
        wts = wnulls = None
        if self.time_column is not None:
            wts, wnulls = window_micros(table.column(self.time_column))
        started = time.perf_counter()
        loaded = load_columns(self.workers, table)
        for matcher, (values, nulls, consts, exact) in zip(self.matchers, loaded):
            matcher.set_consts(consts)
            matcher.set_exact_columns(exact)
            matcher.attach_rows(values, nulls)
        loaded_at = time.perf_counter()
        candidates = self.dag.run(bounds, wts, wnulls)
        dag_at = time.perf_counter()
        shared = set(self.shared)
        out: Output = []
        for p, (worker, matcher) in enumerate(zip(self.workers, self.matchers)):
            values, nulls = loaded[p][:2]
            if p in shared:
                matcher.set_candidates(*candidates[p])
            own_time = worker.config.window_kind == 2
            try:
                rows, numbers, leaves, aggregates = matcher.run(
                    values, nulls, bounds, wts if own_time else None,
                    wnulls if own_time else None)
            finally:
                matcher.set_candidates(None)
            raise_vm_error(matcher.vm_error())
            if len(rows) == 0:
                continue
            self.matches[p] += 1 + int(np.count_nonzero(np.diff(numbers)))
            for batch in worker._output(table, rows, numbers, leaves, aggregates,
                                        np.zeros(0, dtype=np.int64)):
                out.append((p, batch))
        self.seconds["columns"] += loaded_at - started
        self.seconds["dag"] += dag_at - loaded_at
        self.seconds["finish"] += time.perf_counter() - dag_at
        return out
