"""Join trees over a query's relations: the shape of a tree plan, and of an order plan
read as a left-deep tree. Both the cost model and the plans are written over it.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["TreeNode", "join", "leaf", "left_deep_tree"]


@dataclass(frozen=True)
class TreeNode:
    """A tree-plan node: a leaf (``leaf`` = relation index) or a join of two subtrees."""
    leaf: int | None = None
    left: TreeNode | None = None
    right: TreeNode | None = None
    mask: int = field(default=0, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.leaf is not None:
            if self.left is not None or self.right is not None:
                raise ValueError("a leaf has no children")
            m = 1 << self.leaf
        else:
            if self.left is None or self.right is None:
                raise ValueError("an internal node needs two children")
            if self.left.mask & self.right.mask:
                raise ValueError("a relation occurs twice in a tree")
            m = self.left.mask | self.right.mask
        object.__setattr__(self, "mask", m)

    @property
    def is_leaf(self) -> bool:
        return self.leaf is not None

    def leaves(self) -> list[int]:
        """Leaf relations, left to right."""
        if self.leaf is not None:
            return [self.leaf]
        return self.left.leaves() + self.right.leaves()

    def nodes(self) -> Iterator[TreeNode]:
        """Post-order traversal (children before their parent)."""
        if self.leaf is None:
            yield from self.left.nodes()
            yield from self.right.nodes()
        yield self

    def canonical(self) -> tuple:
        """Shape with children sorted: equal for trees that differ only by swapping
        children (Cost_tree does not distinguish them)."""
        if self.leaf is not None:
            return (self.leaf,)
        a, b = self.left.canonical(), self.right.canonical()
        return (min(a, b), max(a, b))


def leaf(i: int) -> TreeNode:
    return TreeNode(leaf=i)


def join(left: TreeNode, right: TreeNode) -> TreeNode:
    return TreeNode(left=left, right=right)


def left_deep_tree(order: tuple[int, ...]) -> TreeNode:
    node = leaf(order[0])
    for i in order[1:]:
        node = join(node, leaf(i))
    return node
