"""Blow-up benchmark (issue 13, point 5): SQL:2016 patterns whose attempts fail late, run
in-process (cepsql.match_recognize, no Spark).

  nested       PATTERN ((A+)+ B)          A always true, B never
  star         PATTERN (A* B)             A always true, B never
  alternation  PATTERN ((A|B|C)+ D)       A, B, C overlap, D never
  optional     PATTERN ((A? B? C?)+ D)    empty iterations possible, D never
  rare         PATTERN ((A|B)* C)         C on one row in 2,000, right after a row that
                                          is neither A nor B: each C matches alone
  rare-last    PATTERN ((A|B)* C)         the same with C only on the last row
  tracked      PATTERN (A+ B)             B AS B.v > A.v + 5 (reads A's last row, so
                                          the per-start search with its memo applies),
                                          data as rare-last: B never holds

Searches run side by side in this process: the plain per-start search (a Pike VM from
every start row in turn, the matcher before issue 13; SqlMatcher.set_search(False,
False, False)) and the current one (all start rows in one pass where the DEFINEs
allow, else per start with a memo of failed attempts; early stop once a label every
match needs holds on no later row). All must give the same rows. The per-start search
is quadratic here, so it only runs up to --baseline-max rows; the ratio column is
per-start / current time at the same size. The no-early-stop column switches only the
early stop off (what the one pass or the memo alone gives). The growth column is the
current search's time against the previous size (~ the size ratio: linear).

    python benchmarks/bench_blowup.py [--sizes 1000,4000,16000,100000]
        [--baseline-max 4000] [--repeat 1] [--plot benchmarks/results/blowup.png]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import cepsql  # noqa: E402
from cepsql.runtime import worker as worker_module  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
RARE_EVERY = 2_000


def _mod7(rows: int) -> pd.DataFrame:
    return pd.DataFrame({"id": np.arange(rows), "v": np.arange(rows) % 7})


def _rare(rows: int, last_only: bool) -> pd.DataFrame:
    """v alternates 0/1 (A, B); C (9) on rare rows, each right after a breaker (5)."""
    v = np.arange(rows) % 2
    cs = [rows - 1] if last_only else list(range(RARE_EVERY - 1, rows, RARE_EVERY))
    for c in cs:
        v[c - 1], v[c] = 5, 9
    return pd.DataFrame({"id": np.arange(rows), "v": v})


ABC_D = "A AS v >= 0, B AS v >= 1, C AS v >= 2, D AS v < 0"
RARE_DEFINE = "A AS v = 0, B AS v = 1, C AS v = 9"
PATTERNS = {  # name: (pattern, define, table(rows), expected match count(rows))
    "nested (A+)+ B": ("(A+)+ B", "A AS v >= 0, B AS v < 0", _mod7, lambda n: 0),
    "star A* B": ("A* B", "A AS v >= 0, B AS v < 0", _mod7, lambda n: 0),
    "alternation (A|B|C)+ D": ("(A | B | C)+ D", ABC_D, _mod7, lambda n: 0),
    "optional (A? B? C?)+ D": ("(A? B? C?)+ D", ABC_D, _mod7, lambda n: 0),
    "rare (A|B)* C": ("(A | B)* C", RARE_DEFINE, lambda n: _rare(n, False),
                      lambda n: n // RARE_EVERY),
    "rare-last (A|B)* C": ("(A | B)* C", RARE_DEFINE, lambda n: _rare(n, True), lambda n: 1),
    "tracked A+ B": ("A+ B", "A AS v >= 0, B AS B.v > A.v + 5", lambda n: _rare(n, True),
                     lambda n: 0),
}


def query(pattern: str, define: str) -> str:
    return (f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES count(*) AS n "
            f"PATTERN ({pattern}) DEFINE {define})")


@contextlib.contextmanager
def search(one_pass: bool, early_stop: bool, memo: bool = True):
    """The matcher with its search strategies switched (both off: as before issue 13)."""
    original = worker_module.MatchWorker._new_matcher

    def new_matcher(self):
        matcher = original(self)
        matcher.set_search(one_pass=one_pass, early_stop=early_stop, memo=memo)
        return matcher

    worker_module.MatchWorker._new_matcher = new_matcher
    try:
        yield
    finally:
        worker_module.MatchWorker._new_matcher = original


def time_one(sql: str, table: pd.DataFrame, repeat: int) -> tuple[float, pd.DataFrame]:
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = cepsql.match_recognize(sql, t=table)
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,4000,16000,100000")
    ap.add_argument("--baseline-max", type=int, default=4000,
                    help="largest size the per-start (quadratic) search runs on")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--plot", default=os.path.join(RESULTS, "blowup.png"),
                    help="save seconds vs rows here ('' for none)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    cepsql.match_recognize(query("A B", "B AS v < 0"), t=_mod7(10))  # warm-up
    print(f"{'pattern':24} {'rows':>7} {'per-start s':>11} {'no e.stop s':>11} "
          f"{'current s':>10} {'ratio':>8} {'growth':>7}")
    series: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for name, (pattern, define, make, expected) in PATTERNS.items():
        sql = query(pattern, define)
        prev = None
        series[name] = {"per-start": [], "no early stop": [], "current": []}
        for n in sizes:
            table = make(n)
            secs, out = time_one(sql, table, args.repeat)
            assert len(out) == expected(n), (name, n, len(out))
            base = ""
            ratio = ""
            with search(one_pass=True, early_stop=False):
                one_secs, one_out = time_one(sql, table, args.repeat)
            assert one_out.equals(out), f"{name}: searches differ at {n} rows"
            series[name]["no early stop"].append((n, one_secs))
            if n <= args.baseline_max:
                with search(one_pass=False, early_stop=False, memo=False):
                    base_secs, base_out = time_one(sql, table, args.repeat)
                assert base_out.equals(out), f"{name}: searches differ at {n} rows"
                series[name]["per-start"].append((n, base_secs))
                base = f"{base_secs:11.3f}"
                ratio = f"{base_secs / secs:7.1f}x"
            growth = "" if prev is None else f"{secs / prev:7.2f}"
            series[name]["current"].append((n, secs))
            print(f"{name:24} {n:7d} {base:>11} {one_secs:11.3f} {secs:10.3f} {ratio:>8} "
                  f"{growth:>7}",
                  flush=True)
            prev = secs
    if args.plot:
        plot(series, args.plot)
        print(f"plot: {args.plot}")


def plot(series: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(11, 5))
    for i, (name, runs) in enumerate(series.items()):
        color = f"C{i}"
        for mode, style in (("per-start", "--"), ("no early stop", ":"), ("current", "-")):
            if runs[mode]:
                xs, ys = zip(*runs[mode])
                ax.plot(xs, ys, style, marker="o", color=color, label=f"{name} ({mode})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rows (one partition)")
    ax.set_ylabel("seconds, in-process")
    ax.set_title("Failing SQL:2016 attempts: plain per-start search vs one pass / memo "
                 "+ early stop")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path)


if __name__ == "__main__":
    main()
