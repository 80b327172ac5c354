"""Exhaustive plan enumeration: the ground truth the algorithms are tested against, and
the "all alternatives" listing EXPLAIN can show for small patterns."""
from __future__ import annotations

import itertools
from collections.abc import Iterator

from cepsql.planning.cost import DEFAULT_MODEL, CostEvaluator, CostModel
from cepsql.planning.jqpg import ConjunctiveQuery
from cepsql.planning.trees import TreeNode, join, leaf

__all__ = ["all_orders", "all_trees", "all_trees_over_sequence", "best_order",
           "best_tree", "best_tree_over_sequence"]


def all_orders(n: int) -> Iterator[tuple[int, ...]]:
    """Every order plan (n! permutations)."""
    return itertools.permutations(range(n))


def all_trees(items: list[int]) -> Iterator[TreeNode]:
    """Every bushy tree over the relations (children unordered: the first item always
    goes left, since Cost_tree is symmetric in the children); (2n-3)!! trees."""
    if len(items) == 1:
        yield leaf(items[0])
        return
    first, rest = items[0], items[1:]
    for k in range(len(rest)):  # the left part gets `first` plus k others
        for others in itertools.combinations(rest, k):
            left_items = [first, *others]
            right_items = [x for x in rest if x not in others]
            for lt in all_trees(left_items):
                for rt in all_trees(right_items):
                    yield join(lt, rt)


def all_trees_over_sequence(seq: list[int]) -> Iterator[TreeNode]:
    """Every tree whose leaves, left to right, are ``seq`` (ZStream's search space)."""
    if len(seq) == 1:
        yield leaf(seq[0])
        return
    for k in range(1, len(seq)):
        for lt in all_trees_over_sequence(seq[:k]):
            for rt in all_trees_over_sequence(seq[k:]):
                yield join(lt, rt)


def best_order(query: ConjunctiveQuery,
               model: CostModel = DEFAULT_MODEL) -> tuple[tuple[int, ...], float]:
    ev = CostEvaluator(query, model)
    return min(((o, ev.order_cost(o)) for o in all_orders(query.size)), key=lambda t: t[1])


def best_tree(query: ConjunctiveQuery, model: CostModel = DEFAULT_MODEL) -> tuple[TreeNode, float]:
    ev = CostEvaluator(query, model)
    return min(((t, ev.tree_cost(t)) for t in all_trees(list(range(query.size)))),
               key=lambda t: t[1])


def best_tree_over_sequence(query: ConjunctiveQuery, seq: list[int],
                            model: CostModel = DEFAULT_MODEL) -> tuple[TreeNode, float]:
    ev = CostEvaluator(query, model)
    return min(((t, ev.tree_cost(t)) for t in all_trees_over_sequence(list(seq))),
               key=lambda t: t[1])
