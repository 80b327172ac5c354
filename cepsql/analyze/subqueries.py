"""Uncorrelated scalar subqueries in DEFINE / MEASURES, bound to constants.

A scalar subquery's value cannot depend on the match, so each backend evaluates it
once per statement (Spark: a small job before the clause's own; in-process: the local
SQL engine) and the clause is planned with a typed constant in its place. The
constant is written as ``CAST('<text>' AS <type>)`` with Spark's own text form of the
value, so the type is exactly the subquery's and no precision is lost (decimals,
timestamps, bigints). Zero rows give NULL; more than one row is an error, as in Spark.
"""
from __future__ import annotations

import datetime as dt
import math
from dataclasses import replace
from decimal import Decimal
from typing import Callable

import pyarrow as pa

from cepsql.algebra.expressions import Cast, Expr, Literal, ScalarSubquery, children
from cepsql.algebra.rowrefs import rebuild
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.errors import CepRuntimeError, CepUnsupportedError

# evaluate(subquery) -> (values as Spark's text form (None for NULL), Spark type name)
Evaluator = Callable[[ScalarSubquery], tuple[list[str | None], str]]


def has_subqueries(spec: MatchRecognizeSpec) -> bool:
    if not isinstance(spec, MatchRecognizeSpec):  # a planner's own clause form
        return False
    return any(isinstance(n, ScalarSubquery) for e in _expressions(spec) for n in _walk(e))


def bind_subqueries(spec: MatchRecognizeSpec, evaluate: Evaluator) -> MatchRecognizeSpec:
    """spec with every scalar subquery replaced by its value (each evaluated once)."""
    if not has_subqueries(spec):
        return spec
    cache: dict[str, Expr] = {}

    def constant(sub: ScalarSubquery) -> Expr:
        if sub.sql not in cache:
            values, type_name = evaluate(sub)
            if len(values) > 1:
                raise CepRuntimeError("scalar subquery returned more than one row",
                                      pos=sub.pos)
            value = values[0] if values else None
            literal = Literal(None, "null", sub.pos) if value is None else \
                Literal(value, "string", sub.pos)
            cache[sub.sql] = literal if type_name == "string" and value is not None \
                else Cast(literal, type_name, sub.pos)
        return cache[sub.sql]

    def fix(e: Expr) -> Expr:
        if isinstance(e, ScalarSubquery):
            return constant(e)
        kids = children(e)
        return rebuild(e, [fix(k) for k in kids]) if kids else e

    return replace(spec, measures=tuple(replace(m, expr=fix(m.expr)) for m in spec.measures),
                   defines={v: fix(e) for v, e in spec.defines.items()})


def reject_unbound_subqueries(spec: MatchRecognizeSpec) -> None:
    """Paths that cannot run a subquery first (table function bodies) say so."""
    for e in _expressions(spec):
        for n in _walk(e):
            if isinstance(n, ScalarSubquery):
                raise CepUnsupportedError(
                    "scalar subqueries are supported in statements run by spark.cep.sql and "
                    "cepsql.match_recognize, not in this form of the clause", pos=n.pos)


def _expressions(spec: MatchRecognizeSpec):
    yield from (m.expr for m in spec.measures)
    yield from spec.defines.values()


def _walk(e: Expr):
    yield e
    for k in children(e):
        yield from _walk(k)


def arrow_constant(table: pa.Table) -> tuple[list[str | None], str]:
    """A one-column Arrow result as (Spark text of each value, Spark type name)."""
    if table.num_columns != 1:
        raise CepUnsupportedError(
            f"a scalar subquery must return one column, not {table.num_columns}")
    column = table.column(0)
    return [_text(v) for v in column.to_pylist()], spark_type_name(column.type)


def spark_type_name(t: pa.DataType) -> str:
    """Spark's name of an Arrow scalar type (the CAST target of a subquery's value)."""
    names = {pa.int8(): "tinyint", pa.int16(): "smallint", pa.int32(): "int",
             pa.int64(): "bigint", pa.float32(): "float", pa.float64(): "double",
             pa.string(): "string", pa.large_string(): "string", pa.bool_(): "boolean",
             pa.date32(): "date"}
    if t in names:
        return names[t]
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if pa.types.is_null(t):
        return "string"
    raise CepUnsupportedError(f"a scalar subquery of type {t} is not supported")


def _text(v: object) -> str | None:
    """A value as Spark's CAST(... AS STRING) writes it (read back exactly by CAST)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        return repr(v) if not math.isinf(v) else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:  # the local engine reads TIMESTAMP text as UTC
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return v.isoformat(sep=" ")
    if isinstance(v, dt.date):
        return v.isoformat()
    return str(v)
