"""Workers from bound plans: where the runtime turns what compile produced (the
WorkerConfig / CepConfig on a BoundPlan) into the picklable callable that runs in tasks.

``bind_worker(plan, prepared_schema)`` is what a backend calls in place of
``plan.bind``: the BoundPlan with its worker built (``BoundWorker.worker``). Called on
the driver (the worker is pickled into the tasks, which run it); a task that re-plans
builds its next worker itself (task_planning).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pyarrow as pa

from cepsql.compile.query_plan import BoundPlan, QueryPlan
from cepsql.compile.worker_config import CepConfig, WorkerConfig
from cepsql.runtime.cep_worker import CepWorker
from cepsql.runtime.task_planning import PlanningWorker
from cepsql.runtime.worker import MatchWorker


def worker_for(config) -> Callable:
    """The worker of a configuration: MatchWorker (SQL:2016 mode), CepWorker (CEP mode)
    or PlanningWorker (CEP mode planned inside each task). A config that is a callable
    already is its own worker (a backend test's fake planner plugs one in)."""
    if isinstance(config, CepConfig):
        return PlanningWorker(config) if config.worker_planner is not None else CepWorker(config)
    if isinstance(config, WorkerConfig):
        return MatchWorker(config)
    if callable(config):
        return config
    raise TypeError(f"no worker runs a {type(config).__name__}")


@dataclass
class BoundWorker(BoundPlan):
    """A BoundPlan with the worker built from its config."""
    worker: Callable | None = None


def bind_worker(plan: QueryPlan, prepared_schema: pa.Schema) -> BoundWorker:
    """``plan.bind(prepared_schema)`` and the worker that runs it."""
    bound = plan.bind(prepared_schema)
    return BoundWorker(bound.config, bound.worker_schema, bound.final_projection,
                       worker_for(bound.config))
