"""STRATEGY STRICT_CONTIGUITY with PARTITION BY (docs/cep_mode.md R5): a run takes the
next row of the *whole input* in ORDER BY order (ties broken by the other columns), and
dies when that row belongs to another partition. Backends add a break flag per row
(QueryPlan.break_column); these tests check the flags, the matches (written out by hand
and against the reference), the streaming worker, the output columns, the table-function
form (rejected) and Spark."""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings

import cepsql
from cepsql.parse import find_match_recognize
from cepsql.errors import CepUnsupportedError
from cepsql.backends.local.engine import global_breaks
from cepsql.compile.clause import plan_query
from cepsql.reference.cep import evaluate_reference_cep

try:
    from .support.strategies_cep import cep_queries, cep_streams
    from .test_cep_streaming import _chunked
    from .test_property_cep import HAND, _ticks, assert_cep_matches
    from .test_property_sql import SETTINGS, row_multiset, spec_of
except ImportError:
    from support.strategies_cep import cep_queries, cep_streams
    from test_cep_streaming import _chunked
    from test_property_cep import HAND, _ticks, assert_cep_matches
    from test_property_sql import SETTINGS, row_multiset, spec_of

PAIRS = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY {order} "
         "MEASURES FIRST(a.ts) AS t0, LAST(b.ts) AS t1 ONE ROW PER MATCH "
         "STRATEGY {s} PATTERN (a b) DEFINE a AS v = 0)")

# two partitions interleaved in time: A A B A A B B A
INTERLEAVED = pa.table({"part": ["A", "A", "B", "A", "A", "B", "B", "A"],
                        "ts": [1, 2, 3, 4, 5, 6, 7, 8], "v": [0] * 8})


def _rows(sql: str, table: pa.Table) -> list[tuple]:
    """The engine's rows, checked against the reference, sorted."""
    got = cepsql.match_recognize(sql, t=table)
    names, want = evaluate_reference_cep(spec_of(sql), table)
    assert list(got.columns) == names
    rows = list(got.itertuples(index=False, name=None))
    assert row_multiset(rows) == row_multiset(want), sql
    return sorted(rows, key=repr)


def _plan(sql: str, table: pa.Table):
    site = find_match_recognize(sql, offset=0, full_sql=sql)[0]
    return plan_query(site.spec, table.schema, sql)


# --- matches written out by hand -------------------------------------------------------

def test_pairs_only_where_the_whole_input_is_contiguous():
    strict = _rows(PAIRS.format(order="ts", s="STRICT_CONTIGUITY"), INTERLEAVED)
    assert strict == [("A", 1, 2), ("A", 4, 5), ("B", 6, 7)]
    # the partition's own next row: (2, 4), (5, 8) and (3, 6) join in
    partition = _rows(PAIRS.format(order="ts", s="PARTITION_CONTIGUITY"), INTERLEAVED)
    assert partition == [("A", 1, 2), ("A", 2, 4), ("A", 4, 5), ("A", 5, 8),
                         ("B", 3, 6), ("B", 6, 7)]


def test_descending_order_reverses_the_whole_input():
    # ts DESC: A(8) B(7) B(6) A(5) A(4) B(3) A(2) A(1)
    assert _rows(PAIRS.format(order="ts DESC", s="STRICT_CONTIGUITY"), INTERLEAVED) == [
        ("A", 2, 1), ("A", 5, 4), ("B", 7, 6)]


def test_kleene_run_dies_at_a_row_of_another_partition():
    table = pa.table({
        "part": ["A", "A", "B", "B", "A", "A", "B", "A", "A", "A", "B", "B", "B", "B"],
        "ts": list(range(1, 15)),
        "v": [0, 1, 0, 1, 1, 2, 2, 0, 1, 2, 0, 1, 1, 2]})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES "
           "FIRST(a.ts) AS t0, LAST(c.ts) AS t1, count(b.*) AS nb ONE ROW PER MATCH "
           "STRATEGY {s} PATTERN (a b+ c) DEFINE a AS v = 0, b AS v = 1, c AS v = 2)")
    # A's run 1,2 meets B's row 3; B's run 3,4 meets A's row 5
    assert _rows(sql.format(s="STRICT_CONTIGUITY"), table) == [("A", 8, 10, 1),
                                                               ("B", 11, 14, 2)]
    assert _rows(sql.format(s="PARTITION_CONTIGUITY"), table) == [
        ("A", 1, 6, 2), ("A", 8, 10, 1), ("B", 11, 14, 2), ("B", 3, 7, 1)]


def test_ties_in_order_by_are_broken_by_the_other_columns():
    # ts ties at 1: part 'A' < 'B', so the whole input is A(1) B(1) B(2) A(3)
    table = pa.table({"part": ["B", "A", "B", "A"], "ts": [1, 1, 2, 3], "v": [0] * 4})
    assert _rows(PAIRS.format(order="ts", s="STRICT_CONTIGUITY"), table) == [("B", 1, 2)]


def test_null_partition_keys_are_one_partition():
    table = pa.table({"part": [None, None, "A", None, "A", "A"], "ts": [1, 2, 3, 4, 5, 6],
                      "v": [0] * 6})
    assert _rows(PAIRS.format(order="ts", s="STRICT_CONTIGUITY"), table) == [
        ("A", 5, 6), (None, 1, 2)]


def test_break_flags_by_hand():
    """Flags in input row order for ORDER BY x (NULLs first, NaN above +inf), ties by p."""
    nan, inf = float("nan"), float("inf")
    table = pa.table({
        "p": ["a", "b", "a", None, None, "b", "a", "a", "b", "b", None, "a", "b", "b"],
        "x": [3.0, nan, None, -inf, inf, 1.0, 1.0, 2.5, None, nan, 0.0, -1.0, 7.0, inf],
        "v": list(range(14))})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY x MEASURES count(*) AS n "
           "STRATEGY STRICT_CONTIGUITY PATTERN (a b) DEFINE a AS v >= 0)")
    # whole input (by v): 2 8 3 11 10 6 5 7 0 12 4 13 1 9
    assert global_breaks(table, _plan(sql, table)).to_pylist() == [
        0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1]


def test_other_strategies_need_no_break_column():
    for s in ("PARTITION_CONTIGUITY", "SKIP_TILL_NEXT_MATCH"):
        assert _plan(PAIRS.format(order="ts", s=s), INTERLEAVED).break_column is None
    no_partition = PAIRS.format(order="ts", s="STRICT_CONTIGUITY").replace("PARTITION BY part ",
                                                                           "")
    assert _plan(no_partition, INTERLEAVED).break_column is None


# --- output columns --------------------------------------------------------------------

def test_all_rows_per_match_output_has_no_break_column():
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES "
           "CLASSIFIER() AS cls, MATCH_NUMBER() AS mn ALL ROWS PER MATCH "
           "STRATEGY STRICT_CONTIGUITY PATTERN (a b) DEFINE a AS v = 0)")
    got = cepsql.match_recognize(sql, t=INTERLEAVED)
    assert list(got.columns) == ["part", "ts", "cls", "mn", "v"]
    assert _rows(sql, INTERLEAVED) == sorted([
        ("A", 1, "A", 1, 0), ("A", 2, "B", 1, 0), ("A", 4, "A", 2, 0), ("A", 5, "B", 2, 0),
        ("B", 6, "A", 1, 0), ("B", 7, "B", 1, 0)], key=repr)
    unmatched = cepsql.match_recognize(
        sql.replace("ALL ROWS PER MATCH", "ALL ROWS PER MATCH WITH UNMATCHED ROWS"),
        t=INTERLEAVED)
    assert list(unmatched.columns) == ["part", "ts", "cls", "mn", "v"]
    assert sorted(unmatched["ts"]) == list(range(1, 9))


def test_query_around_the_clause_sees_no_break_column():
    sql = ("SELECT part, count(*) AS n FROM (" + PAIRS.format(order="ts",
                                                             s="STRICT_CONTIGUITY")
           + ") GROUP BY part ORDER BY part")
    got = cepsql.match_recognize(sql, t=INTERLEAVED)
    assert list(got.itertuples(index=False, name=None)) == [("A", 2), ("B", 1)]


# --- streaming worker ------------------------------------------------------------------

@pytest.mark.parametrize("rows,batch_rows", [(1, 1), (3, 1), (4, 3)])
def test_tiny_chunks_keep_the_flags_of_carried_rows(monkeypatch, rows, batch_rows):
    n = 120
    part = ["A" if (i // 3 + i // 7) % 2 else "B" for i in range(n)]  # runs of 1..6 rows
    table = pa.table({"part": part, "ts": list(range(n)),
                      "v": [(i * 7) % 5 % 4 for i in range(n)]})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES "
           "FIRST(a.ts) AS t0, LAST(ts) AS t1, count(*) AS n ONE ROW PER MATCH "
           "STRATEGY STRICT_CONTIGUITY PATTERN (a b* c) WITHIN 6 ROWS "
           "DEFINE a AS v = 0, b AS b.v <> 0, c AS c.v = 3)")
    whole = _rows(sql, table)
    assert whole  # the data has strict matches
    assert _rows(sql, table) != _rows(sql.replace("STRICT_CONTIGUITY", "PARTITION_CONTIGUITY"),
                                      table)
    _chunked(monkeypatch, rows, batch_rows)
    assert _rows(sql, table) == whole


@pytest.mark.parametrize("query", range(len(HAND)))
def test_hand_queries_tiny_chunks(monkeypatch, query):
    _chunked(monkeypatch, 3)
    assert_cep_matches(HAND[query].format(s="STRICT_CONTIGUITY"), _ticks())


def test_generated_queries_tiny_chunks(monkeypatch):
    _chunked(monkeypatch, 3)

    @settings(max_examples=150, **{**SETTINGS, "suppress_health_check": [
        *SETTINGS["suppress_health_check"], HealthCheck.function_scoped_fixture]})
    @given(sql=cep_queries("STRICT_CONTIGUITY"),
           table=cep_streams(unique_ts=False, with_nulls=True))
    def check(sql, table):
        assume("PARTITION BY" in sql)
        assert_cep_matches(sql, table)
    check()


# --- table functions -------------------------------------------------------------------

def test_table_function_form_is_rejected():
    from cepsql.parse import parse_clause_body
    from cepsql.backends.spark.tf_plan import build_table_plan
    spec = parse_clause_body("PARTITION BY part ORDER BY ts MEASURES count(*) AS n "
                             "STRATEGY STRICT_CONTIGUITY PATTERN (a b) DEFINE a AS v = 0")
    with pytest.raises(CepUnsupportedError, match="STRICT_CONTIGUITY with PARTITION BY"):
        build_table_plan(spec, INTERLEAVED.schema)


# --- Spark -----------------------------------------------------------------------------

def _spread() -> pa.Table:
    """60 rows over an hour, partitions interleaved, a NULL ts (several Spark buckets)."""
    import datetime as dt
    n = 60
    base = dt.datetime(2024, 1, 1)
    ts = [base + dt.timedelta(minutes=i) for i in range(n)]
    ts[17] = None
    return pa.table({
        "part": [None if i % 11 == 5 else ("A" if (i // 3 + i // 7) % 2 else "B")
                 for i in range(n)],
        "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
        "v": [(i * 7) % 5 % 4 for i in range(n)]})


def test_spark_agrees_with_in_process(spark):
    table = _spread()
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts DESC NULLS FIRST "
           "MEASURES FIRST(a.v) AS v0, count(*) AS n, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
           "STRATEGY STRICT_CONTIGUITY PATTERN (a b* c) "
           "DEFINE a AS v = 0, b AS b.v <> 0, c AS c.v = 3)")
    local = _rows(sql, table)
    assert {r[0] for r in local} == {"A", "B"}
    spark.createDataFrame(table).createOrReplaceTempView("t")
    got = spark.cep.sql(sql)
    assert got.columns == ["part", "v0", "n", "mn"]
    assert sorted((tuple(r) for r in got.collect()), key=repr) == local


def test_spark_break_flags_agree_with_in_process(spark):
    from cepsql.backends.spark.strict_breaks import with_global_breaks
    nan, inf = float("nan"), float("inf")
    table = pa.table({
        "p": ["a", "b", "a", None, None, "b", "a", "a", "b", "b", None, "a", "b", "b"],
        "x": [3.0, nan, None, -inf, inf, 1.0, 1.0, 2.5, None, nan, 0.0, -1.0, 7.0, inf],
        "v": list(range(14))})
    df = spark.createDataFrame(table)
    for order in ("x", "x DESC NULLS FIRST", "x NULLS LAST"):
        sql = (f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY {order} "
               "MEASURES count(*) AS n STRATEGY STRICT_CONTIGUITY PATTERN (a b) "
               "DEFINE a AS v >= 0)")
        plan = _plan(sql, table)
        want = global_breaks(table, plan).to_pylist()
        got = with_global_breaks(df, plan, 3).orderBy("v").select(plan.break_column).collect()
        assert [int(r[0]) for r in got] == want, order
