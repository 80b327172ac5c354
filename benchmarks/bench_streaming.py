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
  watermark is past the match's last row to the match reaching the sink (foreachBatch
  collecting each micro-batch's matches to the driver: the cheapest sink that keeps them);
* with --profile: per micro-batch Spark's durationMs breakdown (planning, addBatch,
  commits) and the stateful operator's Python phases summed over its calls (state get/put,
  decode, evaluate, encode, timers, output; processor.PROFILE_ENV).
* state: the stateful operator's ``memoryUsedBytes`` / ``numRowsTotal`` after each batch
  (flat over the run when state is bounded by the window) and the bytes cepsql stores.
The streaming result is checked against the batch result (same rows, same matches).
The batch path runs twice: cold (the JVM's first query: it pays the JVM's and Python
workers' start-up) and warm. Streaming is reported for the whole run and for micro-batches
2.. (the first one starts the stateful operator's workers and state store and, with the
watermark still at 0, releases no row).

Part 2b (--sweep 50000,100000,...): sustained throughput against micro-batch size. The
same rows (--rows) are written, per size, as a small first file (the query's first
micro-batch: its start-up) and files of that size, read with maxFilesPerTrigger 1, one
availableNow query per size into the noop sink. A size's sustained rate is its
rows per trigger / the median duration of its data micro-batches (the highest input rate
the query keeps up with at that trigger size), next to the warm batch path on the same
rows; plot results/streaming_throughput.png.

Part 3 (--minutes M): a file stream written in increments (--rate rows/s, a file every
--interval s) for M minutes with the default trigger; state bytes over time (statestore
reader), end-to-end latency per match, exactness against the batch path on the rows
written; plot results/streaming_long_run.png.

    python benchmarks/bench_streaming.py --mode cep --rows 50000 --increments 200 \
        [--spark --files 10]
    python benchmarks/bench_streaming.py --minutes 10 --rate 400
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from cepsql.runtime.workers import bind_worker

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
    sizes = []
    for batch_id in range(n_batches):
        try:
            sizes.append(_state_bytes(spark, checkpoint, batch_id))
        except Exception as err:  # noqa: BLE001 - a figure, not a failure
            sizes.append(-1)
            print(f"state of batch {batch_id} not readable: {str(err).splitlines()[0]}")
    return sizes


def _cpu_seconds() -> float:
    """CPU seconds used so far by this process's tree (the JVM, Python workers; exited
    children once reaped): unlike wall time, hardly inflated by other jobs' load. Read
    from /proc (Linux; psutil is not a dependency)."""
    tick = os.sysconf("SC_CLK_TCK")
    stats = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # after the command: state, ppid, ... utime (14th field), stime, cutime, cstime
        stats[int(pid)] = (int(fields[1]), sum(int(v) for v in fields[11:15]))
    tree, total, frontier = {os.getpid()}, 0, [os.getpid()]
    while frontier:
        parent = frontier.pop()
        total += stats.get(parent, (0, 0))[1]
        for pid, (ppid, _) in stats.items():
            if ppid == parent and pid not in tree:
                tree.add(pid)
                frontier.append(pid)
    return total / tick


def _state_bytes(spark, checkpoint: str, batch_id: int | None = None) -> int:
    """Bytes of every bucket's state value after batch_id (the last committed batch when
    None): each key's rows (Arrow IPC), evaluator carry-over and integers."""
    from pyspark.sql import functions as F
    reader = spark.read.format("statestore").option("stateVarName", "cep_bucket")
    if batch_id is not None:
        reader = reader.option("batchId", batch_id)
    row = reader.load(checkpoint).select(F.sum(F.length("value.keys"))).first()
    return int(row[0] or 0)


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

    import pyarrow as pa
    import pyarrow.compute as pc

    from cepsql.backends.streaming.engine import NO_TIMER, KeyState, new_engine
    from cepsql.backends.streaming.processor import state_from_row, state_to_row, stored_bytes
    from cepsql.parse import find_match_recognize
    from cepsql.exprs.arrow_eval import evaluate_arrow
    from cepsql.runtime.ordering import sort_table
    from cepsql.compile.clause import plan_query

    sql = query.format(src="t")
    plan = plan_query(find_match_recognize(sql)[0].spec, ticks.schema, sql)
    for name, expr in plan.prepare_columns:
        ticks = ticks.append_column(name, evaluate_arrow(expr, ticks))
    bound = bind_worker(plan, ticks.schema)
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
    parser.add_argument("--increments", type=int, default=200,
                        help="part 1 increments (0: skip part 1)")
    parser.add_argument("--spark", action="store_true", help="also run part 2 (Spark)")
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--mode", choices=sorted(QUERIES), default="cep")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--profile", action="store_true",
                        help="part 2: Spark's durationMs and the worker's phase timers")
    parser.add_argument("--sweep", default="",
                        help="part 2b: rows per micro-batch, comma-separated")
    parser.add_argument("--floor", action="store_true",
                        help="part 2b: also Spark's floor (stateful queries doing no work)")
    parser.add_argument("--variant", action="append", default=[],
                        help="part 2b: NAME:key=value,... settings of one streaming run "
                             "per size (repeatable; runs in the given order)")
    parser.add_argument("--latency", action="store_true",
                        help="part 2b: a foreachBatch sink collecting the matches, and "
                             "their end-to-end latency (else the noop sink)")
    parser.add_argument("--minutes", type=float, default=0.0,
                        help="part 3: a file stream written in increments for this long")
    parser.add_argument("--rate", type=int, default=400, help="part 3: input rows/s")
    parser.add_argument("--interval", type=float, default=2.0,
                        help="part 3: seconds between files")
    args = parser.parse_args()

    if args.minutes:
        return long_run(args)
    from cepsql.datagen import generate_ticks
    ticks = generate_ticks(args.rows)
    if args.increments:
        report_engine(args, ticks)
    if args.sweep:
        return sweep_run(args, ticks)
    return spark_run(args, ticks) if args.spark else 0


def _session(args):
    import cepsql
    spark = cepsql.get_session(master="local[2]", conf={
        "spark.sql.shuffle.partitions": str(args.partitions),
        "spark.sql.streaming.numRecentProgressUpdates": "5000",
        "spark.ui.showConsoleProgress": "false", "spark.sql.session.timeZone": "UTC"})
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def spark_run(args, ticks) -> int:
    from cepsql.backends.streaming.demo import STREAM_SCHEMA, write_increments

    from cepsql.backends.streaming.processor import PROFILE_ENV

    profile = tempfile.mkdtemp(prefix="cepsql-bench-profile-") if args.profile else None
    if profile:  # before the session: Spark's Python workers inherit it
        os.environ[PROFILE_ENV] = profile
    spark = _session(args)
    query = QUERIES[args.mode]
    with tempfile.TemporaryDirectory(prefix="cepsql-bench-stream-") as folder:
        source = os.path.join(folder, "in")
        os.makedirs(source)
        write_increments(ticks, source, args.files)

        spark.read.schema(STREAM_SCHEMA).parquet(source).createOrReplaceTempView("ticks_batch")
        batch_s, batch_cpu = [], []
        for _ in range(2):  # first: a cold JVM and Python workers; second: warm
            t0, c0 = time.perf_counter(), _cpu_seconds()
            spark.cep.sql(query.format(src="ticks_batch")).write.format("noop") \
                .mode("overwrite").save()
            batch_s.append(time.perf_counter() - t0)
            batch_cpu.append(_cpu_seconds() - c0)
        batch_rows = sorted(spark.cep.sql(query.format(src="ticks_batch")).collect())

        spark.readStream.schema(STREAM_SCHEMA).option("maxFilesPerTrigger", 1) \
            .parquet(source).withWatermark("ts", "5 seconds").createOrReplaceTempView("ticks_stream")
        arrived: dict[int, float] = {}
        collected: list[tuple[int, list]] = []
        cpu_at: dict[int, float] = {}  # CPU seconds when each micro-batch reached the sink

        def sink(frame, batch_id: int) -> None:
            # the cheapest sink that keeps the rows: one job bringing each micro-batch's
            # (few) matches to the driver, no files written
            collected.append((batch_id, frame.collect()))
            arrived[batch_id] = time.time()   # the batch's matches are in the sink
            cpu_at[batch_id] = _cpu_seconds()

        t0, c0 = time.perf_counter(), _cpu_seconds()
        q = (spark.cep.sql(query.format(src="ticks_stream")).writeStream.foreachBatch(sink)
             .option("checkpointLocation", os.path.join(folder, "ck"))
             .trigger(availableNow=True).start())
        q.awaitTermination()
        stream_s = time.perf_counter() - t0
        stream_cpu = _cpu_seconds() - c0
        progress = q.recentProgress
        stream_rows = sorted(r for _, rows in collected for r in rows)
        ends = [(r.t1, batch_id) for batch_id, rows in collected for r in rows]
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
    n = args.rows
    cold, warm = batch_s
    first_s = latencies[0] / 1000 if latencies else 0.0
    steady_s = sum(latencies[1:]) / 1000
    steady_rows = n - (progress[0]["numInputRows"] if progress else 0)
    print(f"mode {args.mode}: {n:,} rows in {args.files} files, local[2], "
          f"{args.partitions} shuffle partitions, load {os.getloadavg()[0]:.1f}")
    print(f"batch, cold (first query of the JVM) {cold:8.2f} s  {n / cold:10,.0f} rows/s  "
          f"{len(batch_rows)} matches")
    print(f"batch, warm (same query again)       {warm:8.2f} s  {n / warm:10,.0f} rows/s")
    print(f"streaming, whole run                 {stream_s:8.2f} s  {n / stream_s:10,.0f} rows/s  "
          f"{len(stream_rows)} matches ({len(progress)} micro-batches)")
    if steady_s:
        print(f"streaming, micro-batches 2..{len(progress)}          {steady_s:8.2f} s  "
              f"{steady_rows / steady_s:10,.0f} rows/s  (first micro-batch {first_s:.2f} s: "
              "start-up, releases no row)")
        print(f"ratios: whole run / cold batch {cold / stream_s:.2f}; steady / warm batch "
              f"{(steady_rows / steady_s) / (n / warm):.2f}; steady / cold batch "
              f"{(steady_rows / steady_s) / (n / cold):.2f}")
    print(f"CPU seconds (JVM + Python workers): batch cold {batch_cpu[0]:.1f}, warm "
          f"{batch_cpu[1]:.1f}; streaming whole run {stream_cpu:.1f} (ratio warm batch / "
          f"streaming {batch_cpu[1] / max(stream_cpu, 1e-9):.2f})")
    if len(cpu_at) > 1:  # from the first micro-batch's sink call to the last one's
        steady_cpu = cpu_at[max(cpu_at)] - cpu_at[min(cpu_at)]
        print(f"CPU seconds of micro-batches 2..{len(progress)}: {steady_cpu:.1f} "
              f"({steady_rows / max(steady_cpu, 1e-9):,.0f} rows per CPU second; warm batch "
              f"{n / max(batch_cpu[1], 1e-9):,.0f}; ratio streaming steady / warm batch "
              f"{(steady_rows / max(steady_cpu, 1e-9)) / (n / max(batch_cpu[1], 1e-9)):.2f}, "
              "less sensitive to other jobs' load than wall time)")
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
    print("cepsql state per batch (bytes of every bucket's keys: rows + evaluator "
          "carry-over + integers):", held)
    print("state rows (key buckets) per batch:", state_rows)
    if profile:
        _report_profile(progress, profile)
        for batch_id, rows in sorted(_stage_table(spark).items()):
            print(f"batch {batch_id} stages (wall ms, executor ms, tasks): " + "; ".join(
                f"{name} {wall:.0f}, {run}, {tasks}" for name, wall, run, tasks in rows))
    return 0 if not extra else 1


def _report_profile(progress, folder: str) -> None:
    """Per micro-batch: Spark's durationMs, the stateful operator's update and commit
    times, and the Python phases of the operator's calls (summed over its workers)."""
    import glob
    import json
    from collections import Counter, defaultdict
    from datetime import datetime
    phases: dict[int, Counter] = defaultdict(Counter)
    for path in glob.glob(os.path.join(folder, "*.jsonl")):
        with open(path, encoding="utf-8") as f:
            for record in map(json.loads, f):
                phases[record.pop("watermark")].update(
                    {k: v for k, v in record.items() if k != "wall"} | {"calls": 1})
    for p in progress:
        op = (p.get("stateOperators") or [{}])[0]
        d = p["durationMs"]
        print(f"batch {p['batchId']}: {p['numInputRows']:,} rows; ms: " + ", ".join(
            f"{k} {d.get(k, 0)}" for k in ("triggerExecution", "queryPlanning", "addBatch",
                                            "walCommit", "commitOffsets"))
              + f"; state operator updates {op.get('allUpdatesTimeMs')}, commit "
              f"{op.get('commitTimeMs')}")
        wm = p.get("eventTime", {}).get("watermark")
        if wm is None:
            continue
        ms = int(datetime.fromisoformat(wm.replace("Z", "+00:00")).timestamp() * 1000)
        if ms in phases:
            c = phases[ms]
            print("  python phases s (all calls): " + ", ".join(
                f"{k} {v:.3f}" for k, v in c.items()
                if k not in ("keys", "out_rows", "calls", "state_bytes"))
                  + f"; {c['calls']} calls, state {c['state_bytes']:,} B, {c['out_rows']} rows out")


def _stage_table(spark) -> dict[int, list[tuple[str, float, float, int]]]:
    """Per micro-batch (batch id): its stages from Spark's status REST API as (first
    line of the stage's name, wall ms from submission to completion, executor run ms
    summed over tasks, tasks); {} when the UI is off."""
    import json
    import re
    import urllib.request
    from datetime import datetime
    base = spark.sparkContext.uiWebUrl
    if not base:
        return {}
    app = f"{base}/api/v1/applications/{spark.sparkContext.applicationId}"

    def get(path: str):
        with urllib.request.urlopen(f"{app}/{path}", timeout=30) as r:
            return json.load(r)

    def ms(text: str) -> float:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%Z").timestamp() * 1000

    stages = {s["stageId"]: s for s in get("stages?status=complete")}
    out: dict[int, list] = {}
    for job in get("jobs"):
        m = re.search(r"batch = (\d+)", job.get("description") or "")
        if not m:
            continue
        for sid in sorted(job["stageIds"]):
            st = stages.get(sid)
            if st is None or "submissionTime" not in st:
                continue
            out.setdefault(int(m.group(1)), []).append(
                (st["name"].split("\n")[0][:40],
                 ms(st["completionTime"]) - ms(st["submissionTime"]),
                 st["executorRunTime"], st["numTasks"]))
    return out


WARM_ROWS = 2_000


def sweep_run(args, ticks) -> int:
    """Part 2b: sustained rows/s per micro-batch size next to the warm batch path."""
    from cepsql.backends.streaming.demo import STREAM_SCHEMA, write_increments

    sizes = sorted(int(x) for x in args.sweep.split(","))
    n = ticks.num_rows
    spark = _session(args)
    query = QUERIES[args.mode]
    results, floors = [], []
    with tempfile.TemporaryDirectory(prefix="cepsql-bench-sweep-") as folder:
        source = os.path.join(folder, "all")
        os.makedirs(source)
        write_increments(ticks, source, 4)
        spark.read.schema(STREAM_SCHEMA).parquet(source).createOrReplaceTempView("ticks_batch")
        for _ in range(2):  # cold, then warm (the figure)
            t0, c0 = time.perf_counter(), _cpu_seconds()
            spark.cep.sql(query.format(src="ticks_batch")).write.format("noop") \
                .mode("overwrite").save()
            warm_s, warm_cpu = time.perf_counter() - t0, _cpu_seconds() - c0
        variants = [_variant(v) for v in args.variant] or [("cepsql", {})]
        for size in sizes:
            source = _sweep_source(ticks, folder, size)
            for i, (vname, settings) in enumerate(variants):
                c0 = _cpu_seconds()
                try:
                    with _conf(spark, settings):
                        progress, wall, e2e = _stream_once(
                            spark, query, source, os.path.join(folder, f"ck-{i}-{size}"),
                            args.latency)
                except Exception as err:  # noqa: BLE001 - a worker not connecting back (load)
                    print(f"run {vname} failed: {str(err).splitlines()[0][:200]}", flush=True)
                    continue
                cpu = _cpu_seconds() - c0
                results.append(dict(_steady(progress), size=size, wall=wall, cpu=cpu,
                                    name=vname, e2e=e2e))
                r = results[-1]
                print(f"  {vname}: {r['per_batch']:.2f} s per micro-batch, CPU {cpu:.1f} s, "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
            if args.floor:
                for name, frame in _floor_frames(spark, source).items():
                    c0 = _cpu_seconds()
                    progress, wall = _run_frame(frame, os.path.join(folder, f"ck-{name}-{size}"))
                    floors.append(dict(_steady(progress), size=size, name=name, wall=wall,
                                       cpu=_cpu_seconds() - c0))
    batch_rate = n / warm_s
    print(f"sweep, mode {args.mode}: {n:,} rows, local[2], {args.partitions} shuffle "
          f"partitions, {'foreachBatch' if args.latency else 'noop'} sink (floors: noop), "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"batch, warm: {warm_s:.2f} s, {batch_rate:,.0f} rows/s, CPU {warm_cpu:.1f} s")
    print("micro-batches: those after the query's first (start-up, "
          f"{WARM_ROWS:,} rows) that read rows")
    print("rows/trigger  micro-batches  median s  sustained rows/s  / warm batch  "
          "whole run s  CPU s  (median ms: planning, addBatch, state commit, wal+offsets)")
    for r in results:
        d = r["parts"]
        print(f"{r['size']:>12,}  {r['batches']:>13}  {r['per_batch']:8.2f}  "
              f"{r['rate']:16,.0f}  {r['rate'] / batch_rate:11.2f}  {r['wall']:11.1f}  "
              f"{r['cpu']:5.1f}  first {r['first']:.1f} s  ({d['queryPlanning']:.0f}, {d['addBatch']:.0f}, "
              f"{r['commit']:.0f}, {d['walCommit'] + d['commitOffsets']:.0f})  {r['name']}")
        if r["e2e"]:
            e2e = r["e2e"]
            print(f"{'':>14}end-to-end latency s, {len(e2e)} matches: median "
                  f"{statistics.median(e2e):.2f}, p95 {e2e[int(0.95 * (len(e2e) - 1))]:.2f}; "
                  "ms: " + ", ".join(f"{k} {v:.0f}" for k, v in d.items()))
    for r in floors:
        d = r["parts"]
        print(f"{r['size']:>12,}  {r['batches']:>13}  {r['per_batch']:8.2f}  "
              f"{r['rate']:16,.0f}  {r['rate'] / batch_rate:11.2f}  {r['wall']:11.1f}  "
              f"{r['cpu']:5.1f}  floor: {r['name']} ({d['queryPlanning']:.0f}, "
              f"{d['addBatch']:.0f}, {r['commit']:.0f}, "
              f"{d['walCommit'] + d['commitOffsets']:.0f})")
    crossing = next((r["size"] for r in results if r["rate"] >= 0.5 * batch_rate), None)
    print("ratio >= 0.5 from " + (f"{crossing:,} rows per micro-batch" if crossing
                                  else "no size in the sweep"))
    if not args.variant:  # one curve per partition count: one run per size
        _save_sweep(args, results, batch_rate)
        _plot_sweep(args)
    return 0


def _variant(text: str) -> tuple[str, dict[str, str]]:
    """--variant NAME:key=value,key=value -> (NAME, {key: value})."""
    name, _, rest = text.partition(":")
    return name, dict(kv.split("=", 1) for kv in rest.split(",") if kv)


class _conf:
    """Session settings for one run, restored after it (unset ones unset again)."""

    def __init__(self, spark, settings: dict[str, str]):
        self.spark, self.settings, self.old = spark, settings, {}

    def __enter__(self):
        for key, value in self.settings.items():
            self.old[key] = self.spark.conf.get(key, None)
            self.spark.conf.set(key, value)

    def __exit__(self, *exc):
        for key, value in self.old.items():
            if value is None:
                self.spark.conf.unset(key)
            else:
                self.spark.conf.set(key, value)


def _steady(progress) -> dict:
    """Medians over the data micro-batches after the first (start-up): rows/s, seconds
    per micro-batch, Spark's phases (ms) and the state commit (ms)."""
    steady = [p for p in progress[1:] if p["numInputRows"]]
    per_batch = statistics.median(p["durationMs"]["triggerExecution"] / 1000 for p in steady)
    rows = statistics.median(p["numInputRows"] for p in steady)
    parts = {k: statistics.median(p["durationMs"].get(k, 0) for p in steady)
             for k in ("queryPlanning", "addBatch", "walCommit", "commitOffsets",
                       "latestOffset", "getBatch")}
    commit = statistics.median((p.get("stateOperators") or [{}])[0].get("commitTimeMs", 0)
                               for p in steady)
    return dict(rate=rows / per_batch, per_batch=per_batch, batches=len(steady), parts=parts,
                commit=commit, first=progress[0]["durationMs"]["triggerExecution"] / 1000)


def _results_folder() -> str:
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    os.makedirs(folder, exist_ok=True)
    return folder


def _save_sweep(args, results, batch_rate: float) -> None:
    """results/streaming_throughput_p<partitions>.json: one curve of the plot."""
    import json
    path = os.path.join(_results_folder(), f"streaming_throughput_p{args.partitions}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"mode": args.mode, "rows": args.rows, "partitions": args.partitions,
                   "load": round(os.getloadavg()[0], 1), "batch_rate": batch_rate,
                   "sizes": [r["size"] for r in results],
                   "rates": [r["rate"] for r in results]}, f, indent=1)


def _sweep_source(ticks, folder: str, size: int) -> str:
    """A folder whose oldest file holds the first WARM_ROWS ticks (the query's first
    micro-batch: start-up) and the others the rest, size rows each."""
    from cepsql.backends.streaming.demo import write_increments
    source = os.path.join(folder, f"in-{size}")
    os.makedirs(source)
    first = os.path.join(source, "first")
    os.makedirs(first)
    write_increments(ticks.slice(0, WARM_ROWS), first, 1)
    os.rename(os.path.join(first, "ticks-0000.parquet"), os.path.join(source, "a.parquet"))
    os.rmdir(first)
    old = time.time() - 3600
    os.utime(os.path.join(source, "a.parquet"), (old, old))  # read first
    rest = ticks.slice(WARM_ROWS)
    write_increments(rest, source, -(-rest.num_rows // size))
    return source


def _stream_once(spark, query: str, source: str, checkpoint: str, latency: bool = False):
    """One availableNow run of query over source (a file per trigger) into the noop
    sink, or with ``latency`` a foreachBatch sink collecting each micro-batch's matches'
    last event time: (progress, wall seconds, end-to-end latencies in s)."""
    from cepsql.backends.streaming.demo import STREAM_SCHEMA
    spark.readStream.schema(STREAM_SCHEMA).option("maxFilesPerTrigger", 1) \
        .parquet(source).withWatermark("ts", "5 seconds").createOrReplaceTempView("ticks_sw")
    ends, arrived = [], {}

    def sink(frame, batch_id: int) -> None:
        ends.extend((row[0], batch_id) for row in frame.select("t1").collect())
        arrived[batch_id] = time.time()

    writer = spark.cep.sql(query.format(src="ticks_sw")).writeStream
    writer = writer.foreachBatch(sink) if latency else writer.format("noop")
    t0 = time.perf_counter()
    q = writer.option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    q.awaitTermination()
    wall = time.perf_counter() - t0
    return q.recentProgress, wall, sorted(_end_to_end(ends, q.recentProgress, arrived))


def _floor_frames(spark, source: str) -> dict:
    """Spark's floor at the same trigger size: stateful queries over the same file
    stream that do (almost) no work of their own. ``jvm``: a windowed count (RocksDB
    state, no Python); ``python``: cepsql's shape with no evaluation -- a mapInArrow
    stage that emits one small row per bucket and batch, the shuffle, transformWithState
    (Row variant) updating one value per bucket; ``python+hop``: that and a mapInArrow
    after it (what cepsql's unpacker stage costs beyond its work)."""
    import pyarrow as pa
    from pyspark.sql import Row, functions as F
    from pyspark.sql.streaming import StatefulProcessor
    from pyspark.sql.types import LongType, StructField, StructType

    from cepsql.backends.streaming.demo import STREAM_SCHEMA

    class Touch(StatefulProcessor):
        def init(self, handle):
            self.value = handle.getValueState("n", StructType([StructField("n", LongType())]))

        def handleInputRows(self, key, rows, timerValues):
            n = sum(r[1] for r in rows)
            old = self.value.get() if self.value.exists() else None
            self.value.update(((old[0] if old else 0) + n,))
            return iter([Row(n=n)])

        def close(self):
            pass

    def pack(batches):
        for b in batches:
            yield pa.RecordBatch.from_pydict({"b": pa.array(range(8), pa.int32()),
                                              "n": pa.array([b.num_rows] * 8, pa.int64())})

    def stream():
        return spark.readStream.schema(STREAM_SCHEMA).option("maxFilesPerTrigger", 1) \
            .parquet(source).withWatermark("ts", "5 seconds")

    jvm = stream().groupBy(F.window("ts", "2 seconds"), "symbol").count()
    python = stream().mapInArrow(pack, "b int, n bigint").groupBy("b").transformWithState(
        Touch(), StructType([StructField("n", LongType())]), "Append", "None")
    # the same and one more Python hop after the stateful operator (cepsql's unpacker)
    hop = python.mapInArrow(lambda batches: batches, "n bigint")
    return {"jvm": jvm, "python": python, "python+hop": hop}


def _run_frame(frame, checkpoint: str):
    """(progress, wall seconds) of one availableNow run of frame into the noop sink."""
    t0 = time.perf_counter()
    q = (frame.writeStream.format("noop").outputMode("append")
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    q.awaitTermination()
    return q.recentProgress, time.perf_counter() - t0


def _plot_sweep(args) -> None:
    """Every saved sweep (one curve per state-partition count) and its warm batch rate."""
    import glob
    import json
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    folder = _results_folder()
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for i, path in enumerate(sorted(glob.glob(os.path.join(folder,
                                                           "streaming_throughput_p*.json")))):
        with open(path, encoding="utf-8") as f:
            run = json.load(f)
        line, = ax.plot(run["sizes"], run["rates"], marker="o",
                        label=f"streaming, {run['partitions']} state partition(s), "
                              f"load {run['load']}")
        ax.axhline(run["batch_rate"], color=line.get_color(), alpha=0.5,
                   label="warm batch path (same run)" if i == 0 else None)
        ax.axhline(0.5 * run["batch_rate"], color=line.get_color(), alpha=0.5,
                   linestyle="--", label="50% of it" if i == 0 else None)
    ax.set_xscale("log")
    ax.set_xlabel("rows per micro-batch")
    ax.set_ylabel("sustained rows/s")
    ax.set_ylim(bottom=0)
    ax.set_title(f"streaming throughput vs micro-batch size ({args.mode} mode, "
                 f"{args.rows:,} rows, local[2])", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = os.path.join(folder, "streaming_throughput.png")
    fig.savefig(path, dpi=110)
    print(f"plot: {os.path.relpath(path)}")


def long_run(args) -> int:
    """Part 3: ticks arrive as a parquet file every --interval seconds (--rate rows/s) for
    --minutes (counted from the end of the first micro-batch, the start-up); the query runs
    with the default trigger (a micro-batch as soon as the last
    one ends) into a parquet sink. Every ~20 s: the state's bytes (statestore reader on
    the last committed batch), keys and RocksDB memory; per match: end-to-end latency.
    At the end the streamed matches are checked against the batch path on the written
    rows. Plot: results/streaming_long_run.png."""
    import threading

    import pyarrow.parquet as pq

    from cepsql.datagen import generate_ticks
    from cepsql.backends.streaming.demo import STREAM_SCHEMA

    spark = _session(args)
    from pyspark.sql import functions as F
    query = QUERIES[args.mode]
    seconds = args.minutes * 60
    per_file = max(int(args.rate * args.interval), 1)
    n_files = int(seconds / args.interval)
    ticks = generate_ticks(per_file * n_files)
    ts_index = ticks.schema.get_field_index("ts")
    ticks = ticks.set_column(ts_index, "ts", ticks.column("ts").cast(pa_timestamp_utc()))
    with tempfile.TemporaryDirectory(prefix="cepsql-bench-long-") as folder:
        source, out, ck = (os.path.join(folder, d) for d in ("in", "out", "ck"))
        os.makedirs(source)
        pq.write_table(ticks.slice(0, per_file), os.path.join(source, "t-00000.parquet"))
        spark.readStream.schema(STREAM_SCHEMA).parquet(source) \
            .withWatermark("ts", "5 seconds").createOrReplaceTempView("ticks_long")
        arrived: dict[int, float] = {}

        def sink(frame, batch_id: int) -> None:
            frame.withColumn("__batch", F.lit(batch_id)).write.mode("append").parquet(out)
            arrived[batch_id] = time.time()

        stop = threading.Event()

        def writer() -> None:
            t0 = time.time()
            for i in range(1, n_files):
                if stop.wait(max(t0 + i * args.interval - time.time(), 0)):
                    return
                path = os.path.join(source, f"t-{i:05d}.parquet")
                pq.write_table(ticks.slice(i * per_file, per_file), path + ".tmp")
                os.rename(path + ".tmp", path)  # the source never sees half a file

        q = (spark.cep.sql(query.format(src="ticks_long")).writeStream.foreachBatch(sink)
             .option("checkpointLocation", ck).start())
        t0 = time.time()
        while q.lastProgress is None and q.isActive:  # start-up: the first micro-batch
            time.sleep(1)
        print(f"first micro-batch (start-up) done after {time.time() - t0:.1f} s", flush=True)
        started = time.time()
        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        samples = []  # (seconds since start, state bytes, keys, RocksDB memory, batch id)
        while time.time() - started < seconds:
            time.sleep(20)
            p = q.lastProgress
            if not p or not p.get("stateOperators"):
                continue
            op = p["stateOperators"][0]
            try:
                size = _state_bytes(spark, ck)
            except Exception as err:  # noqa: BLE001 - a figure, not a failure
                print(f"state not readable: {str(err).splitlines()[0]}")
                size = -1
            samples.append((time.time() - started, size, op.get("numRowsTotal", 0),
                            op.get("memoryUsedBytes", 0), p["batchId"]))
            print(f"{samples[-1][0]:6.0f} s  batch {p['batchId']:4d}  state {size:9,} B  "
                  f"buckets {samples[-1][2]}  RocksDB memory {samples[-1][3]:,} B  "
                  f"input {p.get('processedRowsPerSecond', 0):8,.0f} rows/s processed", flush=True)
        stop.set()
        thread.join()
        q.processAllAvailable()  # every written row read; stop between micro-batches
        q.stop()
        progress = q.recentProgress
        written = spark.read.parquet(out)
        stream_rows = sorted(written.drop("__batch").collect())
        ends = [(r.t1, r["__batch"]) for r in written.select("t1", "__batch").collect()]
        fed = spark.read.schema(STREAM_SCHEMA).parquet(source)
        fed.createOrReplaceTempView("ticks_long_batch")
        n_fed = fed.count()
        batch_rows = set(spark.cep.sql(query.format(src="ticks_long_batch")).collect())

    extra = [r for r in stream_rows if r not in batch_rows]
    durations = [p["durationMs"].get("triggerExecution", 0) / 1000 for p in progress]
    inputs = sum(p["numInputRows"] for p in progress)
    e2e = _end_to_end(ends, progress, arrived)
    print(f"long run, mode {args.mode}: {args.minutes:g} min, {n_fed:,} rows written "
          f"({args.rate} rows/s in a file every {args.interval:g} s), {inputs:,} read, "
          f"{len(progress)} micro-batches (median {statistics.median(durations):.1f} s), "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"exactness: {len(stream_rows)} streamed matches, {len(extra)} not in the batch "
          f"result ({len(batch_rows)} batch matches over the rows written)")
    if e2e:
        s = sorted(e2e)
        print(f"end-to-end latency s: median {statistics.median(s):.2f}, "
              f"p95 {s[int(0.95 * (len(s) - 1))]:.2f}, max {s[-1]:.2f} ({len(s)} matches)")
    sizes = [x[1] for x in samples if x[1] >= 0]
    if sizes:
        half = sizes[len(sizes) // 2:]
        print(f"state bytes: first {sizes[0]:,}, min {min(sizes):,}, max {max(sizes):,}, "
              f"mean of the second half {statistics.mean(half):,.0f}")
    _plot_long_run(args, samples, progress, ends, arrived, started)
    return 0 if not extra else 1


def pa_timestamp_utc():
    import pyarrow as pa
    return pa.timestamp("us", "UTC")


def _plot_long_run(args, samples, progress, ends, arrived, started) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    from datetime import datetime
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    os.makedirs(folder, exist_ok=True)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 5.5), sharex=True)
    minutes = [s[0] / 60 for s in samples]
    top.plot(minutes, [s[1] / 1024 for s in samples], marker="o", label="cepsql state (KiB)")
    top.plot(minutes, [s[3] / 1024 for s in samples], marker=".", alpha=0.6,
             label="RocksDB memoryUsedBytes (KiB)")
    top.set_ylabel("KiB")
    top.set_ylim(bottom=0)
    top.legend(fontsize=8)
    top.set_title(f"{args.minutes:g}-minute stream, {args.rate} rows/s ({args.mode} mode)")
    by_batch: dict[int, list] = {}
    for end in ends:
        by_batch.setdefault(end[1], []).append(end)
    points = []
    for batch_id, batch_ends in by_batch.items():
        lat = _end_to_end(batch_ends, progress, arrived)
        if lat and batch_id in arrived:
            points.append((arrived[batch_id] - started, statistics.median(lat)))
    points.sort()
    bottom.plot([t / 60 for t, _ in points], [v for _, v in points], ".", label="median per batch")
    wall = [(datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
             - started) / 60 for p in progress]
    bottom.plot(wall, [p["durationMs"].get("triggerExecution", 0) / 1000 for p in progress],
                alpha=0.5, label="micro-batch duration")
    bottom.set_xlabel("minutes")
    bottom.set_ylabel("seconds")
    bottom.set_ylim(bottom=0)
    bottom.legend(fontsize=8)
    bottom.set_title("end-to-end latency (watermark passes a match's last row -> sink)",
                     fontsize=9)
    fig.tight_layout()
    path = os.path.join(folder, "streaming_long_run.png")
    fig.savefig(path, dpi=110)
    print(f"plot: {os.path.relpath(path)}")


if __name__ == "__main__":
    raise SystemExit(main())
