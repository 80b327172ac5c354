"""Exact values in the condition VM: DECIMAL, BIGINT beyond 2^53, TIMESTAMP, NaN, overflow.

Each case is a cross-row condition between consecutive rows (A = the previous row, B the
current one). Spark evaluates the same expression with LAG over the same typed rows;
the B rows it accepts must be exactly the rows where cepsql finds a match, in SQL:2016
mode and in CEP mode, through spark.cep.sql and through cepsql.match_recognize.
"""
from __future__ import annotations

import datetime as dt
import re
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


def _rows(copies: int) -> list[tuple]:
    return [(k, i + 1, *(col[2][i] for col in COLUMNS.values()))
            for k in range(copies) for i in range(N)]


def _arrow(copies: int) -> pa.Table:
    arrays = {"k": pa.array([k for k in range(copies) for _ in range(N)], pa.int32()),
              "id": pa.array(list(range(1, N + 1)) * copies, pa.int64())}
    for name, (_, arrow_type, values) in COLUMNS.items():
        arrays[name] = pa.array(values * copies, arrow_type)
    return pa.table(arrays)


def _switch(conds: list[str]) -> str:
    """One condition per partition k (so one query checks every case)."""
    if len(conds) == 1:
        return conds[0]
    whens = " ".join(f"WHEN {k} THEN {c}" for k, c in enumerate(conds))
    return f"CASE k {whens} END"


@pytest.fixture(scope="module")
def exact_view(spark):
    schema = "k INT, id BIGINT, " + ", ".join(f"{n} {t}" for n, (t, _, _) in COLUMNS.items())
    spark.createDataFrame(_rows(len(CASES)), schema).createOrReplaceTempView("exact_rows")
    return "exact_rows"


def _query(conds: list[str], cep: bool) -> str:
    strategy = "STRATEGY PARTITION_CONTIGUITY " if cep else ""
    return ("SELECT * FROM exact_rows MATCH_RECOGNIZE (PARTITION BY k ORDER BY id "
            "MEASURES B.id AS bid ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW "
            f"{strategy}PATTERN (A B) DEFINE B AS {_switch(conds)})")


def _oracle(spark, conds: list[str]) -> list[list[int]]:
    """Spark's own answer: condition k over partition k, with LAG for A."""
    lags = ", ".join(f"{n} AS c_{n}, LAG({n}) OVER (PARTITION BY k ORDER BY id) AS p_{n}"
                     for n in COLUMNS)
    rows = spark.sql(f"SELECT k, id FROM (SELECT k, id, {lags} FROM exact_rows) "
                     f"WHERE id > 1 AND k < {len(conds)} AND ({_switch(conds)}) "
                     "ORDER BY k, id").collect()
    return _by_case([(r.k, r.id) for r in rows], len(conds))


def _by_case(pairs, n: int) -> list[list[int]]:
    out: list[list[int]] = [[] for _ in range(n)]
    for k, i in pairs:
        out[k].append(int(i))
    return [sorted(ids) for ids in out]


def _spark_ids(spark, conds: list[str], cep: bool) -> list[list[int]]:
    rows = spark.cep.sql(_query(conds, cep)).collect()
    return _by_case([(r.k, r.bid) for r in rows if r.k < len(conds)], len(conds))


def _local_ids(conds: list[str], cep: bool) -> list[list[int]]:
    out = cepsql.match_recognize(_query(conds, cep), exact_rows=_arrow(len(conds)))
    return _by_case(zip(out["k"], out["bid"]), len(conds))


@pytest.fixture(scope="module")
def answers(spark, exact_view):
    """Spark's answers, then (spark.cep.sql, cepsql.match_recognize) per mode."""
    conds = [c for c, _ in CASES]
    return (_oracle(spark, [c for _, c in CASES]),
            {cep: (_spark_ids(spark, conds, cep), _local_ids(conds, cep))
             for cep in (False, True)})


@pytest.mark.parametrize("case", range(len(CASES)), ids=[c for c, _ in CASES])
def test_matches_spark_on_boundary_values(answers, case):
    expected, got = answers
    for cep in (False, True):
        spark_ids, local_ids = got[cep]
        assert spark_ids[case] == expected[case], (CASES[case][0], cep)
        assert local_ids[case] == expected[case], (CASES[case][0], cep)


def test_cases_cover_both_outcomes(answers):
    """The boundary rows make most conditions true somewhere and false somewhere."""
    expected, _ = answers
    assert sum(0 < len(ids) < N - 1 for ids in expected) >= len(CASES) - 2


@pytest.mark.parametrize("cond,spark_cond", OVERFLOWS)
def test_overflow_is_null_without_ansi(spark, exact_view, cond, spark_cond):
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        expected = _oracle(spark, [spark_cond])
        assert _spark_ids(spark, [cond], False) == expected
        for cep in (False, True):
            with cepsql.planner_options(ansi=False):
                assert _local_ids([cond], cep) == expected
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")


@pytest.mark.parametrize("cond,spark_cond", OVERFLOWS)
def test_overflow_raises_under_ansi(spark, exact_view, cond, spark_cond):
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        with pytest.raises(Exception, match="OVERFLOW|OUT_OF_RANGE") as oracle:
            _oracle(spark, [spark_cond])
        # Spark's error class for the same expression (the condition VM's own words)
        tag = re.escape(re.search(r"\[[A-Z_.]+\]", str(oracle.value)).group(0))
        with pytest.raises(Exception, match=tag):
            _spark_ids(spark, [cond], False)
        for cep in (False, True):
            with pytest.raises(CepRuntimeError, match=tag):
                _local_ids([cond], cep)
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


ZERO_DIVISOR = pa.table({"id": pa.array(range(1, 7), pa.int64()),
                         "x": pa.array([1.0, 5.0, 6.0, 7.0, 1.0, 3.0]),
                         "y": pa.array([1, 1, 2, 0, 1, 1], pa.int32())})


@pytest.mark.parametrize("define,raises", [
    ("B AS B.x / B.y > 1", True),               # row 4 is tested as B
    ("B AS B.x % B.y >= 0", True),
    ("B AS B.y <> 0 AND B.x / B.y > 1", False),  # Spark skips the right side there
    ("B AS CASE WHEN B.y = 0 THEN false ELSE B.x / B.y > 1 END", False),
    ("A AS A.x > 100, B AS B.x / B.y > 1", False),  # no row is ever tested as B
])
@pytest.mark.parametrize("cep", [False, True])
def test_row_local_division_by_zero_follows_ansi(spark, define, raises, cep):
    """A row-local part of a DEFINE is computed for every row ahead of matching (a zero
    divisor gives NULL there); under ANSI the matcher raises DIVIDE_BY_ZERO exactly when
    it evaluates that part at a row whose divisor is zero, as Spark would."""
    strategy = "STRATEGY SKIP_TILL_NEXT_MATCH " if cep else ""
    sql = ("SELECT * FROM zero_divisor MATCH_RECOGNIZE (ORDER BY id MEASURES LAST(B.id) AS bid "
           f"ONE ROW PER MATCH {strategy}PATTERN (A B+) DEFINE {define})")
    spark.createDataFrame(ZERO_DIVISOR.to_pandas()).createOrReplaceTempView("zero_divisor")
    try:
        with cepsql.planner_options(ansi=False):
            quiet = sorted(cepsql.match_recognize(sql, zero_divisor=ZERO_DIVISOR)["bid"])
        spark.conf.set("spark.sql.ansi.enabled", "false")
        assert sorted(r.bid for r in spark.cep.sql(sql).collect()) == quiet
        spark.conf.set("spark.sql.ansi.enabled", "true")
        if raises:
            with pytest.raises(CepRuntimeError, match="DIVIDE_BY_ZERO"):
                cepsql.match_recognize(sql, zero_divisor=ZERO_DIVISOR)
            with pytest.raises(CepRuntimeError, match="DIVIDE_BY_ZERO"):
                spark.cep.sql(sql).collect()
        else:
            assert sorted(cepsql.match_recognize(sql, zero_divisor=ZERO_DIVISOR)["bid"]) == quiet
            assert sorted(r.bid for r in spark.cep.sql(sql).collect()) == quiet
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
        spark.catalog.dropTempView("zero_divisor")


AGGREGATES = "SUM({c}.price) AS sp, AVG({c}.price) AS ap, SUM({c}.wide) AS sw, " \
             "AVG({c}.wide) AS aw, SUM({c}.i) AS si, AVG({c}.i) AS ai, MIN({c}.x) AS mnx, " \
             "MAX({c}.x) AS mxx, MAX({c}.ts_ns) AS mxn, COUNT({c}.price) AS cp"


def test_measure_aggregates_have_sparks_values_and_types(spark, exact_view):
    """Matcher-computed SUM/AVG/MIN/MAX/COUNT over one match of every row equal Spark's
    GROUP BY aggregates over the same rows, with the same result types (without ANSI:
    avg(wide) overflows its DECIMAL(38, 14) result and is NULL on both sides)."""
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        _compare_aggregates(spark)
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")


def _compare_aggregates(spark) -> None:
    plain = spark.sql(f"SELECT {AGGREGATES.format(c='exact_rows')} FROM exact_rows "
                      "WHERE k = 0")
    sql = ("SELECT * FROM exact_rows MATCH_RECOGNIZE (PARTITION BY k ORDER BY id "
           f"MEASURES {AGGREGATES.format(c='A')} ONE ROW PER MATCH PATTERN (A+) "
           "DEFINE A AS A.id > 0)")
    matched = spark.cep.sql(f"SELECT sp, ap, sw, aw, si, ai, mnx, mxx, mxn, cp FROM ({sql}) "
                            "WHERE k = 0")
    assert [f.dataType for f in matched.schema] == [f.dataType for f in plain.schema]
    expected = _normalize(plain.collect()[0])
    assert _normalize(matched.collect()[0]) == expected
    with cepsql.planner_options(ansi=False):
        local = cepsql.match_recognize(sql, exact_rows=_arrow(1))
    assert _normalize(tuple(local[c][0] for c in ("sp", "ap", "sw", "aw", "si", "ai", "mnx",
                                                   "mxx", "mxn", "cp"))) == expected


def _normalize(row) -> tuple:
    """NaN compares equal to itself; numpy scalars as Python values."""
    out = []
    for v in row:
        v = v.item() if hasattr(v, "item") else v
        out.append("NaN" if isinstance(v, float) and v != v else v)
    return tuple(out)


def test_define_aggregates_are_exact():
    """sum() in DEFINE over DECIMAL(38,10) and BIGINT near 2^62: the running sums that
    doubles would round decide the match."""
    big = 2 ** 62
    table = pa.table({
        "id": pa.array(range(1, 6), pa.int64()),
        "w": pa.array([Decimal("1234567890123456789012345678.0000000001")] * 5,
                      pa.decimal128(38, 10)),
        "n": pa.array([big, 1, 1, 1, 1], pa.int64())})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(A.*) AS c, "
           "SUM(A.n) AS s ONE ROW PER MATCH PATTERN (A+) DEFINE A AS "
           "sum(A.n) <= {n} AND sum(A.w) <= 4938271560493827156049382712.0000000004)")
    got = cepsql.match_recognize(sql.format(n=big + 2), t=table)
    assert list(got["c"]) == [3, 2] and list(got["s"]) == [big + 2, 2]
    got = cepsql.match_recognize(sql.format(n=big + 3), t=table)  # the decimal sum decides
    assert list(got["c"]) == [4, 1]


TYPE_CASES = [("+", (18, 6), (5, 4)), ("-", (38, 10), (38, 10)), ("*", (18, 6), (18, 6)),
              ("*", (38, 0), (38, 0)), ("/", (18, 6), (18, 6)), ("/", (29, 0), (1, 0)),
              ("/", (38, 10), (10, 2)), ("%", (18, 6), (5, 4)), ("%", (38, 38), (3, 0)),
              ("+", (38, 38), (38, 0)), ("*", (10, 9), (30, 25))]


def test_decimal_result_types_are_sparks(spark):
    """algebra.types' DecimalPrecision rules give the type Spark's typeof() reports."""
    from cepsql.algebra import types as T
    exprs = [f"typeof(CAST(1 AS DECIMAL{a}) {op} CAST(1 AS DECIMAL{b}))"
             for op, a, b in TYPE_CASES]
    got = list(spark.sql("SELECT " + ", ".join(exprs)).collect()[0])
    ours = [str(T.arithmetic_type(op, T.decimal(*a), T.decimal(*b))) for op, a, b in TYPE_CASES]
    assert ours == got
    sums = spark.sql("SELECT typeof(sum(d)), typeof(avg(d)), typeof(sum(i)), typeof(avg(i)) "
                     "FROM VALUES (CAST(1 AS DECIMAL(30,5)), 1) AS v(d, i)").collect()[0]
    assert [str(T.sum_type(T.decimal(30, 5))), str(T.avg_type(T.decimal(30, 5))),
            str(T.sum_type(T.INT)), str(T.avg_type(T.INT))] == list(sums)


def test_and_or_skip_the_right_side_like_spark():
    """Spark evaluates the right side of OR/AND only when the left does not decide, so a
    division by zero there raises nothing even under ANSI."""
    table = pa.table({"id": pa.array([1, 2, 3], pa.int64()),
                      "p": pa.array([10, 12, 11], pa.int64())})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(A.*) AS n "
           "PATTERN (A+) DEFINE A AS count(A.*) = 1 OR "
           "A.p > (sum(A.p) - A.p) / (count(A.*) - 1))")
    assert list(cepsql.match_recognize(sql, t=table)["n"]) == [2, 1]
    sql_and = sql.replace("count(A.*) = 1 OR", "NOT (count(A.*) = 1) AND").replace(
        "PATTERN (A+)", "PATTERN (B A*)").replace("DEFINE", "DEFINE B AS TRUE,")
    assert list(cepsql.match_recognize(sql_and, t=table)["n"]) == [0, 0, 0]


@pytest.mark.parametrize("strategy", ["", "STRATEGY SKIP_TILL_NEXT_MATCH"])
def test_count_of_a_double_column_with_only_double_lanes(strategy):
    """COUNT(x) counts non-null rows: it must not read an exact lane that a query whose
    columns are all doubles does not build (regression: a segfault)."""
    t = pa.table({"k": [1] * 6, "ts": list(range(6)),
                  "p": [1.0, 2.0, None, 3.0, 0.5, 9.0]})
    out = cepsql.match_recognize(f"""SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
        MEASURES count(B.p) AS n, sum(B.p) AS s, count(*) AS rows
        AFTER MATCH SKIP PAST LAST ROW {strategy}
        PATTERN (A B+ C) DEFINE B AS B.p > A.p OR B.p IS NULL AND count(B.p) >= 1,
        C AS C.p < A.p) m""", t=t)
    assert out[["n", "s", "rows"]].values.tolist() == [[2, 5.0, 5]]
