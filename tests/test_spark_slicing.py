"""Time slicing on Spark (cepsql/backends/spark/slicing.py): spark.cep.sql on an unpartitioned,
time-windowed CEP clause returns exactly the in-process result (which never slices).

The session has 4 shuffle partitions, so spark.cep.sql cuts the data below into 4 slices
(the span is far wider than 4 slices of 4 windows); the direct tests pass max_slices.
Data are small; matches straddle slice borders (checked in test_matches_straddle_borders).
"""
from __future__ import annotations

import datetime as dt
import random
from collections import Counter

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

import cepsql
from cepsql.parse import find_match_recognize
from cepsql.compile.clause import plan_query
from cepsql.backends.spark.execute import run_plan
from cepsql.exprs.spark_arrow import arrow_schema
from cepsql.backends.spark.slicing import (
    COPY_COLUMN,
    GRID_WINDOWS_CONF,
    SLICE_COLUMN,
    slice_labels,
    slice_plan,
    slicing_blocker,
    spark_hash_long,
)


def _events(n: int = 150, seed: int = 7) -> pa.Table:
    rnd = random.Random(seed)
    ts = sorted(rnd.sample(range(240), n))
    return pa.table({
        "id": list(range(n)),
        "ts": ts,
        "tag": [rnd.choice("xyz") for _ in range(n)],
        "price": [rnd.randint(0, 9) for _ in range(n)],
        "at": [dt.datetime(2024, 1, 1) + dt.timedelta(minutes=t) for t in ts],
    })


EVENTS = _events()


@pytest.fixture(scope="module")
def events(spark):
    """The events as view ``ev``; grids of 8 windows (48 s for 6 s windows over the 240 s
    of data), so that spark.cep.sql here cuts several slices."""
    spark.createDataFrame(EVENTS.to_pandas()).createOrReplaceTempView("ev")
    spark.conf.set(GRID_WINDOWS_CONF, "8")
    yield spark.table("ev")
    spark.conf.unset(GRID_WINDOWS_CONF)


def _normal(v):
    if isinstance(v, float):
        return round(v, 6)
    if hasattr(v, "item"):
        return v.item()
    if v is not None and type(v).__name__ == "Timestamp":
        return v.to_pydatetime()
    try:
        import pandas as pd
        if v is pd.NA or v is pd.NaT:
            return None
    except ImportError:  # pragma: no cover
        pass
    return v


def assert_same_as_local(spark, sql: str) -> list:
    got_df = spark.cep.sql(sql)
    want = cepsql.match_recognize(sql.replace(" ev ", " t "), t=EVENTS)
    assert got_df.columns == list(want.columns)
    got = Counter(tuple(_normal(v) for v in r) for r in got_df.collect())
    expected = Counter(tuple(_normal(v) for v in r) for r in want.itertuples(index=False))
    assert got == expected, f"missing {expected - got}\nextra {got - expected}"
    assert sum(expected.values()) > 0, "the query should have matches"
    return list(expected)


def clause(body: str, order: str = "ORDER BY ts") -> str:
    return f"SELECT * FROM ev MATCH_RECOGNIZE ({order} {body})"


QUERIES = {
    "any-match one row": clause(
        "MEASURES a.ts AS t0, c.ts AS t2, c.price AS cp ONE ROW PER MATCH "
        "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b, c)) WITHIN INTERVAL '6' SECOND "
        "DEFINE a AS a.tag = 'x', b AS b.price > a.price, c AS c.tag = 'z'"),
    "next-match all rows with a closure": clause(
        "MEASURES FIRST(a.ts) AS t0, CLASSIFIER() AS cls, count(b.*) AS nb ALL ROWS PER MATCH "
        "STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, KL(b), c)) WITHIN INTERVAL '8' SECOND "
        "DEFINE a AS a.tag = 'x', b AS b.tag = 'y', c AS c.tag = 'z' AND c.price >= a.price"),
    "leading NOT": clause(
        "MEASURES a.ts AS t0, b.ts AS t1 STRATEGY SKIP_TILL_ANY_MATCH "
        "PATTERN (SEQ(NOT(n), a, b)) WITHIN INTERVAL '6' SECOND "
        "DEFINE n AS n.price = 9, a AS a.tag = 'x', b AS b.tag = 'y'"),
    "trailing NOT, all rows": clause(
        "MEASURES a.ts AS t0, CLASSIFIER() AS cls ALL ROWS PER MATCH "
        "STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, b, NOT(n))) WITHIN INTERVAL '5' SECOND "
        "DEFINE a AS a.tag = 'y', b AS b.tag = 'x', n AS n.price < b.price"),
    "AND with a NOT inside": clause(
        "MEASURES a.ts AS ta, b.ts AS tb STRATEGY SKIP_TILL_ANY_MATCH "
        "PATTERN (AND(a, b, NOT(n))) WITHIN INTERVAL '4' SECOND "
        "DEFINE a AS a.tag = 'x', b AS b.tag = 'z', n AS n.tag = 'y' AND n.price > 6"),
    "strict contiguity": clause(
        "MEASURES a.ts AS t0, LAST(b.ts) AS t1 STRATEGY STRICT_CONTIGUITY "
        "PATTERN (SEQ(a, KL(b))) WITHIN INTERVAL '7' SECOND "
        "DEFINE a AS a.price < 3, b AS b.price >= 3"),
    "timestamps, descending": clause(
        "MEASURES a.id AS ia, b.id AS ib STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, NOT(n), b)) "
        "WITHIN INTERVAL '5' MINUTE DEFINE a AS a.tag = 'x', b AS b.tag = 'y', "
        "n AS n.tag = 'z' AND n.price > 7", order="ORDER BY at DESC"),
}


@pytest.mark.parametrize("name", list(QUERIES))
def test_sliced_equals_in_process(spark, events, name):
    assert_same_as_local(spark, QUERIES[name])


def _planned(spark, events, sql: str):
    spec = find_match_recognize(sql)[0].spec
    return plan_query(spec, arrow_schema(events), sql)


def test_clauses_are_really_sliced(spark, events):
    sql = QUERIES["any-match one row"]
    plan = _planned(spark, events, sql)
    sliced = slice_plan(spark, events, plan, max_slices=3, min_slice_windows=1,
                        bounds="span")
    assert sliced is not None and sliced.slices == 3
    assert "Time slicing: 3 slices" in explain_clause(plan)
    inner = plan_query(sliced.spec, arrow_schema(sliced.frame), sql)
    assert inner.partition_columns == [SLICE_COLUMN]
    out = sliced.run(sliced.frame, inner)  # a shuffle into 3 partitions
    per_task = (out.select(F.spark_partition_id().alias("task"), SLICE_COLUMN).distinct()
                .groupBy("task").count().collect())
    assert len(per_task) == 3                     # three matching tasks ...
    assert all(r["count"] == 1 for r in per_task)  # ... one slice each
    result = sliced.finish(out)
    assert result.columns == ["t0", "t2", "cp"]
    assert sorted(result.collect()) == sorted(spark.cep.sql(sql).collect())


def _sliced_result(spark, events, sql: str, **slicing):
    plan = _planned(spark, events, sql)
    sliced = slice_plan(spark, events, plan, **slicing)
    inner = plan_query(sliced.spec, arrow_schema(sliced.frame), sql)
    return sliced, sliced.finish(run_plan(sliced.frame, inner))


def _home_slices(frame, key: str = "ts") -> dict:
    """key -> the slice whose core holds the row (the copy that is not a copy)."""
    rows = frame.where(~F.col(COPY_COLUMN)).select(key, SLICE_COLUMN).collect()
    return {r[key]: r[SLICE_COLUMN] for r in rows}


def test_matches_straddle_borders(spark, events):
    sql = QUERIES["any-match one row"]
    sliced = slice_plan(spark, events, _planned(spark, events, sql))  # as spark.cep.sql does
    assert sliced.slices == 0  # a grid of 48 s slices over 240 s
    home = _home_slices(sliced.frame)
    matches = assert_same_as_local(spark, sql)
    assert any(home[t0] != home[t2] for t0, t2, _ in matches)


@pytest.mark.parametrize("name", ["any-match one row", "leading NOT", "trailing NOT, all rows",
                                  "timestamps, descending"])
def test_many_thin_slices(spark, events, name):
    # slices one window wide (about 10 s): most matches and NOT regions cross a border
    sql = QUERIES[name]
    sliced, out = _sliced_result(spark, events, sql, max_slices=24, min_slice_windows=1,
                                  bounds="span")
    assert sliced.slices == 24
    want = cepsql.match_recognize(sql.replace(" ev ", " t "), t=EVENTS)
    assert out.columns == list(want.columns)
    got = Counter(tuple(_normal(v) for v in r) for r in out.collect())
    assert got == Counter(tuple(_normal(v) for v in r) for r in want.itertuples(index=False))
    if name == "any-match one row":
        home = _home_slices(sliced.frame)
        assert sum(home[t0] != home[t2] for t0, t2, _ in got) >= 5


def _border_table(rows: list[tuple[int, str]]) -> pa.Table:
    """Rows (ts, tag) between two fillers at 0 and 100: with max_slices=2 and
    min_slice_windows=1 the slice border is at 50."""
    rows = [(0, "q")] + rows + [(100, "q")]
    return pa.table({"id": list(range(len(rows))), "ts": [t for t, _ in rows],
                     "tag": [g for _, g in rows], "price": [0] * len(rows),
                     "at": [dt.datetime(2024, 1, 1)] * len(rows)})


@pytest.mark.parametrize("pattern,order,rows", [
    # n at 48 (slice 0) forbids the match (51, 53) of slice 1: read before slice 1's core
    ("SEQ(NOT(n), a, b)", "ts", [(48, "n"), (51, "x"), (53, "y")]),
    # n at 51 (slice 1) forbids (45, 47): the window after slice 0's core
    ("SEQ(a, b, NOT(n))", "ts", [(45, "x"), (47, "y"), (51, "n")]),
    # descending: a leading NOT looks forward in time, past slice 0's core
    ("SEQ(NOT(n), a, b)", "ts DESC", [(47, "y"), (49, "x"), (51, "n")]),
    ("SEQ(a, b, NOT(n))", "ts DESC", [(48, "n"), (51, "y"), (53, "x")]),
])
def test_not_regions_across_a_border(spark, pattern, order, rows):
    table = _border_table(rows)
    spark.createDataFrame(table.to_pandas()).createOrReplaceTempView("border")
    sql = ("SELECT * FROM border MATCH_RECOGNIZE (ORDER BY " + order + " MEASURES a.ts AS ta, "
           "b.ts AS tb STRATEGY SKIP_TILL_ANY_MATCH PATTERN (" + pattern + ") "
           "WITHIN INTERVAL '6' SECOND DEFINE a AS a.tag = 'x', b AS b.tag = 'y', "
           "n AS n.tag = 'n')")
    frame = spark.table("border")
    plan = plan_query(find_match_recognize(sql)[0].spec, arrow_schema(frame), sql)
    sliced = slice_plan(spark, frame, plan, max_slices=2, min_slice_windows=1, bounds="span")
    assert sliced.slices == 2
    inner = plan_query(sliced.spec, arrow_schema(sliced.frame), sql)
    got = sorted(tuple(r) for r in sliced.finish(run_plan(sliced.frame, inner)).collect())
    local = sql.replace(" border ", " t ")
    want = cepsql.match_recognize(local, t=table)
    assert got == sorted(tuple(int(v) for v in r) for r in want.itertuples(index=False, name=None))
    # the NOT row across the border decides: without it the match is output
    assert len(want) == 0
    assert len(cepsql.match_recognize(local.replace("= 'n')", "= 'none')"), t=table)) == 1


def test_slice_count_follows_the_span(spark, events):
    plan = _planned(spark, events, QUERIES["any-match one row"])
    lo, hi = min(EVENTS["ts"].to_pylist()), max(EVENTS["ts"].to_pylist())
    # window 6 s, at least 4 windows per slice
    assert (slice_plan(spark, events, plan, max_slices=100, bounds="span").slices
            == (hi - lo) // 24)
    assert slice_plan(spark, events, plan, max_slices=1, bounds="span") is None


@pytest.mark.parametrize("body", [
    "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) DEFINE a AS a.tag = 'x'",  # no WITHIN
    "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) WITHIN 5 ROWS DEFINE a AS a.tag = 'x'",
    "PATTERN (a b) WITHIN INTERVAL '5' SECOND DEFINE a AS a.tag = 'x'",  # SQL:2016 mode
    "AFTER MATCH SKIP PAST LAST ROW STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) "
    "WITHIN INTERVAL '5' SECOND DEFINE a AS a.tag = 'x'",
    "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) WITHIN INTERVAL '5' SECOND "
    "DEFINE a AS PREV(a.price) > a.price",
])
def test_not_sliced(spark, events, body):
    sql = clause("MEASURES a.ts AS t0 " + body)
    plan = _planned(spark, events, sql)
    assert slicing_blocker(plan.spec) is not None
    assert slice_plan(spark, events, plan) is None


def test_match_number_and_unmatched_rows_block():
    for body in ("MEASURES MATCH_NUMBER() AS mn", "MEASURES a.ts AS t0 ALL ROWS PER MATCH WITH "
                                                   "UNMATCHED ROWS"):
        spec = find_match_recognize(clause(
            body + " STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) WITHIN INTERVAL '5' SECOND "
            "DEFINE a AS a.tag = 'x'"))[0].spec
        assert slicing_blocker(spec) is not None


def test_slicing_option_off(spark, events):
    from cepsql.planning.options import PlannerOptions
    plan = _planned(spark, events, QUERIES["leading NOT"])
    assert slice_plan(spark, events, plan, options=PlannerOptions(slicing=False)) is None
    assert slice_plan(spark, events, plan, options=PlannerOptions()) is not None


def test_null_times_are_dropped_only_where_they_cannot_match(spark):
    table = pa.table({"ts": [None, 1, 2, None, 30, 31, 60, 61, 90, 91],
                      "tag": ["x", "x", "y", "y", "x", "y", "x", "y", "x", "y"]})
    spark.createDataFrame(table.to_pandas()).createOrReplaceTempView("nt")
    sql = ("SELECT * FROM nt MATCH_RECOGNIZE (ORDER BY ts MEASURES a.ts AS t0, b.ts AS t1 "
           "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) WITHIN INTERVAL '2' SECOND "
           "DEFINE a AS a.tag = 'x', b AS b.tag = 'y')")
    got = sorted(tuple(r) for r in spark.cep.sql(sql).collect())
    want = sorted(cepsql.match_recognize(sql.replace(" nt ", " t "), t=table)
                  .itertuples(index=False, name=None))
    assert got == [tuple(int(v) for v in r) for r in want] == [(1, 2), (30, 31), (60, 61),
                                                                (90, 91)]


def test_labels_get_a_task_each(spark):
    labels = slice_labels(4, 4)
    df = spark.createDataFrame([(v,) for v in labels], "label long").repartition(4, "label")
    tasks = df.select(F.spark_partition_id().alias("p")).distinct().count()
    assert tasks == 4
    values = [0, 1, -1, 2 ** 40 + 3, -(2 ** 63), 2 ** 63 - 1]
    hashed = spark.createDataFrame([(v,) for v in values], "v long").selectExpr("v", "hash(v) h")
    assert all(r.h == spark_hash_long(r.v) for r in hashed.collect())


# --- property tests: random unpartitioned, time-windowed clauses, sliced == unsliced ------

from hypothesis import HealthCheck, Phase, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from support.strategies_cep import cep_queries, cep_streams  # noqa: E402
from test_property_sql import row_multiset  # noqa: E402

from cepsql.reference.cep import evaluate_reference_cep  # noqa: E402
from cepsql.explain.clause import explain_clause

NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)  # a Spark job per example
#: TIMESTAMP_NTZ origins for the property test: before 1970 (negative micros, across
#: the epoch), off the grid by a fraction of a second, on a DST night in New York
NTZ_ORIGINS = (dt.datetime(1969, 12, 31, 23, 59, 57, 250_000),
               dt.datetime(2024, 3, 10, 1, 59, 58, 700_000))


def _null_normal(v):
    """pandas shows a NULL double as NaN (the drawn streams hold no NaN)."""
    v = _normal(v)
    return None if isinstance(v, float) and v != v else v


def _unpartitioned_windowed(sql: str, window: int) -> str:
    """A drawn CEP query made sliceable: no PARTITION BY, no MATCH_NUMBER(), a time window."""
    import re
    sql = sql.replace("PARTITION BY part", "").replace(", MATCH_NUMBER() AS mn", "")
    sql = sql.replace("MATCH_NUMBER() AS mn, ", "").replace("MATCH_NUMBER() AS mn", "count(*) AS n")
    sql = re.sub(r"WITHIN (\d+ ROWS|INTERVAL '\d+' SECOND|INTERVAL \d+ SECONDS)", "", sql)
    at, depth = sql.index("PATTERN (") + len("PATTERN "), 0
    for end in range(at, len(sql)):  # the parenthesis closing PATTERN (...)
        depth += {"(": 1, ")": -1}.get(sql[end], 0)
        if depth == 0:
            break
    return f"{sql[:end + 1]} WITHIN INTERVAL '{window}' SECOND{sql[end + 1:]}"


@settings(max_examples=30, deadline=None, derandomize=True, phases=NO_SHRINK,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data(), window=st.integers(1, 5), ties=st.booleans(),
       bounds=st.sampled_from(["grid", "grid", "span"]),
       grid_windows=st.sampled_from([0.2, 0.5, 1.0, 2.0, 8.0]), max_slices=st.integers(2, 6),
       ntz=st.sampled_from([None, None, *NTZ_ORIGINS]))
def test_sliced_equals_unsliced_property(spark, data, window, ties, bounds, grid_windows,
                                         max_slices, ntz):
    """Grid slices of one ts unit up to many windows, span slices of 2..6, ties and NULLs
    in ts (with ``ties``): the sliced result equals the in-process one, row for row.
    With ``ntz`` ts is a TIMESTAMP_NTZ (ts seconds after that origin): grids more than a
    window wide are then cut by window() labels (slicing._window_cut), thinner ones by
    the micros; matches cross slice borders and, below one window, whole slices."""
    table = data.draw(cep_streams(unique_ts=not ties, with_nulls=ties))
    sql = _unpartitioned_windowed(data.draw(cep_queries()), window)
    spec = find_match_recognize(sql)[0].spec
    assume(slicing_blocker(spec) is None)
    want = cepsql.match_recognize(sql, t=table)
    _assert_reference(sql, spec, table, want)
    if ntz is not None:  # the same stream on a TIMESTAMP_NTZ axis
        table = table.set_column(table.schema.get_field_index("ts"), "ts", pa.array(
            [None if s is None else ntz + dt.timedelta(seconds=s)
             for s in table["ts"].to_pylist()], pa.timestamp("us")))
        want = cepsql.match_recognize(sql, t=table)
    frame = spark.createDataFrame(table.to_pylist(), schema="part string, ts " + (
        "long" if ntz is None else "timestamp_ntz") + ", price long, vol double, tag string")
    plan = plan_query(spec, arrow_schema(frame), sql)
    sliced = slice_plan(spark, frame, plan, bounds=bounds, grid_windows=grid_windows,
                        max_slices=max_slices, min_slice_windows=0.25)
    if sliced is None:  # span bounds: fewer than two slices fit
        assert bounds == "span"
        return
    inner = plan_query(sliced.spec, arrow_schema(sliced.frame), sql)
    out = sliced.finish(run_plan(sliced.frame, inner))
    assert out.columns == list(want.columns)
    got = Counter(tuple(_null_normal(v) for v in r) for r in out.collect())
    expected = Counter(tuple(_null_normal(v) for v in r) for r in want.itertuples(index=False))
    assert got == expected, (f"{sql}\n{table.to_pydict()}\nmissing {expected - got}\n"
                             f"extra {got - expected}")


def _assert_reference(sql: str, spec, table: pa.Table, unsliced) -> None:
    """The unsliced (in-process) result equals the reference_cep oracle's."""
    names, rows = evaluate_reference_cep(spec, table)
    assert list(unsliced.columns) == names
    got = row_multiset(unsliced.itertuples(index=False, name=None))
    assert got == row_multiset(rows), f"{sql}\n{table.to_pylist()}"


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), window=st.integers(1, 5), ties=st.booleans())
def test_sliceable_clauses_unsliced_equal_reference_property(data, window, ties):
    """The clauses the Spark property test slices, in-process (never sliced) against the
    reference_cep oracle: with the Spark test, sliced == unsliced == reference."""
    table = data.draw(cep_streams(unique_ts=not ties, with_nulls=ties))
    sql = _unpartitioned_windowed(data.draw(cep_queries()), window)
    spec = find_match_recognize(sql)[0].spec
    assume(slicing_blocker(spec) is None)
    _assert_reference(sql, spec, table, cepsql.match_recognize(sql, t=table))


def test_grid_slices_are_spread_over_tasks(spark, events):
    sql = QUERIES["any-match one row"]
    plan = _planned(spark, events, sql)
    sliced = slice_plan(spark, events, plan, bounds="grid", grid_windows=1)  # 6 s slices
    assert sliced.slices == 0 and "a grid of slices 6 s wide" in explain_clause(plan)
    inner = plan_query(sliced.spec, arrow_schema(sliced.frame), sql)
    out = sliced.run(sliced.frame, inner)
    # the labels spread over Spark's 4 hash partitions (AQE would join this tiny input's
    # partitions into one task: its coalescing is off for the check)
    spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
    try:
        used = out.select(F.spark_partition_id().alias("task"), SLICE_COLUMN).distinct().collect()
    finally:
        spark.conf.unset("spark.sql.adaptive.coalescePartitions.enabled")
    assert len({r.task for r in used}) == 4 and len({r[SLICE_COLUMN] for r in used}) > 10
    assert sorted(sliced.finish(out).collect()) == sorted(spark.cep.sql(sql).collect())


def test_bounds_conf(spark, events):
    plan = _planned(spark, events, QUERIES["leading NOT"])
    spark.conf.set("cepsql.slicing.bounds", "span")
    try:
        assert slice_plan(spark, events, plan).slices == 4
        spark.conf.set("cepsql.slicing.bounds", "nonsense")
        with pytest.raises(ValueError):
            slice_plan(spark, events, plan)
    finally:
        spark.conf.unset("cepsql.slicing.bounds")
    assert slice_plan(spark, events, plan).slices == 0


def test_timestamp_ntz_across_a_dst_change(spark):
    """TIMESTAMP_NTZ times are sliced by their wall-clock micros (what the evaluator
    reads), not through the session zone: in America/New_York 01:59:59.6 and 02:00:00.2
    on 2024-11-03 are an hour apart as instants, 0.6 s apart as the clause sees them."""
    base = dt.datetime(2024, 11, 3, 1, 59, 59, 600_000)
    steps = [0.0, 0.6, 5.0, 5.4, 3600.0, 3600.5]
    spring = dt.datetime(2024, 3, 10, 1, 59, 59, 800_000)  # 02:xx does not exist there
    at = [base + dt.timedelta(seconds=s) for s in steps] + \
        [spring, spring + dt.timedelta(seconds=0.4), spring + dt.timedelta(seconds=3600.1)]
    table = pa.table({"at": pa.array(at, pa.timestamp("us")),
                      "tag": ["x", "y"] * 3 + ["x", "y", "y"]})
    sql = ("SELECT * FROM ntz MATCH_RECOGNIZE (ORDER BY at MEASURES a.at AS ta, b.at AS tb "
           "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) WITHIN INTERVAL '1' SECOND "
           "DEFINE a AS a.tag = 'x', b AS b.tag = 'y')")
    want = sorted(cepsql.match_recognize(sql.replace(" ntz ", " t "), t=table)
                  .itertuples(index=False, name=None))
    assert len(want) == 4
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        frame = spark.createDataFrame(table.to_pylist(), schema="at timestamp_ntz, tag string")
        frame.createOrReplaceTempView("ntz")
        plan = plan_query(find_match_recognize(sql)[0].spec, arrow_schema(frame), sql)
        for grid in (0.5, 8.0):  # slice borders inside and around the matches
            sliced = slice_plan(spark, frame, plan, bounds="grid", grid_windows=grid)
            inner = plan_query(sliced.spec, arrow_schema(sliced.frame), sql)
            out = sliced.finish(run_plan(sliced.frame, inner))
            got = sorted((r.ta, r.tb) for r in out.collect())
            assert got == [(a.to_pydatetime(), b.to_pydatetime()) for a, b in want]
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)


@pytest.mark.parametrize("order", ["ASC", "DESC"])
def test_window_cut_labels_and_copies(spark, order):
    """The TIMESTAMP_NTZ grid cut (window() labels): 2 s slices for a 1 s window; a row
    is copied into the previous slice when within 1 s of its slice's start (ascending:
    matches reach forward) or into the next one when within 1 s of its end (descending)."""
    epoch = dt.datetime(1970, 1, 1)
    seconds = [-0.3, 0.0, 0.5, 1.2, 2.0, 2.99]
    table = pa.table({"at": pa.array([epoch + dt.timedelta(seconds=s) for s in seconds],
                                     pa.timestamp("us")), "tag": ["x"] * len(seconds)})
    frame = spark.createDataFrame(table.to_pylist(), schema="at timestamp_ntz, tag string")
    sql = (f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY at {order} MEASURES a.at AS ta "
           "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) WITHIN INTERVAL '1' SECOND "
           "DEFINE a AS a.tag = 'x', b AS b.tag = 'x')")
    plan = plan_query(find_match_recognize(sql)[0].spec, arrow_schema(frame), sql)
    sliced = slice_plan(spark, frame, plan, bounds="grid", grid_windows=2)
    assert "__cep_slice_pos" in sliced.frame._jdf.queryExecution().analyzed().toString()
    got = sorted(((r.at - epoch).total_seconds(), (r[SLICE_COLUMN] - epoch).total_seconds(),
                  r[COPY_COLUMN]) for r in sliced.frame.collect())
    homes = [(s, float(2 * (s // 2)), False) for s in seconds]
    if order == "ASC":
        copies = [(s, float(2 * (s // 2) - 2), True) for s in seconds if s % 2 < 1]
    else:
        copies = [(s, float(2 * (s // 2) + 2), True) for s in seconds if s % 2 >= 1]
    assert got == sorted(homes + copies)
    inner = plan_query(sliced.spec, arrow_schema(sliced.frame), sql)
    out = sorted(r.ta for r in sliced.finish(run_plan(sliced.frame, inner)).collect())
    want = cepsql.match_recognize(sql, t=table)
    assert out == sorted(v.to_pydatetime() for v in want["ta"]) and len(out) >= 4
