"""Peak memory of CEP mode without WITHIN (issue 24 A1), each run in a fresh process.

    python benchmarks/bench_cep_memory.py [rows ...]

SEQ(a, KL(b), c) over x random in {0, 1, 2} (a/b/c on x = 0/1/2), no window: under
SKIP_TILL_ANY_MATCH every subset of the b rows between an a and a c is a match, under
SKIP_TILL_NEXT_MATCH every (a, later c) pair is. Prints per run the outcome, the wall and
CPU time, the child's peak RSS, the evaluator's peak held state entries (runs, buffer
nodes, words of the matches held; what cepsql.cep.maxPartialMatches bounds) and the
output's own size (its pandas bytes). ``histories`` is the baseline in the same run: the
evaluator as before compact partitions (CepMatcher.keep_histories), runs with buffer
nodes and every match held with its rows until output. Hand-run only.

Figures (2 cores shared with other jobs, load 8-16, 2026-11-29): STNM, peak RSS / peak
held entries (a compact match counts 2) / output (pandas MB) / process CPU.

    rows   matches     histories (before)                compact (after)
    2000      230,367     991 MB  51.6M   5.9 MB 1.33 s     208 MB    0.46M   5.9 MB 0.14 s
    5000    1,327,971  stops at the cap (65.8M)             402 MB    2.7M   34.2 MB 0.86 s
   10000    5,590,514  stops at the cap                    1153 MB   11.2M  144.0 MB 4.33 s
   20000   22,122,174  stops at the cap                    4056 MB   44.3M  569.6 MB 21.5 s

The output itself is quadratic here (every (a, later c) pair): compact holds each match as
its output row (6 words) plus one run per start row, so RSS follows the output (about 8x
its pandas size: held rows, output buffers, the sort, Arrow and pandas). SKIP_TILL_ANY_MATCH
still stops at the cap (its output is exponential; no compact runs: they would not merge).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

CHILD = """
import resource, sys, time
import numpy as np, pyarrow as pa
import cepsql
from cepsql.runtime import cep_worker
n, strategy, limit, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
if mode == "histories":
    built = cep_worker.CepWorker._built_matcher
    def with_histories(self):
        matcher = built(self)
        matcher.keep_histories()
        return matcher
    cep_worker.CepWorker._built_matcher = with_histories
held = []
record = cep_worker.CepWorker._record_stats
def recorded(self, matcher):
    held.append(matcher.stats()["peak_held"])
    record(self, matcher)
cep_worker.CepWorker._record_stats = recorded
rng = np.random.default_rng(1)
t = pa.table({"ts": np.arange(n), "x": rng.integers(0, 3, n)})
sql = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(a.ts) AS t0, "
       "count(b.*) AS nb, c.ts AS t1 ONE ROW PER MATCH STRATEGY " + strategy +
       " PATTERN (SEQ(a, KL(b), c)) DEFINE a AS a.x = 0, b AS b.x = 1, c AS c.x = 2)")
options = {} if limit == "default" else {"max_partial_matches": int(limit)}
cpu = time.process_time()
try:
    with cepsql.planner_options(**options):
        out = cepsql.match_recognize(sql, t=t)
    print(len(out), "matches", f"output {out.memory_usage(deep=True).sum() / 2**20:.1f} MB")
except cepsql.CepRuntimeError as e:
    print("CepRuntimeError", str(e).split(":")[0][:60])
print(f"cpu {time.process_time() - cpu:.2f} s")
print("held", max(held) if held else "-")
print("peak", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, "MB")
"""


def run(n: int, strategy: str, mode: str = "compact", limit: str = "default") -> None:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, str(n), strategy, limit, mode],
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    lines = done.stdout.strip().splitlines() or done.stderr.strip().splitlines()[-1:]
    print(f"{strategy:20} {mode:9} {n:>6} rows limit={limit:>8} {wall:7.2f} s wall  "
          + "  ".join(line[:100] for line in lines)
          + "  load %.1f %.1f %.1f" % os.getloadavg(), flush=True)


if __name__ == "__main__":
    sizes = [int(a) for a in sys.argv[1:]] or [2_000, 5_000, 10_000, 20_000]
    for n in sizes:
        for mode in ("histories", "compact"):
            run(n, "SKIP_TILL_NEXT_MATCH", mode)
    for mode in ("histories", "compact"):
        run(2_000, "SKIP_TILL_ANY_MATCH", mode)
        run(2_000, "SKIP_TILL_ANY_MATCH", mode, "10000000")
