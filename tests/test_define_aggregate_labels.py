"""DEFINE aggregates whose argument reads CLASSIFIER() or MATCH_NUMBER() (issue 24 B8):
sum/avg/stddev/variance/max_by/min_by (and the count-like and min/max ones) over
arguments reading CLASSIFIER() -- the accumulator reads, on each row, the argument's
column for that row's label -- and MATCH_NUMBER() anywhere in an argument (SQL:2016
mode: the condition VM computes the argument at each aggregated row; CEP mode: it is
NULL in DEFINE). Every case is checked against the reference
evaluators, in both modes; what stays refused is refused with a positioned error.
"""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import cepsql
from cepsql.compile.clause import plan_query
from cepsql.errors import CepUnsupportedError
from cepsql.exprs.arrow_eval import evaluate_arrow
from cepsql.reference.cep import evaluate_reference_cep
from cepsql.reference.sql import evaluate_reference
from cepsql.runtime.workers import bind_worker
from support.sqlhelp import loc
from support.strategies import streams
from test_property_sql import SETTINGS, row_multiset, spec_of
from test_streaming_engine import simulate

T = pa.table({
    "ts": list(range(1, 11)),
    "price": [3, 1, 4, None, 5, 9, 2, 6, 5, 3],
    "vol": [1.5, 0.5, None, 2.25, 3.0, 1.0, 4.75, 0.5, 2.25, 1.5],
    "tag": ["x", "y", "z", "x", "y", "x", "z", "z", "y", "x"],
})

# conditions of B over the whole match so far (A and B rows), each reading CLASSIFIER()
LABELLED = [
    "sum(CASE WHEN CLASSIFIER() = 'B' THEN price END) < 9",
    "sum(CASE CLASSIFIER() WHEN 'A' THEN price ELSE -price END) >= 0",
    "avg(IF(CLASSIFIER() = 'A', vol, 2 * vol)) < 3",
    "avg(CASE WHEN CLASSIFIER() = 'B' THEN price END) IS NULL OR "
    "avg(CASE WHEN CLASSIFIER() = 'B' THEN price END) < 5",
    "coalesce(stddev(IF(CLASSIFIER() = 'A', vol, vol + 1)), 0) < 1.2",
    "coalesce(var_pop(CASE WHEN CLASSIFIER() = 'B' THEN price ELSE 0 END), 0) < 6",
    "coalesce(stddev_pop(price * IF(CLASSIFIER() = 'A', 1, 2)), 0) < 4",
    "coalesce(variance(CASE WHEN CLASSIFIER() = 'A' THEN vol END), 0) < 0.5",
    # ties between the labels' extremes: the newer row wins (Spark's MaxBy/MinBy)
    "coalesce(max_by(price, IF(CLASSIFIER() = 'A', 5, price)), 0) <> 9",
    "coalesce(min_by(vol, IF(CLASSIFIER() = 'B', 1, price)), 0) < 2",
    "coalesce(max_by(CLASSIFIER() = 'B', vol), false) OR count(*) < 3",
    "max(CLASSIFIER()) = 'B' AND count_if(CLASSIFIER() = 'B' AND price > 2) < 2",
    "coalesce(bool_and(CLASSIFIER() = 'A' OR price > 1), true) AND "
    "min(IF(CLASSIFIER() = 'A', price, 10)) < 4",
    # DISTINCT and element_at list the rows: each row's value is its label's column's
    "count(DISTINCT IF(CLASSIFIER() = 'A', price, 0)) < 3",
    "count(DISTINCT CASE WHEN CLASSIFIER() = 'B' THEN price % 3 END) < 2",
    "coalesce(sum(DISTINCT CASE CLASSIFIER() WHEN 'A' THEN price ELSE price + 1 END), 0) < 12",
    "size(collect_set(CLASSIFIER())) < 2 OR count(*) < 4",
    # (the list is never empty: array_agg skips NULLs, and element_at of an empty list
    # raises under ANSI in the engine as in Spark, while the reference gives NULL)
    "coalesce(element_at(array_agg(IF(CLASSIFIER() = 'A', coalesce(price, 0), -price)), -1), "
    "0) > -6",
    "coalesce(try_element_at(collect_set(IF(CLASSIFIER() = 'B', vol, 1.0)), 2), 0) < 2",
]
# SQL:2016 mode: MATCH_NUMBER() inside an argument is the attempt's number, computed
# with the argument at each aggregated row
NUMBERED_SQL = [
    "sum(price * MATCH_NUMBER()) < 12",
    "max(MATCH_NUMBER() + price) < 8 AND count(price + MATCH_NUMBER()) < 3",
    "coalesce(avg(vol * MATCH_NUMBER()), 0) < 4",
    "coalesce(stddev(price * MATCH_NUMBER()), 0) < 3",
    "coalesce(max_by(price, MATCH_NUMBER() * vol), 0) < 6",
    "coalesce(min_by(MATCH_NUMBER() + price, vol), 0) < 7",
    "count_if(price > MATCH_NUMBER()) < 3",
    "coalesce(bool_or(price < MATCH_NUMBER() + 1), false) OR count(*) < 2",
    "sum(CAST(vol AS DECIMAL(5, 2)) * MATCH_NUMBER()) < 6.5",
    "coalesce(sum(price / MATCH_NUMBER()), 0) < 8",
    # both: the label of the aggregated row is read in the computed argument
    "sum(IF(CLASSIFIER() = 'A', price, MATCH_NUMBER())) < 9",
    "coalesce(max_by(CLASSIFIER() = 'B', vol * MATCH_NUMBER()), false) OR count(*) < 3",
]
# CEP mode has no moment aggregates in DEFINE (compile.cep, whatever the argument)
CEP_LABELLED = [d for d in LABELLED if "std" not in d and "var" not in d]
# CEP mode: MATCH_NUMBER() is NULL in DEFINE, also inside an aggregate's argument
NUMBERED = [
    "count(MATCH_NUMBER()) = 0",
    "sum(price * MATCH_NUMBER()) IS NULL",
    "count(price + MATCH_NUMBER()) < 1 AND max(MATCH_NUMBER() + price) IS NULL",
    "coalesce(sum(coalesce(MATCH_NUMBER(), 2) * price), 0) < 20",
    "coalesce(max_by(vol, coalesce(MATCH_NUMBER(), price)), 0) < 3",
]
# "(B* A B+)": B is the first label, whose column the block must not take for A's rows
SQL_PATTERNS = ["(A B+)", "((A | B)+)", "(A+ B+?)", "(B* A B+)"]
CEP_STRATEGIES = ["SKIP_TILL_NEXT_MATCH", "SKIP_TILL_ANY_MATCH", "STRICT_CONTIGUITY"]


def sql_query(define: str, pattern: str) -> str:
    return f"""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts
        MEASURES FIRST(ts) AS f, LAST(ts) AS l, count(B.*) AS nb
        ONE ROW PER MATCH PATTERN {pattern}
        DEFINE A AS price > 2 OR vol < 1, B AS {define})"""


def cep_query(define: str, strategy: str) -> str:
    return f"""SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts
        MEASURES FIRST(ts) AS f, LAST(ts) AS l, count(B.*) AS nb
        ONE ROW PER MATCH STRATEGY {strategy} PATTERN (A B+) WITHIN 4 ROWS
        DEFINE A AS price > 2 OR vol < 1, B AS {define})"""


def assert_reference_rows(sql: str, table: pa.Table, cep: bool) -> None:
    """The in-process engine returns exactly the reference evaluator's rows."""
    reference = evaluate_reference_cep if cep else evaluate_reference
    names, rows = reference(spec_of(sql), table)
    df = cepsql.match_recognize(sql, t=table)
    assert list(df.columns) == names
    got = row_multiset(df.itertuples(index=False, name=None))
    want = row_multiset(rows)
    assert got == want, (f"{sql}\nmissing: {want - got}\nextra: {got - want}\n"
                         f"input: {table.to_pylist()}")


@pytest.mark.parametrize("pattern", SQL_PATTERNS)
@pytest.mark.parametrize("define", LABELLED + NUMBERED_SQL)
def test_sql_mode_classifier_arguments_equal_the_reference(define, pattern):
    assert_reference_rows(sql_query(define, pattern), T, cep=False)


@pytest.mark.parametrize("strategy", CEP_STRATEGIES)
@pytest.mark.parametrize("define", CEP_LABELLED + NUMBERED)
def test_cep_mode_classifier_and_match_number_arguments_equal_the_reference(define, strategy):
    assert_reference_rows(cep_query(define, strategy), T, cep=True)


@settings(max_examples=60, **SETTINGS)
@given(table=streams(max_rows=12), define=st.sampled_from(LABELLED + NUMBERED_SQL),
       pattern=st.sampled_from(SQL_PATTERNS))
def test_sql_mode_over_generated_streams(table, define, pattern):
    assert_reference_rows(sql_query(define, pattern), table, cep=False)


@settings(max_examples=60, **SETTINGS)
@given(table=streams(max_rows=10), define=st.sampled_from(CEP_LABELLED + NUMBERED),
       strategy=st.sampled_from(CEP_STRATEGIES))
def test_cep_mode_over_generated_streams(table, define, strategy):
    assert_reference_rows(cep_query(define, strategy), table, cep=True)


@pytest.mark.parametrize("define, needle, message", [
    ("count(DISTINCT price * MATCH_NUMBER()) < 3", "MATCH_NUMBER", "without DISTINCT it can"),
    ("sum(length(CLASSIFIER()) * MATCH_NUMBER()) < 3", "length",
     "any Spark function works when all its arguments come from one row"),
    ("element_at(array_agg(MATCH_NUMBER() + price), 1) > 2", "MATCH_NUMBER",
     "size.. and array_contains.. of the list can"),
])
def test_what_stays_refused_says_what_works(define, needle, message):
    sql = sql_query(define, "(A B+)")
    with pytest.raises(CepUnsupportedError, match=message) as err:
        cepsql.match_recognize(sql, t=T)
    assert (err.value.line, err.value.col) == loc(sql, needle)


def test_a_string_extreme_over_labels_keeps_its_group_whole():
    """max(CLASSIFIER()) keeps a string rank, valid only in one chunk's dictionary: the
    CEP worker must not drop the group's rows as the window moves (as max(tag))."""
    for define, streamable in (("max(CLASSIFIER()) = 'B'", False), ("max(tag) > 'x'", False),
                               ("max(price) > 1", True)):
        sql = cep_query(define, "SKIP_TILL_NEXT_MATCH")
        plan = plan_query(spec_of(sql), T.schema, sql)
        prepared = T
        for name, expr in plan.prepare_columns:
            prepared = prepared.append_column(name, evaluate_arrow(expr, T))
        assert bind_worker(plan, prepared.schema).worker.streamable() is streamable, define


SPARK_SQL_DEFINE = ("sum(CASE WHEN CLASSIFIER() = 'B' THEN price END) < 12 AND "
                    "coalesce(max_by(price, IF(CLASSIFIER() = 'A', 5, price)), 0) <> 9 AND "
                    "sum(price * MATCH_NUMBER()) < 30 AND "
                    "coalesce(stddev(IF(CLASSIFIER() = 'A', vol, vol + 1)), 0) < 1.5")
SPARK_CEP_DEFINE = ("coalesce(min_by(vol, IF(CLASSIFIER() = 'B', 1, price)), 0) < 2 AND "
                    "count(price + MATCH_NUMBER()) = 0")


def test_spark_path_equals_the_reference(spark):
    """spark.cep.sql computes the same DEFINE aggregates (derived columns in Spark SQL,
    the evaluators in mapInArrow tasks) as the reference, in both modes."""
    spark.createDataFrame(T.to_pandas()).createOrReplaceTempView("t")
    for sql, cep in ((sql_query(SPARK_SQL_DEFINE, "((A | B)+)"), False),
                     (cep_query(SPARK_CEP_DEFINE, "SKIP_TILL_NEXT_MATCH"), True)):
        names, rows = (evaluate_reference_cep if cep else evaluate_reference)(spec_of(sql), T)
        assert rows, sql  # the case decides something
        got = spark.cep.sql(sql)
        assert got.columns == names
        assert row_multiset(tuple(r) for r in got.collect()) == row_multiset(rows), sql


@pytest.mark.parametrize("sql", [
    sql_query(SPARK_SQL_DEFINE, "((A | B)+)").replace(
        "\n        DEFINE", " WITHIN INTERVAL '4' SECONDS\n        DEFINE"),
    cep_query(SPARK_CEP_DEFINE, "SKIP_TILL_NEXT_MATCH").replace(
        "WITHIN 4 ROWS", "WITHIN INTERVAL '4' SECONDS"),
])
def test_streaming_equals_batch(sql):
    """The streaming engine runs the same program: rows arriving out of order in
    increments give the batch worker's matches (MATCH_NUMBER()s carried across)."""
    order, cuts = [1, 0, 3, 2, 5, 4, 7, 6, 9, 8], [2, 4, 6, 8]
    got, want, late, dropped = simulate(sql, T, order, cuts, 1500)
    assert want and got == want
    assert late == dropped == 0


@pytest.mark.parametrize("define", ["IF(price > PREV(price), 1, 0) = 1",
                                    "IF(CLASSIFIER(A) = 'A', B.vol, FIRST(A.vol)) < 3"])
def test_if_over_values_of_different_rows(define):
    """Spark's if(c, a, b) runs in the condition VM as CASE WHEN c THEN a ELSE b (it
    evaluates computed aggregate arguments reading CLASSIFIER() too)."""
    assert_reference_rows(sql_query(define, "(A B+)"), T, cep=False)


@pytest.mark.parametrize("define", CEP_LABELLED[:4])
def test_cep_mode_with_the_first_label_not_the_aggregates_first(define):
    """A pattern whose first variable (label 0) is not the first of the argument's
    per-label columns: each row still reads its own label's column (the block was
    shifted: every row read B's column in ``B A A``)."""
    sql = cep_query(define, "SKIP_TILL_NEXT_MATCH").replace("PATTERN (A B+)",
                                                            "PATTERN (C A B+)")
    assert_reference_rows(sql, T, cep=True)
