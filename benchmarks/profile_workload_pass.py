"""Where the workload's one pass spends its Python time: the in-process shared pass
(cepsql.workload, the same SharedPassWorker and evaluators a Spark task runs) over the
bench_workload_spark views, profiled with cProfile and summed per stage -- planning,
SQL:2016 views (their VM column loading apart), unshared CEP views, the shared CEP DAG.

    python benchmarks/profile_workload_pass.py [--rows 200000] [--views 100]

Prints seconds per stage (cumulative: _process includes part of the _load_vm calls) and
the top functions by own time. Spark's scan / shuffle / sort is not in this profile."""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

#: stage -> (file suffix, function name) whose cumulative time is the stage's
STAGES = {
    "whole workload (parse, plan, pass, replay)": ("backends/local/workload.py", "workload"),
    "pass planning (plan_pass, sharing planner)": ("runtime/one_pass.py", "plan_pass"),
    "SQL:2016 views: _process (matcher, measures)": ("runtime/worker.py", "_process"),
    "SQL:2016 views: VM column loading (_load_vm)": ("runtime/worker.py", "_load_vm"),
    "unshared CEP views: worker": ("runtime/cep_worker.py", "_process"),
    "shared CEP DAG evaluator": ("runtime/shared_evaluator.py", "_process"),
}


def stage_seconds(stats: pstats.Stats) -> dict[str, float]:
    """Cumulative seconds of each stage's function (summed over its call sites)."""
    out = dict.fromkeys(STAGES, 0.0)
    for (path, _, func), (_, _, _, cumulative, _) in stats.stats.items():
        for stage, (suffix, name) in STAGES.items():
            if func == name and path.endswith(suffix):
                out[stage] += cumulative
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--views", type=int, default=100)
    args = parser.parse_args()
    import cepsql
    from cepsql.datagen import generate_ticks
    from bench_workload_spark import view_queries
    data = generate_ticks(args.rows, n_symbols=20, seed=7)
    views = [f"CREATE TEMPORARY VIEW v{i} AS {q}"
             for i, q in enumerate(view_queries(args.views, "ticks"))]
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    cepsql.workload(views, ticks=data)
    profile.disable()
    print(f"{args.views} views, {args.rows} rows: {time.perf_counter() - start:.2f} s "
          f"(load {os.getloadavg()[0]:.1f})")
    stats = pstats.Stats(profile)
    for stage, seconds in stage_seconds(stats).items():
        print(f"  {stage:45s} {seconds:7.2f} s")
    stats.sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
