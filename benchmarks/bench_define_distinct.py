"""DISTINCT and list aggregates in DEFINE (issue 12, point 3) vs the plain running
aggregate on the same rows, in-process, SQL:2016 mode (CEP mode without WITHIN emits
quadratically many matches here, which would measure the output, not the aggregate).

    python benchmarks/bench_define_distinct.py              # 200k rows
    python benchmarks/bench_define_distinct.py --rows 50000 --values 8

A DISTINCT aggregate keeps no running state: each evaluation lists the thread's rows
(its history) and folds the first row of each value, so its cost grows with the match
length times the distinct values. The plain aggregate (a running accumulator) is the
baseline: both queries find matches of about the same length (A+ while fewer than
--values distinct / rows). Prints rows/s and the ratio; plot:
benchmarks/results/bench_define_distinct.png.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import pyarrow as pa

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import cepsql  # noqa: E402

QUERY = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY id MEASURES "
         "count(*) AS n ONE ROW PER MATCH {mode}PATTERN (A+) DEFINE A AS {cond})")
CASES = [  # (name, condition, baseline condition)
    ("count(DISTINCT)", "count(DISTINCT A.x) < {v}", "count(A.x) < {v}"),
    ("sum(DISTINCT)", "sum(DISTINCT A.x) < {s}", "sum(A.x) < {s}"),
    ("size(array_agg)", "size(array_agg(A.x)) < {v}", "count(A.x) < {v}"),
    ("try_element_at", "coalesce(try_element_at(array_agg(A.x), -2), 0) <> {v}",
     "coalesce(LAST(A.x, 1), 0) <> {v}"),
]


def _table(rows: int, values: int) -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table({"k": rng.integers(0, 16, rows), "id": np.arange(rows),
                     "x": rng.integers(0, values * 2, rows)})


def _time(sql: str, table: pa.Table, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        cepsql.match_recognize(sql, t=table)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--values", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    table = _table(args.rows, args.values)
    fmt = {"v": args.values, "s": args.values * args.values}
    results = []
    for mode_name, mode in (("SQL:2016", ""),):
        for name, cond, base in CASES:
            t_new = _time(QUERY.format(mode=mode, cond=cond.format(**fmt)), table, args.repeat)
            t_base = _time(QUERY.format(mode=mode, cond=base.format(**fmt)), table, args.repeat)
            results.append((f"{mode_name} {name}", args.rows / t_new, args.rows / t_base))
            print(f"{mode_name:9s} {name:16s} {args.rows / t_new:12,.0f} rows/s  "
                  f"baseline {args.rows / t_base:12,.0f} rows/s  ratio {t_new / t_base:5.2f}x")
    os.makedirs(os.path.join(ROOT, "benchmarks", "results"), exist_ok=True)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 4))
    ys = np.arange(len(results))
    ax.barh(ys - 0.2, [r[1] for r in results], 0.4, label="DISTINCT / list form")
    ax.barh(ys + 0.2, [r[2] for r in results], 0.4, label="running baseline")
    ax.set_yticks(ys, [r[0] for r in results])
    ax.set_xlabel("rows/s (in-process)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(ROOT, "benchmarks", "results", "bench_define_distinct.png"))


if __name__ == "__main__":
    main()
