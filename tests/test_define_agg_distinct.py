"""DISTINCT aggregates and list aggregates (array_agg/collect_list/collect_set through
size/cardinality/array_contains, listagg/string_agg through length) in DEFINE (issue 12,
point 3): running values over the rows matched so far (current row included).

Checked against the oracles (reference/sql.py, reference/cep.py) by property tests in
SQL:2016 mode and under every CEP strategy, against Spark's own running window
aggregates over the same rows, and the in-process SQL's sum/avg/count(DISTINCT) around
the clause against Spark running the same statement.
"""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import cepsql
from cepsql.errors import CepRuntimeError, CepUnsupportedError
from cepsql.reference.cep import evaluate_reference_cep
from cepsql.reference.sql import evaluate_reference
from support.sqlhelp import loc, run as run_local
from test_property_sql import row_multiset, spec_of
from support.running import longest_from_first_row, running_window_view

NAN = float("nan")
T0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)

# --- property tests against the oracles ------------------------------------------------

# (condition with {n} a threshold, usable in CEP mode)
CONDITIONS = [
    ("count(DISTINCT B.x) <= {n}", True),
    ("sum(DISTINCT B.x) < {n}", True),
    ("avg(DISTINCT B.d) < {n}", True),
    ("count(DISTINCT B.f) <= {n}", True),
    ("sum(DISTINCT B.f) < {n}", True),
    ("count(DISTINCT B.s) <= {n}", True),
    ("count(DISTINCT B.ts) <= {n}", True),
    ("sum(DISTINCT B.n) > {n}", True),
    ("count(DISTINCT x) <= {n}", True),
    ("count_if(DISTINCT B.x > 1) < {n} - 1", True),
    ("min(DISTINCT B.x) + max(DISTINCT B.d) < {n}", True),
    ("size(array_agg(B.x)) < {n}", True),
    ("cardinality(collect_set(B.s)) <= {n} - 1", True),
    ("array_size(array_agg(DISTINCT B.f)) <= {n}", True),
    ("array_contains(array_agg(B.s), 'a') = ({n} > 2)", True),
    ("length(listagg(B.s, '--')) < {n} + 2", True),
    ("length(string_agg(B.x)) < {n}", True),
    ("stddev_pop(DISTINCT B.x) < {n} / 3.0", False),
    ("coalesce(try_element_at(array_agg(B.x), -{n}), 0) <> 2", True),
    ("try_element_at(array_agg(DISTINCT B.s), -1) <> 'a'", True),
    ("try_element_at(collect_set(B.d), {n}) IS NULL", True),
]
PATTERNS = ["A B+", "A B+ C?", "(A | B)+ C", "A B* C"]
STRATEGIES = ["SKIP_TILL_NEXT_MATCH", "PARTITION_CONTIGUITY", "SKIP_TILL_ANY_MATCH"]


@st.composite
def _tables(draw):
    n = draw(st.integers(3, 8))
    cell = lambda *vals: st.sampled_from(vals)  # noqa: E731
    rows = [draw(st.tuples(cell(0, 1), cell(None, 1, 2, 2, 3),
                           cell(None, Decimal("1.50"), Decimal("2.25"), Decimal("-0.75")),
                           cell(None, 0.0, -0.0, NAN, 1.5), cell(None, "a", "b", "ab"),
                           cell(None, 2 ** 62, -5, 7), cell(None, T0, T0 + dt.timedelta(1))))
            for _ in range(n)]
    cols = list(zip(*rows))
    return pa.table({
        "k": pa.array(cols[0], pa.int32()), "id": pa.array(range(n), pa.int64()),
        "x": pa.array(cols[1], pa.int64()), "d": pa.array(cols[2], pa.decimal128(10, 2)),
        "f": pa.array(cols[3], pa.float64()), "s": pa.array(cols[4], pa.string()),
        "n": pa.array(cols[5], pa.int64()), "ts": pa.array(cols[6], pa.timestamp("us", "UTC"))})


def _query(cond: str, pattern: str, strategy: str | None) -> str:
    mode = f"STRATEGY {strategy} " if strategy else "AFTER MATCH SKIP TO NEXT ROW "
    return ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY id "
            "MEASURES FIRST(id) AS first_id, LAST(id) AS last_id, count(B.*) AS nb "
            f"ONE ROW PER MATCH {mode}PATTERN ({pattern}) "
            f"DEFINE A AS A.x IS NULL OR A.x < 3, B AS {cond}"
            + (", C AS count(DISTINCT B.s) < 2 OR C.x = 1)" if "C" in pattern else ")"))


def _agrees(sql: str, table: pa.Table, cep: bool) -> None:
    cols, rows = run_local(sql, t=table)
    oracle = evaluate_reference_cep if cep else evaluate_reference
    names, expected = oracle(spec_of(sql), table)
    assert names == cols
    assert row_multiset(rows) == row_multiset(expected), (sql, rows, expected)


@settings(max_examples=30, deadline=None)
@given(table=_tables(), cond=st.sampled_from(CONDITIONS), n=st.integers(1, 4),
       pattern=st.sampled_from(PATTERNS))
def test_sql_mode_equals_the_oracle(table, cond, n, pattern):
    _agrees(_query(cond[0].format(n=n), pattern, None), table, cep=False)


@settings(max_examples=30, deadline=None)
@given(table=_tables(), cond=st.sampled_from([c for c in CONDITIONS if c[1]]),
       n=st.integers(1, 4), pattern=st.sampled_from(PATTERNS),
       strategy=st.sampled_from(STRATEGIES))
def test_cep_mode_equals_the_oracle(table, cond, n, pattern, strategy):
    _agrees(_query(cond[0].format(n=n), pattern, strategy), table, cep=True)


@pytest.fixture()
def tiny_chunks(monkeypatch):
    """CEP streaming: chunks of 3 rows fed one row per batch (runs and their node
    chains carried across chunks)."""
    from test_cep_streaming import _chunked
    _chunked(monkeypatch, 3)


def test_cep_streaming_carries_distinct_state(tiny_chunks):
    @settings(max_examples=20, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(table=_tables(), cond=st.sampled_from([c for c in CONDITIONS if c[1]]),
           n=st.integers(1, 4), strategy=st.sampled_from(STRATEGIES))
    def check(table, cond, n, strategy):
        sql = _query(cond[0].format(n=n), "A B+ C?", strategy).replace(
            " DEFINE", " WITHIN 4 ROWS DEFINE")
        _agrees(sql, table, cep=True)
    check()


# --- by hand and errors --------------------------------------------------------------------

HAND = pa.table({"id": pa.array(range(1, 8), pa.int64()),
                 "x": pa.array([1, 2, 2, None, 3, 1, 5], pa.int64()),
                 "s": ["a", "b", "a", None, "c", "b", "a"]})


@pytest.mark.parametrize("cond, spans", [
    # x 1 2 2 - 3 | 1 5: the third distinct value ends the first match
    ("count(DISTINCT A.x) < 3", [(1, 4), (5, 6), (7, 7)]),
    ("sum(DISTINCT A.x) < 6", [(1, 4), (5, 6), (7, 7)]),
    ("avg(DISTINCT A.x) < 2", [(1, 4), (6, 6)]),
    ("size(array_agg(A.x)) < 3", [(1, 2), (3, 5), (6, 7)]),
    ("array_contains(collect_list(A.s), 'c') = false", [(1, 4), (6, 7)]),
    ("length(listagg(A.s, ',')) < 5", [(1, 2), (3, 5), (6, 7)]),
])
def test_distinct_and_list_aggregates_by_hand(cond, spans):
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(id) AS a, "
           f"LAST(id) AS b ONE ROW PER MATCH PATTERN (A+) DEFINE A AS {cond})")
    _, rows = run_local(sql, t=HAND)
    assert rows == spans


def test_element_at_out_of_range_raises_under_ansi_and_is_null_without():
    """Spark's element_at: INVALID_ARRAY_INDEX_IN_ELEMENT_AT under ANSI, NULL without;
    try_element_at is NULL in both."""
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(id) AS a, "
           "LAST(id) AS b ONE ROW PER MATCH PATTERN (A+) "
           "DEFINE A AS {f}(array_agg(A.x), 2) IS NULL OR {f}(array_agg(A.x), 2) = 2)")
    with pytest.raises(CepRuntimeError, match="INVALID_ARRAY_INDEX_IN_ELEMENT_AT"):
        run_local(sql.format(f="element_at"), t=HAND)
    _, tried = run_local(sql.format(f="try_element_at"), t=HAND)
    with cepsql.planner_options(ansi=False):
        _, legacy = run_local(sql.format(f="element_at"), t=HAND)
    assert tried == legacy == [(1, 7)]


@pytest.mark.parametrize("define, needle, message", [
    ("listagg(A.s, ',') = 'a,b'", "listagg", "supported only as the list argument"),
    ("string_agg(A.s) LIKE '%a%'", "string_agg", "supported only as the list argument"),
    ("array_max(array_agg(A.x)) = 1", "array_max", r"size\(\), cardinality\(\)"),
    ("length(listagg(DISTINCT A.s)) < 3", "length", "without DISTINCT"),
    ("element_at(array_agg(A.x), A.x) = 1", "A.x) = 1", "constant integer"),
])
def test_unsupported_list_forms_name_what_is_supported(define, needle, message):
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(id) AS a "
           f"PATTERN (A+) DEFINE A AS {define})")
    with pytest.raises(CepUnsupportedError, match=message) as err:
        cepsql.match_recognize(sql, t=HAND)
    assert (err.value.line, err.value.col) == loc(sql, needle)


# --- against Spark -------------------------------------------------------------------------

ROWS = [  # k, id, x BIGINT, d DECIMAL(10,2), f DOUBLE, s STRING, ts TIMESTAMP
    (0, 1, 5, Decimal("1.50"), 0.0, "a", T0),
    (0, 2, 5, None, -0.0, "b", T0),
    (0, 3, None, Decimal("1.50"), NAN, None, None),
    (0, 4, 2 ** 62, Decimal("-2.25"), NAN, "a", T0 + dt.timedelta(microseconds=1)),
    (0, 5, 2 ** 62, Decimal("9.99"), 1.5, "ab", T0),
    (0, 6, -3, Decimal("-2.25"), 1.5, "b", T0 - dt.timedelta(days=1)),
    (1, 1, None, None, None, None, None),
    (1, 2, 7, Decimal("0.01"), -1.0, "z", T0),
    (1, 3, 7, Decimal("0.01"), 2.0, "z", T0),
]
SCHEMA = "k INT, id BIGINT, x BIGINT, d DECIMAL(10,2), f DOUBLE, s STRING, ts TIMESTAMP"
_DISTINCT = "array_distinct(collect_list({c}) {w})"
# (DEFINE aggregate, the same running value from Spark's window functions)
AGGS = [
    ("count(DISTINCT A.x)", f"size({_DISTINCT.format(c='x', w='{w}')})"),
    ("sum(DISTINCT A.x)", "aggregate(" + _DISTINCT.format(c="x", w="{w}")
     + ", CAST(NULL AS BIGINT), (acc, v) -> coalesce(acc, 0) + v)"),
    ("sum(DISTINCT A.d)", "aggregate(" + _DISTINCT.format(c="d", w="{w}")
     + ", CAST(NULL AS DECIMAL(20,2)), (acc, v) -> CAST(coalesce(acc, 0) + v AS DECIMAL(20,2)))"),
    ("count(DISTINCT A.f)", f"size({_DISTINCT.format(c='f', w='{w}')})"),
    ("count(DISTINCT A.s)", f"size({_DISTINCT.format(c='s', w='{w}')})"),
    ("count(DISTINCT A.ts)", f"size({_DISTINCT.format(c='ts', w='{w}')})"),
    ("size(array_agg(A.x))", "size(collect_list(x) {w})"),
    ("array_contains(collect_set(A.s), 'b')", "array_contains(collect_set(s) {w}, 'b')"),
    ("try_element_at(array_agg(A.d), 2)", "try_element_at(collect_list(d) {w}, 2)"),
    ("try_element_at(array_agg(DISTINCT A.f), -2)",
     "try_element_at(" + _DISTINCT.format(c="f", w="{w}") + ", -2)"),
    ("length(listagg(A.s, ', '))", "length(listagg(s, ', ') {w})"),
]


@pytest.fixture(scope="module")
def running_view(spark):
    yield from running_window_view(spark, ROWS, SCHEMA, [s for _, s in AGGS], "dd_rows")


def test_running_values_equal_sparks_windows(spark, running_view):
    """A+ with DEFINE 'the aggregate equals Spark's running value' spans each whole
    partition exactly when the two agree at every row (SQL:2016 and CEP mode, on Spark
    and in-process)."""
    view, table = running_view
    conds = " AND ".join(f"({a} = A.e{i} OR ({a} IS NULL AND A.e{i} IS NULL))"
                         for i, (a, _) in enumerate(AGGS))
    for strategy in ("", "STRATEGY PARTITION_CONTIGUITY "):
        sql = (f"SELECT * FROM {view} MATCH_RECOGNIZE (PARTITION BY k ORDER BY id "
               "MEASURES FIRST(A.id) AS s, COUNT(A.*) AS c ONE ROW PER MATCH "
               f"{strategy}PATTERN (A+) DEFINE A AS {conds})")
        got = longest_from_first_row((r.k, r.s, r.c) for r in spark.cep.sql(sql).collect())
        assert got == {0: 6, 1: 3}, (strategy, "spark.cep.sql")
        local = cepsql.match_recognize(sql, dd_rows=table)
        assert longest_from_first_row(zip(local["k"], local["s"], local["c"])) == \
            {0: 6, 1: 3}, strategy


def test_in_process_distinct_aggregates_around_the_clause_equal_spark(spark, running_view):
    view, table = running_view
    sql = (f"SELECT k, count(DISTINCT f) AS cf, sum(DISTINCT x) AS sx, avg(DISTINCT x) AS ax, "
           "sum(DISTINCT d) AS sd, avg(DISTINCT d) AS ad, sum(DISTINCT f) AS sf, "
           "count(DISTINCT s) AS cs "
           f"FROM {view} MATCH_RECOGNIZE (PARTITION BY k ORDER BY id MEASURES "
           "CLASSIFIER() AS cls ALL ROWS PER MATCH PATTERN (A+) DEFINE A AS true) "
           "GROUP BY k ORDER BY k")
    expected = [tuple(r) for r in spark.cep.sql(sql).collect()]
    _, got = run_local(sql, dd_rows=table)
    assert row_multiset(got) == row_multiset(expected)
    assert got[0][1] == 3  # 0.0 and -0.0 are one value, NaN another, 1.5 the third


def test_distinct_is_part_of_the_sharing_key():
    """Two DEFINEs differing only in DISTINCT never share a plan node."""
    from test_sharing_canonical import join_key, view
    cond = "a AS a.symbol = 'A', b AS b.symbol = 'B' AND count({d}a.price) < b.diff"
    assert join_key(view("SEQ(a, b)", cond.format(d="DISTINCT "))) != \
        join_key(view("SEQ(a, b)", cond.format(d="")))
