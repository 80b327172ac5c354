"""Peak memory of CEP mode without WITHIN (issue 24 A1), each run in a fresh process.

    python benchmarks/bench_cep_memory.py [rows ...]

SEQ(a, KL(b), c) over x random in {0, 1, 2} (a/b/c on x = 0/1/2), no window: under
SKIP_TILL_ANY_MATCH every subset of the b rows between an a and a c is a match, under
SKIP_TILL_NEXT_MATCH every (a, later c) pair is. Prints per run the outcome, the wall
time and the child's peak RSS (runtime.cep_worker.BYTES_PER_ENTRY is chosen well
above the RSS a bounded state entry costs here). Hand-run only.
"""
from __future__ import annotations

import subprocess
import sys
import time

CHILD = """
import resource, sys
import numpy as np, pyarrow as pa
import cepsql
n, strategy, limit = int(sys.argv[1]), sys.argv[2], sys.argv[3]
rng = np.random.default_rng(1)
t = pa.table({"ts": np.arange(n), "x": rng.integers(0, 3, n)})
sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(a.ts) AS t0, "
       "count(b.*) AS nb, c.ts AS t1 ONE ROW PER MATCH STRATEGY " + strategy +
       " PATTERN (SEQ(a, KL(b), c)) DEFINE a AS a.x = 0, b AS b.x = 1, c AS c.x = 2)")
options = {} if limit == "default" else {"max_partial_matches": int(limit)}
try:
    with cepsql.planner_options(**options):
        print(len(cepsql.match_recognize(sql, t=t)), "matches")
except cepsql.CepRuntimeError as e:
    print("CepRuntimeError", str(e).split(":")[0])
print("peak", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, "MB")
"""


def run(n: int, strategy: str, limit: str = "default") -> None:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, str(n), strategy, limit],
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    lines = done.stdout.strip().splitlines() or done.stderr.strip().splitlines()[-1:]
    print(f"{strategy:22} {n:>6} rows  limit={limit:>9}  {wall:7.2f} s  "
          + "  ".join(line[:100] for line in lines))


if __name__ == "__main__":
    sizes = [int(a) for a in sys.argv[1:]] or [5_000, 10_000, 20_000]
    for n in sizes:
        run(n, "SKIP_TILL_NEXT_MATCH")
    run(2_000, "SKIP_TILL_ANY_MATCH")
    run(2_000, "SKIP_TILL_ANY_MATCH", "10000000")
