"""Ctrl-C stops an in-process query whose partitions run on several threads (issue 24
A4): the signal reaches only the main thread, which sets the run's cancel flag that the
other threads' evaluators watch (backends/local/threads.py, cepsql/_ext/interrupt.pxd)."""
from __future__ import annotations

import pytest

from support.interrupt import interrupt_after_ready

# 4 partitions of 50,000 rows on 2 threads (4 slices): each quadratic in its start rows
_SLOW = """
import numpy as np, pandas as pd, cepsql
n = 200_000
t = pd.DataFrame({"p": np.arange(n) %% 4, "id": np.arange(n), "x": np.ones(n, dtype=np.int64)})
sql = %r
with cepsql.planner_options(threads=2):
    cepsql.match_recognize(sql, t=t.head(10))  # imports and compilation done
    print("ready", flush=True)
    cepsql.match_recognize(sql, t=t)   # minutes
print("finished", flush=True)
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sql", [
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY id MEASURES COUNT(*) AS n "
    "PATTERN ((A*)*B) DEFINE A AS x = 1, B AS B.id - FIRST(A.id) > 1000000)",
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY id MEASURES FIRST(a.id) AS f "
    "ONE ROW PER MATCH STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) "
    "WITHIN 10000000 ROWS DEFINE a AS a.x = 1, b AS b.x > a.x)"], ids=["sql", "cep"])
def test_ctrl_c_stops_every_thread(sql):
    run = interrupt_after_ready(_SLOW % sql)
    assert "finished" not in run.out
    assert run.returncode != 0 and "KeyboardInterrupt" in run.err, run.err[-2000:]
    assert run.waited < 5, f"the threads ran on for {run.waited:.1f} s after Ctrl-C"
