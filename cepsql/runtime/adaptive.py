"""Adaptive re-planning inside a task (issue 13.3; SIGMOD'19 section 6.2.3 after VLDB'18).

A task planned from its first rows (cep_worker_plan.py) keeps estimating the statistics
from its newest rows; when they drift from those its current plan was built on by more
than ``cepsql.adaptive.threshold`` it re-plans and, if the plan changes, switches
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
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa

from ..errors import CepAnalysisError
from .cep_worker import CepWorker, _pieces
from .worker import CHUNK_ROWS, _with_zero

ENABLED_CONF = "cepsql.adaptive.enabled"
THRESHOLD_CONF = "cepsql.adaptive.threshold"
CHECK_ROWS_CONF = "cepsql.adaptive.checkRows"
CHUNK_CONF = "cepsql.adaptive.chunkRows"   # rows between checks (and possible switches)
NO_BOUND = 1 << 62            # the evaluator's "no restriction" on a match's first row
_FLOOR = 1e-3                 # rates and selectivities below count as this (log ratio)
_ANY = 3                      # CepConfig.strategy of SKIP_TILL_ANY_MATCH


@dataclass(frozen=True)
class AdaptiveSettings:
    """threshold: re-plan when some variable's row fraction or some pair's selectivity
    changed by more than this factor's natural log; check_rows: newest rows estimated
    at each check (check_pairs row pairs per selectivity); check_every: chunks between
    checks; chunk_rows: rows per chunk."""
    threshold: float = 1.0
    check_rows: int = 2_000
    check_pairs: int = 2_000
    check_every: int = 1
    chunk_rows: int = CHUNK_ROWS


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
                            chunk_rows=int(_number(get, CHUNK_CONF, CHUNK_ROWS, int)))


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
    worst = 0.0
    for old, new in ((base.unary_selectivity, now.unary_selectivity),
                     (base.selectivities, now.selectivities)):
        for key, value in old.items():
            if key in new:
                worst = max(worst, abs(math.log(max(new[key], _FLOOR) / max(value, _FLOOR))))
    return worst


class AdaptiveWorker(CepWorker):
    """CepWorker that re-plans as the statistics drift (streaming chunks, WITHIN only)."""

    def __init__(self, config, planner, statistics, digest: str, settings: AdaptiveSettings):
        super().__init__(config)
        self.planner = planner
        self.statistics = statistics    # what the current plan was built on
        self.digest = digest
        self.settings = settings
        self.switches = 0
        self.checks = 0

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        chunk = self.settings.chunk_rows
        cur = self._new_matcher()
        cur_cont = False
        old = None                    # the previous plan's evaluator, until it drained
        cur_skip = old_skip = 0       # leading pending rows each evaluator does not read
        pending: list[pa.RecordBatch] = []
        starts: list[np.ndarray] = []
        pending_rows = 0
        previous = None
        threshold = chunk
        since_check = 0
        for batch in _chunks(batches, chunk):
            starts.append(self._group_starts(batch, previous) + pending_rows)
            previous = batch.slice(batch.num_rows - 1)
            pending.append(batch)
            pending_rows += batch.num_rows
            if pending_rows < threshold:
                continue
            table = pa.Table.from_batches(pending)
            all_starts = _with_zero(np.concatenate(starts))
            if old is not None:
                yield from self._drain(old, cur, table, all_starts, old_skip, False)
                old_skip = self._drain_at
                if old.drained or self._closed:
                    old = None
            yield from self._process(cur, table.slice(cur_skip), _from(all_starts, cur_skip),
                                     True, cur_cont)
            cur_cont = True
            keep_cur = cur_skip + cur.keep
            keep_old = old_skip + old.keep if old is not None else keep_cur
            since_check += 1
            if old is None and since_check >= self.settings.check_every:
                since_check = 0
                switched = self._maybe_switch(cur, table, cur_skip, keep_cur)
                if switched is not None:
                    old, cur = cur, switched
                    cur_cont = False
            base = min(keep_cur, keep_old)
            cur_skip, old_skip = keep_cur - base, keep_old - base
            rest = table.slice(base)
            pending = rest.to_batches()
            pending_rows = rest.num_rows
            starts = [np.zeros(0, dtype=np.int64)]
            threshold = max(chunk, 2 * pending_rows)
        if pending_rows:
            table = pa.Table.from_batches(pending)
            all_starts = _with_zero(np.concatenate(starts))
            if old is not None:
                yield from self._drain(old, cur, table, all_starts, old_skip, True)
            yield from self._process(cur, table.slice(cur_skip), _from(all_starts, cur_skip),
                                     False, cur_cont)
        self._record(cur)

    def _drain(self, old, cur, table: pa.Table, all_starts: np.ndarray, skip: int,
               last: bool) -> list:
        """Run the old evaluator on the rest of its group, in pieces of doubling size
        (it needs about one window of rows); once it can find nothing more, the new one
        numbers its held matches after the old one's count. Sets _drain_at: the row
        of table the old evaluator's last piece began at."""
        later = all_starts[all_starts > skip]
        end = int(later[0]) if len(later) else table.num_rows
        group_ends = last or end < table.num_rows
        out: list = []
        step = 256
        while True:
            stop = min(end, skip + step)
            if stop <= skip:   # no row left for it in this chunk
                break
            self._closed = group_ends and stop == end
            out += self._process(old, table.slice(skip, stop - skip),
                                 np.zeros(1, dtype=np.int64), not self._closed, True)
            self._drain_at = skip
            if self._closed or old.drained or stop == end:
                break
            skip += old.keep
            step *= 2
        if self._closed or old.drained:
            cur.release_numbers(old.match_no)
        return out

    def _maybe_switch(self, cur, table: pa.Table, cur_skip: int, keep_cur: int):
        """A new evaluator when the newest rows' statistics drifted and give another plan
        (restricted to matches starting at the first unprocessed row), else None."""
        sample = table.slice(max(0, table.num_rows - self.settings.check_rows))
        self.checks += 1
        now = self.planner.estimate(sample, self.settings.check_pairs)
        if drift(self.statistics, now) <= self.settings.threshold:
            return None
        choice = self.planner.choose_with(now)
        self.statistics = now
        digest = plan_digest(choice)
        if digest == self.digest:
            return None
        t = cur_skip + cur.processed - keep_cur   # in the next call's row indices
        cur.restrict_first(-NO_BOUND, t, 0)
        self.config = replace(self.config, **self.planner.plan_arrays(choice))
        self.digest = digest
        self.switches += 1
        fresh = self._new_matcher()
        fresh.restrict_first(t, NO_BOUND, 1)
        return fresh

    def _record(self, matcher) -> None:
        from .cep_worker import LAST_STATS
        self.last_stats = matcher.stats()
        LAST_STATS.clear()
        LAST_STATS.update(self.last_stats)
        LAST_STATS["adaptive_checks"] = self.checks
        LAST_STATS["adaptive_switches"] = self.switches

    _closed = False
    _drain_at = 0


def plan_digest(choice) -> str:
    """A short text of the chosen plans (tests and benchmarks compare them)."""
    return " | ".join(" ".join(p.describe().split()[:10]) for p in choice.plans)


def _from(all_starts: np.ndarray, skip: int) -> np.ndarray:
    """Group starts of the rows from skip on (row 0 of them continues a group)."""
    return _with_zero(all_starts[all_starts > skip] - skip)


def _chunks(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    if rows == CHUNK_ROWS:
        yield from _pieces(batches)
        return
    for batch in batches:
        for i in range(0, batch.num_rows, rows):
            if batch.num_rows:
                yield batch.slice(i, rows)
