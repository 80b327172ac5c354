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

from cepsql.algebra.expressions import (ARRAY_ELEMENT, FIELD_ACCESS, MAP_VALUE, Aggregate,
                                   AggregateValue, Between, BinaryOp, Case, Classifier,
                                   Cast, ColumnRef, Expr, FunctionCall, InList, Like,
                                   Literal, MatchNumber, RowRef, RowValue, UnaryOp, children)
from cepsql.algebra.rowrefs import rebuild

_MIXED = object()  # signature of a node that combines rows or needs match state
_CURRENT = RowRef(None)
# FunctionCall(DIVISOR_GUARD, (guard, value)): value, computed ahead with a zero divisor
# giving NULL; guard is TRUE where the row's evaluation divides by zero, which Spark
# raises under ANSI when (and only when) the matcher evaluates this part of a DEFINE
DIVISOR_GUARD = "__cep_divisor_guard"


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
        pos = getattr(expr, "pos", None)
        out = RowValue(ref, ColumnRef(None, derived.name_for(value)), pos)
        guard = zero_divisor_guard(value)
        if guard is None:
            return out
        checked = RowValue(ref, ColumnRef(None, derived.name_for(guard)), pos)
        return FunctionCall(DIVISOR_GUARD, (checked, out), pos)
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


def zero_divisor_guard(expr: Expr) -> Expr | None:
    """``d1 = 0 OR d2 = 0 ...`` over the divisors (of /, %, div, mod, pmod) that Spark
    evaluates whenever it evaluates expr, or None when there is none. Divisors on a path
    Spark may skip (the right side of AND/OR, CASE branches, later COALESCE/IF arguments,
    IN list items) are left out: they raise only when taken, which a guard cannot tell."""
    divisors = [d for d in _divisors(expr) if not _nonzero_constant(d)]
    if not divisors:
        return None
    tests = [BinaryOp("=", d, Literal(0, "int")) for d in dict.fromkeys(divisors)]
    guard = tests[0]
    for test in tests[1:]:
        guard = BinaryOp("OR", guard, test)
    return guard


def _nonzero_constant(expr: Expr) -> bool:
    if isinstance(expr, UnaryOp) and expr.op == "-":
        return _nonzero_constant(expr.operand)
    if not isinstance(expr, Literal) or expr.type not in ("int", "double", "decimal"):
        return False
    try:
        return float(expr.value) != 0.0
    except (TypeError, ValueError):
        return False


def _divisors(expr: Expr):
    if isinstance(expr, BinaryOp):
        op = expr.op.upper()
        yield from _divisors(expr.left)
        if op in ("AND", "OR"):
            return
        yield from _divisors(expr.right)
        if op in ("/", "%", "DIV"):
            yield expr.right
    elif isinstance(expr, FunctionCall):
        name = expr.name.lower()
        args = expr.args if name not in _NON_STRICT_FUNCTIONS else expr.args[:1]
        for arg in args:
            yield from _divisors(arg)
        if name in ("mod", "pmod", "div") and len(expr.args) == 2:
            yield expr.args[1]
    elif isinstance(expr, Case):
        if expr.operand is not None:
            yield from _divisors(expr.operand)
        if expr.whens:
            yield from _divisors(expr.whens[0][0])
    elif isinstance(expr, InList):
        yield from _divisors(expr.operand)
    elif isinstance(expr, Between):
        yield from _divisors(expr.operand)
        yield from _divisors(expr.low)
    else:
        for child in children(expr):
            yield from _divisors(child)


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
