"""Resolve nested-value access (struct fields, array elements, map values) against the
input schema.

The parser cannot tell ``x[i]`` on an array from ``x[k]`` on a map, and Spark resolves
struct field names case-insensitively; both need the column types, which the planner has.
Array subscripts are 0-based as in Spark's ``arr[i]``; out of range (and a missing map
key) gives NULL on every backend, whatever Spark's ANSI setting, like division by zero.
"""
from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from cepsql.algebra.expressions import (ARRAY_ELEMENT, FIELD_ACCESS, MAP_VALUE, SUBSCRIPT,
                                   ColumnRef, Expr, FunctionCall, Navigation, RowValue)
from cepsql.errors import CepAnalysisError


def resolve_nested(expr: FunctionCall, schema: pa.Schema) -> FunctionCall:
    """One FIELD_ACCESS / SUBSCRIPT node (children already resolved), made concrete."""
    base = expr.args[0]
    base_type = static_type(base, schema)
    if expr.name == FIELD_ACCESS:
        wanted = str(expr.args[1].value)
        if not pa.types.is_struct(base_type):
            raise CepAnalysisError(
                f"field {wanted} of a value that is not a struct ({base_type})", pos=expr.pos)
        names = [base_type.field(i).name for i in range(base_type.num_fields)]
        match = next((n for n in names if n == wanted), None) or next(
            (n for n in names if n.lower() == wanted.lower()), None)
        if match is None:
            raise CepAnalysisError(f"no field {wanted} in struct<{', '.join(names)}>",
                                   pos=expr.pos)
        return replace(expr, args=(base, replace(expr.args[1], value=match)))
    if expr.name == SUBSCRIPT:
        if pa.types.is_map(base_type):
            return replace(expr, name=MAP_VALUE)
        if pa.types.is_list(base_type) or pa.types.is_large_list(base_type):
            return replace(expr, name=ARRAY_ELEMENT)
        raise CepAnalysisError(
            f"subscript [] needs an array or a map, not {base_type}", pos=expr.pos)
    return expr


def static_type(expr: Expr, schema: pa.Schema) -> pa.DataType:
    """The Arrow type of a column, a navigation of one, or nested access into one."""
    if isinstance(expr, ColumnRef):
        return schema.field(expr.column).type
    if isinstance(expr, Navigation):
        return static_type(expr.arg, schema)
    if isinstance(expr, RowValue):
        return static_type(expr.value, schema)
    if isinstance(expr, FunctionCall) and expr.name == FIELD_ACCESS:
        return static_type(expr.args[0], schema).field(str(expr.args[1].value)).type
    if isinstance(expr, FunctionCall) and expr.name == ARRAY_ELEMENT:
        return static_type(expr.args[0], schema).value_type
    if isinstance(expr, FunctionCall) and expr.name == MAP_VALUE:
        return static_type(expr.args[0], schema).item_type
    raise CepAnalysisError(
        "field access and subscripts apply to columns (or fields and elements of them)",
        pos=getattr(expr, "pos", None))
