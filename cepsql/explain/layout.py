"""Where each node of a plan drawing goes: a tidy layered layout of a tree or a DAG.

Levels count down from the roots, and a node sits one level below its deepest parent, so
in a tree every node is exactly one level below its parent (drawing leaves on one bottom
row put `a` of `SEQ(a, KL(b), c)` under the KL box). Each node hangs in the subtree of
that deepest parent (its *tree parent*; a DAG's other parents just draw one more edge), and
the subtrees are packed by Reingold and Tilford's rule: a parent is centred over its first
and last tree child, and a subtree is pushed right until it is at least one slot from its
left siblings' subtrees on every level they share. Slots are box widths plus the gap.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Layout", "tidy_layout"]


@dataclass(frozen=True)
class Layout:
    """Node i is drawn on row ``level[i]`` (0 = top) at horizontal slot ``slot[i]`` (0 =
    leftmost; half slots occur when a parent is centred over an even spread)."""
    level: list[int]
    slot: list[float]
    tree_parent: list[int | None]


@dataclass
class _Subtree:
    """A placed subtree relative to its root at slot 0: its leftmost and rightmost slot
    on each level below the root (index 0 = the root's level)."""
    left: list[float]
    right: list[float]


def tidy_layout(children: Sequence[Sequence[int]]) -> Layout:
    """Layout of the DAG whose node i reads ``children[i]``; every child is listed
    before its parents (as plan boxes are built), so one backward pass sets the levels."""
    n = len(children)
    level = [0] * n
    for i in range(n - 1, -1, -1):
        for c in children[i]:
            level[c] = max(level[c], level[i] + 1)
    tree_parent: list[int | None] = [None] * n
    for i in range(n):           # the first-listed parent on the level just above
        for c in children[i]:
            if tree_parent[c] is None and level[c] == level[i] + 1:
                tree_parent[c] = i
    kids: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        for c in dict.fromkeys(children[i]):
            if tree_parent[c] == i:
                kids[i].append(c)
    offset = [0.0] * n           # slot relative to the tree parent (roots: to the forest)
    roots = [i for i in range(n) if tree_parent[i] is None]
    _pack(roots, kids, offset)
    slot = [0.0] * n
    for i in range(n - 1, -1, -1):   # parents come after their children in the list
        parent = tree_parent[i]
        slot[i] = offset[i] + (slot[parent] if parent is not None else 0.0)
    low = min(slot, default=0.0)
    return Layout(level, [s - low for s in slot], tree_parent)


def _pack(row: list[int], kids: list[list[int]], offset: list[float]) -> _Subtree:
    """Place the subtrees of ``row`` side by side, centred on slot 0; return the contour
    of the whole group (level 0 = the row's level)."""
    left: list[float] = []
    right: list[float] = []
    for node in row:
        sub = _subtree(node, kids, offset)
        shift = 0.0
        if left:
            shift = max(right[d] - sub.left[d] + 1.0
                        for d in range(min(len(right), len(sub.left))))
        offset[node] = shift
        for d, (lo, hi) in enumerate(zip(sub.left, sub.right)):
            if d < len(left):
                right[d] = hi + shift   # it lies right of everything before it
            else:
                left.append(lo + shift)
                right.append(hi + shift)
    if not row:
        return _Subtree([], [])
    mid = (offset[row[0]] + offset[row[-1]]) / 2
    for node in row:
        offset[node] -= mid
    return _Subtree([x - mid for x in left], [x - mid for x in right])


def _subtree(node: int, kids: list[list[int]], offset: list[float]) -> _Subtree:
    below = _pack(kids[node], kids, offset)
    return _Subtree([0.0, *below.left], [0.0, *below.right])
