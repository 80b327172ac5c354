"""Vectorised evaluation of the expression IR over an Arrow table (the local backend's
counterpart of ``spark_sql``); semantics follow Spark in ANSI mode: checked integer
arithmetic, ``/`` as float division, NULL on division by zero, three-valued logic."""
from __future__ import annotations

import datetime
import math
import re
from decimal import MAX_EMAX, MIN_EMIN, ROUND_HALF_EVEN, ROUND_HALF_UP, Context, Decimal, localcontext
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cepsql.algebra import types as T
from cepsql.algebra.expressions import (ARRAY_ELEMENT, FIELD_ACCESS, MAP_VALUE, Between, BinaryOp, Case, Cast, ColumnRef, Expr, FunctionCall,
                                   InList, IsNull, Like, Literal, UnaryOp)
from cepsql.errors import CepAnalysisError, CepError, CepRuntimeError, CepUnsupportedError
from cepsql.exprs.ansi import ansi_enabled
from cepsql.exprs.json_path import json_object_at, parse_json_path
from cepsql.exprs.spark_errors import (DIVIDE_BY_ZERO, LONG_OVERFLOW, REMAINDER_BY_ZERO,
                                       arithmetic_overflow,
                                       binary_arithmetic_overflow, cast_invalid_input, cast_overflow,
                                       decimal_out_of_range, shown_product,
                                       interval_overflow)

Value = pa.Array | pa.ChunkedArray | pa.Scalar


def evaluate_arrow(expr: Expr, table: pa.Table, ansi: bool | None = None, *,
                   strict_division: bool = False) -> pa.Array | pa.ChunkedArray:
    """expr over every row of table (unqualified column references only). ansi: Spark's
    spark.sql.ansi.enabled where it changes types (default: the in-process setting,
    exprs.ansi). strict_division: every row of table is one Spark evaluates expr on (e.g.
    MEASURES over matched rows), so under ANSI a zero divisor raises DIVIDE_BY_ZERO as in
    Spark; otherwise (columns computed before matching decides which rows a DEFINE reads)
    it is NULL, as try_divide."""
    if ansi is None:
        ansi = ansi_enabled()
    try:
        value = _Evaluator(table, ansi, strict_division and ansi).value_of(expr)
    except CepError:
        raise
    except pa.ArrowInvalid as e:  # overflow, invalid cast ...
        raise CepRuntimeError(f"error evaluating expression: {e}", pos=getattr(expr, "pos", None))
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):  # Arrow's words never shown
        raise CepAnalysisError("[DATATYPE_MISMATCH] the expression's argument types do not "
                               "match what it takes", pos=getattr(expr, "pos", None)) from None
    return _broadcast(value, table.num_rows)


def _broadcast(value: Value, n: int) -> pa.Array | pa.ChunkedArray:
    if isinstance(value, pa.Scalar):
        return pa.repeat(value, n)
    return value


class _Evaluator:
    def __init__(self, table: pa.Table, ansi: bool = True, divide_by_zero_raises: bool = False):
        self.table = table
        self.n = table.num_rows
        self.ansi = ansi
        self.divide_by_zero_raises = divide_by_zero_raises
        # rows Spark evaluates the current sub-expression on (None: all): CASE / IF /
        # COALESCE branches and the right side of AND / OR are evaluated lazily by Spark,
        # so a zero divisor raises DIVIDE_BY_ZERO only on rows that reach it
        self.evaluated: pa.Array | None = None

    def value_of(self, e: Expr) -> Value:
        method = getattr(self, "_" + type(e).__name__, None)
        if method is None:
            raise CepUnsupportedError(
                f"{type(e).__name__} cannot be evaluated as a plain expression",
                pos=getattr(e, "pos", None))
        return method(e)

    def arr(self, e: Expr) -> pa.Array | pa.ChunkedArray:
        return _broadcast(self.value_of(e), self.n)

    def value_where(self, e: Expr, rows) -> Value:
        """e's value, evaluated (for DIVIDE_BY_ZERO) only on the rows where ``rows`` is
        true within the rows evaluated already -- a lazily evaluated branch."""
        if not self.divide_by_zero_raises:
            return self.value_of(e)
        outer = self.evaluated
        rows = _broadcast(pc.fill_null(rows, False), self.n)
        self.evaluated = rows if outer is None else pc.and_(outer, rows)
        try:
            return self.value_of(e)
        finally:
            self.evaluated = outer

    # leaves -------------------------------------------------------------
    def _Literal(self, e: Literal) -> Value:
        return literal_scalar(e)

    def _ColumnRef(self, e: ColumnRef) -> Value:
        if e.var is not None:
            raise CepUnsupportedError(
                f"column reference {e.var}.{e.column} cannot be evaluated as a plain expression",
                pos=e.pos)
        names = self.table.schema.names  # (column_names: 17 us for 7 columns)
        if names.count(e.column) == 1:
            return self.table.column(e.column)
        matches = [k for k, n in enumerate(names) if n.lower() == e.column.lower()]
        if len(matches) == 1:
            return self.table.column(matches[0])
        raise CepAnalysisError(f"unknown column {e.column!r}" if not matches else
                               f"ambiguous column {e.column!r}", pos=e.pos)

    # operators ----------------------------------------------------------
    def _BinaryOp(self, e: BinaryOp) -> Value:
        op = e.op.upper()
        if op in ("AND", "OR"):  # Spark skips the right side where the left decides
            a = _as_bool(self.value_of(e.left))
            undecided = pc.fill_null(a, True) if op == "AND" else \
                pc.invert(pc.fill_null(a, False))
            b = _as_bool(self.value_where(e.right, undecided))
            return pc.and_kleene(a, b) if op == "AND" else pc.or_kleene(a, b)
        months = _month_operand(e)
        if months is not None:
            value, count = months
            return add_months(self.value_of(value), count, e.pos)
        a, b = self.value_of(e.left), self.value_of(e.right)
        try:
            return self._binary(e, op, a, b)
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
            raise CepAnalysisError(
                "[DATATYPE_MISMATCH.BINARY_OP_DIFF_TYPES] the left and right operands of the "
                f"binary operator {e.op!r} have incompatible types "
                f"(\"{_spark_type_name(a.type)}\" and \"{_spark_type_name(b.type)}\")",
                pos=e.pos) from None

    def _binary(self, e: BinaryOp, op: str, a: Value, b: Value) -> Value:
        if op in _COMPARE or op in ("+", "-", "*", "%"):
            a, b = _float_with_exact(a, b, self.ansi)
        if op in _COMPARE:
            a, b = _coerce_pair(a, b)
            return spark_compare(op, a, b)
        if op in ("+", "-", "*", "/", "%") and (pa.types.is_string(a.type) or
                                                 pa.types.is_string(b.type)):
            a, b = _coerce_pair(a, b)
        if op in ("+", "-", "*") and _needs_precision_loss(op, a, b):
            return _decimal_arithmetic(op, a, b, strict=self.ansi, pos=e.pos)
        if op in _ARITHMETIC:
            return _arithmetic(op, a, b, self.ansi, e.pos)
        if op in ("/", "%") and self.divide_by_zero_raises:
            _check_divisor(a, b, e, self.evaluated)
        if op == "/":
            return _divide(a, b)
        if op == "%":
            return _modulo(a, b, self.n)
        if op == "||":
            return _concat([a, b])
        raise CepUnsupportedError(f"unsupported operator {e.op!r}", pos=e.pos)

    def _UnaryOp(self, e: UnaryOp) -> Value:
        v = self.value_of(e.operand)
        op = e.op.upper()
        if op == "NOT":
            return pc.invert(_as_bool(v))
        if op == "-":
            if not self.ansi and pa.types.is_integer(v.type):
                return pc.negate(v)   # Java's wrap-around, as Spark without ANSI
            try:
                return pc.negate_checked(v)
            except pa.ArrowInvalid as err:
                if "overflow" not in str(err):
                    raise
                raise CepRuntimeError(arithmetic_overflow(), pos=e.pos) from None
        if op == "+":
            return v
        raise CepUnsupportedError(f"unsupported operator {e.op!r}", pos=e.pos)

    def _IsNull(self, e: IsNull) -> Value:
        v = self.value_of(e.operand)
        return pc.is_valid(v) if e.negated else pc.is_null(v)

    def _InList(self, e: InList) -> Value:
        x = self.value_of(e.operand)
        out: Value = pa.scalar(False)
        for item in e.items:  # OR of equalities gives SQL's three-valued IN
            out = pc.or_kleene(out, spark_compare("=", *_coerce_pair(x, self.value_of(item))))
        return pc.invert(out) if e.negated else out

    def _Between(self, e: Between) -> Value:
        x = self.value_of(e.operand)
        out = pc.and_kleene(spark_compare(">=", *_coerce_pair(x, self.value_of(e.low))),
                            spark_compare("<=", *_coerce_pair(x, self.value_of(e.high))))
        return pc.invert(out) if e.negated else out

    def _Like(self, e: Like) -> Value:
        x = self.arr(e.operand)
        pattern = self.value_of(e.pattern)
        if isinstance(pattern, pa.Scalar):
            if not pattern.is_valid:
                out = pa.nulls(self.n, pa.bool_())
            else:
                out = pc.match_like(x, pattern.as_py())
        else:  # one vectorised pass per distinct pattern
            out = pa.nulls(self.n, pa.bool_())
            for p in pc.unique(pattern).drop_null().to_pylist():
                out = pc.if_else(pc.equal(pattern, p), pc.match_like(x, p), out)
        return pc.invert(out) if e.negated else out

    def _Case(self, e: Case) -> Value:
        if not e.whens:
            return self.value_of(e.default) if e.default is not None else pa.scalar(None)
        conds = []
        operand = self.value_of(e.operand) if e.operand is not None else None
        left = pa.array(np.ones(self.n, dtype=bool))   # rows no earlier WHEN took
        taken = []                                      # rows each WHEN takes
        for cond, _ in e.whens:
            c = self.value_where(cond, left)
            if operand is not None:
                c = spark_compare("=", *_coerce_pair(operand, c))
            conds.append(pc.fill_null(_broadcast(_as_bool(c), self.n), False))
            taken.append(pc.and_(left, conds[-1]))
            left = pc.and_(left, pc.invert(conds[-1]))
        values = [self.value_where(r, t) for (_, r), t in zip(e.whens, taken)]
        if e.default is not None:
            values.append(self.value_where(e.default, left))
        target = _common_type([v.type for v in values], self.ansi, e.pos)
        values = [_broadcast(_cast_value(v, target), self.n) for v in values]
        return pc.case_when(pc.make_struct(*conds, field_names=[f"c{i}" for i in range(len(conds))]),
                            *values)

    def _Cast(self, e: Cast) -> Value:
        v, target = self.value_of(e.operand), spark_type_to_arrow(e.to, e.pos)
        try:
            return _cast_value(v, target, strict=True)
        except (pa.ArrowInvalid, CepRuntimeError):
            if pa.types.is_string(v.type):
                return self._malformed_cast(v, target, e)
            if not (pa.types.is_integer(v.type) and pa.types.is_integer(target)):
                raise
            raise _integer_cast_overflow(v, target, e.pos) from None

    def _malformed_cast(self, v: Value, target: pa.DataType, e: Cast) -> Value:
        """A string CAST some value of which does not parse: Spark's CAST_INVALID_INPUT
        naming the first such value (as written) on the rows Spark evaluates, under ANSI;
        NULL for those values otherwise."""
        texts = [v.as_py()] if isinstance(v, pa.Scalar) else v.to_pylist()
        evaluated = [True] * len(texts) if self.evaluated is None or isinstance(v, pa.Scalar) \
            else self.evaluated.to_pylist()
        out = []
        for text, used in zip(texts, evaluated):
            try:
                out.append(None if text is None else
                           _cast_value(pa.scalar(text, pa.string()), target).as_py())
            except (pa.ArrowInvalid, CepRuntimeError):
                if self.ansi and used:
                    raise CepRuntimeError(cast_invalid_input(text, e.to), pos=e.pos) from None
                out.append(None)
        return pa.scalar(out[0], target) if isinstance(v, pa.Scalar) else pa.array(out, target)

    def _FunctionCall(self, e: FunctionCall) -> Value:
        fn = _FUNCTIONS.get(e.name.lower())
        if fn is None:
            raise CepUnsupportedError(
                f"function {e.name}() is not supported by the local evaluator", pos=e.pos)
        return fn(self, self._lazy_args(e), e)

    def _lazy_args(self, e: FunctionCall) -> list:
        """e's argument values, each evaluated (for DIVIDE_BY_ZERO) on the rows Spark
        evaluates it on: IF's branches where the condition picks them, COALESCE's
        arguments where every earlier one is NULL."""
        name = e.name.lower()
        if not self.divide_by_zero_raises or not e.args:
            return [self.value_of(a) for a in e.args]
        if name == "if" and len(e.args) == 3:
            cond = self.value_of(e.args[0])
            picked = pc.fill_null(_as_bool(_broadcast(cond, self.n)), False)
            return [cond, self.value_where(e.args[1], picked),
                    self.value_where(e.args[2], pc.invert(picked))]
        if name in ("coalesce", "nvl", "ifnull"):
            values = [self.value_of(e.args[0])]
            unset = _broadcast(pc.is_null(values[0]), self.n)   # every earlier one NULL
            for a in e.args[1:]:
                values.append(self.value_where(a, unset))
                unset = pc.and_(unset, _broadcast(pc.is_null(values[-1]), self.n))
            return values
        return [self.value_of(a) for a in e.args]


def _month_operand(e: BinaryOp) -> tuple[Expr, int] | None:
    """(other operand, signed months) when e adds or subtracts a year-month interval."""
    def months(x: Expr) -> int | None:
        return int(x.value) if isinstance(x, Literal) and x.type == "month_interval" else None
    op = e.op.upper()
    if op in ("+", "-") and months(e.right) is not None:
        return e.left, months(e.right) * (1 if op == "+" else -1)
    if op == "+" and months(e.left) is not None:
        return e.right, months(e.left)
    if months(e.left) is not None or months(e.right) is not None:
        raise CepUnsupportedError(
            "a year-month interval can only be added to or subtracted from a timestamp or a "
            "date", pos=e.pos)
    return None


def add_months(value: Value, months: int, pos: int | None = None) -> Value:
    """Spark's ``ts + INTERVAL n MONTH``: calendar months, the day of month clamped to the
    target month's last day, the time of day kept (in the timestamp's own time zone)."""
    typ = value.type
    if not (pa.types.is_timestamp(typ) or pa.types.is_date(typ)):
        raise CepAnalysisError(
            f"a year-month interval can only be added to a timestamp or a date, not {typ}",
            pos=pos)
    if isinstance(value, pa.Scalar):
        return add_months(pa.array([value.as_py()], typ), months, pos)[0]
    arr = value.combine_chunks() if isinstance(value, pa.ChunkedArray) else value
    if pa.types.is_date(typ):
        days = arr.cast(pa.date32()).to_numpy(zero_copy_only=False).astype("datetime64[D]")
        shifted = _shift_days(days, months)
        return pa.array(shifted, pa.date32(), mask=arr.is_null().to_numpy(
            zero_copy_only=False)).cast(typ)
    local = pc.local_timestamp(arr) if typ.tz is not None else arr
    us = local.cast(pa.timestamp("us")).cast(pa.int64()).to_numpy(zero_copy_only=False)
    day_us = np.int64(86_400_000_000)
    days = np.floor_divide(us, day_us)
    shifted = _shift_days(days.astype("datetime64[D]"), months).astype(np.int64)
    out = pa.array(shifted * day_us + (us - days * day_us), pa.int64(),
                   mask=arr.is_null().to_numpy(zero_copy_only=False))
    out = out.cast(pa.timestamp("us"))
    if typ.tz is not None:
        out = pc.assume_timezone(out, typ.tz, ambiguous="earliest", nonexistent="latest")
    return out.cast(typ)


def _shift_days(days: np.ndarray, months: int) -> np.ndarray:
    """datetime64[D] days moved by whole calendar months (day clamped to month end)."""
    month = days.astype("datetime64[M]")
    day_of_month = (days - month.astype("datetime64[D]")).astype(np.int64)
    target = month + np.timedelta64(months, "M")
    length = ((target + np.timedelta64(1, "M")).astype("datetime64[D]")
              - target.astype("datetime64[D]")).astype(np.int64)
    return target.astype("datetime64[D]") + np.minimum(day_of_month, length - 1)


_COMPARE: dict[str, Callable] = {
    "=": pc.equal, "<>": pc.not_equal, "!=": pc.not_equal, "<": pc.less,
    "<=": pc.less_equal, ">": pc.greater, ">=": pc.greater_equal,
}


# literals and types --------------------------------------------------------

def literal_scalar(e: Literal) -> pa.Scalar:
    """Arrow scalar with the type Spark gives the same literal."""
    t, v = e.type, e.value
    if t == "null" or v is None:
        return pa.scalar(None)
    if t == "bool":
        return pa.scalar(bool(v))
    if t == "int":
        n = int(v)
        if -2**31 <= n < 2**31:
            return pa.scalar(n, pa.int32())
        if -2**63 <= n < 2**63:
            return pa.scalar(n, pa.int64())
        return _decimal_scalar(Decimal(n))
    if t == "double":
        return pa.scalar(float(v), pa.float64())
    if t == "decimal":
        return _decimal_scalar(Decimal(str(v)))
    if t == "string":
        return pa.scalar(str(v), pa.string())
    if t == "date":
        return pa.scalar(datetime.date.fromisoformat(str(v).strip()), pa.date32())
    if t == "month_interval":
        raise CepUnsupportedError(
            "a year-month interval can only be added to or subtracted from a timestamp or a "
            "date", pos=e.pos)
    if t == "interval":
        return pa.scalar(int(v), pa.duration("us"))
    if t == "timestamp":
        ts = datetime.datetime.fromisoformat(str(v).strip())
        return pa.scalar(ts, pa.timestamp("us", tz=None if ts.tzinfo is None else "UTC"))
    raise CepUnsupportedError(f"unsupported literal type {t!r}", pos=e.pos)


def _decimal_scalar(d: Decimal) -> pa.Scalar:
    _, digits, exp = d.as_tuple()
    scale = max(-exp, 0)
    precision = max(len(digits) + max(exp, 0), scale, 1)
    if precision > 38:
        raise CepUnsupportedError(f"decimal literal {d} exceeds precision 38")
    return pa.scalar(d, pa.decimal128(precision, scale))


_SIMPLE_TYPES = {
    "boolean": pa.bool_(), "bool": pa.bool_(), "tinyint": pa.int8(), "byte": pa.int8(),
    "smallint": pa.int16(), "short": pa.int16(), "int": pa.int32(), "integer": pa.int32(),
    "bigint": pa.int64(), "long": pa.int64(), "float": pa.float32(), "real": pa.float32(),
    "double": pa.float64(), "string": pa.string(), "varchar": pa.string(), "char": pa.string(),
    "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ltz": pa.timestamp("us", tz="UTC"), "timestamp_ntz": pa.timestamp("us"),
    "binary": pa.binary(),
}
_TYPE_RE = re.compile(r"\s*([A-Za-z_]+)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?\s*\Z")


def spark_type_to_arrow(text: str, pos: int | None = None) -> pa.DataType:
    """Arrow type for a Spark SQL type name (the common scalar types)."""
    m = _TYPE_RE.match(text)
    if m:
        name = m.group(1).lower()
        if name in ("decimal", "dec", "numeric"):
            return pa.decimal128(int(m.group(2) or 10), int(m.group(3) or 0))
        if name in _SIMPLE_TYPES:
            return _SIMPLE_TYPES[name]
    raise CepUnsupportedError(f"unsupported CAST target type {text!r}", pos=pos)


def _common_type(types: list[pa.DataType], ansi: bool = True,
                 pos: int | None = None) -> pa.DataType:
    """The Arrow type of Spark's wider type: numbers meet by algebra.types' rules (the
    condition VM's too), strings of either Arrow width as string."""
    known = [t for t in types if not pa.types.is_null(t)]
    if not known:
        return pa.null()
    if all(t == known[0] for t in known):
        return known[0]
    if all(_is_numeric(t) for t in known):
        return T.to_arrow(T.common_type([T.of_arrow(t) for t in known], ansi))
    if all(pa.types.is_string(t) or pa.types.is_large_string(t) for t in known):
        return pa.string()
    raise CepAnalysisError("incompatible types: "
                           f"{', '.join(_spark_type_name(t) for t in known)}", pos=pos)


def common_type(types: list[pa.DataType], ansi: bool = True) -> pa.DataType:
    """The type Spark widens the given types to (for CASE branches, UNION ALL columns)."""
    return _common_type(types, ansi)


def cast_value(v: Value, target: pa.DataType) -> Value:
    """Implicit (non-strict) cast of v to target with this module's Spark rules."""
    return _cast_value(v, target)


def _float_with_exact(a: Value, b: Value, ansi: bool = True) -> tuple[Value, Value]:
    """FLOAT beside a DECIMAL meets it at DOUBLE (DecimalPrecision); beside an integer at
    DOUBLE under ANSI (AnsiTypeCoercion), at FLOAT without (the integer rounded to
    float32 once, then float32 arithmetic)."""
    ta, tb = a.type, b.type
    small = [pa.types.is_float32(t) or pa.types.is_float16(t) for t in (ta, tb)]
    exact = [pa.types.is_integer(t) or pa.types.is_decimal(t) for t in (ta, tb)]
    if not ((small[0] and exact[1]) or (small[1] and exact[0])):
        return a, b
    if T.float_partner(T.of_arrow(tb if small[0] else ta), ansi) == T.FLOAT:
        return (a if small[0] else _as_float(a)), (b if small[1] else _as_float(b))
    return _as_double(a), _as_double(b)


def _as_float(v: Value) -> Value:
    """An integer as FLOAT, rounded once to nearest (Spark's long -> float widening)."""
    return pc.cast(v, pa.float32(), safe=False)


def _as_double(v: Value) -> Value:
    """A number as DOUBLE, rounded once (integers beyond 2^53 too, unlike a safe cast)."""
    if pa.types.is_integer(v.type) or pa.types.is_floating(v.type):
        return pc.cast(v, pa.float64(), safe=False)
    return _cast_value(v, pa.float64())


def _is_numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def spark_compare(op: str, a: Value, b: Value) -> Value:
    """a op b with Spark's order of floating-point values: NaN equals NaN and is greater
    than every other value (Arrow's IEEE comparisons say false for any NaN). A NULL-typed
    side (``SELECT NULL AS ts``) gives NULL, where Arrow has no kernel."""
    if pa.types.is_null(a.type) or pa.types.is_null(b.type):
        n = next((len(v) for v in (a, b) if not isinstance(v, pa.Scalar)), None)
        return pa.scalar(None, pa.bool_()) if n is None else pa.nulls(n, pa.bool_())
    out = _COMPARE[op](a, b)
    if not (pa.types.is_floating(a.type) or pa.types.is_floating(b.type)):
        return out
    a_nan, b_nan = _nan_flag(a), _nan_flag(b)
    any_nan = pc.or_(a_nan, b_nan)
    if not pc.any(any_nan).as_py() if isinstance(any_nan, (pa.Array, pa.ChunkedArray)) \
            else not any_nan.as_py():
        return out
    order = pc.subtract(pc.cast(a_nan, pa.int8()), pc.cast(b_nan, pa.int8()))
    return pc.if_else(pc.fill_null(any_nan, False), _COMPARE[op](order, pa.scalar(0, pa.int8())),
                      out)


def _nan_flag(v: Value) -> Value:
    """is_nan for floating values (NULL stays NULL), False for anything else."""
    if pa.types.is_floating(v.type):
        return pc.is_nan(v)
    return pa.scalar(False)


def _coerce_pair(a: Value, b: Value) -> tuple[Value, Value]:
    """Implicit casts Arrow does not do but Spark does: string vs date/timestamp,
    naive vs zoned timestamps, NULL literals."""
    ta, tb = a.type, b.type
    if pa.types.is_null(ta) and not pa.types.is_null(tb):
        return _cast_value(a, tb), b
    if pa.types.is_null(tb) and not pa.types.is_null(ta):
        return a, _cast_value(b, ta)
    if _is_temporal(ta) and pa.types.is_string(tb):
        return a, _cast_value(b, ta, strict=True)
    if _is_temporal(tb) and pa.types.is_string(ta):
        return _cast_value(a, tb, strict=True), b
    if pa.types.is_string(tb) and (_is_numeric(ta) or pa.types.is_boolean(ta)):
        target = _string_cast_target(ta)
        return _cast_value(a, target), _string_to(b, target)
    if pa.types.is_string(ta) and (_is_numeric(tb) or pa.types.is_boolean(tb)):
        target = _string_cast_target(tb)
        return _string_to(a, target), _cast_value(b, target)
    if pa.types.is_timestamp(ta) and pa.types.is_timestamp(tb) and ta.tz != tb.tz:
        target = pa.timestamp("us", tz=ta.tz or tb.tz)
        return _cast_value(a, target), _cast_value(b, target)
    if pa.types.is_date(ta) and pa.types.is_timestamp(tb):
        return _cast_value(a, tb), b
    if pa.types.is_timestamp(ta) and pa.types.is_date(tb):
        return a, _cast_value(b, ta)
    return a, b


def _string_cast_target(t: pa.DataType) -> pa.DataType:
    """The type Spark (ANSI) casts a string to when it meets a value of type t: BIGINT
    for every integer type, DOUBLE for floating and DECIMAL values, BOOLEAN for booleans."""
    if pa.types.is_integer(t):
        return pa.int64()
    if pa.types.is_boolean(t):
        return pa.bool_()
    return pa.float64()


def _string_to(v: Value, target: pa.DataType) -> Value:
    """A string cast the way Spark's ANSI cast parses it (trimmed, '+' sign allowed);
    a malformed value is Spark's CAST_INVALID_INPUT error."""
    written = v
    v = pc.utf8_trim_whitespace(v)
    if pa.types.is_integer(target):
        v = pc.replace_substring_regex(v, pattern=r"^\+", replacement="")
    try:
        return _cast_value(v, target)
    except (pa.ArrowInvalid, CepRuntimeError):
        raise CepRuntimeError(cast_invalid_input(
            _first_malformed(v, written, target),
            _SPARK_NAMES.get(str(target), str(target)))) from None


def _first_malformed(v: Value, written: Value, target: pa.DataType) -> str | None:
    """The first value of v (prepared strings) that does not cast to target, as written:
    the one Spark's CAST_INVALID_INPUT names, reading the rows in order."""
    if isinstance(v, pa.Scalar):
        return written.as_py()
    for text, shown in zip(v.to_pylist(), written.to_pylist()):
        if text is None:
            continue
        try:
            _cast_value(pa.scalar(text, pa.string()), target)
        except (pa.ArrowInvalid, CepRuntimeError):
            return shown
    return None


_SPARK_NAMES = {"int64": "bigint", "double": "double", "bool": "boolean"}


def _is_temporal(t: pa.DataType) -> bool:
    return pa.types.is_date(t) or pa.types.is_timestamp(t)


def _cast_value(v: Value, target: pa.DataType, strict: bool = False) -> Value:
    """CAST with Spark's ANSI behaviour for the common cases: float -> int truncates,
    strings are trimmed before parsing, string -> boolean accepts Spark's spellings."""
    src = v.type
    if src == target:
        return v
    if pa.types.is_null(src):
        return pa.scalar(None, target) if isinstance(v, pa.Scalar) else pa.nulls(len(v), target)
    if pa.types.is_string(src) and target != pa.string():
        v = pc.utf8_trim_whitespace(v)
        if pa.types.is_boolean(target):
            low = pc.utf8_lower(v)
            true = pc.is_in(low, value_set=pa.array(["t", "true", "y", "yes", "1"]))
            false = pc.is_in(low, value_set=pa.array(["f", "false", "n", "no", "0"]))
            bad = pc.and_(pc.invert(pc.or_(true, false)), pc.is_valid(low))
            if pc.any(bad).as_py() if not isinstance(bad, pa.Scalar) else bad.as_py():
                raise CepRuntimeError("invalid input for CAST to boolean")
            return pc.if_else(true, True, pc.if_else(false, False, pa.scalar(None, pa.bool_())))
    if pa.types.is_decimal(src) and pa.types.is_floating(target):
        # Arrow divides in binary floating point (1.331 -> 1.3310001 as FLOAT, wrong past
        # 2^53 as DOUBLE); its string parser rounds once, as Spark's BigDecimal does
        return pc.cast(pc.cast(v, pa.string()), target)
    if pa.types.is_floating(src) and pa.types.is_integer(target):
        v = pc.trunc(v)
    if pa.types.is_integer(src) and pa.types.is_decimal(target):
        v = pc.cast(v, pa.decimal128(38, target.scale))  # then range-checked below
    if pa.types.is_timestamp(src) and pa.types.is_date(target) and src.tz is not None:
        v = pc.cast(pc.local_timestamp(v), pa.timestamp(src.unit))
    if pa.types.is_string(target) and is_nested_type(src):
        return _nested_to_string(v)
    if pa.types.is_string(target) and pa.types.is_floating(src):
        raise CepUnsupportedError("CAST of a floating-point value to string is not supported "
                                  "by the local evaluator (Spark formats differently)")
    return pc.cast(v, target, safe=True)


def _integer_cast_overflow(v: Value, target: pa.DataType, pos: int | None) -> CepRuntimeError:
    """Spark's CAST_OVERFLOW for the first integer of v outside target's range."""
    limit = 1 << (target.bit_width - 1)
    values = [v.as_py()] if isinstance(v, pa.Scalar) else v.to_pylist()
    bad = next(x for x in values if x is not None and not -limit <= x < limit)
    return CepRuntimeError(cast_overflow(bad, v.type.bit_width, target.bit_width), pos=pos)


def _as_bool(v: Value) -> Value:
    if pa.types.is_null(v.type):
        return _cast_value(v, pa.bool_())
    if not pa.types.is_boolean(v.type):
        raise CepAnalysisError(f"expected a boolean operand, got {v.type}")
    return v


# arithmetic ---------------------------------------------------------------

def _check_divisor(a: Value, b: Value, e: BinaryOp, evaluated=None) -> None:
    """Spark's ANSI Divide/Remainder: DIVIDE_BY_ZERO for a zero divisor beside a non-NULL
    dividend (NULL / 0 stays NULL), on the rows Spark evaluates the division on."""
    zero = pc.and_(pc.is_valid(a), pc.fill_null(pc.equal(b, pa.scalar(0, b.type)
                                                         if pa.types.is_integer(b.type) else 0),
                                                False))
    if evaluated is not None:
        zero = pc.and_(zero, evaluated)
    if pc.any(zero).as_py() if not isinstance(zero, pa.Scalar) else zero.as_py():
        raise CepRuntimeError(REMAINDER_BY_ZERO if e.op == "%" else DIVIDE_BY_ZERO,
                              pos=e.pos)


# operator -> Arrow's kernel
_ARITHMETIC = {"+": "add", "-": "subtract", "*": "multiply"}


def _arithmetic(op: str, a: Value, b: Value, ansi: bool, pos: int | None) -> Value:
    """Spark's a + b, a - b, a * b: integers wrap around without ANSI (Java's long and
    int arithmetic) and raise Spark's overflow error with it; intervals and timestamps
    overflow in both modes, as in Spark."""
    kernel = _ARITHMETIC[op]
    if not ansi and pa.types.is_integer(a.type) and pa.types.is_integer(b.type):
        return getattr(pc, kernel)(a, b)
    try:
        return getattr(pc, kernel + "_checked")(a, b)
    except pa.ArrowInvalid as err:
        if "overflow" not in str(err):
            raise
        raise _overflow_error(op, a, b, pos) from None


def _overflow_error(op: str, a: Value, b: Value, pos: int | None) -> CepRuntimeError:
    """The error Spark raises for an overflowing a op b, in its words."""
    ta, tb = a.type, b.type
    if pa.types.is_duration(ta) and pa.types.is_duration(tb):
        return CepRuntimeError(interval_overflow(op), pos=pos)
    if not (pa.types.is_integer(ta) and pa.types.is_integer(tb)):
        # a timestamp +- interval, an interval * n: Spark's bare java.lang.ArithmeticException
        return CepRuntimeError(LONG_OVERFLOW, pos=pos)
    if max(ta.bit_width, tb.bit_width) >= 32:
        return CepRuntimeError(arithmetic_overflow(op), pos=pos)
    x, y = _first_overflow(op, a, b, max(ta.bit_width, tb.bit_width))
    return CepRuntimeError(binary_arithmetic_overflow(x, op, y), pos=pos)


def _first_overflow(op: str, a: Value, b: Value, bits: int) -> tuple[int, int]:
    """The operands of the first row whose SMALLINT / TINYINT a op b leaves its type
    (Spark names them in its message)."""
    wide_a, wide_b = (pc.cast(v, pa.int64()) for v in (a, b))
    exact = getattr(pc, _ARITHMETIC[op])(wide_a, wide_b)
    limit = 1 << (bits - 1)
    outside = pc.or_(pc.less(exact, -limit), pc.greater_equal(exact, limit))
    row = pc.index(pc.fill_null(outside if not isinstance(outside, pa.Scalar)
                                else pa.array([outside.as_py()]), False), True).as_py()
    pick = (lambda v: v.as_py() if isinstance(v, pa.Scalar) else v[max(row, 0)].as_py())
    return pick(wide_a), pick(wide_b)


def _divide(a: Value, b: Value) -> Value:
    """Spark's a / b as try_divide: DOUBLE unless both sides are exact and one is a
    DECIMAL (then the exact quotient at Spark's result type); NULL for a zero divisor."""
    if _is_exact_decimal_pair(a, b):
        return _decimal_arithmetic("/", a, b)
    a = pc.cast(a, pa.float64())
    b = pc.cast(b, pa.float64())
    zero = pc.equal(b, 0.0)
    safe_b = pc.if_else(zero, pa.scalar(None, pa.float64()), b)
    return pc.divide(a, safe_b)


def _spark_decimal(v: Value):
    """The DECIMAL type Spark gives an exact operand beside a DECIMAL (an integer scalar is
    a literal and takes its own digits)."""
    t = T.of_arrow(v.type)
    literal = v.as_py() if isinstance(v, pa.Scalar) and t.integral else None
    return T.as_decimal(t, literal)


def _is_exact_decimal_pair(a: Value, b: Value) -> bool:
    kinds = (a.type, b.type)
    return any(pa.types.is_decimal(t) for t in kinds) and all(
        pa.types.is_decimal(t) or pa.types.is_integer(t) for t in kinds)


def _needs_precision_loss(op: str, a: Value, b: Value) -> bool:
    """Whether Spark's DECIMAL result type of a op b is beyond 38 digits before its
    adjustment (Arrow would refuse it; Spark gives up scale)."""
    if not _is_exact_decimal_pair(a, b):
        return False
    ta, tb = _spark_decimal(a), _spark_decimal(b)
    if op == "*":
        return ta.precision + tb.precision + 1 > 38
    scale = max(ta.scale, tb.scale)
    return max(ta.precision - ta.scale, tb.precision - tb.scale) + scale + 1 > 38


def _decimal_arithmetic(op: str, a: Value, b: Value, *, strict: bool = False,
                        pos: int | None = None) -> Value:
    """a op b on exact operands with a DECIMAL, as Spark computes it: exact, rounded
    HALF_UP to the result type of DecimalPrecision (allowPrecisionLoss); NULL for a zero
    divisor or a result beyond its precision (try_divide and non-ANSI arithmetic), or,
    strict (+ - * under ANSI), Spark's NUMERIC_VALUE_OUT_OF_RANGE for the latter."""
    from decimal import Context, localcontext

    out = T.arithmetic_type(op, _spark_decimal(a), _spark_decimal(b))
    quantum, limit = Decimal(1).scaleb(-out.scale), Decimal(10) ** (out.precision - out.scale)
    scalar_out = isinstance(a, pa.Scalar) and isinstance(b, pa.Scalar)
    xs = [a.as_py()] if isinstance(a, pa.Scalar) else a.to_pylist()
    ys = [b.as_py()] if isinstance(b, pa.Scalar) else b.to_pylist()
    n = max(len(xs), len(ys))
    xs, ys = (xs * n if len(xs) == 1 else xs), (ys * n if len(ys) == 1 else ys)
    apply = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y,
             "/": lambda x, y: x / y}[op]
    values = []
    with localcontext(Context(prec=120)):
        for x, y in zip(xs, ys):
            if x is None or y is None or (op == "/" and y == 0):
                values.append(None)
                continue
            exact = apply(Decimal(x), Decimal(y))
            q = exact.quantize(quantum, rounding=ROUND_HALF_UP)
            if strict and abs(q) >= limit:
                shown = shown_product(exact) if op == "*" else exact
                raise CepRuntimeError(decimal_out_of_range(shown, out.precision, out.scale),
                                      pos=pos)
            values.append(q if abs(q) < limit else None)
    result = pa.array(values, pa.decimal128(out.precision, out.scale))
    return result[0] if scalar_out else result


def _modulo(a: Value, b: Value, n: int) -> Value:
    """Java remainder (sign of the dividend), NULL when the divisor is 0."""
    target = _common_type([a.type, b.type])
    if pa.types.is_decimal(target) or not _is_numeric(target):
        raise CepUnsupportedError(f"% on {target} is not supported by the local evaluator")
    if pa.types.is_floating(target):
        target = pa.float64()
    scalar_out = isinstance(a, pa.Scalar) and isinstance(b, pa.Scalar)
    a = _broadcast(pc.cast(a, target), n if not scalar_out else 1)
    b = _broadcast(pc.cast(b, target), n if not scalar_out else 1)
    mask = pc.or_(pc.or_(pc.is_null(a), pc.is_null(b)), pc.fill_null(pc.equal(b, 0), False))
    an = np.asarray(pc.fill_null(a, 0).to_numpy(zero_copy_only=False))
    bn = np.asarray(pc.fill_null(pc.if_else(mask, pa.scalar(1, target), b), 1)
                    .to_numpy(zero_copy_only=False))
    with np.errstate(all="ignore"):
        out = np.fmod(an, bn)
    mask_np = np.asarray(mask.to_numpy(zero_copy_only=False), dtype=bool)
    result = pa.array(out, type=target, mask=mask_np)
    return result[0] if scalar_out else result


# functions ----------------------------------------------------------------

def _pmod(ev: _Evaluator, args: list, e: FunctionCall) -> Value:
    """Spark's pmod: r = a % n, and (r + n) % n when r is negative (so a negative
    divisor gives a result of its own sign)."""
    _arity(e, args, 2)
    a, b = _float_with_exact(_broadcast(args[0], ev.n), _broadcast(args[1], ev.n), ev.ansi)
    r = _modulo(a, b, ev.n)
    negative = pc.fill_null(pc.less(r, 0), False)
    if not pc.any(negative).as_py():
        return r
    divisor = pc.cast(b, r.type)
    return pc.if_else(negative, _modulo(pc.add(r, divisor), divisor, ev.n), r)


def _arity(e: FunctionCall, args: list, lo: int, hi: int | None = None) -> None:
    hi = lo if hi is None else hi
    if not lo <= len(args) <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise CepAnalysisError(f"function {e.name}() takes {want} arguments, got {len(args)}",
                               pos=e.pos)


def _unary(fn: Callable) -> Callable:
    def call(ev: _Evaluator, args: list, e: FunctionCall) -> Value:
        _arity(e, args, 1)
        return fn(args[0])
    return call


def _abs(ev: _Evaluator, args: list, e: FunctionCall) -> Value:
    """Spark's abs: integers wrap around without ANSI (abs of the minimum is itself) and
    raise its ARITHMETIC_OVERFLOW with it."""
    _arity(e, args, 1)
    if not ev.ansi and pa.types.is_integer(args[0].type):
        return pc.abs(args[0])
    try:
        return pc.abs_checked(args[0])
    except pa.ArrowInvalid as err:
        if "overflow" not in str(err):
            raise
        raise CepRuntimeError(arithmetic_overflow(), pos=e.pos) from None


def _scalar_int(v: Value, e: FunctionCall, what: str, ansi: bool = True) -> int | None:
    """A constant INT argument as Spark reads it: an integer in INT's range, a string cast
    to INT (CAST_INVALID_INPUT under ANSI, NULL otherwise), any other type refused."""
    arg_pos = next((getattr(a, "pos", None) for a in e.args[1:] if getattr(a, "pos", None)),
                   e.pos)
    if not isinstance(v, pa.Scalar):
        raise CepUnsupportedError(f"{e.name}(): the {what} must be a constant in the local "
                                  "evaluator", pos=e.pos)
    if pa.types.is_string(v.type) and v.is_valid:
        try:
            v = _string_to(v, pa.int64())
        except CepRuntimeError as err:
            if ansi:
                raise CepRuntimeError(err.message, pos=arg_pos) from None
            return None
    elif not (pa.types.is_integer(v.type) or pa.types.is_null(v.type)):
        raise CepAnalysisError(f"{e.name}(): the {what} must be an INT, got "
                               f"{_spark_type_name(v.type)}", pos=arg_pos)
    if not v.is_valid:
        return None
    value = int(v.as_py())
    if not -2**31 <= value < 2**31:
        raise CepAnalysisError(f"{e.name}(): the {what} must be an INT, got {value}", pos=arg_pos)
    return value


# Spark rounds DOUBLE and integers through java.math.BigDecimal; from this scale on 10^scale
# overflows its BigInteger ("BigInteger would overflow").
_MAX_ROUND_SCALE = 646_456_992
_WIDE_EXPONENTS = Context(prec=28, Emax=MAX_EMAX, Emin=MIN_EMIN)


def _spark_type_name(t: pa.DataType) -> str:
    """Spark's name of an Arrow type, for messages (Arrow's own names never reach users)."""
    try:
        return str(T.of_arrow(t)).upper()
    except CepError:
        return str(t).upper()


def _round_overflow(e: FunctionCall, d: int) -> CepRuntimeError:
    return CepRuntimeError(f"[ARITHMETIC_OVERFLOW] {e.name}(): 10^{abs(d)} overflows (as "
                           "in Spark, whose BigInteger cannot hold it)", pos=e.pos)


def round_overflow_error(e: Expr) -> CepRuntimeError | None:
    """The ARITHMETIC_OVERFLOW error of a round / bround call whose constant scale is
    beyond what Spark's BigInteger holds (Spark raises a bare ArithmeticException
    evaluating it on a DOUBLE); None for any other expression or scale."""
    if not (isinstance(e, FunctionCall) and e.name in ("round", "bround") and len(e.args) == 2):
        return None
    try:
        d = evaluate_arrow(e.args[1], pa.table({"_": [0]}))[0].as_py()
    except (CepError, pa.ArrowException, TypeError, ValueError):
        return None
    if not isinstance(d, int) or abs(d) <= _MAX_ROUND_SCALE:
        return None
    return _round_overflow(e, d)


def _round(ev: _Evaluator, args: list, e: FunctionCall, half_even: bool = False) -> Value:
    """round (HALF_UP) / bround (HALF_EVEN) as Spark: DOUBLE and FLOAT through the
    shortest decimal string of the double (BigDecimal.valueOf)."""
    mode = ROUND_HALF_EVEN if half_even else ROUND_HALF_UP
    _arity(e, args, 1, 2)
    x = args[0]
    d = _scalar_int(args[1], e, "scale", ev.ansi) if len(args) > 1 else 0
    if d is None:
        return pa.scalar(None, x.type)
    t = x.type
    if abs(d) > _MAX_ROUND_SCALE and not pa.types.is_decimal(t) and \
            not (pa.types.is_integer(t) and d >= 0):
        raise _round_overflow(e, d)
    if pa.types.is_decimal(t):
        return pc.round(x, ndigits=d,
                        round_mode="half_to_even" if half_even else "half_towards_infinity")
    if pa.types.is_integer(t):
        if d >= 0:
            return x
        with localcontext(_WIDE_EXPONENTS):
            return _rowwise(x, t, lambda v: int(Decimal(v).quantize(Decimal(1).scaleb(-d),
                                                                    mode)))
    if pa.types.is_floating(t):
        # Spark rounds BigDecimal(Double.toString(x)); Python's repr is the same text
        q = Decimal(1).scaleb(-d, _WIDE_EXPONENTS)

        def one(v: float) -> float:
            if math.isnan(v) or math.isinf(v):
                return v
            text = Decimal(repr(v))
            if text.as_tuple().exponent >= -d:  # no digit to drop
                return v
            return float(text.quantize(q, mode))
        with localcontext(_WIDE_EXPONENTS):
            return _rowwise(x, t, one)
    raise CepAnalysisError(f"round() needs a numeric argument, got {t}", pos=e.pos)


def _rowwise(x: Value, t: pa.DataType, fn: Callable) -> Value:
    if isinstance(x, pa.Scalar):
        return pa.scalar(None if not x.is_valid else fn(x.as_py()), t)
    return pa.array([None if v is None else fn(v) for v in x.to_pylist()], type=t)


def _floor_ceil(kernel: Callable) -> Callable:
    def call(ev: _Evaluator, args: list, e: FunctionCall) -> Value:
        _arity(e, args, 1)
        x = args[0]
        if pa.types.is_integer(x.type):
            return pc.cast(x, pa.int64())
        if pa.types.is_decimal(x.type):
            return kernel(x)
        return pc.cast(kernel(pc.cast(x, pa.float64())), pa.int64())
    return call


def _positive_only(kernel: Callable) -> Callable:
    """Spark's ln/log10 return NULL for arguments <= 0."""
    def call(x: Value) -> Value:
        x = pc.cast(x, pa.float64())
        return pc.if_else(pc.greater(x, 0.0), kernel(x), pa.scalar(None, pa.float64()))
    return call


def _to_double(kernel: Callable) -> Callable:
    return lambda x: kernel(pc.cast(x, pa.float64()))


def _power(ev: _Evaluator, args: list, e: FunctionCall) -> Value:
    _arity(e, args, 2)
    return pc.power(pc.cast(args[0], pa.float64()), pc.cast(args[1], pa.float64()))


def _greatest_least(kernel: Callable) -> Callable:
    def call(ev: _Evaluator, args: list, e: FunctionCall) -> Value:
        if len(args) < 2:
            raise CepAnalysisError(f"function {e.name}() needs at least 2 arguments", pos=e.pos)
        target = _common_type([a.type for a in args], ev.ansi, e.pos)
        return kernel(*[_cast_value(a, target) for a in args], skip_nulls=True)
    return call


def _coalesce(ev: _Evaluator, args: list, e: FunctionCall) -> Value:
    if not args:
        raise CepAnalysisError(f"function {e.name}() needs at least 1 argument", pos=e.pos)
    if e.name.lower() in ("nvl", "ifnull"):
        _arity(e, args, 2)
    target = _common_type([a.type for a in args], ev.ansi, e.pos)
    return pc.coalesce(*[_cast_value(a, target) for a in args])


def _as_string(v: Value) -> Value:
    if pa.types.is_string(v.type):
        return v
    if pa.types.is_floating(v.type):
        raise CepUnsupportedError("string conversion of floating-point values is not supported "
                                  "by the local evaluator")
    return pc.cast(v, pa.string())


def _concat(args: list) -> Value:
    if not args:
        return pa.scalar("", pa.string())
    strings = [_as_string(a) for a in args]
    if len(strings) == 1:
        return strings[0]
    return pc.binary_join_element_wise(*strings, "", null_handling="emit_null")


def _substr(ev: _Evaluator, args: list, e: FunctionCall) -> Value:
    """Spark's 1-based substring: pos 0 acts as 1, negative pos counts from the end."""
    _arity(e, args, 2, 3)
    x = _as_string(args[0])
    pos = _scalar_int(args[1], e, "position")
    length = _scalar_int(args[2], e, "length") if len(args) > 2 else 2**31 - 1
    if pos is None or length is None:
        return pa.scalar(None, pa.string())
    if length <= 0:
        return pc.if_else(pc.is_valid(x), "", pa.scalar(None, pa.string()))
    if pos > 0:
        start, stop = pos - 1, pos - 1 + length
    elif pos == 0:
        start, stop = 0, length
    else:
        start, stop = pos, (pos + length if pos + length < 0 else None)
    x = _broadcast(x, ev.n)
    return pc.utf8_slice_codeunits(x, start=start, stop=stop)


def _if(ev: _Evaluator, args: list, e: FunctionCall) -> Value:
    _arity(e, args, 3)
    cond = pc.fill_null(_as_bool(args[0]), False)
    target = _common_type([args[1].type, args[2].type], ev.ansi, e.pos)
    return pc.if_else(cond, _cast_value(args[1], target), _cast_value(args[2], target))


def _concat_fn(ev: _Evaluator, args: list, e: FunctionCall) -> Value:
    return _concat(args)


def _datepart(kernel: Callable) -> Callable:
    return lambda x: pc.cast(kernel(x), pa.int32())


def _struct_field(ev: _Evaluator, args: list, e: FunctionCall) -> Value:
    """``x.f``: the field of a struct (NULL where the struct is NULL)."""
    base, name = args[0], str(args[1].as_py())
    if isinstance(base, pa.Scalar):
        value = base[name] if base.is_valid else None
        return pa.scalar(None if value is None else value.as_py(), base.type.field(name).type)
    if isinstance(base, pa.ChunkedArray):
        base = base.combine_chunks()
    child = base.field(name)
    return child if base.null_count == 0 else pc.if_else(pc.is_null(base), None, child)


def _array_element(ev: _Evaluator, args: list, e: FunctionCall) -> Value:
    """``arr[i]``, 0-based; NULL for a NULL array or index and out of range (Spark's get)."""
    _arity(e, args, 2)
    n = _length_of(args)
    arr = _as_array(args[0], n)
    index = pc.cast(_as_array(args[1], n), pa.int64())
    lengths = pc.cast(pc.list_value_length(arr), pa.int64())
    inside = pc.and_(pc.greater_equal(index, 0), pc.less(index, lengths))
    starts = pc.cast(arr.offsets[:-1], pa.int64())  # into arr.values, slices included
    target = pc.if_else(inside, pc.add(starts, index), None)
    return pc.take(arr.values, target)


def _map_value(ev: _Evaluator, args: list, e: FunctionCall) -> Value:
    """``m[k]``: the value of key k, NULL when absent (Spark's try_element_at on a map)."""
    _arity(e, args, 2)
    base, key = args
    if isinstance(key, pa.Scalar) and not isinstance(base, pa.Scalar):
        if not key.is_valid:
            return pa.nulls(len(base), base.type.item_type)
        key = pc.cast(key, base.type.key_type)
        return pc.map_lookup(base, key, "first")
    n = _length_of(args)
    out = []
    for entries, k in zip(_as_array(base, n).to_pylist(), _as_array(key, n).to_pylist()):
        out.append(None if entries is None or k is None else
                   next((v for ek, v in entries if ek == k), None))
    return pa.array(out, base.type.item_type)


def _length_of(args: list) -> int:
    return next((len(a) for a in args if not isinstance(a, pa.Scalar)), 1)


def _as_array(v: Value, n: int) -> pa.Array:
    if isinstance(v, pa.Scalar):
        return pa.repeat(v, n)
    return v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v


# arrays, structs, strings and JSON that Spark has and Arrow spells differently ----------

def is_nested_type(t: pa.DataType) -> bool:
    """Arrays and structs: the values Arrow cannot sort nor cast to strings."""
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_struct(t)


def _nested_to_string(v: Value) -> Value:
    """CAST(array or struct AS STRING) as Spark writes it: ``[1, 2]``, ``{1, a}``,
    elements cast to string the same way and NULL elements written ``null``."""
    if isinstance(v, pa.Scalar):
        return _nested_to_string(pa.array([v.as_py()], v.type))[0]
    if isinstance(v, pa.ChunkedArray):
        v = v.combine_chunks()
    if pa.types.is_struct(v.type):
        fields = [pc.fill_null(_cast_value(v.field(i), pa.string()), "null")
                  for i in range(v.type.num_fields)]
        inner = pc.binary_join_element_wise(*fields, ", ") if fields else \
            pa.repeat(pa.scalar("", pa.string()), len(v))
    else:
        items = pc.fill_null(_cast_value(v.values, pa.string()), "null")
        lists = type(v).from_arrays(v.offsets, items)
        inner = pc.binary_join(lists, ", ")
    opening, closing = ("{", "}") if pa.types.is_struct(v.type) else ("[", "]")
    text = pc.binary_join_element_wise(opening, inner, closing, "")
    return pc.if_else(pc.is_null(v), pa.scalar(None, pa.string()), text)


def _size(ev: _Evaluator, args: list, e: FunctionCall) -> Value:
    """size / cardinality of an array or map: INT; a NULL array is NULL under ANSI, -1
    otherwise (spark.sql.legacy.sizeOfNull)."""
    _arity(e, args, 1)
    x = args[0]
    if not (pa.types.is_list(x.type) or pa.types.is_large_list(x.type)
            or pa.types.is_map(x.type) or pa.types.is_null(x.type)):
        raise CepAnalysisError(f"{e.name}() needs an array or a map, got {x.type}", pos=e.pos)
    if pa.types.is_null(x.type):
        return pa.scalar(None if ev.ansi else -1, pa.int32())
    sizes = pc.cast(pc.list_value_length(x), pa.int32())
    return sizes if ev.ansi else pc.fill_null(sizes, -1)


def _replace(ev: _Evaluator, args: list, e: FunctionCall) -> Value:
    """replace(str, search[, replacement]): every occurrence; an empty search changes
    nothing; NULL when any argument is."""
    _arity(e, args, 2, 3)
    text = _as_string(args[0])
    search, replacement = args[1], args[2] if len(args) > 2 else pa.scalar("", pa.string())
    for what, v in (("search string", search), ("replacement", replacement)):
        if not isinstance(v, pa.Scalar):
            raise CepUnsupportedError(f"{e.name}(): the {what} must be a constant in the "
                                      "local evaluator", pos=e.pos)
    if not search.is_valid or not replacement.is_valid:
        return pa.scalar(None, pa.string())
    search, replacement = str(search.as_py()), str(replacement.as_py())
    if not search:
        return text
    return pc.replace_substring(text, pattern=search, replacement=replacement)


def _get_json_object(ev: _Evaluator, args: list, e: FunctionCall) -> Value:
    """get_json_object(json, path) with a constant path (exprs/json_path.py)."""
    _arity(e, args, 2)
    path = args[1]
    if not isinstance(path, pa.Scalar):
        raise CepUnsupportedError(f"{e.name}(): the path must be a constant in the local "
                                  "evaluator", pos=e.pos)
    if path.is_valid and "*" in str(path.as_py()):
        raise CepUnsupportedError(f"{e.name}(): wildcards in the path are not supported by "
                                  "the local evaluator", pos=e.pos)
    steps = None if not path.is_valid else parse_json_path(str(path.as_py()))
    text = _as_string(args[0])
    if steps is None:
        return pa.nulls(len(text), pa.string()) if not isinstance(text, pa.Scalar) \
            else pa.scalar(None, pa.string())
    return _rowwise(text, pa.string(), lambda v: json_object_at(v, steps))


def _named_struct(ev: _Evaluator, args: list, e: FunctionCall) -> Value:
    """named_struct(name1, value1, ...): a struct (never NULL) with constant names."""
    if not args or len(args) % 2:
        raise CepAnalysisError(f"function {e.name}() needs pairs of a name and a value",
                               pos=e.pos)
    names = args[0::2]
    if not all(isinstance(n, pa.Scalar) and pa.types.is_string(n.type) and n.is_valid
               for n in names):
        raise CepAnalysisError(f"function {e.name}(): the field names must be constant "
                               "strings", pos=e.pos)
    values = [_as_array(v, ev.n) for v in args[1::2]]
    return pc.make_struct(*values, field_names=[n.as_py() for n in names])


_FUNCTIONS: dict[str, Callable] = {
    FIELD_ACCESS: _struct_field,
    ARRAY_ELEMENT: _array_element,
    MAP_VALUE: _map_value,
    "abs": _abs,
    "round": _round,
    "bround": lambda ev, args, e: _round(ev, args, e, half_even=True),
    "pmod": _pmod,
    "floor": _floor_ceil(pc.floor),
    "ceil": _floor_ceil(pc.ceil),
    "ceiling": _floor_ceil(pc.ceil),
    "sqrt": _unary(_to_double(pc.sqrt)),
    "exp": _unary(_to_double(pc.exp)),
    "ln": _unary(_positive_only(pc.ln)),
    "log10": _unary(_positive_only(pc.log10)),
    "power": _power,
    "pow": _power,
    "greatest": _greatest_least(pc.max_element_wise),
    "least": _greatest_least(pc.min_element_wise),
    "coalesce": _coalesce,
    "nvl": _coalesce,
    "ifnull": _coalesce,
    "upper": _unary(lambda x: pc.utf8_upper(_as_string(x))),
    "ucase": _unary(lambda x: pc.utf8_upper(_as_string(x))),
    "lower": _unary(lambda x: pc.utf8_lower(_as_string(x))),
    "lcase": _unary(lambda x: pc.utf8_lower(_as_string(x))),
    "length": _unary(lambda x: pc.utf8_length(_as_string(x))),
    "char_length": _unary(lambda x: pc.utf8_length(_as_string(x))),
    "substr": _substr,
    "substring": _substr,
    "concat": _concat_fn,
    "trim": _unary(lambda x: pc.utf8_trim(_as_string(x), characters=" ")),
    "ltrim": _unary(lambda x: pc.utf8_ltrim(_as_string(x), characters=" ")),
    "rtrim": _unary(lambda x: pc.utf8_rtrim(_as_string(x), characters=" ")),
    "if": _if,
    "year": _unary(_datepart(pc.year)),
    "month": _unary(_datepart(pc.month)),
    "day": _unary(_datepart(pc.day)),
    "dayofmonth": _unary(_datepart(pc.day)),
    "hour": _unary(_datepart(pc.hour)),
    "minute": _unary(_datepart(pc.minute)),
    "second": _unary(_datepart(pc.second)),
    "size": _size,
    "cardinality": _size,
    "replace": _replace,
    "get_json_object": _get_json_object,
    "named_struct": _named_struct,
}
