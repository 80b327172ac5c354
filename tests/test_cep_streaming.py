"""CEP-mode streaming: with WITHIN the worker cuts a partition into chunks and the
evaluator carries its runs, match buffer and undecided matches across them, dropping
rows the window no longer reaches. Tiny chunks and one-row batches must give exactly
the reference's rows, and a long partition must be matched in bounded memory."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cepsql.backends.local.engine import run_local, to_pandas
from cepsql.runtime import cep_worker as cep_worker_module
from cepsql.runtime.run_stats import RunStatistics
from cepsql.runtime.workers import bind_worker

try:
    from .support.strategies_cep import STRATEGIES, cep_queries, cep_streams
    from .test_property_cep import HAND, _ticks, assert_cep_matches
    from .test_property_sql import SETTINGS
except ImportError:
    from support.strategies_cep import STRATEGIES, cep_queries, cep_streams
    from test_property_cep import HAND, _ticks, assert_cep_matches
    from test_property_sql import SETTINGS


def _chunked(monkeypatch, rows: int, batch_rows: int = 1):
    monkeypatch.setattr(cep_worker_module, "CHUNK_ROWS", rows)
    original = cep_worker_module.CepWorker.__call__

    def small_batches(self, batches):
        def split():
            for batch in batches:
                for i in range(0, batch.num_rows, batch_rows):
                    yield batch.slice(i, batch_rows)
        return original(self, split())

    monkeypatch.setattr(cep_worker_module.CepWorker, "__call__", small_batches)


#: examples per strategy of the two one-row-batch properties below (it was 150 each,
#: ~20 s CPU for the eight; the same generators also stream through 1, 2 and 7-row chunks
#: below and in test_property_nonoverlap.py, and run unchunked in test_property_cep.py)
STREAMED_EXAMPLES = 80


@pytest.fixture()
def tiny_chunks(monkeypatch):
    """Chunks of 3 rows, fed one row per batch."""
    _chunked(monkeypatch, 3)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_tiny_chunks_match_reference(tiny_chunks, strategy):
    @settings(max_examples=STREAMED_EXAMPLES, **{**SETTINGS, "suppress_health_check": [
        *SETTINGS["suppress_health_check"], HealthCheck.function_scoped_fixture]})
    @given(sql=cep_queries(strategy), table=cep_streams())
    def check(sql, table):
        assert_cep_matches(sql, table)
    check()


@st.composite
def _varied(draw, strategy: str):
    """A CEP query with a window (so the worker streams) and, at random, the options the
    base strategy leaves out: NEXT in DEFINE, PREV/NEXT in MEASURES, WITH UNMATCHED
    ROWS, descending ORDER BY, a NULL ORDER BY key."""
    sql = draw(cep_queries(strategy))
    if "WITHIN" not in sql:
        window = draw(st.sampled_from(["WITHIN 4 ROWS", "WITHIN INTERVAL '3' SECOND"]))
        if " DEFINE " in sql:
            sql = sql.replace(" DEFINE ", f" {window} DEFINE ", 1)
        else:
            sql = sql[:-1] + f" {window})"
    if draw(st.booleans()):
        sql = sql.replace("PREV(", "NEXT(")
    if draw(st.integers(0, 2)) == 0:
        sql = sql.replace("MEASURES ", "MEASURES PREV(ts, 2) AS pv, NEXT(ts) AS nx, ", 1)
    if draw(st.booleans()):
        sql = sql.replace("ALL ROWS PER MATCH", "ALL ROWS PER MATCH WITH UNMATCHED ROWS")
    if draw(st.integers(0, 3)) == 0:
        sql = sql.replace("ORDER BY ts ", "ORDER BY ts DESC ", 1)
    return sql


@st.composite
def _streams_with_null_ts(draw):
    table = draw(cep_streams())
    if table.num_rows and draw(st.booleans()):
        ts = table.column("ts").to_pylist()
        ts[draw(st.integers(0, len(ts) - 1))] = None
        table = table.set_column(table.schema.get_field_index("ts"), "ts",
                                 pa.array(ts, table.schema.field("ts").type))
    return table


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_tiny_chunks_varied_options(tiny_chunks, strategy):
    @settings(max_examples=STREAMED_EXAMPLES, **{**SETTINGS, "suppress_health_check": [
        *SETTINGS["suppress_health_check"], HealthCheck.function_scoped_fixture]})
    @given(sql=_varied(strategy), table=_streams_with_null_ts())
    def check(sql, table):
        assert_cep_matches(sql, table)
    check()


@pytest.mark.parametrize("rows", [1, 2, 7])
@pytest.mark.parametrize("strategy", ["SKIP_TILL_NEXT_MATCH", "SKIP_TILL_ANY_MATCH"])
def test_other_chunk_sizes(monkeypatch, rows, strategy):
    _chunked(monkeypatch, rows, batch_rows=2)

    @settings(max_examples=60, **{**SETTINGS, "suppress_health_check": [
        *SETTINGS["suppress_health_check"], HealthCheck.function_scoped_fixture]})
    @given(sql=_varied(strategy), table=_streams_with_null_ts())
    def check(sql, table):
        assert_cep_matches(sql, table)
    check()


@pytest.mark.parametrize("strategy", ["PARTITION_CONTIGUITY", "SKIP_TILL_NEXT_MATCH",
                                      "SKIP_TILL_ANY_MATCH"])
@pytest.mark.parametrize("query", range(len(HAND)))
def test_hand_queries_tiny_chunks(tiny_chunks, strategy, query):
    assert_cep_matches(HAND[query].format(s=strategy), _ticks())


LONG = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(a.ts) AS t0, "
        "LAST(ts) AS t1, count(b.*) AS nb, MATCH_NUMBER() AS mn ONE ROW PER MATCH {skip} "
        "STRATEGY {s} PATTERN (a b+ NOT(d) c) WITHIN {w} ROWS "
        "DEFINE a AS a.v = 0, b AS b.v > PREV(b.v) OR b.v = 7, c AS c.v < 3, d AS d.v = 10)")


@pytest.mark.parametrize("strategy,skip,window", [
    ("SKIP_TILL_NEXT_MATCH", "", 50),
    ("SKIP_TILL_NEXT_MATCH", "AFTER MATCH SKIP PAST LAST ROW", 50),
    ("SKIP_TILL_ANY_MATCH", "AFTER MATCH SKIP PAST LAST ROW", 8),
])
def test_long_partition_memory_is_bounded(monkeypatch, strategy, skip, window):
    """50,000 rows in one partition: streamed in small chunks the result equals the
    whole-partition evaluation, while the rows held per chunk and the match buffer stay
    bounded by the window (not by the partition)."""
    n = 50_000
    table = pa.table({"ts": list(range(n)), "v": [(i * 7 + i // 13) % 11 for i in range(n)]})
    sql = LONG.format(s=strategy, skip=skip, w=window)
    whole_stats, streamed_stats = RunStatistics(), RunStatistics()
    monkeypatch.setattr(cep_worker_module, "WINDOW_CHUNK_ROWS", n)   # one call
    whole = to_pandas(run_local(sql, {"t": table}, stats=whole_stats))
    assert whole_stats.last["peak_rows"] == n
    assert len(whole) > 100
    _chunked(monkeypatch, 256, batch_rows=100)
    streamed = to_pandas(run_local(sql, {"t": table}, stats=streamed_stats))
    stats = streamed_stats.last
    assert streamed.equals(whole) or sorted(map(tuple, streamed.values.tolist())) == \
        sorted(map(tuple, whole.values.tolist()))
    assert stats["peak_rows"] <= 2 * 256 + 100 + 4 * window
    assert stats["peak_nodes"] <= 4096 + 64 * window
    assert stats["peak_stored"] <= 4 * window
    if strategy == "SKIP_TILL_ANY_MATCH":   # the planned evaluator: instances stay bounded
        assert stats["planned"] == 1
        assert 0 < stats["peak_partial_matches"] <= 2 ** window * window


def test_plan_store_compacts_after_a_burst(monkeypatch):
    """A burst of 300 a rows, then one a and one b every 10 rows: the a store's instances
    leave the window, and a b's scan of them compacts the store (cep_tree _up) instead of
    keeping them until the chunk ends -- at most 2 * (30 live + 1) + 256 per store after
    the burst, where the row trigger let it grow to 2 * 257 + 256 (issue 25). Same rows
    in one chunk as in 256-row chunks."""
    n, burst = 6000, 300
    v = [0 if i < burst else 0 if i % 10 == 0 else 1 if i % 10 == 5 else 2 for i in range(n)]
    table = pa.table({"ts": list(range(n)), "v": v, "k": [(i * 7) % 10 for i in range(n)]})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES a.ts AS ta, b.ts AS tb "
           "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) WITHIN 300 ROWS "
           "DEFINE a AS a.v = 0, b AS b.v = 1 AND b.k = a.k)")
    stats = RunStatistics()
    whole = to_pandas(run_local(sql, {"t": table}, stats=stats))
    assert stats.last["planned"] == 1 and stats.last["peak_rows"] == n
    assert 300 <= stats.last["peak_partial_matches"] <= 2 * (2 * 31 + 256)
    _chunked(monkeypatch, 256, batch_rows=100)
    chunked = to_pandas(run_local(sql, {"t": table}))
    assert len(whole) == 435
    assert sorted(map(tuple, chunked.values.tolist())) == sorted(map(tuple, whole.values.tolist()))


def test_windowed_calls_take_window_chunks():
    """Under WITHIN the evaluator runs at most WINDOW_CHUNK_ROWS new rows per call (its
    matches are held and sorted per call), not the SQL worker's CHUNK_ROWS (issue 25)."""
    chunk, window = cep_worker_module.WINDOW_CHUNK_ROWS, 50
    assert chunk < cep_worker_module.CHUNK_ROWS
    n = 3 * chunk
    table = pa.table({"ts": list(range(n)), "v": [(i * 7 + i // 13) % 11 for i in range(n)]})
    stats = RunStatistics()
    run_local(LONG.format(s="SKIP_TILL_NEXT_MATCH", skip="", w=window), {"t": table},
              stats=stats)
    assert stats.last["peak_rows"] <= chunk + 4 * window


def test_without_within_the_partition_is_held(monkeypatch):
    n = 2_000
    table = pa.table({"ts": list(range(n)), "v": [(i * 7 + i // 13) % 11 for i in range(n)]})
    sql = LONG.format(s="SKIP_TILL_NEXT_MATCH", skip="", w=50).replace(" WITHIN 50 ROWS", "")
    _chunked(monkeypatch, 256, batch_rows=100)
    stats = RunStatistics()
    run_local(sql, {"t": table}, stats=stats)
    assert stats.last["peak_rows"] == n


def _open_matcher(sql: str, table: pa.Table):
    """(worker, matcher after an open run over table -- as the streaming engine leaves
    it --, its output, table with the plan's prepared columns)."""
    from cepsql.compile.clause import plan_query
    try:
        from .test_property_sql import spec_of
    except ImportError:
        from test_property_sql import spec_of
    from cepsql.exprs.arrow_eval import evaluate_arrow
    plan = plan_query(spec_of(sql), table.schema, sql)
    for name, expr in plan.prepare_columns:
        table = table.append_column(name, evaluate_arrow(expr, table))
    worker = bind_worker(plan, table.schema).worker
    matcher = worker._new_matcher()
    zero = np.zeros(1, dtype=np.int64)
    out = list(worker._process(matcher, table, zero, True, False))
    return worker, matcher, out, table


def test_exported_state_continues_like_the_live_matcher():
    """export_state -> import_state into a fresh matcher continues the open partition
    exactly as the matcher that ran the first part; another pattern refuses the bytes."""
    n = 400
    table = pa.table({"ts": np.arange(n, dtype=np.int64),
                      "v": [(i * 7 + i // 13) % 11 for i in range(n)]})
    sql = LONG.format(s="SKIP_TILL_ANY_MATCH", skip="AFTER MATCH SKIP PAST LAST ROW", w=8) \
        .replace("b.v > PREV(b.v)", "b.v > a.v")
    head, tail = table.slice(0, 250), table.slice(250)
    worker, live, first, head = _open_matcher(sql, head)
    _, _, _, table = _open_matcher(sql, table)  # the prepared columns
    blob = live.export_state()
    assert blob and live.n_carried() == 250 - live.keep
    restored = worker._new_matcher()
    restored.import_state(blob)
    assert restored.export_state() == blob and restored.match_no == live.match_no
    rest = table.slice(live.keep)
    zero = np.zeros(1, dtype=np.int64)
    a = pa.Table.from_batches(list(worker._process(live, rest, zero, False, True)))
    b = pa.Table.from_batches(list(worker._process(restored, rest, zero, False, True)))
    assert a.num_rows > 0 and a.equals(b)
    whole = pa.Table.from_batches(list(worker._process(worker._new_matcher(), table, zero)))
    joined = pa.Table.from_batches(first + a.to_batches(), schema=whole.schema)
    assert joined.combine_chunks().equals(whole.combine_chunks())
    other, _, _, _ = _open_matcher(sql.replace("SKIP_TILL_ANY_MATCH", "SKIP_TILL_NEXT_MATCH"),
                                tail)
    with pytest.raises(ValueError):
        other._new_matcher().import_state(blob)
    for cut in range(8, len(blob), 8):   # any truncation is refused, never read past
        with pytest.raises(ValueError):
            worker._new_matcher().import_state(blob[:cut])
    words = np.frombuffer(blob, dtype=np.int64).copy()
    words[14] -= 1   # the runs' length: the buffers no longer fit together
    with pytest.raises(ValueError):
        worker._new_matcher().import_state(words.tobytes())
