"""Shared DAG evaluator vs every pattern's own CepWorker, on overlapping workloads.

Stock-style stream (SIGMOD'19 section 6): ticks of a pool of symbols with skewed
(Zipf-like) rates, a price-difference attribute ``diff``. Each pattern is a SEQ of 3-5
variables, each an event type ``v.symbol = 'S<k>'``, with predicates ``v.diff > u.diff``
on about half of the consecutive pairs, a time window, and (about 1 in 5) a NOT or a
Kleene closure KL(v, 1, 3); patterns are drawn from a small pool of prefixes so
sub-patterns recur across the workload (merge sharing of the patterns' own best trees,
cepsql.sharing.merge_plan).

For each workload size it prints the evaluator throughput (input rows / second) of the
shared pass and of running each pattern's own CepWorker over the same prepared, sorted
batches (the baseline, same process), their ratio, the node counts with and without
sharing, and checks that every pattern's output rows (with match numbers) are identical.
Saves benchmarks/results/shared_dag.png and shared_dag.md.

    PYTHONPATH=. python benchmarks/bench_shared_dag.py [--rows 20000] [--sizes 10,30,100,250]
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections import Counter

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))  # tests/support

from cepsql.parse import find_match_recognize  # noqa: E402
from cepsql.sharing.merge_plan import merge_plan  # noqa: E402
from support.local_run import plan_local_workload  # noqa: E402

RESULTS = os.path.join(os.path.dirname(__file__), "results")


def ticks(rows: int, symbols: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, symbols + 1) ** 0.8
    sym = rng.choice(symbols, size=rows, p=weights / weights.sum())
    ts = np.cumsum(rng.integers(1, 3, size=rows))          # seconds
    price = np.round(100 + np.cumsum(rng.normal(0, 1, size=rows)), 2)
    diff = np.round(rng.normal(0, 1, size=rows), 3)
    return pa.table({"region": pa.array(rng.integers(0, 4, size=rows)),
                     "ts": pa.array(ts, pa.int64()),
                     "symbol": pa.array([f"S{k}" for k in sym]),
                     "price": pa.array(price), "diff": pa.array(diff)})


def workload(n: int, symbols: int, seed: int) -> list[str]:
    """n patterns drawn from a pool of n // 4 + 2 prefixes (so sub-patterns recur)."""
    rng = random.Random(seed)
    prefixes = []
    for _ in range(n // 4 + 2):
        k = rng.randint(2, 3)
        syms = [rng.randrange(symbols) for _ in range(k)]
        preds = [rng.random() < 0.5 for _ in range(k)]
        prefixes.append((syms, preds))
    out = []
    for i in range(n):
        syms, preds = rng.choice(prefixes)
        syms, preds = list(syms), list(preds)
        for _ in range(rng.randint(1, 2)):
            syms.append(rng.randrange(symbols))
            preds.append(rng.random() < 0.5)
        names = [f"v{i}_{k}" for k in range(len(syms))]
        defines = []
        for k, (name, s) in enumerate(zip(names, syms)):
            cond = f"{name}.symbol = 'S{s}'"
            if k and preds[k]:
                cond += f" AND {name}.diff > {names[k - 1]}.diff"
            defines.append(f"{name} AS {cond}")
        items = list(names)
        if rng.random() < 0.1:    # a Kleene closure of a middle variable
            k = rng.randrange(1, len(items) - 1) if len(items) > 2 else 1
            items[k] = f"KL({names[k]}, 1, 3)"
        elif rng.random() < 0.1:
            items.insert(len(items) - 1, f"NOT(n{i})")
            defines.append(f"n{i} AS n{i}.symbol = 'S{rng.randrange(symbols)}' "
                           "AND n{i}.diff > 2".replace("{i}", str(i)))
        window = rng.choice([20, 30, 40])
        out.append(f"SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY region ORDER BY ts "
                   f"MEASURES FIRST({names[0]}.ts) AS t0, LAST({names[-1]}.ts) AS t1, "
                   f"MATCH_NUMBER() AS mn ONE ROW PER MATCH STRATEGY SKIP_TILL_ANY_MATCH "
                   f"PATTERN (SEQ({', '.join(items)})) WITHIN INTERVAL '{window}' SECOND "
                   f"DEFINE {', '.join(defines)})")
    return out


def _rows(table: pa.Table) -> Counter:
    return Counter(tuple(map(repr, r.values())) for r in table.to_pylist())


def run_size(n: int, table: pa.Table, symbols: int, seed: int, repeat: int = 3) -> dict:
    specs = [find_match_recognize(sql)[0].spec for sql in workload(n, symbols, seed)]
    wl = plan_local_workload(specs, table, batch_rows=8192)
    plan = merge_plan(wl.queries)
    own_s = shared_s = float("inf")
    for _ in range(repeat):   # best of repeat: the machine is shared
        started = time.perf_counter()
        own = wl.own_outputs()
        own_s = min(own_s, time.perf_counter() - started)
        started = time.perf_counter()
        shared = wl.shared_outputs(plan)
        shared_s = min(shared_s, time.perf_counter() - started)
    identical = all(_rows(a) == _rows(b) for a, b in zip(own, shared))
    unshared_nodes = sum(2 * len(b.slot_vars) - 1 for b in plan.bindings)
    return dict(patterns=n, rows=table.num_rows, own_s=own_s, shared_s=shared_s,
                own_tput=table.num_rows / own_s, shared_tput=table.num_rows / shared_s,
                ratio=own_s / shared_s, nodes=len(plan.nodes), nodes_alone=unshared_nodes,
                shared_nodes=len(plan.shared_nodes()), unshared=len(plan.unshared),
                matches=sum(t.num_rows for t in own), identical=identical,
                seconds=wl.last_stats["seconds"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--symbols", type=int, default=12)
    ap.add_argument("--sizes", default="10,30,100,250")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    table = ticks(args.rows, args.symbols, args.seed)
    results = []
    header = ("patterns  rows   own s  shared s  own rows/s  shared rows/s  ratio  "
              "nodes (alone)  shared  matches  identical  shared pass split (s)")
    print(header)
    for n in [int(s) for s in args.sizes.split(",")]:
        r = run_size(n, table, args.symbols, args.seed + n, args.repeat)
        results.append(r)
        print(f"{r['patterns']:8d} {r['rows']:6d} {r['own_s']:7.2f} {r['shared_s']:9.2f} "
              f"{r['own_tput']:11.0f} {r['shared_tput']:14.0f} {r['ratio']:6.2f}x "
              f"{r['nodes']:5d} ({r['nodes_alone']:4d}) {r['shared_nodes']:7d} "
              f"{r['matches']:8d}  {r['identical']}  {r['seconds']}")
        if not r["identical"]:
            raise SystemExit("shared and own outputs differ")
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "shared_dag.md"), "w") as f:
        f.write("# Shared DAG evaluator vs own CepWorkers (bench_shared_dag.py)\n\n")
        f.write(f"{args.rows} rows, {args.symbols} symbols (skewed), 4 regions, merge "
                "sharing of each pattern's own best plan; evaluator only (prepared, sorted "
                f"batches in memory), one process, best of {args.repeat} runs.\n\n")
        f.write("| patterns | own s | shared s | ratio | nodes (alone) | shared nodes | "
                "matches | identical |\n|---|---|---|---|---|---|---|---|\n")
        for r in results:
            f.write(f"| {r['patterns']} | {r['own_s']:.2f} | {r['shared_s']:.2f} | "
                    f"{r['ratio']:.2f}x | {r['nodes']} ({r['nodes_alone']}) | "
                    f"{r['shared_nodes']} | {r['matches']} | {r['identical']} |\n")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot([r["patterns"] for r in results], [r["ratio"] for r in results], marker="o")
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("patterns in the workload")
    ax.set_ylabel("throughput gain vs own workers")
    ax.set_title("shared DAG evaluator (merge sharing)")
    fig.tight_layout()
    fig.savefig(os.path.join(RESULTS, "shared_dag.png"), dpi=120)
    print("saved", os.path.join(RESULTS, "shared_dag.png"))


if __name__ == "__main__":
    main()
