"""Sharing stage: workloads of pattern views planned together (SIGMOD 2019, MOTTO).

planning (one pattern) -> **sharing** (many patterns over one source) -> compile/runtime.
Its one job: from the views' specs and statistics, the ``GlobalPlan`` (a DAG of
evaluator nodes shared by several patterns) that the runtime's shared evaluator runs;
``global_plan`` is that contract. May import ``planning``, ``stats``, ``analyze``,
``parse``/``exprs``, ``algebra`` and ``errors`` -- never compile, runtime or a backend.
"""
from cepsql.sharing.global_plan import Binding, DagNode, GlobalPlan
from cepsql.sharing.patterns import WorkloadPattern, workload_pattern
from cepsql.sharing.planner import options_from_conf, patterns_from_plans, plan_workload

__all__ = ["Binding", "DagNode", "GlobalPlan", "WorkloadPattern", "options_from_conf",
           "patterns_from_plans", "plan_workload", "workload_pattern"]
