"""Sharing stage: workloads of pattern views planned together (SIGMOD 2019, MOTTO).

planning (one pattern) -> **sharing** (many patterns over one source) -> runtime.
``global_plan`` is the contract between this stage and the runtime's shared evaluator.
"""

# lazy: the runtime imports ``cepsql.sharing.global_plan`` (the contract) while the
# planner modules import the runtime, so the package itself imports nothing eagerly
_EXPORTS = {
    "Binding": "global_plan", "DagNode": "global_plan", "GlobalPlan": "global_plan",
    "WorkloadPattern": "patterns", "workload_pattern": "patterns",
    "options_from_conf": "planner", "plan_workload": "planner",
    "patterns_from_plans": "planner",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
