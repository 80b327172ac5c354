"""Expression trees of DEFINE, MEASURES, PARTITION BY and ORDER BY.

These are cepsql's own types (no sqlglot after parsing). Navigation is kept as
written by the user (``Navigation`` nodes); ``cepsql.algebra.rowrefs`` normalizes a
navigation chain into a ``RowRef`` (which row, relative to the match state) so the
compilers never re-interpret nesting rules.

Column and variable names are canonical: unquoted identifiers upper-cased for
variables, column names kept as written (Spark resolves them case-insensitively).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Expr:
    """Base of all expression nodes."""


@dataclass(frozen=True)
class Literal(Expr):
    """A constant. ``type`` is one of: 'int', 'double', 'decimal', 'string', 'bool',
    'null', 'date', 'timestamp'. ``value`` is the Python value (int, float, str for
    decimal/date/timestamp text, bool, None)."""
    value: object
    type: str
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ColumnRef(Expr):
    """``var.column`` or an unqualified ``column`` (var None = the universal row pattern variable)."""
    var: str | None
    column: str
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Navigation(Expr):
    """``PREV/NEXT/FIRST/LAST(arg [, offset])``, optionally prefixed by RUNNING or FINAL
    (semantics None when not written)."""
    kind: str  # 'PREV' | 'NEXT' | 'FIRST' | 'LAST'
    arg: Expr
    offset: int = 1
    semantics: str | None = None  # 'RUNNING' | 'FINAL' | None
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Classifier(Expr):
    """``CLASSIFIER()`` or ``CLASSIFIER(var)``."""
    var: str | None = None
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class MatchNumber(Expr):
    """``MATCH_NUMBER()``."""
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class BinaryOp(Expr):
    """Arithmetic '+', '-', '*', '/', '%', comparison '=', '<>', '<', '<=', '>', '>=',
    logical 'AND', 'OR', string concatenation '||'."""
    op: str
    left: Expr
    right: Expr
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class UnaryOp(Expr):
    """'NOT' or '-' (negation)."""
    op: str
    operand: Expr
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class IsNull(Expr):
    operand: Expr
    negated: bool = False
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class InList(Expr):
    operand: Expr
    items: tuple[Expr, ...]
    negated: bool = False
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Between(Expr):
    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Like(Expr):
    operand: Expr
    pattern: Expr
    negated: bool = False
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Case(Expr):
    """Searched CASE (operand None) or simple CASE."""
    operand: Expr | None
    whens: tuple[tuple[Expr, Expr], ...]
    default: Expr | None = None
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Cast(Expr):
    """``CAST(operand AS to)``; ``to`` is Spark type text, e.g. 'double', 'decimal(10,2)'."""
    operand: Expr
    to: str
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class FunctionCall(Expr):
    """A scalar function; ``name`` lower-case Spark function name (or one of the
    access forms below, which Spark writes as syntax rather than as a call)."""
    name: str
    args: tuple[Expr, ...]
    pos: int | None = field(default=None, compare=False)


# Nested values: ``x.f`` is FunctionCall(FIELD_ACCESS, (x, Literal('f'))), ``x[i]`` is
# FunctionCall(SUBSCRIPT, (x, i)) until the planner knows x's type and picks
# ARRAY_ELEMENT (0-based, NULL out of range, Spark's ``get``) or MAP_VALUE (NULL for a
# missing key, Spark's ``try_element_at``).
FIELD_ACCESS = "__field"
SUBSCRIPT = "__subscript"
ARRAY_ELEMENT = "get"
MAP_VALUE = "try_element_at"


# the aggregate functions MATCH_RECOGNIZE computes over pattern variables (by Spark name)
AGGREGATES = frozenset({
    "count", "sum", "avg", "mean", "min", "max", "array_agg", "collect_list", "collect_set",
    "stddev", "std", "stddev_samp", "stddev_pop", "variance", "var_samp", "var_pop",
    "count_if", "bool_and", "every", "bool_or", "some", "any", "max_by", "min_by", "listagg",
    "string_agg"})


@dataclass(frozen=True)
class Aggregate(Expr):
    """An aggregate over pattern variables (count, sum, avg, min, max, ...).
    ``star_var`` is set for ``count(*)`` ('' = universal) or ``count(A.*)`` ('A')."""
    name: str
    args: tuple[Expr, ...]
    semantics: str | None = None
    distinct: bool = False
    star_var: str | None = None
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class RowRef:
    """Which row a value is read from.

    var: a primary variable or subset name; None is the universal variable (every row).
    logical: 'FIRST' or 'LAST' over the rows mapped to var (in the running or final
    match); logical_offset counts from that end. physical_offset then moves that many
    rows forward (positive, NEXT) or back (negative, PREV) in the partition.
    """
    var: str | None
    logical: str = "LAST"
    logical_offset: int = 0
    physical_offset: int = 0
    final: bool = False


@dataclass(frozen=True)
class RowValue(Expr):
    """``value`` evaluated at the row ``ref`` denotes (null when there is no such row)."""
    ref: RowRef
    value: Expr
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class AggregateValue(Expr):
    """A normalized aggregate: ``func`` ('COUNT_STAR', 'COUNT', 'SUM', 'AVG', 'MIN', 'MAX',
    'LIST') over the rows mapped to ``var`` (None = every row of the match), reading the
    row-local ``column`` (None for COUNT_STAR), with RUNNING or FINAL semantics.
    ``by``: the ordering column of MAX_BY/MIN_BY (``column`` is the value).
    ``distinct``: over the distinct non-NULL values only (DEFINE). ``index``: ELEMENT's
    1-based position in the list of non-NULL values (negative: from the end).
    ``per_label``: (label, column, ordering column) per primary variable when the
    argument reads CLASSIFIER() (DEFINE): a row of that variable reads these columns
    (``column``/``by`` are the first entry's). ``computed``: (argument, ordering) as
    expressions the condition VM computes at each aggregated row when they read
    MATCH_NUMBER() (SQL:2016 DEFINE), None for one read from ``column``/``by``."""
    func: str
    var: str | None
    column: str | None
    final: bool = False
    pos: int | None = field(default=None, compare=False)
    by: str | None = None
    distinct: bool = False
    index: int = 0
    null_out_of_range: bool = False  # ELEMENT: NULL (try_element_at, [i]) even under ANSI
    per_label: tuple[tuple[str, str, str | None], ...] = ()
    computed: tuple[Expr | None, ...] = ()


@dataclass(frozen=True)
class GatheredAggregate(Expr):
    """An aggregate the backend computes over the rows the matcher lists per output row
    (DISTINCT, the stddev/variance family, max_by, listagg, count_if, arguments reading
    CLASSIFIER() or MATCH_NUMBER(), ...). ``parts`` are (variable, arguments) pairs: one
    row list per part, merged back into match order; the arguments are expressions over
    row-local columns and ``__cep_mn`` (no children: they are already bound)."""
    func: str
    distinct: bool
    parts: tuple[tuple[str | None, tuple[Expr, ...]], ...]
    rows_column: str  # a never-null column: the lists keep every row of the variable
    final: bool = False
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ScalarSubquery(Expr):
    """An uncorrelated scalar subquery ``(SELECT ...)``, as Spark SQL text. Backends
    evaluate it once per statement and replace it by a typed constant before planning
    (``cepsql.analyze.subqueries``)."""
    sql: str
    pos: int | None = field(default=None, compare=False)


def children(expr: Expr) -> tuple[Expr, ...]:
    """Direct sub-expressions, in evaluation order."""
    if isinstance(expr, Navigation):
        return (expr.arg,)
    if isinstance(expr, RowValue):
        return (expr.value,)
    if isinstance(expr, BinaryOp):
        return (expr.left, expr.right)
    if isinstance(expr, (UnaryOp, IsNull, Cast)):
        return (expr.operand,)
    if isinstance(expr, InList):
        return (expr.operand, *expr.items)
    if isinstance(expr, Between):
        return (expr.operand, expr.low, expr.high)
    if isinstance(expr, Like):
        return (expr.operand, expr.pattern)
    if isinstance(expr, Case):
        out: list[Expr] = [] if expr.operand is None else [expr.operand]
        for cond, res in expr.whens:
            out += [cond, res]
        if expr.default is not None:
            out.append(expr.default)
        return tuple(out)
    if isinstance(expr, (FunctionCall, Aggregate)):
        return expr.args
    return ()


def walk(expr: Expr):
    """Pre-order traversal."""
    yield expr
    for child in children(expr):
        yield from walk(child)
