"""cepsql vs a plain Spark SQL self-join of the same 3-variable sequence pattern.

    python benchmarks/bench_selfjoin.py                          # 10k, 30k, 100k events
    python benchmarks/bench_selfjoin.py --events 10000,30000,100000,300000
    python benchmarks/bench_selfjoin.py --pattern SEQ --repeat 3

The pattern is bench_plans.py's RARE-3 sequence (or its SEQ-3 with --pattern SEQ):
SEQ(a, b, c) over three symbols of ``generate_stock_stream``, each bound by
``x.symbol = '...'``, with two cross-variable predicates on ``difference`` and
``WITHIN INTERVAL 'w' SECOND``, under SKIP_TILL_ANY_MATCH (every combination: exactly
what a join returns). Two formulations run on the same cached DataFrame in the same
session:

  cepsql     spark.cep.sql(SELECT * FROM ticks MATCH_RECOGNIZE (... PATTERN (SEQ(a, b, c)) ...))
  self-join  SELECT a.ts, b.ts, c.ts FROM ticks a JOIN ticks b ON b.ts > a.ts AND
             b.ts <= a.ts + w AND <a-b predicate> JOIN ticks c ON c.ts > b.ts AND
             c.ts <= a.ts + w AND <b-c predicate> WHERE <the symbols>

Both are forced with the ``noop`` write format (best of --repeat); both must return the
same matches (counts compared, and the (a.ts, b.ts, c.ts) sets when small). Streams of
different lengths are prefixes of one generated stream.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from types import SimpleNamespace

import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import cepsql  # noqa: E402  (attaches spark.cep)
from bench_plans import build_cases, tune_window  # noqa: E402
from cepsql.datagen import generate_stock_stream, stock_rates  # noqa: E402


def self_join_sql(case, window: float) -> str:
    """The sequence as joins: strict ts order between neighbours, the window from the
    first event, the DEFINE predicates verbatim (the aliases are the variables)."""
    a, b, c = case.branches[0]
    w = f"INTERVAL '{window:g}' SECOND"
    preds = {v: [p.sql() for p in case.predicates if p.home == v] for v in (a, b, c)}

    def on(v: str) -> str:
        return "".join(f" AND {p}" for p in preds[v])
    return (f"SELECT {a}.ts AS {a}_ts, {b}.ts AS {b}_ts, {c}.ts AS {c}_ts\n"
            f"FROM ticks {a}\n"
            f"JOIN ticks {b} ON {b}.ts > {a}.ts AND {b}.ts <= {a}.ts + {w}{on(b)}\n"
            f"JOIN ticks {c} ON {c}.ts > {b}.ts AND {c}.ts <= {a}.ts + {w}{on(c)}\n"
            f"WHERE {a}.symbol = '{case.symbols[a]}' AND {b}.symbol = '{case.symbols[b]}' "
            f"AND {c}.symbol = '{case.symbols[c]}'" + on(a))


def _force(df) -> None:
    df.write.format("noop").mode("overwrite").save()


def best_of(repeat: int, run, slow_seconds: float) -> float:
    """Best wall time of up to repeat runs; a run slower than slow_seconds ends the
    series (one 100 s self-join says enough)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        seconds = time.perf_counter() - started
        best = min(best, seconds)
        if seconds > slow_seconds:
            break
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", default="10000,30000,100000", help="comma list of sizes")
    ap.add_argument("--pattern", default="RARE", choices=("RARE", "SEQ"))
    ap.add_argument("--repeat", type=int, default=2, help="runs per measurement, best kept")
    ap.add_argument("--slow-seconds", type=float, default=20.0,
                    help="a run slower than this is not repeated")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--algorithm", default=None,
                    help="cepsql.planner.algorithm for the cepsql side (default: cepsql's choice)")
    ap.add_argument("--trivial-cost", type=float, default=1000.0,
                    help="window budget, as in bench_plans.py")
    ap.add_argument("--calibration-events", type=int, default=20_000,
                    help="stream prefix the predicate constants and window are tuned on "
                         "(bench_plans.py's default stream)")
    ap.add_argument("--compare-limit", type=int, default=1_000_000,
                    help="compare the match sets row by row up to this many matches")
    ap.add_argument("--skip-selfjoin-above", type=int, default=0,
                    help="do not run the self-join on streams longer than this (0: always)")
    ap.add_argument("--seed", type=int, default=2018)
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    sizes = sorted(int(x) for x in args.events.split(","))
    conf = dict(item.split("=", 1) for item in args.conf)

    # the pattern: bench_plans's case, calibrated on its default stream
    calib = generate_stock_stream(args.calibration_events, seed=args.seed, difference=True)
    rates = stock_rates(seed=args.seed)
    plan_args = SimpleNamespace(seed=args.seed, sizes=[3], per_size=1, sets=[args.pattern])
    case = build_cases(calib, rates, plan_args)[0]
    case.window = tune_window(case, rates, args.trivial_cost, 30.0)
    cep_sql, join_sql = case.sql(), self_join_sql(case, case.window)
    print(f"pattern {case.name}, window {case.window:g} s, symbols "
          + ", ".join(f"{v}={s} ({rates[s]:.1f}/s)" for v, s in case.symbols.items()))
    print(cep_sql)
    print(join_sql + "\n")

    from cepsql.backends.spark.environment import require_java
    require_java()
    spark = cepsql.get_session(master=args.master,
                               conf={"spark.ui.showConsoleProgress": "false", **conf})
    if args.algorithm:
        spark.conf.set("cepsql.planner.algorithm", args.algorithm)
    print(f"Spark {spark.version}, master {spark.sparkContext.master}, shuffle partitions "
          f"{spark.conf.get('spark.sql.shuffle.partitions')}, "
          f"cepsql.planner.algorithm={args.algorithm or 'default'}, best of {args.repeat}")
    spark.range(100_000).selectExpr("sum(id)").collect()  # JVM warm-up, not measured

    full = generate_stock_stream(sizes[-1], seed=args.seed, difference=True)
    header = (f"{'events':>9} {'matches':>9} {'cepsql s':>9} {'cepsql ev/s':>12} "
              f"{'self-join s':>12} {'join ev/s':>11} {'join/cepsql':>12}  check")
    rows, ok = [], True
    with tempfile.TemporaryDirectory(prefix="cepsql-selfjoin-") as tmp:
        for n in sizes:
            path = os.path.join(tmp, f"ticks_{n}.parquet")
            pq.write_table(full.slice(0, n), path)
            ticks = spark.read.parquet(path).cache()
            ticks.count()
            ticks.createOrReplaceTempView("ticks")
            if not rows:  # first use of the Python workers and of both code paths
                _force(spark.cep.sql(cep_sql))
                _force(spark.sql(join_sql))
            cep_s = best_of(args.repeat, lambda: _force(spark.cep.sql(cep_sql)), args.slow_seconds)
            cep_df = spark.cep.sql(cep_sql).cache()  # one more run, kept for the check
            n_cep = cep_df.count()
            run_join = not args.skip_selfjoin_above or n <= args.skip_selfjoin_above
            join_s, check = None, "self-join skipped"
            if run_join:
                join_s = best_of(args.repeat, lambda: _force(spark.sql(join_sql)),
                                 args.slow_seconds)
                join_df = spark.sql(join_sql).cache()
                n_join = join_df.count()
                check = "same count" if n_join == n_cep else f"COUNT MISMATCH ({n_join})"
                if n_join == n_cep and n_cep <= args.compare_limit:
                    cols = join_df.columns
                    diff = (cep_df.select(*cols).exceptAll(join_df).count()
                            + join_df.exceptAll(cep_df.select(*cols)).count())
                    check = "same matches" if diff == 0 else f"MATCH MISMATCH ({diff} rows)"
                ok = ok and check.startswith("same")
                join_df.unpersist()
            cep_df.unpersist()
            ticks.unpersist()
            ratio = join_s / cep_s if join_s else None
            row = (f"{n:>9,} {n_cep:>9,} {cep_s:>9.3f} {n / cep_s:>12,.0f} "
                   + (f"{join_s:>12.3f} {n / join_s:>11,.0f} {ratio:>11.1f}x"
                      if join_s else f"{'-':>12} {'-':>11} {'-':>12}")
                   + f"  {check}")
            rows.append(row)
            if len(rows) == 1:
                print(header)
            print(row, flush=True)
    if not ok:
        print("!!!!!!!! the self-join and cepsql disagree (see check column)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
