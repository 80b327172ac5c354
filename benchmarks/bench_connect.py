"""Spark Connect against the classic session, with Spark's defaults (200 shuffle
partitions, AQE on), for a tiny query: a 1.4k-row view of generated ticks.

One run of this script starts two processes one after the other (pyspark's functions
build Connect columns in a process that started a Connect server, so a classic session
cannot run cepsql there): a local Spark Connect server
(``SparkSession.builder.remote("local[2]")``) and a classic ``local[2]`` session, each
with Spark's defaults. For each it times
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
import json
import statistics
import subprocess
import sys
import time
from importlib.resources import files
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import cepsql  # noqa: F401  (before the server starts: sets PYSPARK_PYTHON and friends)
from cepsql.datagen import ticks_to_pandas
from support.deploy_queries import statement_requests

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


def measure(mode: str, rows: int, runs: int, fixed: bool) -> dict:
    """Timings of one session kind, started the way users start it."""
    from pyspark.sql import SparkSession
    log4j = files("cepsql.conf").joinpath("log4j2.properties")  # a quiet console
    builder = (SparkSession.builder.config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}"))
    started = time.perf_counter()
    if mode == "connect":
        spark = builder.remote("local[2]").getOrCreate()
    else:
        spark = builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    out = {"start": time.perf_counter() - started,
           "shuffle": spark.conf.get("spark.sql.shuffle.partitions"),
           "aqe": spark.conf.get("spark.sql.adaptive.enabled")}
    spark.createDataFrame(ticks_to_pandas(rows, n_symbols=3)).createOrReplaceTempView("ticks")
    out["counts"] = [cep_count(spark), window_count(spark)]
    if mode == "connect":
        out["requests"] = statement_requests(spark, CEP)
    out["cep"] = median_seconds(lambda: cep_count(spark), runs)
    out["spark"] = median_seconds(lambda: window_count(spark), runs)
    if fixed:
        out["cep fixed 200"] = median_seconds(lambda: cep_count(spark, True), max(1, runs // 3))
    spark.stop()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1400)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--fixed", action="store_true",
                        help="also time the clause with a fixed 200-partition shuffle")
    parser.add_argument("--mode", choices=["connect", "classic"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:  # one session kind, in a process of its own: print its JSON
        print(json.dumps(measure(args.mode, args.rows, args.runs, args.fixed)))
        return 0

    results = {}
    for mode in ("connect", "classic"):  # one after the other: they share the cores
        command = [sys.executable, __file__, "--mode", mode, "--rows", str(args.rows),
                   "--runs", str(args.runs)] + (["--fixed"] if args.fixed else [])
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode:
            sys.stderr.write(done.stderr[-4000:])
            return done.returncode
        results[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    connect, classic = results["connect"], results["classic"]
    assert connect["counts"] == classic["counts"], results  # same rows both ways

    print(f"{args.rows} rows, 3 symbols: {classic['counts'][0]} matches; shuffle partitions "
          f"{classic['shuffle']}, AQE {classic['aqe']}; median of {args.runs} runs (seconds)")
    print(f"{'query':<16}{'connect':>10}{'classic':>10}")
    queries = ("cep", "spark") + (("cep fixed 200",) if args.fixed else ())
    for query in queries:
        print(f"{query:<16}{connect[query]:>10.3f}{classic[query]:>10.3f}")
    print("\nratios")
    print(f"  cepsql Connect / classic            {connect['cep'] / classic['cep']:6.2f}"
          "   (target < 2)")
    print(f"  cepsql classic / Spark window query {classic['cep'] / classic['spark']:6.2f}"
          "   (target < 2)")
    print(f"  cepsql Connect / Spark window query {connect['cep'] / connect['spark']:6.2f}")
    if args.fixed:
        for name, got in results.items():
            print(f"  {name}: fixed 200 partitions / chosen  "
                  f"{got['cep fixed 200'] / got['cep']:6.2f}")
    requests = connect["requests"]
    print(f"\nSpark Connect requests of one spark.cep.sql call before its job: "
          f"{requests['config']} conf, {requests['analyze']} analyze/schema")
    return 0


if __name__ == "__main__":
    sys.exit(main())
