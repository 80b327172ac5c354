"""Adaptive re-planning of the shared workload pass (runtime/shared_adaptive.py): with
switches forced at every check, the adaptive pass gives exactly the rows of the static
pass and of every pattern's own worker; workloads where a switch would not be exact keep
their start-up plan; the settings reach cepsql.workload.

Forced switches: threshold -1 (every check re-plans), min_gain 0 and confirm 1 (every
other plan is taken), and a replanner whose "planner" alternates between two different
global plans. Hypothesis draws some values from the literals of loaded modules, so the
property counts switches against the checks that proposed another plan per example
instead of requiring that a switch happened; a fixed example asserts that one did.
"""
from __future__ import annotations

from collections import Counter
from functools import partial

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cepsql
from cepsql.runtime.adaptive import AdaptiveSettings
from cepsql.backends.local.engine import table_statistics
from cepsql.runtime import shared_adaptive
from cepsql.runtime.one_pass import sharing_patterns
from cepsql.runtime.shared_adaptive import (AdaptiveSharedEvaluator, WorkloadReplanner,
                                            plan_shape)
from cepsql.sharing.planner import plan_workload, trivial_global_plan
from cepsql.sharing.pricing import global_plan_cost
from support.local_run import plan_local_workload

try:
    from .test_property_sql import SETTINGS, spec_of
    from .test_shared_dag import HEAD, _ticks, longer_streams, workloads
except ImportError:
    from test_property_sql import SETTINGS, spec_of
    from test_shared_dag import HEAD, _ticks, longer_streams, workloads


class AlternatingReplanner(WorkloadReplanner):
    """Re-plans to whichever of two global plans is not the running one (the
    evaluator's, once ``evaluator`` is set: a revert changes it), and counts the checks
    that proposed a plan other than the running one."""

    def __init__(self, patterns, adaptive, plans):
        super().__init__(patterns, adaptive, share=float("inf"))   # no CPU budget
        self.plans = plans
        self.running = plans[0]
        self.evaluator = None
        self.proposed = 0

    def plan(self, patterns):
        running = self.running if self.evaluator is None else self.evaluator.plan
        fresh = self.plans[1] if running is self.plans[0] else self.plans[0]
        if plan_shape(fresh) != plan_shape(running):
            self.proposed += 1
            self.running = fresh
        return fresh


def forced(chunk_rows: int, revert_margin: float = float("inf")) -> AdaptiveSettings:
    """Every check switches; no revert unless revert_margin says (0: every switch is
    undone once probed; by default none: CPU noise would decide)."""
    return AdaptiveSettings(threshold=-1.0, check_rows=16, check_pairs=64, chunk_rows=chunk_rows,
                            min_gain=0.0, max_check_every=1, full_every=1, confirm=1,
                            revert_margin=revert_margin)


def _rows(out, i: int) -> Counter:
    return Counter(tuple(map(repr, r.values()))
                   for b in (b for p, b in out if p == i) for r in b.to_pylist())


def run_three_ways(sqls: list[str], table: pa.Table, batch_rows: int, chunk_rows: int,
                   revert_margin: float = float("inf")):
    """(adaptive evaluator, its replanner) after checking that its rows equal the
    static pass's and every pattern's own worker's."""
    wl = plan_local_workload([spec_of(s) for s in sqls], table, batch_rows=batch_rows)
    patterns = sharing_patterns(wl.queries)
    first = plan_workload(patterns, seconds=0.05)
    other = trivial_global_plan(patterns)
    replanner = AlternatingReplanner(patterns, forced(chunk_rows, revert_margin),
                                     [first, other])
    adaptive = AdaptiveSharedEvaluator(first, partial(wl.evaluator, chunk_rows=chunk_rows),
                                       replanner)
    replanner.evaluator = adaptive
    got = adaptive.run(wl.batches)
    static = wl.evaluator(first, chunk_rows=chunk_rows).run(wl.batches)
    own = wl.own_outputs()
    for i, sql in enumerate(sqls):
        want = Counter(tuple(map(repr, r.values())) for r in own[i].to_pylist())
        assert _rows(static, i) == want, f"static, pattern {i}: {sql}"
        assert _rows(got, i) == want, (
            f"adaptive, pattern {i}: {sql}\nswitches {adaptive.switches}"
            f"\ninput: {table.to_pylist()}")
    return adaptive, replanner


def _adaptable(sql: str) -> str:
    return sql.replace("AFTER MATCH SKIP PAST LAST ROW", "").replace(
        "WITH UNMATCHED ROWS", "")


def test_forced_switches_keep_every_match():
    seen = {"switches": 0, "drains": 0}

    @settings(max_examples=25, **SETTINGS)
    @given(sqls=workloads(max_patterns=5, windowed=True), table=longer_streams(),
           batch_rows=st.integers(3, 20), chunk_rows=st.integers(3, 12))
    def check(sqls, table, batch_rows, chunk_rows):
        sqls = [_adaptable(s) for s in sqls]
        adaptive, replanner = run_three_ways(sqls, table, batch_rows, chunk_rows)
        assert adaptive.reason is None
        # every check that proposed another plan switched to it
        assert adaptive.switches == replanner.proposed
        assert adaptive.checks >= adaptive.switches
        seen["switches"] += adaptive.switches
    check()
    assert seen["switches"] > 0


def test_forced_switches_then_reverts_keep_every_match():
    """revert_margin 0: every switch, once probed, is undone (the new plan always counts
    as slower), through the same drain; the rows stay the static pass's."""
    @settings(max_examples=20, **SETTINGS)
    @given(sqls=workloads(max_patterns=4, windowed=True), table=longer_streams(),
           batch_rows=st.integers(3, 20), chunk_rows=st.integers(3, 12))
    def check(sqls, table, batch_rows, chunk_rows):
        sqls = [_adaptable(s) for s in sqls]
        adaptive, replanner = run_three_ways(sqls, table, batch_rows, chunk_rows,
                                             revert_margin=0.0)
        planned = adaptive.switches - adaptive.reverts
        # every check that proposed another plan switched to it; every such switch was
        # reverted unless the rows ended before its probe did
        assert planned == replanner.proposed
        assert adaptive.reverts <= planned <= adaptive.reverts + 1
        assert adaptive.stats["adaptive_reverts"] == adaptive.reverts
    check()


def test_a_reverted_switch_keeps_match_numbers():
    table = pa.concat_tables([_ticks()] * 3)
    table = table.set_column(1, "ts", pa.array(range(table.num_rows)))
    adaptive, _ = run_three_ways(FIXED, table, batch_rows=7, chunk_rows=2, revert_margin=0.0)
    assert adaptive.reverts >= 2


FIXED = [HEAD + "FIRST(a.ts) AS t0, LAST(c.ts) AS t2, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
         "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b, c)) WITHIN 5 ROWS "
         "DEFINE a AS a.tag = 'x', b AS b.tag = 'y' AND b.price > a.price, "
         "c AS c.price > PREV(c.price))",
         HEAD + "FIRST(p.ts) AS t0, count(*) AS n, MATCH_NUMBER() AS mn ALL ROWS PER MATCH "
         "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(p, q)) WITHIN 4 ROWS "
         "DEFINE p AS p.tag = 'x', q AS q.tag = 'y' AND q.price > p.price)"]


@pytest.mark.parametrize("chunk_rows", [2, 3, 5])
def test_match_numbers_continue_across_switches(chunk_rows):
    """Long groups cut by many switches, each drained: match numbers run on."""
    table = pa.concat_tables([_ticks()] * 3)
    table = table.set_column(1, "ts", pa.array(range(table.num_rows)))
    adaptive, _ = run_three_ways(FIXED, table, batch_rows=7, chunk_rows=chunk_rows)
    assert adaptive.switches >= 3
    assert adaptive.stats["adaptive_switches"] == adaptive.switches


def test_unexact_workloads_keep_the_start_up_plan():
    sqls = [FIXED[0].replace("ONE ROW PER MATCH", "ONE ROW PER MATCH "
                             "AFTER MATCH SKIP PAST LAST ROW"), FIXED[1]]
    adaptive, replanner = run_three_ways(sqls, _ticks(), batch_rows=4, chunk_rows=2)
    assert adaptive.reason is not None and "SKIP PAST LAST ROW" in adaptive.reason
    assert adaptive.checks == adaptive.switches == replanner.proposed == 0
    assert adaptive.stats["adaptive_off"] == adaptive.reason


@pytest.mark.parametrize("access", [None, 0.0, 2.0])
def test_a_plan_priced_on_its_own_statistics_costs_what_the_planner_said(access):
    table = pa.concat_tables([_ticks()] * 4)
    wl = plan_local_workload([spec_of(s) for s in FIXED], table)
    patterns = sharing_patterns(wl.queries, partial(table_statistics, table=table))
    for algorithm in ("NONE", "SA", "TABU", "PREFIX"):
        plan = plan_workload(patterns, algorithm=algorithm, seconds=0.05, access=access)
        assert global_plan_cost(plan, patterns, access) == pytest.approx(plan.cost)
    plan = trivial_global_plan(patterns, access)
    assert global_plan_cost(plan, patterns, access) == pytest.approx(plan.cost)


def _drifting_ticks(n: int = 240) -> pa.Table:
    """Two symbols whose rates swap half-way (a drift the checks see)."""
    tags = ["x" if (i % 5 == 0) == (i < n // 2) else "y" for i in range(n)]
    return pa.table({"part": ["p" if i % 3 else "q" for i in range(n)], "ts": list(range(n)),
                     "price": [(i * 7) % 11 for i in range(n)],
                     "vol": [float(i % 4) for i in range(n)], "tag": tags})


VIEWS = [f"CREATE TEMPORARY VIEW v{i} AS " + sql for i, sql in enumerate(FIXED)]


def test_cepsql_workload_switches_plans_by_the_adaptive_conf(monkeypatch):
    """cepsql.workload's adaptive settings reach the pass: with every check forced to
    switch, its rows are those of the views run alone and of the static pass."""
    calls = []

    def alternate(self, patterns):
        calls.append(len(calls))
        return trivial_global_plan(patterns) if len(calls) % 2 else \
            plan_workload(patterns, seconds=0.01)
    monkeypatch.setattr(WorkloadReplanner, "plan", alternate)
    monkeypatch.setattr(shared_adaptive, "CHECK_SHARE", float("inf"))
    table = _drifting_ticks()
    forced_conf = {"cepsql.adaptive.threshold": "1e-9", "cepsql.adaptive.minGain": "1e-9",
                   "cepsql.adaptive.confirmChecks": "1", "cepsql.adaptive.chunkRows": "6",
                   "cepsql.adaptive.checkRows": "12"}
    got = cepsql.workload(VIEWS, adaptive=forced_conf, t=table).dataframes()
    assert len(calls) > 2
    made = len(calls)
    static = cepsql.workload(VIEWS, adaptive={"cepsql.adaptive.enabled": "false"},
                             t=table).dataframes()
    assert len(calls) == made   # off: no re-plan
    alone = cepsql.backends.local.workload.views_alone(VIEWS, t=table)
    for name in ("v0", "v1"):
        assert len(got[name]) > 0
        for other in (static[name], alone[name]):
            assert sorted(map(repr, got[name].to_dict("records"))) == \
                sorted(map(repr, other.to_dict("records")))


def test_cepsql_workload_rejects_bad_adaptive_values():
    with pytest.raises(cepsql.CepAnalysisError, match="cepsql.adaptive.chunkRows"):
        cepsql.workload(VIEWS, adaptive={"cepsql.adaptive.chunkRows": "0"}, t=_ticks())


def test_the_new_plans_matches_at_the_border_wait_for_the_old_plans_count():
    """Matches starting exactly at the switch row, complete in the new plan's first
    chunk, are held until the old plan's count is known (the matcher's held bound was
    inclusive: they came out numbered 1, 2)."""
    sql = (HEAD + "FIRST(a.ts) AS t0, MATCH_NUMBER() AS mn ONE ROW PER MATCH "
           "STRATEGY SKIP_TILL_ANY_MATCH PATTERN (SEQ(a, b)) WITHIN 3 ROWS "
           "DEFINE a AS a.tag = 'x', b AS b.tag = 'x')")
    n = 20
    table = pa.table({"part": ["a"] * n, "ts": list(range(1, n + 1)), "price": [0] * n,
                      "vol": [0.5] * n, "tag": ["x"] * n})
    adaptive, _ = run_three_ways([sql], table, batch_rows=3, chunk_rows=3)
    assert adaptive.switches == 3
