"""The in-process evaluators on several threads (cepsql/backends/local/threads.py): slices
cut at PARTITION BY group boundaries only, and results identical to the one-thread run
(one global sort, one worker) on random partitioned streams, in SQL:2016 and CEP mode,
whether slices are sorted separately (partition ranks) or cut from the sorted input."""
from __future__ import annotations

import math

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cepsql
from cepsql.backends.local import threads as threads_module
from cepsql.backends.local.threads import slice_bounds
from cepsql.errors import CepError
from cepsql.runtime.run_stats import RunStatistics

try:
    from .support.strategies import queries, streams
    from .support.strategies_cep import cep_queries, cep_streams
except ImportError:
    from support.strategies import queries, streams
    from support.strategies_cep import cep_queries, cep_streams

SETTINGS = dict(deadline=None, max_examples=40,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


def _outcome(sql: str, table: pa.Table, monkeypatch, threads: int):
    """The result (or the error type and message) on that many threads, slices of any size.
    One thread runs the plain path: one global sort, one worker over the whole input."""
    with monkeypatch.context() as patch, cepsql.planner_options(threads=threads):
        if threads == 1:
            patch.setattr(cepsql.backends.local.engine, "partition_ranks",
                          lambda *args, **kw: None)
        try:
            return cepsql.backends.local.engine.run_local(sql, {"t": table})
        except CepError as err:
            return type(err).__name__, err.message


def _same(a, b) -> bool:
    return a == b if isinstance(a, tuple) or isinstance(b, tuple) else a.equals(b)


@pytest.fixture
def tiny_slices(monkeypatch):
    monkeypatch.setattr(threads_module, "MIN_SLICE_ROWS", 1)
    return monkeypatch


@settings(**SETTINGS)
@given(sql=queries(max_items=4), table=streams(max_rows=40))
def test_sql2016_threads_equal_one_thread(tiny_slices, sql, table):
    one = _outcome(sql, table, tiny_slices, 1)
    many = _outcome(sql, table, tiny_slices, 3)
    assert _same(one, many), sql


@settings(**SETTINGS)
@given(sql=cep_queries(), table=cep_streams(with_nulls=True, unique_ts=False))
def test_cep_threads_equal_one_thread(tiny_slices, sql, table):
    one = _outcome(sql, table, tiny_slices, 1)
    many = _outcome(sql, table, tiny_slices, 4)
    assert _same(one, many), sql


@settings(**SETTINGS)
@given(sql=queries(max_items=3), table=streams(max_rows=40))
def test_presorted_slices_equal_one_thread(tiny_slices, sql, table):
    """The path that cuts the globally sorted input (several or floating-point keys)."""
    one = _outcome(sql, table, tiny_slices, 1)
    tiny_slices.setattr(cepsql.backends.local.engine, "partition_ranks",
                        lambda *args, **kw: None)
    many = _outcome(sql, table, tiny_slices, 3)
    assert _same(one, many), sql


@settings(deadline=None, max_examples=60)
@given(keys=st.lists(st.sampled_from(["a", "b", "c", None]), max_size=60),
       slices=st.integers(1, 9))
def test_slices_cut_only_between_groups(keys, slices):
    table = pa.table({"part": sorted(keys, key=lambda k: (k is not None, k or ""))})
    bounds = slice_bounds(table, ["part"], slices)
    assert bounds[0] == 0 and bounds[-1] == len(keys)
    assert bounds == [0, 0] if not keys else bounds == sorted(set(bounds))
    assert len(bounds) - 1 <= max(1, slices)
    values = table.column("part").to_pylist()
    for cut in bounds[1:-1]:
        assert values[cut - 1] != values[cut]


def test_nan_and_null_keys_are_one_group_each():
    """NaN equals NaN and NULL equals NULL as partition keys, as in the worker."""
    part = [1.0, 1.0, math.nan, math.nan, math.nan, None, None]
    bounds = slice_bounds(pa.table({"part": part}), ["part"], 7)
    assert bounds == [0, 2, 5, 7]


def test_sliced_run_reports_merged_stats(tiny_slices):
    """The CEP evaluator's counters of a sliced run: peaks are maxima, counts sums."""
    table = pa.table({"part": ["a"] * 6 + ["b"] * 6, "ts": list(range(12)),
                      "v": [0, 1, 0, 1, 0, 1] * 2})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES "
           "MATCH_NUMBER() AS mn ONE ROW PER MATCH STRATEGY SKIP_TILL_NEXT_MATCH "
           "PATTERN (SEQ(a, b)) DEFINE a AS v = 0, b AS v = 1)")
    one, two = RunStatistics(), RunStatistics()
    with cepsql.planner_options(threads=1):
        cepsql.backends.local.engine.run_local(sql, {"t": table}, stats=one)
    single = one.last
    with cepsql.planner_options(threads=2):
        out = cepsql.backends.local.engine.run_local(sql, {"t": table}, stats=two)
    merged = two.last
    assert out.num_rows == 6 and merged["matches_found"] == single["matches_found"] == 6
    assert merged["peak_rows"] == 6 < single["peak_rows"] == 12


def test_threaded_rows_are_in_partition_order(tiny_slices):
    table = pa.table({"part": [f"p{i % 7}" for i in range(70)], "ts": list(range(70))})
    with cepsql.planner_options(threads=4):
        out = cepsql.backends.local.engine.run_local(
            "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts MEASURES "
            "MATCH_NUMBER() AS mn, count(*) AS n ONE ROW PER MATCH PATTERN (a{2}) "
            "DEFINE a AS true)", {"t": table})
    assert out.column("part").to_pylist() == sorted(f"p{i}" for i in range(7) for _ in range(5))
    assert out.column("mn").to_pylist() == [1, 2, 3, 4, 5] * 7


@settings(deadline=None, max_examples=40)
@given(keys=st.lists(st.one_of(st.none(), st.sampled_from(["b", "a", "c", "ab", ""])),
                     max_size=50),
       threads=st.integers(1, 5), ascending=st.booleans(), nulls_first=st.booleans())
def test_partition_ranks_in_pieces_equal_the_key_order(keys, threads, ascending,
                                                       nulls_first):
    """Ranks encoded in pieces on several threads are the distinct keys' ranks in the
    PARTITION BY order (NULL one value, placed as the key says)."""
    threads_module.MIN_SLICE_ROWS, saved = 1, threads_module.MIN_SLICE_ROWS
    try:
        ranks = threads_module.partition_ranks(
            pa.table({"k": pa.array(keys, pa.string())}),
            threads_module.SortColumn("k", ascending, nulls_first), threads=threads)
    finally:
        threads_module.MIN_SLICE_ROWS = saved
    values = sorted({k for k in keys if k is not None}, reverse=not ascending)
    if None in keys:
        values = [None] + values if nulls_first else values + [None]
    assert ranks.tolist() == [values.index(k) for k in keys]
