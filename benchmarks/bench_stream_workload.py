"""A workload over a stream, per-key engine only (no Spark): the one operator's
WorkloadEngine (rows released once per key, every view's own streaming evaluator, one
stored state value per key) against one StreamEngine per view (what one streaming query
per view does), and the batch workers on the same rows. Ratios from one process run.

    python benchmarks/bench_stream_workload.py [--rows 20000] [--views 4] [--increments 100]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa

from cepsql.backends.streaming.engine import KeyState, new_engine
from cepsql.backends.streaming.processor import state_from_row as one_from_row
from cepsql.backends.streaming.processor import state_to_row as one_to_row
from cepsql.backends.streaming.workload import (WorkloadEngine, fingerprint, state_from_row,
                                                state_to_row)
from cepsql.dialect import find_match_recognize
from cepsql.exprs.arrow_eval import evaluate_arrow
from cepsql.local_sql import sort_table
from cepsql.runtime.executor import plan_query
from cepsql.runtime.shared.one_pass import plan_pass

VIEWS = [
    "PATTERN (a b+) WITHIN INTERVAL '2' SECOND DEFINE b AS b.price > PREV(b.price)",
    "STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, b)) WITHIN INTERVAL '2' SECOND "
    "DEFINE a AS a.price < 0, b AS b.price > a.price + 5",
    "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b, c)) WITHIN INTERVAL '1' SECOND "
    "DEFINE a AS a.price < -5, b AS b.price > 0, c AS c.price < b.price",
    "STRATEGY SKIP_TILL_NEXT_MATCH PATTERN (SEQ(a, KL(b), c)) WITHIN INTERVAL '2' SECOND "
    "DEFINE a AS a.price < -8, b AS b.price > PREV(b.price), c AS c.price < -3",
]


def _sql(k: int) -> str:
    return ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY part ORDER BY ts "
            f"MEASURES count(*) AS n ONE ROW PER MATCH {VIEWS[k % len(VIEWS)]})")


def _spec(sql: str):
    return find_match_recognize(sql)[0].spec


def _table(n: int, keys: int, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"part": rng.integers(0, keys, n).astype(str).tolist(),
                     "ts": np.round(np.arange(n) * 0.02, 3),
                     "price": np.round(rng.normal(0, 6, n)), "vol": np.ones(n)})


def _increments(table: pa.Table, increments: int, keys: list[str]):
    """(per-key slices, watermark ms) per increment; the watermark trails by 0.5 s."""
    bounds = np.linspace(0, table.num_rows, increments + 1).astype(int)
    for lo, hi in zip(bounds, bounds[1:]):
        part = table.slice(lo, hi - lo)
        watermark = int(part.column("ts").to_numpy()[-1] * 1000) - 500
        codes = np.asarray(part.column("part").to_pylist())
        yield {k: part.filter(pa.array(codes == k)) for k in keys if (codes == k).any()}, \
            watermark


def run(rows: int, views: int, increments: int, keys: int = 10) -> dict[str, float]:
    table = _table(rows, keys)
    sqls = [_sql(k) for k in range(views)]
    plans = [plan_query(_spec(q), table.schema, q) for q in sqls]
    shared = plan_pass(table.schema, plans, {"algorithm": "NONE"})
    group = shared.groups[0]
    for name, expr in group.prepare:
        table = table.append_column(name, evaluate_arrow(expr, table))
    shared.bind([table.schema])
    names = sorted(set(table.column("part").to_pylist()))
    sort_keys = group.sort_keys[1:]
    steps = list(_increments(table, increments, names)) + [({}, 1 << 50)]
    out = {}

    t0 = time.perf_counter()
    engine = WorkloadEngine(group.patterns, "ts", sort_keys)
    tag = fingerprint(group.patterns)
    states, emitted = {}, 0
    for by_key, watermark in steps:
        for key in names:
            state = states.get(key) or engine.new_state()
            outputs, _, _ = engine.advance(state, by_key.get(key), watermark)
            emitted += sum(b.num_rows for _, b in outputs)
            states[key] = state_from_row(state_to_row(state, tag), len(group.patterns), tag)
    out["workload"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    alone = 0
    for p in group.patterns:
        one = new_engine(p.bound.worker, "ts", sort_keys)
        own = {}
        for by_key, watermark in steps:
            for key in names:
                state = own.get(key) or KeyState()
                rows = by_key.get(key)
                if rows is not None:
                    rows = pa.Table.from_arrays([rows.column(s) for s, _ in p.inputs],
                                                names=[o for _, o in p.inputs])
                alone += sum(b.num_rows for b in one.advance(state, rows, watermark).output)
                own[key] = one_from_row(one_to_row(state))
    out["per_view"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    ordered = sort_table(table, list(group.sort_keys)).combine_chunks()
    batch = 0
    for p in group.patterns:
        worker_in = [p.worker_batch(b) for b in ordered.to_batches()]
        batch += sum(b.num_rows for b in p.bound.worker(iter(worker_in)))
    out["batch"] = time.perf_counter() - t0
    assert emitted == alone == batch, (emitted, alone, batch)
    out["matches"] = emitted
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--views", type=int, default=4)
    ap.add_argument("--increments", type=int, default=100)
    args = ap.parse_args()
    r = run(args.rows, args.views, args.increments)
    print(f"{args.rows} rows, {args.views} views, {args.increments} increments, "
          f"{r['matches']} matches (equal on all three paths)")
    print(f"workload engine {r['workload']:.2f} s; one engine per view {r['per_view']:.2f} s "
          f"(workload / per-view speed {r['per_view'] / r['workload']:.2f}x); batch "
          f"{r['batch']:.2f} s (workload events/s = {r['batch'] / r['workload']:.4f} of batch)")
    _plot(r, args)


def _plot(r: dict, args) -> None:
    """benchmarks/results/stream_workload.png: the three paths' seconds."""
    import os

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3))
    labels = ["workload engine\n(one operator)", "one engine\nper view", "batch workers"]
    ax.bar(labels, [r["workload"], r["per_view"], r["batch"]], color=["C0", "C1", "C2"])
    ax.set_ylabel("seconds")
    ax.set_title(f"{args.rows} rows, {args.views} views, {args.increments} increments",
                 fontsize=9)
    fig.tight_layout()
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                       "stream_workload.png")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    fig.savefig(out, dpi=110)
    print("plot:", out)


if __name__ == "__main__":
    main()
