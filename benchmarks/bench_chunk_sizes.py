"""The static plan of bench_adaptive.py's windowed SEQ(a, b, c, d, e) in chunks of several
sizes (issue 25: the engine's default CHUNK_ROWS ran it 1.4-3.6x slower than 8192-row
chunks, because a plan-tree store was compacted by window only at a chunk's end; the
windowed push now runs WINDOW_CHUNK_ROWS = 8192).

    python benchmarks/bench_chunk_sizes.py                      # 400k events, composed x=1000
    python benchmarks/bench_chunk_sizes.py --rows 200000 --types 10 --chunks 65536,8192

Prints per chunk size (in-process, process CPU, best of --repeat, sizes interleaved) the
CPU, the ratio to the fastest size, the evaluator's peak stored partial matches and the
load; the matches must be identical across sizes.
"""
from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_adaptive import SQL, canonical, pattern_types, stream, timed  # noqa: E402
from cepsql.runtime import cep_worker  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--types", type=int, default=50)
    parser.add_argument("--x", type=int, default=1000)
    parser.add_argument("--transform", default="composed")
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--chunks", default="65536,8192,2048")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    table = stream(args.rows, args.x, args.types, 1.5, transform=args.transform)
    sql = SQL.format(window=args.window, **pattern_types(args.types))
    sizes = [int(c) for c in args.chunks.split(",")]
    default = cep_worker.CHUNK_ROWS, cep_worker.WINDOW_CHUNK_ROWS
    best: dict[int, tuple] = {}
    try:
        for _ in range(args.repeat):
            for size in sizes:
                # benchmark-only: the windowed push's chunk size
                cep_worker.CHUNK_ROWS = cep_worker.WINDOW_CHUNK_ROWS = size
                got = timed(sql, table, None, 2000)
                if size not in best or got[1] < best[size][1]:
                    best[size] = got
    finally:
        cep_worker.CHUNK_ROWS, cep_worker.WINDOW_CHUNK_ROWS = default
    fastest = min(r[1] for r in best.values())
    same = len({tuple(canonical(r[2])) for r in best.values()}) == 1
    print(f"{args.rows:,} events, {args.types} types, {args.transform} x={args.x}, window "
          f"{args.window} s; process CPU s, best of {args.repeat}")
    for size in sizes:
        cpu, stats = best[size][1], best[size][5]
        print(f"  chunk {size:>7,}: {cpu:7.3f} s  x{cpu / fastest:5.2f} of fastest  peak pm "
              f"{stats.get('peak_partial_matches', 0):>9,}  matches {best[size][2].num_rows:,}"
              f"  load {os.getloadavg()[0]:.2f}")
    if not same:
        raise SystemExit("matches differ across chunk sizes")


if __name__ == "__main__":
    main()
