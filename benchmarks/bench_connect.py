"""Spark Connect against the classic session, with Spark's defaults (200 shuffle
partitions, AQE on), for a tiny query: a 1.4k-row view of generated ticks.

One process: ``SparkSession.builder.remote("local[2]")`` starts a local Spark Connect
server, which runs a classic SparkSession in this same process; both sessions share one
SparkContext (same JVM, same cores), so the comparison is fair. For each session it times
(median of --runs, after one warm-up run)

* cep:   ``spark.cep.sql(MATCH_RECOGNIZE ...).count()`` (PARTITION BY symbol, A B+)
* spark: Spark's own comparable query, a LAG window over the same view, ``count()``

and prints the ratios the defaults are judged by: Connect / classic for the same cepsql
query (target < 2), classic cepsql / classic Spark window query (target < 2). It also
counts the Spark Connect requests one ``spark.cep.sql`` call makes before its job
(conf reads, analyze/schema requests). ``--fixed`` adds the behaviour before the
partition choice: the clause's shuffle with a fixed 200 partitions (AQE coalescing off
for the cepsql query only), which took 20-40 s a query under load.

The server starts with cepsql's console settings (no progress bars, cepsql's log4j2
configuration, as docs/databricks.md shows); neither changes the plans timed.
Timings on a loaded machine are noisy: compare ratios within one run.

    python benchmarks/bench_connect.py [--rows 1400] [--runs 7] [--fixed]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from importlib.resources import files

import cepsql  # noqa: F401  (before the server starts: sets PYSPARK_PYTHON and friends)
from cepsql.datagen import ticks_to_pandas

CEP = """SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.price) AS start_price, LAST(B.price) AS bottom, COUNT(B.*) AS falls
  ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS B.price < PREV(B.price))"""
WINDOW = """SELECT count(*) FROM (
  SELECT price, LAG(price) OVER (PARTITION BY symbol ORDER BY ts) AS prev FROM ticks)
WHERE price < prev"""
COALESCE = "spark.sql.adaptive.coalescePartitions.enabled"


def median_seconds(action, runs: int) -> float:
    action()  # warm-up: Python workers, code generation
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cep_count(spark, fixed: bool = False) -> int:
    if not fixed:
        return spark.cep.sql(CEP).count()
    spark.conf.set(COALESCE, "false")  # the clause's shuffle keeps all 200 partitions
    try:
        return spark.cep.sql(CEP).count()
    finally:
        spark.conf.unset(COALESCE)


def window_count(spark) -> int:
    return spark.sql(WINDOW).collect()[0][0]


def connect_requests(spark) -> dict[str, int]:
    """Connect requests of one spark.cep.sql call (the statement, no job)."""
    client = spark.client
    counts = {"config": 0, "analyze": 0}

    def counted(kind, call):
        def wrapper(*args, **kwargs):
            counts[kind] += 1
            return call(*args, **kwargs)
        return wrapper
    client.config = counted("config", client.config)
    client._analyze = counted("analyze", client._analyze)
    try:
        spark.cep.sql(CEP)
    finally:
        del client.config, client._analyze
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1400)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--fixed", action="store_true",
                        help="also time the clause with a fixed 200-partition shuffle")
    args = parser.parse_args()

    from pyspark.sql import SparkSession
    started = time.perf_counter()
    log4j = files("cepsql.conf").joinpath("log4j2.properties")  # a quiet console
    connect = (SparkSession.builder.remote("local[2]")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
               .getOrCreate())
    classic = SparkSession._instantiatedSession  # the server's own session, same JVM
    print(f"local Spark Connect server up in {time.perf_counter() - started:.1f} s; "
          f"shuffle partitions {connect.conf.get('spark.sql.shuffle.partitions')}, "
          f"AQE {connect.conf.get('spark.sql.adaptive.enabled')}", file=sys.stderr)

    ticks = ticks_to_pandas(args.rows, n_symbols=3)
    sessions = {"connect": connect, "classic": classic}
    for spark in sessions.values():
        spark.createDataFrame(ticks).createOrReplaceTempView("ticks")
    counts = {name: (cep_count(s), window_count(s)) for name, s in sessions.items()}
    assert counts["connect"] == counts["classic"], counts  # same rows both ways

    requests = connect_requests(connect)
    times = {}
    for name, spark in sessions.items():
        times[name, "cep"] = median_seconds(lambda: cep_count(spark), args.runs)
        times[name, "spark"] = median_seconds(lambda: window_count(spark), args.runs)
        if args.fixed:
            times[name, "cep fixed 200"] = median_seconds(lambda: cep_count(spark, True),
                                                          max(1, args.runs // 3))

    print(f"\n{args.rows} rows, 3 symbols: {counts['classic'][0]} matches; median of "
          f"{args.runs} runs (seconds)")
    print(f"{'query':<16}{'connect':>10}{'classic':>10}")
    for query in ("cep", "spark") + (("cep fixed 200",) if args.fixed else ()):
        print(f"{query:<16}{times['connect', query]:>10.3f}{times['classic', query]:>10.3f}")
    print("\nratios")
    print(f"  cepsql Connect / classic            {times['connect', 'cep'] / times['classic', 'cep']:6.2f}"
          "   (target < 2)")
    print(f"  cepsql classic / Spark window query {times['classic', 'cep'] / times['classic', 'spark']:6.2f}"
          "   (target < 2)")
    print(f"  cepsql Connect / Spark window query {times['connect', 'cep'] / times['connect', 'spark']:6.2f}")
    if args.fixed:
        for name in sessions:
            print(f"  {name}: fixed 200 partitions / chosen  "
                  f"{times[name, 'cep fixed 200'] / times[name, 'cep']:6.2f}")
    print(f"\nSpark Connect requests of one spark.cep.sql call before its job: "
          f"{requests['config']} conf, {requests['analyze']} analyze/schema")
    connect.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
