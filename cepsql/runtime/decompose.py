"""Split DEFINE conditions into row-local parts and cross-row parts.

A sub-expression that reads a single row (one RowRef) is a function of that row's
columns only, so it can be computed vectorised for every row before matching (by
Spark or Arrow, with their full function library and exact types) and the matcher
just loads it at the referenced row. Only what combines values of *different* rows
(or CLASSIFIER/MATCH_NUMBER) is left for the compiled condition VM.

After ``localize``, every RowValue's value is a bare ColumnRef (an input column or a
derived ``__cep_d<n>`` column) or a Classifier.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..algebra.expressions import (ARRAY_ELEMENT, FIELD_ACCESS, MAP_VALUE, Aggregate,
                                   AggregateValue, Classifier, ColumnRef, Expr, Literal,
                                   MatchNumber, RowRef, RowValue, children)
from ..algebra.rowrefs import rebuild

_MIXED = object()  # signature of a node that combines rows or needs match state
_CURRENT = RowRef(None)


@dataclass
class DerivedColumns:
    """Row-local expressions to add to the input, interned by expression."""
    prefix: str = "__cep_d"
    columns: dict[Expr, str] = field(default_factory=dict)

    def name_for(self, expr: Expr) -> str:
        if isinstance(expr, ColumnRef) and expr.var is None:
            return expr.column
        if expr not in self.columns:
            self.columns[expr] = f"{self.prefix}{len(self.columns)}"
        return self.columns[expr]


def normalize_define_ref(ref: RowRef, var: str, members_of) -> RowRef:
    """In V's DEFINE, LAST(X) of a set X containing V is the current row."""
    if (ref.var is not None and ref.logical == "LAST" and ref.logical_offset == 0
            and var in members_of(ref.var)):
        return RowRef(None, "LAST", 0, ref.physical_offset, ref.final)
    return ref


def localize(expr: Expr, derived: DerivedColumns, normalize=lambda r: r) -> Expr:
    """Replace every maximal single-row sub-expression by a RowValue over one column.

    A row other than the current one may not exist; its columns then read as NULL, so
    only the navigation argument itself and null-strict operators around it (NULL in,
    NULL out) may be computed ahead: ``B.p IS NULL`` must stay TRUE when B has no row.
    """
    sig = _signature(expr, normalize)
    if sig is not _MIXED and not isinstance(expr, Literal) and (
            sig is None or sig == _CURRENT or isinstance(expr, RowValue) or _strict(expr)):
        ref = _CURRENT if sig is None else sig
        value = _strip(expr)
        return RowValue(ref, ColumnRef(None, derived.name_for(value)), getattr(expr, "pos", None))
    if isinstance(expr, RowValue):  # a Classifier read
        return RowValue(normalize(expr.ref), expr.value, expr.pos)
    kids = children(expr)
    if not kids:
        return expr
    return rebuild(expr, [localize(k, derived, normalize) for k in kids])


_NON_STRICT_FUNCTIONS = frozenset({
    "coalesce", "nvl", "nvl2", "ifnull", "if", "iff", "isnull", "isnotnull", "equal_null",
    "nanvl", "greatest", "least", "concat_ws", "array", "struct", "named_struct", "map",
    "nullif", "zeroifnull", "nullifzero", "assert_true", "raise_error", "typeof", "rand",
    "randn", "uuid", "current_timestamp", "current_date", "now", "array_compact",
    "try_element_at", "elt", "decode", "ilike", "rlike"})


_NESTED_ACCESS = frozenset({FIELD_ACCESS, ARRAY_ELEMENT, MAP_VALUE})


def _strict(expr: Expr) -> bool:
    """True when expr is NULL whenever its row reads are all NULL (SQL's usual rule)."""
    from ..algebra.expressions import (Between, BinaryOp, Cast, FunctionCall, Like,
                                       UnaryOp)
    if isinstance(expr, (RowValue, Literal)):
        return True
    if isinstance(expr, BinaryOp):
        if expr.op.upper() in ("AND", "OR"):
            return False
    elif isinstance(expr, FunctionCall):
        # nested access (x.f, x[i], m[k]) of a NULL value is NULL
        if expr.name.lower() in _NON_STRICT_FUNCTIONS and expr.name not in _NESTED_ACCESS:
            return False
    elif not isinstance(expr, (UnaryOp, Cast, Between, Like)):
        return False  # IS NULL, CASE, IN, ...
    return all(_strict(k) for k in children(expr))


def _signature(expr: Expr, normalize):
    """None: constant; a RowRef: reads only that row; _MIXED: otherwise."""
    if isinstance(expr, RowValue):
        if any(isinstance(n, Classifier) for n in _walk(expr.value)):
            return _MIXED
        return normalize(expr.ref)
    if isinstance(expr, (Classifier, MatchNumber, Aggregate, AggregateValue, ColumnRef)):
        return _MIXED
    sig = None
    for child in children(expr):
        s = _signature(child, normalize)
        if s is _MIXED:
            return _MIXED
        if s is not None:
            if sig is not None and s != sig:
                return _MIXED
            sig = s
    return sig


def _strip(expr: Expr) -> Expr:
    """The row-local expression over unqualified columns."""
    if isinstance(expr, RowValue):
        return expr.value
    kids = children(expr)
    if not kids:
        return expr
    return rebuild(expr, [_strip(k) for k in kids])


def _walk(expr: Expr):
    yield expr
    for child in children(expr):
        yield from _walk(child)
