"""Planning inside a Spark task (stats/worker.py). Runs in tasks: the task reads its first
rows, estimates the statistics from them, chooses plans with the configured algorithm and
runs the planned evaluator with those plans over all of its rows.

Exact whatever the sample says: under SKIP_TILL_ANY_MATCH every plan yields the same
matches (the planned evaluator's contract), so tasks planning differently agree.
"""
from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from cepsql.compile.cep_plan_arrays import plan_arrays
from cepsql.compile.worker_config import TaskPlanning
from cepsql.planning.evaluator_choice import choose_cep_plan
from cepsql.runtime.adaptive import AdaptiveWorker, adaptable, plan_digest
from cepsql.runtime.cep_worker import CepWorker
from cepsql.stats import estimate_from_table


class WorkerPlanner:
    """Plans a clause inside a task from what the driver compiled for it
    (``TaskPlanning``): statistics from rows, a plan choice, the evaluator's arrays."""

    def __init__(self, planning: TaskPlanning):
        self.planning = planning

    @property
    def sample_rows(self) -> int:
        return self.planning.sample_rows

    @property
    def adaptive(self):
        """adaptive.AdaptiveSettings when the plan may change as rows drift, else None."""
        return self.planning.adaptive

    def estimate(self, sample: pa.Table, max_pairs: int | None = None):
        """The statistics of the clause over sample (at most max_pairs row pairs per
        selectivity; the estimator's default when None)."""
        extra = {} if max_pairs is None else {"max_pairs": max_pairs}
        return estimate_from_table(self.planning.spec, sample,
                                   max_rows=max(sample.num_rows, 1), **extra)

    def choose(self, sample: pa.Table):
        """The plan choice for statistics estimated from sample (uniform estimates if
        estimation fails: statistics never fail a query)."""
        return self.choose_with(None, sample)

    def choose_with(self, statistics, sample: pa.Table | None = None):
        """The plan choice for given statistics (or those estimated from sample)."""
        def source(spec):
            return statistics if statistics is not None else self.estimate(sample)
        p = self.planning
        return choose_cep_plan(p.spec, p.terms, p.options, source, alternatives=False)

    def plan_arrays(self, choice) -> dict:
        """The evaluator's plan arrays (CepConfig fields) for a choice."""
        p = self.planning
        return plan_arrays(choice, p.terms, p.labels, p.seq_start, p.conj_label,
                           p.conj_mask, p.conj_late)


class PlanningWorker(CepWorker):
    """A CepWorker whose streams plan from their first rows (config.worker_planner)."""

    def _new_push(self) -> "PlanningPush":
        return PlanningPush(self)


class PlanningPush:
    """Push state of a CepWorker that plans from its stream's first rows: they are held
    until the sample is complete (or the stream ends), then the planned worker's push
    state takes them and every later batch."""

    def __init__(self, owner: CepWorker):
        self.owner = owner           # the PlanningWorker whose last_stats this run sets
        self.config = owner.config
        self.planner = WorkerPlanner(owner.config.worker_planner)
        self.runner = None           # the planned worker the rows go through
        self.head: list[pa.RecordBatch] = []
        self.rows = 0
        self.inner = None
        self.choice = None
        self.worker = None

    def feed(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        if self.inner is not None:
            return self.inner.feed(batch)
        self.head.append(batch)
        self.rows += batch.num_rows
        return self._start() if self.rows >= self.planner.sample_rows else []

    def finish(self) -> list[pa.RecordBatch]:
        out = self._start() if self.inner is None else []
        out += self.inner.finish()
        stats = dict(self.runner.last_stats or {})
        if self.choice is not None:
            stats.update({"worker_planned": 1,
                          "worker_sample_rows": int(min(self.rows, self.planner.sample_rows)),
                          "worker_plan": (self.worker.digest if self.worker is not None
                                          else plan_digest(self.choice))})
        self.owner.last_stats = stats
        return out

    def _start(self) -> list[pa.RecordBatch]:
        """Plan from the held rows (adaptive re-planning afterwards where the clause
        allows it: runtime/adaptive.py), then run them through the planned worker."""
        planner = self.planner
        config = replace(self.config, worker_planner=None)
        worker = None
        if self.rows:
            sample = pa.Table.from_batches(self.head).slice(0, planner.sample_rows)
            statistics = planner.estimate(sample) if planner.adaptive is not None else None
            self.choice = planner.choose_with(statistics, sample)
            config = replace(config, **planner.plan_arrays(self.choice))
            if planner.adaptive is not None and adaptable(config):
                worker = AdaptiveWorker(config, planner, statistics, self.choice,
                                        planner.adaptive)
        self.worker = worker
        self.runner = worker or CepWorker(config)
        self.runner.cancel = self.owner.cancel  # threads.py: the slice's cancel flag
        self.inner = self.runner._new_push()
        out: list[pa.RecordBatch] = []
        for batch in self.head:
            out += self.inner.feed(batch)
        self.head = []
        return out
