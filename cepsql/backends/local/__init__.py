"""The in-process backend (``cepsql.match_recognize``, ``cepsql.workload``): engine.py runs
a statement (clauses through the QueryPlan, the SQL around them through sql.py's subset
or DuckDB, duck.py), plan_cache.py keeps clause plans across calls, threads.py runs the
partitions' evaluators on all cores, sequence.py is the fast path for sequence patterns,
workload.py runs several views in one shared pass.

May import every stage below the backends (DuckDB only where a statement leaves sql.py's
subset); never ``backends.spark`` or ``backends.streaming``."""
from __future__ import annotations

# (``workload`` is the submodule's name here: cepsql.workload is the function)
_ENTRY_POINTS = {"match_recognize": "engine", "run_local": "engine", "execute_plan": "engine",
                 "to_arrow": "engine", "to_pandas": "engine"}


def __getattr__(name: str):
    """The entry points, imported on first use (so importing one submodule does not load
    them all)."""
    if name in _ENTRY_POINTS:
        from importlib import import_module
        return getattr(import_module(f"{__name__}.{_ENTRY_POINTS[name]}"), name)
    raise AttributeError(name)
