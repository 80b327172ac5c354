"""Workload benchmark on Spark (local[2]): N pattern views over one generated ticks source,
evaluated by the workload's one shared pass (spark.cep.workload(src): one scan, one
shuffle + sort per partitioning, every pattern's worker in one mapInArrow, persisted
once) vs querying every view separately (N scans, N shuffles + sorts, N jobs).

The views mix SQL:2016 (rises, drops, V-shapes) and CEP mode (SEQ with Kleene,
SKIP_TILL_ANY/NEXT_MATCH, time windows), all PARTITION BY symbol ORDER BY ts, with
thresholds drawn per view. Both sides start with warm Python workers; the workload's
time includes building it (planning every view again, cached statistics), the separate
side's planning happened at CREATE VIEW. Every view's rows are checked equal.

    python benchmarks/bench_workload_spark.py [--rows 20000] [--sizes 10 50 100]

Prints per size: separate seconds, workload seconds (build + collect), ratio, and saves
benchmarks/results/workload_spark.{json,svg}.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

TEMPLATES = [
    ("SELECT * FROM {src} MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
     "MEASURES FIRST(A.price) AS p0, LAST(B.price) AS p1 ONE ROW PER MATCH "
     "AFTER MATCH SKIP PAST LAST ROW PATTERN (A B{{{k},}}) "
     "DEFINE B AS B.price > PREV(B.price) AND B.volume > {v})"),
    ("SELECT * FROM {src} MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
     "MEASURES FIRST(D.ts) AS t0, LAST(U.ts) AS t1 ONE ROW PER MATCH "
     "PATTERN (S D{{{k},}} U+) WITHIN INTERVAL '30' SECOND "
     "DEFINE D AS D.price < PREV(D.price), U AS U.price > PREV(U.price) AND U.volume > {v})"),
    ("SELECT * FROM {src} MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
     "MEASURES a.ts AS ta, c.ts AS tc ONE ROW PER MATCH STRATEGY SKIP_TILL_NEXT_MATCH "
     "PATTERN (SEQ(a, KL(b), c)) WITHIN INTERVAL '{k}' SECOND "
     "DEFINE a AS a.volume > {v}, b AS b.price > a.price, c AS c.volume > {v})"),
    ("SELECT * FROM {src} MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
     "MEASURES a.ts AS ta, b.ts AS tb ONE ROW PER MATCH STRATEGY SKIP_TILL_ANY_MATCH "
     "PATTERN (SEQ(a, b)) WITHIN INTERVAL '{k}' SECOND "
     "DEFINE a AS a.volume > {v}, b AS b.volume > {v} AND b.price > a.price)"),
]


def view_queries(n: int, src: str, seed: int = 3) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        template = TEMPLATES[i % len(TEMPLATES)]
        out.append(template.format(src=src, k=int(rng.integers(1, 4)),
                                   v=int(rng.integers(1200, 1700))))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 50, 100])
    args = parser.parse_args()

    import cepsql  # noqa: F401
    from cepsql.datagen import ticks_to_pandas
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.createDataFrame(ticks_to_pandas(args.rows)).cache().createOrReplaceTempView("bw_ticks")
    spark.table("bw_ticks").count()
    results = []
    for n in args.sizes:
        names = [f"bw_v{i}" for i in range(n)]
        for name, query in zip(names, view_queries(n, "bw_ticks")):
            spark.cep.sql(f"CREATE OR REPLACE TEMPORARY VIEW {name} AS {query}")
        spark.table(names[0]).count()  # warm the Python workers for both sides
        t0 = time.perf_counter()
        alone = {name: spark.table(name).collect() for name in names}
        separate = time.perf_counter() - t0
        t0 = time.perf_counter()
        wl = spark.cep.workload(names)
        frames = wl.dataframes()
        built = time.perf_counter() - t0
        shared = {name: df.collect() for name, df in frames.items()}
        together = time.perf_counter() - t0
        wl.close()
        same = all(sorted(map(repr, alone[k])) == sorted(map(repr, shared[k])) for k in names)
        matches = sum(len(v) for v in alone.values())
        results.append({"views": n, "rows": args.rows, "separate_s": separate,
                        "workload_s": together, "build_s": built,
                        "ratio": separate / together, "matches": matches, "identical": same})
        print(f"{n:4d} views: separate {separate:7.2f} s  workload {together:7.2f} s "
              f"(build {built:5.2f} s)  ratio {separate / together:5.2f}x  "
              f"matches {matches}  identical {same}", flush=True)
        for name in names:
            spark.cep.sql(f"DROP VIEW IF EXISTS {name}")
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "workload_spark.json"), "w") as out:
        json.dump(results, out, indent=1)
    _plot(results, os.path.join(RESULTS, "workload_spark.svg"))


def _plot(results: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3.4))
    sizes = [r["views"] for r in results]
    ax.plot(sizes, [r["ratio"] for r in results], marker="o")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xlabel("pattern views in the workload")
    ax.set_ylabel("speed-up over separate queries")
    ax.set_title(f"One shared pass vs one query per view ({results[0]['rows']} rows, local[2])",
                 fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
