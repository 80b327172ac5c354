"""Type mistakes in DEFINE and MEASURES are found at plan time, before any job, with the
same CepAnalysisError (wording and line/column in the statement as written) on the
in-process path and on spark.cep.sql — row-local conditions (pushed to Spark SQL / Arrow)
and cross-row conditions (the condition VM) alike."""
from __future__ import annotations

import pandas as pd
import pytest

import cepsql
from cepsql.errors import CepAnalysisError, CepSyntaxError
from support.sqlhelp import loc

T = pd.DataFrame({"id": [1, 2, 3], "p": [1, 2, 3], "s": ["a", "b", "c"],
                  "f": [0.5, 1.5, 2.5], "d": pd.to_datetime(["2024-01-01", "2024-01-02",
                                                             "2024-01-03"]).date,
                  "ok": [True, False, True]})
CAST = "Spark casts it to {} and that fails (CAST_INVALID_INPUT)"

BASE = """SELECT *
FROM tt MATCH_RECOGNIZE (
  ORDER BY id
  MEASURES {m} AS x
  PATTERN ({pat})
  DEFINE {d}
)"""

# (measure, define, text the error points at, expected message)
CASES = [
    ("A.p", "B AS B.p > 'abc'", "'abc'",
     "cannot compare bigint with string literal 'abc': " + CAST.format("BIGINT")),
    ("A.p", "B AS 'abc' = PREV(B.p)", "'abc'",
     "cannot compare bigint with string literal 'abc': " + CAST.format("BIGINT")),
    # Spark casts a string met by an integer to BIGINT: '1.5' fails there
    ("A.p", "B AS B.p > '1.5'", "'1.5'",
     "cannot compare bigint with string literal '1.5': " + CAST.format("BIGINT")),
    ("A.p", "B AS B.f < 'x'", "'x'",
     "cannot compare double with string literal 'x': " + CAST.format("DOUBLE")),
    ("A.p", "B AS B.d > '3rd of May'", "'3rd of May'",
     "cannot compare date with string literal '3rd of May': " + CAST.format("DATE")),
    ("A.p", "B AS B.ok = 'maybe'", "'maybe'",
     "cannot compare boolean with string literal 'maybe': " + CAST.format("BOOLEAN")),
    ("A.p", "B AS B.p", "B.p\n", "DEFINE B must be a boolean condition, got a BIGINT value"),
    ("A.p", "B AS B.p > A.p AND 1", "1\n", "AND needs boolean operands, got a numeric value"),
    ("A.p", "B AS B.p > PREV(B.p) OR B.s", "B.s", "OR needs boolean operands, got a string value"),
    ("A.p", "B AS NOT B.p", "B.p\n", "NOT needs boolean operands, got a numeric value"),
    ("B.p AND 1", "B AS B.p > 0", "B.p AND", "AND needs boolean operands, got a numeric value"),
    ("A.p", "B AS B.p > A.p + 'x1'", "'x1'",
     "cannot apply + to bigint and string literal 'x1': " + CAST.format("BIGINT")),
    ("A.p", "B AS B.p + 1", "B.p +", "DEFINE B must be a boolean condition, got a numeric value"),
]


def stmt(m: str, d: str, pat: str = "A B") -> str:
    return BASE.format(m=m, d=d, pat=pat)


@pytest.mark.parametrize("m,d,needle,message", CASES)
def test_type_error_in_process(m, d, needle, message):
    sql = stmt(m, d)
    with pytest.raises(CepAnalysisError) as info:
        cepsql.match_recognize(sql, tt=T)
    assert info.value.message == message
    assert (info.value.line, info.value.col) == loc(sql, needle)


def test_well_typed_conditions_are_still_accepted():
    sql = stmt("A.p", "B AS B.p > 1 AND (B.p > A.p OR B.s = 'c')")
    assert cepsql.match_recognize(sql, tt=T)["x"].tolist() == [1]


def test_strings_spark_can_cast_are_accepted_and_compared_as_spark_does():
    """Spark (ANSI) casts the string to BIGINT / DOUBLE / DATE / BOOLEAN; in-process does
    the same (trimmed, '+' allowed) instead of rejecting the comparison."""
    sql = stmt("B.id", "B AS B.p > ' +1 ' AND B.f >= '1.5' AND B.d >= '2024-01-02' "
                       "AND B.ok = 'yes' AND B.p + '1' > 2")
    assert cepsql.match_recognize(sql, tt=T)["x"].tolist() == [3]


def test_spark_agrees_on_string_coercions(spark):
    spark.createDataFrame(T).createOrReplaceTempView("tt")
    sql = stmt("B.id", "B AS B.p > ' +1 ' AND B.f >= '1.5' AND B.d >= '2024-01-02' "
                       "AND B.ok = 'yes' AND B.p + '1' > 2")
    assert [r.x for r in spark.cep.sql(sql).collect()] == [3]


def test_unclosed_pattern_parenthesis_points_at_it():
    sql = stmt("A.p", "B AS B.p > 0", pat="A B").replace("PATTERN (A B)", "PATTERN (A B")
    with pytest.raises(CepSyntaxError) as info:
        cepsql.match_recognize(sql, tt=T)
    assert (info.value.line, info.value.col) == loc(sql, "(A B")
    assert "PATTERN" in info.value.message


def test_spark_path_raises_the_same_errors_before_any_job(spark):
    spark.createDataFrame(T).createOrReplaceTempView("tt")
    sc = spark.sparkContext
    sc.setJobGroup("cep-type-errors", "type errors must not start jobs")
    try:
        for m, d, needle, message in CASES:
            sql = stmt(m, d)
            with pytest.raises(CepAnalysisError) as info:
                spark.cep.sql(sql)
            with pytest.raises(CepAnalysisError) as local:
                cepsql.match_recognize(sql, tt=T)
            assert str(info.value) == str(local.value), d
            assert (info.value.line, info.value.col) == loc(sql, needle), d
        unclosed = stmt("A.p", "B AS B.p > 0").replace("PATTERN (A B)", "PATTERN (A B")
        with pytest.raises(CepSyntaxError) as info:
            spark.cep.sql(unclosed)
        assert (info.value.line, info.value.col) == loc(unclosed, "(A B")
        assert sc.statusTracker().getJobIdsForGroup("cep-type-errors") == []
    finally:  # no group again (a group "" would hide later jobs from group None)
        for key in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
            sc.setLocalProperty(key, None)
