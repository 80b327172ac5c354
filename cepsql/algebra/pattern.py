"""Pattern AST: the row-pattern regular expression, independent of any parser.

Variable names are canonical: unquoted identifiers upper-cased (as Trino does),
quoted identifiers kept as written.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Iterator


@dataclass(frozen=True)
class PatternNode:
    """Base of all pattern nodes."""


@dataclass(frozen=True)
class Var(PatternNode):
    """A primary pattern variable, e.g. ``A``."""
    name: str
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Empty(PatternNode):
    """The empty pattern ``()``: matches the empty sequence."""


@dataclass(frozen=True)
class Concat(PatternNode):
    """Concatenation ``a b c`` (at least two items)."""
    items: tuple[PatternNode, ...]


@dataclass(frozen=True)
class Alternation(PatternNode):
    """Alternation ``a | b`` with leftmost preference (at least two items)."""
    items: tuple[PatternNode, ...]


@dataclass(frozen=True)
class Quantified(PatternNode):
    """``child{min,max}``; max None means unbounded. greedy False is the reluctant ``?`` form."""
    child: PatternNode
    min: int
    max: int | None
    greedy: bool = True


@dataclass(frozen=True)
class Anchor(PatternNode):
    """``^`` (kind 'start') or ``$`` (kind 'end') of the partition."""
    kind: str


@dataclass(frozen=True)
class Exclusion(PatternNode):
    """``{- child -}``: rows matched by child are left out of ALL ROWS PER MATCH output."""
    child: PatternNode
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Permute(PatternNode):
    """``PERMUTE(a, b, ...)``: every order, preferred lexicographically by item position."""
    items: tuple[PatternNode, ...]
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Negation(PatternNode):
    """CEP mode ``NOT(child)``: absence of a child match between the SEQ neighbours
    (or, inside AND, in the AND's slot between the SEQ items around it; rule R6).
    Never matches rows itself."""
    child: PatternNode
    pos: int | None = field(default=None, compare=False)


CEP_OPERATORS = ("SEQ", "AND", "OR", "NOT", "KL")


def children(node: PatternNode) -> tuple[PatternNode, ...]:
    """Direct sub-patterns, left to right (none for Var, Empty, Anchor)."""
    if isinstance(node, (Concat, Alternation, Permute)):
        return node.items
    if isinstance(node, (Quantified, Exclusion, Negation)):
        return (node.child,)
    return ()


def walk(node: PatternNode) -> Iterator[PatternNode]:
    """Pre-order traversal: node, then each child's subtree left to right."""
    yield node
    for child in children(node):
        yield from walk(child)


def transform(node: PatternNode, fn: Callable[[PatternNode], PatternNode]) -> PatternNode:
    """Bottom-up rewrite: fn sees every node with its children already transformed and
    returns its replacement. Unchanged subtrees are kept as they are (positions too)."""
    kids = children(node)
    new = tuple(transform(k, fn) for k in kids)
    if any(a is not b for a, b in zip(new, kids)):
        node = replace(node, items=new) if hasattr(node, "items") else replace(node, child=new[0])
    return fn(node)


def contains_negation(node: PatternNode) -> bool:
    """Whether a NOT(...) occurs anywhere in the pattern (CEP mode only)."""
    return any(isinstance(n, Negation) for n in walk(node))


def pattern_pos(node: PatternNode) -> int | None:
    """Where the pattern is written (its first positioned node; anchors and SEQ carry no
    position), for errors about the pattern as a whole."""
    for n in walk(node):
        if getattr(n, "pos", None) is not None:
            return n.pos
    return None


def pattern_variables(node: PatternNode) -> list[str]:
    """Primary variables in order of first appearance (negated ones included)."""
    return list(dict.fromkeys(n.name for n in walk(node) if isinstance(n, Var)))


def pattern_to_text(node: PatternNode) -> str:
    """Canonical PATTERN text, used by EXPLAIN and view listings."""
    if isinstance(node, Var):
        return _variable_text(node.name)
    if isinstance(node, Empty):
        return "()"
    if isinstance(node, Anchor):
        return "^" if node.kind == "start" else "$"
    if isinstance(node, Concat):
        return " ".join(_wrap(i, Alternation) for i in node.items)
    if isinstance(node, Alternation):
        return " | ".join(pattern_to_text(i) for i in node.items)
    if isinstance(node, Exclusion):
        return "{- " + pattern_to_text(node.child) + " -}"
    if isinstance(node, Permute):
        return "PERMUTE(" + ", ".join(pattern_to_text(i) for i in node.items) + ")"
    if isinstance(node, Negation):
        return "NOT(" + pattern_to_text(node.child) + ")"
    if isinstance(node, Quantified):
        inner = _wrap(node.child, (Concat, Alternation, Quantified))
        q = _quantifier_text(node.min, node.max)
        return inner + q + ("" if node.greedy else "?")
    raise TypeError(f"unknown pattern node {node!r}")


def _variable_text(name: str) -> str:
    """Unquoted when re-parsing gives the same canonical (upper-case) name."""
    if name.isidentifier() and name == name.upper() and \
            name.upper() not in ("PERMUTE",) + CEP_OPERATORS:
        return name
    return '"' + name.replace('"', '""') + '"'


def _wrap(node: PatternNode, kinds) -> str:
    text = pattern_to_text(node)
    return f"({text})" if isinstance(node, kinds) else text


def _quantifier_text(lo: int, hi: int | None) -> str:
    if (lo, hi) == (0, None):
        return "*"
    if (lo, hi) == (1, None):
        return "+"
    if (lo, hi) == (0, 1):
        return "?"
    if hi is None:
        return "{%d,}" % lo
    if lo == hi:
        return "{%d}" % lo
    return "{%d,%d}" % (lo, hi)
