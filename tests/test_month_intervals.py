"""Year-month intervals (issue 12 item 3): ``INTERVAL '1' MONTH``, ``INTERVAL '2' YEARS``,
``INTERVAL '1-2' YEAR TO MONTH`` added to or subtracted from a timestamp or date in
DEFINE and MEASURES, with Spark's calendar semantics (the day of month clamped to the
target month's end, time of day kept). A difference of two rows compared with one, and
WITHIN windows in calendar units, are errors with positions."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

import cepsql
from cepsql.reference.cep import evaluate_reference_cep
from cepsql.algebra.expressions import Literal
from cepsql.errors import CepAnalysisError, CepUnsupportedError
from cepsql.exprs.arrow_eval import add_months
from cepsql.exprs.spark_sql import to_spark_sql
from support.sqlhelp import loc, run

try:
    from .test_property_sql import assert_engine_matches, row_multiset, spec_of
except ImportError:
    from test_property_sql import assert_engine_matches, row_multiset, spec_of

T = pa.table({
    "id": [1, 2, 3, 4, 5],
    "ts": [dt.datetime(2020, 1, 31, 10, 30), dt.datetime(2020, 2, 29, 9), None,
           dt.datetime(2020, 3, 31, 23, 59), dt.datetime(2020, 5, 1)],
    "d": [dt.date(2020, 1, 31), dt.date(2020, 2, 29), dt.date(2020, 3, 1), None,
          dt.date(2021, 2, 28)],
})

WITHIN_A_MONTH = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS a, "
                  "B.id AS b, A.ts + INTERVAL '1-2' YEAR TO MONTH AS later, "
                  "B.d - INTERVAL '1' YEAR AS year_before, PREV(B.d) + INTERVAL '13' MONTHS AS p "
                  "AFTER MATCH SKIP TO NEXT ROW PATTERN (A B) "
                  "DEFINE B AS B.ts <= A.ts + INTERVAL '1' MONTH)")


def test_month_arithmetic_in_define_and_measures():
    # 01-31 10:30 + 1 month = 02-29 10:30 (clamped, leap year) >= 02-29 09:00: match;
    # 03-31 23:59 + 1 month = 04-30 23:59 < 05-01: no; row 3's NULL ts matches nothing.
    assert run(WITHIN_A_MONTH, t=T)[1] == [
        (1, 2, dt.datetime(2021, 3, 31, 10, 30), dt.date(2019, 2, 28), dt.date(2021, 2, 28))]


def test_month_arithmetic_matches_reference():
    assert_engine_matches(WITHIN_A_MONTH, T)
    for interval in ("INTERVAL '2' YEARS", "INTERVAL '-1' MONTH", "INTERVAL '0-11' YEAR TO MONTH",
                     "INTERVAL '-1-1' YEAR TO MONTH"):
        sql = WITHIN_A_MONTH.replace("INTERVAL '1' MONTH", interval)
        assert_engine_matches(sql, T)


def test_add_months_keeps_time_zone_wall_clock():
    ts = pa.array([dt.datetime(2024, 1, 31, 12, 0)], pa.timestamp("us")).cast(
        pa.timestamp("us", "UTC"))
    local = pa.array([dt.datetime(2024, 3, 10, 1, 30)], pa.timestamp("us"))
    ny = pc_assume(local, "America/New_York")
    assert add_months(ts, 1).to_pylist()[0].replace(tzinfo=None) == dt.datetime(2024, 2, 29, 12)
    # 2024-03-10 01:30 New York + 1 month = 2024-04-10 01:30 New York (DST in between)
    shifted = add_months(ny, 1)
    assert shifted.type == ny.type
    assert pa.compute.local_timestamp(shifted).to_pylist() == [dt.datetime(2024, 4, 10, 1, 30)]


def pc_assume(arr: pa.Array, tz: str) -> pa.Array:
    return pa.compute.assume_timezone(arr, tz)


def test_month_interval_renders_as_spark_year_month_interval():
    assert to_spark_sql(Literal(14, "month_interval")) == "INTERVAL '14' MONTH"


def test_difference_of_rows_against_months_is_unsupported_with_position():
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS a PATTERN (A B) "
           "DEFINE B AS B.ts - A.ts <= INTERVAL '1' MONTH)")
    with pytest.raises(CepUnsupportedError, match="year-month interval") as info:
        cepsql.match_recognize(sql, t=T)
    line, col = loc(sql, "INTERVAL '1' MONTH")
    assert info.value.line == line and col <= info.value.col < col + len("INTERVAL '1' MONTH")


def test_bad_year_to_month_text_is_an_analysis_error():
    sql = WITHIN_A_MONTH.replace("'1-2' YEAR TO MONTH", "'1-12' YEAR TO MONTH")
    with pytest.raises(CepAnalysisError, match="YEAR TO MONTH") as info:
        cepsql.match_recognize(sql, t=T)
    line, col = loc(sql, "INTERVAL '1-12'")
    assert info.value.line == line and col <= info.value.col < col + len("INTERVAL '1-12'")


def test_within_in_calendar_units_is_unsupported():
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS a PATTERN (A B) "
           "WITHIN INTERVAL '1' MONTH DEFINE B AS true)")
    with pytest.raises(CepUnsupportedError, match="calendar unit"):
        cepsql.match_recognize(sql, t=T)


def test_month_arithmetic_through_spark(spark):
    spark.createDataFrame(T.to_pandas(), schema="id long, ts timestamp_ntz, d date"
                          ).createOrReplaceTempView("months_t")
    got = spark.cep.sql(WITHIN_A_MONTH.replace("FROM t ", "FROM months_t ")).collect()
    assert [tuple(r) for r in got] == run(WITHIN_A_MONTH, t=T)[1]


def test_month_arithmetic_in_cep_mode_matches_reference():
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS a, B.id AS b "
           "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(A, B)) "
           "DEFINE B AS B.ts <= A.ts + INTERVAL '1' MONTH)")
    assert sorted(run(sql, t=T)[1]) == [(1, 2)]
    assert_cep_reference(sql, T)


def assert_cep_reference(sql: str, table: pa.Table) -> None:
    """CEP mode: the engine's rows equal the CEP reference evaluator's."""
    names, rows = evaluate_reference_cep(spec_of(sql), table)
    got = cepsql.match_recognize(sql, t=table)
    assert list(got.columns) == names
    assert row_multiset(got.itertuples(index=False, name=None)) == row_multiset(rows)
