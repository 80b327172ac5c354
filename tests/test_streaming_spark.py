"""spark.cep.sql over a streaming view (Structured Streaming, transformWithState):
a JSON file source written in two increments (the second with out-of-order rows, a late
row and a key that goes quiet), each increment run with availableNow from the same
checkpoint into a parquet sink (stop + restart). The sink must hold exactly the batch
result over the same non-late rows, for SQL:2016 and CEP mode."""
from __future__ import annotations

import json
import os
import re
import warnings

import pytest

from cepsql.backends.streaming.frames import STATE_PARTITIONS_CONF, StatePartitionsWarning
from cepsql.errors import CepAnalysisError

SCHEMA = "sym string, ts timestamp, price double"
DELAY = "2 seconds"

SQL_MODE = """
SELECT * FROM {src} MATCH_RECOGNIZE (
  PARTITION BY sym ORDER BY ts
  MEASURES FIRST(a.ts) AS t0, LAST(b.ts) AS t1, count(b.*) AS n, MATCH_NUMBER() AS mn
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (a b+) WITHIN INTERVAL '3' SECOND
  DEFINE b AS b.price > PREV(b.price))"""

CEP_MODE = """
SELECT * FROM {src} MATCH_RECOGNIZE (
  PARTITION BY sym ORDER BY ts
  MEASURES a.ts AS ta, b.ts AS tb, b.price - a.price AS gain, MATCH_NUMBER() AS mn
  ONE ROW PER MATCH STRATEGY SKIP_TILL_NEXT_MATCH
  PATTERN (SEQ(a, b)) WITHIN INTERVAL '3' SECOND
  DEFINE a AS a.price < 5, b AS b.price > a.price + 1)"""

# CEP mode with a relevance filter (a variable takes only prices < 3 or > 5): rows of
# prices 3-5 never reach the stateful operator
CEP_RELEVANT = """
SELECT * FROM {src} MATCH_RECOGNIZE (
  PARTITION BY sym ORDER BY ts
  MEASURES a.ts AS ta, b.ts AS tb, b.price - a.price AS gain, MATCH_NUMBER() AS mn
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW STRATEGY SKIP_TILL_NEXT_MATCH
  PATTERN (SEQ(a, b)) WITHIN INTERVAL '3' SECOND
  DEFINE a AS a.price < 3, b AS b.price > 5 AND b.price > a.price)"""

# (sym, second, price); the second increment arrives out of order and holds one late row
FIRST = [("a", s, p) for s, p in zip(range(1, 11), [3, 4, 5, 2, 6, 7, 1, 4, 8, 2])] + \
        [("b", s, p) for s, p in zip(range(1, 7), [1, 3, 2, 4, 6, 1])]
SECOND = [("a", 14, 9), ("a", 12, 3), ("a", 11, 1), ("a", 13, 6), ("a", 3, 9),  # 3: late
          ("a", 16, 2), ("a", 15, 4), ("z", 90, 0)]  # z only moves the watermark on
LATE = [("a", 3, 9)]


def _write(folder: str, name: str, rows) -> None:
    with open(os.path.join(folder, name), "w") as f:
        for sym, second, price in rows:
            f.write(json.dumps({"sym": sym, "ts": f"2024-01-01 00:00:{second:02d}"
                                if second < 60 else f"2024-01-01 00:01:{second - 60:02d}",
                                "price": float(price)}) + "\n")


def _run_once(spark, sqls: list[str], outs: list[str], checkpoints: list[str]) -> None:
    """Each query once with availableNow from its checkpoint (both run concurrently)."""
    queries = [spark.cep.sql(sql).writeStream.format("parquet").option("path", out)
               .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
               for sql, out, checkpoint in zip(sqls, outs, checkpoints)]
    for query in queries:
        query.awaitTermination()


def _batch(spark, sql: str, folder: str, drop) -> list:
    df = spark.read.schema(SCHEMA).json(folder)
    for sym, second, price in drop:
        df = df.filter(~((df.sym == sym) & (df.price == float(price))
                         & (df.ts == f"2024-01-01 00:00:{second:02d}")))
    df.createOrReplaceTempView("ticks_batch")
    return sorted(spark.cep.sql(sql.format(src="ticks_batch")).collect())


@pytest.fixture()
def one_shuffle_partition(spark):
    """Fewer state-store partitions: the stateful tasks dominate these small runs."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    yield
    spark.conf.set("spark.sql.shuffle.partitions", before)


def test_stream_with_restart_equals_batch(spark, tmp_path, one_shuffle_partition):
    source = str(tmp_path / "in")
    os.makedirs(source)
    templates = [SQL_MODE, CEP_MODE, CEP_RELEVANT]
    outs = [str(tmp_path / f"out{i}") for i in range(len(templates))]
    checkpoints = [str(tmp_path / f"ck{i}") for i in range(len(templates))]
    spark.readStream.schema(SCHEMA).json(source).withWatermark("ts", DELAY) \
        .createOrReplaceTempView("ticks_stream")
    sqls = [t.format(src="ticks_stream") for t in templates]
    before = sum(spark.cep.late_rows().values())
    _write(source, "part-0.json", FIRST)
    _run_once(spark, sqls, outs, checkpoints)
    firsts = [spark.read.parquet(out).count() for out in outs]
    # CEP mode stops with key "a" open: its evaluator carry-over is in the checkpoint
    from cepsql.backends.streaming.processor import decode_keys
    stored = (spark.read.format("statestore").option("stateVarName", "cep_bucket")
              .load(checkpoints[1]).select("value.keys").collect())
    keys = {kid: row for r in stored for kid, (row, _) in decode_keys(r[0]).items()}
    held, evaluator = keys["('a',)"][0], keys["('a',)"][9]
    assert len(held) > 0 and len(evaluator) > 0
    _write(source, "part-1.json", SECOND)
    _run_once(spark, sqls, outs, checkpoints)  # restart from the checkpoints
    for template, out, first in zip(templates, outs, firsts):
        got = sorted(spark.read.parquet(out).collect())
        want = _batch(spark, template, source, LATE)
        assert 0 < first < len(got), template   # matches on both sides of the restart
        assert got == want, template
    assert sum(spark.cep.late_rows().values()) - before == len(LATE) * len(templates)


def test_stream_drops_the_rows_no_variable_can_take_before_the_packer(spark, tmp_path):
    """The relevance filter (as in batch) is a WHERE below the packer, so those rows
    cost no packing, shuffle or state; cepsql.pushdown.relevanceFilter=false keeps them."""
    source = str(tmp_path / "in")
    os.makedirs(source)
    spark.readStream.schema(SCHEMA).json(source).withWatermark("ts", DELAY) \
        .createOrReplaceTempView("ticks_relevant")
    sql = CEP_RELEVANT.format(src="ticks_relevant")

    def filters() -> list[str]:
        plan = spark.cep.sql(sql)._jdf.queryExecution().analyzed().toString()
        return [line for line in plan.splitlines() if "Filter" in line and "price" in line]
    [where] = filters()
    assert re.search(r"price#\d+ < cast\(3 as double\)\) OR \(price#\d+ > cast\(5 ", where)
    spark.conf.set("cepsql.pushdown.relevanceFilter", "false")
    try:
        assert filters() == []
    finally:
        spark.conf.unset("cepsql.pushdown.relevanceFilter")


def test_stream_without_watermark_says_what_to_add(spark, tmp_path):
    source = str(tmp_path / "in")
    os.makedirs(source)
    spark.readStream.schema(SCHEMA).json(source).createOrReplaceTempView("ticks_nowm")
    with pytest.raises(CepAnalysisError, match="withWatermark"):
        spark.cep.sql(SQL_MODE.format(src="ticks_nowm"))


def test_many_state_partitions_warn(spark, tmp_path):
    """Spark's default 200 shuffle partitions become 200 state partitions, each committed
    every micro-batch: planning the clause says so; a count near the cores does not."""
    source = str(tmp_path / "in")
    os.makedirs(source)
    spark.readStream.schema(SCHEMA).json(source).withWatermark("ts", DELAY) \
        .createOrReplaceTempView("ticks_parts")
    before = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        spark.conf.set("spark.sql.shuffle.partitions", "200")
        with pytest.warns(StatePartitionsWarning, match="200 partitions"):
            spark.cep.sql(SQL_MODE.format(src="ticks_parts"))
        # the state partitions alone (Spark 4.1+): batch shuffles keep their 200
        spark.conf.set(STATE_PARTITIONS_CONF, "2")
        with warnings.catch_warnings():
            warnings.simplefilter("error", StatePartitionsWarning)
            spark.cep.sql(SQL_MODE.format(src="ticks_parts"))
        spark.conf.unset(STATE_PARTITIONS_CONF)
        spark.conf.set("spark.sql.shuffle.partitions", "2")
        with warnings.catch_warnings():
            warnings.simplefilter("error", StatePartitionsWarning)
            spark.cep.sql(SQL_MODE.format(src="ticks_parts"))
    finally:
        spark.conf.unset(STATE_PARTITIONS_CONF)
        spark.conf.set("spark.sql.shuffle.partitions", before)


def test_stream_demo_prints_matches_per_batch(spark, one_shuffle_partition):
    from cepsql.backends.streaming.demo import run_stream_demo
    lines: list[str] = []
    assert run_stream_demo(spark, 3000, out=lines.append, n_files=2) == 0
    text = "\n".join(lines)
    assert "batch 0:" in text and "new matches" in text
    total = int(lines[-1].split()[0])
    assert total > 0 and "start_ts=" in text


def test_write_increments_splits_in_order(tmp_path):
    import pyarrow.parquet as pq

    from cepsql.datagen import generate_ticks
    from cepsql.backends.streaming.demo import write_increments
    table = generate_ticks(10)
    paths = write_increments(table, str(tmp_path), 3)
    parts = [pq.read_table(p) for p in paths]
    assert [p.num_rows for p in parts] == [4, 4, 2]
    assert parts[0].schema.field("ts").type.tz == "UTC"
    assert sum((p.column("price").to_pylist() for p in parts), []) == \
        table.column("price").to_pylist()


@pytest.mark.parametrize("clause, message", [
    ("PATTERN (a b+ $) DEFINE b AS b.price > a.price", r"\$ anchor"),
    ("STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, b)) DEFINE b AS b.price > a.price",
     "WITHIN INTERVAL"),
])
def test_stream_rejects_what_has_no_streaming_meaning(spark, tmp_path, clause, message):
    from cepsql.errors import CepUnsupportedError
    source = str(tmp_path / "in")
    os.makedirs(source)
    spark.readStream.schema(SCHEMA).json(source).withWatermark("ts", DELAY) \
        .createOrReplaceTempView("ticks_unsupported")
    sql = ("SELECT * FROM ticks_unsupported MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
           f"MEASURES count(*) AS n ONE ROW PER MATCH {clause})")
    with pytest.raises(CepUnsupportedError, match=message) as info:
        spark.cep.sql(sql)
    assert info.value.pos is not None


def test_pattern_view_over_a_stream_is_a_streaming_view(spark, tmp_path):
    source = str(tmp_path / "in")
    os.makedirs(source)
    spark.readStream.schema(SCHEMA).json(source).withWatermark("ts", DELAY) \
        .createOrReplaceTempView("ticks_for_view")
    spark.cep.sql("CREATE OR REPLACE TEMPORARY VIEW rises_stream AS "
                  + SQL_MODE.format(src="ticks_for_view"))
    df = spark.sql("SELECT sym, t0, n FROM rises_stream WHERE n > 1")
    assert df.isStreaming
    assert [f.name for f in df.schema.fields] == ["sym", "t0", "n"]
    assert any(v["name"] == "rises_stream" for v in spark.cep.views())


def test_spark_sql_watermark_clause_on_the_clause_input(spark, tmp_path, one_shuffle_partition):
    """Spark SQL's `relation WATERMARK col DELAY OF INTERVAL ...` gives the event time
    a SQL-only user can write instead of withWatermark."""
    source = str(tmp_path / "in")
    os.makedirs(source)
    spark.readStream.schema(SCHEMA).json(source).createOrReplaceTempView("ticks_sqlwm")
    _write(source, "part-0.json", FIRST)
    src = "ticks_sqlwm WATERMARK ts DELAY OF INTERVAL 2 SECONDS"
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "ck")
    _run_once(spark, [CEP_MODE.format(src=src)], [out], [checkpoint])
    _write(source, "part-1.json", [("z", 90, 0)])   # moves the watermark past every row
    _run_once(spark, [CEP_MODE.format(src=src)], [out], [checkpoint])
    got = sorted(spark.read.parquet(out).collect())
    assert got and got == _batch(spark, CEP_MODE, source, [])


def test_cli_demo_stream_matches_are_batch_matches(spark, one_shuffle_partition, capsys):
    """`cepsql demo --stream` (no workload involved) runs from the command line and emits
    matches; never more than the batch path finds on the same generated ticks (3000 ticks
    are 30 s of events: attempts in the last 30-second window stay open)."""
    import cepsql
    from cepsql.api.cli import main
    from cepsql.datagen import generate_ticks
    from cepsql.backends.streaming.demo import STREAM_QUERY
    assert main(["demo", "--stream", "--rows", "3000"]) == 0
    lines = capsys.readouterr().out.splitlines()
    streamed = int(lines[-1].split()[0])
    batch = cepsql.match_recognize(STREAM_QUERY, ticks_stream=generate_ticks(3000))
    assert "batch 0:" in "\n".join(lines)
    assert 0 < streamed <= len(batch)
