"""The in-process backend (``cepsql.match_recognize``): the clauses' evaluators on all cores
in threads (threads.py) and the SQL around the clauses on DuckDB where local_sql's subset
ends (duck.py). The entry points still live in cepsql.local (other modules edit it); they
are importable from here too."""
from __future__ import annotations

_ENTRY_POINTS = ("match_recognize", "run_local", "execute_plan", "to_arrow", "to_pandas")


def __getattr__(name: str):
    """cepsql.local's entry points, imported on first use (cepsql.local imports this
    package, so an import at the top would be circular)."""
    if name in _ENTRY_POINTS:
        from ... import local
        return getattr(local, name)
    raise AttributeError(name)
