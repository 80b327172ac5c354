"""A workload over a stream: spark.cep.workload(src).matches() and cep_workload('src') over
a streaming source are ONE streaming query (one stateful operator per partitioning group)
evaluating every pattern view. A JSON file source is written in two increments (out of
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
        DEFINE a AS a.price < 5, b AS b.price > a.price + 1)""",
    "any": """SELECT * FROM {src} MATCH_RECOGNIZE (
        PARTITION BY sym ORDER BY ts
        MEASURES a.price AS pa, c.price AS pc, sum(MATCH_NUMBER() * 10 + b.price) AS s
        ONE ROW PER MATCH STRATEGY SKIP_TILL_ANY_MATCH
        PATTERN (SEQ(a, b, c)) WITHIN INTERVAL '2' SECOND
        DEFINE a AS a.price < 4, b AS b.price > a.price, c AS c.price < b.price)""",
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

        _write(source, "part-0.json", FIRST)
        query = run_once()
        # one stateful operator per partitioning group (PARTITION BY sym; no PARTITION BY)
        assert len(query.lastProgress["stateOperators"]) == 2
        first = spark.read.parquet(out).count()
        _write(source, "part-1.json", SECOND)
        run_once()  # restart from the checkpoint
        got = _rows(spark.read.parquet(out).collect(), "wls")
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
