"""Exact values in the condition VM: DECIMAL, BIGINT beyond 2^53, TIMESTAMP, NaN, overflow.

Each case is a cross-row condition between consecutive rows (A = the previous row, B the
current one). Spark evaluates the same expression with LAG over the same typed rows;
the B rows it accepts must be exactly the rows where cepsql finds a match, in SQL:2016
mode and in CEP mode, through spark.cep.sql and through cepsql.match_recognize.
"""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

import cepsql
from cepsql.errors import CepRuntimeError

BASE_NS = 1_700_000_000_000_000_000
T0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
INT_MAX = 2 ** 31 - 1


def _micros(n: int) -> dt.datetime:
    return T0 + dt.timedelta(microseconds=n)


# column -> (Spark type, Arrow type, values); row i has id i + 1
COLUMNS = {
    "price": ("DECIMAL(18,6)", pa.decimal128(18, 6), [
        Decimal("100.000000"), Decimal("100.050000"), Decimal("100.100025"),
        Decimal("100.150076"), Decimal("100.150075"), None, Decimal("100.200151"),
        Decimal("0.000001"), Decimal("999999999999.999999"), Decimal("-0.000001")]),
    "ts_ns": ("BIGINT", pa.int64(), [
        BASE_NS, BASE_NS + 100, BASE_NS + 100, BASE_NS + 99, BASE_NS + 200, None,
        BASE_NS + 300, BASE_NS + 301, BASE_NS + 401, BASE_NS + 400]),
    "wide": ("DECIMAL(38,10)", pa.decimal128(38, 10), [
        Decimal("1234567890123456789012345678.0000000001"),
        Decimal("1234567890123456789012345678.0000000002"),
        Decimal("1234567890123456789012345678.0000000002"),
        Decimal("1234567890123456789012345678.0000000001"),
        Decimal("-9999999999999999999999999999.9999999999"),
        Decimal("9999999999999999999999999999.9999999999"), None,
        Decimal("0.0000000001"), Decimal("0.0000000000"), Decimal("-0.0000000001")]),
    "x": ("DOUBLE", pa.float64(), [
        1.0, float("nan"), float("nan"), 2.0, float("inf"), float("nan"), -0.0, 0.0, None,
        float("-inf")]),
    "i": ("INT", pa.int32(), [
        INT_MAX, 1, INT_MAX, -INT_MAX - 1, -1, 7, None, -7, 3, 0]),
    "ts": ("TIMESTAMP", pa.timestamp("us", "UTC"), [
        _micros(0), _micros(999_999), _micros(1_999_999), _micros(3_000_000),
        _micros(3_000_001), None, _micros(5_000_000), _micros(5_000_000),
        _micros(6_000_001), _micros(6_999_999)]),
}
N = 10

# (DEFINE condition of B, the same condition in Spark over p = LAG(col) and c = col)
CASES = [
    ("B.price > A.price * 1.0005", "c_price > p_price * 1.0005"),
    ("B.price - A.price * 1.0005 >= 0", "c_price - p_price * 1.0005 >= 0"),
    ("B.price / A.price > 1.0005", "c_price / p_price > 1.0005"),
    ("B.price * A.price > 10000.01", "c_price * p_price > 10000.01"),
    ("B.price % A.price < 0.05", "c_price % p_price < 0.05"),
    ("B.ts_ns > PREV(B.ts_ns)", "c_ts_ns > p_ts_ns"),
    ("B.ts_ns - A.ts_ns = 100", "c_ts_ns - p_ts_ns = 100"),
    ("B.ts_ns > A.ts_ns + 99", "c_ts_ns > p_ts_ns + 99"),
    ("B.wide > A.wide", "c_wide > p_wide"),
    ("B.wide = A.wide", "c_wide = p_wide"),
    ("B.wide - A.wide > 0", "c_wide - p_wide > 0"),
    ("B.wide + A.wide >= 0.00000001", "c_wide + p_wide >= 0.00000001"),
    ("B.x > A.x", "c_x > p_x"),
    ("B.x = A.x", "c_x = p_x"),
    ("B.x <= A.x", "c_x <= p_x"),
    ("greatest(A.x, B.x) = B.x", "greatest(p_x, c_x) = c_x"),
    ("B.x > A.price", "c_x > p_price"),
    ("B.i > A.i", "c_i > p_i"),
    ("B.i % A.i = 0", "c_i % p_i = 0"),
    ("B.ts - A.ts < INTERVAL '1' SECOND", "c_ts - p_ts < INTERVAL '1' SECOND"),
    ("B.ts > A.ts + INTERVAL '1' SECOND", "c_ts > p_ts + INTERVAL '1' SECOND"),
    ("B.ts = A.ts", "c_ts = p_ts"),
]
# conditions that overflow on these rows: NULL without ANSI, an error with it
OVERFLOWS = [
    ("B.i + A.i < 0", "c_i + p_i < 0"),
    ("B.wide * A.wide * 1000 > 0", "c_wide * p_wide * 1000 > 0"),
]


def _rows() -> list[dict]:
    return [{"id": k + 1, **{name: col[2][k] for name, col in COLUMNS.items()}}
            for k in range(N)]


def _arrow() -> pa.Table:
    arrays = {"id": pa.array(range(1, N + 1), pa.int64())}
    for name, (_, arrow_type, values) in COLUMNS.items():
        arrays[name] = pa.array(values, arrow_type)
    return pa.table(arrays)


@pytest.fixture(scope="module")
def exact_view(spark):
    schema = "id BIGINT, " + ", ".join(f"{n} {t}" for n, (t, _, _) in COLUMNS.items())
    spark.createDataFrame([tuple(r.values()) for r in _rows()], schema) \
        .createOrReplaceTempView("exact_rows")
    return "exact_rows"


def _query(cond: str, cep: bool) -> str:
    strategy = "STRATEGY STRICT_CONTIGUITY " if cep else ""
    return ("SELECT * FROM exact_rows MATCH_RECOGNIZE (ORDER BY id MEASURES B.id AS bid "
            f"ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW {strategy}PATTERN (A B) "
            f"DEFINE B AS {cond})")


def _oracle(spark, cond: str) -> list[int]:
    return _oracles(spark, [cond])[0]


def _oracles(spark, conds: list[str]) -> list[list[int]]:
    """Spark's own answer for every condition, in one query."""
    lags = ", ".join(f"{n} AS c_{n}, LAG({n}) OVER (ORDER BY id) AS p_{n}" for n in COLUMNS)
    flags = ", ".join(f"({c}) AS ok{k}" for k, c in enumerate(conds))
    rows = spark.sql(f"SELECT id, {flags} FROM (SELECT id, {lags} FROM exact_rows) "
                     "WHERE id > 1 ORDER BY id").collect()
    return [[r.id for r in rows if r[f"ok{k}"]] for k in range(len(conds))]


def _spark_ids(spark, cond: str, cep: bool) -> list[int]:
    return sorted(r.bid for r in spark.cep.sql(_query(cond, cep)).collect())


def _local_ids(cond: str, cep: bool) -> list[int]:
    return sorted(int(v) for v in cepsql.match_recognize(_query(cond, cep),
                                                         exact_rows=_arrow())["bid"])


@pytest.fixture(scope="module")
def spark_answers(spark, exact_view):
    """(Spark's answers, spark.cep.sql's answers per (case, mode)): every case and both
    modes in one statement, so the suite pays for one Spark job per side."""
    expected = _oracles(spark, [c for _, c in CASES])
    parts = [f"SELECT {k} AS k, {int(cep)} AS cep, bid FROM ({_query(cond, cep)})"
             for k, (cond, _) in enumerate(CASES) for cep in (False, True)]
    got: dict[tuple[int, int], list[int]] = {}
    for r in spark.cep.sql(" UNION ALL ".join(parts)).collect():
        got.setdefault((r.k, r.cep), []).append(r.bid)
    return expected, got


@pytest.mark.parametrize("case", range(len(CASES)), ids=[c for c, _ in CASES])
def test_matches_spark_on_boundary_values(spark_answers, case):
    expected, got = spark_answers
    cond = CASES[case][0]
    for cep in (False, True):
        assert sorted(got.get((case, int(cep)), [])) == expected[case], (cond, cep)
        assert _local_ids(cond, cep) == expected[case], (cond, cep)


def test_cases_cover_both_outcomes(spark_answers):
    """The boundary rows make most conditions true somewhere and false somewhere."""
    expected, _ = spark_answers
    assert sum(0 < len(ids) < N - 1 for ids in expected) >= len(CASES) - 2


@pytest.mark.parametrize("cond,spark_cond", OVERFLOWS)
def test_overflow_is_null_without_ansi(spark, exact_view, cond, spark_cond):
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        expected = _oracle(spark, spark_cond)
        for cep in (False, True):
            assert _spark_ids(spark, cond, cep) == expected
            with cepsql.planner_options(ansi=False):
                assert _local_ids(cond, cep) == expected
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")


@pytest.mark.parametrize("cond,spark_cond", OVERFLOWS)
def test_overflow_raises_under_ansi(spark, exact_view, cond, spark_cond):
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        with pytest.raises(Exception, match="OVERFLOW|OUT_OF_RANGE"):
            _oracle(spark, spark_cond)
        with pytest.raises(Exception, match="ARITHMETIC_OVERFLOW"):
            _spark_ids(spark, cond, False)
        for cep in (False, True):
            with pytest.raises(CepRuntimeError, match="ARITHMETIC_OVERFLOW"):
                _local_ids(cond, cep)
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")


def test_division_by_zero_follows_ansi():
    table = pa.table({"id": pa.array([1, 2], pa.int64()),
                      "v": pa.array([Decimal("0.00"), Decimal("1.50")], pa.decimal128(5, 2))})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES B.id AS bid "
           "PATTERN (A B) DEFINE B AS B.v / A.v > 1 OR B.v > 1)")
    with pytest.raises(CepRuntimeError, match="DIVIDE_BY_ZERO"):
        cepsql.match_recognize(sql, t=table)
    with cepsql.planner_options(ansi=False):  # NULL OR TRUE
        assert list(cepsql.match_recognize(sql, t=table)["bid"]) == [2]
