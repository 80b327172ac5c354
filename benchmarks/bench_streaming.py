"""Streaming benchmark: a MATCH_RECOGNIZE query over a file stream (generated ticks, one
parquet file per micro-batch, local Spark) next to the batch path on the same rows.

Reports
* throughput: input rows / wall time of the whole availableNow run (streaming) and of
  spark.cep.sql over the same files read as a table (batch, noop sink), and their ratio;
* latency: per micro-batch ``triggerExecution`` time -- a match whose last row the
  watermark has passed is emitted by the next batch, so a batch's duration bounds the
  time from the watermark passing a match's last row to the match reaching the sink;
* state: the stateful operator's ``memoryUsedBytes`` / ``numRowsTotal`` after each batch
  (flat over the run when state is bounded by the window).
The streaming result is checked against the batch result (same rows, same matches).

    python benchmarks/bench_streaming.py --rows 200000 --files 20 [--mode sql|cep]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

QUERIES = {
    "sql": """SELECT * FROM {src} MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(strt.ts) AS t0, LAST(up.ts) AS t1, MATCH_NUMBER() AS mn
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (strt down{{2,}} up{{2,}}) WITHIN INTERVAL '30' SECOND
  DEFINE down AS down.price < PREV(down.price), up AS up.price > PREV(up.price))""",
    "cep": """SELECT * FROM {src} MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES a.ts AS ta, b.ts AS tb, MATCH_NUMBER() AS mn
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW STRATEGY SKIP_TILL_NEXT_MATCH
  PATTERN (SEQ(a, b)) WITHIN INTERVAL '2' SECOND
  DEFINE a AS a.volume > 1400, b AS b.volume > 1400 AND b.price > a.price)""",
}


def _state_sizes(spark, checkpoint: str, n_batches: int) -> list[int]:
    """Bytes of the rows kept in state after each batch, read back with Spark's state
    data source (the RocksDB memory figure also counts memtables of overwritten values)."""
    from pyspark.sql import functions as F
    sizes = []
    for batch_id in range(n_batches):
        try:
            df = (spark.read.format("statestore").option("stateVarName", "cep_key")
                  .option("batchId", batch_id).load(checkpoint))
            row = df.select(F.sum(F.length("value.held") + F.length("value.pending"))).first()
            sizes.append(int(row[0] or 0))
        except Exception as err:  # noqa: BLE001 - a figure, not a failure
            sizes.append(-1)
            print(f"state of batch {batch_id} not readable: {str(err).splitlines()[0]}")
    return sizes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--mode", choices=sorted(QUERIES), default="sql")
    parser.add_argument("--partitions", type=int, default=2)
    args = parser.parse_args()

    import cepsql
    from cepsql.datagen import generate_ticks
    from cepsql.stream_demo import STREAM_SCHEMA, write_increments

    spark = cepsql.get_session(master="local[2]", conf={
        "spark.sql.shuffle.partitions": str(args.partitions),
        "spark.ui.showConsoleProgress": "false", "spark.sql.session.timeZone": "UTC"})
    spark.sparkContext.setLogLevel("ERROR")
    query = QUERIES[args.mode]
    with tempfile.TemporaryDirectory(prefix="cepsql-bench-stream-") as folder:
        source = os.path.join(folder, "in")
        os.makedirs(source)
        write_increments(generate_ticks(args.rows), source, args.files)

        spark.read.schema(STREAM_SCHEMA).parquet(source).createOrReplaceTempView("ticks_batch")
        t0 = time.perf_counter()
        spark.cep.sql(query.format(src="ticks_batch")).write.format("noop").mode("overwrite").save()
        batch_s = time.perf_counter() - t0
        batch_rows = sorted(spark.cep.sql(query.format(src="ticks_batch")).collect())

        spark.readStream.schema(STREAM_SCHEMA).option("maxFilesPerTrigger", 1) \
            .parquet(source).withWatermark("ts", "5 seconds").createOrReplaceTempView("ticks_stream")
        out = os.path.join(folder, "out")
        t0 = time.perf_counter()
        q = (spark.cep.sql(query.format(src="ticks_stream")).writeStream.format("parquet")
             .option("path", out).option("checkpointLocation", os.path.join(folder, "ck"))
             .trigger(availableNow=True).start())
        q.awaitTermination()
        stream_s = time.perf_counter() - t0
        progress = q.recentProgress
        stream_rows = sorted(spark.read.parquet(out).collect())
        held = _state_sizes(spark, os.path.join(folder, "ck"), len(progress))

    # the stream ends with the last windows still open: compare the decided prefix
    decided = set(stream_rows)
    missing = [r for r in batch_rows if r not in decided]
    extra = [r for r in stream_rows if r not in set(batch_rows)]
    latencies = [p["durationMs"].get("triggerExecution", 0) for p in progress]
    memory = [p["stateOperators"][0].get("memoryUsedBytes", 0) for p in progress
              if p.get("stateOperators")]
    state_rows = [p["stateOperators"][0].get("numRowsTotal", 0) for p in progress
                  if p.get("stateOperators")]
    print(f"mode {args.mode}: {args.rows:,} rows in {args.files} files, local[2], "
          f"{args.partitions} shuffle partitions")
    print(f"batch     {batch_s:8.2f} s  {args.rows / batch_s:10,.0f} rows/s  "
          f"{len(batch_rows)} matches")
    print(f"streaming {stream_s:8.2f} s  {args.rows / stream_s:10,.0f} rows/s  "
          f"{len(stream_rows)} matches ({len(progress)} micro-batches)  "
          f"ratio {batch_s / stream_s:.2f}")
    print(f"exactness: {len(extra)} streamed matches not in the batch result; "
          f"{len(missing)} batch matches still undecided at the end of the stream")
    if latencies:
        print(f"batch duration (latency bound) ms: median {statistics.median(latencies):.0f}"
              f", max {max(latencies)}")
    print("RocksDB memoryUsedBytes per batch:", memory)
    print("cepsql state per batch (bytes of held + pending Arrow IPC over all keys):", held)
    print("state rows (keys) per batch:", state_rows)
    return 0 if not extra else 1


if __name__ == "__main__":
    raise SystemExit(main())
