"""The shared DAG evaluator (runtime/shared_evaluator.py) over one key of a streaming workload.

The DAG's own stores are not exported between micro-batches; what a key keeps is:

- the *kept rows*: from the earliest row any undecided candidate of any pattern may still
  need (the DAG's ``keep``: its oldest live instance, by the largest node window; and
  each pattern's matcher ``keep``), so they are bounded by the largest window;
- each pattern's own matcher carry-over (``CepMatcher.export_state``), with the row of
  the kept rows it starts at.

On the next micro-batch the DAG runs again, from scratch, over the kept rows plus the
newly released ones. It forms again the candidates it formed before; each matcher, which
continues from its imported state, skips every candidate ending before the first row it
has not processed (those were finished: emitted, dropped, or held as undecided in its
state), so every match is decided once, as in one unbroken run.

A gap longer than the largest window ends the key's *segment*, as in the single-pattern
CEP engine (engine.CepEngine): the segment is decided as if the partition ended, and the
next one starts afresh with the matchers numbering after their earlier matches and the
last rows as PREV context.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from cepsql.errors import CepRuntimeError
from cepsql.runtime.one_pass import PassPattern, DagEvaluator
from cepsql.runtime.worker import CHUNK_ROWS, window_micros
from cepsql.backends.streaming.engine import NO_TIMER, KeyState
from cepsql.backends.streaming.ipc import concat

__all__ = ["SharedKeyEngine", "shared_members"]


def shared_members(global_plan, patterns: list[PassPattern]) -> list[int]:
    """Positions (in ``patterns``) the shared DAG runs over a stream: the patterns the
    global plan binds and the owners of its nodes, when the DAG can carry a key's
    state (every node and pattern windowed by time, no NEXT); else none."""
    if global_plan is None:
        return []
    members = sorted({b.pattern for b in global_plan.bindings}
                     | {n.owner for n in global_plan.nodes})
    if not members:
        return []
    if any(n.window_kind != 2 for n in global_plan.nodes):
        return []
    for k in members:
        worker = patterns[k].bound.worker
        c = worker.config
        if c.window_kind != 2 or not worker.streamable() or worker._new_matcher().lookahead:
            return []
    return members


class SharedKeyEngine:
    """Feeds one key's released rows to the shared DAG evaluator of ``members``.

    Per key the state is a KeyState for the DAG (``held``: the kept rows -- once the
    segment is closed, only its last rows, the PREV context of the next one; carry =
    [-, event time (us) of the newest row fed, -, -]; ``closed``) and one KeyState per
    member (``evaluator``: its matcher's carry-over; carry = [its first row in held,
    matches numbered by closed segments, -, -])."""

    def __init__(self, global_plan, patterns: list[PassPattern], members: list[int]):
        self.dag = DagEvaluator(global_plan, patterns, members)
        self.evaluator = ev = self.dag.evaluator
        self.indices = self.dag.indices
        self.relevant = self.dag.relevant
        ev.dag = _FreshDag(ev.dag)
        self.window_us = max(float(w.config.window_size) for w in ev.workers)
        self.time_column = ev.time_column

    def new_states(self) -> tuple[KeyState, list[KeyState]]:
        return KeyState(carry=[0, 0, 0, 0]), [KeyState(carry=[0, 0, 0, 0])
                                             for _ in self.indices]

    # ------------------------------------------------------------------
    def evaluate(self, dag: KeyState, own: list[KeyState], ready: pa.Table | None,
                 boundary: int) -> list[tuple[int, pa.RecordBatch]]:
        """Feed the released rows (ORDER BY order) and decide what the watermark
        ``boundary`` (us) passed; [(pattern index, worker rows)]."""
        out: list[tuple[int, pa.RecordBatch]] = []
        if ready is not None and self.relevant is not None:
            ready = self._relevant(ready)
        if ready is not None and ready.num_rows:
            us = self._micros(ready)
            cuts = (np.flatnonzero(np.diff(us) > self.window_us) + 1).tolist()
            bounds = [0] + cuts + [ready.num_rows]
            for lo, hi in zip(bounds, bounds[1:]):
                if not dag.closed and us[lo] - dag.carry[1] > self.window_us:
                    out += self._close(dag, own)
                for at in range(lo, hi, CHUNK_ROWS):
                    stop = min(at + CHUNK_ROWS, hi)
                    out += self._feed(dag, own, ready.slice(at, stop - at), int(us[stop - 1]))
        if not dag.closed and boundary - dag.carry[1] > self.window_us:
            out += self._close(dag, own)
        return out

    def next_timer(self, dag: KeyState) -> int:
        """When the watermark passes the open segment's window (NO_TIMER: closed)."""
        if dag.closed:
            return NO_TIMER
        return int(dag.carry[1] + self.window_us) // 1000 + 1

    # ------------------------------------------------------------------
    def _restore(self, dag: KeyState, own: list[KeyState]) -> None:
        """The matchers as the key left them (its open segment), or fresh ones numbering
        after the key's earlier matches, with the context rows for PREV."""
        ev = self.evaluator
        held = 0 if dag.held is None else dag.held.num_rows
        ev.carried = not dag.closed
        if dag.closed:
            ev.offsets = [0] * len(own)
        else:
            ev.offsets = [int(s.carry[0]) for s in own]
        for matcher, state, offset in zip(ev.matchers, own, ev.offsets):
            matcher.import_state(b"" if dag.closed else state.evaluator)
            if dag.closed:
                matcher.release_numbers(int(state.carry[1]))
                if held:
                    matcher.set_context(held)
            elif matcher.n_carried() != held - offset:
                raise CepRuntimeError("the stored streaming state of a workload key is "
                                      "inconsistent (evaluator carry-over and rows disagree)")

    def _feed(self, dag: KeyState, own: list[KeyState], rows: pa.Table, last_us: int):
        ev = self.evaluator
        self._restore(dag, own)
        table = concat(dag.held, rows)
        out = ev._process(table, np.zeros(1, dtype=np.int64), open_last=True)
        keep = min(ev.dag.keep, min(ev.offsets))
        dag.held = table.slice(keep) if keep < table.num_rows else None
        dag.carry[1] = last_us
        dag.closed = 0
        for matcher, state, offset in zip(ev.matchers, own, ev.offsets):
            state.evaluator = matcher.export_state()
            state.carry[0] = offset - keep
        return self._tagged(out)

    def _close(self, dag: KeyState, own: list[KeyState]):
        """Decide the open segment as if the key's partition ended there."""
        ev = self.evaluator
        self._restore(dag, own)
        table = dag.held
        out = ev._process(table, np.zeros(1, dtype=np.int64), open_last=False) \
            if table is not None else []
        back = min(int(ev.lookback), 0 if table is None else table.num_rows)
        dag.held = table.slice(table.num_rows - back) if back else None
        dag.closed = 1
        for matcher, state in zip(ev.matchers, own):
            state.carry[1] = int(matcher.match_no)
            state.carry[0] = 0
            state.evaluator = b""
        return self._tagged(out)

    def _tagged(self, out) -> list[tuple[int, pa.RecordBatch]]:
        return [(self.indices[k], b) for k, b in out if b.num_rows]

    def _relevant(self, table: pa.Table) -> pa.Table:
        import pyarrow.compute as pc
        keep = None
        for name in self.relevant:
            mask = pc.fill_null(table.column(name), False)
            keep = mask if keep is None else pc.or_(keep, mask)
        return table.filter(keep)

    def _micros(self, table: pa.Table) -> np.ndarray:
        values, _ = window_micros(table.column(self.time_column))
        return np.asarray(values, dtype=np.float64)


class _FreshDag:
    """The SharedDag run from scratch over each call's rows: its stores are not kept
    between a key's micro-batches (nor shared between keys). A candidate starting at a
    PREV context row needs no filter: it either ends there (before the matchers' first
    row) or spans the gap that closed the segment, longer than every window."""

    def __init__(self, dag):
        self._dag = dag

    def run(self, bounds, wts, wnulls, open_last, cont, lookahead, lookback, *rest):
        return self._dag.run(bounds, wts, wnulls, open_last, 0, lookahead, lookback, *rest)

    def __getattr__(self, name):
        return getattr(self._dag, name)
