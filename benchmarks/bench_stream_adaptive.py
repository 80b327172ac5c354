"""Adaptive re-planning on a stream vs the static start-up plan (issue 25.1 on streams),
in-process: the streaming engine (backends/streaming/replanning.py) driven micro-batch by
micro-batch as Spark's stateful processor drives it (each step's state stored as Arrow
IPC bytes and read back), no JVM.

    python benchmarks/bench_stream_adaptive.py                       # paper's drift + flip
    python benchmarks/bench_stream_adaptive.py --rows 60000 --xs 1000,10000 --batch 5000

Input: bench_adaptive.py's generator (the paper's relabelling: every x events y = 5 types
permuted, "composed" or "independent"), and "flip": the start-up rates for the first half,
then the same types with their ranks reversed (a the most frequent) -- the drift that
holds long enough for a switch to pay. One key (no PARTITION BY), events in ts order, a
micro-batch every --batch rows, the watermark --delay seconds behind the newest event.

Runs, interleaved in one process, best of --repeat by process CPU:
  uniform  the plan compiled without statistics, never changed (streams before this work);
  static   each key plans once from its first cepsql.stats.workerSampleRows rows and keeps
           that plan (cepsql.adaptive.enabled=false);
  adaptive the same start-up plan, re-planned when the newest rows' statistics drift.
Their matches must be identical. Prints events per CPU second, adaptive/static, switches,
checks and the load; --append adds the table to benchmarks/results/streaming.md.
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from collections import Counter

import pyarrow as pa

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from bench_adaptive import SQL, pattern_types, reversed_stream, stream  # noqa: E402
from cepsql.backends.streaming.engine import KeyState, new_engine  # noqa: E402
from cepsql.backends.streaming.processor import state_from_row, state_to_row  # noqa: E402
from cepsql.backends.streaming.replanning import stream_engine  # noqa: E402
from cepsql.compile.clause import plan_query  # noqa: E402
from cepsql.exprs.arrow_eval import evaluate_arrow  # noqa: E402
from cepsql.parse import find_match_recognize  # noqa: E402
from cepsql.runtime.adaptive import AdaptiveSettings  # noqa: E402
from cepsql.runtime.workers import bind_worker  # noqa: E402
from cepsql.stats.worker import InWorkerStatistics  # noqa: E402

RUNS = ("uniform", "static", "adaptive")
FLUSH_MS = 1 << 50


def flipped(rows: int, types: int, skew: float, seed: int = 0) -> pa.Table:
    """Start-up rates for rows // 2 events, then the ranks reversed (ts continues)."""
    first = stream(rows // 2, rows, types, skew, seed, "independent")
    second = reversed_stream(rows - rows // 2, types, skew, seed + 7)
    shift = pa.compute.add(second.column("ts").cast(pa.int64()),
                           first.column("ts")[-1].cast(pa.int64()).as_py() + 10_000)
    second = second.set_column(0, "ts", shift.cast(pa.timestamp("us")))
    return pa.concat_tables([first, second.cast(first.schema)])


def planned(sql: str, schema: pa.Schema, run: str, settings: AdaptiveSettings,
               sample_rows: int):
    [site] = find_match_recognize(sql)
    statistics = None if run == "uniform" else InWorkerStatistics(
        sample_rows, adaptive=settings if run == "adaptive" else None)
    plan = plan_query(site.spec, schema, sql, statistics=statistics)
    return plan


def prepared(table: pa.Table, plan) -> pa.Table:
    """table with the plan's row-local columns (what the packer's input holds on Spark)."""
    for name, expr in plan.prepare_columns:
        table = table.append_column(name, evaluate_arrow(expr, table))
    return table


def timed(sql: str, table: pa.Table, run: str, settings, sample_rows: int, batch: int,
          delay_ms: int):
    """(process CPU s, matches, engine) of one streamed run."""
    plan = planned(sql, table.schema, run, settings, sample_rows)
    table = prepared(table, plan)
    bound = bind_worker(plan, table.schema)
    make = new_engine if run == "uniform" else stream_engine
    engine = make(bound.worker, "ts", list(plan.sort_keys), plan.spec)
    ts_ms = table.column("ts").cast(pa.int64()).to_numpy() // 1000
    state, out = KeyState(), []
    cpu = time.process_time()
    for lo in range(0, table.num_rows, batch):
        part = table.slice(lo, batch)
        watermark = int(ts_ms[min(lo + batch, table.num_rows) - 1]) - delay_ms
        out += engine.advance(state, part, watermark).output
        state = state_from_row(state_to_row(state))   # as Spark stores it
    out += engine.advance(state, None, FLUSH_MS).output
    cpu = time.process_time() - cpu
    got = pa.Table.from_batches([b for b in out if b.num_rows], schema=bound.worker_schema)
    return cpu, Counter(map(tuple, zip(*(got.column(c).to_pylist() for c in got.column_names)))), engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--types", type=int, default=50)
    parser.add_argument("--skew", type=float, default=1.5)
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--xs", default="100,1000,10000")
    parser.add_argument("--transforms", default="composed,independent,flip")
    parser.add_argument("--batch", type=int, default=10_000, help="rows per micro-batch")
    parser.add_argument("--delay", type=float, default=1.0, help="watermark delay, s")
    parser.add_argument("--sample-rows", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--append", action="store_true")
    args = parser.parse_args()
    settings = AdaptiveSettings()
    sql = SQL.format(window=args.window, **pattern_types(args.types))
    lines = [(f"rows {args.rows}, {args.types} types (Zipf {args.skew}), window {args.window}"
              f" s at 100 events/s, micro-batch {args.batch} rows, watermark delay "
              f"{args.delay} s, cepsql.adaptive.* defaults; events per process-CPU second"),
             "", ("| transform | x | uniform | static | adaptive | adaptive / static | "
                  "switches | checks | matches | load |"), "|---|---|---|---|---|---|---|---|---|---|"]
    print(lines[0])
    for transform in args.transforms.split(","):
        xs = [0] if transform == "flip" else [int(x) for x in args.xs.split(",")]
        for x in xs:
            table = flipped(args.rows, args.types, args.skew) if transform == "flip" else \
                stream(args.rows, x, args.types, args.skew, transform=transform)
            best: dict = {}
            for _ in range(args.repeat):
                for run in RUNS:
                    got = timed(sql, table, run, settings, args.sample_rows, args.batch,
                                int(args.delay * 1000))
                    if run not in best or got[0] < best[run][0]:
                        best[run] = got
            same = best["uniform"][1] == best["static"][1] == best["adaptive"][1]
            speed = {r: table.num_rows / max(best[r][0], 1e-9) for r in RUNS}
            ad = best["adaptive"][2]
            row = (f"| {transform} | {x or '-'} | {speed['uniform']:,.0f} | "
                   f"{speed['static']:,.0f} | {speed['adaptive']:,.0f} | "
                   f"{speed['adaptive'] / speed['static']:.2f} | {ad.switches} | {ad.checks} | "
                   f"{sum(best['static'][1].values()):,} | {os.getloadavg()[0]:.1f} |")
            lines.append(row + ("" if same else " MATCHES DIFFER"))
            print(row + ("" if same else "  MATCHES DIFFER"), flush=True)
    if args.append:
        path = os.path.join(ROOT, "benchmarks", "results", "streaming.md")
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"\n## {datetime.date.today()} (s31-streamadapt): adaptive re-planning on a "
                    f"stream (`bench_stream_adaptive.py`)\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
