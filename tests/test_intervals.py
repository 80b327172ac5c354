"""Day-time INTERVAL literals in DEFINE and MEASURES (cross-row time arithmetic)."""
from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

import cepsql
from cepsql.algebra.expressions import Literal
from cepsql.errors import CepUnsupportedError
from cepsql.exprs.spark_sql import to_spark_sql

T = pd.DataFrame({"ts": pd.to_datetime(["2024-01-01 10:00", "2024-01-01 10:03",
                                        "2024-01-01 10:09", "2024-01-01 10:10"]),
                  "p": [1, 2, 3, 4]})
WITHIN_5_MIN = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a, "
                "LAST(B.ts) - A.ts AS gap PATTERN (A B) "
                "DEFINE B AS B.ts - A.ts <= INTERVAL '5' MINUTE)")


def test_cross_row_interval_condition_and_measure():
    # 10:00 -> 10:03 (3 min) matches; 10:09 -> 10:10 (1 min) matches.
    got = cepsql.match_recognize(WITHIN_5_MIN, t=T)
    assert [(r.a.to_pydatetime(), r.gap.to_pytimedelta()) for r in got.itertuples()] == [
        (dt.datetime(2024, 1, 1, 10, 0), dt.timedelta(minutes=3)),
        (dt.datetime(2024, 1, 1, 10, 9), dt.timedelta(minutes=1))]


def test_interval_too_short_rejects_rows():
    sql = WITHIN_5_MIN.replace("INTERVAL '5' MINUTE", "INTERVAL '90' SECONDS")
    got = cepsql.match_recognize(sql, t=T)
    assert [r.a.to_pydatetime() for r in got.itertuples()] == [dt.datetime(2024, 1, 1, 10, 9)]


def test_row_local_interval_arithmetic():
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.p AS p PATTERN (A) "
           "DEFINE A AS A.ts >= TIMESTAMP '2024-01-01 10:00:00' + INTERVAL '4' MINUTES)")
    assert list(cepsql.match_recognize(sql, t=T).p) == [3, 4]


def test_interval_renders_as_spark_day_time_interval():
    assert to_spark_sql(Literal(90_000_000, "interval")) == "INTERVAL '90.000000' SECOND"


def test_year_month_intervals_are_rejected_with_position():
    sql = WITHIN_5_MIN.replace("INTERVAL '5' MINUTE", "INTERVAL '1' MONTH")
    with pytest.raises(CepUnsupportedError) as info:
        cepsql.match_recognize(sql, t=T)
    start = sql.index("INTERVAL '1' MONTH") + 1
    assert start <= info.value.col < start + len("INTERVAL '1' MONTH")


def test_interval_on_spark(spark):
    spark.createDataFrame(T).createOrReplaceTempView("t_interval")
    got = spark.cep.sql(WITHIN_5_MIN.replace("FROM t ", "FROM t_interval ")).toPandas()
    assert [r.gap.to_pytimedelta() for r in got.itertuples()] == [
        dt.timedelta(minutes=3), dt.timedelta(minutes=1)]
