"""Plan-time type check of DEFINE and MEASURES, shared by the in-process and Spark paths.

Without it a type mistake surfaces wherever the expression happens to be evaluated:
an Arrow kernel error in-process, a CAST_INVALID_INPUT from a Spark task (positions in
the rewritten SQL), or an error of the condition VM. Checking the clause against the
input schema in ``plan_query`` raises one ``CepAnalysisError`` with the same wording on
both paths, located at the offending expression, before any job runs.

The check is deliberately conservative: a value whose kind it cannot tell (functions,
CASE, nested fields) is never reported, so only certain mistakes are rejected.
"""
from __future__ import annotations

from decimal import Decimal, InvalidOperation

import pyarrow as pa

from ..algebra.expressions import (Aggregate, Between, BinaryOp, Cast, Classifier, ColumnRef,
                                   Expr, InList, IsNull, Like, Literal, MatchNumber, Navigation,
                                   RowValue, UnaryOp, children)
from ..algebra.spec import MatchRecognizeSpec
from ..errors import CepAnalysisError

NUMERIC, STRING, BOOLEAN, NULL, OTHER = "numeric", "string", "boolean", "null", None
_COMPARISONS = frozenset(("=", "<>", "<", "<=", ">", ">="))
_ARITHMETIC = frozenset(("+", "-", "*", "/", "%"))
_LITERAL_KINDS = {"int": NUMERIC, "double": NUMERIC, "decimal": NUMERIC, "string": STRING,
                  "bool": BOOLEAN, "null": NULL}
_CAST_KINDS = {"int": NUMERIC, "integer": NUMERIC, "bigint": NUMERIC, "smallint": NUMERIC,
               "tinyint": NUMERIC, "double": NUMERIC, "float": NUMERIC, "decimal": NUMERIC,
               "string": STRING, "boolean": BOOLEAN}


def check_types(spec: MatchRecognizeSpec, schema: pa.Schema) -> None:
    """Raise CepAnalysisError for the first certain type mistake in DEFINE or MEASURES."""
    columns = {f.name.lower(): _arrow_kind(f.type) for f in schema}
    columns.update({_SPARK_NAME_KEY + f.name.lower(): _spark_name(f.type) for f in schema})
    for var, cond in spec.defines.items():
        kind = _kind(cond, columns)
        if kind not in (BOOLEAN, NULL, OTHER):
            raise CepAnalysisError(
                f"DEFINE {var} must be a boolean condition, got a {kind} value",
                pos=getattr(cond, "pos", None))
    for measure in spec.measures:
        _kind(measure.expr, columns)


_SPARK_NAME_KEY = "\0name:"  # columns[KEY + column]: the column's Spark type name
_INT_NAMES = {8: "tinyint", 16: "smallint", 32: "int", 64: "bigint"}


def _spark_name(t: pa.DataType) -> str:
    if pa.types.is_integer(t):
        return _INT_NAMES.get(t.bit_width, "bigint")
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    return {"float": "float", "double": "double"}.get(str(t), "a number")


def _type_name(e: Expr, columns: dict) -> str:
    """The Spark type of a numeric operand for messages: the column's type, else 'a number'."""
    while isinstance(e, (Navigation, RowValue)):
        e = e.arg if isinstance(e, Navigation) else e.value
    if isinstance(e, ColumnRef):
        return columns.get(_SPARK_NAME_KEY + e.column.lower(), "a number")
    if isinstance(e, Literal) and e.type in ("int", "double", "decimal"):
        return {"int": "int", "double": "double", "decimal": "decimal"}[e.type]
    return "a number"


def _arrow_kind(t: pa.DataType) -> str | None:
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return NUMERIC
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return STRING
    if pa.types.is_boolean(t):
        return BOOLEAN
    return OTHER


def _kind(e: Expr, columns: dict[str, str | None]) -> str | None:
    """The value kind of e (None: not known); raises on an operator misapplied below e."""
    kids = [_kind(k, columns) for k in children(e)]
    if isinstance(e, Literal):
        return _LITERAL_KINDS.get(e.type, OTHER)
    if isinstance(e, ColumnRef):
        return columns.get(e.column.lower(), OTHER)
    if isinstance(e, (Navigation, RowValue)):
        return kids[-1]
    if isinstance(e, (IsNull, InList, Between, Like)):
        return BOOLEAN
    if isinstance(e, MatchNumber):
        return NUMERIC
    if isinstance(e, Classifier):
        return STRING
    if isinstance(e, Cast):
        return _CAST_KINDS.get(e.to.lower().split("(")[0].strip(), OTHER)
    if isinstance(e, Aggregate):
        return NUMERIC if e.name.lower() == "count" else OTHER
    if isinstance(e, UnaryOp):
        return _unary(e, kids[0])
    if isinstance(e, BinaryOp):
        return _binary(e, kids[0], kids[1], columns)
    return OTHER


def _unary(e: UnaryOp, kind: str | None) -> str | None:
    if e.op == "NOT":
        _need_boolean("NOT", e.operand, kind)
        return BOOLEAN
    if e.op == "-" and kind in (STRING, BOOLEAN):
        raise CepAnalysisError(f"unary - needs a numeric operand, got a {kind} value",
                               pos=e.pos)
    return kind


def _binary(e: BinaryOp, left: str | None, right: str | None, columns: dict) -> str | None:
    if e.op in ("AND", "OR"):
        _need_boolean(e.op, e.left, left)
        _need_boolean(e.op, e.right, right)
        return BOOLEAN
    if e.op in _COMPARISONS:
        _check_comparable(e, left, right, columns)
        return BOOLEAN
    if e.op in _ARITHMETIC:
        for side, kind, other in ((e.left, left, right), (e.right, right, left)):
            if kind == BOOLEAN:
                raise CepAnalysisError(
                    f"cannot apply {e.op} to a boolean value", pos=_pos(side, e))
            if other == NUMERIC and _bad_number(side):
                raise CepAnalysisError(
                    f"cannot apply {e.op} to a number and string literal {_text(side)}",
                    pos=_pos(side, e))
        return NUMERIC if left == right == NUMERIC else OTHER
    if e.op == "||":
        return STRING
    return OTHER


def _check_comparable(e: BinaryOp, left: str | None, right: str | None, columns: dict) -> None:
    for side, kind, other, other_side in ((e.left, left, right, e.right),
                                          (e.right, right, left, e.left)):
        if other == NUMERIC and _bad_number(side):
            raise CepAnalysisError(
                f"cannot compare {_type_name(other_side, columns)} with string literal "
                f"{_text(side)}", pos=_pos(side, e))
        if {kind, other} == {NUMERIC, BOOLEAN} and kind == BOOLEAN:
            raise CepAnalysisError(
                f"cannot compare a boolean with a number using {e.op}", pos=_pos(e, e))


def _need_boolean(op: str, operand: Expr, kind: str | None) -> None:
    if kind not in (BOOLEAN, NULL, OTHER):
        raise CepAnalysisError(f"{op} needs boolean operands, got a {kind} value",
                               pos=getattr(operand, "pos", None))


def _bad_number(e: Expr) -> bool:
    """A string literal Spark would fail to cast to a number (CAST_INVALID_INPUT)."""
    if not (isinstance(e, Literal) and e.type == "string"):
        return False
    try:
        Decimal(str(e.value).strip())
    except InvalidOperation:
        return True
    return False


def _text(e: Literal) -> str:
    return "'" + str(e.value).replace("'", "''") + "'"


def _pos(node: Expr, fallback: Expr) -> int | None:
    pos = getattr(node, "pos", None)
    return pos if pos is not None else getattr(fallback, "pos", None)
