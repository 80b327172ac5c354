"""Streaming benchmark: a MATCH_RECOGNIZE query over a file stream (generated ticks, one
parquet file per micro-batch, local Spark) next to the batch path on the same rows.

Part 1, in-process (no Spark, --increments, default 200): the per-key streaming engine
(engine.py, the code the stateful operator runs) over the ticks in many increments,
each key's state stored as Spark stores it (processor.state_to_row), next to the batch
worker over the same rows:
* state bytes per key after each increment (rows as Arrow IPC + evaluator carry-over):
  flat when state follows the window;
* throughput streaming engine / batch worker (same process, same rows);
* decision lag in event time: watermark at emission minus the match's last row.
Part 2, Spark (--spark):

Reports
* throughput: input rows / wall time of the whole availableNow run (streaming) and of
  spark.cep.sql over the same files read as a table (batch, noop sink), and their ratio;
* latency: per micro-batch ``triggerExecution`` time -- a match whose last row the
  watermark has passed is emitted by the next batch, so a batch's duration bounds the
  time from the watermark passing a match's last row to the match reaching the sink;
* end-to-end latency per match: wall time from the start of the first micro-batch whose
  watermark is past the match's last row to the match reaching the sink (foreachBatch);
* state: the stateful operator's ``memoryUsedBytes`` / ``numRowsTotal`` after each batch
  (flat over the run when state is bounded by the window) and the bytes cepsql stores.
The streaming result is checked against the batch result (same rows, same matches).

    python benchmarks/bench_streaming.py --mode cep --rows 50000 --increments 200 \
        [--spark --files 10]
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
  MEASURES a.ts AS ta, b.ts AS t1, MATCH_NUMBER() AS mn
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
            row = df.select(F.sum(F.length("value.held") + F.length("value.pending")
                                  + F.coalesce(F.length("value.evaluator"), F.lit(0)))).first()
            sizes.append(int(row[0] or 0))
        except Exception as err:  # noqa: BLE001 - a figure, not a failure
            sizes.append(-1)
            print(f"state of batch {batch_id} not readable: {str(err).splitlines()[0]}")
    return sizes


def _end_to_end(ends, progress, arrived: dict[int, float]) -> list[float]:
    """Per match: wall seconds from the start of the first micro-batch whose watermark is
    past its last row (t1) to the end of the sink call that wrote it."""
    from datetime import datetime, timezone

    def wall(text: str) -> float:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()

    marks = sorted((wall(p["eventTime"]["watermark"]), wall(p["timestamp"]))
                   for p in progress if p.get("eventTime", {}).get("watermark"))
    out = []
    for t1, batch_id in ends:
        if t1 is None or batch_id not in arrived:
            continue
        last = t1.replace(tzinfo=timezone.utc).timestamp() if t1.tzinfo is None else t1.timestamp()
        passed = [start for mark, start in marks if mark > last]
        if passed:
            out.append(arrived[batch_id] - min(passed))
    return out


def engine_long_run(query: str, ticks, increments: int, delay_s: float = 5.0) -> dict:
    """Part 1: the streaming engine over ticks in increments (each key stored as Spark
    stores it) and the batch worker over the same rows, in this process."""
    from collections import Counter

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from cepsql.backends.streaming.engine import NO_TIMER, KeyState, new_engine
    from cepsql.backends.streaming.processor import state_from_row, state_to_row, stored_bytes
    from cepsql.dialect import find_match_recognize
    from cepsql.exprs.arrow_eval import evaluate_arrow
    from cepsql.backends.local.sql import sort_table
    from cepsql.runtime.executor import plan_query

    sql = query.format(src="t")
    plan = plan_query(find_match_recognize(sql)[0].spec, ticks.schema, sql)
    for name, expr in plan.prepare_columns:
        ticks = ticks.append_column(name, evaluate_arrow(expr, ticks))
    bound = plan.bind(ticks.schema)
    ts_us = ticks.column("ts").cast(pa.int64()).to_numpy()

    t0 = time.perf_counter()
    ordered = sort_table(ticks, list(plan.sort_keys)).combine_chunks()
    batch = pa.Table.from_batches(list(bound.worker(iter(ordered.to_batches()))),
                                  schema=bound.worker_schema)
    batch_s = time.perf_counter() - t0

    engine = new_engine(bound.worker, "ts", plan.sort_keys[1:])
    stored: dict[str, tuple] = {}
    timers: dict[str, int] = {}
    out, per_key, lags, watermarks = [], [], [], []
    last_row = dict(bound.final_projection)["t1"]   # the match's last row (event time)
    step = -(-ticks.num_rows // increments)
    symbols = ticks.column("symbol")
    t0 = time.perf_counter()
    for lo in range(0, ticks.num_rows, step):
        part = ticks.slice(lo, step)
        watermark = int(ts_us[min(lo + step, ticks.num_rows) - 1] // 1000 - delay_s * 1000)
        keys = pc.unique(symbols.slice(lo, step)).to_pylist()
        due = [k for k, t in timers.items() if t != NO_TIMER and t <= watermark]
        for key in sorted(set(keys) | set(due)):
            rows = part.filter(pc.equal(part.column("symbol"), key)) if key in keys else None
            state = state_from_row(stored[key]) if key in stored else KeyState()
            result = engine.advance(state, rows, watermark)
            stored[key] = state_to_row(state)
            timers[key] = result.timer_ms
            for b in result.output:
                out.append(b)
                ends = evaluate_arrow(last_row, pa.Table.from_batches([b])).cast(pa.int64())
                lags += [watermark / 1e3 - e / 1e6 for e in ends.to_pylist() if e is not None]
        sizes = [stored_bytes(v) for v in stored.values()]
        per_key.append((sum(sizes) / max(len(sizes), 1), max(sizes, default=0)))
        watermarks.append(watermark)
    stream_s = time.perf_counter() - t0
    streamed = pa.Table.from_batches(out, schema=bound.worker_schema)
    rows = Counter(tuple(r.values()) for r in streamed.to_pylist())
    want = Counter(tuple(r.values()) for r in batch.to_pylist())
    return dict(batch_s=batch_s, stream_s=stream_s, per_key=per_key, lags=lags,
                matches=streamed.num_rows, batch_matches=batch.num_rows,
                extra=sum((rows - want).values()), open_at_end=sum((want - rows).values()),
                keys=len(stored))


def report_engine(args, ticks) -> None:
    r = engine_long_run(QUERIES[args.mode], ticks, args.increments)
    n = ticks.num_rows
    print(f"part 1 (in-process engine), mode {args.mode}: {n:,} rows, {r['keys']} keys, "
          f"{args.increments} increments, watermark 5 s behind the newest row")
    print(f"batch worker     {r['batch_s']:7.2f} s {n / r['batch_s']:12,.0f} rows/s  "
          f"{r['batch_matches']} matches")
    print(f"streaming engine {r['stream_s']:7.2f} s {n / r['stream_s']:12,.0f} rows/s  "
          f"{r['matches']} matches  ratio {r['batch_s'] / r['stream_s']:.2f}")
    print(f"exactness: {r['extra']} streamed matches not in the batch result; "
          f"{r['open_at_end']} batch matches still undecided at the end")
    marks = sorted({0, 9, 24, 49, 99, 149, 199, len(r["per_key"]) - 1} &
                   set(range(len(r["per_key"]))))
    print("stored bytes per key (mean / max) after increment: " + ", ".join(
        f"{i + 1}: {r['per_key'][i][0]:,.0f} / {r['per_key'][i][1]:,}" for i in marks))
    lags = sorted(r["lags"])
    if lags:
        print(f"decision lag (watermark at emission - match's last row), event-time s: "
              f"median {statistics.median(lags):.2f}, p95 {lags[int(0.95 * (len(lags) - 1))]:.2f}"
              f", max {lags[-1]:.2f}")
    _plot_state(args, r["per_key"])


def _plot_state(args, per_key) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    os.makedirs(folder, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.plot([m for m, _ in per_key], label="mean per key")
    ax.plot([x for _, x in per_key], label="max per key")
    ax.set_xlabel("increment")
    ax.set_ylabel("stored bytes")
    ax.set_title(f"cepsql streaming state per key ({args.mode} mode)")
    ax.legend()
    fig.tight_layout()
    path = os.path.join(folder, f"streaming_state_{args.mode}.png")
    fig.savefig(path, dpi=110)
    print(f"plot: {os.path.relpath(path)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--increments", type=int, default=200)
    parser.add_argument("--spark", action="store_true", help="also run part 2 (Spark)")
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--mode", choices=sorted(QUERIES), default="cep")
    parser.add_argument("--partitions", type=int, default=2)
    args = parser.parse_args()

    from cepsql.datagen import generate_ticks
    ticks = generate_ticks(args.rows)
    report_engine(args, ticks)
    return spark_run(args, ticks) if args.spark else 0


def spark_run(args, ticks) -> int:
    import cepsql
    from cepsql.stream_demo import STREAM_SCHEMA, write_increments

    spark = cepsql.get_session(master="local[2]", conf={
        "spark.sql.shuffle.partitions": str(args.partitions),
        "spark.ui.showConsoleProgress": "false", "spark.sql.session.timeZone": "UTC"})
    spark.sparkContext.setLogLevel("ERROR")
    from pyspark.sql import functions as F
    query = QUERIES[args.mode]
    with tempfile.TemporaryDirectory(prefix="cepsql-bench-stream-") as folder:
        source = os.path.join(folder, "in")
        os.makedirs(source)
        write_increments(ticks, source, args.files)

        spark.read.schema(STREAM_SCHEMA).parquet(source).createOrReplaceTempView("ticks_batch")
        t0 = time.perf_counter()
        spark.cep.sql(query.format(src="ticks_batch")).write.format("noop").mode("overwrite").save()
        batch_s = time.perf_counter() - t0
        batch_rows = sorted(spark.cep.sql(query.format(src="ticks_batch")).collect())

        spark.readStream.schema(STREAM_SCHEMA).option("maxFilesPerTrigger", 1) \
            .parquet(source).withWatermark("ts", "5 seconds").createOrReplaceTempView("ticks_stream")
        out = os.path.join(folder, "out")
        arrived: dict[int, float] = {}

        def sink(frame, batch_id: int) -> None:
            frame.withColumn("__batch", F.lit(batch_id)).write.mode("append").parquet(out)
            arrived[batch_id] = time.time()   # the batch's matches are in the sink

        t0 = time.perf_counter()
        q = (spark.cep.sql(query.format(src="ticks_stream")).writeStream.foreachBatch(sink)
             .option("checkpointLocation", os.path.join(folder, "ck"))
             .trigger(availableNow=True).start())
        q.awaitTermination()
        stream_s = time.perf_counter() - t0
        progress = q.recentProgress
        written = spark.read.parquet(out)
        stream_rows = sorted(written.drop("__batch").collect())
        ends = [(r.t1, r["__batch"]) for r in written.select("t1", "__batch").collect()]
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
        print(f"micro-batch duration ms: median {statistics.median(latencies):.0f}"
              f", max {max(latencies)}")
    e2e = sorted(_end_to_end(ends, progress, arrived))
    if e2e:
        print(f"end-to-end latency s (watermark passes the match's last row -> match in the "
              f"sink), {len(e2e)} matches: median {statistics.median(e2e):.2f}, "
              f"p95 {e2e[int(0.95 * (len(e2e) - 1))]:.2f}, max {e2e[-1]:.2f}")
    print("RocksDB memoryUsedBytes per batch:", memory)
    print("cepsql state per batch (bytes of rows + evaluator carry-over over all keys):", held)
    print("state rows (keys) per batch:", state_rows)
    return 0 if not extra else 1


if __name__ == "__main__":
    raise SystemExit(main())
