"""Plans per key over a stream: each key of a CEP clause planned inside its tasks runs a
plan chosen from its own rows, re-planned as their statistics drift (runtime/adaptive.py
decides, with the cepsql.adaptive.* settings read when the query starts).

Where the statistics live: nowhere but in the rows. A check samples the key's newest
rows -- the rows its state holds anyway (the window back from its newest row, which the
evaluator may still read) plus the rows the watermark just released -- so the sample
costs no state and is the same after a restart. What must survive between micro-batches
is small and goes with the key's evaluator carry-over (``KeyPlans``, in
``KeyState.evaluator``): the plan that wrote the carry-over (its join trees, so a
restarted query rebuilds the same evaluator), the statistics that plan was priced on
(drift and ``settle`` weigh fresh estimates against them), rows since the last check, the
check interval and a plan awaiting confirmation. A Spark task's processor lives for one
micro-batch only, so nothing of this could stay in it.

A switch is exact as a batch task's is (runtime/adaptive.py's docstring; ``adaptable``
says which clauses allow it): the carry-over is plan-specific (the planned evaluator's
instances), so at a micro-batch border the old plan's evaluator keeps only matches whose
first row is before the border row t and runs on, restored from its own carry-over,
until it can find none (``drained``, about one window); the new plan's evaluator starts
on the rows the old one would read next, keeps only matches from t on and holds them
until the old one's count numbers them. The key keeps the rows either still reads. A
segment the key decides as ended (a gap longer than the window) carries nothing: a
switch there needs no drain.

A key plans from its own rows once it has released ``cepsql.stats.workerSampleRows``
rows (until then it runs the clause's start-up plan); with cepsql.adaptive.enabled=false
that plan is kept (as a batch task keeps the plan of its first rows).
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from cepsql.analyze.conjuncts import analyze_defines
from cepsql.errors import CepRuntimeError
from cepsql.planning.evaluator_choice import EVALUATOR_TREE, CepPlanChoice
from cepsql.planning.plans import OrderPlan, TreePlan
from cepsql.planning.trees import TreeNode
from cepsql.runtime.adaptive import AdaptiveSettings, NO_BOUND, adaptable, drift_check, plan_shape
from cepsql.runtime.cep_worker import CepWorker
from cepsql.runtime.task_planning import WorkerPlanner
from cepsql.stats.model import PatternStatistics
from cepsql.backends.streaming.engine import CepEngine, KeyState, StreamEngine, new_engine
from cepsql.backends.streaming.ipc import concat

__all__ = ["KeyPlans", "ReplanningEngine", "stream_engine", "encode_shape", "decode_shape"]

_MAGIC = b"CEPA"
_VERSION = 1
_HEAD = struct.Struct("<4sI8q6q")   # magic, version, 8 integers, 6 lengths (-1: none)
_JOIN, _TERM = -1, -2               # plan words: a join of the two subtrees before / a term ends
_PLAN_ARRAYS = ("plan_nodes", "plan_leaf_of", "plan_after", "plan_conj_start", "plan_conj",
                "plan_neg_start", "plan_neg")


def stream_engine(worker, event_column: str, sort_keys, spec=None) -> StreamEngine:
    """``new_engine``, or a ReplanningEngine when the clause is a CEP clause planned in
    its tasks whose plan switches are exact (adaptive.adaptable)."""
    engine = new_engine(worker, event_column, sort_keys, spec)
    config = getattr(worker, "config", None)
    if isinstance(engine, CepEngine) and getattr(config, "worker_planner", None) is not None \
            and adaptable(replace(config, worker_planner=None)):
        return ReplanningEngine(worker, event_column, sort_keys, engine.reads_next)
    return engine


# --- what a key records ------------------------------------------------------------------
@dataclass
class KeyPlans:
    """A key's plans and its re-planning bookkeeping, stored in front of the evaluator
    carry-over. plan/old_plan: encode_shape of the running / draining plan (b"": the
    clause's start-up plan); blob/old_blob: their carry-over; skip/old_skip: leading held
    rows each does not read; started: whether the running evaluator has run (a new plan
    starts fresh at skip); bound: the held row from which on the running plan owns the
    matches (the switch's t, rebased); base: the statistics the running plan was priced
    on (None: the key has not planned yet); since: rows released since the last check;
    every: chunks between checks; checks: the key's drift checks; candidate/votes: a
    plan awaiting confirmation."""
    plan: bytes = b""
    blob: bytes = b""
    started: bool = True
    skip: int = 0
    old_plan: bytes | None = None
    old_blob: bytes = b""
    old_skip: int = 0
    bound: int = 0
    base: PatternStatistics | None = None
    since: int = 0
    every: int = 1
    checks: int = 0
    candidate: bytes | None = None
    votes: int = 0

    def encode(self) -> bytes:
        base = b"" if self.base is None else encode_statistics(self.base)
        blobs = [self.plan, self.old_plan, self.candidate, base, self.old_blob, self.blob]
        head = _HEAD.pack(_MAGIC, _VERSION, int(self.started), self.skip, self.old_skip,
                          self.bound, self.since, self.every, self.checks, self.votes,
                          *[-1 if b is None else len(b) for b in blobs])
        return b"".join([head, *[b or b"" for b in blobs]])

    @staticmethod
    def decode(data: bytes) -> "KeyPlans":
        """encode's inverse; a carry-over written without plans (cepsql.adaptive off, or
        before plans were recorded) is the start-up plan's."""
        if not data:
            return KeyPlans()
        if bytes(data[:4]) != _MAGIC:
            return KeyPlans(blob=bytes(data))
        try:
            (_, version, started, skip, old_skip, bound, since, every, checks, votes,
             *lengths) = _HEAD.unpack_from(data, 0)
        except struct.error:
            version, lengths = -1, ()
        if version != _VERSION:
            raise CepRuntimeError("the stored streaming state of a key has plans of another "
                                  "cepsql version: start the query from a new checkpoint "
                                  "location")
        parts, at = [], _HEAD.size
        for n in lengths:
            parts.append(None if n < 0 else bytes(data[at:at + n]))
            at += max(n, 0)
        plan, old_plan, candidate, base, old_blob, blob = parts
        return KeyPlans(plan=plan, blob=blob, started=bool(started), skip=skip,
                        old_plan=old_plan, old_blob=old_blob, old_skip=old_skip, bound=bound,
                        base=decode_statistics(base) if base else None, since=since,
                        every=every, checks=checks, candidate=candidate, votes=votes)


def encode_shape(shape: tuple) -> bytes:
    """adaptive.plan_shape of a plan choice as int32 words: per term its kind (0 order,
    1 tree), then the order or the tree in post-order (leaf index, _JOIN), then _TERM."""
    words: list[int] = []
    for kind, plan in shape:
        if kind == "order":
            words += [0, *plan]
        else:
            words += [1, *[n.leaf if n.is_leaf else _JOIN for n in plan.nodes()]]
        words.append(_TERM)
    return np.asarray(words, dtype=np.int32).tobytes()


def decode_shape(data: bytes) -> tuple:
    """encode_shape's inverse."""
    shape, words = [], np.frombuffer(data, dtype=np.int32).tolist()
    while words:
        end = words.index(_TERM)
        kind, items, words = words[0], words[1:end], words[end + 1:]
        if kind == 0:
            shape.append(("order", tuple(items)))
            continue
        stack: list[TreeNode] = []
        for item in items:
            if item == _JOIN:
                right = stack.pop()
                stack.append(TreeNode(left=stack.pop(), right=right))
            else:
                stack.append(TreeNode(leaf=item))
        shape.append(("tree", stack.pop()))
    return tuple(shape)


def shape_choice(data: bytes) -> CepPlanChoice:
    """A plan choice with a recorded shape (costs unknown: what plan_arrays and
    adaptive.gain read)."""
    plans = [OrderPlan(order=p, cost=0.0) if kind == "order" else TreePlan(root=p, cost=0.0)
             for kind, p in decode_shape(data)]
    return CepPlanChoice(EVALUATOR_TREE, "recorded in the stream's state", None, plans)


def encode_statistics(s: PatternStatistics) -> bytes:
    """What re-planning reads of a PatternStatistics, as JSON (floats round-trip)."""
    return json.dumps({
        "rates": s.rates, "unary": s.unary_selectivity,
        "sel": [[a, b, v] for (a, b), v in s.selectivities.items()],
        "pairs": [[a, b, v] for (a, b), v in s.pairs_evaluated.items()],
        "rows": s.sample_rows, "window": s.window_units, "unit": s.rate_unit,
    }).encode("utf-8")


def decode_statistics(data: bytes) -> PatternStatistics:
    d = json.loads(data.decode("utf-8"))
    return PatternStatistics(
        rates=d["rates"], selectivities={(a, b): v for a, b, v in d["sel"]},
        unary_selectivity=d["unary"], sample_rows=d["rows"], seconds=0.0, truncated=False,
        window_units=d["window"], rate_unit=d["unit"],
        pairs_evaluated={(a, b): v for a, b, v in d["pairs"]})


# --- the engine ----------------------------------------------------------------------------
class ReplanningEngine(CepEngine):
    """CepEngine whose keys each run their own recorded plan (see the module docstring).
    ``checks`` / ``switches`` count this engine's drift checks and plan switches."""

    def __init__(self, worker, event_column: str, sort_keys, reads_next: bool = False):
        super().__init__(worker, event_column, sort_keys, reads_next)
        self.planner = WorkerPlanner(worker.config.worker_planner)
        self.settings: AdaptiveSettings | None = self.planner.adaptive
        self.split = analyze_defines(self.planner.planning.spec)
        self.workers: dict[bytes, CepWorker] = {b"": worker}
        self.checks = 0
        self.switches = 0

    # -- one step of the open segment --------------------------------------------------
    def _feed(self, state, rows: pa.Table, rows_us: np.ndarray) -> list[pa.RecordBatch]:
        kp = KeyPlans.decode(state.evaluator)
        table = concat(state.held, rows)
        out: list[pa.RecordBatch] = []
        old, released = self._drain(state, kp, table, True)
        if old is not None:
            out += old[1]
        cur, cont = self._current(state, kp, released, old is not None and released is None)
        out += [b for b in self._run(cur, table.slice(kp.skip), True, cont) if b.num_rows]
        state.carry[2] = int(rows_us[-1])
        kp.since += rows.num_rows
        if old is not None and released is None:   # still draining
            old_at = kp.old_skip + old[0].keep
            kp.old_blob = old[0].export_state()
        else:
            old_at = None
            kp.old_plan, kp.old_blob = None, b""
        cur_at = kp.skip + cur.keep
        if old_at is None and cur.keep >= table.num_rows - kp.skip and not self.reads_next:
            self._closed(state, cur, table)   # the segment is decided
            self._keep_plans(state, kp)
            self._maybe_replan(state, kp, table, None)
        else:
            base = cur_at if old_at is None else min(cur_at, old_at)
            state.held = table.slice(base)
            kp.blob, kp.started = cur.export_state(), True
            kp.skip = cur_at - base
            kp.old_skip = 0 if old_at is None else old_at - base
            kp.bound = max(kp.bound - base, 0)
            state.closed = 0
            self._maybe_replan(state, kp, table, cur)
        state.evaluator = kp.encode()
        return out

    def _close(self, state) -> list[pa.RecordBatch]:
        """Decide the open segment as if its partition ended: the draining plan's
        matches first, then the running plan's, numbered after them."""
        kp = KeyPlans.decode(state.evaluator)
        out: list[pa.RecordBatch] = []
        old, released = self._drain(state, kp, state.held, False)
        if old is not None:
            out += old[1]
        cur, cont = self._current(state, kp, released, False)
        out += [b for b in self._run(cur, state.held.slice(kp.skip), False, cont) if b.num_rows]
        self._closed(state, cur, state.held)
        self._keep_plans(state, kp)
        return out

    def _drain(self, state, kp: KeyPlans, table: pa.Table, open_last: bool):
        """Run the draining plan (if any) on table: ((its evaluator, its output), the
        match count the running plan numbers after once it is done, else None)."""
        if kp.old_plan is None:
            return None, None
        old = self._restored(kp.old_plan, kp.old_blob, state.held, kp.old_skip)
        old.restrict_first(-NO_BOUND, kp.bound - kp.old_skip, 0)
        out = [b for b in self._run(old, table.slice(kp.old_skip), open_last, True)
               if b.num_rows]
        done = not open_last or bool(old.drained)
        return (old, out), (int(old.match_no) if done else None)

    def _current(self, state, kp: KeyPlans, released: int | None, hold: bool):
        """(the running plan's evaluator for this step, whether it continues)."""
        if state.closed:   # a new segment: numbered after the key's matches, PREV context
            matcher = self._worker(kp.plan)._new_matcher()
            matcher.release_numbers(int(state.carry[1]))
            if state.held is not None:
                matcher.set_context(state.held.num_rows)
            kp.skip, kp.bound, kp.started = 0, 0, True
            return matcher, False
        if kp.started:
            matcher = self._restored(kp.plan, kp.blob, state.held, kp.skip)
        else:
            matcher = self._worker(kp.plan)._new_matcher()
        if kp.bound > kp.skip:
            matcher.restrict_first(kp.bound - kp.skip, NO_BOUND, int(hold))
        if released is not None:
            matcher.release_numbers(released)
        return matcher, kp.started

    def _restored(self, plan: bytes, blob: bytes, held: pa.Table | None, skip: int):
        matcher = self._worker(plan)._new_matcher()
        matcher.import_state(blob)
        if matcher.n_carried() != (0 if held is None else held.num_rows - skip):
            raise CepRuntimeError("the stored streaming state of a key is inconsistent "
                                  "(evaluator carry-over and rows disagree)")
        return matcher

    def _worker(self, plan: bytes) -> CepWorker:
        """The evaluator's worker of a recorded plan (b"": the start-up plan)."""
        worker = self.workers.get(plan)
        if worker is None:
            arrays = self.planner.plan_arrays(shape_choice(plan))
            worker = self.workers[plan] = CepWorker(
                replace(self.worker.config, worker_planner=None, **arrays))
        return worker

    def _keep_plans(self, state, kp: KeyPlans) -> None:
        """A decided segment carries nothing but the key's plan and its bookkeeping."""
        kp.blob, kp.old_plan, kp.old_blob = b"", None, b""
        kp.skip = kp.old_skip = kp.bound = 0
        kp.started = True
        state.evaluator = kp.encode()

    # -- checks ------------------------------------------------------------------------
    def _maybe_replan(self, state, kp: KeyPlans, table: pa.Table, cur) -> None:
        """After a step: plan from the key's rows or check them for drift when due;
        switch plans (with a drain when the segment is open: cur its evaluator)."""
        if kp.old_plan is not None:
            return
        first = kp.base is None
        settings = self.settings or AdaptiveSettings()
        if not first and self.settings is None:
            return
        due = self.planner.sample_rows if first else settings.chunk_rows * kp.every
        if kp.since < due:
            return
        kp.since = 0
        self.checks += 1
        if first:   # the key's start-up plan, from its rows
            rows = table.slice(max(0, table.num_rows - self.planner.sample_rows))
            kp.base = self.planner.estimate(rows, settings.check_pairs)
            choice = self.planner.choose_with(kp.base)
            if self._same_arrays(kp.plan, choice):
                kp.plan = encode_shape(plan_shape(choice))   # same evaluator: no switch
                return
        else:
            kp.checks += 1
            sample = table.slice(max(0, table.num_rows - settings.check_rows))
            verdict = drift_check(self.planner, settings, self.split, kp.base,
                                  shape_choice(kp.plan), sample,
                                  None if kp.candidate is None else decode_shape(kp.candidate),
                                  kp.votes, not kp.checks % settings.full_every)
            kp.base, kp.votes = verdict.statistics, verdict.votes
            kp.candidate = None if verdict.candidate is None else encode_shape(verdict.candidate)
            choice = verdict.choice
            if choice is None:
                kp.every = 1 if kp.candidate is not None else \
                    min(2 * kp.every, settings.max_check_every)
                return
        self._switch(state, kp, encode_shape(plan_shape(choice)), cur)

    def _switch(self, state, kp: KeyPlans, plan: bytes, cur) -> None:
        self.switches += 1
        kp.every = 1
        if cur is None or state.closed:   # nothing carried: the next segment starts on it
            kp.plan = plan
            return
        kp.old_plan, kp.old_blob, kp.old_skip = kp.plan, kp.blob, kp.skip
        kp.bound = kp.skip + cur.processed - cur.keep   # t: the first row not processed
        kp.plan, kp.blob, kp.started = plan, b"", False

    def _same_arrays(self, plan: bytes, choice) -> bool:
        """Whether choice runs the evaluator the recorded plan builds (its carry-over
        reads the same)."""
        mine = self._worker(plan).config
        theirs = self.planner.plan_arrays(choice)
        return all(np.array_equal(getattr(mine, k), theirs.get(k)) for k in _PLAN_ARRAYS)


def key_state_plans(state: KeyState) -> KeyPlans:
    """The plans a key's state records (tests, EXPLAIN-like inspection)."""
    return KeyPlans.decode(state.evaluator)
