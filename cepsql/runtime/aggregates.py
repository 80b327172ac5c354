"""Aggregates over pattern variables, normalized for the evaluators.

``count(A.*)``, ``sum(A.price * A.volume)``, ``avg(price)``... become AggregateValue
nodes: which rows (a variable or the whole match), which function, and which row-local
column (the argument, computed vectorised as a derived column like other row-local
expressions). ``first_value``/``last_value`` are FIRST/LAST navigation in disguise.
"""
from __future__ import annotations

import pyarrow as pa

from ..algebra.expressions import (Aggregate, AggregateValue, Classifier, ColumnRef, Expr,
                                   FunctionCall, Navigation, children, walk)
from ..algebra.rowrefs import rebuild
from ..errors import CepAnalysisError, CepUnsupportedError
from .decompose import DerivedColumns

FUNC_CODES = {"COUNT_STAR": 0, "COUNT": 1, "SUM": 2, "AVG": 3, "MIN": 4, "MAX": 5, "LIST": 6}
_NAMES = {"count": "COUNT", "sum": "SUM", "avg": "AVG", "mean": "AVG", "min": "MIN",
          "max": "MAX", "array_agg": "LIST", "collect_list": "LIST"}


def value_navigation(expr: Expr) -> Expr:
    """Rewrite first_value(x)/last_value(x) as FIRST(x)/LAST(x) (before bind_rows)."""
    if isinstance(expr, (FunctionCall, Aggregate)) and expr.name.lower() in (
            "first_value", "last_value") and len(expr.args) == 1:
        kind = "FIRST" if expr.name.lower() == "first_value" else "LAST"
        semantics = getattr(expr, "semantics", None)
        return Navigation(kind, value_navigation(expr.args[0]), 0, semantics, expr.pos)
    kids = children(expr)
    return rebuild(expr, [value_navigation(k) for k in kids]) if kids else expr


def normalize_aggregates(expr: Expr, derived: DerivedColumns, *, final_default: bool,
                         known_vars: set[str], in_define: bool) -> Expr:
    """Replace every Aggregate by an AggregateValue over a derived column."""
    if isinstance(expr, Aggregate):
        return _normalize(expr, derived, final_default, known_vars, in_define)
    kids = children(expr)
    if not kids:
        return expr
    return rebuild(expr, [normalize_aggregates(k, derived, final_default=final_default,
                                               known_vars=known_vars, in_define=in_define)
                          for k in kids])


def _normalize(agg: Aggregate, derived: DerivedColumns, final_default: bool,
               known: set[str], in_define: bool) -> AggregateValue:
    name = agg.name.lower()
    if name not in _NAMES:
        raise CepUnsupportedError(f"aggregate {agg.name}() is not supported", pos=agg.pos)
    if agg.distinct:
        raise CepUnsupportedError(f"{agg.name}(DISTINCT ...) is not supported", pos=agg.pos)
    if agg.semantics == "FINAL" and in_define:
        raise CepAnalysisError("FINAL semantics are not allowed in DEFINE", pos=agg.pos)
    final = final_default if agg.semantics is None else agg.semantics == "FINAL"
    func = _NAMES[name]
    if in_define and func == "LIST":
        raise CepUnsupportedError(f"{agg.name}() is not supported in DEFINE", pos=agg.pos)
    if agg.star_var is not None:
        var = agg.star_var or None
        _check_var(var, known, agg)
        return AggregateValue("COUNT_STAR", var, None, final, agg.pos)
    if len(agg.args) != 1:
        raise CepAnalysisError(f"{agg.name}() takes one argument", pos=agg.pos)
    arg = agg.args[0]
    qualified = set()
    for node in walk(arg):
        if isinstance(node, (Navigation, Aggregate, Classifier)):
            raise CepUnsupportedError(
                f"{agg.name}() argument must be a row expression over columns",
                pos=getattr(node, "pos", agg.pos))
        if isinstance(node, ColumnRef) and node.var is not None:
            qualified.add(node.var)
    if len(qualified) > 1:
        raise CepAnalysisError(
            f"{agg.name}() argument must reference a single pattern variable, found "
            f"{', '.join(sorted(qualified))}", pos=agg.pos)
    var = next(iter(qualified)) if qualified else None
    _check_var(var, known, agg)
    column = derived.name_for(_strip(arg))
    return AggregateValue(func, var, column, final, agg.pos)


def result_type(func: str, arg_type: pa.DataType | None) -> pa.DataType:
    """Arrow type of an aggregate's result (Spark's rules: sum of integers BIGINT, of
    DECIMAL(p, s) DECIMAL(p + 10, s), avg of DECIMAL(p, s) DECIMAL(p + 4, s + 4), both
    bounded to 38 digits; avg of anything else DOUBLE)."""
    from . import vm_types as T
    from .conditions import aggregate_lane
    if func in ("COUNT_STAR", "COUNT"):
        return pa.int64()
    if func in ("SUM", "AVG"):
        arg = T.of_arrow(arg_type)
        return T.to_arrow(aggregate_lane(func, arg)[1])
    if func == "LIST":
        return pa.list_(arg_type)
    return arg_type  # MIN / MAX gather the row holding the extreme value


def _strip(expr: Expr) -> Expr:
    if isinstance(expr, ColumnRef):
        return ColumnRef(None, expr.column, expr.pos)
    kids = children(expr)
    return rebuild(expr, [_strip(k) for k in kids]) if kids else expr


def _check_var(var: str | None, known: set[str], agg: Aggregate) -> None:
    if var is not None and var not in known:
        raise CepAnalysisError(f"unknown pattern variable {var}", pos=agg.pos)
