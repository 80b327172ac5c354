"""Workload benchmark on Spark (local[2]): N pattern views over one Parquet ticks source,
evaluated by the workload's one shared pass (spark.cep.workload: one scan, one shuffle +
sort per partitioning, every pattern in one mapInArrow, persisted once) vs querying every
view separately (N scans, N shuffles + sorts, N jobs).

The views are detection rules as a desk writes them: block trades (volume in the top
percent) followed by rises, pairs of block trades, a block trade then a run of busy
trades then another, per-symbol rules -- SQL:2016 and CEP mode (SKIP_TILL_ANY_MATCH,
SKIP_TILL_NEXT_MATCH, time windows), all PARTITION BY symbol ORDER BY ts, thresholds and
windows drawn per view, so matches are sparse (the paper's match rates) and the source
scan / shuffle / sort is what a per-view query pays. Both sides start with warm Python
workers. The shared side's time includes building the workload (planning every view,
the sharing planner, its statistics sample). The separate side is timed once over the
largest size; a smaller size is the same first views (same seed), so its time is the sum
of those views' times. Every view's rows are checked equal (dataframes() against the
view queried alone, matches() counted per view).

    python benchmarks/bench_workload_spark.py [--rows 1000000] [--sizes 50 100] [--out stem]
                                              [--repeats 3]

``--phases N`` instead profiles one workload of N views with every frame, phase by phase
(build, matches(), dataframes(), the collects): wall, driver / JVM / Python-worker CPU,
JVM round trips, Spark jobs, stages, tasks (--profile: its cProfile). Figures of the
time-sliced pass (stock 30): results/workload_spark_stock.md.

Both sides are warmed first (one view queried, a 2-view workload run). The shared side is
built anew and timed --repeats times per size; the median is reported (every run is in the
JSON). Prints per size: separate s, shared s (build + matches() collected), shared s with
every dataframes() frame also collected (first run), the ratios, and saves
benchmarks/results/<stem>.{json,png} (default workload_spark).

Figures (local[2] on a 2-core machine shared with other developers; `uptime` load beside
each; ratio = sum of the per-view query times / one pass with matches() collected; every
view's rows identical):

    rows   views | per-view s (sum) | one pass s (median of 3) | ratio | load
    200k     50  |       19.8       |          1.36            | 14.6x |  2.9
    200k    100  |       35.4       |          2.00            | 17.7x |  2.9
    200k     50  |       36.4       |          2.3             | 15.7x |  5.7
    200k    100  |       62.3       |          3.1             | 19.8x |  5.7
    1M       50  |       31.9       |          3.0             | 10.6x |  2.2
    1M      100  |       60.8       |          5.1             | 12.0x |  2.2
    200k     50  |       29.7       |          2.0             | 15.2x |  5.4  (*)
    200k    100  |       55.5       |          2.5             | 22.5x |  5.4  (*)
    200k    100  |       33.7       |          1.7             | 20.3x |  3.1  (*, after the merge)

(*) after the build stopped re-parsing the views (CREATE VIEW's parse kept with the view:
PatternView.parsed) and took the statistics sample in a thread while recording the views;
the 1M rows and earlier 200k rows are before that.

(before the lane cache, the conf/struct JVM savings, the stalled-search stop, the slim task
closure and the reused task columns: 17.5x at 100 views / 200k at load 12.5, 6.7x at
50 views / 1M, single runs). The one pass at 100 views / 200k is now ~1 s of building
(recording the 100 views ~0.6 s, the sharing planner's statistics ~0.3 s, its search
0.15 s) and ~1 s of Spark job; per-view queries at low load take only 0.35 s each, so the
ratio is lower on an idle machine. Since (*), recording the views no longer tokenizes or
parses them and the sample job overlaps the recording (cProfile, 100 views: 300 tokenize
calls, ~1 s profiled, gone). Results: results/workload_spark.{json,png} (200k, the (*)
run at load 5.4), results/workload_spark_1m.{json,png}.

--kind stock (issue 25 point 3, small views): overlapping UNPARTITIONED SKIP_TILL_ANY_MATCH
views from the SIGMOD 2019 stock generator (tests/support/sharing_synthetic.py), sparse
matches. Each size also times the frames over the persisted pass
(cepsql.workload.localRows=0: the behaviour before dataframes() collected a small pass
once) in the same process; Spark jobs counted with the status tracker. 2026-11-29,
200k rows, local[2], load 11.6 at the start (5.3 at the end of the 100-view runs):

    views | separate s (jobs) | matches() pass s (jobs) | + every frame s (jobs) | frames over cache s (jobs)
      30  |   177.6 (60)      |  13.3 (4)  13.4x        |  17.9 (6)   9.9x       |  24.4 (34)   7.3x
     100  |   416.3 (200)     |  80.9 (4)   5.1x (*)    | 223.0 (105) 1.9x (*)   |  33.6 (104) 12.4x

(*) the 100 views give 524,405 matches, above localRows (100k): their frames stay over
the persisted pass, as before (one count job more); its first one-pass run took 122 s
against 39.5 s for the second (the load fell from 11.6 to 5.3 meanwhile), and the
frames-over-cache run came last: compare the 100-view row's figures with care. An
earlier run of the 30 views at load 20 (before local frames): separate 137.9 s, one pass
21.6 s (6.4x), + every frame 41.8 s (3.3x), 34 jobs.

The desk views (default --kind) in the same layout, 2026-11-29, 200k rows, load 4.0:

    views | separate s (jobs) | matches() pass s (jobs) | + every frame s (jobs) | frames over cache s (jobs)
      30  |    14.9 (60)      |   1.9 (4)   7.8x        |   4.5 (7)   3.4x       |   6.4 (34)   2.3x
     100  |    41.5 (200)     |   2.9 (4)  14.3x        |   7.1 (7)   5.8x       |  14.6 (104)  2.9x

With local frames what remains of "+ every frame" is driver work per view (each frame's
filter/projection and its collect: JVM round trips and the rows' conversion), not jobs.

The build's fixed cost (issue 25 point 3 follow-up; 30 views, 200k rows, --repeats 2,
before = the previous commit's package and after run back to back, --profile of the first
one-pass run; the machine at load 10-15, so the separate sides differ):

    stock 30  | build s (recording, sharing planner) | one pass s | ratio | + every frame s, ratio | load
    before    |  3.94  (1.30, 1.18)                   |   9.5      | 5.5x  |  16.1  3.2x            | 14.5 -> 12.1
    after     |  1.99  (0.58, 0.69)                   |   5.9      | 6.4x  |   9.4  4.0x            | 11.3 -> 10.1

(choose_cep_plan over the 30 clauses 0.55 -> 0.07 s: alternatives are priced only when
EXPLAIN reads them; the search stops once converged, ~550 neighbours, ~0.28 s CPU instead
of the whole 1 s budget, same plan cost.) Desk 30 (--repeats 3, load 39 / 29): one pass
4.3 -> 3.5 s (10.9x -> 11.7x), + every frame 9.3 -> 7.5 s (5.0x -> 5.4x); its build
(1.3 s) has almost no sharing-planner or alternatives cost, so it is the Spark jobs and
the frames' driver work that remain. Every view's rows identical in all four runs.

Frames as slices and one statistics sample for all views (issue 25 point 3, third
round; stock 30, 200k rows, --repeats 2; old = the previous merge's package, new = this
one, run back to back in separate processes, old / new / old; "frames' extra" = + every
frame minus the first one-pass run; driver CPU = this process's CPU s, min of the runs):

    stock 30 | separate s | matches() pass s | ratio | + every frame s | ratio | frames' extra s | driver CPU build / pass / + frames | load
    old      |   117.0    |      15.6        | 7.5x  |      24.7       | 4.7x  |      5.9        |      0.64 / 1.03 / 1.43            | 19.2 -> 16.1
    new      |   117.0    |      15.8        | 7.4x  |      21.2       | 5.5x  |      4.1        |      0.63 / 1.03 / 1.39            | 16.0 -> 17.2
    old      |   135.5    |      18.2        | 7.5x  |      28.9       | 4.7x  |      8.1        |      0.65 / 1.02 / 1.42            | 21.7 -> 19.6

Building and collecting the 30 frames: 3,548 -> 1,551 JVM round trips (the frames
themselves 2,684 -> 1,146: each is one createDataFrame of its Arrow slice instead of ~96
calls of Column filter / select), the JVM's CPU for that phase 2.4 -> 1.3 s (the JVM
process's utime + stime). The statistics of the 30 views from one memoised sample:
0.149 -> 0.128 s CPU (100 views: 0.459 -> 0.388 s): the flags and time axis are shared,
but most pairs differ by window or event types, so most pair selectivities are not.
``define_conjuncts`` costs ~0.9 ms a call (60 calls, 0.05 s CPU): the ~1.5 s seen before
was cProfile's overhead on its ~11k small rewrites, not the build's.

What the 30-view one pass is made of at load 15-28 (process CPU and JVM CPU measured
per phase): the build ~4.5 s wall for ~0.7 s of Python CPU, ~0.8 s of JVM CPU and ~450
JVM round trips; the pass's Spark jobs 7-9 s, where one task runs the unpartitioned
stream (the one pass does not time-slice, a view alone does); the driver's Python CPU for
the whole run, frames included, ~1.4 s. So at 30 views and this load the ratio is set by
the pass's single task and the JVM, not the driver's Python: 8x is not reached (7.4-7.5x).

Stock 100 (one pass only, old / new processes back to back; the load fell from 11.7 to
4.8 meanwhile, so compare CPU and round trips, not wall): the pass has 524,405 matches,
above localRows, so its frames stay over the persisted pass; building them: 9,919-10,078
-> 1,895-1,999 JVM round trips and 0.41-0.46 -> 0.13-0.15 s Python CPU (filter by tag as
text, one selectExpr), the whole frames phase 11,600 -> 3,200 round trips (its JVM CPU,
~21-26 s, is the 100 collects over the cache); the statistics 0.42 -> 0.32-0.34 s CPU.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))  # tests/support

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
SYMBOLS = ["AAPL", "MSFT", "AMZN", "GOOG", "NVDA", "META", "TSLA", "AMD"]

TEMPLATES = [
    ("SELECT * FROM {src} MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
     "MEASURES A.price AS p0, LAST(B.price) AS p1, COUNT(B.ts) AS n ONE ROW PER MATCH "
     "AFTER MATCH SKIP PAST LAST ROW PATTERN (A B{{{k},}}) "
     "DEFINE A AS A.volume > {v}, B AS B.price > PREV(B.price))"),
    ("SELECT * FROM {src} MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
     "MEASURES a.ts AS ta, b.ts AS tb, b.price - a.price AS gain ONE ROW PER MATCH "
     "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) WITHIN INTERVAL '{w}' SECOND "
     "DEFINE a AS a.volume > {v}, b AS b.volume > {v} AND b.price > a.price)"),
    ("SELECT * FROM {src} MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
     "MEASURES a.ts AS ta, c.ts AS tc, COUNT(b.ts) AS busy ONE ROW PER MATCH "
     "STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, KL(b), c)) WITHIN INTERVAL '{w}' SECOND "
     "DEFINE a AS a.volume > {v}, b AS b.volume > 1400 AND b.price > a.price, "
     "c AS c.volume > {v})"),
    ("SELECT * FROM {src} MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
     "MEASURES a.ts AS ta, c.ts AS tc, c.price AS pc ONE ROW PER MATCH "
     "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b, c)) WITHIN INTERVAL '{w}' SECOND "
     "DEFINE a AS a.symbol = '{s}' AND a.volume > {v}, b AS b.volume > {v}, "
     "c AS c.volume > {v} AND c.price < a.price)"),
]


def view_queries(n: int, src: str, seed: int = 3) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        template = TEMPLATES[i % len(TEMPLATES)]
        out.append(template.format(src=src, k=int(rng.integers(2, 5)),
                                   v=int(rng.integers(30_000, 50_000)),
                                   w=int(rng.integers(2, 10)),
                                   s=SYMBOLS[int(rng.integers(len(SYMBOLS)))]))
    return out


def stock_views(n: int, src: str, seed: int = 1):
    """--kind stock: n overlapping UNPARTITIONED SKIP_TILL_ANY_MATCH views (the SIGMOD 2019
    stock experiment's generator, tests/support/sharing_synthetic.py: shared event types and
    predicates, different windows, AND/SEQ, NOT and Kleene) with sparse matches (windows
    of 1-3 s at 20 events/s, selectivities 0.003-0.5): small views, the workload's fixed
    cost. Returns (the view queries, the generator's workload for its stream)."""
    from support.sharing_synthetic import stock_workload
    wl = stock_workload(n, seed=seed, selectivities=(0.003, 0.5), windows=(1, 2, 3))
    queries = [p.sql(src).split(" AS ", 1)[1] for p in wl.patterns]
    return queries, wl


def parquet_source(rows: int, folder: str, kind: str = "desk") -> str:
    from cepsql.datagen import generate_ticks
    import pyarrow.parquet as pq
    path = os.path.join(folder, f"ticks_{rows}{'' if kind == 'desk' else '_' + kind}.parquet")
    if not os.path.exists(path):
        table = (generate_ticks(rows, n_symbols=20, seed=7) if kind == "desk" else
                 stock_views(1, "t")[1].stream(rows, seed=1))
        pq.write_table(table, path)
    return path


def spark_jobs(spark) -> int:
    """Spark jobs started so far in this application (the status tracker's job ids; no job
    group is ever set here, so every job is in group None)."""
    ids = spark.sparkContext.statusTracker().getJobIdsForGroup(None)
    return max(ids) + 1 if ids else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 100])
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "cepsql_bench"))
    parser.add_argument("--repeats", type=int, default=3,
                        help="one-pass runs per size (each builds the workload anew); "
                             "the median is reported")
    parser.add_argument("--kind", choices=["desk", "stock"], default="desk",
                        help="desk: PARTITION BY symbol rules (SQL:2016 and CEP); stock: "
                             "overlapping unpartitioned SKIP_TILL_ANY_MATCH views")
    parser.add_argument("--profile", default=None,
                        help="write a cProfile of the first one-pass run to this file")
    parser.add_argument("--phases", type=int, default=0,
                        help="instead of the comparison: profile ONE workload of this many "
                             "views with every frame, per phase (build, matches(), "
                             "dataframes(), the collects): wall, driver / JVM / Python "
                             "worker CPU, JVM round trips, Spark jobs, stages, tasks and "
                             "their run time; --profile writes the cProfile of the run")
    parser.add_argument("--out", default=None,
                        help="results file stem under benchmarks/results/ (default "
                             "workload_spark, --kind stock: workload_spark_stock)")
    args = parser.parse_args()
    args.out = args.out or ("workload_spark" if args.kind == "desk" else "workload_spark_stock")
    sizes = sorted(args.sizes)

    import cepsql  # noqa: F401
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    os.makedirs(args.data, exist_ok=True)
    spark.read.parquet(parquet_source(args.rows, args.data, args.kind)
                       ).createOrReplaceTempView("bw_ticks")
    count = args.phases or sizes[-1]
    names = [f"bw_v{i}" for i in range(count)]
    queries = (view_queries(count, "bw_ticks") if args.kind == "desk" else
               stock_views(count, "bw_ticks")[0])
    for name, query in zip(names, queries):
        spark.cep.sql(f"CREATE OR REPLACE TEMPORARY VIEW {name} AS {query}")
    spark.table(names[0]).count()  # warm the Python workers for both sides
    warm = spark.cep.workload(names[:2])  # ... and the shared pass's modules in them
    warm.matches().collect()
    warm.close()
    if args.phases:
        return phases(spark, names, args.profile)
    alone, seconds, alone_jobs = {}, {}, {}
    for name in names:
        jobs, t0 = spark_jobs(spark), time.perf_counter()
        alone[name] = spark.table(name).collect()
        seconds[name] = time.perf_counter() - t0
        alone_jobs[name] = spark_jobs(spark) - jobs
    print(f"separate: {len(names)} views {sum(seconds.values()):.1f} s, "
          f"{sum(alone_jobs.values())} Spark jobs (load {os.getloadavg()[0]:.1f})", flush=True)
    load = os.getloadavg()[0]
    results = []
    for n in sizes:
        chosen = names[:n]
        separate = sum(seconds[k] for k in chosen)
        runs, with_frames, pass_jobs, frames_jobs = [], None, [], None
        cpu_build, cpu_pass, cpu_frames = [], [], None  # the driver process's CPU s
        for repeat in range(args.repeats):
            profile = _profiler(args.profile if repeat == 0 and n == sizes[0] else None)
            jobs, t0, c0 = spark_jobs(spark), time.perf_counter(), time.process_time()
            wl = spark.cep.workload(chosen)
            matches = wl.matches().collect()
            runs.append(time.perf_counter() - t0)
            cpu_pass.append(time.process_time() - c0)
            pass_jobs.append(spark_jobs(spark) - jobs)
            _dump(profile, args.profile)
            if repeat == 0:  # every view's frame too, once, for the check
                shared = {name: df.collect() for name, df in wl.dataframes().items()}
                with_frames = time.perf_counter() - t0
                cpu_frames = time.process_time() - c0
                frames_jobs = spark_jobs(spark) - jobs
            wl.close()
            c1 = time.process_time()  # the build alone (planning, sharing, statistics)
            again = spark.cep.workload(chosen)
            again._build()
            cpu_build.append(time.process_time() - c1)
            again.close()
        # the same with the views' frames over the persisted pass (before local frames:
        # cepsql.workload.localRows=0), in this process
        spark.conf.set("cepsql.workload.localRows", "0")
        jobs, t0 = spark_jobs(spark), time.perf_counter()
        wl = spark.cep.workload(chosen)
        wl.matches().collect()
        over_cache = {name: df.collect() for name, df in wl.dataframes().items()}
        cache_frames, cache_jobs = time.perf_counter() - t0, spark_jobs(spark) - jobs
        wl.close()
        spark.conf.unset("cepsql.workload.localRows")
        one_pass = float(np.median(runs))
        counts: dict[str, int] = {}
        for row in matches:
            counts[row.view] = counts.get(row.view, 0) + 1
        same = all(sorted(map(repr, alone[k])) == sorted(map(repr, shared[k]))
                   == sorted(map(repr, over_cache[k]))
                   and counts.get(k, 0) == len(alone[k]) for k in chosen)
        total = sum(len(alone[k]) for k in chosen)
        results.append({"views": n, "rows": args.rows, "separate_s": separate,
                        "one_pass_s": one_pass, "one_pass_runs_s": runs,
                        "with_dataframes_s": with_frames,
                        "ratio": separate / one_pass, "ratio_with_dataframes":
                        separate / with_frames, "matches": total, "identical": same,
                        "kind": args.kind, "separate_jobs": sum(alone_jobs[k] for k in chosen),
                        "one_pass_jobs": pass_jobs, "with_dataframes_jobs": frames_jobs,
                        "frames_over_cache_s": cache_frames, "frames_over_cache_jobs": cache_jobs,
                        "ratio_frames_over_cache": separate / cache_frames,
                        "driver_cpu_build_s": cpu_build, "driver_cpu_one_pass_s": cpu_pass,
                        "driver_cpu_with_dataframes_s": cpu_frames,
                        "load": load, "load_after": os.getloadavg()[0]})
        print(f"{n:4d} views: separate {separate:7.1f} s | one pass (matches) {one_pass:6.1f} s"
              f" (median of {', '.join(f'{r:.1f}' for r in runs)}) ratio "
              f"{separate / one_pass:5.1f}x | + every dataframe {with_frames:6.1f} s "
              f"ratio {separate / with_frames:5.1f}x | matches {total} identical {same} "
              f"| Spark jobs: separate {results[-1]['separate_jobs']}, one pass "
              f"{pass_jobs[0]}, + dataframes {frames_jobs} | frames over the cache "
              f"(localRows=0) {cache_frames:.1f} s ratio {separate / cache_frames:.1f}x, "
              f"{cache_jobs} jobs | driver CPU s: build {min(cpu_build):.2f}, one pass "
              f"{min(cpu_pass):.2f}, + dataframes {cpu_frames:.2f} | load {load:.1f} -> "
              f"{os.getloadavg()[0]:.1f}", flush=True)
    for name in names:
        spark.cep.sql(f"DROP VIEW IF EXISTS {name}")
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, f"{args.out}.json"), "w") as out:
        json.dump(results, out, indent=1)
    _plot(results, os.path.join(RESULTS, f"{args.out}.png"))


def phases(spark, names: list[str], profile_path: str | None) -> None:
    """--phases: one workload of ``names`` built, matches() collected, then every frame
    built and collected, each phase measured (a warm-up run first, not measured)."""
    from pyspark.sql import SparkSession  # noqa: F401  (the session is given)
    meter = _Meter(spark)
    for measured in (False, True):
        meter.reset()
        profile = _profiler(profile_path if measured else None)
        wl = spark.cep.workload(names)
        with meter.phase("build (record, plan, sharing planner)"):
            wl._build()
        sliced = bool(getattr(wl._built, "slicing", None))  # (a package before slicing)
        with meter.phase("matches() collected (the pass)"):
            wl.matches().collect()
        with meter.phase("dataframes() (localize + frames)"):
            frames = wl.dataframes()
        with meter.phase("every frame collected"):
            for df in frames.values():
                df.collect()
        _dump(profile, profile_path)
        wl.close()
    meter.report(os.getloadavg()[0])
    print(f"pass time-sliced: {sliced}")
    for name in names:
        spark.cep.sql(f"DROP VIEW IF EXISTS {name}")


class _Meter:
    """Per phase: wall s, this process's CPU s, the JVM's CPU s and its Python workers'
    (from /proc), JVM round trips (py4j commands sent), Spark jobs, stages, tasks and
    the stages' executor run / CPU time (Spark's status REST API)."""

    def __init__(self, spark):
        from contextlib import contextmanager
        self.spark, self.rows, self.trips = spark, [], 0
        client = type(spark.sparkContext._gateway._gateway_client)
        send = client.send_command
        meter = self

        def counted(this, *a, **k):
            meter.trips += 1
            return send(this, *a, **k)
        client.send_command = counted
        self.jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        self.phase = contextmanager(self._phase)

    def reset(self) -> None:
        self.rows = []

    def _cpu(self) -> tuple[float, float]:
        """(JVM CPU s, CPU s of its other descendants: the Python daemon and workers)."""
        ticks = os.sysconf("SC_CLK_TCK")
        children: dict[int, list[int]] = {}
        stat: dict[int, list[str]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                stat[int(entry)] = fields
                children.setdefault(int(fields[1]), []).append(int(entry))

        def cpu(pid: int, own: bool) -> float:
            f = stat.get(pid)
            return 0.0 if f is None else sum(map(int, f[11:13] if own else f[11:15])) / ticks
        workers, todo = 0.0, list(children.get(self.jvm_pid, []))
        while todo:
            pid = todo.pop()
            workers += cpu(pid, False)
            todo += children.get(pid, [])
        return cpu(self.jvm_pid, True), workers

    def _stages(self) -> dict[int, dict]:
        import json
        import urllib.request
        sc = self.spark.sparkContext
        url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages"
        with urllib.request.urlopen(url, timeout=30) as r:
            return {s["stageId"]: s for s in json.load(r)}

    def _phase(self, name: str):
        jobs, stages = spark_jobs(self.spark), set(self._stages())
        jvm, workers = self._cpu()
        trips, t0, c0 = self.trips, time.perf_counter(), time.process_time()
        yield
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        trips = self.trips - trips
        jvm1, workers1 = self._cpu()
        new = [s for k, s in self._stages().items() if k not in stages]
        self.rows.append((name, wall, cpu, jvm1 - jvm, workers1 - workers, trips,
                          spark_jobs(self.spark) - jobs, len(new),
                          sum(s["numTasks"] for s in new),
                          sum(s["executorRunTime"] for s in new) / 1e3,
                          sum(s["executorCpuTime"] for s in new) / 1e9))

    def report(self, load: float) -> None:
        head = ("phase", "wall s", "driver CPU s", "JVM CPU s", "py workers CPU s",
                "JVM round trips", "jobs", "stages", "tasks", "task run s", "task CPU s")
        print(" | ".join(head) + f"   (load {load:.1f})")
        for row in self.rows:
            print(f"{row[0]} | " + " | ".join(
                f"{v:.2f}" if isinstance(v, float) else str(v) for v in row[1:]))
        total = [sum(r[k] for r in self.rows) for k in range(1, len(head))]
        print("total | " + " | ".join(f"{v:.2f}" if isinstance(v, float) else str(v)
                                      for v in total))


def _profiler(path: str | None):
    """A running cProfile when --profile is given (the first one-pass run), else None."""
    if path is None:
        return None
    import cProfile
    profile = cProfile.Profile()
    profile.enable()
    return profile


def _dump(profile, path: str | None) -> None:
    if profile is not None:
        profile.disable()
        profile.dump_stats(path)
        print(f"profile: {path}")


def _plot(results: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    sizes = [r["views"] for r in results]
    ax.plot(sizes, [r["ratio"] for r in results], marker="o", label="matches() collected")
    ax.plot(sizes, [r["ratio_with_dataframes"] for r in results], marker="s",
            label="+ every dataframes() frame collected")
    ax.axhline(20.0, color="grey", linewidth=0.8, linestyle="--", label="target 20x")
    ax.set_xlabel("pattern views in the workload")
    ax.set_ylabel("speed-up over one query per view")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    ax.set_title(f"One shared pass vs one query per view ({results[0]['rows']:,} rows "
                 "Parquet, local[2])", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
