"""Multi-pattern workload benchmark (SIGMOD 2019 section 6 style).

    python benchmarks/bench_workload.py                       # planning part, defaults
    python benchmarks/bench_workload.py --sizes 10 50 --seconds 0.5
    python benchmarks/bench_workload.py --evaluate --eval-sizes 10 50 100 --rows 20000

Planning part: workloads of the synthetic stock experiment (cepsql.sharing.synthetic:
3-7 variables over skewed-rate symbols, SEQ/AND, diff predicates on half the pairs, 20%
NOT/KL, windows of 5-15 s) with 10 / 50 / 100 / 250 / 500 pattern views. Per size: the
global cost (Cost_tree over distinct nodes) of the trivial plans (written order, nothing
shared), the independent best plans, PREFIX (MPT), SA and TABU (MPM, edge neighbourhood),
each search with the same time budget; the gain = trivial cost / cost (the paper's
"throughput gain over the trivial plan" is measured on events; here it is the model's
estimate) and planning seconds (graph + own plans + search). All baselines run in the
same process on the same workload. Writes benchmarks/results/workload_planning.md and
workload_planning.png.

Evaluator part (``--evaluate``): the same workloads run in-process by the shared DAG
evaluator (one pass over a generated stream with the workload's symbol rates) under the
trivial global plan, the independent best plans (NONE), PREFIX, SA and TABU; events/s and
the ratio to the trivial plan, every plan's matches checked identical to the trivial
plan's. Writes workload_eval.md / .png.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cepsql.sharing import check_global_plan, plan_workload  # noqa: E402
from cepsql.sharing.synthetic import stock_workload  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
ALGORITHMS = ("PREFIX", "SA", "TABU")


def planning_part(args) -> list[dict]:
    rows = []
    print(f"{'patterns':>8} {'edges':>7} {'trivial':>11} {'independent':>11} "
          + " ".join(f"{a:>11}" for a in ALGORITHMS)
          + "   gain over trivial (indep / " + " / ".join(ALGORITHMS) + ")   plan s")
    for n in args.sizes:
        wl = stock_workload(n, seed=args.seed, symbols=args.symbols,
                            special_fraction=args.special)
        started = time.perf_counter()
        patterns = wl.workload_patterns()
        parse_s = time.perf_counter() - started
        row = {"n": n, "parse_s": parse_s}
        for algorithm in ALGORITHMS:
            plan = plan_workload(patterns, algorithm=algorithm, seconds=args.seconds,
                                 seed=args.seed)
            if args.check:
                check_global_plan(plan, patterns)
            row[algorithm] = plan.cost
            row[algorithm + "_s"] = plan.seconds
            row[algorithm + "_it"] = plan.iterations
            row["shared_" + algorithm] = len(plan.shared_nodes())
            row["trivial"], row["independent"] = plan.trivial_cost, plan.independent_cost
            row["edges"] = plan.graph_edges
        rows.append(row)
        gains = [row["trivial"] / row[k] for k in ("independent",) + ALGORITHMS]
        print(f"{n:>8} {row['edges']:>7} {row['trivial']:>11.4g} {row['independent']:>11.4g} "
              + " ".join(f"{row[a]:>11.4g}" for a in ALGORITHMS)
              + "   " + " / ".join(f"{g:.2f}" for g in gains)
              + "   " + " / ".join(f"{row[a + '_s']:.2f}" for a in ALGORITHMS))
    return rows


EVAL_PLANS = ("NONE", "PREFIX", "SA", "TABU")


def evaluator_part(args) -> list[dict]:
    from collections import Counter
    from functools import partial

    from cepsql.dialect import find_match_recognize
    from cepsql.dialect.statements import parse_create_view
    from cepsql.backends.local.engine import _table_statistics
    from cepsql.runtime.shared.local_run import plan_local_workload
    from cepsql.runtime.shared_pass import sharing_patterns
    from cepsql.sharing.planner import trivial_global_plan

    def rows_of(tables):
        return [Counter(tuple(r.values()) for r in t.to_pylist()) for t in tables]
    out = []
    print(f"{'patterns':>8} {'rows':>7} {'trivial ev/s':>13} "
          + " ".join(f"{a + ' x':>9}" for a in EVAL_PLANS) + "  matches  identical")
    for n in args.eval_sizes:
        wl = stock_workload(n, seed=args.seed, symbols=args.symbols,
                            special_fraction=args.special,
                            windows=tuple(args.eval_windows))
        table = wl.stream(args.rows, seed=args.seed)
        specs = [find_match_recognize(parse_create_view(s).query_text)[0].spec
                 for s in wl.statements]
        lw = plan_local_workload(specs, table, batch_rows=8192)
        patterns = sharing_patterns(lw.queries, partial(_table_statistics, table=table))
        plans = {"TRIVIAL": trivial_global_plan(patterns)}
        for name in EVAL_PLANS:
            plans[name] = plan_workload(patterns, algorithm=name, seconds=args.seconds,
                                        seed=args.seed)
        row, reference = {"n": n, "rows": args.rows}, None
        for name, plan in plans.items():
            best = float("inf")
            for _ in range(args.repeat):
                started = time.perf_counter()
                outputs = lw.shared_outputs(plan)
                best = min(best, time.perf_counter() - started)
            got = rows_of(outputs)
            if reference is None:
                reference = got
                row["matches"] = sum(t.num_rows for t in outputs)
            row[name] = args.rows / best
            row[name + "_same"] = got == reference
        row["identical"] = all(row[k + "_same"] for k in plans)
        out.append(row)
        print(f"{n:>8} {args.rows:>7} {row['TRIVIAL']:>13.0f} "
              + " ".join(f"{row[a] / row['TRIVIAL']:>9.2f}" for a in EVAL_PLANS)
              + f"  {row['matches']:>7}  {row['identical']}")
        if not row["identical"]:
            raise SystemExit("a global plan's matches differ from the trivial plan's")
    return out


def write_eval(rows: list[dict], args) -> None:
    os.makedirs(RESULTS, exist_ok=True)
    lines = ["# Workload evaluation (shared DAG evaluator, in-process)", "",
             f"seed {args.seed}, {args.symbols} symbols, {args.rows} events per run, windows "
             f"{args.eval_windows} s, "
             f"{args.special:.0%} NOT/KL patterns, search budget {args.seconds} s, best of "
             f"{args.repeat}; throughput relative to the trivial global plan (written order, "
             "nothing shared); every plan's matches identical to the trivial plan's.", "",
             "| patterns | trivial events/s | independent (NONE) | PREFIX | SA | TABU | "
             "matches |", "|---:" * 7 + "|"]
    for r in rows:
        lines.append(f"| {r['n']} | {r['TRIVIAL']:.0f} | "
                     + " | ".join(f"{r[a] / r['TRIVIAL']:.2f}x" for a in EVAL_PLANS)
                     + f" | {r['matches']} |")
    with open(os.path.join(RESULTS, "workload_eval.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    sizes = [r["n"] for r in rows]
    for key in EVAL_PLANS:
        ax.plot(sizes, [r[key] / r["TRIVIAL"] for r in rows], marker="o",
                label="independent" if key == "NONE" else key)
    ax.set_xlabel("patterns in the workload")
    ax.set_ylabel("throughput gain over the trivial global plan")
    ax.set_xscale("log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(RESULTS, "workload_eval.png"), dpi=110)
    print("wrote benchmarks/results/workload_eval.md and workload_eval.png")


def write_results(rows: list[dict], args) -> None:
    os.makedirs(RESULTS, exist_ok=True)
    lines = ["# Workload planning (synthetic stock workload)", "",
             f"seed {args.seed}, {args.symbols} symbols, {args.special:.0%} of the patterns "
             f"with NOT/KL, search budget {args.seconds} s per "
             "algorithm; cost = Cost_tree summed over distinct nodes (model estimate); gain = "
             "trivial cost / cost; independent = every pattern's own best plan, no sharing.",
             "",
             "| patterns | MPG edges | trivial | independent | PREFIX | SA | TABU | gain indep"
             " | gain PREFIX | gain SA | gain TABU | SA / independent | plan s PREFIX / SA / "
             "TABU | iterations SA / TABU | shared nodes SA |",
             "|---:" * 15 + "|"]
    for r in rows:
        t = r["trivial"]
        lines.append(
            f"| {r['n']} | {r['edges']} | {t:.4g} | {r['independent']:.4g} | "
            f"{r['PREFIX']:.4g} | {r['SA']:.4g} | {r['TABU']:.4g} | "
            f"{t / r['independent']:.2f} | {t / r['PREFIX']:.2f} | {t / r['SA']:.2f} | "
            f"{t / r['TABU']:.2f} | {r['SA'] / r['independent']:.3f} | "
            f"{r['PREFIX_s']:.2f} / {r['SA_s']:.2f} / {r['TABU_s']:.2f} | "
            f"{r['SA_it']} / {r['TABU_it']} | {r['shared_SA']} |")
    with open(os.path.join(RESULTS, args.out + ".md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    sizes = [r["n"] for r in rows]
    for key in ("independent",) + ALGORITHMS:
        ax1.plot(sizes, [r["trivial"] / r[key] for r in rows], marker="o", label=key)
    ax1.set_xlabel("patterns in the workload")
    ax1.set_ylabel("estimated gain over the trivial plans")
    ax1.set_xscale("log")
    ax1.legend()
    for key in ALGORITHMS:
        ax2.plot(sizes, [r[key + "_s"] for r in rows], marker="o", label=key)
    ax2.set_xlabel("patterns in the workload")
    ax2.set_ylabel("planning seconds (graph + own plans + search)")
    ax2.set_xscale("log")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(RESULTS, args.out + ".png"), dpi=110)
    print(f"wrote benchmarks/results/{args.out}.md and {args.out}.png")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 50, 100, 250, 500])
    ap.add_argument("--seconds", type=float, default=1.0, help="search budget per algorithm")
    ap.add_argument("--symbols", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--special", type=float, default=0.2,
                    help="fraction of patterns with a NOT or a (bounded) Kleene variable")
    ap.add_argument("--out", default="workload_planning", help="results file stem")
    ap.add_argument("--check", action="store_true", help="validate every plan")
    ap.add_argument("--evaluate", action="store_true",
                    help="run the workloads in the shared DAG evaluator too")
    ap.add_argument("--eval-sizes", type=int, nargs="+", default=[10, 50, 100])
    ap.add_argument("--rows", type=int, default=20000, help="events per evaluator run")
    ap.add_argument("--eval-windows", type=int, nargs="+", default=[1, 2, 3],
                    help="pattern windows (seconds) of the evaluated workloads: the "
                         "trivial plan's partial matches grow fast with the window")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--skip-planning", action="store_true")
    args = ap.parse_args()
    if not args.skip_planning:
        rows = planning_part(args)
        write_results(rows, args)
    if args.evaluate:
        write_eval(evaluator_part(args), args)


if __name__ == "__main__":
    main()
