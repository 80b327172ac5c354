"""Compatibility module: the in-process backend lives in cepsql.backends.local (this
module's former contents are backends/local/engine.py). ``cepsql.local`` imports keep
working through these re-exports."""
from .backends.local.engine import (  # noqa: F401
    TableLike, _LocalStatement, _sort_for_matching, _table_statistics, execute_plan,
    global_breaks, match_recognize, relevant_rows, run_local, sort_table, to_arrow,
    to_pandas)

__all__ = ["match_recognize", "run_local", "execute_plan", "sort_table", "to_arrow", "to_pandas"]
