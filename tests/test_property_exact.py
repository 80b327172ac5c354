"""The condition VM's exact arithmetic against Python's decimal module with Spark's rules.

Each example draws operand types and a batch of value pairs; every pair is a partition
of two rows (A holds b, B holds a and the expected result r), and the DEFINE condition
``B.a op A.b`` must equal r (or both be NULL, the non-ANSI answer to an overflow).
Spark's result types (vm_types) are checked against Spark itself in test_exact_values.
"""
from __future__ import annotations

from decimal import ROUND_HALF_UP, Context, Decimal, localcontext

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cepsql
from cepsql.runtime import vm_types as T

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
