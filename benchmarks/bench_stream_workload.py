"""A workload over a stream: 10 pattern views over generated ticks (4 SKIP_TILL_ANY_MATCH
views sharing SEQ(a, b) -- the shared DAG evaluator's part --, 4 in other CEP strategies,
2 in SQL:2016 mode). Ratios from one process run.

Part 1, in-process (no Spark): the per-key WorkloadEngine (what the one stateful operator
runs; each key's state stored and loaded after every increment, as Spark does) with the
shared DAG, the same engine with every view on its own streaming evaluator, and the
batch workers on the same rows. Matches are checked equal on all three.

Part 2, Spark (--spark, local[2]): ``cep_workload('ticks')`` as ONE streaming query over a
parquet file stream (one file per micro-batch, availableNow, 5 s watermark) next to the
batch workload (``spark.cep.workload(...).matches()``) on the same files: rows/s and their
ratio. Every streamed match is checked to be in the batch result (the stream ends with
its last windows undecided: the watermark never passes them).

    python benchmarks/bench_stream_workload.py [--rows 100000] [--increments 50] \
        [--spark --files 5]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cepsql.runtime.ordering import sort_table  # noqa: E402
from cepsql.backends.streaming.workload import (WorkloadEngine, fingerprint,  # noqa: E402
                                                state_from_row, state_to_row)
from cepsql.parse import find_match_recognize  # noqa: E402
from cepsql.exprs.arrow_eval import evaluate_arrow  # noqa: E402
from cepsql.compile.clause import plan_query  # noqa: E402
from cepsql.runtime.one_pass import plan_pass  # noqa: E402

A = "a AS a.volume >= 1500"
B = "b AS b.volume >= 1500 AND b.price > a.price"
VIEWS = {
    "any_abc": f"MEASURES a.ts AS ta, c.ts AS tc STRATEGY SKIP_TILL_ANY_MATCH "
               f"PATTERN (SEQ(a, b, c)) WITHIN INTERVAL '2' SECOND "
               f"DEFINE {A}, {B}, c AS c.volume >= 1500 AND c.price < b.price",
    "any_ab_not": f"MEASURES a.ts AS ta, d.ts AS td STRATEGY SKIP_TILL_ANY_MATCH "
                  f"PATTERN (SEQ(a, b, NOT(n), d)) WITHIN INTERVAL '2' SECOND "
                  f"DEFINE {A}, {B}, n AS n.volume > 8000, "
                  "d AS d.volume >= 1500 AND d.price > b.price",
    "any_ab": f"MEASURES a.ts AS ta, b.ts AS tb STRATEGY SKIP_TILL_ANY_MATCH "
              f"PATTERN (SEQ(a, b)) WITHIN INTERVAL '3' SECOND DEFINE {A}, {B}",
    "any_abs": f"MEASURES a.ts AS ta, s.ts AS ts2 STRATEGY SKIP_TILL_ANY_MATCH "
               f"PATTERN (SEQ(a, b, s)) WITHIN INTERVAL '3' SECOND "
               f"DEFINE {A}, {B}, s AS s.volume > 5000",
    "next_ab": "MEASURES a.ts AS ta, b.ts AS tb STRATEGY SKIP_TILL_NEXT_MATCH "
               "PATTERN (SEQ(a, b)) WITHIN INTERVAL '2' SECOND "
               "DEFINE a AS a.volume > 1400, b AS b.volume > 1400 AND b.price > a.price",
    "next_akc": "MEASURES a.ts AS ta, count(b.*) AS nb STRATEGY SKIP_TILL_NEXT_MATCH "
                "PATTERN (SEQ(a, KL(b), c)) WITHIN INTERVAL '3' SECOND "
                "DEFINE a AS a.volume >= 1500, b AS b.price > PREV(b.price), "
                "c AS c.volume >= 1500 AND c.price > a.price",
    "contig": "MEASURES a.ts AS ta STRATEGY PARTITION_CONTIGUITY "
              "PATTERN (SEQ(a, b)) WITHIN INTERVAL '2' SECOND "
              "DEFINE a AS a.volume > 1400, b AS b.volume > 1400",
    "spike": "MEASURES a.ts AS ta, s.ts AS ts2 AFTER MATCH SKIP PAST LAST ROW "
             "STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, s)) WITHIN INTERVAL '5' SECOND "
             "DEFINE a AS a.volume >= 1500, s AS s.volume > 5000",
    "v_shape": "MEASURES FIRST(strt.ts) AS t0, LAST(up.ts) AS t1 AFTER MATCH SKIP PAST LAST ROW "
               "PATTERN (strt down{2,} up{2,}) WITHIN INTERVAL '30' SECOND "
               "DEFINE down AS down.price < PREV(down.price), up AS up.price > PREV(up.price)",
    "rise": "MEASURES FIRST(a.ts) AS t0, count(b.*) AS nb "
            "PATTERN (a b+) WITHIN INTERVAL '5' SECOND DEFINE b AS b.price > PREV(b.price)",
}


def _sql(name: str, src: str) -> str:
    body = VIEWS[name]
    measures, rest = body.split(" STRATEGY ", 1) if " STRATEGY " in body else \
        body.split(" PATTERN ", 1)
    rest = ("STRATEGY " if " STRATEGY " in body else "PATTERN ") + rest
    if "AFTER MATCH" in measures:
        measures, skip = measures.split(" AFTER MATCH ", 1)
        rest = "AFTER MATCH " + skip + " " + rest
    return (f"SELECT * FROM {src} MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
            f"{measures}, MATCH_NUMBER() AS mn ONE ROW PER MATCH {rest})")


# --- part 1: in-process --------------------------------------------------------------------
def _increments(table: pa.Table, increments: int, delay_ms: int = 5000):
    """({symbol: rows}, watermark ms) per increment, then a final flush."""
    ts = table.column("ts").cast(pa.int64()).to_numpy()
    codes = np.asarray(table.column("symbol").to_pylist())
    bounds = np.linspace(0, table.num_rows, increments + 1).astype(int)
    for lo, hi in zip(bounds, bounds[1:]):
        part, sym = table.slice(lo, hi - lo), codes[lo:hi]
        yield ({k: part.filter(pa.array(sym == k)) for k in np.unique(sym)},
               int(ts[hi - 1] // 1000) - delay_ms)
    yield {}, 1 << 50


def _engine_pass(group, table, shared: bool, increments: int) -> tuple[float, int]:
    """Seconds and rows emitted by the per-key workload engine over the increments."""
    engine = WorkloadEngine(group.patterns, "ts", group.sort_keys[1:],
                            group.global_plan if shared else None)
    tag = fingerprint(group.patterns, engine.members)
    dag = engine.shared is not None
    states, emitted = {}, 0
    started = time.process_time()
    for by_key, watermark in _increments(table, increments):
        for key in sorted(set(by_key) | set(states)):
            state = states.get(key) or engine.new_state()
            outputs, _, _ = engine.advance(state, by_key.get(key), watermark)
            emitted += sum(b.num_rows for _, b in outputs)
            states[key] = state_from_row(state_to_row(state, tag), len(group.patterns), tag,
                                         dag)
    return time.process_time() - started, emitted


def in_process(rows: int, increments: int) -> dict:
    from cepsql.datagen import generate_ticks
    table = generate_ticks(rows)
    sqls = [_sql(n, "t") for n in VIEWS]
    plans = [plan_query(find_match_recognize(q)[0].spec, table.schema, q) for q in sqls]
    shared = plan_pass(table.schema, plans, {"algorithm": "BEST"})
    group = shared.groups[0]
    for name, expr in group.prepare:
        table = table.append_column(name, evaluate_arrow(expr, table))
    shared.bind([table.schema])
    out = {"shared_nodes": len(group.global_plan.shared_nodes()),
           "dag_views": len(WorkloadEngine(group.patterns, "ts", group.sort_keys[1:],
                                           group.global_plan).members)}
    out["dag_s"], dag_rows = _engine_pass(group, table, True, increments)
    out["own_s"], own_rows = _engine_pass(group, table, False, increments)
    started = time.process_time()
    ordered = sort_table(table, list(group.sort_keys)).combine_chunks()
    batch_rows = 0
    for p in group.patterns:
        worker_in = [p.worker_batch(b) for b in ordered.to_batches()]
        batch_rows += sum(b.num_rows for b in p.bound.worker(iter(worker_in)))
    out["batch_s"] = time.process_time() - started
    assert dag_rows == own_rows == batch_rows, (dag_rows, own_rows, batch_rows)
    out["matches"] = batch_rows
    return out


# --- part 2: Spark -------------------------------------------------------------------------
def spark_run(rows: int, files: int) -> dict:
    import cepsql
    from cepsql.backends.streaming.demo import STREAM_SCHEMA, write_increments
    from cepsql.datagen import generate_ticks
    spark = cepsql.get_session(master="local[2]", conf={
        "spark.sql.shuffle.partitions": "2", "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC"})
    spark.sparkContext.setLogLevel("ERROR")
    matches = ("SELECT view, to_json(partition) AS p, match_number, to_json(measures) AS m "
               "FROM cep_workload('{src}')")
    out = {}
    with tempfile.TemporaryDirectory(prefix="cepsql-bench-stream-wl-") as folder:
        source = os.path.join(folder, "in")
        os.makedirs(source)
        write_increments(generate_ticks(rows), source, files)
        spark.read.schema(STREAM_SCHEMA).parquet(source).createOrReplaceTempView("bw_ticks")
        for name in VIEWS:
            spark.cep.sql(f"CREATE OR REPLACE TEMPORARY VIEW bw_{name} AS "
                          + _sql(name, "bw_ticks"))
        seconds = []
        for _ in range(2):   # cold (first run of these views), warm
            started = time.perf_counter()
            spark.cep.sql(matches.format(src="bw_ticks")).write.format("noop") \
                .mode("overwrite").save()
            seconds.append(time.perf_counter() - started)
        out["batch_cold_s"], out["batch_warm_s"] = seconds
        batch = {(r.view[3:], r.p, r.match_number, r.m)
                 for r in spark.cep.sql(matches.format(src="bw_ticks")).collect()}

        spark.readStream.schema(STREAM_SCHEMA).option("maxFilesPerTrigger", 1) \
            .parquet(source).withWatermark("ts", "5 seconds") \
            .createOrReplaceTempView("sw_ticks")
        for name in VIEWS:
            spark.cep.sql(f"CREATE OR REPLACE TEMPORARY VIEW sw_{name} AS "
                          + _sql(name, "sw_ticks"))
        sink = os.path.join(folder, "out")
        started = time.perf_counter()
        query = (spark.cep.sql(matches.format(src="sw_ticks")).writeStream.format("parquet")
                 .option("path", sink).option("checkpointLocation",
                                              os.path.join(folder, "ck"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        out["stream_s"] = time.perf_counter() - started
        out["batches"] = [p["durationMs"].get("triggerExecution", 0) / 1000
                          for p in query.recentProgress]
        streamed = [(r.view[3:], r.p, r.match_number, r.m)
                    for r in spark.read.parquet(sink).collect()]
    out["batch_matches"] = len(batch)
    out["stream_matches"] = len(streamed)
    out["not_in_batch"] = sum(1 for r in streamed if r not in batch)
    out["duplicates"] = len(streamed) - len(set(streamed))
    spark.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--increments", type=int, default=50)
    ap.add_argument("--spark", action="store_true")
    ap.add_argument("--files", type=int, default=5)
    ap.add_argument("--skip-engine", action="store_true")
    args = ap.parse_args()
    results = {}
    print(f"{len(VIEWS)} views, {args.rows:,} rows, load {os.getloadavg()[0]:.1f}")
    if not args.skip_engine:
        r = in_process(args.rows, args.increments)
        results["engine"] = r
        print(f"in-process, {args.increments} increments, {r['matches']} matches (equal on "
              f"all three paths); global plan: {r['dag_views']} views in the shared DAG, "
              f"{r['shared_nodes']} shared nodes")
        print(f"  workload engine, shared DAG   {r['dag_s']:7.2f} CPU s  "
              f"{args.rows / r['dag_s']:10,.0f} rows/s")
        print(f"  workload engine, own engines  {r['own_s']:7.2f} CPU s  "
              f"{args.rows / r['own_s']:10,.0f} rows/s  (shared DAG {r['own_s'] / r['dag_s']:.2f}x)")
        print(f"  batch workers                 {r['batch_s']:7.2f} CPU s  "
              f"{args.rows / r['batch_s']:10,.0f} rows/s  (stream / batch "
              f"{r['batch_s'] / r['dag_s']:.2f})")
    if args.spark:
        s = spark_run(args.rows, args.files)
        results["spark"] = s
        n = args.rows
        print(f"Spark local[2], {args.files} files (one per micro-batch)")
        print(f"  batch workload, cold   {s['batch_cold_s']:7.2f} s  {n / s['batch_cold_s']:9,.0f} "
              f"rows/s  {s['batch_matches']} matches")
        print(f"  batch workload, warm   {s['batch_warm_s']:7.2f} s  {n / s['batch_warm_s']:9,.0f} "
              "rows/s")
        print(f"  streaming workload     {s['stream_s']:7.2f} s  {n / s['stream_s']:9,.0f} "
              f"rows/s  {s['stream_matches']} matches ({len(s['batches'])} micro-batches: "
              + ", ".join(f"{b:.1f}" for b in s["batches"]) + " s)")
        print(f"  ratios: stream / cold batch {s['batch_cold_s'] / s['stream_s']:.2f}; "
              f"stream / warm batch {s['batch_warm_s'] / s['stream_s']:.2f}")
        print(f"  streamed matches not in the batch result: {s['not_in_batch']}; "
              f"duplicates: {s['duplicates']}")
    _plot(results, args)


def _plot(results: dict, args) -> None:
    """rows/s of each path: benchmarks/results/stream_workload.png (in-process) and
    stream_workload_spark.png (Spark)."""
    if "engine" in results:
        _bars({"engine": results["engine"]}, args, "stream_workload.png")
    if "spark" in results:
        _bars({"spark": results["spark"]}, args, "stream_workload_spark.png")


def _bars(results: dict, args, name: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    bars = []
    if "engine" in results:
        r = results["engine"]
        bars += [("engine\nshared DAG", args.rows / r["dag_s"]),
                 ("engine\nown engines", args.rows / r["own_s"]),
                 ("batch\nworkers", args.rows / r["batch_s"])]
    if "spark" in results:
        s = results["spark"]
        bars += [("Spark\nstream", args.rows / s["stream_s"]),
                 ("Spark batch\nwarm", args.rows / s["batch_warm_s"]),
                 ("Spark batch\ncold", args.rows / s["batch_cold_s"])]
    fig, ax = plt.subplots(figsize=(1.3 * len(bars) + 1, 3.2))
    ax.bar([b for b, _ in bars], [v for _, v in bars],
           color=["C0", "C1", "C2", "C3", "C4", "C5"][:len(bars)])
    ax.set_ylabel("rows / s")
    ax.set_title(f"{len(VIEWS)} views, {args.rows:,} rows", fontsize=9)
    ax.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", name)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    fig.savefig(out, dpi=110)
    print("plot:", out)


if __name__ == "__main__":
    main()
