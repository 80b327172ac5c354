"""A workload over a stream: spark.cep.workload(src).matches() and cep_workload('src') over
a streaming source are ONE streaming query (one stateful operator per partitioning group)
evaluating every pattern view ("any" and "pair" share SEQ(a, b) in one shared DAG per
key, next to SQL:2016 and SKIP_TILL_NEXT_MATCH views). A JSON file source is written in two increments (out of
order rows, a late row, a key that goes quiet), each run with availableNow from the same
checkpoint (stop + restart); the sink must hold exactly the batch workload's matches over
the same non-late rows."""
from __future__ import annotations

import os

import pytest

try:
    from .test_streaming_spark import DELAY, FIRST, LATE, SCHEMA, SECOND, _write
except ImportError:
    from test_streaming_spark import DELAY, FIRST, LATE, SCHEMA, SECOND, _write

VIEWS = {
    "rise": """SELECT * FROM {src} MATCH_RECOGNIZE (
        PARTITION BY sym ORDER BY ts
        MEASURES FIRST(a.ts) AS t0, LAST(b.ts) AS t1, count(b.*) AS n, MATCH_NUMBER() AS mn
        ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
        PATTERN (a b+) WITHIN INTERVAL '3' SECOND
        DEFINE b AS b.price > PREV(b.price))""",
    "gain": """SELECT * FROM {src} MATCH_RECOGNIZE (
        PARTITION BY sym ORDER BY ts
        MEASURES a.ts AS ta, b.ts AS tb, b.price - a.price AS gain
        ONE ROW PER MATCH STRATEGY SKIP_TILL_NEXT_MATCH
        PATTERN (SEQ(a, b)) WITHIN INTERVAL '3' SECOND
        DEFINE a AS a.price < 5, b AS b.price > a.price + 1 AND b.price > PREV(b.price))""",
    "any": """SELECT * FROM {src} MATCH_RECOGNIZE (
        PARTITION BY sym ORDER BY ts
        MEASURES a.price AS pa, c.price AS pc, sum(MATCH_NUMBER() * 10 + b.price) AS s
        ONE ROW PER MATCH STRATEGY SKIP_TILL_ANY_MATCH
        PATTERN (SEQ(a, b, c)) WITHIN INTERVAL '2' SECOND
        DEFINE a AS a.price < 4, b AS b.price > a.price, c AS c.price < b.price)""",
    "pair": """SELECT * FROM {src} MATCH_RECOGNIZE (
        PARTITION BY sym ORDER BY ts
        MEASURES a.ts AS ta, b.ts AS tb, MATCH_NUMBER() AS mn
        ONE ROW PER MATCH STRATEGY SKIP_TILL_ANY_MATCH
        PATTERN (SEQ(a, b, NOT(n))) WITHIN INTERVAL '3' SECOND
        DEFINE a AS a.price < 4, b AS b.price > a.price, n AS n.price > 8)""",
    "dips": """SELECT * FROM {src} MATCH_RECOGNIZE (
        ORDER BY ts
        MEASURES a.sym AS s0, b.sym AS s1, b.ts AS tb
        ONE ROW PER MATCH STRATEGY SKIP_TILL_NEXT_MATCH
        PATTERN (SEQ(a, b)) WITHIN INTERVAL '2' SECOND
        DEFINE a AS a.price > 7, b AS b.price < 5)""",
}
MATCHES = ("SELECT view, to_json(partition) AS p, match_number, to_json(measures) AS m "
           "FROM cep_workload('{src}')")


def _define(spark, prefix: str, src: str) -> None:
    for name, sql in VIEWS.items():
        spark.cep.sql(f"CREATE OR REPLACE TEMPORARY VIEW {prefix}_{name} AS "
                      + sql.format(src=src))


def _drop(spark, prefix: str) -> None:
    for name in VIEWS:
        spark.cep.sql(f"DROP VIEW IF EXISTS {prefix}_{name}")


def _rows(rows, prefix: str) -> list[tuple]:
    return sorted((r.view[len(prefix) + 1:], r.p, r.match_number, r.m) for r in rows)


@pytest.fixture()
def one_shuffle_partition(spark):
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    yield
    spark.conf.set("spark.sql.shuffle.partitions", before)


def test_stream_workload_with_restart_equals_batch_workload(spark, tmp_path,
                                                           one_shuffle_partition):
    source = str(tmp_path / "in")
    os.makedirs(source)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "ck")
    spark.readStream.schema(SCHEMA).json(source).withWatermark("ts", DELAY) \
        .createOrReplaceTempView("wls_ticks")
    _define(spark, "wls", "wls_ticks")
    try:
        assert spark.cep.workload("wls_ticks").matches().isStreaming

        def run_once():
            df = spark.cep.sql(MATCHES.format(src="wls_ticks"))
            assert df.isStreaming
            query = (df.writeStream.format("parquet").option("path", out)
                     .option("checkpointLocation", checkpoint)
                     .trigger(availableNow=True).start())
            query.awaitTermination()
            return query

        before = sum(spark.cep.late_rows().values())
        _write(source, "part-0.json", FIRST)
        query = run_once()
        # one stateful operator per partitioning group (PARTITION BY sym; no PARTITION BY)
        assert len(query.lastProgress["stateOperators"]) == 2
        first = spark.read.parquet(out).count()
        _write(source, "part-1.json", SECOND)
        run_once()  # restart from the checkpoint
        got = _rows(spark.read.parquet(out).collect(), "wls")
        # a late row is counted once per partitioning group (two here), not once per view
        assert sum(spark.cep.late_rows().values()) - before == 2 * len(LATE)
    finally:
        _drop(spark, "wls")
    batch = spark.read.schema(SCHEMA).json(source)
    for sym, second, price in LATE:
        batch = batch.filter(~((batch.sym == sym) & (batch.price == float(price))
                               & (batch.ts == f"2024-01-01 00:00:{second:02d}")))
    batch.createOrReplaceTempView("wlb_ticks")
    _define(spark, "wlb", "wlb_ticks")
    try:
        want = _rows(spark.cep.sql(MATCHES.format(src="wlb_ticks")).collect(), "wlb")
    finally:
        _drop(spark, "wlb")
    assert {v for v, *_ in want} == set(VIEWS)   # every view has matches
    assert 0 < first < len(got)                  # matches on both sides of the restart
    assert got == want


# --- the per-key workload engine, no Spark ---------------------------------------------
def _engine_run(sqls: list[str], table, increments: int, delay_ms: int, seed: int,
                sharing: str = "NONE", members: int | None = None):
    """Every plan's rows from the workload engine (one state per key, stored and loaded
    after each step as Spark does) and from each plan's batch worker."""
    from collections import Counter

    import numpy as np
    import pyarrow as pa

    from cepsql.backends.streaming.engine import NO_TIMER
    from cepsql.backends.streaming.workload import (WorkloadEngine, fingerprint,
                                                    state_from_row, state_to_row)
    from cepsql.exprs.arrow_eval import evaluate_arrow
    from cepsql.runtime.ordering import sort_table
    from cepsql.compile.clause import plan_query
    from cepsql.runtime.one_pass import plan_pass
    try:
        from .test_property_sql import spec_of
    except ImportError:
        from test_property_sql import spec_of
    plans = [plan_query(spec_of(sql), table.schema, sql) for sql in sqls]
    shared = plan_pass(table.schema, plans, {"algorithm": sharing})
    assert len(shared.groups) == 1
    group = shared.groups[0]
    for name, expr in group.prepare:
        table = table.append_column(name, evaluate_arrow(expr, table))
    shared.bind([table.schema])
    keys = group.partition_columns
    engine = WorkloadEngine(group.patterns, "ts", group.sort_keys[len(keys):],
                            group.global_plan)
    if members is not None:   # the patterns the shared DAG evaluator runs
        assert len(engine.members) == members
    workload = fingerprint(group.patterns, engine.members)
    dag = engine.shared is not None
    rng = np.random.default_rng(seed)
    order = np.argsort(table.column("ts").to_numpy() + rng.uniform(0, delay_ms / 1000,
                                                                    table.num_rows))
    arrival = table.take(pa.array(order))
    states, timers, got = {}, {}, {p.index: [] for p in group.patterns}
    newest = 0.0
    bounds = np.linspace(0, table.num_rows, increments + 1).astype(int)
    steps = [(arrival.slice(lo, hi - lo)) for lo, hi in zip(bounds, bounds[1:])]
    for part in steps + [None]:
        if part is not None:
            newest = max(newest, float(np.max(part.column("ts").to_numpy())))
            watermark = int(newest * 1000) - delay_ms
        else:
            watermark = 1 << 50
        by_key = {}
        if part is not None:
            for i, key in enumerate(zip(*[part.column(k).to_pylist() for k in keys])):
                by_key.setdefault(key, []).append(i)
        due = {k for k, t in timers.items() if t != NO_TIMER and t <= watermark}
        if part is None:
            due = set(states)
        for key in sorted(set(by_key) | due, key=repr):
            state = states.get(key) or engine.new_state()
            rows = part.take(pa.array(by_key[key])) if key in by_key else None
            outputs, timers[key], late = engine.advance(state, rows, watermark)
            assert late == 0
            states[key] = state_from_row(state_to_row(state, workload),
                                         len(group.patterns), workload, dag)
            for index, batch in outputs:
                got[index].append(batch)
    ordered = sort_table(table, list(group.sort_keys)).combine_chunks()
    result = []
    for p in group.patterns:
        worker_in = [p.worker_batch(b) for b in ordered.to_batches()]
        want = pa.Table.from_batches(list(p.bound.worker(iter(worker_in))),
                                     schema=p.bound.worker_schema)
        streamed = pa.Table.from_batches(got[p.index], schema=p.bound.worker_schema)
        result.append((Counter(map(repr, streamed.to_pylist())),
                       Counter(map(repr, want.to_pylist()))))
    return result, states


ENGINE_VIEWS = [
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES count(*) AS n, "
    "MATCH_NUMBER() AS mn ONE ROW PER MATCH PATTERN (a b+) WITHIN INTERVAL '2' SECOND "
    "DEFINE b AS b.price > PREV(b.price) AND MATCH_NUMBER() % 3 <> 0)",
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES a.ts AS ta, "
    "b.ts AS tb ONE ROW PER MATCH STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, b)) "
    "WITHIN INTERVAL '2' SECOND DEFINE a AS a.price < 0, b AS b.price > a.price + 5)",
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES "
    "sum(MATCH_NUMBER() + c.price) AS s ONE ROW PER MATCH STRATEGY SKIP_TILL_ANY_MATCH "
    "PATTERN (SEQ(a, KL(b), c)) WITHIN INTERVAL '1500' MILLISECOND "
    "DEFINE a AS a.price < -5, b AS b.price > 0, c AS c.price < b.price)",
]


@pytest.mark.parametrize("increments,delay_ms,seed", [(40, 500, 1), (200, 1500, 2), (7, 0, 3)])
def test_workload_engine_equals_each_batch_worker(increments, delay_ms, seed):
    """The one operator's per-key engine (shared pending rows, one carry-over per
    pattern, stored after every step) emits each pattern's batch rows; keys pause longer
    than the windows so segments close from timers too."""
    import numpy as np
    import pyarrow as pa
    n = 600
    rng = np.random.default_rng(seed)
    gaps = np.where(rng.random(n) < 0.05, 4.0, 0.1)
    table = pa.table({"part": rng.choice(["x", "y", "z"], n).tolist(),
                      "ts": np.cumsum(gaps).round(3),
                      "price": (np.sin(np.arange(n) * 0.7) * 10).round(),
                      "vol": np.ones(n), "tag": ["t"] * n})
    result, states = _engine_run(ENGINE_VIEWS, table, increments, delay_ms, seed)
    for streamed, batch in result:
        assert sum(batch.values()) > 5
        assert streamed == batch
    assert all(s.shared.pending is None for s in states.values())


def test_workload_state_of_another_workload_is_refused():
    """A checkpoint's state written for other views (another count, or the same count
    with a replaced view: another fingerprint) is refused, not fed to the evaluators."""
    import pyarrow as pa

    from cepsql.backends.streaming.engine import KeyState
    from cepsql.backends.streaming.workload import (WorkloadKeyState, fingerprint,
                                                    state_from_row, state_to_row)
    from cepsql.errors import CepRuntimeError
    from cepsql.compile.clause import plan_query
    from cepsql.runtime.one_pass import plan_pass
    try:
        from .test_property_sql import spec_of
    except ImportError:
        from test_property_sql import spec_of
    schema = pa.schema([("part", pa.string()), ("ts", pa.float64()),
                        ("price", pa.float64()), ("vol", pa.float64()), ("tag", pa.string())])

    def group_of(sqls):
        plans = [plan_query(spec_of(q), schema, q) for q in sqls]
        return plan_pass(schema, plans, {"algorithm": "NONE"}).groups[0].patterns
    old = fingerprint(group_of(ENGINE_VIEWS[:2]))
    assert old == fingerprint(group_of(ENGINE_VIEWS[:2]))
    replaced = fingerprint(group_of([ENGINE_VIEWS[0], ENGINE_VIEWS[2]]))
    row = state_to_row(WorkloadKeyState(KeyState(), [KeyState(), KeyState()]), old)
    assert len(state_from_row(row, 2, old).patterns) == 2
    for n, workload in ((3, old), (2, replaced)):
        with pytest.raises(CepRuntimeError, match="new checkpoint"):
            state_from_row(row, n, workload)


def test_stream_workload_views_explain_and_dataframes(spark, tmp_path):
    """Over a stream every view of the workload is a streaming DataFrame with the view's
    own columns, and EXPLAIN WORKLOAD describes the one pass (nothing is started)."""
    source = str(tmp_path / "in")
    os.makedirs(source)
    spark.readStream.schema(SCHEMA).json(source).withWatermark("ts", DELAY) \
        .createOrReplaceTempView("wlx_ticks")
    _define(spark, "wlx", "wlx_ticks")
    try:
        wl = spark.cep.workload("wlx_ticks")
        frames = wl.dataframes()
        assert set(frames) == {f"wlx_{v}" for v in VIEWS}
        for name, df in frames.items():
            assert df.isStreaming
            assert df.columns == spark.table(name).columns
        text = wl.explain()
        assert "One pass over wlx_ticks: 2 partitioning group(s)" in text
        plan = spark.cep.sql("EXPLAIN WORKLOAD wlx_ticks").collect()[0][0]
        assert "wlx_gain" in plan and "wlx_dips" in plan
    finally:
        _drop(spark, "wlx")


SHARED_VIEWS = [   # SEQ(a, b) shared by three views (windows differ), a NOT, a trailing NOT
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES a.ts AS ta, "
    "c.ts AS tc, MATCH_NUMBER() AS mn ONE ROW PER MATCH STRATEGY SKIP_TILL_ANY_MATCH "
    "PATTERN (SEQ(a, b, c)) WITHIN INTERVAL '2' SECOND "
    "DEFINE a AS a.price < -3, b AS b.price > a.price + 4, c AS c.price < b.price)",
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES a.ts AS ta, "
    "d.ts AS td, sum(MATCH_NUMBER() + d.price) AS s ONE ROW PER MATCH "
    "AFTER MATCH SKIP PAST LAST ROW STRATEGY SKIP_TILL_ANY_MATCH "
    "PATTERN (SEQ(a, b, NOT(n), d)) WITHIN INTERVAL '1500' MILLISECOND "
    "DEFINE a AS a.price < -3, b AS b.price > a.price + 4, n AS n.price > 8, "
    "d AS d.price > 5 AND d.price > PREV(d.price))",
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES a.ts AS ta, "
    "b.ts AS tb ONE ROW PER MATCH STRATEGY SKIP_TILL_ANY_MATCH "
    "PATTERN (SEQ(a, b, NOT(n))) WITHIN INTERVAL '1' SECOND "
    "DEFINE a AS a.price < -3, b AS b.price > a.price + 4, n AS n.price < -8)",
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES count(*) AS n, "
    "MATCH_NUMBER() AS mn ONE ROW PER MATCH PATTERN (a b+) WITHIN INTERVAL '2' SECOND "
    "DEFINE b AS b.price > PREV(b.price))",
]


@pytest.mark.parametrize("increments,delay_ms,seed", [(30, 500, 4), (150, 1500, 5), (5, 0, 6)])
def test_shared_dag_workload_engine_equals_each_batch_worker(increments, delay_ms, seed):
    """Views sharing SEQ(a, b) run in ONE shared DAG per key (re-run over the kept rows
    each step, each matcher resuming from its stored carry-over) next to a SQL:2016 view:
    every view's streamed rows equal its own batch worker's, through out-of-order
    arrival, keys paused longer than the windows (segments closed by timers) and the
    state stored and loaded after every step."""
    import numpy as np
    import pyarrow as pa
    n = 500
    rng = np.random.default_rng(seed)
    gaps = np.where(rng.random(n) < 0.05, 3.0, rng.choice([0.1, 0.2], n))
    table = pa.table({"part": rng.choice(["x", "y"], n).tolist(),
                      "ts": np.cumsum(gaps).round(3),
                      "price": rng.integers(-10, 11, n).astype(float),
                      "vol": np.ones(n), "tag": ["t"] * n})
    result, states = _engine_run(SHARED_VIEWS, table, increments, delay_ms, seed,
                                 sharing="BEST", members=3)
    for streamed, batch in result:
        assert sum(batch.values()) > 5
        assert streamed == batch
    assert all(s.dag.held is None or s.dag.held.num_rows <= 2 for s in states.values())


def test_random_shared_workloads_stream_equals_each_batch_worker():
    """Random overlapping SKIP_TILL_ANY_MATCH workloads (test_shared_dag's generator:
    renamed and near-identical conditions, other windows, NOT, OR, Kleene, ALL ROWS,
    SKIP PAST LAST ROW) over the per-key shared DAG engine, rows arriving out of order in
    increments, keys pausing past the windows: every view equals its batch worker."""
    import numpy as np
    import pyarrow as pa
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    try:
        from .test_shared_dag import base_patterns, mutations
    except ImportError:
        from test_shared_dag import base_patterns, mutations

    @settings(max_examples=10, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data(), seed=st.integers(0, 1000), increments=st.sampled_from([3, 20]),
           delay_ms=st.sampled_from([0, 700]))
    def check(data, seed, increments, delay_ms):
        base = data.draw(base_patterns(True))
        base.update(window_kind="time", partition="PARTITION BY part")
        sqls = [data.draw(mutations(base, i)) for i in range(data.draw(st.integers(2, 5)))]
        n = 90
        rng = np.random.default_rng(seed)
        gaps = np.where(rng.random(n) < 0.08, 6.0, rng.choice([0.5, 1.0], n))
        table = pa.table({"part": rng.choice(["a", "b"], n).tolist(),
                          "ts": np.cumsum(gaps).round(3),
                          "price": rng.integers(0, 10, n).astype(float),
                          "vol": rng.choice([0.5, 1.0, 2.25], n),
                          "tag": rng.choice(["x", "y", "z"], n).tolist()})
        result, _ = _engine_run(sqls, table, increments, delay_ms, seed, sharing="BEST")
        for sql, (streamed, batch) in zip(sqls, result):
            assert streamed == batch, sql
    check()
