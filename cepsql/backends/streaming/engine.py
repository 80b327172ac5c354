"""Per-key streaming evaluation over the batch workers (no Spark here).

Rows of one PARTITION BY key arrive in any order. They wait in ``pending`` until the
watermark passes them (event time < watermark: no row can arrive before them any more),
then enter the evaluator in ORDER BY order. A row whose event time is below the
newest watermark its key was advanced to (with rows or by its timer alone) is *late*: it
is dropped and counted.

SQL:2016 mode carries the batch worker's chunk state: the rows from the first undecided
start row (minus the deepest PREV) plus (resume row, match number, covered, has start).
CEP mode carries the evaluator itself: CepMatcher.export_state() (runs, match buffer
nodes, undecided matches, last_end, match_no -- row indices rebased to ``keep``) plus
the rows it may still read (``keep`` onwards), so each step feeds only the newly
released rows, as the batch worker's chunking does, and the state follows the window.
A gap longer than the WITHIN window separates everything before it from everything
after it, so the open partition (a *segment*) is closed -- decided as if the partition
ended -- once the watermark is a window past its last row: that is what lets quiet keys
finish their matches from a timer alone, and it empties the key's state.

NEXT (in DEFINE or MEASURES, both modes): NEXT of a key's last row is the key's next
row, which a stream may deliver at any later time -- not NULL, as the end of a batch
partition gives. So a query reading NEXT never closes a segment, from a timer or at a
gap: the evaluator carries its open partition on, a row whose NEXT it needs stays
undecided until the key's next rows arrive, and a quiet key's last match waits for them
(the state stays bounded by the window: the evaluator keeps only what is undecided).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from cepsql.algebra.expressions import Navigation, walk
from cepsql.errors import CepRuntimeError
from cepsql.compile.query_plan import SortColumn
from cepsql.runtime.cep_worker import CepWorker
from cepsql.runtime.ordering import sort_table
from cepsql.runtime.worker import CHUNK_ROWS, window_micros
from cepsql.backends.streaming.ipc import concat, from_bytes, to_bytes

NO_TIMER = -1


@dataclass
class KeyState:
    """What one key keeps between micro-batches (stored as IPC bytes + integers)."""
    held: pa.Table | None = None      # rows the evaluator still needs (processed)
    evaluator: bytes = b""            # CEP mode: the evaluator's carry-over
    pending: pa.Table | None = None   # rows not yet behind the watermark
    carry: list[int] = field(default_factory=lambda: [-1, 0, 0, 1])
    released_us: int = -(1 << 62)     # rows below this event time went to the evaluator
    closed: int = 1                   # nothing undecided in held
    late: int = 0                     # rows dropped as late (for this key)


#: a KeyState's stored fields -> how each is read from it
_STORED = {"held": lambda s: to_bytes(s.held), "pending": lambda s: to_bytes(s.pending),
           **{f"c{k}": (lambda s, k=k: int(s.carry[k])) for k in range(4)},
           "released": lambda s: int(s.released_us), "closed": lambda s: int(s.closed),
           "late": lambda s: int(s.late), "evaluator": lambda s: bytes(s.evaluator or b"")}
#: the order of processor's stored tuple (checkpoint layout: do not reorder)
STORED_FIELDS = ("held", "pending", "c0", "c1", "c2", "c3", "released", "closed", "late",
                 "evaluator")


def stored_values(s: KeyState, names=STORED_FIELDS) -> tuple:
    """The named fields of a key state as stored in Spark state: rows as Arrow IPC bytes,
    counters as int, the evaluator's carry-over as bytes (the one encoding the single
    pattern processor and the workload's per-pattern table share)."""
    return tuple(_STORED[name](s) for name in names)


def state_from_values(values, names=STORED_FIELDS) -> KeyState:
    """stored_values' inverse; fields not named keep KeyState's defaults."""
    d = dict(zip(names, values))
    out = KeyState()
    if "held" in d:
        out.held = from_bytes(d["held"])
    if "pending" in d:
        out.pending = from_bytes(d["pending"])
    if "evaluator" in d:
        out.evaluator = bytes(d["evaluator"] or b"")
    if "c0" in d:
        out.carry = [d[f"c{k}"] for k in range(4)]
    for name, attr in (("released", "released_us"), ("closed", "closed"), ("late", "late")):
        if name in d:
            setattr(out, attr, d[name])
    return out


@dataclass
class Step:
    output: list[pa.RecordBatch]
    timer_ms: int   # next event-time timer (watermark, ms) or NO_TIMER
    late: int       # late rows dropped in this step


@dataclass
class Released:
    """What one watermark step hands the evaluator: the rows it passed, in ORDER BY
    order, with their event times (us); the new boundary; what still waits."""
    rows: pa.Table | None
    rows_us: np.ndarray | None
    boundary: int
    pending_us: np.ndarray | None
    late: int


class StreamEngine(ABC):
    """Advance one key's state to a new watermark with newly arrived rows."""

    def __init__(self, worker, event_column: str, sort_keys: list[SortColumn],
                 reads_next: bool = False):
        self.worker = worker
        self.event_column = event_column
        self.sort_keys = sort_keys
        c = worker.config
        self.window_us = float(c.window_size) if c.window_kind == 2 else None
        # NEXT is read: no segment is ever closed (see the module docstring)
        self.reads_next = reads_next

    # ------------------------------------------------------------------
    def advance(self, state: KeyState, rows: pa.Table | None, watermark_ms: int) -> Step:
        released = self.release(state, rows, watermark_ms)
        output = self._evaluate(state, released.rows, released.rows_us, released.boundary)
        return Step(output, self._next_timer(state, released.pending_us), released.late)

    def release(self, state: KeyState, rows: pa.Table | None, watermark_ms: int) -> "Released":
        """Drop and count late rows, add the others to ``pending`` and take out (sorted)
        those the watermark passed; only state's pending/released_us/late change (a
        workload shares them between its patterns' engines)."""
        late = 0
        if rows is not None and rows.num_rows:
            ts = self._micros(rows)
            ok = (ts >= state.released_us) & ~np.isnan(ts)
            late = int(rows.num_rows - ok.sum())
            if late:
                rows = rows.filter(pa.array(ok))
            if rows.num_rows:  # all late: keep no empty pending table in the state
                state.pending = concat(state.pending, rows)
        state.late += late
        boundary = watermark_ms * 1000
        ready = ready_us = None
        pending_us = None if state.pending is None else self._micros(state.pending)
        if boundary <= state.released_us:
            boundary = state.released_us  # the watermark never goes back for a key
        if pending_us is not None:
            mask = pending_us < boundary
            if mask.any():
                ready = state.pending.filter(pa.array(mask))
                ready_us = pending_us[mask]
                if np.any(np.diff(ready_us) <= 0):  # out of order or ties: full sort
                    ready = self._sorted(ready)
                    ready_us = np.sort(ready_us)  # event time leads the sort order
                rest = state.pending.filter(pa.array(~mask))
                state.pending = rest if rest.num_rows else None
                pending_us = pending_us[~mask] if rest.num_rows else None
        # raised even without rows: a segment closed at this watermark (a timer alone)
        # must not be reopened by a row older than it that arrives later
        state.released_us = boundary
        return Released(ready, ready_us, boundary, pending_us, late)

    @abstractmethod
    def _evaluate(self, state: KeyState, ready, ready_us, boundary) -> list[pa.RecordBatch]:
        """Feed the released rows (sorted; ready_us their event times) to the evaluator;
        the output to emit."""

    # ------------------------------------------------------------------
    def _window_passed(self, table: pa.Table | None, boundary: int) -> bool:
        """Whether no row to come can be within the window of table's last row."""
        if self.window_us is None or table is None or table.num_rows == 0:
            return False
        return boundary - self._last_micros(table) > self.window_us

    def _next_timer(self, state: KeyState, pending_us) -> int:
        times = []
        if pending_us is not None and len(pending_us):
            times.append(int(np.nanmin(pending_us)) // 1000 + 1)
        last = None if state.closed or self.window_us is None or self.reads_next \
            else self._last_fed_us(state)
        if last is not None:
            times.append(int(last + self.window_us) // 1000 + 1)
        return min(times) if times else NO_TIMER

    def _last_fed_us(self, state: KeyState) -> float | None:
        """Event time of the newest row the evaluator has seen (open state only)."""
        if state.held is None or state.held.num_rows == 0:
            return None
        return self._last_micros(state.held)

    def _micros(self, table: pa.Table) -> np.ndarray:
        values, nulls = window_micros(table.column(self.event_column))
        values = values.copy()
        values[nulls.astype(bool)] = np.nan
        return values

    def _last_micros(self, table: pa.Table) -> float:
        return float(self._micros(table.slice(table.num_rows - 1))[0])

    def _sorted(self, table: pa.Table) -> pa.Table:
        """table in ORDER BY order, then the tie-breakers (Spark's NULL and NaN order)."""
        return sort_table(table, self.sort_keys)


class SqlEngine(StreamEngine):
    """SQL:2016 mode: the MatchWorker's chunk carry-over, kept in state."""

    def _evaluate(self, state, ready, ready_us, boundary):
        table = concat(state.held, ready)
        passed = not self.reads_next and self._window_passed(table, boundary)
        if table is None or ((ready is None or ready.num_rows == 0)
                             and (state.closed or not passed)):
            return []
        worker = self.worker
        matcher = worker._new_matcher()
        pos, number, covered, has_start = state.carry
        carry = None if pos < 0 else (pos, number, covered, bool(has_start))
        zero = np.zeros(1, dtype=np.int64)
        n = table.num_rows
        lookback = worker.config.max_lookback
        if passed:  # every row's window is behind the watermark: decide them all
            out, _ = worker._process(matcher, table, zero, False, carry)
            keep = max(n - lookback, 0)
            start = keep == 0 and (carry is None or carry[3])
            # matches numbered so far, empty ones (maybe omitted from the output) included
            state.carry = [n - keep, int(matcher.match_no), n - keep, int(start)]
            state.closed = 1
        else:
            out, (pos, number, covered) = worker._process(matcher, table, zero, True, carry)
            keep = max(min(pos, n) - lookback, 0)
            start = keep == 0 and (carry is None or carry[3])
            state.carry = [pos - keep, number, max(covered - keep, 0), int(start)]
            state.closed = 0
        state.held = table.slice(keep) if keep < n else None
        if state.held is None:  # resume at the first new row
            state.carry[0] = state.carry[2] = 0
        return out


class CepEngine(StreamEngine):
    """CEP mode: the evaluator's carry-over and its ``keep`` rows (see the module
    docstring). carry = [-, matches numbered by closed segments, event time (us) of the
    newest row fed, -]."""

    def _evaluate(self, state, ready, ready_us, boundary):
        out: list[pa.RecordBatch] = []
        if ready is not None and ready.num_rows:
            if not state.closed and ready_us[0] - state.carry[2] > self.window_us \
                    and not self.reads_next:
                out += self._close(state)  # a gap longer than the window ends a segment
            # the released rows go to ONE evaluator run per chunk, gaps included, as in the
            # batch worker: no row reads across a gap longer than the window, so a run
            # over it decides what closing a segment at the gap would (one matcher per
            # gap cost ~1 ms each: thousands per micro-batch for sparse keys)
            for lo in range(0, ready.num_rows, CHUNK_ROWS):
                out += self._feed(state, ready.slice(lo, CHUNK_ROWS), ready_us[lo:lo + CHUNK_ROWS])
        if not state.closed and boundary - state.carry[2] > self.window_us \
                and not self.reads_next:
            out += self._close(state)
        return out

    def _last_fed_us(self, state: KeyState) -> float | None:
        return float(state.carry[2])

    def _feed(self, state, rows: pa.Table, rows_us: np.ndarray) -> list[pa.RecordBatch]:
        """Run the open segment (or a new one) on rows; the matches decided by them."""
        matcher = self._matcher(state)
        cont = not state.closed
        table = concat(state.held, rows)  # a new segment: after its PREV context rows
        if not cont and state.held is not None:
            matcher.set_context(state.held.num_rows)
        batches = self._run(matcher, table, True, cont)
        output = [b for b in batches if b.num_rows]
        state.carry[2] = int(rows_us[-1])
        if matcher.keep >= table.num_rows and not self.reads_next:  # the segment is decided
            self._closed(state, matcher, table)
        else:
            state.held = table.slice(matcher.keep)
            state.evaluator = matcher.export_state()
            state.closed = 0
        return output

    def _close(self, state) -> list[pa.RecordBatch]:
        """Decide the open segment as if its partition ended (no row to come fits)."""
        matcher = self._matcher(state)
        batches = self._run(matcher, state.held, False, True)
        output = [b for b in batches if b.num_rows]
        self._closed(state, matcher, state.held)
        return output

    def _closed(self, state, matcher, table: pa.Table) -> None:
        """The segment is decided: keep only the key's match count and, for PREV, its
        last rows (the next segment's context: batch PREV reads across the gap)."""
        state.carry[1] = int(matcher.match_no)  # the key's matches so far, all numbered
        back = min(int(matcher.lookback), table.num_rows)
        state.held = table.slice(table.num_rows - back) if back else None
        state.evaluator = b""
        state.closed = 1

    def _matcher(self, state):
        """A fresh evaluator holding the key's carry-over (if its segment is open); a new
        segment's evaluator numbers its matches after the key's earlier ones, so
        MATCH_NUMBER() is the batch path's everywhere (output, MEASURES aggregates)."""
        matcher = self.worker._new_matcher()
        if state.closed:
            matcher.release_numbers(int(state.carry[1]))
        else:
            matcher.import_state(state.evaluator)
            if matcher.n_carried() != (0 if state.held is None else state.held.num_rows):
                raise CepRuntimeError("the stored streaming state of a key is inconsistent "
                                      "(evaluator carry-over and rows disagree)")
        return matcher

    def _run(self, matcher, table: pa.Table, open_last: bool, cont: bool):
        starts = np.zeros(1, dtype=np.int64)
        return list(self.worker._process(matcher, table, starts, open_last, cont))


def new_engine(worker, event_column: str, sort_keys: list[SortColumn], spec=None
               ) -> StreamEngine:
    """The engine for the worker's mode (CepWorker -> CEP, MatchWorker -> SQL:2016);
    ``spec`` (the clause) says whether NEXT is read."""
    if isinstance(worker, CepWorker):
        return CepEngine(worker, event_column, sort_keys, bool(worker._new_matcher().lookahead))
    return SqlEngine(worker, event_column, sort_keys, spec is not None and reads_next(spec))


def reads_next(spec) -> bool:
    """Whether the clause reads NEXT(...) (in DEFINE or MEASURES)."""
    exprs = list(spec.defines.values()) + [m.expr for m in spec.measures]
    return any(isinstance(node, Navigation) and node.kind == "NEXT"
               for expr in exprs for node in walk(expr))
