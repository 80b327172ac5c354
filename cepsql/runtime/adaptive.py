"""Adaptive re-planning inside a task (issue 13.3; SIGMOD'19 section 6.2.3 after VLDB'18).

Runs in tasks. A task planned from its first rows (task_planning.py) keeps estimating
the statistics from its newest rows; when they drift from those its current plan was
built on by more than ``cepsql.adaptive.threshold`` it re-plans and, if the plan changes, switches
evaluators at the chunk boundary t (the first row the current evaluator has not
processed):

  * the old evaluator keeps only matches whose first row is < t and runs on the open
    group's rows until none can still be found (its window has moved past t, or the
    group ended), numbering them as before;
  * the new evaluator starts on the rows the old one would read next (the window and the
    deepest PREV back from t) and keeps only matches whose first row is >= t; it holds
    them until the old one is done, then numbers them after the old one's count.

Under SKIP_TILL_ANY_MATCH the matches are the sets of rows satisfying the pattern, the
same for every plan, so each is reported exactly once; MATCH_NUMBER orders matches by
first row first, so the old plan's matches are exactly the first ones. Only for WITHIN
clauses (the old evaluator must finish within a window) without SKIP PAST LAST ROW or
WITH UNMATCHED ROWS (both read every match of the group) -- see ``adaptable``.

Never slower than static, as far as CPU can tell (``PlanCpu``): the cost model prices a
switch, the CPU measures it. After a switch (once the old plan is drained) the new
plan's thread CPU per row over ``probe_chunks`` chunks is compared with the old plan's
over the chunks before the switch; when it is ``revert_margin`` times that or more, the
old plan comes back (the same exact switch) and the checks back off: the interval cap
doubles, as it does after every re-plan that found nothing worth switching, and returns
to ``max_check_every`` once a switch paid.
"""
from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import pyarrow as pa

from cepsql.analyze.conjuncts import analyze_defines
from cepsql.errors import CepAnalysisError
from cepsql.planning.cost import plan_cost
from cepsql.runtime.cep_worker import CepWorker
from cepsql.runtime.pending import PendingRows, pieces, with_zero
from cepsql.stats import unary_fractions

ENABLED_CONF = "cepsql.adaptive.enabled"
THRESHOLD_CONF = "cepsql.adaptive.threshold"
CHECK_ROWS_CONF = "cepsql.adaptive.checkRows"
CHUNK_CONF = "cepsql.adaptive.chunkRows"   # rows between checks (and possible switches)
MIN_GAIN_CONF = "cepsql.adaptive.minGain"
CONFIRM_CONF = "cepsql.adaptive.confirmChecks"
CHUNK_ROWS = 8192            # default rows per chunk: a drift is seen within a few chunks
NO_BOUND = 1 << 62            # the evaluator's "no restriction" on a match's first row
_FLOOR = 1e-3                 # rates and selectivities below count as this (log ratio)
_ANY = 3                      # CepConfig.strategy of SKIP_TILL_ANY_MATCH
#: the check interval's cap grows to at most this many times max_check_every while
#: checks do not pay (``PlanCpu.backoff``)
MAX_BACKOFF = 64


@dataclass(frozen=True)
class AdaptiveSettings:
    """threshold: re-plan when some variable's row fraction or some pair's selectivity
    changed by more than this factor's natural log; check_rows: newest rows estimated
    at each check (check_pairs row pairs per selectivity); check_every: chunks between
    checks; chunk_rows: rows per chunk. min_gain: switch only when the running plan,
    priced on the fresh statistics, costs this many times the new plan (a switch runs
    both plans for a window: plans that differ little do not pay for it). A check that
    switches nothing doubles the chunks to the next one, up to max_check_every (checks
    cost an estimate each, and without drift they find nothing); a switch resets it.
    Checks first compare the variables' row fractions alone (a few times cheaper than a
    full estimate); every full_every-th check also estimates the selectivities. confirm:
    checks in a row that must choose the same new plan before the switch (a drift that
    does not outlast a chunk is gone before a switch could pay). prior_events /
    prior_pairs: how much evidence the fresh estimates need to move the running ones
    (``settle``): a rare variable's few rows or a selectivity from a few pairs is mostly
    noise (a selectivity of 0 from 3 pairs made the planner join a frequent variable
    last, 10x slower than the static plan). probe_chunks / revert_margin: after a switch
    the new plan's CPU per row over probe_chunks chunks is compared with the old plan's
    over as many chunks before it; at revert_margin times or more the old plan comes
    back (``PlanCpu``; inf: never, 0: always)."""
    threshold: float = 1.0
    check_rows: int = 2_000
    check_pairs: int = 2_000
    check_every: int = 1
    chunk_rows: int = CHUNK_ROWS
    min_gain: float = 1.5
    max_check_every: int = 2
    full_every: int = 4
    confirm: int = 2
    prior_events: float = 4.0
    prior_pairs: float = 50.0
    probe_chunks: int = 2
    revert_margin: float = 1.2


def adaptive_settings(get: Callable[[str], str | None]) -> AdaptiveSettings | None:
    """The session's adaptive settings (None when cepsql.adaptive.enabled=false)."""
    enabled = (get(ENABLED_CONF) or "true").strip().lower()
    if enabled not in ("true", "false"):
        raise CepAnalysisError(f"invalid value {enabled!r} for {ENABLED_CONF}: expected "
                               "true or false")
    if enabled == "false":
        return None
    return AdaptiveSettings(threshold=_number(get, THRESHOLD_CONF, 1.0, float),
                            check_rows=int(_number(get, CHECK_ROWS_CONF, 2_000, int)),
                            chunk_rows=int(_number(get, CHUNK_CONF, CHUNK_ROWS, int)),
                            min_gain=_number(get, MIN_GAIN_CONF, 1.5, float),
                            confirm=int(_number(get, CONFIRM_CONF, 2, int)))


def _number(get, key: str, default, kind):
    text = get(key)
    try:
        value = default if text is None else kind(str(text).strip())
    except ValueError:
        value = -1
    if not value > 0:
        raise CepAnalysisError(f"invalid value {text!r} for {key}: expected a positive number")
    return value


def adaptable(config) -> bool:
    """Whether plan switches are exact for this clause (see the module docstring)."""
    return (config.strategy == _ANY and config.window_kind != 0 and config.plan_nodes is not None
            and not config.select_past_last and not config.with_unmatched
            and config.breaks_column is None and CepWorker(config).streamable())


def drift(base, now) -> float:
    """Largest |log ratio| between two PatternStatistics over the row fractions of the
    variables and the pair selectivities (floored so absent variables stay finite)."""
    return max(log_drift(base.unary_selectivity, now.unary_selectivity),
               log_drift(base.selectivities, now.selectivities))


def settle(base, now, prior_events: float, prior_pairs: float):
    """now's statistics weighed against base's by their evidence (a Beta prior centred
    on base's value): a variable's row fraction counts as prior_events extra rows at
    base's fraction, a selectivity as prior_pairs extra pairs at base's value, so a
    fresh value from a few rows or pairs moves little and one from many moves fully.
    The rates follow the settled fractions (same rows per time unit as now's sample)."""
    rows = max(now.sample_rows, 0)
    unary = {v: settled_fraction(base.unary_selectivity.get(v), f, rows, prior_events)
             for v, f in now.unary_selectivity.items()}
    sels = {}
    for pair, value in now.selectivities.items():
        old = base.selectivities.get(pair)
        pairs = now.pairs_evaluated.get(pair, 0)
        sels[pair] = value if old is None else (value * pairs + old * prior_pairs) / (
            pairs + prior_pairs)
    rates = dict(now.rates)
    for v, f in now.unary_selectivity.items():
        if f > 0:
            rates[v] = now.rates[v] * unary[v] / f
        elif v in base.rates and base.unary_selectivity.get(v):
            rates[v] = base.rates[v] * unary[v] / base.unary_selectivity[v]
    return replace(now, rates=rates, unary_selectivity=unary, selectivities=sels)


def settled_fraction(old: float | None, fresh: float, rows: int, prior_events: float) -> float:
    """fresh (a fraction of rows rows) weighed against old with prior_events pseudo
    events: (fresh * rows + prior_events) / (rows + prior_events / old)."""
    if old is None or old <= 0:
        return fresh
    return (fresh * rows + prior_events) / (rows + prior_events / old)


def log_drift(old: dict, new: dict) -> float:
    """Largest |log ratio| over the keys of old that new has too (floored values)."""
    worst = 0.0
    for key, value in old.items():
        if key in new:
            worst = max(worst, abs(math.log(max(new[key], _FLOOR) / max(value, _FLOOR))))
    return worst


class PlanCpu:
    """Thread CPU per row of the running plan's own evaluator over its last chunks (not
    a drained old plan's), the verdict on a switch, and the check back-off.

    ``add`` each chunk's CPU and rows; ``switched`` when a switch has been made (the
    rate so far becomes the one to beat); ``verdict`` once probe_chunks chunks of the new
    plan have run: True = revert (it is revert_margin times slower or more). Every check
    that paid nothing (``unpaid``) and every revert doubles ``backoff``, up to
    MAX_BACKOFF; a kept switch resets it. The check interval's cap is
    ``max_check_every * backoff``."""

    def __init__(self, settings: AdaptiveSettings):
        self.settings = settings
        self.recent: deque = deque(maxlen=max(settings.probe_chunks, 1))   # (cpu, rows)
        self.before: float | None = None   # CPU per row of the plan switched from
        self.backoff = 1

    @staticmethod
    def now() -> float:
        """The clock the chunks are timed with (this thread's CPU)."""
        return time.thread_time()

    def add(self, cpu: float, rows: int) -> None:
        if rows > 0:
            self.recent.append((cpu, rows))

    @property
    def probing(self) -> bool:
        """A switch awaits its verdict (checks wait too: the new plan is being timed)."""
        return self.before is not None

    def switched(self, revert: bool = False) -> None:
        """A switch was made (a revert is not probed: its plan was timed already; nothing
        is probed when revert_margin is inf)."""
        never = math.isinf(self.settings.revert_margin)
        self.before = None if revert or never else self._rate()
        self.recent.clear()

    def verdict(self) -> bool | None:
        """None while probing is not over (or nothing is probed), else whether to revert."""
        if self.before is None or len(self.recent) < self.recent.maxlen:
            return None
        slower = self._rate() >= self.settings.revert_margin * self.before
        self.before = None
        if slower:
            self.unpaid()
        else:
            self.backoff = 1
        return slower

    def unpaid(self) -> None:
        """A check (or a switch) that paid nothing: later checks come later."""
        self.backoff = min(2 * self.backoff, MAX_BACKOFF)

    def cap(self) -> int:
        """The longest interval between checks now, in chunks."""
        return self.settings.max_check_every * self.backoff

    def _rate(self) -> float | None:
        rows = sum(r for _, r in self.recent)
        return sum(c for c, _ in self.recent) / rows if rows else None


class AdaptiveWorker(CepWorker):
    """CepWorker that re-plans as the statistics drift (streaming chunks, WITHIN only)."""

    def __init__(self, config, planner, statistics, choice, settings: AdaptiveSettings):
        super().__init__(config)
        self.planner = planner
        self.statistics = statistics    # what the current plan was last priced on
        self.choice = choice            # the current plan choice
        self.digest = plan_digest(choice)
        self.settings = settings
        self.split = analyze_defines(planner.planning.spec)   # what the cheap check reads
        self.switches = 0
        self.checks = 0
        self.reverts = 0                # switches back to a plan that ran faster

    def _new_push(self) -> "AdaptivePush":
        """Push state of one stream (``__call__``, ``feed``/``finish`` are MatchWorker's)."""
        return AdaptivePush(self)

    def _record(self, matcher) -> None:
        self.last_stats = {**matcher.stats(), "adaptive_checks": self.checks,
                           "adaptive_switches": self.switches,
                           "adaptive_reverts": self.reverts}


class AdaptivePush:
    """Push state of one stream (feed sorted batches, then finish): chunks of
    settings.chunk_rows rows through the current plan's evaluator, a drift check after
    each, and the previous evaluator drained next to the new one after a switch."""

    def __init__(self, worker: AdaptiveWorker):
        self.worker = worker
        self.cur = worker._new_matcher()
        self.cur_cont = False
        self.old = None                     # the previous plan's evaluator, until drained
        self.cur_skip = self.old_skip = 0   # leading pending rows each does not read
        self.old_carried = 0                # rows from old_skip on the old one already read
        self.pending = PendingRows(worker._group_starts, worker.settings.chunk_rows)
        self.since_check = 0
        self.check_every = worker.settings.check_every
        self.candidate = None               # plan_shape of a plan awaiting confirmation
        self.votes = 0                      # checks in a row that chose it
        self.cpu = PlanCpu(worker.settings)   # the running plan's CPU, the back-off
        self.previous = None                # the choice switched from (a revert's)
        self.new_rows = 0                   # rows added since the last chunk ran

    def feed(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        out: list[pa.RecordBatch] = []
        for piece in pieces([batch], self.worker.settings.chunk_rows):
            out += self._feed_piece(piece)
        return out

    def _feed_piece(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        w = self.worker
        self.pending.add(batch)
        self.new_rows += batch.num_rows
        if not self.pending.ready:
            return []
        table, all_starts = self.pending.table()
        out: list = []
        if self.old is not None:
            out += self._drain(table, all_starts, False)
        started = self.cpu.now()
        out += w._process(self.cur, table.slice(self.cur_skip),
                          _from(all_starts, self.cur_skip), True, self.cur_cont)
        self.cpu.add(self.cpu.now() - started, self.new_rows)
        self.new_rows = 0
        self.cur_cont = True
        keep_cur = self.cur_skip + self.cur.keep
        cur_carried = table.num_rows - keep_cur
        keep_old = self.old_skip + self.old.keep if self.old is not None else keep_cur
        self.since_check += 1
        switched, every = None, w.settings.check_every
        if self.old is None and self.cpu.probing:
            if self.cpu.verdict():   # the new plan ran slower: the old one comes back
                w.reverts += 1
                switched = self._switch(self.previous, keep_cur)
                self.cpu.switched(revert=True)
                self.since_check, every = 0, self.cpu.cap()
        elif self.old is None and self.since_check >= self.check_every:
            self.since_check = 0
            switched = self._maybe_switch(table, keep_cur)
            if switched is not None:
                self.cpu.switched()
            elif self.candidate is not None:   # confirm (or drop) it at the next chunk
                self.check_every = w.settings.check_every
            else:
                self.check_every = min(2 * self.check_every, self.cpu.cap())
        if switched is not None:
            self.old, self.cur = self.cur, switched
            self.old_carried = cur_carried
            self.cur_cont = False
            self.check_every = every
        base = min(keep_cur, keep_old)
        self.cur_skip, self.old_skip = keep_cur - base, keep_old - base
        self.pending.keep(table.slice(base))
        return out

    def finish(self) -> list[pa.RecordBatch]:
        out: list = []
        if self.pending.rows:
            table, all_starts = self.pending.table()
            if self.old is not None:
                out += self._drain(table, all_starts, True)
            out += self.worker._process(self.cur, table.slice(self.cur_skip),
                                        _from(all_starts, self.cur_skip), False,
                                        self.cur_cont)
            self.pending.clear()
        self.worker._record(self.cur)
        return out

    def _drain(self, table: pa.Table, all_starts: np.ndarray, last: bool) -> list:
        """Run the old evaluator on the rest of its group, in pieces of doubling size
        (it needs about one window of rows); once it can find nothing more, the new one
        numbers its held matches after the old one's count and the old one is dropped.
        Each piece holds at least the rows it carries from the last one (a shorter piece
        would make the evaluator start over on rows it has already matched)."""
        old, skip = self.old, self.old_skip
        later = all_starts[all_starts > skip]
        end = int(later[0]) if len(later) else table.num_rows
        group_ends = last or end < table.num_rows
        out: list = []
        step = 256
        closed = False
        while True:
            stop = min(end, skip + max(step, self.old_carried))
            if stop <= skip:   # no row left for it in this chunk
                break
            closed = group_ends and stop == end
            out += self.worker._process(old, table.slice(skip, stop - skip),
                                        np.zeros(1, dtype=np.int64), not closed, True)
            self.old_skip = skip
            self.old_carried = stop - skip - old.keep
            if closed or old.drained or stop == end:
                break
            skip += old.keep
            step *= 2
        if closed or old.drained:
            self.cur.release_numbers(old.match_no)
            self.old = None
        return out

    def _maybe_switch(self, table: pa.Table, keep_cur: int):
        """A new evaluator when the newest rows' statistics drifted and give another plan
        that pays (``drift_check``) at settings.confirm checks in a row (restricted to matches
        starting at the first unprocessed row), else None."""
        w = self.worker
        sample = table.slice(max(0, table.num_rows - w.settings.check_rows))
        w.checks += 1
        verdict = drift_check(w.planner, w.settings, w.split, w.statistics, w.choice,
                              sample, self.candidate, self.votes,
                              not w.checks % w.settings.full_every)
        w.statistics, self.candidate, self.votes = (verdict.statistics, verdict.candidate,
                                                    verdict.votes)
        choice = verdict.choice
        if choice is None:
            if verdict.unpaid:   # re-planned and found nothing worth a switch
                self.cpu.unpaid()
            return None
        return self._switch(choice, keep_cur)

    def _switch(self, choice, keep_cur: int):
        """The evaluator of choice from the first unprocessed row on; the running one
        keeps the matches starting before it (the module docstring's switch)."""
        w = self.worker
        self.previous = w.choice
        w.choice = choice
        t = self.cur_skip + self.cur.processed - keep_cur   # in the next call's rows
        self.cur.restrict_first(-NO_BOUND, t, 0)
        w.config = replace(w.config, **w.planner.plan_arrays(choice))
        w.digest = plan_digest(choice)
        w.switches += 1
        fresh = w._new_matcher()
        fresh.restrict_first(t, NO_BOUND, 1)
        return fresh


@dataclass(frozen=True)
class Verdict:
    """What one drift check decided: the plan choice to switch to (None: keep the running
    one), the statistics the running plan is priced on from now on, and the plan
    awaiting confirmation (plan_shape) with the checks in a row that chose it."""
    choice: object | None
    statistics: object
    candidate: tuple | None
    votes: int
    unpaid: bool = False   # the planner ran and found no plan worth a switch


def drift_check(planner, settings: AdaptiveSettings, split, statistics, running,
                sample: pa.Table, candidate: tuple | None = None, votes: int = 0,
                full: bool = False) -> Verdict:
    """One drift check of the newest rows (sample) for a plan choice ``running`` priced
    on ``statistics``: a switch when they drifted past settings.threshold and give
    another plan that pays (``gain`` >= min_gain) at settings.confirm checks in a row.
    The variables' row fractions alone are compared first (a few times cheaper than a
    full estimate) unless ``full`` or a plan awaits its confirmation (then the sample
    is estimated in full whatever the drift). Batch chunks (AdaptivePush) and stream
    keys (backends/streaming) both decide with it."""
    base, prior = statistics, settings.prior_events
    keep = Verdict(None, base, candidate, votes)
    if candidate is None and not full and log_drift(
            base.unary_selectivity,
            {v: settled_fraction(base.unary_selectivity.get(v), f, sample.num_rows, prior)
             for v, f in unary_fractions(split, sample).items()}) <= settings.threshold:
        return keep
    now = settle(base, planner.estimate(sample, settings.check_pairs), prior,
                 settings.prior_pairs)
    if candidate is None and drift(base, now) <= settings.threshold:
        return keep
    choice = planner.choose_with(now)
    shape = plan_shape(choice)
    if shape == plan_shape(running):   # the running plan is still the one to run
        return Verdict(None, now, None, votes, unpaid=True)
    if gain(running, choice, planner) < settings.min_gain:
        # keep the running plan's statistics: the drift stays visible, so later
        # checks price the switch again as the newest rows accumulate evidence
        return Verdict(None, base, None, votes, unpaid=True)
    votes = votes + 1 if shape == candidate else 1
    if votes < settings.confirm:
        return Verdict(None, base, shape, votes)
    return Verdict(choice, now, None, votes)


def gain(current, fresh, planner) -> float:
    """How many times the current choice's plans cost what the fresh choice's cost, both
    priced on the fresh choice's statistics with the planner's cost model (inf when they
    cannot be compared)."""
    if len(current.plans) != len(fresh.plans):
        return math.inf
    model = planner.planning.options.cost_model()
    old_cost = new_cost = 0.0
    for old, new in zip(current.plans, fresh.plans):
        if new.query is None:
            return math.inf
        old_cost += plan_cost(old, new.query, model)
        new_cost += plan_cost(new, new.query, model)
    return old_cost / new_cost if new_cost > 0 else (math.inf if old_cost > 0 else 1.0)


def plan_shape(choice) -> tuple:
    """The plans' shapes (orders, trees) without their costs: equal shapes, same plan."""
    return tuple((p.kind, p.order if p.kind == "order" else p.root) for p in choice.plans)


def plan_digest(choice) -> str:
    """A short text of the chosen plans (tests and benchmarks compare them)."""
    return " | ".join(" ".join(p.describe().split()[:10]) for p in choice.plans)


def _from(all_starts: np.ndarray, skip: int) -> np.ndarray:
    """Group starts of the rows from skip on (row 0 of them continues a group)."""
    return with_zero(all_starts[all_starts > skip] - skip)
