"""The streaming engine (per key, no Spark) against the batch worker: rows arrive out of
order in increments, the watermark trails the newest event time, keys are advanced only
when they get rows or their timer is due (as Spark does), late rows are dropped; once the
watermark passes everything, the emitted rows equal the batch worker's rows over the
rows that were not late -- same matches, same MATCH_NUMBERs."""
from __future__ import annotations

import re
from decimal import Decimal
from types import SimpleNamespace
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis.control import currently_in_test_context
from hypothesis import strategies as st
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_type

from cepsql.backends.streaming.engine import NO_TIMER, KeyState, new_engine
from cepsql.backends.streaming import engine as engine_module
from cepsql.backends.streaming.frames import (PACK_ROWS_CONF, STATE_PARTITIONS_CONF,
                                              check_streamable_spec, check_streamable_worker,
                                              int_conf, state_partitions)
from cepsql.backends.streaming.ipc import from_bytes
from cepsql.backends.streaming.packing import RowPacker, key_id
from cepsql.backends.streaming.processor import (late_rows_schema, output_as_rows,
                                                 state_from_row, state_to_row, stored_bytes)
from cepsql.errors import CepAnalysisError, CepError
from cepsql.exprs.arrow_eval import evaluate_arrow
from cepsql.runtime.ordering import sort_table
from cepsql.compile.clause import plan_query
from cepsql.runtime.workers import bind_worker

try:
    from .support.strategies import queries, streams
    from .support.strategies_cep import STRATEGIES, cep_queries, cep_streams
    from .test_property_sql import SETTINGS, spec_of
    from .test_property_within import with_window
except ImportError:
    from support.strategies import queries, streams
    from support.strategies_cep import STRATEGIES, cep_queries, cep_streams
    from test_property_sql import SETTINGS, spec_of
    from test_property_within import with_window

TIME_WINDOWS = ["WITHIN INTERVAL '2' SECOND", "WITHIN INTERVAL '4' SECONDS",
                "WITHIN INTERVAL '1500' MILLISECOND"]
FLUSH_MS = 1 << 50


def prepared(table: pa.Table, plan) -> pa.Table:
    """table with the plan's prepare_columns (as the Spark path adds them before packing)."""
    for name, expr in plan.prepare_columns:
        table = table.append_column(name, evaluate_arrow(expr, table))
    return table


def _qualifies(condition: bool) -> None:
    """hypothesis' assume inside a property test; a fixed example must qualify."""
    if currently_in_test_context():
        assume(condition)
    else:
        assert condition, "this fixed example cannot be compared as a stream"


def simulate(sql: str, table: pa.Table, arrival: list[int], cuts: list[int], delay_ms: int,
             complete: bool = True):
    """(streamed raw rows, batch raw rows over the non-late rows, late count, rows the
    test expects to be late)."""
    spec = spec_of(sql)
    try:
        plan = plan_query(spec, table.schema, sql)
        check_streamable_spec(plan)
        table = prepared(table, plan)
        bound = bind_worker(plan, table.schema)
        check_streamable_worker(bound.worker)
    except CepError:
        _qualifies(False)
    # NEXT: a quiet key's last match waits for its next row (tests/test_stream_next.py)
    _qualifies(not new_engine(bound.worker, "ts", [], plan.spec).reads_next)
    streamed, batch, late, dropped = compare(plan, bound, table, arrival, cuts, delay_ms)
    if isinstance(streamed, CepError) or isinstance(batch, CepError):
        if not complete and isinstance(batch, CepError):
            return Counter(), Counter(), 0, 0  # the failing match may still be open
        assert type(streamed) is type(batch), (streamed, batch)
        return Counter(), Counter(), 0, 0
    return streamed, batch, late, dropped


def compare(plan, bound, table: pa.Table, arrival: list[int], cuts: list[int], delay_ms: int):
    """(streamed raw rows or the stream's error, batch raw rows over the rows the stream
    did not drop as late or the batch path's error, late count, rows expected late)."""
    kept: list[int] = []  # rows not dropped as late (so far, if the stream raised)
    try:
        streamed, late = _stream(plan, bound, table, arrival, cuts, delay_ms, kept)
    except CepError as err:
        # the batch path over the rows the stream had admitted (late ones excluded) must
        # raise it too: the failing match was decided by rows behind the watermark, which
        # rows arriving later cannot change. (Adding every row not yet seen, late ones
        # included, made a late row the partition's first: `^ A` then matched nowhere.)
        streamed, late = err, 0
    ordered = sort_table(table.take(pa.array(sorted(kept), pa.int64())),
                         list(plan.sort_keys)).combine_chunks()
    try:
        batch = _rows(pa.Table.from_batches(list(bound.worker(iter(ordered.to_batches()))),
                                            schema=bound.worker_schema))
    except CepError as err:
        batch = err
    return streamed, batch, late, len(arrival) - len(kept)


def _stream(plan, bound, table, arrival, cuts, delay_ms, kept):
    keys = list(plan.partition_columns)
    engine = new_engine(bound.worker, "ts", plan.sort_keys[len(keys):])
    states: dict[tuple, KeyState] = {}
    timers: dict[tuple, int] = {}
    out: list[pa.RecordBatch] = []
    late = 0
    newest = None
    bounds = [0] + sorted(set(cuts)) + [len(arrival)]
    for lo, hi in zip(bounds, bounds[1:]):
        rows = arrival[lo:hi]
        if not rows:
            continue
        part = table.take(pa.array(rows, pa.int64()))
        ts = part.column("ts").to_numpy(zero_copy_only=False).astype(float)
        newest = ts.max() if newest is None else max(newest, ts.max())
        watermark = max(int(newest * 1000) - delay_ms, 0)
        by_key: dict[tuple, list[int]] = {}
        for i, key in enumerate(_keys(part, keys)):
            by_key.setdefault(key, []).append(i)
        due = {k for k, t in timers.items() if t != NO_TIMER and t <= watermark}
        for key, idx in by_key.items():  # the whole increment arrived: late is decided now
            released = states.setdefault(key, KeyState()).released_us
            kept += [rows[i] for i in idx if ts[i] * 1e6 >= released]
        for key in sorted(set(by_key) | due, key=repr):
            state = states[key]
            rows_in = None
            if key in by_key:
                rows_in = part.take(pa.array(by_key[key], pa.int64()))
            step = engine.advance(state, rows_in, watermark)
            states[key] = state_from_row(state_to_row(state))  # as Spark stores it
            late += step.late
            timers[key] = step.timer_ms
            out += step.output
    for key, state in states.items():  # the watermark passes everything
        out += engine.advance(state, None, FLUSH_MS).output
    streamed = pa.Table.from_batches(out, schema=bound.worker_schema) if out else None
    return _rows(streamed), late


def _keys(table: pa.Table, keys: list[str]) -> list[tuple]:
    columns = [table.column(k).to_pylist() for k in keys]
    return [tuple(c[i] for c in columns) for i in range(table.num_rows)]


def _rows(table: pa.Table | None) -> Counter:
    if table is None:
        return Counter()
    return Counter(tuple(repr(v) for v in row.values()) for row in table.to_pylist())


@st.composite
def arrivals(draw, n: int):
    """An arrival order that is mostly in event order (rows swapped locally), increments,
    and a watermark delay in ms (ts counts seconds)."""
    order = list(range(n))
    for _ in range(draw(st.integers(0, n))):
        i = draw(st.integers(0, max(n - 2, 0)))
        j = min(n - 1, i + draw(st.integers(1, 4)))
        order[i], order[j] = order[j], order[i]
    cuts = draw(st.lists(st.integers(1, max(n - 1, 1)), max_size=6))
    delay = draw(st.sampled_from([0, 500, 1000, 3000]))
    return order, cuts, delay


def _by_ts(table: pa.Table) -> pa.Table:
    return table.take(pa.array(np.argsort(table.column("ts").to_numpy(), kind="stable")))


@settings(max_examples=200, **SETTINGS)
@given(data=st.data(), sql=queries(), table=streams(), window=st.sampled_from(TIME_WINDOWS))
def test_sql_mode_stream_equals_batch(data, sql, table, window):
    table = _by_ts(table)
    order, cuts, delay = data.draw(arrivals(table.num_rows))
    got, want, late, dropped = simulate(with_window(sql, window), table, order, cuts, delay)
    assert late == dropped
    assert got == want, (sql, window, order, cuts, delay)


@settings(max_examples=30, **SETTINGS)
@given(data=st.data(), sql=queries(), table=streams())
def test_sql_mode_without_window_emits_only_batch_matches(data, sql, table):
    """Without WITHIN the last attempt of a key may stay open for ever (the stream has no
    end), so the stream's rows are a sub-multiset of the batch rows -- never another."""
    table = _by_ts(table)
    order, cuts, delay = data.draw(arrivals(table.num_rows))
    got, want, late, dropped = simulate(sql, table, order, cuts, delay, complete=False)
    assert late == dropped
    assert not got - want, (sql, order, cuts, delay)


def _check_cep_stream(strategy: str, examples: int, one_row_increments: bool = False):
    @settings(max_examples=examples, **{**SETTINGS, "suppress_health_check": [
        *SETTINGS["suppress_health_check"], HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture]})
    @given(data=st.data(), sql=cep_queries(strategy), table=cep_streams(),
           window=st.sampled_from(TIME_WINDOWS), unmatched=st.booleans())
    def check(data, sql, table, window, unmatched):
        sql = re.sub(r"WITHIN \d+ ROWS|WITHIN INTERVAL \S+ SECONDS?", "", sql)
        sql = sql.replace(" DEFINE ", f" {window} DEFINE ") if " DEFINE " in sql else \
            sql[:-1] + f" {window})"
        if unmatched:
            sql = sql.replace("ALL ROWS PER MATCH", "ALL ROWS PER MATCH WITH UNMATCHED ROWS")
        if strategy == "STRICT_CONTIGUITY":  # across keys it needs the global order
            sql = sql.replace("PARTITION BY part", "")
        table = _by_ts(table)
        order, cuts, delay = data.draw(arrivals(table.num_rows))
        if one_row_increments:
            cuts = list(range(1, table.num_rows))
        got, want, late, dropped = simulate(sql, table, order, cuts, delay)
        assert late == dropped
        assert got == want, (sql, order, cuts, delay)
    check()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_cep_mode_stream_equals_batch(strategy):
    _check_cep_stream(strategy, 80)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_cep_mode_carry_over_in_tiny_chunks(monkeypatch, strategy):
    """The evaluator's carry-over is exported and restored between chunks of 2 rows
    inside a step and between one-row increments: still the batch result."""
    monkeypatch.setattr(engine_module, "CHUNK_ROWS", 2)
    _check_cep_stream(strategy, 40, one_row_increments=True)


def test_cep_segment_closed_by_timer_is_not_reopened_by_an_older_row():
    """Shrunk from test_cep_mode_carry_over_in_tiny_chunks: key b's timer alone (watermark
    4 s, rows of key a only) closes b's segment after its row at 1 s (window 2 s); b's row
    at 3 s arrives afterwards. It is late (below the watermark b was advanced to), so the
    stream and the batch both see b's row at 1 s only -- before the fix b's late boundary
    stayed at 2 s, the row at 3 s was taken and started a second segment, whereas the
    batch put both rows in one window (matches {1}, {1, 3}, {3})."""
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES "
           "count(*) AS n ONE ROW PER MATCH STRATEGY PARTITION_CONTIGUITY "
           "PATTERN (KL(A, 0)) WITHIN INTERVAL '2' SECOND)")
    table = pa.table({"part": ["b", "a", "b", "a"], "ts": [1, 2, 3, 4], "price": [0] * 4,
                      "vol": [0.5] * 4, "tag": ["x"] * 4})
    for chunk_rows in (2, 1000):
        engine_module.CHUNK_ROWS, saved = chunk_rows, engine_module.CHUNK_ROWS
        try:
            got, want, late, dropped = simulate(sql, table, [0, 1, 3, 2], [1, 2, 3], 0)
        finally:
            engine_module.CHUNK_ROWS = saved
        assert late == dropped == 1
        assert got == want
        assert want == Counter({("'a'", "1", "1"): 1, ("'a'", "2", "2"): 1,
                                ("'a'", "1", "3"): 1, ("'b'", "1", "1"): 1})


def test_timer_alone_raises_the_late_boundary():
    """A key advanced with no rows (its timer) still moves its late boundary to the
    watermark, so what was decided at that watermark stays decided."""
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES "
           "count(*) AS n ONE ROW PER MATCH STRATEGY PARTITION_CONTIGUITY "
           "PATTERN (KL(A, 0)) WITHIN INTERVAL '2' SECOND)")
    table = pa.table({"part": ["b", "b"], "ts": [1, 3], "price": [0, 0],
                      "vol": [0.5, 0.5], "tag": ["x", "x"]})
    plan = plan_query(spec_of(sql), table.schema, sql)
    table = prepared(table, plan)
    engine = new_engine(bind_worker(plan, table.schema).worker, "ts", plan.sort_keys[1:])
    state = KeyState()
    first = engine.advance(state, table.slice(0, 1), 2000)
    assert first.timer_ms == 3001 and not state.closed   # {1} may still grow to {1, 3}
    closing = engine.advance(state, None, 4000)       # the timer: the segment closes
    assert closing.timer_ms == NO_TIMER and state.closed
    assert sum(b.num_rows for b in first.output + closing.output) == 1
    assert state.released_us == 4_000_000
    step = engine.advance(state, table.slice(1, 1), 4000)
    assert step.late == 1 and step.output == [] and state.pending is None


@pytest.mark.parametrize("pattern,skip,error", [
    ("^ A", "SKIP TO LAST A", "cannot skip to the first row"),
    ("^ B* A", "SKIP TO LAST B", "does not appear in the match")])
def test_late_row_is_not_the_partition_start(pattern, skip, error):
    """Found by hypothesis: ts 3 arrives, then ts 2 behind the watermark. ts 2 is dropped
    as late, so ts 3 is the key's first row: `^` matches there and the SKIP raises, as
    the batch path does over the rows that were not late. (The check used to add the
    rows not yet seen when the stream raised -- the late one too -- to the batch side,
    where `^` then failed at ts 2 and nothing raised.)"""
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES "
           f"count(*) AS n ONE ROW PER MATCH AFTER MATCH {skip} PATTERN ({pattern}) "
           "DEFINE A AS A.price BETWEEN 3 AND 7"
           + (", B AS B.price > PREV(B.price))" if "B" in pattern else ")"))
    table = pa.table({"part": ["b", "b"], "ts": [2, 3], "price": [0, 3],
                      "vol": [0.5, 0.5], "tag": ["x", "x"]})
    plan = plan_query(spec_of(sql), table.schema, sql)
    table = prepared(table, plan)
    bound = bind_worker(plan, table.schema)
    streamed, batch, _, dropped = compare(plan, bound, table, [1, 0], [1], 0)
    assert dropped == 1   # ts 2 was late
    assert isinstance(streamed, CepError) and error in str(streamed)
    assert isinstance(batch, CepError) and error in str(batch)
    assert list(bound.worker(iter(table.to_batches()))) == []  # with ts 2: no match


def test_quiet_key_closes_from_timer_alone():
    """A SQL:2016 match that only a later row or the window's end can decide is emitted
    when the watermark passes the window, without another row for the key."""
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts "
           "MEASURES count(*) AS n ONE ROW PER MATCH PATTERN (a b+) "
           "WITHIN INTERVAL '5' SECOND DEFINE b AS b.price > PREV(b.price))")
    table = pa.table({"part": [1, 1, 1], "ts": [1, 2, 3], "price": [1.0, 2.0, 3.0],
                      "vol": [1, 1, 1], "tag": ["x", "x", "x"]})
    plan = plan_query(spec_of(sql), table.schema, sql)
    bound = bind_worker(plan, table.schema)
    engine = new_engine(bound.worker, "ts", plan.sort_keys[1:])
    state = KeyState()
    step = engine.advance(state, table, 4000)   # all rows released; b+ may go on
    assert step.output == [] and step.timer_ms == 8001
    step = engine.advance(state, None, 8001)    # the timer: the window has passed
    assert sum(b.num_rows for b in step.output) == 1
    assert step.timer_ms == NO_TIMER


def test_packer_groups_rows_by_key_and_round_trips():
    from cepsql.backends.streaming.frames import RowPacker, RowUnpacker
    from cepsql.backends.streaming.ipc import from_bytes, to_bytes
    from cepsql.backends.streaming.packing import bucket_of, key_id
    batch = pa.record_batch({"k": ["b", None, "a", "b", None], "v": [1, 2, 3, 4, 5]})
    packed = list(RowPacker(["k"], 4)(iter([batch])))
    rows = packed[0].to_pylist()
    groups = {row["__cep_kid"]: from_bytes(row["__cep_rows"]).column("v").to_pylist()
              for row in rows}
    assert groups == {key_id(("a",)): [3], key_id(("b",)): [1, 4], key_id((None,)): [2, 5]}
    assert all(row["__cep_bucket"] == bucket_of(row["__cep_kid"], 4) < 4 for row in rows)
    single = list(RowPacker([])(iter([batch])))[0].to_pylist()
    assert single[0]["__cep_kid"] == key_id(())
    assert from_bytes(single[0]["__cep_rows"]).num_rows == 5
    blob = pa.record_batch({"__cep_out": pa.array([to_bytes(pa.Table.from_batches([batch])),
                                                   b""], pa.binary())})
    back = pa.Table.from_batches(list(RowUnpacker()(iter([blob]))))
    assert back.column("v").to_pylist() == [1, 2, 3, 4, 5]


def test_packer_gathers_a_tasks_batches_into_one_blob_per_key():
    """Spark hands mapInArrow ~10k-row batches: the packer packs the task's batches
    together (one blob per key, not one per key and batch) up to pack_rows rows."""
    batches = [pa.record_batch({"k": ["a", "b"], "v": [2 * i, 2 * i + 1]}) for i in range(3)]

    def packed(packer):
        out = [b.to_pylist() for b in packer(iter(batches))]
        return [{r["__cep_kid"]: from_bytes(r["__cep_rows"]).column("v").to_pylist()
                 for r in rows} for rows in out]

    assert packed(RowPacker(["k"], 4)) == [{"('a',)": [0, 2, 4], "('b',)": [1, 3, 5]}]
    # capped: a blob per key once 4 rows are gathered, then the rest
    assert packed(RowPacker(["k"], 4, pack_rows=4)) == [
        {"('a',)": [0, 2], "('b',)": [1, 3]}, {"('a',)": [4], "('b',)": [5]}]


def test_key_identity_follows_spark_grouping():
    """NaN = NaN, -0.0 = 0.0, NULL = NULL; timestamps by their value, not a time zone;
    the same bucket in every process (no salted hash)."""
    import datetime

    from cepsql.backends.streaming.packing import RowPacker, bucket_of, key_id
    assert key_id((float("nan"),)) == key_id((float("-nan"),))
    assert key_id((-0.0,)) == key_id((0.0,)) != key_id((None,))
    assert bucket_of(key_id(("IBM",)), 8) == bucket_of(key_id(("IBM",)), 8)
    moments = [datetime.datetime(2024, 1, 1, 9, 30)] * 2
    kids = set()
    for zone in ("UTC", "America/New_York"):
        column = pa.array(moments, pa.timestamp("us", "UTC")).cast(pa.timestamp("us", zone))
        batch = pa.record_batch({"t": column, "v": [1, 2]})
        kids |= {row["__cep_kid"] for row in list(RowPacker(["t"])(iter([batch])))[0].to_pylist()}
    assert len(kids) == 1


def test_bucket_state_round_trips():
    from cepsql.backends.streaming.processor import decode_keys, encode_keys
    keys = {"('a',)": ((b"rows", b"", -1, 3, 5, 1, 1 << 40, 0, 2, b"\x00carry"), 1234),
            "('é',)": ((b"", b"p", 0, 0, 0, 0, -(1 << 62), 1, 0, b""), NO_TIMER)}
    assert decode_keys(encode_keys(keys)) == keys
    assert decode_keys(encode_keys({})) == {}



def test_phase_timer_writes_one_line_per_call(tmp_path):
    """The processor's profiling switch (CEPSQL_STREAM_PROFILE) records each phase's
    seconds and the counters of one call as a JSON line of the worker's file."""
    import json
    from cepsql.backends.streaming.processor import PhaseTimer
    timer = PhaseTimer(str(tmp_path))
    for keys in (3, 5):
        timer.start()
        timer.lap("state_get")
        timer.lap("evaluate")
        timer.lap("evaluate")
        timer.count("state_bytes", 1234)
        timer.done(watermark=42, keys=keys, out_rows=7)
    [path] = list(tmp_path.iterdir())
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["keys"] for r in records] == [3, 5]
    for r in records:
        assert set(r) == {"state_get", "evaluate", "state_bytes", "watermark", "keys",
                          "out_rows", "wall"}
        assert r["state_get"] >= 0 and r["evaluate"] >= 0
        assert (r["state_bytes"], r["watermark"], r["out_rows"]) == (1234, 42, 7)

def _long_run(sql: str, bursts: bool) -> list[int]:
    """Rows held in state after each of 150 increments of a single key's stream (10 rows
    per second; with bursts, a 4-second pause after every 3 seconds of rows)."""
    n = 1500
    seconds = np.arange(n) / 10.0
    if bursts:
        seconds = seconds + 4.0 * (seconds // 3.0)
    prices = (np.sin(np.arange(n) * 0.7) * 10).round()
    table = pa.table({"part": ["a"] * n, "ts": seconds, "price": prices,
                      "vol": np.ones(n), "tag": ["x"] * n})
    plan = plan_query(spec_of(sql), table.schema, sql)
    table = prepared(table, plan)
    bound = bind_worker(plan, table.schema)
    engine = new_engine(bound.worker, "ts", plan.sort_keys[1:])
    state, sizes = KeyState(), []
    for lo in range(0, n, 10):
        part = table.slice(lo, 10)
        watermark = int(part.column("ts").to_numpy()[-1] * 1000) - 500
        engine.advance(state, part, watermark)
        sizes.append(sum(t.num_rows for t in (state.held, state.pending) if t is not None))
    return sizes


def test_long_run_state_stays_flat():
    """State follows the window, not the stream, in both modes, whether the key pauses
    longer than the window (CEP segments close) or never does (CEP carry-over)."""
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts "
           "MEASURES count(*) AS n ONE ROW PER MATCH PATTERN (a b+ c) "
           "WITHIN INTERVAL '2' SECOND DEFINE b AS b.price > PREV(b.price), "
           "c AS c.price < PREV(c.price))")
    sizes = _long_run(sql, bursts=False)
    assert max(sizes) <= 40 and max(sizes[-50:]) <= max(sizes[:50]) + 10
    cep = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts "
           "MEASURES count(*) AS n ONE ROW PER MATCH STRATEGY SKIP_TILL_NEXT_MATCH "
           "PATTERN (SEQ(a, b)) WITHIN INTERVAL '2' SECOND "
           "DEFINE a AS a.price < 0, b AS b.price > a.price + 5)")
    for bursts in (True, False):
        sizes = _long_run(cep, bursts=bursts)
        assert max(sizes) <= 50 and max(sizes[-50:]) <= max(sizes[:50]) + 10


LONG_CEP = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts "
            "MEASURES FIRST(a.ts) AS t0, LAST(ts) AS t1, count(*) AS n, "
            "MATCH_NUMBER() AS mn {rows} {skip} STRATEGY {s} PATTERN ({p}) "
            "WITHIN INTERVAL '2' SECOND DEFINE a AS a.price < 0, b AS b.price > a.price{c})")


@pytest.mark.parametrize("strategy,pattern,rows,skip", [
    ("SKIP_TILL_NEXT_MATCH", "SEQ(a, b)", "ONE ROW PER MATCH", ""),
    ("SKIP_TILL_NEXT_MATCH", "SEQ(a, KL(b), c)", "ALL ROWS PER MATCH WITH UNMATCHED ROWS", ""),
    ("SKIP_TILL_ANY_MATCH", "SEQ(a, b, c)", "ONE ROW PER MATCH",
     "AFTER MATCH SKIP PAST LAST ROW"),
    ("SKIP_TILL_ANY_MATCH", "SEQ(a, b)", "ONE ROW PER MATCH", ""),
    ("PARTITION_CONTIGUITY", "SEQ(a, KL(b))", "ONE ROW PER MATCH", ""),
])
def test_cep_state_bytes_stay_bounded(strategy, pattern, rows, skip):
    """One key that never pauses, 10 rows per second in 300 increments: the bytes stored
    for it (rows as Arrow IPC + the evaluator's carry-over) follow the 2-second window,
    not the stream, and the emitted rows equal the batch worker's."""
    sql = LONG_CEP.format(s=strategy, p=pattern, rows=rows, skip=skip,
                          c=", c AS c.price > 5" if " c)" in pattern else "")
    n = 3000
    prices = (np.sin(np.arange(n) * 0.7) * 10).round()
    table = pa.table({"part": ["a"] * n, "ts": np.arange(n) / 10.0, "price": prices,
                      "vol": np.ones(n), "tag": ["x"] * n})
    plan = plan_query(spec_of(sql), table.schema, sql)
    table = prepared(table, plan)
    bound = bind_worker(plan, table.schema)
    engine = new_engine(bound.worker, "ts", plan.sort_keys[1:])
    state, sizes, out = KeyState(), [], []
    for lo in range(0, n, 10):
        part = table.slice(lo, 10)
        watermark = int(part.column("ts").to_numpy()[-1] * 1000) - 500
        out += engine.advance(state, part, watermark).output
        row = state_to_row(state)
        sizes.append(stored_bytes(row))
        state = state_from_row(row)
        assert state.evaluator, "the key's segment stays open"
    out += engine.advance(state, None, FLUSH_MS).output
    first, last = max(sizes[:100]), max(sizes[-100:])
    assert last <= first * 1.25 + 256, (first, last)
    assert max(sizes) < 64 * 1024
    batch = pa.Table.from_batches(list(bound.worker(iter(table.to_batches()))),
                                  schema=bound.worker_schema)
    streamed = pa.Table.from_batches(out, schema=bound.worker_schema)
    assert streamed.num_rows > 50
    assert _rows(streamed) == _rows(batch)


def test_cep_trailing_not_decided_by_timer_alone():
    """A CEP match waiting for a trailing NOT is held in the evaluator's carry-over
    (state: evaluator bytes + kept rows) and emitted when the watermark passes its
    window, without another row for the key; a NOT row inside the window kills it."""
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts "
           "MEASURES a.ts AS ta, b.ts AS tb, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
           "STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, b, NOT(n))) "
           "WITHIN INTERVAL '5' SECOND DEFINE a AS a.tag = 'a', b AS b.tag = 'b', "
           "n AS n.tag = 'n')")
    table = pa.table({"part": [1] * 5, "ts": [1.0, 2.0, 10.0, 11.0, 12.0],
                      "price": [1.0] * 5, "vol": [1] * 5,
                      "tag": ["a", "b", "a", "b", "n"]})
    plan = plan_query(spec_of(sql), table.schema, sql)
    table = prepared(table, plan)
    bound = bind_worker(plan, table.schema)
    engine = new_engine(bound.worker, "ts", plan.sort_keys[1:])
    state = KeyState()
    step = engine.advance(state, table.slice(0, 2), 3000)  # a, b released; NOT(n) open
    assert step.output == [] and state.evaluator and not state.closed
    assert step.timer_ms == 2000 + 5000 + 1
    state = state_from_row(state_to_row(state))
    step = engine.advance(state, None, step.timer_ms)       # the timer alone decides it
    got = pa.Table.from_batches(step.output)
    assert got.num_rows == 1 and got.column("__cep_mn").to_pylist() == [1]
    assert state.closed and not state.evaluator and step.timer_ms == NO_TIMER
    step = engine.advance(state, table.slice(2), 13000)     # n at 12 s negates (10, 11)
    assert step.output == []
    assert engine.advance(state, None, 20000).output == []
    batch = pa.Table.from_batches(list(bound.worker(iter(table.to_batches()))))
    assert _rows(batch) == _rows(got)


GAPPED_TS = [0.0, 0.5, 1.0, 5.0, 5.5, 6.0, 10.0, 10.5, 11.0, 20.0, 20.5, 21.0]


def _gapped(prices: list[float]) -> pa.Table:
    """One key whose rows come in bursts separated by gaps longer than a 2 s window (so
    the stream closes the key's open partition between them)."""
    n = len(GAPPED_TS)
    return pa.table({"part": ["a"] * n, "ts": GAPPED_TS, "price": prices[:n],
                     "vol": [1.0] * n, "tag": ["x"] * n})


@pytest.mark.parametrize("cuts", [[3, 6, 9], list(range(1, 12)), []])
@pytest.mark.parametrize("define", ["b AS MATCH_NUMBER() <= 2",
                                    "a AS a.price > 0 AND MATCH_NUMBER() % 2 = 1"])
def test_sql_mode_match_number_in_define_over_gaps(cuts, define):
    """SQL:2016 mode: MATCH_NUMBER() in DEFINE continues across a key's gaps (the chunk
    carry-over holds the key's match number), so a condition on it equals batch."""
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts "
           "MEASURES count(*) AS n, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
           f"PATTERN (a b*) WITHIN INTERVAL '2' SECOND DEFINE {define})")
    table = _gapped([1.0, 2.0, 0.0, 3.0, 1.0, 2.0, 0.0, 4.0, 5.0, 1.0, 1.0, 2.0])
    got, want, late, _ = simulate(sql, table, list(range(12)), cuts, 100)
    assert late == 0 and got == want and sum(want.values()) >= 1


@pytest.mark.parametrize("cuts", [[3, 6, 9], list(range(1, 12)), []])
def test_cep_match_number_continues_across_segments(cuts):
    """CEP mode: a new segment's evaluator numbers after the key's earlier matches, so
    MATCH_NUMBER() inside a MEASURES aggregate equals batch too (it restarted at 1 in
    each segment when only the output column was renumbered)."""
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts "
           "MEASURES sum(MATCH_NUMBER() * 100 + b.price) AS s, MATCH_NUMBER() AS mn "
           "ONE ROW PER MATCH STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, b)) "
           "WITHIN INTERVAL '2' SECOND DEFINE a AS a.price > 0, b AS b.price > 0)")
    table = _gapped([1.0] * 12)
    got, want, late, _ = simulate(sql, table, list(range(12)), cuts, 100)
    assert late == 0 and got == want
    assert sorted(float(row[1]) for row in want.elements()) == \
        [101.0, 201.0, 301.0, 401.0, 501.0, 601.0, 701.0, 801.0]


@settings(max_examples=40, **SETTINGS)
@given(data=st.data(), table=streams(), window=st.sampled_from(TIME_WINDOWS),
       pattern=st.sampled_from(["A* B*", "A B*", "(A | B)+", "A B* C?"]),
       skip=st.sampled_from(["SKIP PAST LAST ROW", "SKIP TO NEXT ROW", "SKIP TO FIRST B"]),
       define=st.sampled_from(["B AS MATCH_NUMBER() <= 2",
                               "A AS A.price < 5 AND MATCH_NUMBER() % 2 = 1",
                               "B AS MATCH_NUMBER() % 3 <> 0 AND B.price > PREV(B.price)"]),
       spread=st.sampled_from([1, 2, 3]))
def test_sql_mode_match_number_in_define_equals_batch(data, table, window, pattern, skip,
                                                      define, spread):
    """MATCH_NUMBER() in DEFINE over a stream with gaps (ts stretched every `spread`
    rows) equals the batch worker on the same rows."""
    import pyarrow.compute as pc
    ts = table.column("ts")
    table = table.set_column(1, "ts", pc.add(ts, pc.multiply(pc.divide(ts, spread), 3)))
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts "
           "MEASURES count(*) AS n, MATCH_NUMBER() AS mn, CLASSIFIER() AS c "
           f"ALL ROWS PER MATCH AFTER MATCH {skip} PATTERN ({pattern}) {window} "
           f"DEFINE {define})")
    table = _by_ts(table)
    order, cuts, delay = data.draw(arrivals(table.num_rows))
    got, want, late, dropped = simulate(sql, table, order, cuts, delay)
    assert late == dropped
    assert got == want, (sql, order, cuts, delay)


@pytest.mark.parametrize("cuts", [[3, 6, 9], list(range(1, 12)), []])
@pytest.mark.parametrize("rows", ["ONE ROW PER MATCH", "ALL ROWS PER MATCH WITH UNMATCHED ROWS"])
@pytest.mark.parametrize("strategy", ["SKIP_TILL_NEXT_MATCH", "SKIP_TILL_ANY_MATCH",
                                      "PARTITION_CONTIGUITY"])
def test_cep_prev_reads_across_a_closed_segment(cuts, rows, strategy):
    """CEP mode PREV over a stream: a key's segment closed at a gap longer than the
    window keeps its last rows, so PREV on the next segment's first row reads the row
    before the gap, as batch does; those context rows start no match and are never
    output again (not even as unmatched rows)."""
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts "
           "MEASURES count(*) AS n, MATCH_NUMBER() AS mn, PREV(ts, 2) AS pv, "
           f"PREV(FIRST(a.price), 1) AS q {rows} STRATEGY {strategy} "
           "PATTERN (SEQ(a, b)) WITHIN INTERVAL '2' SECOND "
           "DEFINE a AS a.price > PREV(a.price, 2), b AS b.price < PREV(b.price))")
    table = _gapped([1.0, 2.0, 3.0, 5.0, 4.0, 6.0, 9.0, 1.0, 2.0, 3.0, 2.0, 5.0])
    got, want, late, _ = simulate(sql, table, list(range(12)), cuts, 100)
    assert late == 0 and got == want
    assert sum(want.values()) >= 2


def test_streaming_integer_settings_are_checked():
    """cepsql.streaming.* integers: the default when unset, a CepAnalysisError naming
    the key for text or a value below the least allowed (was a bare ValueError)."""
    def session(value):
        return SimpleNamespace(conf=SimpleNamespace(get=lambda key, default=None: value))

    assert int_conf(session(None), PACK_ROWS_CONF, 7, 0) == 7
    assert int_conf(session("0"), PACK_ROWS_CONF, 7, 0) == 0
    for bad in ("lots", "-1"):
        with pytest.raises(CepAnalysisError, match="cepsql.streaming.packRows must be an "
                                                   "integer >= 0"):
            int_conf(session(bad), PACK_ROWS_CONF, 7, 0)


def test_state_partitions_of_a_new_query():
    """Spark 4.1+ gives a new streaming query's state STATE_PARTITIONS_CONF partitions
    when set (batch shuffles keep spark.sql.shuffle.partitions): the warning counts those."""
    def session(confs):
        return SimpleNamespace(conf=SimpleNamespace(get=lambda key, default=None:
                                                    confs.get(key, default)))

    shuffle = "spark.sql.shuffle.partitions"
    assert state_partitions(session({})) == 200
    assert state_partitions(session({shuffle: "8"})) == 8
    assert state_partitions(session({shuffle: "200", STATE_PARTITIONS_CONF: "2"})) == 2


def test_rows_output_round_trips_every_type():
    """The stateful operator's rows output (processor.output_as_rows) goes through
    pyspark's Row -> Arrow conversion of transformWithState (asDict, from_pylist into the
    declared Spark schema): the same values come out as the Arrow batch they were made
    from (the RowUnpacker path), for every type a match row may carry."""
    batch = pa.record_batch({
        "s": pa.array(["a", None, "é"]),
        "ts": pa.array([0, 1_700_000_000_123_456, None], pa.timestamp("us", "UTC")),
        "ntz": pa.array([5, None, -1], pa.timestamp("us")),
        "d": pa.array([float("nan"), -0.0, 1e308]),
        "i": pa.array([2 ** 62, None, -(2 ** 63)], pa.int64()),
        "n": pa.array([Decimal("12345678901234567890.123456"), None, Decimal("-0.000001")],
                      pa.decimal128(38, 6)),
        "day": pa.array([0, 19000, None], pa.date32()),
        "b": pa.array([b"\x00", None, b"xy"], pa.binary()),
        "ok": pa.array([True, None, False]),
        "xs": pa.array([[1, None], None, []], pa.list_(pa.int32())),
        "st": pa.array([{"u": 1, "v": "p"}, None, {"u": None, "v": None}],
                       pa.struct([("u", pa.int32()), ("v", pa.string())])),
        "m": pa.array([[("k", 1)], None, []], pa.map_(pa.string(), pa.int64()))})
    schema = late_rows_schema(from_arrow_schema(batch.schema))
    rows = list(output_as_rows([batch], late=4))
    arrow_type = to_arrow_type(schema, timezone="UTC", prefers_large_types=False)
    out = pa.RecordBatch.from_pylist([r.asDict(True) for r in rows],
                                     schema=pa.schema(list(arrow_type)))
    assert out.column(0).to_pylist() == [None, None, None, 4]
    back = out.slice(0, 3).select(batch.schema.names)
    for name in batch.schema.names:
        got, want = back.column(name), batch.column(name)
        assert got.type == want.type, name
        assert repr(got.to_pylist()) == repr(want.to_pylist()), name
    assert all(v is None for v in out.slice(3).select(batch.schema.names).to_pylist()[0].values())


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 7), max_size=6), pack_rows=st.integers(0, 12),
       keys=st.lists(st.sampled_from(["a", "b", None]), min_size=40, max_size=40))
def test_packer_keeps_every_keys_rows_in_order(sizes, pack_rows, keys):
    """Whatever the input batches and pack_rows: each key's blobs, in the order they come
    out, hold exactly that key's rows in input order (what the processor concatenates)."""
    batches, start = [], 0
    for n in sizes:
        batches.append(pa.record_batch({"k": keys[start:start + n],
                                        "v": list(range(start, start + n))},
                                       schema=pa.schema([("k", pa.string()), ("v", pa.int64())])))
        start += n
    got: dict[str, list[int]] = {}
    for packed in RowPacker(["k"], 4, pack_rows)(iter(batches)):
        for row in packed.to_pylist():
            got.setdefault(row["__cep_kid"], []).extend(
                from_bytes(row["__cep_rows"]).column("v").to_pylist())
    want: dict[str, list[int]] = {}
    for i in range(start):
        want.setdefault(key_id((keys[i],)), []).append(i)
    assert got == want
