"""Evaluation plans (Section 2.4): order-based plans for the lazy chain NFA and tree-based
plans for the ZStream-like tree evaluator, with the negation checks placed in them.

An order plan is a permutation of the query's relations (the lazy NFA's "selectivity
order", DEBS 2015 Section 4); a tree plan a binary tree whose leaves are the relations.
Negation (Section 4): the positive part is planned, then each absence check goes to the
earliest point where every positive relation it depends on is bound: right after the
step that binds the last of them (order) or at the lowest node covering them (tree; the
NSEQ node of ZStream).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from cepsql.planning.cost import CostEvaluator
from cepsql.planning.jqpg import ConjunctiveQuery
from cepsql.planning.trees import TreeNode

__all__ = [
    "OrderPlan",
    "TreePlan",
    "order_negation_steps",
    "tree_negation_nodes",
]


def order_negation_steps(query: ConjunctiveQuery, order: tuple[int, ...]) -> tuple[int, ...]:
    """For each negation constraint, the 1-based step after which its check runs."""
    pos = {rel: k for k, rel in enumerate(order, start=1)}
    return tuple(max((pos[i] for i in neg.required), default=1) for neg in query.negations)


def tree_negation_nodes(query: ConjunctiveQuery, root: TreeNode) -> tuple[int, ...]:
    """For each negation constraint, the mask of the lowest node covering its
    required relations (the node that runs the check)."""
    out = []
    for neg in query.negations:
        req = 0
        for i in neg.required:
            req |= 1 << i
        best = root
        for node in root.nodes():  # post-order: the first covering node is a lowest one
            if node.mask & req == req:
                best = node
                break
        out.append(best.mask)
    return tuple(out)


def _fmt(x: float) -> str:
    return f"{x:.4g}"


@dataclass(frozen=True)
class OrderPlan:
    """A left-deep plan: relations are joined (events taken) in ``order``.

    ``negation_steps[k]``: step after which ``query.negations[k]`` is checked.
    """
    order: tuple[int, ...]
    cost: float
    algorithm: str = ""
    negation_steps: tuple[int, ...] = ()
    query: ConjunctiveQuery | None = field(default=None, compare=False, repr=False)

    kind = "order"

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(self.query.names[i] for i in self.order) if self.query else ()

    def describe(self) -> str:
        """Text drawing for EXPLAIN: one line per step with the partial-match estimate."""
        labels = self.query.labels if self.query else tuple(f"R{i}" for i in range(
            max(self.order) + 1))
        head = f"ORDER PLAN [{self.algorithm or '?'}] cost={_fmt(self.cost)}"
        lines = [head, "  " + " -> ".join(labels[i] for i in self.order)]
        pm_of = None
        if self.query is not None:
            pm_of = CostEvaluator(self.query).pm
        mask = 0
        for k, rel in enumerate(self.order, start=1):
            mask |= 1 << rel
            pm = f"  pm={_fmt(pm_of(mask))}" if pm_of else ""
            lines.append(f"  {k}. take {labels[rel]}{pm}")
            if self.query is not None:
                for neg, step in zip(self.query.negations, self.negation_steps):
                    if step == k:
                        lines.append(f"     check {neg.label}")
        return "\n".join(lines)


@dataclass(frozen=True)
class TreePlan:
    """A (bushy) tree plan. ``negation_nodes[k]``: mask of the node checking
    ``query.negations[k]``."""
    root: TreeNode
    cost: float
    algorithm: str = ""
    negation_nodes: tuple[int, ...] = ()
    query: ConjunctiveQuery | None = field(default=None, compare=False, repr=False)

    kind = "tree"

    def describe(self) -> str:
        """Text drawing for EXPLAIN (box-drawing tree, partial-match estimate per node)."""
        labels = self.query.labels if self.query else None
        pm_of = None
        if self.query is not None:
            pm_of = CostEvaluator(self.query).pm
        lines = [f"TREE PLAN [{self.algorithm or '?'}] cost={_fmt(self.cost)}"]

        def name(node: TreeNode) -> str:
            if node.is_leaf:
                text = labels[node.leaf] if labels else f"R{node.leaf}"
            else:
                text = "JOIN"
            extra = f"  pm={_fmt(pm_of(node.mask))}" if pm_of else ""
            if self.query is not None:
                for neg, m in zip(self.query.negations, self.negation_nodes):
                    if m == node.mask:
                        extra += f"  check {neg.label}"
            return text + extra

        def draw(node: TreeNode, prefix: str, tail: str, child_prefix: str) -> None:
            lines.append(prefix + tail + name(node))
            if not node.is_leaf:
                draw(node.left, child_prefix, "├── ", child_prefix + "│   ")
                draw(node.right, child_prefix, "└── ", child_prefix + "    ")

        draw(self.root, "  ", "", "  ")
        return "\n".join(lines)
