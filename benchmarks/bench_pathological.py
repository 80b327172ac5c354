"""Pathological SQL:2016 patterns (issue 24, A3 and B8), in-process, before and after.

  (A*)*B, B AS FIRST(A.x) = 5   B depends on the match: per-start search
  (A*)+B, B AS x = 5            B never true: early stop; one pass over an open chunk
  PERMUTE(A+, C+, D+, E+, F+, G+, B), B AS x = 5   searched PERMUTE, no match
  (A{700}){700}                 a counted loop, longer than the input

on all-ones rows (x = 1), 10^3 .. 10^5 rows (10^5: past one 65,536-row chunk, so the
first chunk's partition is open). Each shape runs in a subprocess per code tree with a
time limit, so a tree can be the code before a change: --before ROOT, a copy of the
repository at the old commit with its compiled .so files (e.g. ``git archive`` of the
commit plus the old cepsql/_ext/*.so). Prints process CPU seconds per tree (wall time
is noisy on a shared machine), the ratio, and the load average beside each line.

    python benchmarks/bench_pathological.py [--before /tmp/sqlmatch_before] [--limit 60]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SIZES = (1_000, 10_000, 65_535, 65_536, 100_000)

_HEAD = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES MATCH_NUMBER() AS mn "
         "ONE ROW PER MATCH PATTERN ")
SHAPES = {
    "(A*)*B first": _HEAD + "((A*)*B) DEFINE A AS x = 1, B AS FIRST(A.x) = 5)",
    "(A*)+B never": _HEAD + "((A*)+B) DEFINE A AS x = 1, B AS x = 5)",
    "PERMUTE 7": _HEAD + "(PERMUTE(A+, C+, D+, E+, F+, G+, B)) DEFINE A AS x = 1, "
                 "C AS x = 1, D AS x = 1, E AS x = 1, F AS x = 1, G AS x = 1, B AS x = 5)",
    "(A{700}){700}": _HEAD + "((A{700}){700}) DEFINE A AS x = 1)",
}

# run in the child: time one query over n all-ones rows, print "seconds matches"
_CHILD = """
import sys, time
import numpy as np, pandas as pd
import cepsql
sql, n = sys.argv[1], int(sys.argv[2])
t = pd.DataFrame({"id": np.arange(n), "x": np.ones(n, dtype=np.int64)})
start = time.process_time()
try:
    out = len(cepsql.match_recognize(sql, t=t))
except Exception as exc:
    out = type(exc).__name__
print(f"{time.process_time() - start:.3f} {out}")
"""


def timed(root: str, sql: str, n: int, limit: float) -> tuple[float | None, str]:
    """(CPU seconds, matches or error name) of sql over n rows with root's cepsql; None
    seconds past the (wall) limit."""
    env = dict(os.environ, PYTHONPATH=root)  # and cwd: "-c" puts it first on sys.path
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, sql, str(n)], env=env,
                              cwd=root, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return None, "-"
    if done.returncode:
        return None, "crash"
    seconds, result = done.stdout.split()[-2:]
    return float(seconds), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=None, help="repository copy with the old code")
    parser.add_argument("--limit", type=float, default=60.0, help="seconds per run")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    args = parser.parse_args()
    trees = ([("before", args.before)] if args.before else []) + [("after", ROOT)]
    print(f"load: {os.getloadavg()[0]:.1f}  limit {args.limit:.0f} s per run")
    print(f"{'shape':>15} {'rows':>7} " + " ".join(f"{name + ' cpu s':>18}" for name, _ in trees)
          + (f" {'ratio':>7}" if len(trees) == 2 else "") + "  load")
    for name, sql in SHAPES.items():
        for n in map(int, args.sizes.split(",")):
            results = [timed(root, sql, n, args.limit) for _, root in trees]
            cells = [f"{'>' + str(int(args.limit)) if s is None else f'{s:.3f}':>9} ({m:>6})"
                     for s, m in results]
            line = f"{name:>15} {n:>7} " + " ".join(cells)
            if len(results) == 2 and results[1][0]:
                before = results[0][0] if results[0][0] is not None else args.limit
                line += f" {'>' if results[0][0] is None else ' '}{before / results[1][0]:6.1f}x"
            print(f"{line}  {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
