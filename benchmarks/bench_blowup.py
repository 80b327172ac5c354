"""Blow-up benchmark: patterns whose naive backtracking is exponential or quadratic,
run in-process (cepsql.match_recognize, no Spark) over 1k/2k/4k/8k rows.

  nested       PATTERN ((A+)+ B)           A always true, B never: no match at any start
  alternation  PATTERN ((A|B|C)+ D)        A, B, C overlap (all true), D never
  optional     PATTERN ((A? B? C?)+ D)     empty iterations possible, D never

For each size the best of --repeat runs is printed with the growth ratio against the
previous (half) size: ~2 means linear in the run length, ~4 quadratic, larger = blow-up.
A run that exceeds --timeout seconds stops that pattern's series.

    python benchmarks/bench_blowup.py [--sizes 1000,2000,4000,8000] [--repeat 1] [--timeout 120]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import cepsql  # noqa: E402

PATTERNS = {
    "nested (A+)+ B": ("((A+)+ B)", "B AS v < 0"),
    "alternation (A|B|C)+ D": ("((A | B | C)+ D)", "A AS v >= 0, B AS v >= 1, C AS v >= 2, D AS v < 0"),
    "optional (A? B? C?)+ D": ("((A? B? C?)+ D)", "A AS v >= 0, B AS v >= 1, C AS v >= 2, D AS v < 0"),
}


def query(pattern: str, define: str) -> str:
    return (f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES count(*) AS n "
            f"PATTERN {pattern} DEFINE {define})")


def table(rows: int) -> pd.DataFrame:
    return pd.DataFrame({"id": range(rows), "v": [i % 7 for i in range(rows)]})


def time_one(sql: str, rows: int, repeat: int) -> float:
    t = table(rows)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        out = cepsql.match_recognize(sql, t=t)
        best = min(best, time.perf_counter() - start)
        assert len(out) == 0, "D/B never holds: no match expected"
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,2000,4000,8000")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="stop a series once one size takes longer than this")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    # warm-up (imports, first parse)
    cepsql.match_recognize(query("(A B)", "B AS v < 0"), t=table(10))
    print(f"{'pattern':28} {'rows':>6} {'seconds':>9} {'ratio':>7}")
    for name, (pattern, define) in PATTERNS.items():
        sql = query(pattern, define)
        prev = None
        for n in sizes:
            secs = time_one(sql, n, args.repeat)
            ratio = "" if prev is None else f"{secs / prev:7.2f}"
            print(f"{name:28} {n:6d} {secs:9.3f} {ratio:>7}", flush=True)
            prev = secs
            if secs > args.timeout:
                print(f"{name:28} stopped: {secs:.1f}s > --timeout {args.timeout}s")
                break


if __name__ == "__main__":
    main()
