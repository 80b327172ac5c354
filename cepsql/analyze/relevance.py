"""Relevance pushdown (CEP mode): which input rows can matter at all.

Under SKIP_TILL_NEXT_MATCH and SKIP_TILL_ANY_MATCH a row is only ever looked at when
some variable (NOT variables included) may take it (R4/R5: a row no state can take is
ignored; R6: only rows satisfying a NOT variable's DEFINE can violate the NOT), and
unqualified navigation, aggregates and ALL ROWS output range over the match rows only
(R2, R7). A variable takes a row only if every row-local conjunct of its DEFINE is
TRUE there, so a row for which no variable's row-local conjuncts are all TRUE (NULL is
not TRUE) can be dropped before the shuffle without changing any match, match order or
MATCH_NUMBER (positions keep their relative order).

Every row is kept when something counts or shows the rows between matched rows:
PREV/NEXT (physical navigation, in DEFINE or MEASURES), a ``WITHIN n ROWS`` window,
``WITH UNMATCHED ROWS``, the contiguity strategies and SQL:2016 mode; and when some
variable has no row-local conjunct (it may take any row).
"""
from __future__ import annotations

from typing import NamedTuple

from cepsql.algebra.expressions import (Aggregate, AggregateValue, BinaryOp, Classifier, Expr,
                                   GatheredAggregate, Literal, MatchNumber, Navigation,
                                   RowValue, ScalarSubquery, walk)
from cepsql.algebra.rowrefs import bind_rows
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.errors import CepError
from cepsql.analyze.decompose import zero_divisor_guard
from cepsql.analyze.conjuncts import describe_conjunct, split_conjuncts, strip_row_values
from cepsql.exprs.spark_sql import to_spark_sql

#: strategies under which a row no variable can take changes nothing
FILTERABLE_STRATEGIES = ("SKIP_TILL_NEXT_MATCH", "SKIP_TILL_ANY_MATCH")
#: contiguity strategies: a row no variable can take only ends the runs waiting at it, so
#: it may be dropped when the rows after each gap are flagged as breaks (gap_filter)
GAP_STRATEGIES = ("STRICT_CONTIGUITY", "PARTITION_CONTIGUITY")


def relevance_filter(spec: MatchRecognizeSpec,
                     strategies: tuple[str | None, ...] = FILTERABLE_STRATEGIES
                     ) -> tuple[Expr | None, str]:
    """(condition over the input's own columns that keeps exactly the rows some variable
    may take, "") or (None, why every row is kept). ``strategies``: those under which
    dropping rows is allowed (gap_filter adds the contiguity ones, chain_gap_filter
    None: SQL:2016 mode)."""
    reason = _keeps_every_row(spec, strategies)
    if reason:
        return None, reason
    per_var: list[Expr] = []
    for var, stripped in row_local_conjuncts(spec).items():
        if spec.defines.get(var) is None:
            return None, f"variable {var} has no DEFINE: it may take any row"
        if not stripped:
            return None, (f"variable {var} has no single-row condition: it may take any "
                          "row")
        # a row where a conjunct divides by zero is kept: the matcher raises there (ANSI)
        guards = [g for g in map(zero_divisor_guard, stripped) if g is not None]
        term = _join("OR", [_join("AND", stripped), *guards])
        if term not in per_var:
            per_var.append(term)
    return _join("OR", per_var), ""


def row_local_conjuncts(spec: MatchRecognizeSpec) -> dict[str, list[Expr]]:
    """Per variable (NOT variables included), the conjuncts of its DEFINE that read its
    current row only, as conditions over the input's own columns ([] when none: no DEFINE,
    or none single-row). A row where not all are TRUE is never taken by the variable
    (relevance_filter; EXPLAIN ANALYZE counts the rows where they all are)."""
    known = set(spec.variables) | set(spec.subsets)
    out: dict[str, list[Expr]] = {}
    for var in spec.variables:
        cond = spec.defines.get(var)
        local = [] if cond is None else [c for c in split_conjuncts(cond)
                                          if _row_local(c, var, known) and not _always_true(c)]
        out[var] = [strip_row_values(bind_rows(
            c, in_define=True, final_default=False, known_vars=known)) for c in local]
    return out


class PositionalConjunct(NamedTuple):
    """A DEFINE conjunct that reads only its variable's current row and rows at constant
    physical offsets from it (PREV/NEXT): its truth at a row does not depend on the match
    being built, so it can be counted over the sorted partitions (EXPLAIN ANALYZE)."""
    bound: Expr  # every read a RowValue of the current row moved by ref.physical_offset
    text: str    # short SQL-like text of it as written (conjuncts.describe_conjunct)


def positional_conjuncts(spec: MatchRecognizeSpec) -> dict[str, list[PositionalConjunct]]:
    """Per variable (NOT variables included), the conjuncts of its DEFINE that read only
    its current row and PREV/NEXT of it with constant offsets ([] when none): a superset
    of row_local_conjuncts. A row where not all are TRUE is never taken by the variable;
    EXPLAIN ANALYZE counts the rows where they all are. (The relevance filter does not use
    them: a filtered row would move PREV/NEXT.)"""
    known = set(spec.variables) | set(spec.subsets)
    out: dict[str, list[PositionalConjunct]] = {}
    for var in spec.variables:
        cond = spec.defines.get(var)
        out[var] = [PositionalConjunct(bind_rows(c, in_define=True, final_default=False,
                                                 known_vars=known), _unwrapped(c))
                    for c in ([] if cond is None else split_conjuncts(cond))
                    if _offsets_read(c, var, known) is not None and not _always_true(c)]
    return out


def _unwrapped(conjunct: Expr) -> str:
    """describe_conjunct's text without the parentheses around the whole conjunct."""
    text = describe_conjunct(conjunct)
    return text[1:-1] if isinstance(conjunct, BinaryOp) and text.endswith(")") else text


def row_local_condition(conjuncts: list[Expr]) -> Expr | None:
    """The AND of row_local_conjuncts' list for one variable (None when it is empty)."""
    return _join("AND", conjuncts) if conjuncts else None


def gap_filter(spec: MatchRecognizeSpec) -> Expr | None:
    """The relevance condition of a contiguity clause without PARTITION BY, valid only
    when the backend flags each kept row whose predecessor in the whole input's ORDER BY
    order was dropped as a break (QueryPlan.break_column): under STRICT_CONTIGUITY a
    dropped row (no variable takes it, R5) ends every run waiting at it and nothing else
    reads it (R2/R6/R7 as for relevance_filter), which is what the break does; None when
    every row must be kept."""
    if spec.strategy not in GAP_STRATEGIES or spec.partition_by:
        return None
    condition, _ = relevance_filter(spec, FILTERABLE_STRATEGIES + GAP_STRATEGIES)
    return condition


def chain_gap_filter(spec: MatchRecognizeSpec) -> Expr | None:
    """gap_filter for a SQL:2016-mode clause without PARTITION BY, valid only when the
    backend searches each run of kept rows between two dropped ones as a group of its
    own (backends/spark/chain_slicing.py): a match is contiguous and never holds a row
    no variable can take, so none spans a dropped row, and without PREV/NEXT nothing
    else reads one; None when every row must be kept."""
    if spec.strategy is not None or spec.partition_by:
        return None
    condition, _ = relevance_filter(spec, (None,))
    return condition


def _keeps_every_row(spec: MatchRecognizeSpec,
                     strategies: tuple[str | None, ...] = FILTERABLE_STRATEGIES) -> str:
    if spec.strategy is None and None not in strategies:
        return "SQL:2016 mode reads consecutive rows"
    if spec.strategy not in strategies:
        return f"STRATEGY {spec.strategy} reads consecutive rows"
    if spec.window is not None and spec.window.kind == "rows":
        return "WITHIN n ROWS counts every row"
    if spec.rows_per_match == "ALL" and spec.all_rows_option == "WITH_UNMATCHED":
        return "WITH UNMATCHED ROWS outputs every row"
    exprs = list(spec.defines.values()) + [m.expr for m in spec.measures]
    for expr in exprs:
        for e in walk(expr):
            if isinstance(e, Navigation) and e.kind in ("PREV", "NEXT"):
                return f"{e.kind} reads neighbouring rows"
    return ""


def _row_local(conjunct: Expr, var: str, known: set[str]) -> bool:
    """Whether the conjunct reads nothing but var's current row (plain columns of it)."""
    offsets = _offsets_read(conjunct, var, known)
    return offsets is not None and offsets <= {0}


def _offsets_read(conjunct: Expr, var: str, known: set[str]) -> set[int] | None:
    """The physical offsets from var's current row that the conjunct reads (0: the row
    itself, -k: PREV(.., k), +k: NEXT(.., k)); None when it reads anything else (another
    variable's rows, FIRST/LAST steps, aggregates, CLASSIFIER, MATCH_NUMBER, subqueries),
    which depends on the match being built."""
    try:
        bound = bind_rows(conjunct, in_define=True, final_default=False, known_vars=known)
    except CepError:
        return None
    offsets: set[int] = set()
    for node in walk(bound):
        if isinstance(node, (Aggregate, AggregateValue, GatheredAggregate, MatchNumber,
                             Classifier, Navigation, ScalarSubquery)):
            return None
        if isinstance(node, RowValue):
            ref = node.ref
            if ref.var not in (None, var) or ref.logical != "LAST" or ref.logical_offset \
                    or ref.final:
                return None
            offsets.add(ref.physical_offset)
    return offsets


def _always_true(conjunct: Expr) -> bool:
    return isinstance(conjunct, Literal) and conjunct.value is True


def _join(op: str, parts: list[Expr]) -> Expr:
    out = parts[0]
    for p in parts[1:]:
        out = BinaryOp(op, out, p)
    return out


def relevance_line(condition: Expr | None, reason: str) -> str:
    """The EXPLAIN line of the filter (as the Spark SQL WHERE it becomes)."""
    if condition is None:
        return f"relevance filter: none, every row kept ({reason})"
    try:
        text = to_spark_sql(condition)
    except CepError:
        return ("relevance filter: not expressible in Spark SQL; applied in-process only")
    return f"relevance filter: {text} (rows no variable can take are dropped before the " \
           "shuffle)"
