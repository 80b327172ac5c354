"""Shared evaluation of a workload's global plan (issue 9, point 4).

``SharedEvaluator`` runs a ``sharing.GlobalPlan`` over the sorted rows of one Spark
partition in one pass (cython_ext/shared_dag.pyx); ``SharedPass`` is the same as a
picklable worker function; ``dag_unsupported`` says which
patterns it cannot run; ``merge_plan`` builds a GlobalPlan by merge sharing of each
pattern's own best plan (identical sub-trees become one node).
"""
from .evaluator import SharedEvaluator, SharedPass
from .merge_plan import merge_plan
from .support import dag_unsupported

__all__ = ["SharedEvaluator", "SharedPass", "dag_unsupported", "merge_plan"]
