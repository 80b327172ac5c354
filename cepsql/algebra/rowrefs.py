"""Normalize navigation into row references.

Every column reference in DEFINE or MEASURES denotes a value at one row, chosen from
the match state by at most one logical step (FIRST/LAST over the rows mapped to a
variable) followed by at most one physical step (PREV/NEXT), with RUNNING or FINAL
semantics. ``bind_rows`` rewrites an expression so that each such value is a
``RowValue(ref, value)`` node, where ``value`` only mentions unqualified columns and
``CLASSIFIER()`` of that single row. Later stages (compilers, the reference evaluator)
then never reinterpret the standard's nesting rules.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from cepsql.errors import CepAnalysisError
from cepsql.algebra.expressions import (Aggregate, Between, BinaryOp, Case, Cast, Classifier,
                                        ColumnRef, Expr, FunctionCall, InList, IsNull, Like,
                                        MatchNumber, Navigation, RowRef, RowValue, UnaryOp,
                                        children, walk)


def bind_rows(expr: Expr, *, in_define: bool, final_default: bool,
              known_vars: set[str]) -> Expr:
    """Rewrite ``expr`` so every column/CLASSIFIER read is a RowValue.

    in_define: DEFINE context (FINAL is an error there). final_default: measures of ONE
    ROW PER MATCH read the final match. known_vars: primary variables and subset names.
    """
    return _bind(expr, in_define, final_default, known_vars)


def _bind(expr: Expr, in_define: bool, final_default: bool, known: set[str]) -> Expr:
    if isinstance(expr, Navigation):
        return _bind_navigation(expr, in_define, final_default, known)
    if isinstance(expr, ColumnRef):
        _check_var(expr.var, expr.pos, known)
        ref = RowRef(expr.var, final=final_default)
        return RowValue(ref, ColumnRef(None, expr.column, expr.pos), expr.pos)
    if isinstance(expr, Classifier):
        if expr.var is not None:
            _check_var(expr.var, expr.pos, known)
        ref = RowRef(expr.var, final=final_default)
        return RowValue(ref, Classifier(None, expr.pos), expr.pos)
    if isinstance(expr, Aggregate):
        if in_define and expr.semantics == "FINAL":
            raise CepAnalysisError("FINAL semantics are not allowed in DEFINE", pos=expr.pos)
        # Aggregate arguments are bound per aggregated row by the evaluators.
        return expr
    if isinstance(expr, MatchNumber):
        return expr
    return _rebuild(expr, [_bind(c, in_define, final_default, known) for c in children(expr)])


def _bind_navigation(nav: Navigation, in_define: bool, final_default: bool,
                     known: set[str]) -> Expr:
    if nav.offset < 0:
        raise CepAnalysisError(f"{nav.kind} offset must not be negative", pos=nav.pos)
    if nav.semantics == "FINAL" and in_define:
        raise CepAnalysisError("FINAL semantics are not allowed in DEFINE", pos=nav.pos)
    if nav.semantics is not None and nav.kind in ("PREV", "NEXT"):
        # RUNNING/FINAL qualify the logical step; allowed on the inner FIRST/LAST only.
        inner = nav.arg
        if not (isinstance(inner, Navigation) and inner.kind in ("FIRST", "LAST")):
            raise CepAnalysisError(
                f"RUNNING/FINAL apply to FIRST/LAST navigation, not to {nav.kind}", pos=nav.pos)
    final = final_default if nav.semantics is None else nav.semantics == "FINAL"
    if nav.kind in ("FIRST", "LAST"):
        value, var = _single_row_value(nav.arg, nav, known)
        ref = RowRef(var, nav.kind, nav.offset, 0, final)
        return RowValue(ref, value, nav.pos)
    # PREV / NEXT, possibly over FIRST/LAST
    step = -nav.offset if nav.kind == "PREV" else nav.offset
    inner = nav.arg
    if isinstance(inner, Navigation):
        if inner.kind in ("PREV", "NEXT"):
            raise CepAnalysisError(
                f"{nav.kind} cannot be nested around {inner.kind}", pos=inner.pos)
        if inner.semantics == "FINAL" and in_define:
            raise CepAnalysisError("FINAL semantics are not allowed in DEFINE", pos=inner.pos)
        if inner.offset < 0:
            raise CepAnalysisError(f"{inner.kind} offset must not be negative", pos=inner.pos)
        inner_final = final_default if inner.semantics is None else inner.semantics == "FINAL"
        value, var = _single_row_value(inner.arg, inner, known)
        ref = RowRef(var, inner.kind, inner.offset, step, inner_final)
        return RowValue(ref, value, nav.pos)
    value, var = _single_row_value(inner, nav, known)
    ref = RowRef(var, "LAST", 0, step, final)
    return RowValue(ref, value, nav.pos)


def _single_row_value(arg: Expr, nav: Navigation, known: set[str]) -> tuple[Expr, str | None]:
    """Strip variable qualifiers from a navigation argument; all must name one variable."""
    for node in walk(arg):
        if isinstance(node, Navigation):
            raise CepAnalysisError(
                f"{node.kind} cannot be nested inside {nav.kind}", pos=node.pos)
        if isinstance(node, (Aggregate, MatchNumber)):
            raise CepAnalysisError(
                f"{nav.kind} argument must be a row expression, not an aggregate or MATCH_NUMBER()",
                pos=getattr(node, "pos", nav.pos))
        if isinstance(node, (ColumnRef, Classifier)):
            _check_var(node.var, node.pos, known)
    reads_row, var = argument_label(arg, nav.kind, nav.pos)
    if not reads_row:
        raise CepAnalysisError(
            f"{nav.kind} argument must reference a column or CLASSIFIER()", pos=nav.pos)
    return _strip_vars(arg), var


def argument_label(arg: Expr, func: str, pos: int | None) -> tuple[bool, str | None]:
    """The standard's label consistency of one navigation or aggregate argument (as Trino
    applies it): its column references are all qualified by one pattern variable or all
    unqualified, and every CLASSIFIER() in it names that same variable (no argument with
    unqualified columns). Returns (whether arg reads a row at all, that variable; None
    is the universal one). pos locates the function for the CLASSIFIER() errors."""
    unqualified = [n for n in walk(arg) if isinstance(n, ColumnRef) and n.var is None]
    qualified = [n for n in walk(arg) if isinstance(n, ColumnRef) and n.var is not None]
    classifiers = [n for n in walk(arg) if isinstance(n, Classifier)]
    column_vars = {n.var for n in qualified}
    if len(column_vars) > 1:
        raise CepAnalysisError(
            f"all column references in {func}() must use the same pattern variable, "
            f"found {', '.join(sorted(column_vars))}", pos=pos)
    if qualified and unqualified:
        first = min(qualified, key=lambda n: (n.pos is None, n.pos or 0))
        raise CepAnalysisError(
            f"column references in {func}() must all use the same pattern variable or all be "
            f"unqualified: {first.var}.{first.column} is qualified, "
            f"{unqualified[0].column} is not", pos=first.pos)
    column_var = next(iter(column_vars), None)
    classifier_vars = {n.var for n in classifiers}
    if len(classifier_vars) > 1:
        raise CepAnalysisError(
            f"CLASSIFIER() calls in {func}() must all name the same pattern variable or none",
            pos=pos)
    if classifiers and (qualified or unqualified) and classifier_vars != {column_var}:
        raise CepAnalysisError(
            f"CLASSIFIER() in {func}() must name the pattern variable its column references "
            "use (none for unqualified columns)", pos=pos)
    if not (qualified or unqualified or classifiers):
        return False, None
    return True, column_var if (qualified or unqualified) else next(iter(classifier_vars))


def _strip_vars(expr: Expr) -> Expr:
    if isinstance(expr, ColumnRef):
        return ColumnRef(None, expr.column, expr.pos)
    if isinstance(expr, Classifier):
        return Classifier(None, expr.pos)
    return _rebuild(expr, [_strip_vars(c) for c in children(expr)])


def _check_var(var: str | None, pos: int | None, known: set[str]) -> None:
    if var is not None and var not in known:
        raise CepAnalysisError(f"unknown pattern variable {var}", pos=pos)


def _rebuild(expr: Expr, new_children: list[Expr]) -> Expr:
    """Copy of expr with its children (in ``children`` order) replaced."""
    if not new_children:
        return expr
    it = iter(new_children)
    if isinstance(expr, BinaryOp):
        return replace(expr, left=next(it), right=next(it))
    if isinstance(expr, (UnaryOp, IsNull, Cast)):
        return replace(expr, operand=next(it))
    if isinstance(expr, InList):
        operand = next(it)
        return replace(expr, operand=operand, items=tuple(it))
    if isinstance(expr, Between):
        return replace(expr, operand=next(it), low=next(it), high=next(it))
    if isinstance(expr, Like):
        return replace(expr, operand=next(it), pattern=next(it))
    if isinstance(expr, Case):
        operand = next(it) if expr.operand is not None else None
        whens = tuple((next(it), next(it)) for _ in expr.whens)
        default = next(it) if expr.default is not None else None
        return replace(expr, operand=operand, whens=whens, default=default)
    if isinstance(expr, (FunctionCall, Aggregate)):
        return replace(expr, args=tuple(it))
    if isinstance(expr, RowValue):
        return replace(expr, value=next(it))
    if isinstance(expr, Navigation):
        return replace(expr, arg=next(it))
    raise TypeError(f"cannot rebuild {type(expr).__name__}")


def rebuild(expr: Expr, new_children: list[Expr]) -> Expr:
    """Public form of the generic child replacement."""
    return _rebuild(expr, new_children)


def transform(expr: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Bottom-up rewrite: ``fn`` sees each node after its children were rewritten and
    returns its replacement, or None to keep it."""
    kids = children(expr)
    if kids:
        expr = _rebuild(expr, [transform(k, fn) for k in kids])
    out = fn(expr)
    return expr if out is None else out
