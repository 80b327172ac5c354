"""PERMUTE whose items have inner choices (issue 12, point 3), in-process.

  PATTERN (PERMUTE(X0+, X1, ..., X{n-1}))   X0 AS v <= 2, Xi AS v >= i % 5, random v

Such a PERMUTE can be compiled as the alternation of its n! orders (up to 7 items) or
searched (program.py / matcher.pyx _attempt: the order fixed one position at a time by
existence runs over the used-items mask, then the preferred match under that order;
the default from program.MIN_SEARCHED_PERMUTE items). Both run side by side in this
process for 3-7 items (the choice forced through that constant) and must give the same
rows; the
ratio is expanded / searched time. 8-10 items run searched only (the expansion would
exceed the program size limit).

    python benchmarks/bench_permute.py [--rows 2000] [--plot benchmarks/results/permute.png]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from unittest import mock

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import cepsql  # noqa: E402
from cepsql.compile import program  # noqa: E402


def _sql(n: int) -> str:
    items = ", ".join(["X0+"] + [f"X{i}" for i in range(1, n)])
    defines = ", ".join(["X0 AS v <= 2"] + [f"X{i} AS v >= {i % 5}" for i in range(1, n)])
    return ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES MATCH_NUMBER() AS mn, "
            f"CLASSIFIER() AS c ALL ROWS PER MATCH PATTERN (PERMUTE({items})) "
            f"DEFINE {defines})")


def _timed(sql: str, table: pd.DataFrame, search_from: int) -> tuple[float, pd.DataFrame]:
    with mock.patch.object(program, "MIN_SEARCHED_PERMUTE", search_from):
        start = time.perf_counter()
        out = cepsql.match_recognize(sql, t=table)
        return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--plot", default=None)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    table = pd.DataFrame({"id": np.arange(args.rows), "v": rng.integers(0, 10, args.rows)})
    _timed(_sql(3), table.head(50), 2)   # warm-up (imports, first compile)
    print(f"rows={args.rows}  load: {os.getloadavg()[0]:.1f}")
    print(f"{'items':>5} {'matches':>8} {'searched s':>11} {'expanded s':>11} {'ratio':>7}")
    sizes, searched_s, expanded_s = [], [], []
    for n in range(3, 11):
        sql = _sql(n)
        t_search, got = _timed(sql, table, 2)
        t_expand = float("nan")
        if n <= 7:
            t_expand, want = _timed(sql, table, 99)
            assert got.equals(want), f"searched and expanded differ at {n} items"
        ratio = t_expand / t_search if n <= 7 else float("nan")
        print(f"{n:>5} {got['mn'].nunique():>8} {t_search:>11.3f} {t_expand:>11.3f} "
              f"{ratio:>7.2f}")
        sizes.append(n)
        searched_s.append(t_search)
        expanded_s.append(t_expand)
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(sizes, searched_s, "o-", label="searched (order by existence runs)")
        ax.plot(sizes, expanded_s, "s--", label="expanded (n! alternatives)")
        ax.set_xlabel("PERMUTE items (X0+ and n-1 variables)")
        ax.set_ylabel(f"seconds, {args.rows} rows")
        ax.set_yscale("log")
        ax.legend()
        ax.set_title("PERMUTE with inner choices")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
