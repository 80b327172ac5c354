"""Planning inside a Spark task (stats/worker.py): the task reads its first rows,
estimates the statistics from them, chooses plans with the configured algorithm and
runs the planned evaluator with those plans over all of its rows.

Exact whatever the sample says: under SKIP_TILL_ANY_MATCH every plan yields the same
matches (the planned evaluator's contract), so tasks planning differently agree.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import pyarrow as pa

from ..algebra.spec import MatchRecognizeSpec
from .planner_options import PlannerOptions


@dataclass
class WorkerPlanner:
    """What a task needs to plan a clause (picklable; built by cep_plan.plan_cep)."""
    spec: MatchRecognizeSpec
    terms: list
    options: PlannerOptions
    labels: list[str]
    seq_start: list[int]
    conj_label: list[int]
    conj_mask: list[int]
    conj_late: list[int]
    sample_rows: int

    def choose(self, sample: pa.Table):
        """The plan choice for statistics estimated from sample (uniform estimates if
        estimation fails: statistics never fail a query)."""
        from ..stats import estimate_from_table
        from .cep_planner import choose_cep_plan

        def statistics(spec):
            return estimate_from_table(spec, sample, max_rows=max(sample.num_rows, 1))
        return choose_cep_plan(self.spec, self.terms, self.options, statistics)

    def plan_arrays(self, choice) -> dict:
        """The evaluator's plan arrays (CepConfig fields) for a choice."""
        from .cep_plan import _negation_nodes, _tree_arrays
        arrays = _tree_arrays(choice, self.terms, self.labels, self.seq_start,
                              self.conj_label, self.conj_mask, self.conj_late)
        if arrays:
            arrays.update(_negation_nodes(choice, self.terms, self.labels, self.conj_label,
                                          self.conj_mask, self.conj_late))
        return arrays


class PlanningPush:
    """Push state of a CepWorker that plans from its stream's first rows: they are held
    until the sample is complete (or the stream ends), then the planned worker's push
    state takes them and every later batch."""

    def __init__(self, config):
        self.config = config
        self.head: list[pa.RecordBatch] = []
        self.rows = 0
        self.inner = None
        self.choice = None

    def feed(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        if self.inner is not None:
            return self.inner.feed(batch)
        self.head.append(batch)
        self.rows += batch.num_rows
        return self._start() if self.rows >= self.config.worker_planner.sample_rows else []

    def finish(self) -> list[pa.RecordBatch]:
        from .cep_worker import LAST_STATS
        out = self._start() if self.inner is None else []
        out += self.inner.finish()
        if self.choice is not None:
            planner: WorkerPlanner = self.config.worker_planner
            LAST_STATS["worker_planned"] = 1
            LAST_STATS["worker_sample_rows"] = int(min(self.rows, planner.sample_rows))
            LAST_STATS["worker_plan"] = _plan_digest(self.choice)
        return out

    def _start(self) -> list[pa.RecordBatch]:
        from .cep_worker import CepWorker
        planner: WorkerPlanner = self.config.worker_planner
        config = replace(self.config, worker_planner=None)
        if self.rows:
            sample = pa.Table.from_batches(self.head).slice(0, planner.sample_rows)
            self.choice = planner.choose(sample)
            config = replace(config, **planner.plan_arrays(self.choice))
        self.inner = CepWorker(config)._new_push()
        out: list[pa.RecordBatch] = []
        for batch in self.head:
            out += self.inner.feed(batch)
        self.head = []
        return out


def _plan_digest(choice) -> str:
    """A short text of the chosen plans (tests and benchmarks compare them)."""
    return " | ".join(" ".join(p.describe().split()[:10]) for p in choice.plans)
