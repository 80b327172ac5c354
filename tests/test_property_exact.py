"""The condition VM's exact arithmetic against Python's decimal module with Spark's rules.

Each example draws operand types and a batch of value pairs; every pair is a partition
of two rows (A holds b, B holds a and the expected result r), and the DEFINE condition
``B.a op A.b`` must equal r (or both be NULL, the non-ANSI answer to an overflow).
Spark's result types (algebra/types.py) are checked against Spark itself in test_exact_values.
"""
from __future__ import annotations

from decimal import ROUND_HALF_UP, Context, Decimal, localcontext

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cepsql
from cepsql.errors import CepRuntimeError
from cepsql.algebra import types as T
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                      HealthCheck.data_too_large])
OPS = ["+", "-", "*", "/", "%"]


def spark_decimal(op: str, a: Decimal, ta: T.VmType, b: Decimal, tb: T.VmType
                  ) -> Decimal | None:
    """a op b as Spark computes it: exact, HALF_UP to the result scale, NULL on
    overflow of the result precision or division by zero."""
    out = T.arithmetic_type(op, ta, tb)
    with localcontext() as ctx:
        ctx.prec = 200
        if op in ("/", "%") and b == 0:
            return None
        ops = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
               "/": lambda: a / b, "%": lambda: a % b}
        exact = ops[op]()
        q = exact.quantize(Decimal(1).scaleb(-out.scale), rounding=ROUND_HALF_UP)
        if abs(q) >= Decimal(10) ** (out.precision - out.scale):
            return None
    return q


def _decimal_values(p: int, s: int):
    top = 10 ** p - 1
    unscaled = st.one_of(st.integers(-top, top), st.sampled_from([0, 1, -1, top, -top]))
    return unscaled.map(lambda u: Decimal(u).scaleb(-s, context=Context(prec=100)))


@st.composite
def decimal_cases(draw):
    p1, p2 = draw(st.integers(1, 38)), draw(st.integers(1, 38))
    s1, s2 = draw(st.integers(0, p1)), draw(st.integers(0, p2))
    op = draw(st.sampled_from(OPS))
    pairs = draw(st.lists(st.tuples(_decimal_values(p1, s1), _decimal_values(p2, s2)),
                          min_size=1, max_size=8))
    return op, T.decimal(p1, s1), T.decimal(p2, s2), pairs


def _run(op: str, a_type: pa.DataType, b_type: pa.DataType, r_type: pa.DataType,
         pairs: list[tuple], expected: list) -> list[int]:
    """Partitions (one per pair) where B.a op A.b equals the expected value."""
    n = len(pairs)
    table = pa.table({
        "k": pa.array([k for k in range(n) for _ in range(2)], pa.int32()),
        "id": pa.array([1, 2] * n, pa.int64()),
        "a": pa.array([v for a, _ in pairs for v in (None, a)], a_type),
        "b": pa.array([v for _, b in pairs for v in (b, None)], b_type),
        "r": pa.array([v for r in expected for v in (None, r)], r_type)})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY id MEASURES B.k AS bk "
           f"PATTERN (A B) DEFINE B AS (B.a {op} A.b) = B.r "
           f"OR ((B.a {op} A.b) IS NULL AND B.r IS NULL))")
    with cepsql.planner_options(ansi=False):
        return sorted(int(k) for k in cepsql.match_recognize(sql, t=table)["bk"])


@settings(max_examples=60, **SETTINGS)
@given(decimal_cases())
def test_decimal_arithmetic_matches_spark_rules(case):
    op, ta, tb, pairs = case
    expected = [spark_decimal(op, a, ta, b, tb) for a, b in pairs]
    out = T.arithmetic_type(op, ta, tb)
    got = _run(op, T.to_arrow(ta), T.to_arrow(tb), T.to_arrow(out), pairs, expected)
    assert got == list(range(len(pairs))), (op, ta, tb, pairs, expected)


def _wrap(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


@st.composite
def integer_cases(draw):
    bits = draw(st.sampled_from([8, 16, 32, 64]))
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    values = st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, 0, 1, -1]))
    op = draw(st.sampled_from(["+", "-", "*", "%"]))
    pairs = draw(st.lists(st.tuples(values, values), min_size=1, max_size=8))
    return bits, op, pairs


@settings(max_examples=40, **SETTINGS)
@given(integer_cases())
def test_integer_arithmetic_wraps_at_the_type_width(case):
    """Without ANSI, Spark's integral + - * wrap at the operand type's width; % takes
    the dividend's sign and is NULL for a zero divisor."""
    bits, op, pairs = case
    arrow = {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[bits]
    expected = []
    for a, b in pairs:
        if op == "%":
            expected.append(None if b == 0 else _wrap(abs(a) % abs(b) * (1 if a >= 0 else -1),
                                                      bits))
        else:
            expected.append(_wrap({"+": a + b, "-": a - b, "*": a * b}[op], bits))
    got = _run(op, arrow, arrow, arrow, pairs, expected)
    assert got == list(range(len(pairs))), (bits, op, pairs, expected)


# --- FLOAT arithmetic, DECIMAL -> DOUBLE/FLOAT, CAST to integral types -------------------

def _same_row(column: str) -> str:
    """B's own value reached through A (a cross-row expression the VM computes)."""
    return f"CASE WHEN A.id > 0 THEN B.{column} END"


def _run_expr(expr: str, columns: dict[str, tuple[pa.DataType, list]], expected: list,
              r_type: pa.DataType, *, ansi: bool = False) -> list[int]:
    """Partitions (one per row of the columns) where expr equals the expected value;
    columns are read from B (row 2), A (row 1) holds the same values."""
    n = len(expected)
    arrays = {"k": pa.array([k for k in range(n) for _ in range(2)], pa.int32()),
              "id": pa.array([1, 2] * n, pa.int64()),
              "r": pa.array([v for r in expected for v in (None, r)], r_type)}
    for name, (dtype, values) in columns.items():
        arrays[name] = pa.array([v for x in values for v in (x, x)], dtype)
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY id MEASURES B.k AS bk "
           f"PATTERN (A B) DEFINE B AS ({expr}) = B.r OR (({expr}) IS NULL AND B.r IS NULL))")
    with cepsql.planner_options(ansi=ansi):
        return sorted(int(k) for k in cepsql.match_recognize(sql, t=pa.table(arrays))["bk"])


def _float32(x: float) -> float:
    return float(np.float32(x))


finite_floats = st.floats(width=32, allow_nan=False, allow_infinity=False)


@settings(max_examples=40, **SETTINGS)
@given(st.sampled_from(["+", "-", "*", "%"]),
       st.lists(st.tuples(finite_floats, finite_floats), min_size=1, max_size=8))
def test_float_arithmetic_is_float32(op, pairs):
    """FLOAT op FLOAT is computed in float32 (one rounding per operation), as Spark does."""
    with np.errstate(all="ignore"):
        expected = []
        for a, b in pairs:
            fa, fb = np.float32(a), np.float32(b)
            if op == "%":
                expected.append(None if b == 0 else float(np.fmod(fa, fb)))
            else:
                expected.append(float({"+": fa + fb, "-": fa - fb, "*": fa * fb}[op]))
    cols = {"a": (pa.float32(), [a for a, _ in pairs]), "b": (pa.float32(), [b for _, b in pairs])}
    got = _run_expr(f"B.a {op} A.b", cols, expected, pa.float32())
    assert got == list(range(len(pairs))), (op, pairs, expected)


@settings(max_examples=30, **SETTINGS)
@given(st.lists(st.tuples(finite_floats, st.integers(-(1 << 31), (1 << 31) - 1)),
                min_size=1, max_size=8), st.booleans())
def test_float_plus_int_follows_the_ansi_coercion(pairs, ansi):
    """FLOAT + INT: DOUBLE under ANSI (AnsiTypeCoercion), FLOAT without (the INT rounded
    to float32 first, the sum rounded again)."""
    if ansi:
        expected = [float(np.float32(a)) + float(i) for a, i in pairs]
        r_type = pa.float64()
    else:
        expected = [float(np.float32(a) + np.float32(i)) for a, i in pairs]
        r_type = pa.float32()
    cols = {"a": (pa.float32(), [a for a, _ in pairs]), "i": (pa.int32(), [i for _, i in pairs])}
    got = _run_expr("B.a + A.i", cols, expected, r_type, ansi=ansi)
    assert got == list(range(len(pairs))), (pairs, expected, ansi)


def _nearest_float32(d: Decimal) -> float:
    """d correctly rounded to float32 (ties to even), not through a double."""
    from fractions import Fraction
    exact = Fraction(d)
    f = np.float32(float(d))
    best = None
    for c in (np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))):
        dist = abs(Fraction(float(c)) - exact)
        even = int(np.array(c, np.float32).view(np.uint32)) % 2 == 0
        if best is None or dist < best[0] or (dist == best[0] and even):
            best = (dist, c)
    return float(best[1])


@st.composite
def wide_decimals(draw):
    p = draw(st.integers(1, 38))
    s = draw(st.integers(0, p))
    values = draw(st.lists(_decimal_values(p, s), min_size=1, max_size=8))
    return T.decimal(p, s), values


@settings(max_examples=40, **SETTINGS)
@given(wide_decimals())
def test_decimal_to_double_and_float_are_correctly_rounded(case):
    """CAST(DECIMAL AS DOUBLE/FLOAT) rounds the exact value once (Java's BigDecimal
    doubleValue/floatValue, which Spark uses), also beyond 2^53 and at 38 digits."""
    t, values = case
    cols = {"a": (T.to_arrow(t), values)}
    expr = f"CAST({_same_row('a')} AS DOUBLE)"
    assert _run_expr(expr, cols, [float(v) for v in values], pa.float64()) == \
        list(range(len(values))), (t, values)
    expr = f"CAST({_same_row('a')} AS FLOAT)"
    assert _run_expr(expr, cols, [_nearest_float32(v) for v in values], pa.float32()) == \
        list(range(len(values))), (t, values)


def test_decimal_to_double_boundaries():
    """Values that a long double (64-bit mantissa) would round onto a double midpoint."""
    values = [Decimal("9007199254740993.0001"), Decimal("9007199254740992.9999"),
              Decimal("9007199254740993.0000"), Decimal("-9007199254740995.0000"),
              Decimal("1234567890123456789012345.6789"), Decimal("0.0001")]
    cols = {"a": (pa.decimal128(38, 4), values)}
    expr = f"CAST({_same_row('a')} AS DOUBLE)"
    assert _run_expr(expr, cols, [float(v) for v in values], pa.float64()) == \
        list(range(len(values)))
    assert float(values[0]) == 9007199254740994.0 and float(values[2]) == 9007199254740992.0


_INT_BITS = {"TINYINT": 8, "SMALLINT": 16, "INT": 32, "BIGINT": 64}


def _legacy_from_double(x: float, bits: int) -> int:
    """The JVM's d2i/d2l (NaN -> 0, saturating), then the low bits for TINYINT/SMALLINT."""
    if x != x:
        return 0
    wide = 64 if bits == 64 else 32
    lo, hi = -(1 << (wide - 1)), (1 << (wide - 1)) - 1
    v = hi if x >= hi else lo if x <= lo else int(x)
    return _wrap(v, bits)


@settings(max_examples=40, **SETTINGS)
@given(st.sampled_from(sorted(_INT_BITS)), wide_decimals(),
       st.lists(st.floats(width=64), min_size=1, max_size=8))
def test_casts_to_integral_types_without_ansi(target, case, doubles):
    """Without ANSI: DECIMAL truncates toward zero and keeps the low bits; DOUBLE goes
    through the JVM's saturating conversion."""
    bits = _INT_BITS[target]
    arrow = {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[bits]
    t, values = case
    expected = [_wrap(int(v), bits) for v in values]
    got = _run_expr(f"CAST({_same_row('a')} AS {target})", {"a": (T.to_arrow(t), values)},
                    expected, arrow)
    assert got == list(range(len(values))), (target, t, values)
    expected = [_legacy_from_double(x, bits) for x in doubles]
    got = _run_expr(f"CAST({_same_row('x')} AS {target})", {"x": (pa.float64(), doubles)},
                    expected, arrow)
    assert got == list(range(len(doubles))), (target, doubles)


@settings(max_examples=30, **SETTINGS)
@given(st.sampled_from(sorted(_INT_BITS)), wide_decimals())
def test_casts_to_integral_types_under_ansi(target, case):
    """Under ANSI a value outside the type raises [CAST_OVERFLOW]; others truncate."""
    bits = _INT_BITS[target]
    arrow = {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[bits]
    t, values = case
    fits = [-(1 << (bits - 1)) <= int(v) < (1 << (bits - 1)) for v in values]
    expr = f"CAST({_same_row('a')} AS {target})"
    if all(fits):
        got = _run_expr(expr, {"a": (T.to_arrow(t), values)}, [int(v) for v in values], arrow,
                        ansi=True)
        assert got == list(range(len(values)))
    else:
        with pytest.raises(CepRuntimeError, match="CAST_OVERFLOW"):
            _run_expr(expr, {"a": (T.to_arrow(t), values)}, [0] * len(values), arrow, ansi=True)
