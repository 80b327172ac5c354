"""Planning stage: cost-based plans of one CEP pattern (Kolchinsky & Schuster, VLDB 2018).

``reduce_pattern`` turns a pattern plus statistics into conjunctive JQPG instances (one per
DNF disjunct), ``cost`` prices order and tree plans (``trees``), ``algorithms`` holds the
nine plan generators and ``choose_plan``; ``plan_pattern`` does all of it for a whole
pattern. ``plannable`` decides which clauses are planned, ``evaluator_choice`` which
evaluator and plan run them, ``options`` the planner's settings. May import ``stats``,
``analyze``, ``parse``/``exprs``, ``algebra`` and ``errors``.
"""
from __future__ import annotations

from cepsql.algebra.pattern import PatternNode
from cepsql.planning.algorithms import ALGORITHMS, ORDER_ALGORITHMS, TREE_ALGORITHMS, Plan, choose_plan
from cepsql.planning.cost import (
    DEFAULT_MODEL,
    CostEvaluator,
    CostModel,
    cost_ord,
    cost_tree,
    latency_ord,
    latency_tree,
)
from cepsql.planning.jqpg import (
    ConjunctiveQuery,
    NegationConstraint,
    PatternStats,
    VarKind,
    dnf_terms,
    reduce_pattern,
)
from cepsql.planning.plans import OrderPlan, TreePlan
from cepsql.planning.trees import TreeNode

__all__ = [
    "ALGORITHMS",
    "ORDER_ALGORITHMS",
    "TREE_ALGORITHMS",
    "ConjunctiveQuery",
    "CostEvaluator",
    "CostModel",
    "NegationConstraint",
    "OrderPlan",
    "PatternStats",
    "Plan",
    "TreeNode",
    "TreePlan",
    "VarKind",
    "choose_plan",
    "cost_ord",
    "cost_tree",
    "dnf_terms",
    "latency_ord",
    "latency_tree",
    "plan_pattern",
    "plan_set_latency",
    "reduce_pattern",
]


def plan_pattern(pattern: PatternNode, stats: PatternStats, algorithm: str | None = None, *,
                 kind: str = "order", model: CostModel = DEFAULT_MODEL,
                 budget_seconds: float = 1.0, seed: int = 0) -> list[Plan]:
    """Plans for every DNF disjunct of ``pattern`` (their union detects it). The plan-time
    budget is shared evenly by the disjuncts."""
    queries = reduce_pattern(pattern, stats)
    share = budget_seconds / max(len(queries), 1)
    return [choose_plan(q, algorithm, kind=kind, model=model, budget_seconds=share, seed=seed)
            for q in queries]


def plan_set_latency(plans: list[Plan], model: CostModel = DEFAULT_MODEL) -> float:
    """Latency of a disjunction: the maximum over its operands (Section 5.1)."""
    out = 0.0
    for p in plans:
        ev = CostEvaluator(p.query, model)
        lat = ev.order_latency(p.order) if isinstance(p, OrderPlan) else ev.tree_latency(p.root)
        out = max(out, lat)
    return out
