"""Compatibility module: the in-process SQL subset moved to cepsql.backends.local.sql;
``cepsql.local_sql`` imports keep working through these re-exports."""
from .backends.local.sql import (  # noqa: F401
    OutsideSubset, Scope, Virtual, output_name, run_sql, sort_indices, sort_table,
    unsupported)
