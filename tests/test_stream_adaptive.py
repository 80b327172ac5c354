"""Plans per key over a stream (backends/streaming/replanning.py), in-process: rows arrive
in micro-batches cut at random borders; keys plan from their own rows and, with forced
settings, switch plans at every check (each switch drains the old plan's evaluator across
micro-batches). The streamed rows equal the static stream's (the start-up plan
throughout) and the batch worker's, also across a restart from the stored state."""
from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cepsql.backends.streaming.engine import CepEngine, KeyState, new_engine
from cepsql.backends.streaming.processor import state_from_row, state_to_row
from cepsql.backends.streaming.replanning import (KeyPlans, ReplanningEngine, decode_shape,
                                                  encode_shape, key_state_plans, stream_engine)
from cepsql.compile.clause import plan_query
from cepsql.errors import CepRuntimeError
from cepsql.exprs.arrow_eval import evaluate_arrow
from cepsql.parse import find_match_recognize
from cepsql.planning.trees import join, leaf
from cepsql.runtime import adaptive
from cepsql.runtime.adaptive import AdaptiveSettings
from cepsql.runtime.ordering import sort_table
from cepsql.runtime.workers import bind_worker
from cepsql.stats.model import PatternStatistics
from cepsql.stats.worker import InWorkerStatistics

try:
    from .test_adaptive import drifting_streams, rotating_plans  # rotating_plans: a fixture
    from .test_property_sql import SETTINGS
except ImportError:
    from test_adaptive import drifting_streams, rotating_plans  # noqa: F401 (rotating_plans: a fixture)
    from test_property_sql import SETTINGS

FLUSH_MS = 1 << 50
SAMPLE_ROWS = 4   # a key plans from its own rows after 4 of them
_HEAD = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts "
         "MEASURES MATCH_NUMBER() AS mn, FIRST(a.ts) AS t0, LAST(c.ts) AS t1 {rows} "
         "STRATEGY SKIP_TILL_ANY_MATCH PATTERN ({pattern}) WITHIN INTERVAL '{w}' SECOND "
         "DEFINE a AS a.tag <> 'z', b AS b.price >= a.price, "
         "c AS c.vol > a.vol OR c.tag = 'y'{extra})")
_D = ", d AS d.price < c.price"
PATTERNS = [("SEQ(a, b, c)", ""), ("SEQ(a, AND(b, d), c)", _D),
            ("SEQ(a, b, NOT(n), c)", ", n AS n.price = 4"), ("SEQ(a, KL(b), c, d)", _D),
            ("OR(SEQ(a, b, c), SEQ(a, c, d))", _D), ("SEQ(a, d, c, b)", _D)]
FORCED = AdaptiveSettings(threshold=0.0, check_rows=16, chunk_rows=1, min_gain=0.0,
                          max_check_every=1, confirm=1)


def query(pattern: int, window: int, all_rows: bool) -> str:
    text, extra = PATTERNS[pattern]
    return _HEAD.format(pattern=text, w=window, extra=extra,
                        rows="ALL ROWS PER MATCH" if all_rows else "ONE ROW PER MATCH")


def bound_query(sql: str, schema: pa.Schema, settings_: AdaptiveSettings | None,
                in_worker: bool = True):
    """(plan, bound worker, its input's schema): planned in its tasks (in_worker: what a
    stream does) with these adaptive settings, or from uniform estimates alone (the
    static stream)."""
    [site] = find_match_recognize(sql)
    stats = InWorkerStatistics(SAMPLE_ROWS, adaptive=settings_) if in_worker else None
    plan = plan_query(site.spec, schema, sql, statistics=stats)
    return plan, bind_worker(plan, prepared(pa.table({f.name: pa.array([], f.type)
                                                       for f in schema}), plan).schema)


def prepared(table: pa.Table, plan) -> pa.Table:
    """table with the plan's prepare_columns (the Spark path adds them before packing)."""
    for name, expr in plan.prepare_columns:
        table = table.append_column(name, evaluate_arrow(expr, table))
    return table


def stream(sql: str, table: pa.Table, cuts: list[int], delay_ms: int,
           settings_: AdaptiveSettings | None, replan: bool = True,
           restart: int | None = None):
    """(rows emitted, engines used, key states): table (in ts order) fed in the
    micro-batches cut at cuts, the watermark delay_ms behind the newest row; each key's
    state stored as Spark stores it after every step. replan: keys plan from their rows
    (else the static stream: the start-up plan throughout); at micro-batch ``restart`` a
    new replanning engine (a restarted query) continues from the stored states."""
    schema = table.schema

    def engine_for(replans: bool):
        plan, bound = bound_query(sql, schema, settings_, in_worker=replans)
        make = stream_engine if replans else new_engine
        return plan, make(bound.worker, "ts", plan.sort_keys[1:], plan.spec), bound

    plan, engine, bound = engine_for(replan)
    table = prepared(table, plan)
    engines = [engine]
    states: dict = {}
    timers: dict = {}
    out: list[pa.RecordBatch] = []
    edges = [0, *sorted(set(cuts)), table.num_rows]
    newest = 0
    for step, (lo, hi) in enumerate(zip(edges, edges[1:])):
        if step == restart:
            plan, engine, bound = engine_for(True)
            engines.append(engine)
        if hi <= lo:
            continue
        part = table.slice(lo, hi - lo)
        newest = max(newest, int(pa.compute.max(part.column("ts")).as_py()))
        watermark = max(newest * 1000 - delay_ms, 0)
        keys = part.column("part").to_pylist()
        due = {k for k, t in timers.items() if 0 <= t <= watermark}
        for key in sorted(set(keys) | due):
            rows = part.filter(pa.array([k == key for k in keys])) if key in keys else None
            state = states.get(key, KeyState())
            result = engine.advance(state, rows, watermark)
            states[key] = state_from_row(state_to_row(state))
            timers[key] = result.timer_ms
            out += result.output
    for state in states.values():
        out += engine.advance(state, None, FLUSH_MS).output
    return _rows(out, bound.worker_schema), engines, states


def batch(sql: str, table: pa.Table) -> Counter:
    plan, bound = bound_query(sql, table.schema, None, in_worker=False)
    ordered = sort_table(prepared(table, plan), list(plan.sort_keys)).combine_chunks()
    return _rows(list(bound.worker(iter(ordered.to_batches()))), bound.worker_schema)


def _rows(batches, schema) -> Counter:
    table = pa.Table.from_batches([b for b in batches if b.num_rows], schema=schema)
    return Counter(tuple(repr(v) for v in row.values()) for row in table.to_pylist())


@pytest.fixture()
def forced_switches(monkeypatch, rotating_plans):
    """Every check drifts and re-plans to the next of a rotation of trees: with FORCED
    each drift check of a plan of 3 or more components switches."""
    monkeypatch.setattr(adaptive, "drift", lambda base, now: float("inf"))
    monkeypatch.setattr(adaptive, "log_drift", lambda base, now: float("inf"))
    return rotating_plans


_SLOW = {**SETTINGS, "suppress_health_check": [*SETTINGS["suppress_health_check"],
                                               HealthCheck.function_scoped_fixture]}


@settings(max_examples=25, **_SLOW)
@given(data=st.data(), table=drifting_streams(min_rows=30),
       pattern=st.integers(0, len(PATTERNS) - 1), window=st.sampled_from([2, 4, 8]),
       all_rows=st.booleans(), delay=st.sampled_from([0, 1000, 3000]))
def test_forced_switches_stream_equals_static_and_batch(forced_switches, data, table,
                                                        pattern, window, all_rows, delay):
    sql = query(pattern, window, all_rows)
    cuts = data.draw(st.lists(st.integers(1, table.num_rows - 1), max_size=12))
    want = batch(sql, table)
    static, [engine], _ = stream(sql, table, cuts, delay, None, replan=False)
    assert static == want and not isinstance(engine, ReplanningEngine)
    off, [engine], _ = stream(sql, table, cuts, delay, None)   # plans once per key
    assert off == want
    got, [engine], _ = stream(sql, table, cuts, delay, FORCED)
    assert isinstance(engine, ReplanningEngine)
    assert got == want, (sql, cuts, delay)
    # forced: one key's every drift check switches (the planner's rotation is shared by
    # the keys, so with several a key may be handed its running plan again); its first
    # plan from its rows may keep the start-up plan
    one = table.filter(pa.compute.equal(table.column("part"), "a"))
    if one.num_rows > SAMPLE_ROWS:
        got, [engine], _ = stream(sql, one, [c for c in cuts if c < one.num_rows], delay,
                                  FORCED)
        assert got == batch(sql, one)
        assert engine.checks > 0 and engine.checks - engine.switches in (0, 1), (
            engine.checks, engine.switches)


@settings(max_examples=12, **_SLOW)
@given(data=st.data(), table=drifting_streams(min_rows=30),
       pattern=st.integers(0, len(PATTERNS) - 1), window=st.sampled_from([2, 4, 8]))
def test_restart_from_stored_state_mid_drain(forced_switches, data, table, pattern, window):
    """A new engine (fresh plan caches, a planner counting again) continues every key's
    stored state -- recorded plans, a drain under way -- with the same rows; a state
    written before plans were recorded (the static engine) reads as the start-up plan's."""
    sql = query(pattern, window, False)
    cuts = data.draw(st.lists(st.integers(1, table.num_rows - 1), min_size=2, max_size=10))
    restart = data.draw(st.integers(1, len(set(cuts))))
    want = batch(sql, table)
    got, engines, _ = stream(sql, table, cuts, 1000, FORCED, restart=restart)
    assert len(engines) == 2 and got == want, (sql, cuts, restart)
    got, engines, _ = stream(sql, table, cuts, 1000, FORCED, replan=False, restart=restart)
    assert isinstance(engines[0], CepEngine) and not isinstance(engines[0], ReplanningEngine)
    assert got == want, (sql, cuts, restart)


def test_a_drain_spans_micro_batches_and_keeps_both_plans(forced_switches):
    """One key, a row per micro-batch, a long window: after the switch the old plan's
    evaluator drains over later micro-batches, its carry-over stored beside the new one's."""
    n = 40
    table = pa.table({"part": ["k"] * n, "ts": list(range(1, n + 1)),
                      "price": [i % 7 for i in range(n)], "vol": [float(i % 5) for i in range(n)],
                      "tag": ["x", "y", "x", "z"] * (n // 4)})
    sql = query(0, 8, False)
    plan, bound = bound_query(sql, table.schema, FORCED)
    engine = stream_engine(bound.worker, "ts", plan.sort_keys[1:], plan.spec)
    rows = prepared(table, plan)
    state, draining, out = KeyState(), 0, []
    for i in range(n):
        out += engine.advance(state, rows.slice(i, 1), i * 1000).output
        state = state_from_row(state_to_row(state))
        plans = key_state_plans(state)
        if plans.old_plan is not None:
            draining += 1
            assert plans.old_blob and plans.old_plan != plans.plan
    out += engine.advance(state, None, FLUSH_MS).output
    assert draining > 0 and engine.switches > 0
    assert _rows(out, bound.worker_schema) == batch(sql, table)


def test_adaptation_off_plans_each_key_once():
    """cepsql.adaptive.enabled=false: a key plans from its first rows and keeps that plan
    (one check per key that has them)."""
    n = 60
    table = pa.table({"part": ["k", "j"] * (n // 2), "ts": list(range(1, n + 1)),
                      "price": [i % 9 for i in range(n)], "vol": [float(i % 4) for i in range(n)],
                      "tag": ["x", "z", "y"] * (n // 3)})
    sql = query(3, 4, False)
    got, [engine], states = stream(sql, table, [7, 20, 33, 41], 0, None)
    assert got == batch(sql, table)
    assert engine.checks == 2 and all(key_state_plans(s).base is not None
                                      for s in states.values())


def test_only_exact_clauses_replan():
    schema = pa.schema([("part", pa.string()), ("ts", pa.int64()), ("price", pa.int64()),
                        ("vol", pa.float64()), ("tag", pa.string())])
    exact = query(0, 4, False)
    plan, bound = bound_query(exact, schema, FORCED)
    assert isinstance(stream_engine(bound.worker, "ts", [], plan.spec), ReplanningEngine)
    plan, bound = bound_query(exact, schema, FORCED, in_worker=False)   # no task planning
    assert not isinstance(stream_engine(bound.worker, "ts", [], plan.spec), ReplanningEngine)
    skip = exact.replace("STRATEGY", "AFTER MATCH SKIP PAST LAST ROW STRATEGY")
    plan, bound = bound_query(skip, schema, FORCED)   # switches would not be exact
    assert not isinstance(stream_engine(bound.worker, "ts", [], plan.spec), ReplanningEngine)


def test_key_plans_round_trip():
    tree = join(join(leaf(2), leaf(0)), join(leaf(1), leaf(3)))
    shape = (("tree", tree), ("order", (1, 0, 2)))
    assert decode_shape(encode_shape(shape)) == shape
    stats = PatternStatistics(rates={"a": 0.1, "b": 2.5}, selectivities={("a", "b"): 1 / 3},
                              unary_selectivity={"a": 0.01, "b": 0.25}, sample_rows=40,
                              seconds=0.0, truncated=False, window_units=4.0,
                              pairs_evaluated={("a", "b"): 12})
    kp = KeyPlans(plan=encode_shape(shape), blob=b"\x01\x02", started=False, skip=3,
                  old_plan=b"", old_blob=b"xyz", old_skip=1, bound=7, base=stats, since=5,
                  every=2, checks=9, candidate=None, votes=1)
    back = KeyPlans.decode(kp.encode())
    assert back == kp
    assert KeyPlans.decode(b"SPEC....") == KeyPlans(blob=b"SPEC....")   # before plans
    with pytest.raises(CepRuntimeError, match="another cepsql version"):
        KeyPlans.decode(b"CEPA\x07\x00\x00\x00" + bytes(112))
