"""A global plan priced on other statistics, and patterns given fresh statistics.

Adaptive re-planning of a workload (runtime/shared_adaptive.py) asks whether the plan it
runs, priced on the statistics of the newest rows, costs enough more than the plan the
planner now chooses to pay for a switch. The planner prices local plans
(``dag.DagCost``); a ``GlobalPlan`` keeps only its nodes, so its local plans are read
back from it: each binding's root subtree is a tree over the disjunct's components (the
slots name them), and a join node that applies none of the SEQ orders between its two
sides is order-relaxed.
"""
from __future__ import annotations

from dataclasses import replace

from cepsql.planning.evaluator_choice import planner_stats
from cepsql.planning.trees import TreeNode, join, leaf
from cepsql.sharing.dag import DagCost, LocalPlan, WorkloadContext, sharing_model
from cepsql.sharing.global_plan import GlobalPlan
from cepsql.sharing.patterns import WorkloadPattern

__all__ = ["global_plan_cost", "with_statistics"]

#: algorithms whose nodes are private to one disjunct (nothing shared)
PRIVATE_ALGORITHMS = ("NONE", "TRIVIAL")


def with_statistics(patterns: list[WorkloadPattern], statistics: list) -> list[WorkloadPattern]:
    """The patterns with the planner's statistics of ``statistics[i]`` (a
    PatternStatistics, or None to keep pattern i's); what is shared does not change.
    Each shareable one is a new object with an empty key memo: the keys of conjuncts
    that never share carry the pattern object's id, which must be one of the live ones."""
    out = []
    for wp, stats in zip(patterns, statistics):
        if not wp.shareable:
            out.append(wp)
            continue
        pstats, note = wp.stats, wp.stats_note
        if stats is not None:
            pstats, _, note = planner_stats(wp.spec, lambda spec, s=stats: s)
        out.append(replace(wp, stats=pstats, stats_note=note, _keys={}))
    return out


def global_plan_cost(plan: GlobalPlan, patterns: list[WorkloadPattern],
                     access: float | None = None) -> float:
    """Cost_tree^multi of plan's local plans priced on the patterns' statistics (what
    ``plan_workload`` gives as ``GlobalPlan.cost`` when they are the ones it planned
    with, at the same ``access`` weight; a plan of ``PRIVATE_ALGORITHMS`` shares
    nothing: the sum of the local costs)."""
    ctx = WorkloadContext(patterns, sharing_model(access))
    term_of = {ids: t for t, ids in enumerate(ctx.term_ids)}
    private = plan.algorithm in PRIVATE_ALGORITHMS
    dag = DagCost(ctx)
    total = 0.0
    for b in plan.bindings:
        t = term_of[(b.pattern, b.term)]
        local = _local_plan(plan, b, ctx.terms[t])
        if private:
            total += ctx.local_cost(t, local)
        else:
            dag.add(t, ctx.nodes(t, local))
    return total if private else dag.total


def _local_plan(plan: GlobalPlan, binding, term) -> LocalPlan:
    """The binding's root subtree as a local plan over its disjunct's components."""
    comps = iter([term.vars.index(v) for v in binding.slot_vars])
    relaxed: set[int] = set()

    def build(index: int) -> TreeNode:
        node = plan.nodes[index]
        if node.is_leaf:
            return leaf(next(comps))
        tree = join(build(node.left), build(node.right))
        lm, rm = tree.left.mask, tree.right.mask
        crossing = any((lm >> i & 1 and rm >> j & 1) or (rm >> i & 1 and lm >> j & 1)
                       for i, j in term.closure)
        if crossing and not any(kind == "order" for kind, _ in node.checks):
            relaxed.add(tree.mask)
        return tree
    return LocalPlan(build(binding.root), frozenset(relaxed))
