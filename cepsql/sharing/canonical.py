"""Canonical keys: when two sub-patterns of different pattern views compute the same rows.

Sharing is decided on normalized expression trees, never on SQL text: variables become
slot numbers (so ``a.x < b.x`` in one view equals ``p.x < q.x`` in another when a<->p
and b<->q), comparisons are written one way round (``a.x > b.x`` is ``b.x < a.x``),
``=``/``<>``, ``+``/``*`` order their two operands, and AND/OR chains are flattened and
sorted. Only transformations that keep Spark's values exact are applied: ``+`` and
``*`` are commutative for every Spark type, but not re-associated (decimal precision
depends on the grouping). A function or column is compared by name and arguments; two
different columns (``a.peak < b.peak`` vs ``a.open < b.open``) never compare equal.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping

from cepsql.algebra.expressions import (AggregateValue, BinaryOp, ColumnRef, Expr, Literal,
                                   RowValue)

__all__ = ["COMPARISON_FLIP", "expr_key", "sort_keys"]

#: a > b is written b < a (and so on), so a flipped comparison has one key
COMPARISON_FLIP = {">": "<", ">=": "<=", "<": "<", "<=": "<="}
_SYMMETRIC = {"=", "<>", "!=", "<=>", "+", "*"}
_CHAINED = {"AND", "OR"}


def sort_keys(keys) -> tuple:
    """Keys in a deterministic order (mixed types: ordered by their text)."""
    return tuple(sorted(keys, key=repr))


def expr_key(expr: Expr, slot_of: Mapping[str | None, int], own: str | None = None,
             derived: Mapping[str, Expr] | None = None,
             single: frozenset[str] = frozenset(), foreign: Hashable = None) -> Hashable:
    """The canonical key of ``expr`` with pattern variables replaced by ``slot_of``'s
    slots. ``own`` is the variable whose DEFINE holds the expression (its current row
    may be written unqualified); ``derived`` maps generated column names back to the
    expressions they stand for (so per-view generated names do not block sharing).
    Variables missing from ``slot_of`` (SUBSET names, variables of other disjuncts) are
    kept by name tagged with ``foreign`` (pass something unique to the view, so such a
    reference never equals another view's).
    ``single``: variables that take exactly one row; for them FIRST/LAST at offset 0,
    running or final, all denote that row (so it does not matter which variable's
    DEFINE holds a comparison: CEP mode reads other variables FINAL, its own RUNNING)."""
    return _key(expr, _Ctx(slot_of, own, derived or {}, single, foreign))


@dataclasses.dataclass(frozen=True)
class _Ctx:
    slot_of: Mapping[str | None, int]
    own: str | None
    derived: Mapping[str, Expr]
    single: frozenset[str] = frozenset()
    foreign: Hashable = None

    def var(self, name: str | None) -> Hashable:
        if name in self.slot_of:
            return self.slot_of[name]
        return ("var", name, self.foreign)


def _key(e: Expr, ctx: _Ctx) -> Hashable:
    if isinstance(e, Literal):
        return ("lit", e.type, e.value)
    if isinstance(e, ColumnRef):
        if e.var is None and e.column in ctx.derived:
            return ("derived", _key(ctx.derived[e.column], ctx))
        return ("col", None if e.var is None else ctx.var(e.var), e.column)
    if isinstance(e, RowValue):
        ref = e.ref
        var = ref.var
        if var is None and ref.logical == "LAST" and ref.logical_offset == 0:
            var = ctx.own            # the current row of the DEFINE's own variable
        who = "*" if var is None else ctx.var(var)
        if var in ctx.single and ref.logical_offset == 0:
            return ("row", who, "ROW", 0, ref.physical_offset, None, _key(e.value, ctx))
        return ("row", who, ref.logical, ref.logical_offset, ref.physical_offset,
                ref.final, _key(e.value, ctx))
    if isinstance(e, AggregateValue):
        args = tuple(("derived", _key(ctx.derived[c], ctx)) if c in ctx.derived else c
                     for c in (e.column, e.by))  # by: max_by/min_by's ordering
        return ("agg", e.func, "*" if e.var is None else ctx.var(e.var), args, e.final,
                e.distinct, e.index, e.null_out_of_range)
    if isinstance(e, BinaryOp):
        return _binary(e, ctx)
    return _generic(e, ctx)


def _binary(e: BinaryOp, ctx: _Ctx) -> Hashable:
    op = e.op.upper()
    if op == "!=":
        op = "<>"
    if op in _CHAINED:
        parts: list[Hashable] = []
        _flatten(e, op, ctx, parts)
        return ("chain", op, sort_keys(parts))
    left, right = _key(e.left, ctx), _key(e.right, ctx)
    if op in (">", ">="):
        op, left, right = COMPARISON_FLIP[op], right, left
    elif op in _SYMMETRIC:
        left, right = sort_keys((left, right))
    return ("op", op, left, right)


def _flatten(e: Expr, op: str, ctx: _Ctx, out: list) -> None:
    if isinstance(e, BinaryOp) and e.op.upper() == op:
        _flatten(e.left, op, ctx, out)
        _flatten(e.right, op, ctx, out)
    else:
        out.append(_key(e, ctx))


def _generic(e: Expr, ctx: _Ctx) -> Hashable:
    """Any other node: its class, its non-position fields, its children's keys."""
    parts: list[Hashable] = [type(e).__name__]
    for f in dataclasses.fields(e):
        if f.name == "pos":
            continue
        parts.append(_value(getattr(e, f.name), ctx))
    return tuple(parts)


def _value(v, ctx: _Ctx) -> Hashable:
    if isinstance(v, Expr):
        return _key(v, ctx)
    if isinstance(v, tuple):
        return tuple(_value(x, ctx) for x in v)
    if dataclasses.is_dataclass(v):
        return (type(v).__name__,) + tuple(_value(getattr(v, f.name), ctx)
                                           for f in dataclasses.fields(v))
    if isinstance(v, (list, dict, set)):
        return repr(v)
    return v
