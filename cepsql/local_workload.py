"""Compatibility module: in-process workloads moved to cepsql.backends.local.workload;
``cepsql.local_workload`` imports keep working through these re-exports."""
from .backends.local.workload import (  # noqa: F401
    LocalWorkload, parse_views, run_shared_pass, views_alone, workload)

__all__ = ["workload", "LocalWorkload", "run_shared_pass", "parse_views"]
