"""Relevance pushdown (analyze/relevance.py): under SKIP_TILL_NEXT_MATCH / ANY_MATCH the
rows no variable can take are dropped before the shuffle. Results with and without the
filter are identical (and equal the reference), on random patterns and streams, in-process
and on Spark; the filter is a real WHERE in Spark's plan; the cases that read skipped rows
keep every row."""
from __future__ import annotations

import re
from dataclasses import replace

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cepsql
from cepsql.backends.local.engine import run_local
from cepsql.compile.clause import plan_query
from cepsql.analyze.relevance import relevance_filter
from cepsql.explain.clause import explain_clause

try:
    from .support.strategies_cep import cep_queries, cep_streams
    from .test_property_cep import assert_cep_matches
    from .test_property_sql import SETTINGS, row_multiset, spec_of
except ImportError:
    from support.strategies_cep import cep_queries, cep_streams
    from test_property_cep import assert_cep_matches
    from test_property_sql import SETTINGS, row_multiset, spec_of

FILTERED = ("SKIP_TILL_NEXT_MATCH", "SKIP_TILL_ANY_MATCH")


@st.composite
def pushdown_queries(draw, strategy: str, null_conditions: bool = False) -> str:
    """cep_queries, half of them with a time window instead of a row window (which keeps
    every row), so the filter is in play often."""
    sql = draw(cep_queries(strategy, null_conditions=null_conditions))
    if draw(st.booleans()):
        sql = re.sub(r"WITHIN \d+ ROWS", "WITHIN INTERVAL '4' SECOND", sql)
    return sql


def _without_filter(spec, schema, sql, **kw):
    return replace(plan_query(spec, schema, sql, **kw), relevance_filter=None)


def _rows(table: pa.Table):
    return row_multiset(tuple(r.values()) for r in table.to_pylist())


def _check_both_ways(sql: str, table: pa.Table, seen: dict) -> None:
    """With the filter = reference; without it = with it."""
    assert_cep_matches(sql, table)  # the default path applies the filter
    with_filter = run_local(sql, {"t": table})
    without = run_local(sql, {"t": table}, planner=_without_filter)
    assert _rows(with_filter) == _rows(without), sql
    seen["filtered"] += relevance_filter(spec_of(sql))[0] is not None


@pytest.mark.parametrize("strategy", FILTERED)
def test_filter_never_changes_matches_in_process(strategy):
    seen = {"filtered": 0}

    @settings(max_examples=60, derandomize=True, **SETTINGS)
    @given(sql=pushdown_queries(strategy), table=cep_streams())
    def check(sql, table):
        _check_both_ways(sql, table, seen)
    check()
    assert seen["filtered"] > 0  # the filter really was in play


@pytest.mark.parametrize("strategy", FILTERED)
def test_filter_with_nulls_and_ties(strategy):
    # NULL conditions are not TRUE: such rows are dropped, as the evaluator ignores them
    seen = {"filtered": 0}

    @settings(max_examples=40, derandomize=True, **SETTINGS)
    @given(sql=pushdown_queries(strategy, null_conditions=True),
           table=cep_streams(unique_ts=False, with_nulls=True))
    def check(sql, table):
        _check_both_ways(sql, table, seen)
    check()
    assert seen["filtered"] > 0


def _q(body: str, strategy: str = "SKIP_TILL_ANY_MATCH", rows: str = "ONE ROW PER MATCH",
       window: str = "WITHIN INTERVAL '5' SECOND") -> str:
    return (f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts "
            f"MEASURES count(*) AS n {rows} STRATEGY {strategy} {body.format(w=window)})")


BASE = "PATTERN (SEQ(a, b)) {w} DEFINE a AS price > 5, b AS b.tag = 'x' AND b.price < a.price"


def test_filter_text_keeps_only_row_local_conjuncts():
    cond, reason = relevance_filter(spec_of(_q(BASE)))
    assert reason == ""
    from cepsql.exprs.spark_sql import to_spark_sql
    text = to_spark_sql(cond)
    assert "`price` > 5" in text and "`tag` = 'x'" in text
    assert "<" not in text  # the cross-variable conjunct is not row-local


@pytest.mark.parametrize("sql,why", [
    (_q(BASE, strategy="STRICT_CONTIGUITY"), "STRICT_CONTIGUITY"),
    (_q(BASE, strategy="PARTITION_CONTIGUITY"), "PARTITION_CONTIGUITY"),
    ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES count(*) AS n PATTERN (a b) "
     "DEFINE a AS price > 5, b AS tag = 'x')", "SQL:2016"),
    (_q(BASE, window="WITHIN 4 ROWS"), "ROWS"),
    (_q(BASE, rows="ALL ROWS PER MATCH WITH UNMATCHED ROWS"), "UNMATCHED"),
    (_q("PATTERN (SEQ(a, b)) {w} DEFINE a AS price > 5 AND PREV(price) < price, "
        "b AS tag = 'x'"), "PREV"),
    (_q("PATTERN (SEQ(a, b)) {w} DEFINE a AS price > 5, b AS tag = 'x'").replace(
        "count(*) AS n", "NEXT(b.price) AS nx"), "NEXT"),
    (_q("PATTERN (SEQ(a, b)) {w} DEFINE a AS price > 5"), "B has no DEFINE"),
    (_q("PATTERN (SEQ(a, NOT(n), b)) {w} DEFINE a AS price > 5, b AS tag = 'x'"),
     "N has no DEFINE"),
    (_q("PATTERN (SEQ(a, b)) {w} DEFINE a AS price > 5, b AS b.price > a.price"),
     "single-row"),
    (_q("PATTERN (SEQ(a, b+)) {w} DEFINE a AS price > 5, b AS avg(b.price) > 2"),
     "single-row"),
    (_q("PATTERN (SEQ(a, b+)) {w} DEFINE a AS price > 5, b AS LAST(b.price, 1) < price"),
     "single-row"),
    (_q("PATTERN (SEQ(a, b)) {w} DEFINE a AS price > 5, b AS CLASSIFIER() = 'B'"),
     "single-row"),
    (_q("PATTERN (SEQ(a, b)) {w} DEFINE a AS price > 5, b AS TRUE"), "single-row"),
])
def test_cases_that_keep_every_row(sql, why):
    cond, reason = relevance_filter(spec_of(sql))
    assert cond is None
    assert why in reason


def test_not_variables_are_part_of_the_filter():
    sql = _q("PATTERN (SEQ(a, NOT(n), b)) {w} DEFINE a AS price > 5, b AS tag = 'x', "
             "n AS tag = 'z'")
    from cepsql.exprs.spark_sql import to_spark_sql
    assert "'z'" in to_spark_sql(relevance_filter(spec_of(sql))[0])
    # an n row between a and b kills the match: it must survive the filter
    table = pa.table({"part": ["p"] * 3, "ts": [1, 2, 3], "price": [9, 0, 0],
                      "vol": [1.0] * 3, "tag": ["y", "z", "x"]})
    assert len(cepsql.match_recognize(sql, t=table)) == 0
    assert len(cepsql.match_recognize(sql, t=table.filter(pa.array([True, False, True]))
                                      )) == 1


def test_explain_shows_the_filter():
    table = pa.table({"part": ["p"], "ts": [1], "price": [1], "vol": [1.0], "tag": ["x"]})
    spec = spec_of(_q(BASE))
    plan = plan_query(spec, table.schema, _q(BASE))
    assert "relevance filter: ((`price` > 5) OR (`tag` = 'x'))" in explain_clause(plan)
    from cepsql.explain.summary import summarize
    assert "relevance filter" in summarize(spec, plan)
    kept = plan_query(spec_of(_q(BASE, window="WITHIN 4 ROWS")), table.schema, "")
    assert "relevance filter: none, every row kept (WITHIN n ROWS" in explain_clause(kept)


# --- Spark -----------------------------------------------------------------------------

@pytest.mark.parametrize("strategy", FILTERED)
def test_spark_with_and_without_filter(spark, strategy):
    key = "cepsql.pushdown.relevanceFilter"

    @settings(max_examples=4, **SETTINGS)
    @given(sql=cep_queries(strategy), table=cep_streams())
    def check(sql, table):
        spark.createDataFrame(table.to_pandas(), schema="part string, ts long, price long, "
                              "vol double, tag string").createOrReplaceTempView("t")
        try:
            spark.conf.set(key, "true")
            on = spark.cep.sql(sql).collect()
            spark.conf.set(key, "false")
            off = spark.cep.sql(sql).collect()
        except cepsql.CepUnsupportedError:
            return
        finally:
            spark.conf.unset(key)
        assert row_multiset(tuple(r) for r in on) == row_multiset(tuple(r) for r in off), sql
        local = cepsql.match_recognize(sql, t=table)
        assert row_multiset(tuple(r) for r in on) == row_multiset(
            local.itertuples(index=False, name=None)), sql
    check()


def test_spark_pushes_the_filter_into_the_scan(spark, tmp_path):
    rows = [(s, i, i % 7) for i in range(200) for s in ("A", "B", "X", "Y")]
    path = str(tmp_path / "ticks")
    spark.createDataFrame(rows, "sym string, ts long, price long").write.parquet(path)
    spark.read.parquet(path).createOrReplaceTempView("pq_ticks")
    sql = ("SELECT * FROM pq_ticks MATCH_RECOGNIZE (ORDER BY ts MEASURES a.ts AS ta, "
           "b.ts AS tb STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, b)) "
           "WITHIN INTERVAL '3' SECOND DEFINE a AS sym = 'A', b AS sym = 'B' AND "
           "b.price > a.price)")
    df = spark.cep.sql(sql)
    plan = df._jdf.queryExecution().executedPlan().toString()
    scan = [line for line in plan.splitlines() if "FileScan parquet" in line]
    assert scan and "Or(EqualTo(sym,A),EqualTo(sym,B))" in scan[0].split("PushedFilters:")[1]
    # the Filter sits below the first shuffle (Exchange)
    lines = plan.splitlines()
    exchange = max(i for i, line in enumerate(lines) if "Exchange" in line)
    assert any("Filter" in line for line in lines[exchange:]), plan
    spark.conf.set("cepsql.pushdown.relevanceFilter", "false")
    try:
        assert sorted(spark.cep.sql(sql).collect()) == sorted(df.collect())
    finally:
        spark.conf.unset("cepsql.pushdown.relevanceFilter")
