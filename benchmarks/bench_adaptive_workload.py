"""Adaptive re-planning of a shared workload vs its static start-up global plan, under the
drift of SIGMOD'19 section 6.2.3 (issue 25.1, the workload part).

    python benchmarks/bench_adaptive_workload.py            # 100k events, x = 100 ... 100000
    python benchmarks/bench_adaptive_workload.py --rows 200000 --repeat 2

The stream is bench_adaptive.py's (imported, not copied): --types event types with Zipf
base rates, and every x events y = 5 random types permuted. The workload: six SEQ
patterns over the five types a (rarest at start-up) ... e (most frequent) that share
sub-sequences (a, b), (b, c), (c, d), (d, e) and their predicates (k equalities, diff
comparisons), within --window seconds; the sharing planner (SA and TABU) picks the global
plan. Four runs of the shared DAG evaluator over the same sorted batches, interleaved,
best of --repeat by process CPU: "static" plans the workload once from the first
--sample-rows rows and keeps that global plan (default chunks); "static/chunk" keeps it
too but in the adaptive run's chunks, without checks (so adaptive / static-chunk is the
adaptation alone); "adaptive" re-plans as the newest rows' statistics drift
(runtime/shared_adaptive.py); "hindsight" is a static run of the global plan made on the
whole stream's statistics (what one better plan would give); with --with-no-revert also
"adaptive/no-revert" (revert_margin inf: a switch is never measured and undone); with
--with-pm-only also "static/pm" and "adaptive/pm": the global plans priced by partial
matches alone (access 0, the sharing cost model before the pairs term) and no revert,
i.e. the behaviour before issue 25.1's second round. Every pattern's rows must be
identical in all runs.
Prints the load, events per CPU second, the ratios, switches, checks and the re-plans'
cost per x; saves benchmarks/results/bench_adaptive_workload.png.

--pricing: whether re-planned global plans price what they run. Per x, at --segments
evenly spaced segments of --segment-rows rows, the start-up plan and the plan chosen on
the segment's statistics (a switch candidate), each under both sharing cost models
(partial matches only, access 0; with the pairs tried, the planner's access weight),
run on the segment (process CPU, best of --repeat): the priced ratio start-up /
candidate on the segment's statistics beside the measured CPU ratio, and the log
correlation of priced with measured ratios per model.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from dataclasses import replace
from functools import partial

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, os.path.join(ROOT, "tests"))   # tests/support

from bench_adaptive import pattern_types, ratio_axes, stream  # noqa: E402
import numpy as np  # noqa: E402

from cepsql.backends.local.engine import table_statistics  # noqa: E402
from cepsql.planning.options import ACCESS_WEIGHT  # noqa: E402
from cepsql.parse import find_match_recognize  # noqa: E402
from cepsql.runtime.adaptive import AdaptiveSettings  # noqa: E402
from cepsql.runtime.one_pass import sharing_patterns  # noqa: E402
from cepsql.runtime.shared_adaptive import (AdaptiveSharedEvaluator,  # noqa: E402
                                            WorkloadReplanner, plan_shape)
from cepsql.sharing.planner import plan_workload  # noqa: E402
from cepsql.sharing.pricing import global_plan_cost  # noqa: E402
from support.local_run import plan_local_workload  # noqa: E402

#: (variables, DEFINE of each variable beyond its type): sub-sequences recur
PATTERNS = [
    ("abcde", {"b": "b.k = a.k", "c": "c.diff > b.diff", "d": "d.k = c.k",
               "e": "e.diff < a.diff - 100"}),
    ("abcd", {"b": "b.k = a.k", "c": "c.diff > b.diff", "d": "d.k = c.k"}),
    ("abc", {"b": "b.k = a.k", "c": "c.diff > b.diff"}),
    ("bcde", {"c": "c.diff > b.diff", "d": "d.k = c.k", "e": "e.diff < b.diff - 100"}),
    ("cde", {"d": "d.k = c.k", "e": "e.diff < c.diff - 100"}),
    ("abde", {"b": "b.k = a.k", "d": "d.k = b.k", "e": "e.diff < a.diff - 100"}),
]


def workload_sql(window: int, types: dict[str, str]) -> list[str]:
    out = []
    for names, extra in PATTERNS:
        defines = ", ".join(f"{v} AS typ = '{types[v]}'" + (f" AND {extra[v]}" if v in extra
                                                            else "") for v in names)
        out.append(f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES "
                   f"{names[0]}.ts AS t0, {names[-1]}.ts AS t1, MATCH_NUMBER() AS mn "
                   f"STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ({', '.join(names)})) "
                   f"WITHIN INTERVAL '{window}' SECOND DEFINE {defines})")
    return out


def outputs(out, n: int) -> list[Counter]:
    rows = [Counter() for _ in range(n)]
    for p, batch in out:
        rows[p].update(zip(*(batch.column(i).to_pylist() for i in range(batch.num_columns))))
    return rows


def timed(make):
    """(process CPU s, wall s, evaluator, its output) of one run."""
    cpu, wall = time.process_time(), time.perf_counter()
    ev, batches = make()
    out = ev.run(batches)
    return time.process_time() - cpu, time.perf_counter() - wall, ev, out


def run_x(x: int, args) -> dict:
    table = stream(args.rows, x, args.types, args.skew)
    sqls = workload_sql(args.window, pattern_types(args.types))
    specs = [find_match_recognize(s)[0].spec for s in sqls]
    startup = partial(table_statistics, table=table.slice(0, args.sample_rows))
    wl = plan_local_workload(specs, table, batch_rows=8192, statistics=startup)
    patterns = sharing_patterns(wl.queries, startup)
    plan = plan_workload(patterns, seconds=args.plan_seconds)
    # the global plan for the whole stream's statistics (known only in hindsight): how
    # much one better static plan would give
    whole = partial(table_statistics, table=table)
    hindsight = plan_workload(sharing_patterns(wl.queries, whole), seconds=args.plan_seconds)
    adaptive = AdaptiveSettings(threshold=args.threshold, chunk_rows=args.chunk,
                                check_rows=args.check_rows, min_gain=args.min_gain,
                                revert_margin=args.revert_margin)
    chunked = partial(wl.evaluator, chunk_rows=args.chunk)
    runs = {
        "static": lambda: (wl.evaluator(plan), wl.batches),
        "hindsight": lambda: (wl.evaluator(hindsight), wl.batches),
        "static/chunk": lambda: (AdaptiveSharedEvaluator(plan, chunked, WorkloadReplanner(
            patterns, AdaptiveSettings(chunk_rows=args.chunk, check_every=1 << 40,
                                       max_check_every=1 << 40))), wl.batches),
        "adaptive": lambda: (AdaptiveSharedEvaluator(plan, chunked, WorkloadReplanner(
            patterns, adaptive)), wl.batches),
    }
    never = replace(adaptive, revert_margin=float("inf"))
    if args.with_no_revert:
        runs["adaptive/no-revert"] = lambda: (AdaptiveSharedEvaluator(
            plan, chunked, WorkloadReplanner(patterns, never)), wl.batches)
    if args.with_pm_only:
        pm_plan = plan_workload(patterns, seconds=args.plan_seconds, access=0.0)
        runs["static/pm"] = lambda: (wl.evaluator(pm_plan), wl.batches)
        runs["adaptive/pm"] = lambda: (AdaptiveSharedEvaluator(pm_plan, chunked, WorkloadReplanner(
            patterns, never, access=0.0)), wl.batches)
    best: dict = {}
    for _ in range(args.repeat):
        for name, make in runs.items():
            got = timed(make)
            if name not in best or got[0] < best[name][0]:
                best[name] = got
    rows = {name: outputs(r[3], len(sqls)) for name, r in best.items()}
    same = all(r == rows["static"] for r in rows.values())
    stats = best["adaptive"][2].stats
    return {"x": x, "speed": {n: args.rows / r[0] for n, r in best.items()},
            "same": same, "matches": sum(sum(c.values()) for c in rows["static"]),
            "switches": stats["adaptive_switches"], "checks": stats["adaptive_checks"],
            "reverts": stats["adaptive_reverts"],
            "replans": stats["replans"], "replan_s": stats["replan_seconds"],
            "replan_max": stats["replan_seconds_max"], "plan_s": plan.seconds,
            "load": os.getloadavg()[0]}


def pricing(args) -> None:
    """Priced vs measured ratios of switch candidates (module doc, --pricing)."""
    models = {"PM only": 0.0, "+pairs": ACCESS_WEIGHT}
    print(f"pricing: {args.rows:,} events, {args.segments} segments of {args.segment_rows:,} "
          f"rows per x; access weight {ACCESS_WEIGHT}; load {os.getloadavg()[0]:.2f}")
    print(f"{'x':>7} {'seg':>4} {'model':>8} {'priced':>7} {'measured':>8} {'same plan':>9} "
          f"{'st CPU s':>8} {'cand CPU s':>10} load")
    pairs = {m: [] for m in models}
    for x in [int(v) for v in args.xs.split(",")]:
        table = stream(args.rows, x, args.types, args.skew)
        sqls = workload_sql(args.window, pattern_types(args.types))
        specs = [find_match_recognize(s)[0].spec for s in sqls]
        startup = partial(table_statistics, table=table.slice(0, args.sample_rows))
        start_patterns = sharing_patterns(plan_local_workload(specs, table.slice(
            0, args.sample_rows), statistics=startup).queries, startup)
        step = (args.rows - args.segment_rows) // max(args.segments - 1, 1)
        for k in range(args.segments):
            seg = table.slice(k * step, args.segment_rows)
            fresh = partial(table_statistics, table=seg)
            wl = plan_local_workload(specs, seg, batch_rows=8192, statistics=fresh)
            patterns = sharing_patterns(wl.queries, fresh)
            for model, access in models.items():
                old = plan_workload(start_patterns, seconds=args.plan_seconds, access=access)
                new = plan_workload(patterns, seconds=args.plan_seconds, access=access)
                cpu = []
                for plan in (old, new):
                    best = min(timed(lambda plan=plan: (wl.evaluator(plan), wl.batches))[0]
                               for _ in range(args.repeat))
                    cpu.append(best)
                priced = global_plan_cost(old, patterns, access) / new.cost
                measured = cpu[0] / cpu[1]
                same = plan_shape(old) == plan_shape(new)
                if not same:
                    pairs[model].append((priced, measured))
                print(f"{x:>7} {k:>4} {model:>8} {priced:>7.2f} {measured:>8.2f} "
                      f"{str(same):>9} {cpu[0]:>8.3f} {cpu[1]:>10.3f} "
                      f"{os.getloadavg()[0]:.2f}", flush=True)
    for model, got in pairs.items():
        if len(got) > 1:
            a = np.log([g[0] for g in got])
            b = np.log([g[1] for g in got])
            corr = np.corrcoef(a, b)[0, 1] if a.std() > 0 and b.std() > 0 else float("nan")
            print(f"{model}: {len(got)} candidates; log correlation priced ~ measured "
                  f"{corr:.2f}; priced ratios {np.exp(a.min()):.2f}..{np.exp(a.max()):.2f}, "
                  f"measured {np.exp(b.min()):.2f}..{np.exp(b.max()):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--types", type=int, default=10)
    parser.add_argument("--skew", type=float, default=1.5)
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--chunk", type=int, default=8192)
    parser.add_argument("--check-rows", type=int, default=2000)
    parser.add_argument("--sample-rows", type=int, default=2000)
    parser.add_argument("--threshold", type=float, default=1.0)
    parser.add_argument("--min-gain", type=float, default=1.5)
    parser.add_argument("--plan-seconds", type=float, default=0.5)
    parser.add_argument("--xs", default="100,1000,10000,100000")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--pricing", action="store_true")
    parser.add_argument("--revert-margin", type=float, default=AdaptiveSettings.revert_margin)
    parser.add_argument("--with-no-revert", action="store_true")
    parser.add_argument("--with-pm-only", action="store_true")
    parser.add_argument("--segments", type=int, default=4)
    parser.add_argument("--segment-rows", type=int, default=16384)
    args = parser.parse_args()
    if args.pricing:
        pricing(args)
        return
    print(f"{args.rows:,} events, {args.types} types (Zipf {args.skew}), y = 5, "
          f"{len(PATTERNS)} patterns, window {args.window} s, chunk {args.chunk}, threshold "
          f"{args.threshold}, min gain {args.min_gain}; load {os.getloadavg()[0]:.2f}; events per process-CPU second")
    print(f"{'x':>7} {'static':>9} {'st/chunk':>9} {'adaptive':>9} {'hindsight':>9} {'ad/st':>6} "
          f"{'ad/st-ch':>8} {'nr/st':>6} {'switch':>6} {'revert':>6} {'checks':>6} "
          f"{'replans':>7} {'replan s':>8} "
          f"{'max s':>6} {'matches':>9} load")
    results, failed = [], False
    for x in [int(v) for v in args.xs.split(",")]:
        r = run_x(x, args)
        s = r["speed"]
        failed |= not r["same"]
        results.append(r)
        print(f"{x:>7} {s['static']:>9,.0f} {s['static/chunk']:>9,.0f} {s['adaptive']:>9,.0f} "
              f"{s['hindsight']:>9,.0f} "
              f"{s['adaptive'] / s['static']:>6.2f} {s['adaptive'] / s['static/chunk']:>8.2f} "
              + (f"{s['adaptive/no-revert'] / s['static']:>6.2f} " if 'adaptive/no-revert' in s
                 else f"{'-':>6} ")
              + f"{r['switches']:>6} {r['reverts']:>6} {r['checks']:>6} {r['replans']:>7} "
              f"{r['replan_s']:>8.3f} "
              f"{r['replan_max']:>6.3f} {r['matches']:>9,} {r['load']:.2f}"
              + ("" if r["same"] else "  ROWS DIFFER"), flush=True)
        if "static/pm" in s:
            print(f"{'':>7} PM-only pricing (before): static {s['static/pm']:,.0f} adaptive "
                  f"{s['adaptive/pm']:,.0f} (ad/st {s['adaptive/pm'] / s['static/pm']:.2f}); "
                  f"now static / before static {s['static'] / s['static/pm']:.2f}, now adaptive"
                  f" / before static {s['adaptive'] / s['static/pm']:.2f}", flush=True)
    if not args.no_plot:
        plot(results, args)
    if failed:
        raise SystemExit("adaptive and static rows differ")


def plot(results, args) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    x = [r["x"] for r in results]
    speed = [r["speed"] for r in results]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    left.plot(x, [s["static"] for s in speed], "o-", label="static (start-up global plan)")
    left.plot(x, [s["static/chunk"] for s in speed], "^--", label="static, adaptive's chunks")
    left.plot(x, [s["adaptive"] for s in speed], "s-", label="adaptive (re-plans on drift)")
    left.plot(x, [s["hindsight"] for s in speed], "d:", label="static, planned on the whole stream")
    left.set_ylabel("events per CPU second (shared DAG)")
    right.plot(x, [s["adaptive"] / s["static"] for s in speed], "s-",
               label="cepsql: adaptive / static")
    right.plot(x, [s["adaptive"] / s["static/chunk"] for s in speed], "^--",
               label="cepsql: adaptive / static, same chunks")
    right.plot(x, [s["hindsight"] / s["static"] for s in speed], "d:",
               label="whole-stream plan / start-up plan")
    ratio_axes(left, right, "x: events between reshufflings")
    fig.suptitle(f"Adaptive workload re-planning, {len(PATTERNS)} patterns, {args.rows:,} "
                 f"events, {args.types} types, y = 5, window {args.window} s, "
                 f"min gain {args.min_gain:g}")
    fig.tight_layout()
    suffix = "" if args.min_gain == 1.5 else f"_gain{args.min_gain:g}"
    path = os.path.join(ROOT, "benchmarks", "results", f"bench_adaptive_workload{suffix}.png")
    fig.savefig(path, dpi=120)
    print("plot:", path)


if __name__ == "__main__":
    main()
