"""Adaptive re-planning vs the static start-up plan, as SIGMOD'19 section 6.2.3 measures it
(issue 25.1; Figure 13), and the plan gap it can win (its section 6.1 / Figure 11 windows).

    python benchmarks/bench_adaptive.py                  # both transforms, x = 10 ... 10000
    python benchmarks/bench_adaptive.py --plans 15       # the regime: forced plans' CPU
    python benchmarks/bench_adaptive.py --rows 300000 --repeat 2 --windows 30,100,200

The paper's set-up: every x incoming events a component picks y = 5 event types at random,
draws a random permutation P of them and replaces the type of every event of those types
by the one following it in P. Two readings: "composed" (from then on, the mapping so far
composed with P: after many reshufflings the rates are a random permutation of the
start-up ones, so the static plan is a random plan) and "independent" (each block of x
events is transformed by its own P, applied to the original types: the rates stay near
the start-up ones, and adaptation has nothing to win). Here: --types types with Zipf
(--skew) base rates, 100 events per second; the pattern SEQ(a, b, c, d, e) over five of
them (a rare ... e the most frequent at start-up: the paper's default pattern size 5) with
about size/2 predicates (two equalities on ``k``, two comparisons of ``diff``, as the
paper's stock patterns compare the price differences), within --window seconds (the
paper's windows hold thousands of events: 15 minutes at 2-47 events/s per type).

Runs, in-process, interleaved, best of --repeat (process CPU): "static" plans once from
the first rows (cepsql.stats.mode=worker) and keeps that plan; "adaptive" re-plans when
the newest rows' statistics drift (runtime/adaptive.py); with --with-chunk also
"static/chunk" (the start-up plan in the adaptive worker's chunks, without checks: the
adaptation alone); with --with-no-revert also "adaptive/no-revert" (revert_margin inf:
a switch is never measured and undone). Their matches must be identical. Prints the load, events per CPU
second and the ratio per x, and plots benchmarks/results/bench_adaptive.png with the
paper's reported ratio (>= 10x) marked; the x axis is also the paper's "reshufflings per
1000 events" (1000 / x).

--plans N: the regime where plans matter. On a stream whose rates are the start-up ones
reversed (a the most frequent), runs the start-up plan, the plan chosen on the reversed
rates and N random orders, at each of --windows, and prints each one's CPU, partial
matches and the two cost models' prices (partial matches only, VLDB'18; with the pairs
tried, cost.py ``access``) with their log correlations with CPU.
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import random
import sys
import time

import numpy as np
import pyarrow as pa

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from cepsql.backends.local.engine import run_local  # noqa: E402
from cepsql.compile.clause import plan_query  # noqa: E402
from cepsql.planning.cost import CostEvaluator, CostModel  # noqa: E402
from cepsql.planning.options import ACCESS_WEIGHT  # noqa: E402
from cepsql.planning.plans import OrderPlan  # noqa: E402
from cepsql.runtime import task_planning  # noqa: E402
from cepsql.runtime.adaptive import AdaptiveSettings  # noqa: E402
from cepsql.runtime.run_stats import RunStatistics  # noqa: E402
from cepsql.stats.worker import InWorkerStatistics  # noqa: E402

EVENTS_PER_SECOND = 100
KEYS = 50            # values of the equality-joined attribute k
PAPER_RATIO = 10.0   # SIGMOD'19 6.2.3: "at least 10 times higher throughput"
TRANSFORMS = ("composed", "independent")
SQL = """
SELECT * FROM t MATCH_RECOGNIZE (
  ORDER BY ts
  MEASURES a.ts AS ta, e.ts AS te, MATCH_NUMBER() AS mn
  STRATEGY SKIP_TILL_ANY_MATCH
  PATTERN (SEQ(a, b, c, d, e)) WITHIN INTERVAL '{window}' SECOND
  DEFINE a AS typ = '{a}',
         b AS typ = '{b}' AND b.k = a.k,
         c AS typ = '{c}' AND c.diff > b.diff,
         d AS typ = '{d}' AND d.k = c.k,
         e AS typ = '{e}' AND e.diff < a.diff - 100)
"""


def base_rates(types: int, skew: float) -> np.ndarray:
    """Zipf-like arrival probabilities of the types (type 0 the most frequent)."""
    weights = 1.0 / np.arange(1, types + 1) ** skew
    return weights / weights.sum()


def pattern_types(types: int) -> dict[str, str]:
    """The pattern's five types, from the rarest (a) to the most frequent (e) at
    start-up, spread over the Zipf ranks."""
    ranks = np.linspace(types - 1, 0, 5).round().astype(int)
    return {v: label(int(k)) for v, k in zip("abcde", ranks)}


def label(k: int) -> str:
    return f"T{k:04d}"


def reshuffled_types(rows: int, x: int, types: int, skew: float, y: int = 5,
                     seed: int = 0, transform: str = "composed") -> np.ndarray:
    """Type ids of rows events drawn with base_rates, relabelled as the paper does: after
    every x events y random types are permuted (each maps to the next one in P); the
    next block's mapping is the mapping so far composed with P ("composed") or P alone
    ("independent")."""
    rng = np.random.default_rng(seed)
    drawn = rng.choice(types, size=rows, p=base_rates(types, skew))
    mapping = np.arange(types)
    out = np.empty(rows, dtype=np.int64)
    for start in range(0, rows, x):
        out[start:start + x] = mapping[drawn[start:start + x]]
        chosen = rng.choice(types, size=min(y, types), replace=False)
        step = np.arange(types)
        step[chosen] = np.roll(chosen, -1)
        mapping = step[mapping] if transform == "composed" else step
    return out


def table_of(kinds: np.ndarray, types: int, seed: int = 0, keys: int = KEYS) -> pa.Table:
    rows = len(kinds)
    rng = np.random.default_rng(seed + 1)
    names = np.array([label(k) for k in range(types)])
    ts = (np.arange(rows, dtype=np.int64) * (1_000_000 // EVENTS_PER_SECOND)
          ).astype("datetime64[us]")
    return pa.table({"ts": pa.array(ts), "typ": pa.array(names[kinds].tolist()),
                     "diff": rng.integers(-100, 101, rows),
                     "k": rng.integers(0, keys, rows)})


def stream(rows: int, x: int, types: int, skew: float, seed: int = 0,
           transform: str = "composed", keys: int = KEYS) -> pa.Table:
    return table_of(reshuffled_types(rows, x, types, skew, seed=seed, transform=transform),
                    types, seed, keys)


def reversed_stream(rows: int, types: int, skew: float, seed: int = 0,
                    keys: int = KEYS) -> pa.Table:
    """Base rates with the types' ranks reversed (a the most frequent, e the rarest)."""
    drawn = np.random.default_rng(seed).choice(types, size=rows, p=base_rates(types, skew))
    return table_of(types - 1 - drawn, types, seed, keys)


def planner(settings: AdaptiveSettings | None, sample_rows: int):
    def plan(spec, schema, sql, **kw):
        kw["statistics"] = InWorkerStatistics(sample_rows, adaptive=settings)
        return plan_query(spec, schema, sql, **kw)
    return plan


def timed(sql: str, table: pa.Table, settings: AdaptiveSettings | None, sample_rows: int):
    """(wall s, process CPU s, result, switches, checks, counters) of one run."""
    stats = RunStatistics()
    wall, cpu = time.perf_counter(), time.process_time()
    out = run_local(sql, {"t": table}, planner=planner(settings, sample_rows), stats=stats)
    last = stats.last
    return (time.perf_counter() - wall, time.process_time() - cpu, out,
            last.get("adaptive_switches", 0), last.get("adaptive_checks", 0), last)


def best_of(sql, table, runs: dict, sample_rows, repeat):
    """Each run's fastest (process CPU) of repeat, the runs interleaved (the machine's
    load hits them alike)."""
    best: dict = {}
    for _ in range(repeat):
        for name, settings in runs.items():
            got = timed(sql, table, settings, sample_rows)
            if name not in best or got[1] < best[name][1]:
                best[name] = got
    return best


def canonical(table: pa.Table):
    return sorted(zip(*(table.column(c).to_pylist() for c in ("mn", "ta", "te"))))


# --- the regime: forced plans -------------------------------------------------------------

class ForcedPlan:
    """Makes the in-task planner run a given order (None: its own choice) and keeps the
    query and plan it chose (a benchmark-only patch of WorkerPlanner.choose_with)."""

    def __init__(self):
        self.order = None
        self.query = self.chosen = None
        self.original = task_planning.WorkerPlanner.choose_with

    def __enter__(self):
        forced = self

        def choose_with(planner_, statistics, sample=None):
            base = forced.original(planner_, statistics, sample)
            forced.query, forced.chosen = base.plans[0].query, base.plans[0]
            if forced.order is None:
                return base
            plan = OrderPlan(order=forced.order, cost=0.0, algorithm="FORCED",
                             query=base.plans[0].query)
            return dataclasses.replace(base, plans=[plan])
        task_planning.WorkerPlanner.choose_with = choose_with
        return self

    def __exit__(self, *exc):
        task_planning.WorkerPlanner.choose_with = self.original


def plans_regime(args) -> None:
    """CPU, partial matches and the two models' prices of forced plans (module doc)."""
    table = reversed_stream(args.rows, args.types, args.skew, keys=args.keys)
    startup = stream(args.rows, args.rows, args.types, args.skew, keys=args.keys)  # as at start-up
    print(f"plans on reversed rates: {args.rows:,} events, {args.types} types (Zipf "
          f"{args.skew}); access weight {ACCESS_WEIGHT}; process CPU s; load "
          f"{os.getloadavg()[0]:.2f}")
    for window in [int(w) for w in args.windows.split(",")]:
        sql = SQL.format(window=window, **pattern_types(args.types))
        with ForcedPlan() as forced:
            timed(sql, startup, None, args.sample_rows)
            startup_plan = forced.chosen
            chosen = timed(sql, table, None, args.sample_rows)
            query, best = forced.query, forced.chosen
            pm_only = CostEvaluator(query, CostModel())
            pairs = CostEvaluator(query, CostModel(access=ACCESS_WEIGHT))
            orders = list(itertools.permutations(range(query.size)))
            random.Random(1).shuffle(orders)
            rows = [("chosen on reversed", best, chosen)]
            forced.order = startup_plan.order if startup_plan.kind == "order" else None
            if forced.order is not None:
                rows.append(("start-up plan", startup_plan, timed(sql, table, None,
                                                                  args.sample_rows)))
            for order in orders[:args.plans]:
                forced.order = order
                plan = OrderPlan(order=order, cost=0.0, query=query)
                rows.append(("random order", plan, timed(sql, table, None, args.sample_rows)))
        print(f"window {window} s ({window * EVENTS_PER_SECOND} events); W*r per variable "
              f"{[round(float(c), 1) for c in query.cardinalities]}")
        print(f"  {'plan':<20} {'shape':<28} {'CPU s':>7} {'pm':>9} {'cost PM':>10} "
              f"{'cost +pairs':>11}")
        figures = []
        for name, plan, run in rows:
            shape = ("".join(query.names[i] for i in plan.order) if plan.kind == "order"
                     else " ".join(plan.describe().split()[:3]))
            price = [ev.order_cost(plan.order) if plan.kind == "order"
                     else ev.tree_cost(plan.root) for ev in (pm_only, pairs)]
            figures.append((run[1], *price))
            print(f"  {name:<20} {shape:<28} {run[1]:>7.3f} "
                  f"{run[5].get('partial_matches', 0):>9} {price[0]:>10.4g} {price[1]:>11.4g}")
        cpu = np.log([f[0] for f in figures])
        corr = [np.corrcoef(cpu, np.log([f[k] for f in figures]))[0, 1] for k in (1, 2)]
        spread = max(f[0] for f in figures) / min(f[0] for f in figures)
        print(f"  log correlation with CPU: PM only {corr[0]:.2f}, with pairs {corr[1]:.2f}; "
              f"slowest / fastest plan {spread:.1f}x; mean random / chosen "
              f"{np.mean([f[0] for f in figures[-args.plans:]]) / figures[0][0]:.1f}x; "
              f"load {os.getloadavg()[0]:.2f}")


# --- static vs adaptive -------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--types", type=int, default=50)
    parser.add_argument("--skew", type=float, default=1.5)
    parser.add_argument("--keys", type=int, default=KEYS)
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--windows", default="30,100,200")
    parser.add_argument("--chunk", type=int, default=8192)
    parser.add_argument("--check-rows", type=int, default=2048)
    parser.add_argument("--sample-rows", type=int, default=2000)
    parser.add_argument("--threshold", type=float, default=1.0)
    parser.add_argument("--xs", default="10,100,1000,10000")
    parser.add_argument("--transforms", default=",".join(TRANSFORMS))
    parser.add_argument("--with-chunk", action="store_true")
    parser.add_argument("--with-no-revert", action="store_true")
    parser.add_argument("--plans", type=int, default=0)
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args()
    if args.plans:
        plans_regime(args)
        return
    runs = {"static": None,
            "adaptive": AdaptiveSettings(threshold=args.threshold, chunk_rows=args.chunk,
                                         check_rows=args.check_rows)}
    if args.with_chunk:
        runs["static/chunk"] = AdaptiveSettings(chunk_rows=args.chunk, check_every=1 << 40)
    if args.with_no_revert:
        runs["adaptive/no-revert"] = dataclasses.replace(runs["adaptive"],
                                                         revert_margin=float("inf"))
    sql = SQL.format(window=args.window, **pattern_types(args.types))
    print(f"{args.rows:,} events, {EVENTS_PER_SECOND}/s, {args.types} types (Zipf "
          f"{args.skew}), y = 5, window {args.window} s, chunk {args.chunk}, threshold "
          f"{args.threshold}; load {os.getloadavg()[0]:.2f}; events per process-CPU second")
    print(f"{'transform':>11} {'x':>6} {'per 1000':>8} {'static':>10} {'adaptive':>10} "
          f"{'ad/st':>6} {'ad/st-ch':>8} {'nr/st':>6} {'switch':>6} {'revert':>6} "
          f"{'checks':>6} {'matches':>8} load")
    results: dict[str, list] = {}
    failed = False
    for transform in args.transforms.split(","):
        for x in [int(v) for v in args.xs.split(",")]:
            table = stream(args.rows, x, args.types, args.skew, transform=transform,
                           keys=args.keys)
            best = best_of(sql, table, runs, args.sample_rows, args.repeat)
            same = len({tuple(canonical(r[2])) for r in best.values()}) == 1
            failed |= not same
            speed = {name: args.rows / r[1] for name, r in best.items()}
            adapt = best["adaptive"]
            chunk = (f"{speed['adaptive'] / speed['static/chunk']:>8.2f}"
                     if "static/chunk" in speed else f"{'-':>8}")
            no_revert = (f"{speed['adaptive/no-revert'] / speed['static']:>6.2f}"
                         if "adaptive/no-revert" in speed else f"{'-':>6}")
            results.setdefault(transform, []).append((x, speed["static"], speed["adaptive"]))
            print(f"{transform:>11} {x:>6} {1000 / x:>8g} {speed['static']:>10,.0f} "
                  f"{speed['adaptive']:>10,.0f} {speed['adaptive'] / speed['static']:>6.2f} "
                  f"{chunk} {no_revert} {adapt[3]:>6} "
                  f"{adapt[5].get('adaptive_reverts', 0):>6} {adapt[4]:>6} {adapt[2].num_rows:>8} "
                  f"{os.getloadavg()[0]:.2f}" + ("" if same else "  MATCHES DIFFER"),
                  flush=True)
    if not args.no_plot:
        plot(results, args)
    if failed:
        raise SystemExit("adaptive and static matches differ")


def ratio_axes(left, right, xlabel: str, legend_size: int = 8) -> None:
    """Both panels on log x axes; the ratio panel log-scaled with the paper's >= 10x line
    and parity marked (shared with bench_adaptive_workload.py)."""
    right.axhline(PAPER_RATIO, color="red", ls="--", label="SIGMOD'19 Fig. 13: >= 10x")
    right.axhline(1.0, color="grey", lw=0.8)
    right.set_yscale("log")
    right.set_ylabel("throughput ratio")
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.legend(fontsize=legend_size)


def plot(results: dict, args) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for (transform, rows), mark in zip(results.items(), "os^v"):
        per_1000 = [1000 / r[0] for r in rows]
        left.plot(per_1000, [r[1] for r in rows], mark + "--", label=f"static, {transform}")
        left.plot(per_1000, [r[2] for r in rows], mark + "-", label=f"adaptive, {transform}")
        right.plot(per_1000, [r[2] / r[1] for r in rows], mark + "-",
                   label=f"cepsql adaptive / static, {transform}")
    left.set_ylabel("events per CPU second (in-process)")
    ratio_axes(left, right, "reshufflings per 1000 events (1000 / x)", legend_size=7)
    fig.suptitle(f"Adaptive re-planning, {args.rows:,} events, {args.types} types, "
                 f"y = 5, window {args.window} s, load {os.getloadavg()[0]:.1f}")
    fig.tight_layout()
    path = os.path.join(ROOT, "benchmarks", "results", "bench_adaptive.png")
    fig.savefig(path, dpi=120)
    print("plot:", path)


if __name__ == "__main__":
    main()
