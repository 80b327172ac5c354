"""``cepsql demo --stream``: generated ticks arrive as files, one file per micro-batch,
and the matches of a MATCH_RECOGNIZE query over the stream are printed as they reach
the sink (see docs/streaming.md)."""
from __future__ import annotations

import os
import tempfile
import time
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from cepsql.datagen import generate_ticks

STREAM_SCHEMA = "symbol string, ts timestamp, price double, volume bigint"
STREAM_QUERY = """
SELECT * FROM ticks_stream MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(strt.ts) AS start_ts, LAST(down.price) AS bottom_price,
           LAST(up.ts) AS end_ts, LAST(up.price) AS end_price, MATCH_NUMBER() AS match_num
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (strt down{2,} up{2,}) WITHIN INTERVAL '30' SECOND
  DEFINE down AS down.price < PREV(down.price), up AS up.price > PREV(up.price))"""


def write_increments(table: pa.Table, folder: str, n_files: int) -> list[str]:
    """table (in ts order) as n_files parquet files of consecutive rows, ts in UTC."""
    ts = table.column("ts").cast(pa.timestamp("us", "UTC"))
    table = table.set_column(table.schema.get_field_index("ts"), "ts", ts)
    step = max(-(-table.num_rows // n_files), 1)
    paths = []
    for i, lo in enumerate(range(0, table.num_rows, step)):
        path = os.path.join(folder, f"ticks-{i:04d}.parquet")
        pq.write_table(table.slice(lo, step), path)
        paths.append(path)
    return paths


def run_stream_demo(spark: Any, n_rows: int, out: Callable[[str], None] = print,
                    n_files: int = 5) -> int:
    """Stream n_rows generated ticks through STREAM_QUERY; print each batch's matches."""

    with tempfile.TemporaryDirectory(prefix="cepsql-stream-") as folder:
        source = os.path.join(folder, "in")
        os.makedirs(source)
        write_increments(generate_ticks(n_rows), source, n_files)
        spark.readStream.schema(STREAM_SCHEMA).option("maxFilesPerTrigger", 1) \
            .parquet(source).withWatermark("ts", "5 seconds") \
            .createOrReplaceTempView("ticks_stream")
        out(f"Streaming {n_rows:,} generated ticks in {n_files} files (one per micro-batch,"
            " watermark 5 seconds behind the newest tick) through:")
        out(STREAM_QUERY.strip())
        started = time.perf_counter()
        total = [0]

        def show(batch, batch_id: int) -> None:
            rows = batch.orderBy("end_ts").collect()
            total[0] += len(rows)
            out(f"\nbatch {batch_id}: {len(rows)} new matches "
                f"({time.perf_counter() - started:.1f} s since start)")
            for row in rows[:3]:
                out("  " + ", ".join(f"{k}={v}" for k, v in row.asDict().items()))
            if len(rows) > 3:
                out(f"  ... {len(rows) - 3} more")

        query = (spark.cep.sql(STREAM_QUERY).writeStream.foreachBatch(show)
                 .option("checkpointLocation", os.path.join(folder, "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        out(f"\n{total[0]} matches in {time.perf_counter() - started:.1f} s; late rows "
            f"dropped: {sum(spark.cep.late_rows().values())}")
    return 0
