"""NEXT over a stream, both modes (no Spark: the per-key engine as the stateful operator
runs it). NEXT of a key's last row is the key's next row, which may come at any time, so
a row whose NEXT is needed stays undecided until that row arrives -- no timer closes the
key's segment -- and a quiet key's last match waits for it.

Checked against the batch worker: after the watermark passed every row, the stream holds
a part of the batch result over the same rows (what it emitted never depends on the rows
to come); once each key got rows far past its window (sentinels that match nothing), the
stream equals the batch result over all rows, sentinels included."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from cepsql.runtime.ordering import sort_table
from cepsql.backends.streaming.engine import NO_TIMER, KeyState, new_engine
from cepsql.backends.streaming.processor import state_from_row, state_to_row
from cepsql.exprs.arrow_eval import evaluate_arrow
from cepsql.compile.clause import plan_query
from cepsql.runtime.workers import bind_worker

try:
    from .test_property_sql import spec_of
except ImportError:
    from test_property_sql import spec_of

FLUSH_MS = 1 << 50
HEAD = "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts "
QUERIES = [
    HEAD + "MEASURES a.ts AS ta, b.ts AS tb, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
    "STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, b)) WITHIN INTERVAL '2' SECOND "
    "DEFINE a AS a.price < NEXT(a.price), b AS b.price > a.price + 2)",
    HEAD + "MEASURES a.ts AS ta, b.ts AS tb, NEXT(b.price) AS nb ONE ROW PER MATCH "
    "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) WITHIN INTERVAL '1500' MILLISECOND "
    "DEFINE a AS a.price < 0, b AS b.price > a.price + 3)",
    HEAD + "MEASURES count(*) AS n ONE ROW PER MATCH STRATEGY PARTITION_CONTIGUITY "
    "PATTERN (SEQ(a, KL(b))) WITHIN INTERVAL '2' SECOND "
    "DEFINE a AS a.price < 0, b AS b.price > PREV(b.price) AND b.price >= NEXT(b.price, 2))",
    HEAD + "MEASURES FIRST(a.ts) AS t0, count(b.*) AS n, MATCH_NUMBER() AS mn ONE ROW PER "
    "MATCH PATTERN (a b+) WITHIN INTERVAL '2' SECOND "
    "DEFINE a AS a.price < NEXT(a.price), b AS b.price > PREV(b.price))",
    HEAD + "MEASURES LAST(b.ts) AS tb, NEXT(b.price) AS nb ONE ROW PER MATCH "
    "AFTER MATCH SKIP TO NEXT ROW PATTERN (a b+) "
    "DEFINE a AS a.price < 0, b AS b.price > PREV(b.price))",
]


def _table(seed: int, n: int = 240) -> pa.Table:
    rng = np.random.default_rng(seed)
    gaps = np.where(rng.random(n) < 0.06, 5.0, 0.25)
    return pa.table({"part": rng.choice(["x", "y", "z"], n).tolist(),
                     "ts": np.cumsum(gaps).round(3),
                     "price": rng.integers(-6, 7, n).astype(float)})


def _sentinels(table: pa.Table, count: int) -> pa.Table:
    """count rows per key, 1000 s after the last row: NULL price, so no condition holds."""
    keys = sorted(set(table.column("part").to_pylist()))
    last = float(np.max(table.column("ts").to_numpy()))
    rows = [(k, last + 1000 + i) for k in keys for i in range(count)]
    return pa.table({"part": [k for k, _ in rows], "ts": [t for _, t in rows],
                     "price": pa.nulls(len(rows), pa.float64())})


class _Stream:
    """One query over the per-key engine; each key's state stored and loaded after every
    step, keys advanced only when they get rows or their timer is due."""

    def __init__(self, sql: str, schema: pa.Schema):
        self.plan = plan_query(spec_of(sql), schema, sql)
        self.bound = bind_worker(self.plan, self.prepared(schema.empty_table()).schema)
        self.engine = new_engine(self.bound.worker, "ts", self.plan.sort_keys[1:],
                                 self.plan.spec)
        self.states: dict[str, KeyState] = {}
        self.timers: dict[str, int] = {}
        self.out: list[pa.RecordBatch] = []

    def prepared(self, table: pa.Table) -> pa.Table:
        """table with the plan's prepared columns (the Spark path adds them first)."""
        for name, expr in self.plan.prepare_columns:
            table = table.append_column(name, evaluate_arrow(expr, table))
        return table

    def step(self, part: pa.Table | None, watermark: int) -> None:
        part = None if part is None else self.prepared(part)
        by_key: dict[str, list[int]] = {}
        for i, key in enumerate([] if part is None else part.column("part").to_pylist()):
            by_key.setdefault(key, []).append(i)
        due = {k for k, t in self.timers.items() if NO_TIMER != t <= watermark}
        if watermark == FLUSH_MS:
            due = set(self.states)
        for key in sorted(set(by_key) | due):
            state = self.states.get(key, KeyState())
            rows = part.take(pa.array(by_key[key])) if key in by_key else None
            step = self.engine.advance(state, rows, watermark)
            assert step.late == 0
            self.states[key] = state_from_row(state_to_row(state))
            self.timers[key] = step.timer_ms
            self.out += step.output

    def rows(self) -> Counter:
        return _rows(pa.Table.from_batches(self.out, schema=self.bound.worker_schema))

    def batch(self, table: pa.Table) -> Counter:
        ordered = sort_table(self.prepared(table), list(self.plan.sort_keys)).combine_chunks()
        return _rows(pa.Table.from_batches(list(self.bound.worker(iter(ordered.to_batches()))),
                                           schema=self.bound.worker_schema))


def _rows(table: pa.Table) -> Counter:
    return Counter(tuple(repr(v) for v in row.values()) for row in table.to_pylist())


def _arrival(table: pa.Table, seed: int, delay_ms: int, increments: int):
    """Increments of rows out of event order by less than the watermark delay, with the
    watermark (newest event time - delay) after each."""
    rng = np.random.default_rng(seed)
    ts = table.column("ts").to_numpy()
    order = np.argsort(ts + rng.uniform(0, delay_ms / 1000 * 0.9, len(ts)), kind="stable")
    arrived = table.take(pa.array(order))
    bounds = np.linspace(0, len(ts), increments + 1).astype(int)
    newest = 0.0
    for lo, hi in zip(bounds, bounds[1:]):
        part = arrived.slice(lo, hi - lo)
        newest = max(newest, float(np.max(part.column("ts").to_numpy())))
        yield part, max(int(newest * 1000) - delay_ms, 0)


@pytest.mark.parametrize("sql", QUERIES, ids=["cep-next", "cep-any-measure", "cep-kl-next2",
                                              "sql-define", "sql-measure"])
@pytest.mark.parametrize("increments,delay_ms,seed", [(12, 600, 1), (60, 0, 2)])
def test_stream_with_next_equals_batch_on_rows_seen(sql, increments, delay_ms, seed):
    table = _table(seed)
    stream = _Stream(sql, table.schema)
    for part, watermark in _arrival(table, seed, delay_ms, increments):
        stream.step(part, watermark)
    passed = int((float(np.max(table.column("ts").to_numpy())) + 500) * 1000)
    stream.step(None, passed)      # the watermark passes every row: no key is closed
    waiting, batch = stream.rows(), stream.batch(table)
    assert not waiting - batch     # emitted matches never depend on rows to come
    assert sum(waiting.values()) > 5
    assert all(not s.closed for s in stream.states.values())
    ahead = max(stream.engine.worker._new_matcher().lookahead
                if hasattr(stream.engine.worker, "streamable") else 0, 2)
    sentinels = _sentinels(table, ahead + 1)
    stream.step(sentinels, FLUSH_MS)   # each key's next rows arrive
    assert stream.rows() == stream.batch(pa.concat_tables([table, sentinels]))


def test_quiet_key_last_match_waits_for_its_next_row():
    """Key x goes quiet after a SEQ(a, b) whose a needs NEXT: no timer decides it (the
    batch over the same rows gives it, with NEXT of x's last row NULL); x's next row
    decides it, as the batch over all rows does."""
    sql = QUERIES[1]   # MEASURES NEXT(b.price)
    table = pa.table({"part": ["x", "x", "y"], "ts": [1.0, 1.5, 60.0],
                      "price": [-1.0, 5.0, 0.0]})
    stream = _Stream(sql, table.schema)
    stream.step(table, 59_000)
    stream.step(None, 65_000)
    assert stream.rows() == Counter() and stream.timers["x"] == NO_TIMER
    assert stream.batch(table) == Counter({("'x'", "1.0", "1.5", "None", "1"): 1})
    nxt = pa.table({"part": ["x"], "ts": [70.0], "price": [2.0]})
    stream.step(nxt, 69_000)   # still behind the watermark: waits
    assert stream.rows() == Counter()
    stream.step(None, 71_000)
    assert stream.rows() == stream.batch(pa.concat_tables([table, nxt])) \
        == Counter({("'x'", "1.0", "1.5", "2.0", "1"): 1})


def test_spark_stream_with_next_emits_only_batch_matches(spark, tmp_path):
    """Through Spark's stateful operator (the clause's NEXT reaches the engine): every
    streamed match is in the batch result over the same rows, and the quiet key b's
    matches still wait for its next row. (One file per micro-batch, both there before
    the start: the first micro-batch runs at watermark 0, so no row is late.)"""
    import os
    try:
        from .test_streaming_spark import DELAY, FIRST, SCHEMA, SECOND, _write
    except ImportError:
        from test_streaming_spark import DELAY, FIRST, SCHEMA, SECOND, _write
    sql = ("SELECT * FROM {src} MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
           "MEASURES a.ts AS ta, b.ts AS tb, NEXT(b.price) AS nb ONE ROW PER MATCH "
           "STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, b)) WITHIN INTERVAL '3' SECOND "
           "DEFINE a AS a.price < NEXT(a.price), b AS b.price > a.price + 1)")
    source, out = str(tmp_path / "in"), str(tmp_path / "out")
    os.makedirs(source)
    _write(source, "part-0.json", FIRST)
    _write(source, "part-1.json", SECOND)
    spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(source) \
        .withWatermark("ts", DELAY).createOrReplaceTempView("next_ticks")
    query = (spark.cep.sql(sql.format(src="next_ticks")).writeStream.format("parquet")
             .option("path", out).option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    got = Counter(map(tuple, spark.read.parquet(out).collect()))
    spark.read.schema(SCHEMA).json(source).createOrReplaceTempView("next_batch")
    want = Counter(map(tuple, spark.cep.sql(sql.format(src="next_batch")).collect()))
    assert sum(got.values()) > 3 and not got - want
    assert any(r[0] == "b" for r in want - got)   # b went quiet: its matches wait
