"""CEP-mode benchmark: SASE+'s Kleene-closure workload, run in-process.

    PATTERN (a+ b)  a.price > LAST(a.price, 1)  (rising run)   -- iterator on the last element
                    a.price >= avg(a.price)                     -- iterator on an aggregate
    b AS b.price < LAST(a.price)

per STRATEGY (PARTITION_CONTIGUITY, SKIP_TILL_NEXT_MATCH, SKIP_TILL_ANY_MATCH is
exponential in the window for a+ and is run on a small window), windows of 500 / 2000
rows, with run merging on and off (CEPSQL_CEP_MERGE=0). Prints events/second, matches,
runs created / merged and the merging speed-up.

    python benchmarks/bench_cep.py [--rows 20000] [--windows 500,2000] [--repeat 1]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import cepsql  # noqa: E402
from cepsql.runtime import cep_worker  # noqa: E402

PREDICATES = {
    "last": "a AS count(a.*) = 1 OR a.price > LAST(a.price, 1), b AS b.price < LAST(a.price)",
    "avg": "a AS a.price >= avg(a.price), b AS b.price < LAST(a.price)",
}


def ticks(rows: int, symbols: int = 4, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    steps = rng.normal(0, 1, rows)
    return pd.DataFrame({"sym": rng.integers(0, symbols, rows), "ts": np.arange(rows),
                         "price": 100 + np.cumsum(steps)})


def query(strategy: str, pred: str, window: int) -> str:
    return ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts "
            "MEASURES count(*) AS n, FIRST(a.ts) AS t0 ONE ROW PER MATCH "
            f"STRATEGY {strategy} PATTERN (a+ b) WITHIN {window} ROWS "
            f"DEFINE {PREDICATES[pred]})")


def measure(sql: str, df: pd.DataFrame, merge: bool, repeat: int):
    os.environ["CEPSQL_CEP_MERGE"] = "1" if merge else "0"
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = cepsql.match_recognize(sql, t=df)
        best = min(best, time.perf_counter() - t0)
    return best, len(out), dict(cep_worker.LAST_STATS)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--windows", default="500,2000")
    ap.add_argument("--any-rows", type=int, default=2000)
    ap.add_argument("--any-window", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--preds", default="last,avg",
                    help="avg under SKIP_TILL_NEXT_MATCH, window 2000: ~6M matches, minutes")
    args = ap.parse_args()
    print(f"{'strategy':22} {'pred':5} {'win':>5} {'rows':>6} {'merge':>5} {'sec':>8} "
          f"{'events/s':>10} {'matches':>9} {'runs':>10} {'merged':>10} {'speedup':>7}")
    cases = []
    for window in [int(w) for w in args.windows.split(",")]:
        for strategy in ("PARTITION_CONTIGUITY", "SKIP_TILL_NEXT_MATCH"):
            for pred in args.preds.split(","):
                cases.append((strategy, pred, window, args.rows))
    for pred in args.preds.split(","):
        cases.append(("SKIP_TILL_ANY_MATCH", pred, args.any_window, args.any_rows))
    cepsql.match_recognize(query("SKIP_TILL_NEXT_MATCH", "last", 10), t=ticks(200))  # warm-up
    for strategy, pred, window, rows in cases:
        df = ticks(rows)
        sql = query(strategy, pred, window)
        times = {}
        for merge in (True, False):
            sec, n, st = measure(sql, df, merge, args.repeat)
            times[merge] = sec
            speed = "" if merge else f"{times[False] / times[True]:.2f}"
            print(f"{strategy:22} {pred:5} {window:5d} {rows:6d} {str(merge):>5} {sec:8.3f} "
                  f"{rows / sec:10.0f} {n:9d} {st.get('runs_created', 0):10d} "
                  f"{st.get('runs_merged', 0):10d} {speed:>7}", flush=True)


if __name__ == "__main__":
    main()
