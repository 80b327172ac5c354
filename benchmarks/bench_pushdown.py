"""Relevance pushdown and in-worker statistics on Spark (issue 13, points 1 and 2).

    python benchmarks/bench_pushdown.py                     # 2M ticks, local[2]
    python benchmarks/bench_pushdown.py --rows 10000000 --stats-rows 200000

Part 1, relevance pushdown: a cross-symbol pattern over the 20 skewed symbols of
``cepsql.datagen.generate_ticks`` of which 3 are used (NVDA, ORCL, MU: ~7.5% of rows),
no PARTITION BY (time slices), SKIP_TILL_NEXT_MATCH, read from Parquet. Timed with the
filter (default) and without it (``cepsql.pushdown.relevanceFilter=false``), with time
slicing (default) and without it (one task): rows/s of input and the ratios. The match
counts must agree.

Part 2, statistics without a separate job: the first query over new data (a fresh
Parquet read, empty statistics cache) of a planned SKIP_TILL_ANY_MATCH pattern with
``cepsql.stats.mode=driver`` (count + sample jobs, then the query) and ``worker`` (each
task plans from its first rows): wall time and Spark jobs started.

Spark queries are forced with the ``noop`` writer (counts with a separate action).
Best of ``--repeat`` runs. A bar chart goes to benchmarks/results/bench_pushdown.png.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import cepsql  # noqa: E402
from cepsql.datagen import generate_ticks  # noqa: E402
from cepsql.stats import CACHE  # noqa: E402

PUSHDOWN_SQL = """
SELECT * FROM {src} MATCH_RECOGNIZE (
  ORDER BY ts
  MEASURES a.ts AS ta, b.ts AS tb, c.ts AS tc
  STRATEGY SKIP_TILL_NEXT_MATCH
  PATTERN (SEQ(a, b, c)) WITHIN INTERVAL '2' SECOND
  DEFINE a AS symbol = 'NVDA',
         b AS symbol = 'ORCL' AND b.volume > a.volume,
         c AS symbol = 'MU' AND c.price > 0)
"""

STATS_SQL = """
SELECT * FROM {src} MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES a.ts AS ta, c.ts AS tc
  STRATEGY SKIP_TILL_ANY_MATCH
  PATTERN (SEQ(a, b, c)) WITHIN INTERVAL '1' SECOND
  DEFINE a AS volume >= 1400,
         b AS b.price > a.price,
         c AS c.volume > a.volume AND c.price < b.price)
"""

RELEVANCE = "cepsql.pushdown.relevanceFilter"


def _jobs(spark) -> int:
    value = spark.sparkContext._jsc.sc().dagScheduler().nextJobId()
    return value if isinstance(value, int) else value.get()


def _timed(spark, action) -> tuple[float, int]:
    jobs = _jobs(spark)
    started = time.perf_counter()
    action()
    return time.perf_counter() - started, _jobs(spark) - jobs


def _noop(df) -> None:
    df.write.format("noop").mode("overwrite").save()


def pushdown(spark, path: str, rows: int, repeat: int) -> dict:
    spark.read.parquet(path).createOrReplaceTempView("ticks")
    sql = PUSHDOWN_SQL.format(src="ticks")
    out = {}
    for slicing in ("true", "false"):
        spark.conf.set("cepsql.planner.slicing", slicing)
        for flag in ("true", "false"):
            spark.conf.set(RELEVANCE, flag)
            label = (f"{'with' if flag == 'true' else 'without'} filter, "
                     f"{'time slices' if slicing == 'true' else 'one task'}")
            best = min(_timed(spark, lambda: _noop(spark.cep.sql(sql)))[0]
                       for _ in range(repeat))
            out[label] = (best, spark.cep.sql(sql).count())
    spark.conf.unset(RELEVANCE)
    spark.conf.unset("cepsql.planner.slicing")
    counts = {n for _, n in out.values()}
    assert len(counts) == 1, out
    print(f"Part 1: relevance pushdown, {rows:,} rows, {counts.pop():,} matches (equal)")
    for label, (t, _) in out.items():
        print(f"  {label:<30} {t:8.2f} s  {rows / t:12,.0f} rows/s")
    for kind in ("time slices", "one task"):
        ratio = out[f"without filter, {kind}"][0] / out[f"with filter, {kind}"][0]
        print(f"  speed-up with the filter ({kind}): x{ratio:.2f}")
    return {k: v[0] for k, v in out.items()}


def first_query(spark, path: str, rows: int, repeat: int) -> dict:
    out: dict[str, tuple[float, int]] = {}
    for i in range(repeat):
        for mode in ("driver", "worker"):
            CACHE.clear()
            view = f"fresh_{mode}_{i}"
            spark.read.parquet(path).createOrReplaceTempView(view)  # new data for the cache
            spark.conf.set("cepsql.stats.mode", mode)
            t, jobs = _timed(spark, lambda: _noop(spark.cep.sql(STATS_SQL.format(src=view))))
            if mode not in out or t < out[mode][0]:
                out[mode] = (t, jobs)
    spark.conf.set("cepsql.stats.mode", "driver")
    n_driver = spark.cep.sql(STATS_SQL.format(src="fresh_driver_0")).count()
    spark.conf.set("cepsql.stats.mode", "worker")
    n_worker = spark.cep.sql(STATS_SQL.format(src="fresh_worker_0")).count()
    spark.conf.unset("cepsql.stats.mode")
    assert n_driver == n_worker, (n_driver, n_worker)
    print(f"Part 2: first query on new data, {rows:,} rows, {n_worker:,} matches (equal)")
    for mode, (t, jobs) in out.items():
        print(f"  stats.mode={mode:<7} {t:8.2f} s  {jobs} Spark jobs")
    print(f"  worker / driver latency: x{out['worker'][0] / out['driver'][0]:.2f}")
    return {f"first query, stats {k}": v[0] for k, v in out.items()}


def plot(times: dict, rows: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 3.6))
    labels = list(times)
    new = [k.startswith("with filter") or k.endswith("stats worker") for k in labels]
    ax.barh(labels, [times[k] for k in labels], color=["#2a7" if n else "#c84" for n in new])
    for y, k in enumerate(labels):
        ax.text(times[k], y, f" {times[k]:.2f} s ({rows[k]:,} rows)", va="center", fontsize=8)
    ax.set_xlabel("seconds (best run)")
    ax.set_title("cepsql on Spark local[2]: relevance pushdown, in-worker statistics",
                 fontsize=9)
    ax.set_xlim(0, max(times.values()) * 1.6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--stats-rows", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    spark = cepsql.get_session(master=args.master,
                               conf={"spark.sql.shuffle.partitions": "4",
                                     "spark.driver.memory": "2g"})
    spark.sparkContext.setLogLevel("ERROR")
    print(f"Spark {spark.version}, master {spark.sparkContext.master}, "
          f"shuffle partitions {spark.conf.get('spark.sql.shuffle.partitions')}")
    with tempfile.TemporaryDirectory() as tmp:
        big, small = os.path.join(tmp, "big.parquet"), os.path.join(tmp, "small.parquet")
        pq.write_table(generate_ticks(args.rows), big, row_group_size=256_000)
        pq.write_table(generate_ticks(args.stats_rows, seed=11), small)
        warm = spark.read.parquet(small).limit(20_000)  # JVM and Python workers warm
        warm.createOrReplaceTempView("warm")
        _noop(spark.cep.sql(PUSHDOWN_SQL.format(src="warm")))
        times = pushdown(spark, big, args.rows, args.repeat)
        rows = {k: args.rows for k in times}
        stats = first_query(spark, small, args.stats_rows, args.repeat)
        times.update(stats)
        rows.update({k: args.stats_rows for k in stats})
    out = os.path.join(ROOT, "benchmarks", "results", "bench_pushdown.png")
    plot(times, rows, out)
    print(f"plot: {os.path.relpath(out, ROOT)}")
    spark.stop()


if __name__ == "__main__":
    main()
