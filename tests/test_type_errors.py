"""Type mistakes in DEFINE and MEASURES are found at plan time, before any job, with the
same CepAnalysisError (wording and line/column in the statement as written) on the
in-process path and on spark.cep.sql — row-local conditions (pushed to Spark SQL / Arrow)
and cross-row conditions (the condition VM) alike."""
from __future__ import annotations

import pandas as pd
import pytest

import cepsql
from cepsql.errors import CepAnalysisError, CepSyntaxError
from _sqlhelp import loc

T = pd.DataFrame({"id": [1, 2, 3], "p": [1, 2, 3], "s": ["a", "b", "c"]})

BASE = """SELECT *
FROM tt MATCH_RECOGNIZE (
  ORDER BY id
  MEASURES {m} AS x
  PATTERN ({pat})
  DEFINE {d}
)"""

# (measure, define, text the error points at, expected message)
CASES = [
    ("A.p", "B AS B.p > 'abc'", "'abc'", "cannot compare bigint with string literal 'abc'"),
    ("A.p", "B AS 'abc' = PREV(B.p)", "'abc'", "cannot compare bigint with string literal 'abc'"),
    ("A.p", "B AS B.p > A.p AND 1", "1\n", "AND needs boolean operands, got a numeric value"),
    ("A.p", "B AS B.p > PREV(B.p) OR B.s", "B.s", "OR needs boolean operands, got a string value"),
    ("A.p", "B AS NOT B.p", "B.p\n", "NOT needs boolean operands, got a numeric value"),
    ("B.p AND 1", "B AS B.p > 0", "B.p AND", "AND needs boolean operands, got a numeric value"),
    ("A.p", "B AS B.p > A.p + 'x1'", "'x1'", "cannot apply + to a number and string literal 'x1'"),
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
    finally:
        sc.setJobGroup("", "")
