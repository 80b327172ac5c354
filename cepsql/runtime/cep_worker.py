"""The CEP-mode worker: sorted Arrow batches in, match rows out (cep.pyx does the work).

Runs in tasks (Spark's Python workers, or the in-process threads), built from a
compile.worker_config.CepConfig. Same contract and output layout as the SQL-mode MatchWorker (whose column encoding and
output assembly it reuses).

With WITHIN the stream is cut into chunks of about WINDOW_CHUNK_ROWS rows regardless of the
PARTITION BY groups: the last group of a chunk stays open, the evaluator carries its
runs, match buffer and undecided matches into the next chunk and says which rows it may
still read (``keep``: the window back from the newest row, the first row of any match not
yet output, minus the deepest PREV); only those rows are passed again. Memory thus
follows the window, not the partition.

Held per group (the group's rows stay until it ends):
  * no WITHIN -- runs may live, and a leading NOT(...) may look back, over the whole
    partition;
  * MIN/MAX over a string column in a DEFINE -- the running value is a code of the
    chunk's string dictionary, which changes between chunks.

Bounded state: one partition's state -- live runs, run-buffer nodes, a plan's partial
matches, rows of matches not yet output -- may hold at most ``max_partial_matches``
entries (conf key cepsql.cep.maxPartialMatches; by default a share of the worker's
memory, default_state_limit). Without WITHIN, under SKIP_TILL_ANY_MATCH (or
SKIP_TILL_NEXT_MATCH with a closure, whose matches grow with the square of the
partition) the matches themselves are unbounded: the evaluator stops with a
CepRuntimeError naming the key instead of exhausting the worker's memory.
"""
from __future__ import annotations

import os
import resource

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cepsql.compile.conditions import STR, aggregate_column
from cepsql.compile.worker_config import CepConfig
from cepsql.errors import CepRuntimeError
from cepsql.runtime.pending import PendingRows, pieces
from cepsql.runtime.worker import (CHUNK_ROWS, MatchWorker, measure_lanes, raise_vm_error,
                     window_micros)


#: conf key of the state bound (planning.options.CONF_KEYS)
STATE_LIMIT_KEY = "cepsql.cep.maxPartialMatches"
#: bytes one counted state entry costs at most, with buffer growth (a run's words, a
#: node's five, a held match row's position and label, half a compact match's output
#: row; measured in benchmarks/bench_cep_memory.py)
BYTES_PER_ENTRY = 96
#: share of a worker's memory (per core) the state of one partition may take
MEMORY_SHARE = 0.5
#: most rows per evaluator call under WITHIN (at most CHUNK_ROWS): a call holds its
#: matches until its end, then sorts them into MATCH_NUMBER order, so fewer rows per call
#: keep that buffer in cache (issue 25: 65,536-row chunks 1.2x the CPU of 8192-row ones
#: on 4M matches, never faster in benchmarks/bench_chunk_sizes.py); a window longer
#: than this still runs in calls of twice its carried rows (PendingRows.keep)
WINDOW_CHUNK_ROWS = 8192


def default_state_limit() -> int:
    """Entries a partition's CEP state may hold by default: half the worker's memory per
    core -- the machine's memory, or the address-space limit when one is set (Spark's
    spark.executor.pyspark.memory sets it) -- at BYTES_PER_ENTRY each."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY and 0 < soft < memory:
        memory = soft
    per_core = memory / max(1, os.cpu_count() or 1)
    return max(1, int(per_core * MEMORY_SHARE / BYTES_PER_ENTRY))


def state_limit_error(limit: int, reached: bool) -> CepRuntimeError:
    """The CepRuntimeError of a CEP evaluation stopped by its state bound (reached) or
    out of memory before it: what was held, the conf key, and what to do."""
    if reached:
        what = (f"held more than {limit:,} partial matches and buffered match rows in one "
                f"partition (the bound set by {STATE_LIMIT_KEY})")
    else:
        bound = f"its bound of {limit:,}" if limit > 0 else "any bound (0: none)"
        what = (f"ran out of memory before {bound} on partial matches and buffered match "
                f"rows per partition ({STATE_LIMIT_KEY})")
    return CepRuntimeError(
        f"[CEP_STATE_LIMIT] the CEP evaluator {what}: the pattern's partial matches are "
        "not bounded by a window. Add WITHIN (a time or row window), AFTER MATCH SKIP "
        "PAST LAST ROW, a PARTITION BY, or a narrower STRATEGY (SKIP_TILL_NEXT_MATCH or "
        "PARTITION_CONTIGUITY instead of SKIP_TILL_ANY_MATCH); or set "
        f"{STATE_LIMIT_KEY} (in-process: cepsql.planner_options(max_partial_matches=...)) "
        "to a value the workers' memory allows (0: no bound)")


class CepWorker(MatchWorker):
    """Picklable callable: Iterator[RecordBatch] -> Iterator[RecordBatch]."""

    def __init__(self, config: CepConfig):
        self.config = config
        self.last_stats: dict | None = None  # the evaluator's counters of the last run

    def streamable(self) -> bool:
        """Whether the open group's rows can be dropped as the window moves on."""
        c = self.config
        if c.window_kind == 0:
            return False
        aggs = np.asarray(c.code.aggregates).reshape(-1, 3)
        for _, func, code in aggs:
            col = aggregate_column(code)
            if func in (4, 5) and col >= 0 and c.code.column_kinds[col] == STR:
                return False
        return True

    def _new_push(self):
        """Push state of one stream (``__call__``, ``feed``/``finish`` are MatchWorker's).
        A clause planned inside its tasks runs as task_planning.PlanningWorker."""
        return _WindowPush(self) if self.streamable() else _GroupPush(self)

    def _record_stats(self, matcher) -> None:
        self.last_stats = matcher.stats()

    def state_limit(self) -> int:
        """The matcher's bound on a partition's state entries (0: none)."""
        limit = self.config.max_partial_matches
        return default_state_limit() if limit is None else int(limit)

    def _new_matcher(self):
        matcher = self._built_matcher()
        matcher.max_state = self.state_limit()
        matcher.cancel_with(self.cancel)
        return matcher

    def _built_matcher(self):
        from cepsql._ext.cep import CepMatcher, CepSpec
        c = self.config
        return CepMatcher(CepSpec(
            code=c.code.code, conj_off=c.conj_off, conj_label=c.conj_label,
            conj_mask=c.conj_mask, consts=c.code.consts, refs=c.refs, membership=c.membership,
            daggs=c.code.aggregates, comps=c.comps, seq_start=c.seq_start, negs=c.negs,
            leaves=c.leaves, maggs=c.measure_aggregates, rank=c.rank, strategy=c.strategy,
            all_rows=int(c.all_rows), with_unmatched=int(c.with_unmatched),
            select_past_last=int(c.select_past_last), window_kind=c.window_kind,
            window_size=float(min(c.window_size, 2 ** 62)), max_stack=c.code.max_stack,
            xconsts=c.code.xconsts, ansi=int(c.code.ansi), dlane=c.code.aggregate_exact,
            mlane=measure_lanes(c.code, c.aggregate_columns),
            merging=int(c.merging),  # PlannerOptions.run_merging
            proceed=c.comp_proceed,
            groups=c.groups, seq_recheck=c.seq_recheck, take_skip=c.take_skip,
            neg_iter=c.neg_iter, loop_only=c.loop_only,
            not_sub_start=c.not_sub_start, not_seq_start=c.not_seq_start,
            not_comps=c.not_comps, not_early=c.not_early,
            plan_nodes=c.plan_nodes, plan_leaf_of=c.plan_leaf_of, plan_after=c.plan_after,
            plan_conj_start=c.plan_conj_start, plan_conj=c.plan_conj, plan_late=c.conj_late,
            plan_rowlocal=c.conj_rowlocal, plan_neg_start=c.plan_neg_start,
            plan_neg=c.plan_neg))

    def _process(self, matcher, table: pa.Table, starts: np.ndarray, open_last: bool = False,
                 cont: bool = False):
        n = table.num_rows
        values, nulls = self._load_vm(matcher, table)
        bounds = np.append(np.unique(starts), n).astype(np.int64)
        wts = wnulls = None
        if self.config.window_kind == 2:
            wts, wnulls = window_micros(table.column(self.config.window_column))
        breaks = None
        if self.config.breaks_column is not None:
            breaks = break_flags(table.column(self.config.breaks_column))
        try:
            rows, numbers, leaves, aggregates = matcher.run(
                values, nulls, bounds, wts, wnulls, int(open_last), int(cont), breaks=breaks)
        except MemoryError:
            raise state_limit_error(matcher.max_state, bool(matcher.limit_hit)) from None
        raise_vm_error(matcher.vm_error())
        list_rows = matcher.list_rows()
        if len(rows) == 0:
            return []
        return self._output(table, rows, numbers, leaves, aggregates, list_rows)


class _GroupPush:
    """One stream without a window bound: chunks are cut at PARTITION BY group starts
    (a group's rows stay until it ends)."""

    def __init__(self, worker: CepWorker):
        self.worker = worker
        self.matcher = worker._new_matcher()
        self.pending = PendingRows(worker._group_starts, CHUNK_ROWS)

    def feed(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        if batch.num_rows == 0:
            return []
        self.pending.add(batch)
        if not self.pending.ready:
            return []
        all_starts = self.pending.group_starts()
        cut = int(all_starts[-1])  # the last group may continue in the next batch
        if cut == 0:
            self.pending.wait_for_more()
            return []
        table, _ = self.pending.table()
        out = self.worker._process(self.matcher, table.slice(0, cut), all_starts[:-1])
        self.pending.keep(table.slice(cut), group_open=False)
        return list(out)

    def finish(self) -> list[pa.RecordBatch]:
        out = []
        if self.pending.rows:
            table, all_starts = self.pending.table()
            out = list(self.worker._process(self.matcher, table, all_starts))
            self.pending.clear()
        self.worker._record_stats(self.matcher)
        return out


class _WindowPush:
    """One stream under WITHIN: chunks of about WINDOW_CHUNK_ROWS rows; the evaluator carries
    the open group's state and says which rows it may still read (``keep``)."""

    def __init__(self, worker: CepWorker):
        self.worker = worker
        self.matcher = worker._new_matcher()
        self.chunk_rows = min(CHUNK_ROWS, WINDOW_CHUNK_ROWS)
        self.pending = PendingRows(worker._group_starts, self.chunk_rows)
        self.carried = 0  # leading pending rows the evaluator's open state refers to

    def feed(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        out: list[pa.RecordBatch] = []
        for piece in pieces([batch], self.chunk_rows):
            out += self._feed_piece(piece)
        return out

    def _feed_piece(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        self.pending.add(batch)
        if not self.pending.ready:
            return []
        table, all_starts = self.pending.table()
        out = self.worker._process(self.matcher, table, all_starts, True, self.carried > 0)
        self.pending.keep(table.slice(self.matcher.keep))
        self.carried = self.pending.rows
        return list(out)

    def finish(self) -> list[pa.RecordBatch]:
        out = []
        if self.pending.rows:
            table, all_starts = self.pending.table()
            out = list(self.worker._process(self.matcher, table, all_starts, False,
                                            self.carried > 0))
            self.pending.clear()
        self.worker._record_stats(self.matcher)
        return out


def break_flags(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """The STRICT_CONTIGUITY break column of a chunk as one uint8 flag per row (NULL = 0).
    It is read from the chunk itself, so carried rows passed again keep their flags."""
    flags = pc.fill_null(column.cast(pa.uint8()), 0)
    return np.ascontiguousarray(flags.to_numpy(zero_copy_only=False), dtype=np.uint8)
