"""CEP mode without WITHIN holds bounded state (issue 24 A1): a partition's live runs,
partial matches and held match rows stop at cepsql.cep.maxPartialMatches (by default
scaled to the worker's memory) with a CepRuntimeError naming the key, instead of a bare
MemoryError or a worker killed by the machine."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import cepsql
from cepsql import CepAnalysisError, CepRuntimeError
from cepsql.backends.local.engine import run_local
from cepsql.planning.options import options_from_conf
from cepsql.runtime.run_stats import RunStatistics
from cepsql.runtime.cep_worker import STATE_LIMIT_KEY, default_state_limit

try:
    from .test_property_cep import assert_cep_matches
except ImportError:
    from test_property_cep import assert_cep_matches

#: issue 24 A1: a, KL(b), c on x = 0 / 1 / 2 with no window: every subset of the b rows
#: between an a and a c is a match under SKIP_TILL_ANY_MATCH
UNBOUNDED = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(a.ts) AS t0, "
             "count(b.*) AS nb, c.ts AS t1 ONE ROW PER MATCH STRATEGY {strategy} "
             "PATTERN (SEQ(a, KL(b), c)) DEFINE a AS a.x = 0, b AS b.x = 1, c AS c.x = 2)")


def stream(n: int) -> pa.Table:
    rng = np.random.default_rng(1)
    return pa.table({"ts": np.arange(n), "x": rng.integers(0, 3, n)})


@pytest.mark.parametrize("strategy", ["SKIP_TILL_ANY_MATCH", "SKIP_TILL_NEXT_MATCH"])
def test_unbounded_matches_stop_at_the_configured_bound(strategy):
    with cepsql.planner_options(max_partial_matches=2_000):
        with pytest.raises(CepRuntimeError, match=STATE_LIMIT_KEY) as info:
            cepsql.match_recognize(UNBOUNDED.format(strategy=strategy), t=stream(300))
    assert "more than 2,000" in str(info.value) and "WITHIN" in str(info.value)


def test_the_bound_does_not_change_matches_below_it():
    sql = UNBOUNDED.format(strategy="SKIP_TILL_NEXT_MATCH")
    free = cepsql.match_recognize(sql, t=stream(60))
    with cepsql.planner_options(max_partial_matches=100_000):
        bounded = cepsql.match_recognize(sql, t=stream(60))
    assert len(free) > 0 and free.equals(bounded)


def test_conf_key_and_default():
    assert options_from_conf({STATE_LIMIT_KEY: "5000"}.get).max_partial_matches == 5000
    assert options_from_conf({STATE_LIMIT_KEY: "auto"}.get).max_partial_matches is None
    with pytest.raises(CepAnalysisError, match=STATE_LIMIT_KEY):
        options_from_conf({STATE_LIMIT_KEY: "-1"}.get)
    assert default_state_limit() > 1_000_000


def test_memory_capped_process_gets_the_error_not_memory_error():
    """The default bound follows the address-space limit: under a 3 GB cap the issue's
    2,000-row query (which grew a Spark worker to 22.5 GB) ends in the CepRuntimeError."""
    child = textwrap.dedent(f"""
        import resource, sys
        cap = 3 * 1024 ** 3
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import cepsql
        from test_cep_state_limit import UNBOUNDED, stream
        try:
            cepsql.match_recognize(UNBOUNDED.format(strategy="SKIP_TILL_ANY_MATCH"),
                                   t=stream(2000))
        except cepsql.CepRuntimeError as e:
            print("CepRuntimeError", e)
        """)
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                          cwd=root, timeout=300, stdin=subprocess.DEVNULL)
    assert done.stdout.startswith("CepRuntimeError"), done.stdout + done.stderr[-3000:]
    assert STATE_LIMIT_KEY in done.stdout


def few_starts(n: int) -> pa.Table:
    """Two a rows, then b / c rows: the matches grow linearly with n, each one's rows too."""
    rng = np.random.default_rng(2)
    x = np.concatenate([[0, 0], rng.integers(1, 3, n - 2)])
    return pa.table({"ts": np.arange(n), "x": x})


def test_next_match_state_is_linear_in_rows():
    """SKIP_TILL_NEXT_MATCH without WITHIN: runs fold what ONE ROW PER MATCH reads
    (first row, FIRST/LAST, count) and a match is held as its output row, so the
    entries held at 2n rows stay near twice those at n -- not four times, as when
    every match kept its rows (issue 24 A1). The result equals the reference's."""
    sql = UNBOUNDED.format(strategy="SKIP_TILL_NEXT_MATCH")
    held = []
    for n in (300, 600):
        stats = RunStatistics()
        if n == 300:
            assert_cep_matches(sql, few_starts(n), stats)
        else:
            run_local(sql, {"t": few_starts(n)}, stats=stats)
        assert stats.last["matches_output"] > n / 3
        held.append(stats.last["peak_held"])
    assert held[1] <= 2.2 * held[0]
