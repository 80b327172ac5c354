"""Adaptive re-planning of a shared workload pass (issue 25.1; SIGMOD'19 section 6.2.3).
Runs in tasks.

``AdaptiveSharedEvaluator`` runs a SharedEvaluator of the current global plan in chunks
of ``AdaptiveSettings.chunk_rows`` rows and, between chunks, checks the newest rows'
statistics the way a single pattern does (runtime/adaptive.py: every pattern's row
fractions first, the full estimate every ``full_every``-th check or when they
``drift``). When they drifted it re-runs the sharing planner on them (``WorkloadReplanner``:
its search capped at ``REPLAN_SECONDS``) and switches when the running plan, priced on
the fresh numbers, costs ``min_gain`` times the new one at ``confirm`` checks in a row.
Checks cost at most ``CHECK_SHARE`` of the evaluation's CPU (a check over that budget
is skipped), so a workload that drifts without a better plan stays near the static
plan's speed. A switch is then measured (``adaptive.PlanCpu``): once the old plan is
drained, the new plan's CPU per row over ``probe_chunks`` chunks against the old plan's
before the switch; at ``revert_margin`` times or more the old plan comes back (the same
switch), and every revert or re-plan that found nothing worth switching makes the
checks come later and halves their CPU budget (until a switch pays).

A switch happens at a chunk border t (the next row to feed), with the drain of
runtime/adaptive.py:

  * the old evaluator outputs only the open group's matches whose first row is < t and
    is fed on until no such match can still be found -- the rows up to every pattern's
    window (+ its NEXT lookahead) past row t - 1, or the group's end -- then closed;
  * the new evaluator starts at t (with the rows PREV may read before it), outputs only
    the open group's matches whose first row is >= t, holds them until the old one is
    closed and numbers them after the old one's count; later groups are all its own.

Exact only where a match depends on its rows alone (``adaptive.adaptable`` for every
pattern: SKIP_TILL_ANY_MATCH, WITHIN, no SKIP PAST LAST ROW, no unmatched rows); any
other workload keeps its start-up plan (``static_reason`` says why; in ``stats``).
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np
import pyarrow as pa

from cepsql.runtime.adaptive import AdaptiveSettings, PlanCpu, adaptable, drift, log_drift
from cepsql.runtime.cep_worker import CepWorker
from cepsql.runtime.pending import pieces
from cepsql.runtime.shared_evaluator import Output, SharedEvaluator
from cepsql.runtime.worker import window_micros
from cepsql.analyze.conjuncts import analyze_defines
from cepsql.sharing.global_plan import GlobalPlan
from cepsql.sharing.planner import plan_workload
from cepsql.sharing.pricing import global_plan_cost, with_statistics
from cepsql.stats import estimate_from_table, unary_fractions

__all__ = ["AdaptiveSharedEvaluator", "WorkloadReplanner", "REPLAN_SECONDS",
           "static_reason", "plan_shape"]

#: the sharing search's budget per re-plan in a task (the start-up plan has
#: cepsql.sharing.seconds; the search also stops once converged)
REPLAN_SECONDS = 0.05
#: checks (estimates and re-plans, CPU) may cost at most this share of the evaluation's
#: CPU so far: a workload's check estimates every pattern and may run the sharing search,
#: tens of milliseconds, as much as evaluating a chunk; a check over budget is skipped.
#: Divided by the back-off (``PlanCpu.backoff``): checks that paid nothing get less
CHECK_SHARE = 0.1
#: the first guess of a check's CPU per pattern (estimating 2k rows, measured ~2-3 ms),
#: until a check has been timed: a workload evaluated in less than ten times that is
#: never checked
FIRST_CHECK_SECONDS = 0.003


class WorkloadReplanner:
    """Picklable: what a task needs to re-plan the shared patterns (numbered as the
    evaluator numbers them): their sharing-stage view (spec, terms), the algorithm, the
    adaptive settings, the pairs weight plans are priced with (``access``: None = the
    planner's default, as ``plan_workload``). ``plan`` is the sharing planner; tests
    may pass another."""

    def __init__(self, patterns: list, settings: AdaptiveSettings,
                 algorithm: str | None = None, seconds: float = REPLAN_SECONDS,
                 share: float | None = None, access: float | None = None):
        self.patterns = patterns
        self.settings = settings
        self.algorithm = algorithm
        self.seconds = seconds
        self.share = CHECK_SHARE if share is None else share   # see CHECK_SHARE
        self.access = access
        self._splits = None

    def subset(self, members: list[int]) -> "WorkloadReplanner":
        """The replanner of patterns ``members`` (numbered 0.. in that order)."""
        return WorkloadReplanner([self.patterns[p] for p in members], self.settings,
                                 self.algorithm, self.seconds, self.share, self.access)

    def __getstate__(self):
        return {**self.__dict__, "_splits": None}

    @property
    def splits(self) -> list:
        """Each pattern's DEFINE split (what the cheap check reads)."""
        if self._splits is None:
            self._splits = [analyze_defines(p.spec) if p.shareable else None
                            for p in self.patterns]
        return self._splits

    def fractions(self, sample: pa.Table) -> list:
        """Every shareable pattern's variables' row fractions (the cheap check)."""
        try:
            return [None if s is None else unary_fractions(s, sample) for s in self.splits]
        except Exception:   # noqa: BLE001 - as estimate: the full check decides
            return [None] * len(self.splits)

    def estimate(self, sample: pa.Table) -> list:
        """Every shareable pattern's statistics over sample (None for the others, and
        where estimation fails: statistics never fail a query, planner_stats' rule)."""
        return [self._estimate(p, sample) if p.shareable else None for p in self.patterns]

    def _estimate(self, pattern, sample: pa.Table):
        try:
            return estimate_from_table(pattern.spec, sample, max_rows=max(sample.num_rows, 1),
                                       max_pairs=self.settings.check_pairs)
        except Exception:   # noqa: BLE001 - an optimization: keep the numbers we have
            return None

    def plan(self, patterns: list) -> GlobalPlan:
        """The sharing planner's global plan of patterns (fresh statistics)."""
        return plan_workload(patterns, algorithm=self.algorithm, seconds=self.seconds,
                             access=self.access)

    def cost(self, plan: GlobalPlan, patterns: list) -> float:
        """plan priced on patterns' statistics as ``plan`` prices its plans."""
        return global_plan_cost(plan, patterns, self.access)


def plan_shape(plan: GlobalPlan) -> tuple:
    """A global plan without its costs: equal shapes, the same evaluation."""
    return tuple(plan.nodes), tuple(plan.bindings)


def static_reason(evaluator: SharedEvaluator) -> str | None:
    """Why a switch between global plans would not be exact for this pass (None: it is)."""
    if evaluator.generic:
        return "a pattern in SQL:2016 mode"
    for w in evaluator.workers:
        if not isinstance(w, CepWorker) or not adaptable(w.config):
            return ("a pattern without WITHIN, with SKIP PAST LAST ROW or unmatched rows, "
                    "or not SKIP_TILL_ANY_MATCH: its matches depend on earlier ones")
    if not evaluator.streaming:
        return "a pattern whose chunks hold whole groups"
    return None


class AdaptiveSharedEvaluator:
    """SharedEvaluator's push interface (feed / finish / run / stats) over plans that
    change as the statistics drift (see the module docstring)."""

    def __init__(self, global_plan: GlobalPlan, make: Callable[[GlobalPlan], SharedEvaluator],
                 replanner: WorkloadReplanner):
        """``make(plan)``: a SharedEvaluator of plan over the pass's inputs (in chunks of
        about settings.chunk_rows rows: the CPU a check may cost follows the evaluation)."""
        self.make = make
        self.replanner = replanner
        self.settings = replanner.settings
        self.plan = global_plan
        self.cur = make(global_plan)
        self.reason = static_reason(self.cur)
        self.old: SharedEvaluator | None = None
        self.drain: _Drain | None = None
        self.base = None             # statistics the running plan was last priced on
        self.candidate = None        # plan_shape awaiting confirmation, and its votes
        self.votes = 0
        self.tail: list[pa.RecordBatch] = []   # the newest rows (check sample, PREV context)
        self.tail_rows = 0
        self.fed = 0                 # rows fed so far
        self.since_check = 0
        self.check_every = self.settings.check_every
        self.checks = self.switches = self.reverts = 0
        self.cpu = PlanCpu(self.settings)   # the running plan's CPU per row, the back-off
        self.previous: GlobalPlan | None = None   # the plan switched from (a revert's)
        self.replan_seconds: list[float] = []   # CPU of each re-plan
        self.check_seconds = 0.0     # CPU of the checks (estimates and re-plans)
        self.last_check = FIRST_CHECK_SECONDS * len(replanner.patterns)   # CPU of the last
        self.eval_seconds = 0.0      # CPU of the evaluators
        self.closed_matches = [0] * len(self.cur.workers)   # of evaluators dropped

    # --- the push interface -------------------------------------------------------------
    def feed(self, batch: pa.RecordBatch) -> Output:
        if self.reason is not None:
            return self.cur.feed(batch)
        out: Output = []
        for piece in pieces([batch], self.settings.chunk_rows):
            out += self._piece(piece)
        return out

    def finish(self) -> Output:
        out: Output = []
        if self.old is not None:
            out += self._close_old()
        return out + self.cur.finish()

    run = SharedEvaluator.run   # feed every batch, then finish

    @property
    def stats(self) -> dict:
        """The running evaluator's stats, matches counted over every plan, and the
        adaptation's: checks, switches, re-plan seconds (sum, max), why it is off."""
        out = dict(self.cur.stats)
        out["matches"] = [a + b for a, b in zip(self.closed_matches, out["matches"])]
        out.update(adaptive_checks=self.checks, adaptive_switches=self.switches,
                   adaptive_reverts=self.reverts,
                   replans=len(self.replan_seconds),
                   replan_seconds=round(sum(self.replan_seconds), 4),
                   replan_seconds_max=round(max(self.replan_seconds, default=0.0), 4),
                   check_seconds=round(self.check_seconds, 4),
                   adaptive_off=self.reason or "")
        return out

    # --- chunks -------------------------------------------------------------------------
    def _piece(self, piece: pa.RecordBatch) -> Output:
        out: Output = []
        if self.old is None and self.fed and self.cpu.probing:
            back = self.previous
            if self.cpu.verdict():   # the new plan ran slower: the old one comes back
                out += self._switch(back, piece)
                if self.plan is back:
                    self.reverts += 1
                    self.cpu.switched(revert=True)
                    self.since_check, self.check_every = 0, self.cpu.cap()
        elif self.old is None and self.fed:
            self.since_check += 1
            if self.since_check >= self.check_every and self.check_seconds + \
                    self.last_check <= self.replanner.share * self.eval_seconds / \
                    self.cpu.backoff:
                self.since_check = 0
                started = time.thread_time()
                fresh = self._check()
                self.last_check = time.thread_time() - started
                self.check_seconds += self.last_check
                if fresh is not None:
                    out += self._switch(fresh, piece)
                    if self.plan is fresh:
                        self.cpu.switched()
        started = time.thread_time()
        if self.old is not None:
            out += self._drain_piece(piece)
        own = time.thread_time()
        out += self.cur.feed(piece)
        done = time.thread_time()
        self.eval_seconds += done - started
        self.cpu.add(done - own, piece.num_rows)
        self._remember(piece)
        return out

    def _remember(self, piece: pa.RecordBatch) -> None:
        self.fed += piece.num_rows
        self.tail.append(piece)
        self.tail_rows += piece.num_rows
        need = max(self.settings.check_rows, self.cur.lookback + 1)
        while self.tail_rows - self.tail[0].num_rows >= need:
            self.tail_rows -= self.tail.pop(0).num_rows

    def _sample(self) -> pa.Table:
        table = pa.Table.from_batches(self.tail)
        return table.slice(max(0, table.num_rows - self.settings.check_rows))

    # --- checks -------------------------------------------------------------------------
    def _check(self) -> GlobalPlan | None:
        """A new global plan when the newest rows' statistics drifted and it pays (see
        the module docstring), else None."""
        s, r = self.settings, self.replanner
        sample = self._sample()
        self.checks += 1
        if self.candidate is None and self.base is not None and self.checks % s.full_every:
            if _worst(log_drift(b.unary_selectivity, f) for b, f in
                      zip(self.base, r.fractions(sample))
                      if b is not None and f is not None) <= s.threshold:
                self._idle()
                return None
        now = r.estimate(sample)
        if self.candidate is None and self.base is not None and _worst(
                drift(b, n) for b, n in zip(self.base, now)
                if b is not None and n is not None) <= s.threshold:
            self._idle()
            return None
        self.base = [b if n is None else n for b, n in zip(self.base or now, now)]
        fresh_patterns = with_statistics(r.patterns, now)
        started = time.thread_time()
        fresh = r.plan(fresh_patterns)
        self.replan_seconds.append(time.thread_time() - started)
        shape = plan_shape(fresh)
        if shape == plan_shape(self.plan) or \
                _gain(r.cost(self.plan, fresh_patterns), fresh) < s.min_gain:
            self.candidate = None
            self.cpu.unpaid()   # a drift that changes nothing worth it: check later
            self._idle()
            return None
        self.check_every = s.check_every   # confirm (or drop) it at the next chunk
        self.votes = self.votes + 1 if shape == self.candidate else 1
        self.candidate = shape
        if self.votes < s.confirm:
            return None
        self.candidate = None
        return fresh

    def _idle(self) -> None:
        """A check that found no switch: the next one comes twice as late."""
        self.check_every = min(2 * self.check_every, self.cpu.cap())

    # --- the switch and the drain -------------------------------------------------------
    def _switch(self, fresh: GlobalPlan, piece: pa.RecordBatch) -> Output:
        """Switch to fresh at the border before piece (see the module docstring)."""
        old = self.cur
        last = self.tail[-1].slice(self.tail[-1].num_rows - 1)
        continues = not len(old.workers[0]._group_starts(old._view(0, piece.slice(0, 1)),
                                                         old._view(0, last)))
        drain = _Drain.of(old, last) if continues else None
        if continues and drain is None:
            return []   # the row before the border has no time: try at a later check
        out = old.cut()
        new = self.make(fresh)
        if continues:
            old.keep_first_before_border()
            context = self._context(old)
            new.keep_first_from(context.num_rows)
            for batch in context.to_batches():
                out += new.feed(batch)
            self.old, self.drain = old, drain
        else:   # the border starts a group: the old plan has only its last group to close
            out += self._closed(old, old.finish())
        self.previous = self.plan
        self.cur, self.plan = new, fresh
        self.switches += 1
        return out

    def _context(self, old: SharedEvaluator) -> pa.Table:
        """The open group's rows before the border that PREV may read (at most the
        deepest lookback of the patterns)."""
        if not old.lookback:
            return pa.table({})
        table = pa.Table.from_batches(self.tail)
        rows = table.slice(max(0, table.num_rows - old.lookback))
        starts = old.workers[0]._group_starts(old._view(0, rows.combine_chunks()
                                                        .to_batches()[0]), None)
        first = int(starts[-1]) if len(starts) else 0
        return rows.slice(first).combine_chunks()

    def _drain_piece(self, piece: pa.RecordBatch) -> Output:
        """Feed the old evaluator this piece's rows it still needs; close it once no
        match starting before the border can still be found."""
        end = self.drain.end(self.old, piece)
        if end is None:
            return self.old.feed(piece)
        out = self.old.feed(piece.slice(0, end)) if end else []
        return out + self._close_old()

    def _close_old(self) -> Output:
        old = self.old
        out = old.finish()
        self.cur.release_numbers(old.match_numbers())
        self.old = self.drain = None
        return self._closed(old, out)

    def _closed(self, old: SharedEvaluator, out: Output) -> Output:
        self.closed_matches = [a + b for a, b in zip(self.closed_matches, old.matches)]
        return out


class _Drain:
    """Where the old evaluator's rows end after a switch: the open group's end, or the
    first row every pattern's window (+ lookahead) past the border's previous row has
    left behind, whichever comes first."""

    def __init__(self, rows_reach: int | None, time_reach: float | None, t0: float | None,
                 lookahead: int, previous: pa.RecordBatch):
        self.rows_reach = rows_reach     # rows after the border a match may still take
        self.time_reach = time_reach     # microseconds after t0 (None: no time window)
        self.t0 = t0
        self.lookahead = lookahead
        self.previous = previous         # the last row fed (group-start test)
        self.taken = 0                   # rows of the group fed since the border
        self.time_end: int | None = None   # rows since the border where time ran out

    @classmethod
    def of(cls, ev: SharedEvaluator, last: pa.RecordBatch) -> "_Drain | None":
        """None when the border's previous row has no (non-NULL) time and a pattern
        has a time window."""
        configs = [w.config for w in ev.workers]
        rows = [c.window_size for c in configs if c.window_kind == 1]
        times = [c.window_size for c in configs if c.window_kind == 2]
        t0 = None
        if times:
            wts, wnulls = window_micros(last.column(ev.time_column))
            if wnulls[0]:
                return None
            t0 = float(wts[0])
        return cls(int(max(rows)) + 1 if rows else None, max(times) if times else None,
                   t0, ev.lookahead, last)

    def end(self, ev: SharedEvaluator, piece: pa.RecordBatch) -> int | None:
        """Rows of piece the old evaluator still takes, or None: all of them (and
        later rows too)."""
        n = piece.num_rows
        starts = ev.workers[0]._group_starts(ev._view(0, piece), ev._view(0, self.previous))
        group_end = int(starts[0]) if len(starts) else None
        self.previous = piece.slice(n - 1)
        if self.time_reach is not None and self.time_end is None:
            wts, wnulls = window_micros(piece.column(ev.time_column))
            beyond = np.flatnonzero((wnulls == 0) & (np.abs(np.asarray(wts, dtype=np.float64)
                                                            - self.t0) > self.time_reach))
            if len(beyond):
                self.time_end = self.taken + int(beyond[0])
        reach = None
        if self.time_reach is not None and self.time_end is not None:
            reach = self.time_end + self.lookahead + 1
        if self.rows_reach is not None:
            rows = self.rows_reach + self.lookahead + 1
            reach = rows if self.time_reach is None else \
                (None if reach is None else max(reach, rows))
        end = None if reach is None else max(reach - self.taken, 0)
        if group_end is not None:
            end = group_end if end is None else min(end, group_end)
        self.taken += n
        return None if end is None or end >= n else end


def _gain(old_cost: float, fresh: GlobalPlan) -> float:
    """How many times the running plan costs (``old_cost``, priced on the fresh
    statistics) what the fresh one costs."""
    if fresh.cost > 0:
        return old_cost / fresh.cost
    return float("inf") if old_cost > 0 else 1.0


def _worst(values) -> float:
    return max(values, default=0.0)
