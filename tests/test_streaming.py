"""Streaming: the worker cuts partitions into chunks and carries open match attempts
across them. Tiny chunks and one-row batches must give exactly the reference's rows."""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from cepsql.runtime import worker as worker_module

try:
    from .support.strategies import queries, streams
    from .test_property_sql import SETTINGS, assert_engine_matches
except ImportError:
    from support.strategies import queries, streams
    from test_property_sql import SETTINGS, assert_engine_matches


@pytest.fixture()
def tiny_chunks(monkeypatch):
    """Chunks of 3 rows, fed one row per batch."""
    monkeypatch.setattr(worker_module, "CHUNK_ROWS", 3)
    original = worker_module.MatchWorker.__call__

    def one_row_batches(self, batches):
        def split():
            for batch in batches:
                for i in range(batch.num_rows):
                    yield batch.slice(i, 1)
        return original(self, split())

    monkeypatch.setattr(worker_module.MatchWorker, "__call__", one_row_batches)


@settings(max_examples=150, deadline=None, suppress_health_check=[
    *SETTINGS["suppress_health_check"], HealthCheck.function_scoped_fixture])
@given(sql=queries(), table=streams())
def test_tiny_chunks_match_reference(tiny_chunks, sql, table):
    assert_engine_matches(sql, table)


def test_long_partition_keeps_memory_bounded(tiny_chunks):
    """A 2,000-row single partition streams through 3-row chunks with the same result
    as the whole partition at once (rows carried between chunks stay small)."""
    import cepsql
    n = 2000
    table = pa.table({"ts": list(range(n)), "v": [(i * 7) % 11 for i in range(n)]})
    sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(A.v) AS a, "
           "LAST(B.v) AS b, count(*) AS n PATTERN (A B+) "
           "DEFINE B AS B.v > PREV(B.v))")
    got = cepsql.match_recognize(sql, t=table)
    expected_rows = []
    i = 0
    vals = table.column("v").to_pylist()
    while i < n:
        j = i + 1
        while j < n and vals[j] > vals[j - 1]:
            j += 1
        if j > i + 1:
            expected_rows.append((vals[i], vals[j - 1], j - i))
            i = j
        else:
            i += 1
    assert [tuple(r) for r in got.itertuples(index=False)] == expected_rows
