"""FLOAT arithmetic, DECIMAL -> DOUBLE, DECIMAL division, CAST to integral types and
running BIGINT sums at their boundaries, against Spark on the same rows.

As in test_exact_values: each case is a cross-row condition between consecutive rows
(A = the previous row, B the current one) over its own partition k; Spark evaluates the
same expression with LAG, and the B rows it accepts must be exactly the rows where
cepsql finds a match, in SQL:2016 and CEP mode, through spark.cep.sql and
cepsql.match_recognize. Run with and without ANSI where the answer depends on it.
"""
from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

import cepsql
from cepsql.errors import CepRuntimeError

BIG = 2 ** 63 - 1
NAN = float("nan")

# column -> (Spark type, Arrow type, values); row i has id i + 1
COLUMNS = {
    "f": ("FLOAT", pa.float32(), [
        1.0, 1.1, 1.21, 1.3310001, 16777216.0, None, 16777217.0, 0.1, 0.3, NAN]),
    "i": ("INT", pa.int32(), [16777217, 1, 3, -1, 16777216, 2147483647, None, 7, 0, 5]),
    "big": ("DECIMAL(38,4)", pa.decimal128(38, 4), [
        Decimal("0"), Decimal("9007199254740993.0001"), Decimal("9007199254740992.9999"),
        Decimal("9007199254740993.0000"), Decimal("1234567890123456789012345.6789"),
        Decimal("-9007199254740995.0001"), None, Decimal("0.0001"),
        Decimal("999999999999999999999999999999.9999"), Decimal("-0.0001")]),
    "dx": ("DOUBLE", pa.float64(), [
        9007199254740994.0, 9007199254740992.0, 9007199254740992.0, 1.2345678901234568e+24,
        -9007199254740996.0, 1e-4, 1e-4, 1e30, -1e-4, 0.0]),
    "d": ("DECIMAL(12,1)", pa.decimal128(12, 1), [
        Decimal("0.5"), Decimal("-2.9"), Decimal("2.9"), Decimal("3000000000.5"),
        Decimal("2147483647.9"), Decimal("-2147483648.9"), Decimal("2147483648.0"), None,
        Decimal("300.7"), Decimal("-300.7")]),
    "x": ("DOUBLE", pa.float64(), [
        -0.5, -2.9, 2.9, 3e9, 2147483647.5, -2147483648.9, 2147483648.0, NAN,
        float("inf"), 9.3e18]),
    # divisions whose quotient a 38-digit intermediate rounding would move across a tie
    "num": ("DECIMAL(38,20)", pa.decimal128(38, 20), [
        Decimal("803592384929761133.87239376270634522858"),
        Decimal("535034092939411327.00270449142126040723"),
        Decimal("803592384929761133.87239376270634522858"),
        Decimal("1.00000000000000000000"), Decimal("2.00000000000000000000"),
        Decimal("-535034092939411327.00270449142126040723"), None,
        Decimal("0.00000000000000000001"), Decimal("5.00000000000000000000"),
        Decimal("-1.00000000000000000000")]),
    "den": ("DECIMAL(38,0)", pa.decimal128(38, 0), [
        Decimal(43), Decimal(40), Decimal(43), Decimal(3), Decimal(3), Decimal(40),
        Decimal(7), Decimal(2), Decimal(-3), Decimal(9)]),
    # decimal ties that binary doubles miss (Spark rounds the shortest decimal string)
    "r": ("DOUBLE", pa.float64(), [
        -0.125, 1.005, 1.15, 0.125, -2.5, 2.5, -1.5e-5, NAN, 1e20, 2.675]),
    "rf": ("FLOAT", pa.float32(), [
        -0.125, 1.005, 1.15, 0.125, -2.5, 2.5, 16777217.0, NAN, 1e20, 2.675]),
}
N = 10


def _b(col: str) -> str:
    """B's own value, reached through A so the condition VM computes it."""
    return f"CASE WHEN A.id > 0 THEN B.{col} END"


def _c(col: str) -> str:
    return f"CASE WHEN p_id > 0 THEN c_{col} END"


# (DEFINE condition of B, the same condition over p_ = LAG(col) and c_ = col) that hold
# under both ANSI settings without errors
CASES = [
    ("B.f > A.f * 1.1F", "c_f > p_f * 1.1F"),
    ("B.f = A.f * 1.1F", "c_f = p_f * 1.1F"),
    ("B.f - A.f > 0.1F", "c_f - p_f > 0.1F"),
    ("B.f * A.f > 1.331F", "c_f * p_f > 1.331F"),
    ("B.f > A.f * 1.1", "c_f > p_f * 1.1"),
    ("B.f % A.f < 0.1F", "c_f % p_f < 0.1F"),
    ("-B.f < -A.f", "-c_f < -p_f"),
    ("abs(B.f - A.f) < 0.11F", "abs(c_f - p_f) < 0.11F"),
    ("B.f > A.big", "c_f > p_big"),
    ("B.big = A.dx", "c_big = p_dx"),
    ("B.big > A.dx", "c_big > p_dx"),
    ("B.big < A.dx", "c_big < p_dx"),
    ("CAST(B.big + A.big AS DOUBLE) > A.dx", "CAST(c_big + p_big AS DOUBLE) > p_dx"),
    ("CAST(B.big - A.big AS FLOAT) = CAST(B.dx - A.dx AS FLOAT)",
     "CAST(c_big - p_big AS FLOAT) = CAST(c_dx - p_dx AS FLOAT)"),
    ("B.num / A.den = B.num / B.den + 0.00000000000000000001",
     "c_num / p_den = c_num / c_den + 0.00000000000000000001"),
    ("B.num / A.den > 20089809623244028.34680984406765863071",
     "c_num / p_den > 20089809623244028.34680984406765863071"),
    ("B.num / A.den = 12442653324172356.44192336026561070714",
     "c_num / p_den = 12442653324172356.44192336026561070714"),
    ("B.num / A.den * 3 = B.num", "c_num / p_den * 3 = c_num"),
    (f"CAST({_b('d')} AS BIGINT) > 2147483647", f"CAST({_c('d')} AS BIGINT) > 2147483647"),
    (f"CAST({_b('d')} AS BIGINT) = -2", f"CAST({_c('d')} AS BIGINT) = -2"),
    ("CAST(B.d - A.d AS BIGINT) >= 0", "CAST(c_d - p_d AS BIGINT) >= 0"),
    ("CAST(B.d * A.d AS BIGINT) < 0", "CAST(c_d * p_d AS BIGINT) < 0"),
    ("CAST(B.big - A.big AS DECIMAL(38,0)) > 0", "CAST(c_big - p_big AS DECIMAL(38,0)) > 0"),
]
# round/bround/floor/ceil/pmod on DOUBLE and FLOAT as Spark computes them: the decimal
# string of the double rounded HALF_UP (HALF_EVEN), FLOAT results in float32, floor/ceil
# to BIGINT (NaN -> 0), pmod's second remainder for a negative divisor
_R = _b("r")
_RF = _b("rf")
_G = "CASE WHEN A.id > 0 AND B.r <> 1e20 THEN B.r END"  # floor(1e20) overflows BIGINT
_GS = "CASE WHEN p_id > 0 AND c_r <> 1e20 THEN c_r END"
ROUNDING = [
    (f"round({_R}, 2) = 2.68", f"round({_c('r')}, 2) = 2.68"),
    (f"round({_R}, 2) = 1.01", f"round({_c('r')}, 2) = 1.01"),
    (f"round({_R}, 1) = 1.2", f"round({_c('r')}, 1) = 1.2"),
    (f"round({_R}, 2) = 0.13", f"round({_c('r')}, 2) = 0.13"),
    (f"round({_R}) = -3", f"round({_c('r')}) = -3"),
    (f"round({_R}, 4) = 0", f"round({_c('r')}, 4) = 0"),
    (f"round({_R}, -19) = 1e20", f"round({_c('r')}, -19) = 1e20"),
    (f"bround({_R}, 2) = 0.12", f"bround({_c('r')}, 2) = 0.12"),
    (f"bround({_R}, 0) = 2", f"bround({_c('r')}, 0) = 2"),
    (f"round({_R}, 1) > 2.6", f"round({_c('r')}, 1) > 2.6"),
    (f"round({_RF}, 2) = CAST(2.67 AS FLOAT)", f"round({_c('rf')}, 2) = CAST(2.67 AS FLOAT)"),
    (f"round({_RF}, 2) = CAST(0.13 AS FLOAT)", f"round({_c('rf')}, 2) = CAST(0.13 AS FLOAT)"),
    (f"round({_RF}, 1) = CAST(1.1 AS FLOAT)", f"round({_c('rf')}, 1) = CAST(1.1 AS FLOAT)"),
    (f"round({_RF}, 2) > 2.67", f"round({_c('rf')}, 2) > 2.67"),
    (f"bround({_RF}, 0) = 2", f"bround({_c('rf')}, 0) = 2"),
    (f"floor({_G}) = 0", f"floor({_GS}) = 0"),
    (f"ceil({_G}) = 0", f"ceil({_GS}) = 0"),
    (f"floor({_G}) * 2 = -2", f"floor({_GS}) * 2 = -2"),
    ("ceil(CASE WHEN A.rf < 1e19 AND B.rf < 1e19 THEN B.rf - A.rf END) = 16777214",
     "ceil(CASE WHEN p_rf < 1e19 AND c_rf < 1e19 THEN c_rf - p_rf END) = 16777214"),
    ("pmod(B.r, -0.75D) < 0", "pmod(c_r, -0.75D) < 0"),
    ("pmod(B.r, A.r) > 1", "pmod(c_r, p_r) > 1"),
    ("pmod(B.rf, CAST(-0.75 AS FLOAT)) < 0", "pmod(c_rf, CAST(-0.75 AS FLOAT)) < 0"),
    ("pmod(B.i, -3) < 0", "pmod(c_i, -3) < 0"),
    ("B.r % -0.75D < 0", "c_r % -0.75D < 0"),
]
# the answers differ with ANSI on and off, but neither raises
COERCION = [
    ("B.f = A.i", "c_f = p_i"),
    ("B.f + A.i > 16777217", "c_f + p_i > 16777217"),
    ("B.f * A.i = 16777216", "c_f * p_i = 16777216"),
    ("greatest(B.f, A.i) = 16777217", "greatest(c_f, p_i) = 16777217"),
]
# without ANSI: Spark's legacy casts (low bits, saturation, NaN -> 0); each raises
# [CAST_OVERFLOW] under ANSI (an overflowing row is in every partition)
LEGACY_CASTS = [
    (f"CAST({_b('d')} AS INT) = -1294967296", f"CAST({_c('d')} AS INT) = -1294967296"),
    (f"CAST({_b('d')} AS INT) = 2", f"CAST({_c('d')} AS INT) = 2"),
    (f"CAST({_b('d')} AS SMALLINT) = 300", f"CAST({_c('d')} AS SMALLINT) = 300"),
    (f"CAST({_b('d')} AS TINYINT) = 44", f"CAST({_c('d')} AS TINYINT) = 44"),
    (f"CAST({_b('x')} AS INT) = 2147483647", f"CAST({_c('x')} AS INT) = 2147483647"),
    (f"CAST({_b('x')} AS INT) = 0", f"CAST({_c('x')} AS INT) = 0"),
    (f"CAST({_b('x')} AS TINYINT) = -1", f"CAST({_c('x')} AS TINYINT) = -1"),
    (f"CAST({_b('x')} AS BIGINT) = {BIG}", f"CAST({_c('x')} AS BIGINT) = {BIG}"),
    ("CAST(B.x - A.x AS BIGINT) < 0", "CAST(c_x - p_x AS BIGINT) < 0"),
    (f"CAST({_b('i')} AS SMALLINT) = 1", f"CAST({_c('i')} AS SMALLINT) = 1"),
    ("CAST(B.f * A.f AS INT) = 1", "CAST(c_f * p_f AS INT) = 1"),
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


COPIES = max(len(CASES), len(COERCION), len(LEGACY_CASTS), len(ROUNDING))


@pytest.fixture(scope="module")
def cast_view(spark):
    schema = "k INT, id BIGINT, " + ", ".join(f"{n} {t}" for n, (t, _, _) in COLUMNS.items())
    spark.createDataFrame(_rows(COPIES), schema).createOrReplaceTempView("exact_cast_rows")
    return "exact_cast_rows"


def _switch(conds: list[str]) -> str:
    whens = " ".join(f"WHEN {k} THEN {c}" for k, c in enumerate(conds))
    return f"CASE k {whens} END"


def _query(conds: list[str], cep: bool) -> str:
    strategy = "STRATEGY PARTITION_CONTIGUITY " if cep else ""
    return ("SELECT * FROM exact_cast_rows MATCH_RECOGNIZE (PARTITION BY k ORDER BY id "
            "MEASURES B.id AS bid ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW "
            f"{strategy}PATTERN (A B) DEFINE B AS {_switch(conds)})")


def _by_case(pairs, n: int) -> list[list[int]]:
    out: list[list[int]] = [[] for _ in range(n)]
    for k, i in pairs:
        if k < n:
            out[k].append(int(i))
    return [sorted(ids) for ids in out]


def _oracle(spark, conds: list[str]) -> list[list[int]]:
    lags = ", ".join(f"{n} AS c_{n}, LAG({n}) OVER (PARTITION BY k ORDER BY id) AS p_{n}"
                     for n in ["id", *COLUMNS])
    rows = spark.sql(f"SELECT k, id FROM (SELECT k, id, {lags} FROM exact_cast_rows) "
                     f"WHERE id > 1 AND k < {len(conds)} AND ({_switch(conds)}) "
                     "ORDER BY k, id").collect()
    return _by_case([(r.k, r.id) for r in rows], len(conds))


def _answers(spark, cases, ansi: bool):
    """Spark's answer, then per mode (spark.cep.sql, cepsql.match_recognize)."""
    spark.conf.set("spark.sql.ansi.enabled", str(ansi).lower())
    try:
        expected = _oracle(spark, [c for _, c in cases])
        conds = [c for c, _ in cases]
        got = {}
        for cep in (False, True):
            spark_rows = spark.cep.sql(_query(conds, cep)).collect()
            with cepsql.planner_options(ansi=ansi):
                local = cepsql.match_recognize(_query(conds, cep), exact_cast_rows=_arrow(COPIES))
            got[cep] = (_by_case([(r.k, r.bid) for r in spark_rows], len(conds)),
                        _by_case(zip(local["k"], local["bid"]), len(conds)))
        return expected, got
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")


def _check(expected, got, cases) -> None:
    for case, (cond, _) in enumerate(cases):
        for cep in (False, True):
            spark_ids, local_ids = got[cep]
            assert spark_ids[case] == expected[case], (cond, cep, "spark.cep.sql")
            assert local_ids[case] == expected[case], (cond, cep, "match_recognize")


@pytest.mark.parametrize("ansi", [True, False])
def test_boundaries_match_spark(spark, cast_view, ansi):
    expected, got = _answers(spark, CASES, ansi)
    _check(expected, got, CASES)
    # the boundary rows decide: most conditions hold on some rows and fail on others
    assert sum(0 < len(ids) < N - 1 for ids in expected) >= len(CASES) - 4


@pytest.mark.parametrize("ansi", [True, False])
def test_rounding_matches_spark(spark, cast_view, ansi):
    expected, got = _answers(spark, ROUNDING, ansi)
    _check(expected, got, ROUNDING)
    assert all(expected[:8]) and sum(map(bool, expected)) >= len(ROUNDING) - 3


def test_float_integer_coercion_follows_ansi(spark, cast_view):
    """FLOAT with INT meets at DOUBLE under ANSI and at FLOAT without (16777217 rounds to
    16777216 as a float), so the answers differ between the two settings."""
    answers = {ansi: _answers(spark, COERCION, ansi) for ansi in (True, False)}
    for expected, got in answers.values():
        _check(expected, got, COERCION)
    assert answers[True][0] != answers[False][0]


# row-local parts (computed per row before matching: by Spark, or by arrow_eval
# in-process) with FLOAT beside integers and DECIMAL, under ANSI (Spark 4's default)
ROW_LOCAL = [
    ("B.f + B.i > A.f + 1", "c_f + c_i > p_f + 1"),
    ("B.f = B.i OR B.f < A.f", "c_f = c_i OR c_f < p_f"),
    ("B.f * B.big < A.f", "c_f * c_big < p_f"),
    ("B.f - B.i < A.f - A.i", "c_f - c_i < p_f - p_i"),
]


@pytest.mark.parametrize("ansi", [True, False])
def test_row_local_float_coercion(spark, cast_view, ansi):
    expected, got = _answers(spark, ROW_LOCAL, ansi)
    _check(expected, got, ROW_LOCAL)
    assert sum(0 < len(ids) < N - 1 for ids in expected) >= len(ROW_LOCAL) - 1


def test_legacy_casts_without_ansi(spark, cast_view):
    expected, got = _answers(spark, LEGACY_CASTS, False)
    _check(expected, got, LEGACY_CASTS)
    assert all(expected)


@pytest.mark.parametrize("case", range(len(LEGACY_CASTS)))
def test_cast_overflow_raises_under_ansi(spark, cast_view, case):
    cond, spark_cond = LEGACY_CASTS[case]
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        with pytest.raises(Exception, match="CAST_OVERFLOW"):
            _oracle(spark, [spark_cond])
        with pytest.raises(Exception, match="CAST_OVERFLOW"):
            spark.cep.sql(_query([cond], False)).collect()
        for cep in (False, True):
            with pytest.raises(CepRuntimeError, match="CAST_OVERFLOW"):
                cepsql.match_recognize(_query([cond], cep), exact_cast_rows=_arrow(1))
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")


SUM_SQL = ("SELECT * FROM exact_sum_rows MATCH_RECOGNIZE (ORDER BY id MEASURES SUM(A.n) AS s, "
           "COUNT(A.*) AS c ONE ROW PER MATCH PATTERN (A+) DEFINE A AS A.id > 0)")


@pytest.mark.parametrize("values", [[BIG, 1, -1], [BIG - 5, 5, 1, -10], [-BIG - 1, -1, 1, 3]])
def test_bigint_sum_overflow_at_any_row(spark, values):
    """Spark's sum(BIGINT) adds row by row: under ANSI an overflow at any row raises even
    when later rows bring the sum back into range; without ANSI it wraps at 64 bits."""
    rows = list(enumerate(values, 1))
    spark.createDataFrame(rows, "id BIGINT, n BIGINT").createOrReplaceTempView("exact_sum_rows")
    table = pa.table({"id": pa.array([r[0] for r in rows], pa.int64()),
                      "n": pa.array(values, pa.int64())})
    plain = ("SELECT sum(n) AS s FROM (SELECT /*+ COALESCE(1) */ * FROM exact_sum_rows "
             "ORDER BY id)")
    try:
        spark.conf.set("spark.sql.ansi.enabled", "false")
        expected = spark.sql(plain).collect()[0].s
        assert spark.cep.sql(SUM_SQL).collect()[0].s == expected
        with cepsql.planner_options(ansi=False):
            assert list(cepsql.match_recognize(SUM_SQL, exact_sum_rows=table)["s"]) == [expected]
        spark.conf.set("spark.sql.ansi.enabled", "true")
        with pytest.raises(Exception, match="ARITHMETIC_OVERFLOW"):
            spark.sql(plain).collect()
        with pytest.raises(Exception, match="ARITHMETIC_OVERFLOW"):
            spark.cep.sql(SUM_SQL).collect()
        with pytest.raises(CepRuntimeError, match="ARITHMETIC_OVERFLOW"):
            cepsql.match_recognize(SUM_SQL, exact_sum_rows=table)
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
        spark.catalog.dropTempView("exact_sum_rows")


def test_define_sum_overflow_in_a_skipped_branch():
    """A running sum that overflowed at a row where the condition did not read it still
    raises under ANSI when read later (Spark's running sum raised at that row)."""
    table = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()),
                      "n": pa.array([BIG, 1, -1, 0], pa.int64())})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(A.*) AS c "
           "ONE ROW PER MATCH PATTERN (A+) DEFINE A AS count(A.*) < 3 OR sum(A.n) > 0)")
    with pytest.raises(CepRuntimeError, match="ARITHMETIC_OVERFLOW"):
        cepsql.match_recognize(sql, t=table)
    with cepsql.planner_options(ansi=False):
        assert list(cepsql.match_recognize(sql, t=table)["c"]) == [4]
