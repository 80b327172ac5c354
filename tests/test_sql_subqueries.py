"""Uncorrelated scalar subqueries in DEFINE and MEASURES (issue 12 item 3): evaluated
once per statement and used as a constant of exactly the subquery's type; zero rows
give NULL, several rows or columns and correlated subqueries are errors at the
subquery's position; EXISTS / IN (SELECT ...) stay unsupported."""
from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

import cepsql
from cepsql.errors import CepAnalysisError, CepRuntimeError, CepUnsupportedError
from cepsql.reference.sql import evaluate_reference
from cepsql.analyze.subqueries import bind_subqueries
from support.sqlhelp import loc, run

try:
    from .test_property_sql import row_multiset, spec_of
except ImportError:
    from test_property_sql import row_multiset, spec_of

T = pa.table({"id": [1, 2, 3, 4], "v": [5, 1, 7, 3],
              "price": pa.array([Decimal("1.10"), Decimal("2.25"), Decimal("0.50"),
                                 Decimal("3.00")], pa.decimal128(5, 2))})
LIMITS = pa.table({"lo": [2], "cap": pa.array([Decimal("2.00")], pa.decimal128(4, 2))})

SQL = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS a, "
       "(SELECT max(v) FROM t) AS top, A.price - (SELECT cap FROM limits) AS over "
       "PATTERN (A) DEFINE A AS A.v > (SELECT lo FROM limits) "
       "AND A.price < (SELECT cap FROM limits) + PREV(A.price))")


def _assert_inside(err, sql: str, text: str) -> None:
    """The error points into the subquery's text (its first column reference)."""
    line, col = loc(sql, text)
    assert err.line == line and col <= err.col < col + len(text), (err.line, err.col)


def test_scalar_subqueries_in_define_and_measures():
    # v > 2 and price < 2.00 + previous price: row 1 (no PREV -> NULL, false), row 3
    # (0.50 < 4.25), row 4 (3.00 < 2.50 false)
    cols, rows = run(SQL, t=T, limits=LIMITS)
    assert cols == ["a", "top", "over"]
    assert rows == [(3, 7, Decimal("-1.50"))]
    df = cepsql.match_recognize(SQL, t=T, limits=LIMITS)
    assert str(df["top"].dtype).lower() == "int64"


def test_scalar_subqueries_match_reference():
    # the reference gets the subqueries' values computed here, independently
    values = {"SELECT MAX(v) FROM t": (["7"], "bigint"), "SELECT lo FROM limits": (["2"], "bigint"),
              "SELECT cap FROM limits": (["2.00"], "decimal(4,2)")}
    spec = bind_subqueries(spec_of(SQL), lambda sub: values[sub.sql])
    names, rows = evaluate_reference(spec, T)
    got = cepsql.match_recognize(SQL, t=T, limits=LIMITS)
    assert list(got.columns) == names
    assert row_multiset(got.itertuples(index=False, name=None)) == row_multiset(rows)


def test_empty_scalar_subquery_is_null():
    sql = SQL.replace("SELECT lo FROM limits", "SELECT lo FROM limits WHERE lo > 100")
    assert run(sql, t=T, limits=LIMITS)[1] == []  # v > NULL is never true


def test_scalar_subquery_with_several_rows_is_a_runtime_error_with_position():
    sql = SQL.replace("SELECT max(v) FROM t", "SELECT v FROM t")
    with pytest.raises(CepRuntimeError, match="more than one row") as info:
        cepsql.match_recognize(sql, t=T, limits=LIMITS)
    _assert_inside(info.value, sql, "(SELECT v FROM t)")


def test_correlated_subquery_is_an_analysis_error_with_position():
    sql = SQL.replace("SELECT max(v) FROM t", "SELECT max(v) + A.v FROM t")
    with pytest.raises(CepAnalysisError, match="uncorrelated") as info:
        cepsql.match_recognize(sql, t=T, limits=LIMITS)
    _assert_inside(info.value, sql, "(SELECT max(v) + A.v FROM t)")


def test_exists_stays_unsupported():
    sql = SQL.replace("A.v > (SELECT lo FROM limits)", "EXISTS (SELECT lo FROM limits)")
    with pytest.raises(CepUnsupportedError, match="only scalar subqueries"):
        cepsql.match_recognize(sql, t=T, limits=LIMITS)


def test_scalar_subqueries_through_spark(spark):
    spark.createDataFrame(T.to_pandas(), schema="id long, v long, price decimal(5,2)"
                          ).createOrReplaceTempView("subq_t")
    spark.createDataFrame(LIMITS.to_pandas(), schema="lo long, cap decimal(4,2)"
                          ).createOrReplaceTempView("subq_limits")
    sql = SQL.replace("FROM t ", "FROM subq_t ").replace("FROM t)", "FROM subq_t)") \
        .replace("FROM limits", "FROM subq_limits")
    df = spark.cep.sql(sql)
    assert [tuple(r) for r in df.collect()] == [(3, 7, Decimal("-1.50"))]
    assert df.schema["top"].dataType.simpleString() == "bigint"
    bad = sql.replace("SELECT max(v) FROM subq_t", "SELECT v FROM subq_t")
    with pytest.raises(CepRuntimeError, match="more than one row"):
        spark.cep.sql(bad).collect()


def test_scalar_subquery_in_a_table_function_body_is_unsupported(spark):
    spark.createDataFrame(T.to_pandas(), schema="id long, v long, price decimal(5,2)"
                          ).createOrReplaceTempView("subq_tf")
    sql = ("SELECT * FROM cep_match(TABLE(subq_tf) ORDER BY id, 'MEASURES A.id AS a "
           "PATTERN (A) DEFINE A AS A.v > (SELECT 1)')")
    with pytest.raises(CepUnsupportedError, match="scalar subqueries"):
        spark.cep.sql(sql).collect()
