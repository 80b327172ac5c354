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

import re
from decimal import Decimal, InvalidOperation

import pyarrow as pa

from cepsql.algebra.expressions import (Aggregate, Between, BinaryOp, Cast, Classifier, ColumnRef,
                                   Expr, InList, IsNull, Like, Literal, MatchNumber, Navigation,
                                   RowValue, UnaryOp, children)
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.errors import CepAnalysisError

NUMERIC, STRING, BOOLEAN, NULL, OTHER = "numeric", "string", "boolean", "null", None
DATE, TIMESTAMP = "date", "timestamp"
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
                f"DEFINE {var} must be a boolean condition, got {_described(cond, kind, columns)}",
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
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_date(t):
        return "date"
    return {"float": "float", "double": "double", "bool": "boolean", "string": "string",
            "large_string": "string"}.get(str(t), "a number")


_KIND_WORDS = {NUMERIC: "a number", STRING: "a string", BOOLEAN: "a boolean",
               DATE: "a date", TIMESTAMP: "a timestamp"}


def _type_name(e: Expr, columns: dict, kind: str | None = NUMERIC) -> str:
    """The Spark type of an operand for messages: the column's type (through
    navigation), a literal's type, else a word for its kind."""
    while isinstance(e, (Navigation, RowValue)):
        e = e.arg if isinstance(e, Navigation) else e.value
    if isinstance(e, ColumnRef):
        name = columns.get(_SPARK_NAME_KEY + e.column.lower())
        if name is not None:
            return name
    if isinstance(e, Literal) and e.type in ("int", "double", "decimal", "string", "bool"):
        return {"int": "int", "double": "double", "decimal": "decimal", "string": "string",
                "bool": "boolean"}[e.type]
    return _KIND_WORDS.get(kind, "a number")


def _described(e: Expr, kind: str | None, columns: dict) -> str:
    """'a bigint value' / 'a numeric value' for messages."""
    name = _type_name(e, columns, kind)
    if name.startswith("a "):
        return f"a {kind} value"
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name.upper()} value"


def _arrow_kind(t: pa.DataType) -> str | None:
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return NUMERIC
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return STRING
    if pa.types.is_boolean(t):
        return BOOLEAN
    if pa.types.is_date(t):
        return DATE
    if pa.types.is_timestamp(t):
        return TIMESTAMP
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
            other_side = e.right if side is e.left else e.left
            target = _type_name(other_side, columns, other)
            if other == NUMERIC and _bad_literal(side, NUMERIC, target):
                raise CepAnalysisError(
                    f"cannot apply {e.op} to {target} and string literal {_text(side)}: Spark "
                    f"casts it to {_cast_target(NUMERIC, target).upper()} and that fails "
                    "(CAST_INVALID_INPUT)", pos=_pos(side, e))
        return NUMERIC if left == right == NUMERIC else OTHER
    if e.op == "||":
        return STRING
    return OTHER


def _check_comparable(e: BinaryOp, left: str | None, right: str | None, columns: dict) -> None:
    for side, kind, other, other_side in ((e.left, left, right, e.right),
                                          (e.right, right, left, e.left)):
        target = _type_name(other_side, columns, other)
        if other in (NUMERIC, DATE, TIMESTAMP, BOOLEAN) and _bad_literal(side, other, target):
            raise CepAnalysisError(
                f"cannot compare {target} with string literal {_text(side)}: Spark casts it "
                f"to {_cast_target(other, target).upper()} and that fails (CAST_INVALID_INPUT)",
                pos=_pos(side, e))
        if {kind, other} == {NUMERIC, BOOLEAN} and kind == BOOLEAN:
            raise CepAnalysisError(
                f"cannot compare a boolean with a number using {e.op}", pos=_pos(e, e))


def _cast_target(kind: str, type_name: str) -> str:
    """What Spark (ANSI) casts a string compared with this type to: BIGINT for every
    integer type, DOUBLE for floating and DECIMAL values, else the type itself."""
    if kind == NUMERIC:
        return "bigint" if type_name in _INT_NAMES.values() or type_name == "int" else "double"
    if kind == TIMESTAMP:
        return type_name if type_name.startswith("timestamp") else "timestamp"
    return kind


def _need_boolean(op: str, operand: Expr, kind: str | None) -> None:
    if kind not in (BOOLEAN, NULL, OTHER):
        raise CepAnalysisError(f"{op} needs boolean operands, got a {kind} value",
                               pos=getattr(operand, "pos", None))


_BOOL_SPELLINGS = frozenset(("t", "true", "y", "yes", "1", "f", "false", "n", "no", "0"))
_INT_SYNTAX = re.compile(r"[+-]?\d+")
_DOUBLE_SPECIAL = re.compile(r"[+-]?(inf|infinity|nan)", re.I)
_DATE_SYNTAX = re.compile(r"[+-]?\d{4,}(-\d{1,2}(-\d{1,2}([ T].*)?)?)?")


def _bad_literal(e: Expr, kind: str, type_name: str) -> bool:
    """Whether a string literal compared with a value of this kind fails Spark's ANSI
    cast: integers take integer syntax only ('1.5' fails against BIGINT), floating and
    decimal values any double syntax, dates and timestamps an ISO date prefix, booleans
    Spark's spellings. Unknown cases are never reported."""
    if not (isinstance(e, Literal) and e.type == "string"):
        return False
    text = str(e.value).strip()
    if kind == NUMERIC:
        if _cast_target(kind, type_name) == "bigint":
            return not (_INT_SYNTAX.fullmatch(text) and -2**63 <= int(text) < 2**63)
        if _DOUBLE_SPECIAL.fullmatch(text):
            return False
        try:
            Decimal(text)
        except InvalidOperation:
            return True
        return False
    if kind in (DATE, TIMESTAMP):
        return not _DATE_SYNTAX.fullmatch(text)
    if kind == BOOLEAN:
        return text.lower() not in _BOOL_SPELLINGS
    return False


def _text(e: Literal) -> str:
    return "'" + str(e.value).replace("'", "''") + "'"


def _pos(node: Expr, fallback: Expr) -> int | None:
    pos = getattr(node, "pos", None)
    return pos if pos is not None else getattr(fallback, "pos", None)
