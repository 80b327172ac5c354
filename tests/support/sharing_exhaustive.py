"""Exhaustive enumeration of the multitree (MPM) space of tiny workloads: the reference
the local searches are tested against (like planning/exhaustive.py for one pattern).

The space is every combination of local plans, a local plan being a bushy tree over the
disjunct's components (children unordered: node keys do not depend on their order) and
a set of order-relaxed subtrees -- exactly what the searches can produce (no node
joins two Kleene leaves directly: the shared DAG evaluator does not run that).
"""
from __future__ import annotations

import itertools

from cepsql.sharing.dag import DagCost, LocalPlan, WorkloadContext

from support.planning_exhaustive import all_trees  # one bushy-tree enumeration for both

__all__ = ["all_local_plans", "all_trees", "exhaustive_cost"]


def all_local_plans(ctx: WorkloadContext, t: int) -> list[LocalPlan]:
    """Every tree of disjunct t with every choice of order-relaxed subtrees."""
    out: dict[LocalPlan, None] = {}
    kleene = ctx.terms[t].kleene
    for tree in all_trees(list(range(ctx.terms[t].size))):
        if any(not n.is_leaf and n.left.is_leaf and n.right.is_leaf and
               kleene[n.left.leaf] is not None and kleene[n.right.leaf] is not None
               for n in tree.nodes()):
            continue      # two closures joined directly: not a plan the DAG runs
        internal = [n.mask for n in tree.nodes() if not n.is_leaf]
        for r in range(len(internal) + 1):
            for chosen in itertools.combinations(internal, r):
                top = frozenset(m for m in chosen
                                if not any(m != o and m & o == m for o in chosen))
                out[LocalPlan(tree, top)] = None
    return list(out)


def exhaustive_cost(ctx: WorkloadContext, limit: int = 200_000) -> tuple[float, list]:
    """(cheapest Cost_tree^multi, its local plans); raises ValueError past ``limit``
    combinations."""
    spaces = [all_local_plans(ctx, t) for t in range(len(ctx.terms))]
    total = 1
    for s in spaces:
        total *= len(s)
    if total > limit:
        raise ValueError(f"{total} combinations: too many to enumerate")
    best = (float("inf"), [])
    for combo in itertools.product(*spaces):
        dag = DagCost(ctx)
        for t, plan in enumerate(combo):
            dag.add(t, ctx.nodes(t, plan))
        if dag.total < best[0]:
            best = (dag.total, list(combo))
    return best
