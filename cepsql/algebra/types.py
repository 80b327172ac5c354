"""Spark's types for the condition VM's values, and Spark's rules for combining them.

The compiler gives every value on the VM stack a static Spark type. Exact types
(integral, DECIMAL, TIMESTAMP, DATE, day-time INTERVAL) live in the VM's 128-bit lane
(DECIMAL as the unscaled integer), DOUBLE/FLOAT, BOOLEAN and string ranks in the double
lane (a FLOAT value is held exactly as a double and every FLOAT result is rounded back to
32 bits, as Spark computes FLOAT arithmetic in float32). Result types follow Spark's type coercion and DecimalPrecision
(``spark.sql.decimalOperations.allowPrecisionLoss=true``), so the VM computes exactly
the value Spark computes for the same expression.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Context, Decimal

import pyarrow as pa

from cepsql.errors import CepUnsupportedError

MAX_PRECISION = 38
INTEGRAL_WIDTH = {"byte": 8, "short": 16, "int": 32, "bigint": 64}
_INTEGRAL_DIGITS = {"byte": 3, "short": 5, "int": 10, "bigint": 20}
EXACT = frozenset(("byte", "short", "int", "bigint", "decimal", "timestamp", "date", "interval"))


@dataclass(frozen=True)
class VmType:
    """A Spark type as the VM sees it; precision/scale only for decimal."""
    name: str
    precision: int = 0
    scale: int = 0

    @property
    def exact(self) -> bool:
        return self.name in EXACT

    @property
    def integral(self) -> bool:
        return self.name in INTEGRAL_WIDTH

    @property
    def numeric(self) -> bool:
        return self.integral or self.name in ("decimal", "double", "float")

    @property
    def floating(self) -> bool:
        return self.name in ("double", "float")

    @property
    def width(self) -> int:
        return INTEGRAL_WIDTH.get(self.name, 64)

    def __str__(self) -> str:
        return f"decimal({self.precision},{self.scale})" if self.name == "decimal" else self.name


DOUBLE, BOOLEAN, STRING = VmType("double"), VmType("boolean"), VmType("string")
FLOAT = VmType("float")
CLASSIFIER, NULL, BIGINT, INT = VmType("classifier"), VmType("null"), VmType("bigint"), VmType("int")
TIMESTAMP, DATE, INTERVAL = VmType("timestamp"), VmType("date"), VmType("interval")


def decimal(precision: int, scale: int) -> VmType:
    return VmType("decimal", precision, scale)


def bounded(precision: int, scale: int) -> VmType:
    """DecimalType.bounded."""
    return decimal(min(precision, MAX_PRECISION), min(scale, MAX_PRECISION))


def adjust(precision: int, scale: int) -> VmType:
    """DecimalType.adjustPrecisionScale: keep the integral digits, give up scale (down
    to 6 digits) when the exact result type would exceed 38 digits."""
    if precision <= MAX_PRECISION:
        return decimal(precision, scale)
    int_digits = precision - scale
    min_scale = min(scale, 6)
    return decimal(MAX_PRECISION, max(MAX_PRECISION - int_digits, min_scale))


def of_arrow(dtype: pa.DataType) -> VmType:
    """The Spark type of an Arrow column (as Spark hands it to Python)."""
    if pa.types.is_boolean(dtype):
        return BOOLEAN
    if pa.types.is_integer(dtype):
        return VmType({8: "byte", 16: "short", 32: "int"}.get(dtype.bit_width, "bigint"))
    if pa.types.is_floating(dtype):
        return FLOAT if dtype.bit_width <= 32 else DOUBLE
    if pa.types.is_decimal(dtype):
        if dtype.precision > MAX_PRECISION:
            raise CepUnsupportedError(f"cannot compare values of type {dtype} across rows")
        return decimal(dtype.precision, dtype.scale)
    if pa.types.is_timestamp(dtype):
        return TIMESTAMP
    if pa.types.is_date(dtype):
        return DATE
    if pa.types.is_duration(dtype):
        return INTERVAL
    if pa.types.is_time(dtype):
        return BIGINT
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return STRING
    raise CepUnsupportedError(f"cannot compare values of type {dtype} across rows")


def to_arrow(t: VmType) -> pa.DataType:
    if t.name == "decimal":
        return pa.decimal128(t.precision, t.scale)
    return {"byte": pa.int8(), "short": pa.int16(), "int": pa.int32(), "bigint": pa.int64(),
            "double": pa.float64(), "float": pa.float32(), "boolean": pa.bool_(), "string": pa.string(),
            "timestamp": pa.timestamp("us", "UTC"), "date": pa.date32(),
            "interval": pa.duration("us")}[t.name]


def integer_literal(value: int) -> VmType:
    """An integer literal's type: INT when it fits 32 bits, else BIGINT, else DECIMAL."""
    if -(1 << 31) <= value < (1 << 31):
        return INT
    if -(1 << 63) <= value < (1 << 63):
        return BIGINT
    digits = len(str(abs(value)))
    if digits > MAX_PRECISION:
        raise CepUnsupportedError(f"integer literal {value} exceeds DECIMAL(38, 0)")
    return decimal(digits, 0)


def decimal_literal(text: str) -> tuple[VmType, int]:
    """A decimal literal's type and unscaled value (Spark: DECIMAL(max(p, s), s))."""
    d = Decimal(text)
    sign, digits, exponent = d.as_tuple()
    scale = max(-exponent, 0)
    unscaled = int(d.scaleb(scale, context=Context(prec=100)))  # exact, not 28 digits
    precision = max(len(str(abs(unscaled))) if unscaled else 1, scale)
    if precision > MAX_PRECISION:
        raise CepUnsupportedError(f"decimal literal {text} exceeds precision 38")
    return decimal(precision, scale), unscaled


def as_decimal(t: VmType, literal: int | None = None) -> VmType:
    """An integral operand beside a decimal: DECIMAL(3/5/10/20, 0), or the literal's own
    digits (spark.sql.legacy.literal.pickMinimumPrecision)."""
    if t.name == "decimal":
        return t
    if literal is not None:
        return decimal(max(len(str(abs(literal))), 1), 0)
    return decimal(_INTEGRAL_DIGITS[t.name], 0)


def wider_decimal(a: VmType, b: VmType) -> VmType:
    """DecimalPrecision.widerDecimalType (comparisons, CASE, COALESCE, GREATEST). Since
    Spark 4.0 (SPARK-45905) a type beyond 38 digits keeps its integral digits and gives
    up scale (boundedPreferIntegralDigits): DECIMAL(38,20) vs DECIMAL(38,19) compare at
    DECIMAL(38,19), the first rounded HALF_UP."""
    scale = max(a.scale, b.scale)
    rng = max(a.precision - a.scale, b.precision - b.scale)
    if rng + scale <= MAX_PRECISION:
        return decimal(rng + scale, scale)
    return decimal(MAX_PRECISION, max(0, scale - (rng + scale - MAX_PRECISION)))


def wider_integral(a: VmType, b: VmType) -> VmType:
    return a if a.width >= b.width else b


def arithmetic_type(op: str, a: VmType, b: VmType) -> VmType:
    """Result type of a +,-,*,/,% b for two decimals (after integral promotion)."""
    p1, s1, p2, s2 = a.precision, a.scale, b.precision, b.scale
    if op in ("+", "-"):
        scale = max(s1, s2)
        return adjust(max(p1 - s1, p2 - s2) + scale + 1, scale)
    if op == "*":
        return adjust(p1 + p2 + 1, s1 + s2)
    if op == "/":
        scale = max(6, s1 + p2 + 1)
        return adjust(p1 - s1 + s2 + scale, scale)
    scale = max(s1, s2)  # % and pmod
    return adjust(min(p1 - s1, p2 - s2) + scale, scale)


def common_type(types: list[VmType], ansi: bool = True) -> VmType:
    """The type CASE branches, COALESCE and GREATEST/LEAST arguments are cast to."""
    known = [t for t in types if t.name != "null"]
    if not known:
        return NULL
    out = known[0]
    for t in known[1:]:
        out = _wider(out, t, ansi)
    return out


def float_partner(other: VmType, ansi: bool) -> VmType:
    """The type a FLOAT and another number meet at: FLOAT with FLOAT, and with integers
    when ANSI is off (TypeCoercion); DOUBLE with DOUBLE or DECIMAL, and with integers
    under ANSI (AnsiTypeCoercion: a float cannot hold every INT)."""
    if other.name in ("float", "null") or (other.integral and not ansi):
        return FLOAT
    return DOUBLE


def _wider(a: VmType, b: VmType, ansi: bool = True) -> VmType:
    if a == b:
        return a
    if a.numeric and b.numeric:
        if "double" in (a.name, b.name):
            return DOUBLE
        if "float" in (a.name, b.name):
            return float_partner(b if a.name == "float" else a, ansi)
        if a.integral and b.integral:
            return wider_integral(a, b)
        return wider_decimal(as_decimal(a), as_decimal(b))
    # Spark has no common type for BOOLEAN and a number (DATATYPE_MISMATCH.DATA_DIFF_TYPES)
    raise TypeError(f"{a} and {b} have no common type")


def sum_type(t: VmType) -> VmType:
    """sum(): integral -> BIGINT, DECIMAL(p, s) -> DECIMAL(min(38, p + 10), s), else DOUBLE."""
    if t.integral:
        return BIGINT
    if t.name == "decimal":
        return bounded(t.precision + 10, t.scale)
    if t.name == "interval":
        return INTERVAL
    return DOUBLE


def avg_type(t: VmType) -> VmType:
    """avg(): DECIMAL(p, s) -> DECIMAL(p + 4, s + 4) bounded, anything else DOUBLE."""
    if t.name == "decimal":
        return bounded(t.precision + 4, t.scale + 4)
    if t.name == "interval":
        return INTERVAL
    return DOUBLE
