"""Plan-generation benchmark (VLDB 2018 Section 6.3, Figures 7a/7b style).

    python benchmarks/bench_planning.py                  # defaults below
    python benchmarks/bench_planning.py --per-size 10 --max-size 22 --window 20

Part 1 - quality on small patterns (3..7 variables): mean plan cost / optimal cost per
algorithm, order algorithms vs the DP_LD optimum, tree algorithms vs the DP_B optimum
(both verified against exhaustive enumeration in tests/test_planning_algorithms.py),
for sequence and conjunction patterns and for alpha in {0, 0.5}.

Part 2 - scaling (3..22 variables): mean plan-generation time per algorithm and the
paper's normalized cost (EFREQ's cost / the algorithm's cost; higher is better). DP_LD and
DP_B run only while their estimated time fits --dp-seconds.

Instances follow the paper's experiments: rates 1-45 per time unit, ~n/2 predicates with
selectivities 0.002-0.9. Tests never assert timings; this script only prints them.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))  # tests/support

from cepsql.planning import ALGORITHMS, ORDER_ALGORITHMS, TREE_ALGORITHMS, CostModel, reduce_pattern
from cepsql.planning.algorithms import estimate_dp_seconds
from support.planning_synthetic import random_sequence


def quality(args) -> None:
    print("== cost / optimal cost on small patterns (mean; 1.000 = always optimal) ==")
    names = list(ALGORITHMS)
    print(f"{'setting':<24}" + "".join(f"{n:>12}" for n in names))
    rng = random.Random(args.seed)
    for conj in (False, True):
        for alpha in (0.0, 0.5):
            model = CostModel(alpha=alpha)
            ratios = {n: [] for n in names}
            for size in range(3, 8):
                for _ in range(args.per_size):
                    pattern, stats = random_sequence(size, rng, conjunction=conj,
                                                     window=args.window)
                    q = reduce_pattern(pattern, stats)[0]
                    opt_o = ALGORITHMS["DP_LD"](q, model).cost
                    opt_t = ALGORITHMS["DP_B"](q, model).cost
                    for n in names:
                        c = ALGORITHMS[n](q, model, seed=size, budget_seconds=args.ii_seconds).cost
                        ratios[n].append(c / (opt_o if n in ORDER_ALGORITHMS else opt_t))
            label = f"{'AND' if conj else 'SEQ'} alpha={alpha}"
            print(f"{label:<24}" + "".join(f"{statistics.mean(ratios[n]):>12.3f}"
                                           for n in names))
            print(f"{'  (max)':<24}" + "".join(f"{max(ratios[n]):>12.3f}" for n in names))


def scaling(args) -> None:
    print(f"\n== plan generation for sizes 3..{args.max_size} "
          f"(SEQ patterns, {args.per_size} per size) ==")
    names = list(ALGORITHMS)
    print("mean seconds per plan")
    print(f"{'n':>4}" + "".join(f"{n:>12}" for n in names))
    norm_rows = []
    rng = random.Random(args.seed + 1)
    for size in range(3, args.max_size + 1):
        times = {n: [] for n in names}
        norm = {n: [] for n in names}
        queries = [reduce_pattern(*random_sequence(size, rng, window=args.window))[0]
                   for _ in range(args.per_size)]
        for q in queries:
            efreq = ALGORITHMS["EFREQ"](q).cost
            for n in names:
                if n == "DP_LD" and estimate_dp_seconds(size, "order") > args.dp_seconds:
                    continue
                if n == "DP_B" and estimate_dp_seconds(size, "tree") > args.dp_seconds:
                    continue
                t0 = time.perf_counter()
                plan = ALGORITHMS[n](q, seed=size, budget_seconds=args.ii_seconds)
                times[n].append(time.perf_counter() - t0)
                norm[n].append(efreq / plan.cost)
        print(f"{size:>4}" + "".join(
            f"{statistics.mean(times[n]):>12.4f}" if times[n] else f"{'-':>12}" for n in names))
        norm_rows.append((size, {n: statistics.mean(v) if v else None for n, v in norm.items()}))
    print("\nnormalized cost: EFREQ cost / plan cost (higher is better)")
    print(f"{'n':>4}" + "".join(f"{n:>12}" for n in names))
    for size, row in norm_rows:
        print(f"{size:>4}" + "".join(f"{row[n]:>12.3g}" if row[n] is not None else f"{'-':>12}"
                                     for n in names))
    print("\nDP time estimate used by choose_plan (s): " + ", ".join(
        f"n={n}: LD {estimate_dp_seconds(n, 'order'):.3g} / B {estimate_dp_seconds(n, 'tree'):.3g}"
        for n in (10, 14, 18, 22)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-size", type=int, default=10)
    ap.add_argument("--max-size", type=int, default=22)
    ap.add_argument("--window", type=float, default=1.0,
                    help="window W in rate time units (the paper: 20 min at 1-45 ev/s)")
    ap.add_argument("--dp-seconds", type=float, default=3.0,
                    help="skip DP_LD/DP_B when their estimated time exceeds this")
    ap.add_argument("--ii-seconds", type=float, default=0.5, help="II time box per plan")
    ap.add_argument("--seed", type=int, default=2018)
    ap.add_argument("--skip-quality", action="store_true")
    ap.add_argument("--skip-scaling", action="store_true")
    args = ap.parse_args()
    assert set(ORDER_ALGORITHMS) | set(TREE_ALGORITHMS) == set(ALGORITHMS)
    if not args.skip_quality:
        quality(args)
    if not args.skip_scaling:
        scaling(args)


if __name__ == "__main__":
    main()
