"""The workload's one pass on Spark, beyond tests/test_workload_spark.py: views of every
shape (alias list, SQL around, two clauses, a clause over a clause) recorded once and read
from the one pass equal each view alone; CEP views' relevance filters drop rows before the
shuffle and each pattern gets only its relevant rows; row-local columns computed in the
task (Arrow) where their type is Spark's."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cepsql.runtime.one_pass import with_computed

SOURCE = "wlp_ticks"
N_ROWS = 300
CEP_VIEWS = {
    "wlp_any": "SELECT * FROM wlp_ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
               "MEASURES a.ts AS ta, b.ts AS tb, b.price - a.price AS gain "
               "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) WITHIN INTERVAL '6' SECOND "
               "DEFINE a AS a.vol > 70, b AS b.vol > 60 AND b.price > a.price)",
    "wlp_next": "SELECT * FROM wlp_ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
                "MEASURES a.ts AS ta, c.ts AS tc, COUNT(b.ts) AS n "
                "STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, KL(b), c)) "
                "WITHIN INTERVAL '9' SECOND DEFINE a AS a.vol > 80, "
                "b AS b.vol > 40 AND b.price > a.price, c AS c.vol > 75 AND c.amount > 2.5)",
    "wlp_sym": "SELECT * FROM wlp_ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
               "MEASURES a.ts AS ta, b.amount AS amt STRATEGY SKIP_TILL_ANY_MATCH "
               "PATTERN (SEQ(a, b)) WITHIN INTERVAL '5' SECOND "
               "DEFINE a AS a.sym = 'b' AND a.amount * 2 > 9.5, b AS b.vol < 10)",
}
SHAPED_VIEWS = {
    "wlp_alias": "SELECT * FROM wlp_ticks MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
                 "MEASURES FIRST(A.price) AS low, LAST(B.price) AS high PATTERN (A B+) "
                 "DEFINE B AS B.price > PREV(B.price)) AS m(s, x_low, x_high)",
    "wlp_around": "SELECT sym, count(*) AS n, max(gain) AS g FROM (SELECT * FROM wlp_ticks "
                  "MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES "
                  "LAST(B.price) - FIRST(A.price) AS gain PATTERN (A B+) "
                  "DEFINE A AS A.vol > 50, B AS B.price > PREV(B.price))) GROUP BY sym",
    "wlp_two": "SELECT sym, ta AS t FROM wlp_ticks MATCH_RECOGNIZE (PARTITION BY sym "
               "ORDER BY ts MEASURES a.ts AS ta STRATEGY SKIP_TILL_ANY_MATCH "
               "PATTERN (SEQ(a, b)) WITHIN INTERVAL '3' SECOND DEFINE a AS a.vol > 90, "
               "b AS b.vol > 90) UNION ALL SELECT sym, t0 FROM wlp_ticks MATCH_RECOGNIZE ("
               "PARTITION BY sym ORDER BY ts MEASURES FIRST(D.ts) AS t0 PATTERN (D{2,}) "
               "DEFINE D AS D.price < PREV(D.price))",
    "wlp_nested": "SELECT * FROM (SELECT * FROM wlp_ticks MATCH_RECOGNIZE (PARTITION BY sym "
                  "ORDER BY ts MEASURES A.ts AS ts, A.price AS price ONE ROW PER MATCH "
                  "PATTERN (A) DEFINE A AS A.vol > 30)) MATCH_RECOGNIZE (ORDER BY ts "
                  "MEASURES FIRST(U.ts) AS t0, COUNT(U.ts) AS n PATTERN (U{3,}) "
                  "DEFINE U AS U.price > PREV(U.price))",
}


@pytest.fixture(scope="module")
def source(spark):
    rng = np.random.default_rng(11)
    pdf = pd.DataFrame({"sym": rng.choice(list("abc"), N_ROWS),
                        "ts": pd.to_datetime(np.arange(N_ROWS), unit="s"),
                        "price": rng.integers(0, 10, N_ROWS).astype(np.int64),
                        "vol": rng.integers(0, 100, N_ROWS).astype(np.int64),
                        "amount": np.round(rng.random(N_ROWS) * 5, 2)})
    base = spark.createDataFrame(pdf)
    scanned = spark.sparkContext.accumulator(0)

    def counting(batches):  # counts every row Spark reads from the source
        for batch in batches:
            scanned.add(batch.num_rows)
            yield batch

    base.mapInArrow(counting, base.schema).createOrReplaceTempView(SOURCE)
    for name, query in {**CEP_VIEWS, **SHAPED_VIEWS}.items():
        spark.cep.sql(f"CREATE OR REPLACE TEMPORARY VIEW {name} AS {query}")
    yield spark, scanned
    for name in [*CEP_VIEWS, *SHAPED_VIEWS, SOURCE]:
        spark.cep.sql(f"DROP VIEW IF EXISTS {name}")


def rows(df):
    return sorted(map(repr, df.collect()))


def test_cep_views_read_only_relevant_rows_and_equal_each_view_alone(source):
    spark, scanned = source
    wl = spark.cep.workload(list(CEP_VIEWS))
    wl.explain()  # builds the workload (the sharing planner may sample the source)
    (shared, tagged), = wl._built.passes.values()
    group, = shared.groups
    assert group.relevance is not None and len(group.relevance) == len(CEP_VIEWS)
    assert all(p.relevant is not None for p in group.patterns)
    assert "Filter" in tagged._jdf.queryExecution().optimizedPlan().toString()
    before = scanned.value
    frames = wl.dataframes()  # a small pass runs here, once
    got = {name: rows(df) for name, df in frames.items()}
    assert scanned.value - before == N_ROWS  # one scan for the three views
    for name in CEP_VIEWS:
        alone = spark.table(name)
        assert frames[name].schema == alone.schema, name
        assert got[name] == rows(alone), name
    assert sum(map(len, got.values())) > 20
    counts = {r.view: r["count"] for r in wl.matches().groupBy("view").count().collect()}
    assert counts == {name: len(got[name]) for name in CEP_VIEWS if got[name]}
    wl.close()


def test_views_of_every_shape_equal_each_view_alone(source):
    spark, scanned = source
    names = [*SHAPED_VIEWS, "wlp_any"]
    wl = spark.cep.workload(names)
    frames = wl.dataframes()
    assert list(frames) == names
    assert frames["wlp_alias"].columns[-2:] == ["x_low", "x_high"]
    for name in names:
        alone = spark.table(name)
        assert frames[name].schema == alone.schema, name
        assert rows(frames[name]) == rows(alone), name
    wl.close()


def test_the_pass_computes_row_local_columns_in_the_task_like_spark(source):
    """Columns the task computes with Arrow (with_computed) equal Spark's own."""
    spark, _ = source
    wl = spark.cep.workload(list(CEP_VIEWS))
    wl.dataframes()
    (shared, _), = wl._built.passes.values()
    group, = shared.groups
    from cepsql.backends.spark.workload import _late_columns, _prepare_split
    from cepsql.exprs.spark_sql import to_spark_sql
    from pyspark.sql import functions as F
    early, late = _prepare_split(group)
    assert not early and late
    in_engine, in_task, _ = _late_columns(spark.table(SOURCE), late)
    assert in_task  # the comparisons and arithmetic above are Arrow-computable
    batch = spark.table(SOURCE).toArrow().combine_chunks().to_batches()[0]
    mine = with_computed(batch, in_task)
    theirs = spark.table(SOURCE).select(
        *[F.expr(to_spark_sql(e)).alias(n) for n, e in in_task]).toArrow()
    for name, _ in in_task:
        assert mine.column(name).to_pylist() == theirs.column(name).to_pylist(), name
    wl.close()


def test_views_of_one_template_share_a_result_column_and_matches_is_one_scan(source):
    """The compact layout: views with equal measure types share one struct column of the
    persisted pass; matches() reads it in one projection (one scan of the source) and
    gives each view's rows, partition keys and measures exactly."""
    spark, scanned = source
    twin = CEP_VIEWS["wlp_any"].replace("a.vol > 70", "a.vol > 50").replace("'6'", "'4'")
    spark.cep.sql(f"CREATE OR REPLACE TEMPORARY VIEW wlp_any2 AS {twin}")
    try:
        names = ["wlp_any", "wlp_any2", "wlp_sym"]
        wl = spark.cep.workload(names)
        matches = wl.matches()  # builds the pass (the planner's sample is read here)
        before = scanned.value
        m = matches.collect()
        assert scanned.value - before == N_ROWS  # one scan for the three views
        (shared, tagged), = wl._built.passes.values()
        slots = [shared.column_of(i) for i in range(3)]
        assert slots[0] == slots[1] != slots[2]
        assert [f.name for f in tagged.schema].count(slots[0]) == 1
        import json
        by_view: dict[str, list] = {name: [] for name in names}
        for r in m:
            by_view[r.view].append((json.loads(r.partition.toJson()), r.match_number,
                                    json.loads(r.measures.toJson())))
        for name in names:
            alone = spark.table(name).collect()
            assert len(by_view[name]) == len(alone) > 0, name
            assert sorted(k["sym"] for k, _, _ in by_view[name]) == sorted(
                r.sym for r in alone), name
            per_key: dict[str, list[int]] = {}
            for k, n, _ in by_view[name]:
                per_key.setdefault(k["sym"], []).append(n)
            assert all(sorted(ns) == list(range(1, len(ns) + 1))
                       for ns in per_key.values()), name
        gains = sorted(v["gain"] for _, _, v in by_view["wlp_any2"])
        assert gains == sorted(r.gain for r in spark.table("wlp_any2").collect())
        frames = wl.dataframes()
        for name in names:
            assert rows(frames[name]) == rows(spark.table(name)), name
        wl.close()
    finally:
        spark.cep.sql("DROP VIEW IF EXISTS wlp_any2")


def test_joined_batches_keep_order_and_join_up_to_the_size():
    import pyarrow as pa
    from cepsql.runtime.one_pass import joined_batches
    parts = [pa.record_batch({"x": list(range(k, k + n))}) for k, n in
             [(0, 3), (3, 0), (3, 4), (7, 2), (9, 5), (14, 1)]]
    out = list(joined_batches(iter(parts), 6))
    assert [b.num_rows for b in out] == [7, 7, 1]
    assert [v for b in out for v in b.column(0).to_pylist()] == list(range(15))
    assert list(joined_batches(iter([]), 6)) == []


@pytest.mark.parametrize("ansi", ["true", "false"])
def test_task_columns_follow_the_sessions_ansi_setting(spark, ansi):
    """FLOAT beside an integer meets it at DOUBLE under ANSI and at FLOAT without (2^24 + 1
    rounds to 2^24): the task's Arrow columns follow the session's setting, not the
    worker process's defaults, so the pass equals the view alone under both."""
    import pyspark.sql.types as T
    big = 2 ** 24 + 1
    data = [("a", i, 1.0, big if i % 2 else 3) for i in range(8)]
    schema = T.StructType([T.StructField("sym", T.StringType()),
                           T.StructField("k", T.LongType()),
                           T.StructField("f", T.FloatType()),
                           T.StructField("vol", T.LongType())])
    spark.createDataFrame(data, schema).createOrReplaceTempView("wlp_float")
    view = ("SELECT * FROM wlp_float MATCH_RECOGNIZE (PARTITION BY sym ORDER BY k "
            "MEASURES a.k AS ka, b.k AS kb STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) "
            "DEFINE a AS a.f * a.vol > 16777216, b AS b.vol > 0)")
    old = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", ansi)
    try:
        spark.cep.sql(f"CREATE OR REPLACE TEMPORARY VIEW wlp_fview AS {view}")
        spark.cep.sql(f"CREATE OR REPLACE TEMPORARY VIEW wlp_fview2 AS "
                      f"{view.replace('b.vol > 0', 'b.vol > 1')}")
        wl = spark.cep.workload(["wlp_fview", "wlp_fview2"])
        frames = wl.dataframes()
        (shared, _), = wl._built.passes.values()
        from cepsql.backends.spark.workload import _late_columns, _prepare_split
        _, late = _prepare_split(shared.groups[0])
        _, in_task, _ = _late_columns(spark.table("wlp_float"), late, ansi == "true")
        assert in_task
        for name in ("wlp_fview", "wlp_fview2"):
            got = rows(frames[name])
            assert got == rows(spark.table(name)), name
            assert len(got) == (12 if ansi == "true" else 0), name
        wl.close()
    finally:
        spark.conf.set("spark.sql.ansi.enabled", old)
        for name in ("wlp_fview", "wlp_fview2", "wlp_float"):
            spark.cep.sql(f"DROP VIEW IF EXISTS {name}")


# --- the task's lane cache (runtime/worker.py LaneCache) --------------------------------
LANE_VIEWS = [
    "SELECT * FROM lt MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.price AS p0, "
    "LAST(B.price) AS p1, SUM(B.x) AS sx, COUNT(B.ts) AS n ONE ROW PER MATCH "
    "AFTER MATCH SKIP PAST LAST ROW PATTERN (A B{2,}) "
    "DEFINE A AS A.v > {v}, B AS B.price > PREV(B.price) OR B.x < PREV(B.x))",
    "SELECT * FROM lt MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES a.ts AS ta, "
    "c.ts AS tc, COUNT(b.ts) AS busy, MAX(b.x) AS mx ONE ROW PER MATCH "
    "STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, KL(b), c)) WITHIN INTERVAL '{w}' SECOND "
    "DEFINE a AS a.v > {v}, b AS b.price > a.price, c AS c.x > a.x OR c.v > {v})",
    "SELECT * FROM lt MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(A.ts) AS t0, "
    "AVG(A.price) AS ap ALL ROWS PER MATCH PATTERN (A{2,} B) "
    "DEFINE A AS A.x >= PREV(A.x) OR A.price IS NULL, B AS B.v < {v})",
]


def _lane_table(seed: int):
    """Tiny ticks with DECIMAL prices, DOUBLE x (NaN, +-0.0, NULL), BIGINT v and NULL keys."""
    import decimal
    import pyarrow as pa
    rng = np.random.default_rng(seed)
    n = 150
    price = [None if rng.random() < 0.1 else decimal.Decimal(int(rng.integers(0, 900))) / 100
             for _ in range(n)]
    x = rng.choice([np.nan, -0.0, 0.0, 1.5, 2.5, -3.0], n).tolist()
    x = [None if rng.random() < 0.1 else value for value in x]
    sym = [None if rng.random() < 0.05 else str(s) for s in rng.choice(list("ab"), n)]
    return pa.table({"sym": pa.array(sym, pa.string()),
                     "ts": pa.array((np.arange(n) * 1_000_000).astype("datetime64[us]")),
                     "price": pa.array(price, pa.decimal128(12, 2)),
                     "x": pa.array(x, pa.float64()),
                     "v": pa.array(rng.integers(0, 100, n), pa.int64())})


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_views_sharing_the_lane_cache_equal_each_view_alone(monkeypatch, seed):
    """Many views of the pass read the same columns through one lane cache, in small
    batches and chunks (carried rows are slices of converted arrays): every view's rows
    equal the view run alone (DECIMAL, NaN, -0.0, NULL values and NULL keys included)."""
    import cepsql
    from cepsql.runtime import cep_worker, worker
    from cepsql.runtime.pending import pieces
    from cepsql.runtime import one_pass
    table = _lane_table(seed)
    rng = np.random.default_rng(seed)
    queries = [LANE_VIEWS[i % 3].replace("{v}", str(int(rng.integers(50, 95))))
               .replace("{w}", str(int(rng.integers(3, 12)))) for i in range(9)]
    alone = [cepsql.match_recognize(q, lt=table) for q in queries]
    conversions = []
    original = worker.LaneCache.get

    def counting_get(self, array, kind, convert):
        def counted(a):
            conversions.append(kind)
            return convert(a)
        return original(self, array, kind, counted)

    monkeypatch.setattr(worker.LaneCache, "get", counting_get)
    monkeypatch.setattr(worker, "CHUNK_ROWS", 16)
    monkeypatch.setattr(cep_worker, "CHUNK_ROWS", 16)
    monkeypatch.setattr(one_pass, "joined_batches", lambda batches, rows: pieces(batches, 11))
    views = [f"CREATE TEMPORARY VIEW lv{i} AS {q}" for i, q in enumerate(queries)]
    shared = cepsql.workload(views, sharing={"algorithm": "NONE"}, lt=table).dataframes()
    for i, frame in enumerate(alone):
        got = shared[f"lv{i}"]
        assert list(got.columns) == list(frame.columns), queries[i]
        assert sorted(map(repr, got.itertuples(index=False))) == \
            sorted(map(repr, frame.itertuples(index=False))), queries[i]
    assert sum(len(f) for f in alone) > 10
    cached = len(conversions)
    del conversions[:]  # the same pass with a cache that keeps nothing
    no_cache = worker.LaneCache
    monkeypatch.setattr(one_pass, "LaneCache", lambda: no_cache(0))
    cepsql.workload(views, sharing={"algorithm": "NONE"}, lt=table)
    assert 0 < cached < 0.85 * len(conversions)


def test_lane_cache_serves_slices_and_tells_arrays_apart():
    import pyarrow as pa
    from cepsql.runtime.worker import LaneCache
    calls = []

    def convert(a):
        calls.append(len(a))
        return (np.asarray(a.to_numpy(zero_copy_only=False), dtype=np.float64),)

    cache = LaneCache(capacity=2)
    base = pa.array([1.0, 2.0, None, 4.0])
    assert cache.get(base, "f", convert)[0][:2].tolist() == [1.0, 2.0]
    assert cache.get(base.slice(1, 3), "f", convert)[0][0] == 2.0  # a slice: no new call
    same_values = pa.array([1.0, 2.0, None, 4.0])  # other buffers: converted again
    cache.get(same_values, "f", convert)
    cache.get(base, "g", convert)  # another kind: its own entry (evicts the oldest)
    assert calls == [4, 4, 4]
    cache.get(base.slice(2), "f", convert)  # base's "f" entry was evicted (capacity 2)
    assert calls == [4, 4, 4, 2]


@pytest.mark.parametrize("seed", [1, 2])
def test_a_time_budgeted_sharing_search_stops_once_it_stalls(seed):
    """The pass's planning: a search with a long budget over a small multi-pattern graph
    ends after its stall limit (not the budget) with the plan a fixed-iteration run finds."""
    from cepsql.sharing import plan_workload
    from cepsql.sharing.search import STALL_MIN
    from support.sharing_synthetic import stock_workload
    patterns = stock_workload(8, seed=seed).workload_patterns()
    timed = plan_workload(patterns, algorithm="BEST", seconds=600)
    fixed = plan_workload(patterns, algorithm="BEST", max_iterations=2500)
    assert 0 < timed.graph_edges < 50
    assert timed.iterations < 6 * STALL_MIN
    assert timed.cost == pytest.approx(fixed.cost, rel=1e-9)


def test_task_columns_reuse_earlier_columns_and_keep_their_values():
    """with_computed over reused_subexpressions: a relevance filter ORing conditions the
    pass computes anyway reads those columns; values and types are those of computing
    every expression on its own (NULL, NaN and DECIMAL included)."""
    import decimal
    import pyarrow as pa
    from cepsql.algebra.expressions import BinaryOp, ColumnRef, Literal, children
    from cepsql.runtime.one_pass import reused_subexpressions
    batch = pa.record_batch({
        "v": pa.array([5, None, 70, 90, 12], pa.int64()),
        "x": pa.array([1.5, float("nan"), None, -0.0, 3.0], pa.float64()),
        "d": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("9.10"),
                       decimal.Decimal("0.00"), decimal.Decimal("2.50")], pa.decimal128(6, 2))})
    def op(o, a, b):
        return BinaryOp(o, a, b)
    v60 = op(">", ColumnRef(None, "v"), Literal(60, "int"))
    x2 = op("<", ColumnRef(None, "x"), Literal(2.0, "double"))
    d45 = op(">", op("*", ColumnRef(None, "d"), Literal(2, "int")), Literal(4.5, "double"))
    exprs = [v60, x2, d45, op("OR", v60, x2), op("OR", op("OR", op("AND", d45, v60), x2), d45),
             op("+", ColumnRef(None, "v"), Literal(1, "int"))]
    computed = [(f"__cep_s{i}", e) for i, e in enumerate(exprs)]
    reused = reused_subexpressions(computed)
    assert reused[:3] == computed[:3]
    assert children(reused[3][1]) == (ColumnRef(None, "__cep_s0"), ColumnRef(None, "__cep_s1"))
    for ansi in (True, False):
        got, expected = with_computed(batch, reused, ansi), with_computed(batch, computed, ansi)
        assert got.schema == expected.schema
        assert repr(got.to_pylist()) == repr(expected.to_pylist())  # NaN compares by repr


def test_adaptive_pass_re_plans_in_tasks_and_equals_each_view_alone(source):
    """cepsql.adaptive.* reach the batch pass: its tasks re-plan (EXPLAIN WORKLOAD says
    so), with every view's rows unchanged; enabled=false keeps the start-up plan."""
    spark, _ = source
    names = ["wlp_any", "wlp_sym"]
    conf = {"cepsql.adaptive.threshold": "1e-9", "cepsql.adaptive.minGain": "1e-9",
            "cepsql.adaptive.confirmChecks": "1", "cepsql.adaptive.chunkRows": "20",
            "cepsql.adaptive.checkRows": "40"}
    try:
        for key, value in conf.items():
            spark.conf.set(key, value)
        wl = spark.cep.workload(names)
        assert "adaptive: re-planned in tasks" in wl.explain()
        (shared, _), = wl._built.passes.values()
        assert shared.groups[0].replanner is not None
        frames = wl.dataframes()
        for name in names:
            assert rows(frames[name]) == rows(spark.table(name)), name
        wl.close()
        spark.conf.set("cepsql.adaptive.enabled", "false")
        wl = spark.cep.workload(names)
        assert "adaptive: start-up plan throughout" in wl.explain()
        wl.close()
    finally:
        for key in [*conf, "cepsql.adaptive.enabled"]:
            spark.conf.unset(key)
