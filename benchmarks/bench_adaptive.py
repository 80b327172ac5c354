"""Adaptive re-planning inside the worker vs a static in-worker plan (issue 13, point 3),
after SIGMOD'19 Figure 13: a stream whose event-type rates change every x seconds.

    python benchmarks/bench_adaptive.py                   # 300k events, x = 10 ... 1000 s
    python benchmarks/bench_adaptive.py --rows 1000000 --repeat 3 --chunk 65536

The stream has 100 events per second of types A, B, C, D. Two regimes alternate every x
seconds of data: in one A is rare and C frequent, in the other the reverse. The pattern
SEQ(a, b, c) within 1 second with cross conditions; both runs plan inside the task from
the first rows (cepsql.stats.mode=worker semantics); the static one keeps that plan, the
adaptive one re-plans when the newest rows' statistics drift. In-process (one task),
best of --repeat; the matches (with MATCH_NUMBER) must be identical. Prints events/s
and the ratio per x; plot: benchmarks/results/bench_adaptive.png.
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

from cepsql.backends.local.engine import run_local  # noqa: E402
from cepsql.runtime.run_stats import RunStatistics  # noqa: E402
from cepsql.runtime.adaptive import AdaptiveSettings  # noqa: E402
from cepsql.compile.clause import plan_query  # noqa: E402
from cepsql.stats.worker import InWorkerStatistics  # noqa: E402

SQL = """
SELECT * FROM t MATCH_RECOGNIZE (
  ORDER BY ts
  MEASURES a.ts AS ta, c.ts AS tc, MATCH_NUMBER() AS mn
  STRATEGY SKIP_TILL_ANY_MATCH
  PATTERN (SEQ(a, b, c)) WITHIN INTERVAL '1' SECOND
  DEFINE a AS typ = 'A',
         b AS typ = 'B' AND b.v > a.v,
         c AS typ = 'C' AND c.v > b.v AND c.w = a.w)
"""
RATES = {0: [0.01, 0.15, 0.69, 0.15], 1: [0.69, 0.15, 0.01, 0.15]}  # A B C D per regime
EVENTS_PER_SECOND = 100


def stream(rows: int, period_s: float, seed: int = 0) -> pa.Table:
    """rows events, 10 ms apart; the type rates flip every period_s seconds."""
    rng = np.random.default_rng(seed)
    regime = (np.arange(rows) // int(period_s * EVENTS_PER_SECOND)) % 2
    u = rng.random(rows)
    typ = np.empty(rows, dtype=object)
    for r, probs in RATES.items():
        edges = np.cumsum(probs)
        kinds = np.searchsorted(edges, u, side="right").clip(0, 3)
        typ[regime == r] = np.array(list("ABCD"))[kinds[regime == r]]
    ts = (np.arange(rows, dtype=np.int64) * 10_000).astype("datetime64[us]")
    return pa.table({"ts": pa.array(ts), "typ": pa.array(typ.tolist()),
                     "v": rng.integers(0, 100, rows), "w": rng.integers(0, 4, rows)})


def planner(settings: AdaptiveSettings | None):
    def plan(spec, schema, sql, **kw):
        kw["statistics"] = InWorkerStatistics(10_000, adaptive=settings)
        return plan_query(spec, schema, sql, **kw)
    return plan


def timed(table: pa.Table, settings: AdaptiveSettings | None):
    stats = RunStatistics()
    start = time.perf_counter()
    out = run_local(SQL, {"t": table}, planner=planner(settings), stats=stats)
    return time.perf_counter() - start, out, stats.last.get("adaptive_switches", 0)


def best_of(table: pa.Table, settings: AdaptiveSettings, repeat: int):
    """Static and adaptive runs interleaved (the machine's load hits both alike)."""
    static = adapt = (float("inf"), None, 0)
    for _ in range(repeat):
        static = min(static, timed(table, None), key=lambda r: r[0])
        adapt = min(adapt, timed(table, settings), key=lambda r: r[0])
    return static, adapt


def canonical(table: pa.Table):
    return sorted(zip(*(table.column(c).to_pylist() for c in ("mn", "ta", "tc"))))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--chunk", type=int, default=16384)
    parser.add_argument("--threshold", type=float, default=1.0)
    parser.add_argument("--periods", default="10,30,100,300,1000")
    args = parser.parse_args()
    settings = AdaptiveSettings(threshold=args.threshold, chunk_rows=args.chunk)
    periods = [float(p) for p in args.periods.split(",")]
    print(f"{args.rows} events, {EVENTS_PER_SECOND}/s, chunk {args.chunk}, "
          f"threshold {args.threshold}")
    print(f"{'x (s)':>8} {'static ev/s':>12} {'adaptive ev/s':>14} {'ratio':>6} "
          f"{'switches':>8} {'matches':>8} identical")
    results = []
    for period in periods:
        table = stream(args.rows, period)
        (t_static, static, _), (t_adapt, moving, switches) = best_of(table, settings,
                                                                      args.repeat)
        same = canonical(static) == canonical(moving)
        results.append((period, args.rows / t_static, args.rows / t_adapt))
        print(f"{period:>8g} {args.rows / t_static:>12,.0f} {args.rows / t_adapt:>14,.0f} "
              f"{t_static / t_adapt:>6.2f} {switches:>8} {static.num_rows:>8} {same}")
        if not same:
            raise SystemExit("adaptive and static matches differ")
    plot(results, args)


def plot(results, args) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    x = [r[0] for r in results]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(x, [r[1] for r in results], "o-", label="static (planned from first rows)")
    ax.plot(x, [r[2] for r in results], "s-", label="adaptive (re-plans on drift)")
    ax.set_xscale("log")
    ax.set_xlabel("seconds of data between rate changes (x)")
    ax.set_ylabel("events/s (in-process, 1 task)")
    ax.set_title(f"Adaptive re-planning, {args.rows:,} events")
    ax.legend()
    fig.tight_layout()
    path = os.path.join(ROOT, "benchmarks", "results", "bench_adaptive.png")
    fig.savefig(path, dpi=120)
    print("plot:", path)


if __name__ == "__main__":
    main()
