"""Render the expression IR as Spark SQL text.

Every piece of user text reaching Spark goes through here: identifiers are
backquoted, strings escaped, function names and type names validated, so the
rendered text can never carry injected SQL.
"""
from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from cepsql.algebra.expressions import (FIELD_ACCESS, SUBSCRIPT, Between, BinaryOp, Case, Cast, ColumnRef, Expr, FunctionCall,
                                   InList, IsNull, Like, Literal, UnaryOp)
from cepsql.algebra.identifiers import quote_identifier
from cepsql.errors import CepUnsupportedError

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\s*\(\s*\d+\s*(,\s*\d+\s*)?\))?\Z")
_DECIMAL_TEXT = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\Z")
_DATETIME_TEXT = re.compile(r"[0-9T:.\-+ Z]+\Z")

_BINARY_OPS = {"+", "-", "*", "=", "<>", "!=", "<", "<=", ">", ">=", "AND", "OR", "||"}


def quote_string(value: str) -> str:
    """A Spark string literal (backslash escapes are on by default in Spark SQL)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def to_spark_sql(expr: Expr, readable: bool = False, *, strict_division: bool = False) -> str:
    """Spark SQL text of expr; every compound node is parenthesised. ``readable``: literals
    as the user writes them (EXPLAIN text), not in the exact typed form Spark is sent.
    strict_division: render ``/`` and ``%`` as Spark's own operators (DIVIDE_BY_ZERO under
    ANSI), for expressions over rows Spark would evaluate them on (MEASURES over matched
    rows); otherwise try_divide / try_mod (see below)."""
    def sub(e: Expr) -> str:
        return to_spark_sql(e, readable, strict_division=strict_division)

    if isinstance(expr, Literal):
        return user_literal(expr) if readable else _literal(expr)
    if isinstance(expr, ColumnRef):
        if expr.var is not None:
            raise CepUnsupportedError(
                f"column reference {expr.var}.{expr.column} cannot be evaluated as a plain "
                "Spark expression", pos=expr.pos)
        return quote_identifier(expr.column)
    if isinstance(expr, BinaryOp):
        left, right = sub(expr.left), sub(expr.right)
        op = expr.op.upper()
        if strict_division and op in ("/", "%"):
            return f"({left} {op} {right})"
        if op == "/":
            # Spark's own division (exact DECIMAL quotient, DOUBLE for integers); a zero
            # divisor is NULL because rows are computed before matching decides which
            # rows a DEFINE reads
            return f"try_divide({left}, {right})"
        if op == "%":
            return f"try_mod({left}, {right})"
        if op not in _BINARY_OPS:
            raise CepUnsupportedError(f"unsupported operator {expr.op!r}", pos=expr.pos)
        return f"({left} {'<>' if op == '!=' else op} {right})"
    if isinstance(expr, UnaryOp):
        op = expr.op.upper()
        if op not in ("NOT", "-", "+"):
            raise CepUnsupportedError(f"unsupported operator {expr.op!r}", pos=expr.pos)
        return f"({op} {sub(expr.operand)})"
    if isinstance(expr, IsNull):
        return f"({sub(expr.operand)} IS {'NOT ' if expr.negated else ''}NULL)"
    if isinstance(expr, InList):
        items = ", ".join(sub(i) for i in expr.items)
        return f"({sub(expr.operand)} {'NOT ' if expr.negated else ''}IN ({items}))"
    if isinstance(expr, Between):
        return (f"({sub(expr.operand)} {'NOT ' if expr.negated else ''}BETWEEN "
                f"{sub(expr.low)} AND {sub(expr.high)})")
    if isinstance(expr, Like):
        return (f"({sub(expr.operand)} {'NOT ' if expr.negated else ''}LIKE "
                f"{sub(expr.pattern)})")
    if isinstance(expr, Case):
        parts = ["CASE"]
        if expr.operand is not None:
            parts.append(sub(expr.operand))
        for cond, res in expr.whens:
            parts.append(f"WHEN {sub(cond)} THEN {sub(res)}")
        if expr.default is not None:
            parts.append(f"ELSE {sub(expr.default)}")
        parts.append("END")
        return "(" + " ".join(parts) + ")"
    if isinstance(expr, Cast):
        return f"CAST({sub(expr.operand)} AS {_type_text(expr.to, expr.pos)})"
    if isinstance(expr, FunctionCall) and expr.name == FIELD_ACCESS:
        return f"{sub(expr.args[0])}.{quote_identifier(str(expr.args[1].value))}"
    if isinstance(expr, FunctionCall) and expr.name == SUBSCRIPT:
        raise CepUnsupportedError("subscripts [] are resolved against the input schema; "
                                  "this clause form does not support them", pos=expr.pos)
    if isinstance(expr, FunctionCall):
        if not _IDENT.match(expr.name):
            raise CepUnsupportedError(f"invalid function name {expr.name!r}", pos=expr.pos)
        return f"{expr.name}({', '.join(sub(a) for a in expr.args)})"
    raise CepUnsupportedError(
        f"{type(expr).__name__} cannot be evaluated as a plain Spark expression",
        pos=getattr(expr, "pos", None))


def _type_text(text: str, pos: int | None) -> str:
    if not _TYPE.match(text.strip()):
        raise CepUnsupportedError(f"unsupported CAST target type {text!r}", pos=pos)
    return text.strip()


def user_literal(lit: Literal) -> str:
    """The literal as a user writes it in SQL (``1.5``, ``-2``, ``'x'``), for text a
    person reads (EXPLAIN); Spark-typed forms such as ``(1.5BD)`` are for generated SQL."""
    if lit.type in ("int", "decimal") and lit.value is not None:
        return str(lit.value).strip().lstrip("+")
    if lit.type == "double" and lit.value is not None and math.isfinite(float(lit.value)):
        return repr(float(lit.value))
    return _literal(lit)


def _literal(lit: Literal) -> str:
    t, v = lit.type, lit.value
    if t == "null" or v is None:
        return "NULL"
    if t == "bool":
        return "TRUE" if v else "FALSE"
    if t == "int":
        n = int(v)
        if -2**31 <= n < 2**31:
            text = str(n)
        elif -2**63 <= n < 2**63:
            text = f"{n}L"  # Spark reads an out-of-int literal as bigint anyway
        else:
            text = f"{n}BD"
        return f"({text})" if n < 0 else text
    if t == "double":
        f = float(v)
        if math.isnan(f):
            return "CAST('NaN' AS DOUBLE)"
        if math.isinf(f):
            return f"CAST('{'-' if f < 0 else ''}Infinity' AS DOUBLE)"
        text = repr(f) + "D"
        return f"({text})" if f < 0 or text.startswith("-") else text
    if t == "decimal":
        text = str(v).strip().lstrip("+")
        if not _DECIMAL_TEXT.match(text):
            raise CepUnsupportedError(f"invalid decimal literal {text!r}", pos=lit.pos)
        try:
            Decimal(text)
        except InvalidOperation:  # pragma: no cover - regex already checked
            raise CepUnsupportedError(f"invalid decimal literal {text!r}", pos=lit.pos)
        return f"({text}BD)"
    if t == "string":
        return quote_string(str(v))
    if t in ("date", "timestamp"):
        return f"{t.upper()} {quote_string(str(v))}"
    if t == "month_interval":  # a year-month interval as a count of months
        return f"INTERVAL '{int(v)}' MONTH"
    if t == "interval":  # microseconds, as a day-time interval in seconds
        seconds = Decimal(int(v)).scaleb(-6)
        return f"INTERVAL '{seconds:f}' SECOND"
    raise CepUnsupportedError(f"unsupported literal type {t!r}", pos=lit.pos)
