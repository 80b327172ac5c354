"""EXPLAIN ANALYZE's cost on the ordinary path.

1. The evaluators' counters are always on: the Cython loops of the SQL:2016 matcher and
   the CEP evaluator time the same with and without them. Run with ``--before DIR``
   (a directory holding the compiled ``cepsql/_ext`` modules of a build without the
   counters) to compare the two builds: each is timed in its own child process, the
   children alternating, on the same data; only the matcher call is timed (process CPU
   time, the minimum of the repeats), so the figures do not depend on the worker code.
2. The backend's figures (rows, partitions, per-variable rows, stage times) are taken
   only when a RunStatistics is passed: ``run_local`` with and without one, same process.

    PYTHONPATH=. python benchmarks/bench_explain_analyze.py [--rows N] [--repeats R] [--before DIR]

Prints ratios (after / before, analyze / ordinary) next to os.getloadavg(): the machine
is shared, so read them together."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa

SQL_MODE = """
SELECT * FROM t MATCH_RECOGNIZE (
  PARTITION BY sym ORDER BY ts
  MEASURES FIRST(a.ts) AS start_ts, LAST(c.ts) AS end_ts, count(b.price) AS n
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (a b+ c)
  DEFINE a AS price < 30, b AS b.price >= PREV(b.price), c AS c.price < PREV(c.price))
"""

# many thread states per row: b takes most rows, c ends a match rarely
SQL_STATES = """
SELECT * FROM t MATCH_RECOGNIZE (
  PARTITION BY sym ORDER BY ts
  MEASURES FIRST(a.ts) AS start_ts, count(b.price) AS n
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (a b*? (c | d)+)
  DEFINE a AS price < 50, b AS b.price > 5, c AS c.price < a.price - 40,
         d AS d.price > LAST(c.price) + 30)
"""

CEP_MODE = """
SELECT * FROM t MATCH_RECOGNIZE (
  PARTITION BY sym ORDER BY ts
  MEASURES a.ts AS a_ts, c.ts AS c_ts
  ONE ROW PER MATCH STRATEGY SKIP_TILL_NEXT_MATCH
  PATTERN (SEQ(a, b, c)) WITHIN 20 ROWS
  DEFINE a AS a.price < 20, b AS b.price > a.price + 30, c AS c.price < b.price - 40)
"""


MODES = (("sql", SQL_MODE), ("sql-states", SQL_STATES), ("cep", CEP_MODE))


def ticks(rows: int, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"sym": rng.choice([f"S{i:02d}" for i in range(20)], size=rows),
                     "ts": np.arange(rows, dtype=np.int64),
                     "price": rng.integers(0, 100, size=rows).astype(np.int64)})


def matcher_seconds(sql: str, table: pa.Table, repeats: int) -> float:
    """Minimum process CPU time of the compiled matcher over the sorted input (the
    worker's own chunk step: column lanes, matcher.run, output columns), one call."""
    from cepsql.backends.local.engine import sort_for_matching
    from cepsql.compile.clause import plan_query
    from cepsql.parse import find_match_recognize
    from cepsql.runtime.workers import bind_worker
    from cepsql.exprs.arrow_eval import evaluate_arrow
    site = find_match_recognize(sql)[0]
    plan = plan_query(site.spec, table.schema, sql)
    prepared = table
    for name, expr in plan.prepare_columns:
        prepared = prepared.append_column(name, evaluate_arrow(expr, table))
    worker = bind_worker(plan, prepared.schema).worker
    ordered = sort_for_matching(prepared, list(plan.sort_keys), plan).combine_chunks()
    syms = ordered.column("sym").to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(np.r_[True, syms[1:] != syms[:-1]]).astype(np.int64)
    best = float("inf")
    for _ in range(repeats):
        # the worker's chunk step, called directly: it is what the counters touch, and it
        # exists in both builds (the worker's end-of-stream stats() does not)
        matcher = worker._new_matcher()
        started = time.process_time()
        if plan.spec.strategy is None:
            worker._process(matcher, ordered, starts, False, None)
        else:
            worker._process(matcher, ordered, starts)
        best = min(best, time.process_time() - started)
    return best


def child(ext_dir: str | None, rows: int, repeats: int) -> None:
    """Print {mode: seconds} for the compiled modules in ext_dir (default: this build)."""
    import cepsql._ext
    if ext_dir:
        cepsql._ext.__path__.insert(0, ext_dir)
    table = ticks(rows)
    print(json.dumps({mode: matcher_seconds(sql, table, repeats) for mode, sql in MODES}))


def backend_figures(rows: int, repeats: int) -> dict[str, tuple[float, float]]:
    """{mode: (ordinary, with RunStatistics)} minimum process CPU seconds of run_local,
    one thread (so process time is the work), the two alternating."""
    import cepsql
    from cepsql.backends.local.engine import run_local
    from cepsql.runtime.run_stats import RunStatistics
    table = ticks(rows)
    out = {}
    with cepsql.planner_options(threads=1):
        for mode, sql in MODES:
            plain = analyzed = float("inf")
            run_local(sql, {"t": table})  # warm: plan caches, statistics
            for _ in range(repeats):
                started = time.process_time()
                run_local(sql, {"t": table})
                plain = min(plain, time.process_time() - started)
                started = time.process_time()
                run_local(sql, {"t": table}, stats=RunStatistics())
                analyzed = min(analyzed, time.process_time() - started)
            out[mode] = (plain, analyzed)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--before", help="compiled cepsql/_ext modules without the counters")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--ext-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.ext_dir, args.rows, args.repeats)
        return
    import cepsql
    print(f"cepsql from {os.path.dirname(cepsql.__file__)}; rows {args.rows:,}, "
          f"repeats {args.repeats}, load {os.getloadavg()}")
    if args.before:
        runs: dict[str, list[dict]] = {"before": [], "after": []}
        for _ in range(3):  # alternate the builds, 3 children each
            for name, ext in (("before", args.before), ("after", "")):
                cmd = [sys.executable, __file__, "--child", "--rows", str(args.rows),
                       "--repeats", str(args.repeats)] + (["--ext-dir", ext] if ext else [])
                done = subprocess.run(cmd, capture_output=True, text=True, check=True)
                runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
        for mode, _ in MODES:
            before = min(r[mode] for r in runs["before"])
            after = min(r[mode] for r in runs["after"])
            print(f"counters, {mode} matcher: before {before:.4f} s, after {after:.4f} s, "
                  f"after/before {after / before:.3f}  (load {os.getloadavg()})")
    for mode, (plain, analyzed) in backend_figures(args.rows, args.repeats).items():
        print(f"run_local {mode}: ordinary {plain:.4f} s, with EXPLAIN ANALYZE figures "
              f"{analyzed:.4f} s, ratio {analyzed / plain:.3f}  (load {os.getloadavg()})")


if __name__ == "__main__":
    main()
