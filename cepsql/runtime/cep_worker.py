"""The CEP-mode worker: sorted Arrow batches in, match rows out (cep.pyx does the work).

Runs in tasks (Spark's Python workers, or the in-process threads), built from a
compile.worker_config.CepConfig. Same contract and output layout as the SQL-mode MatchWorker (whose column encoding and
output assembly it reuses).

With WITHIN the stream is cut into chunks of about CHUNK_ROWS rows regardless of the
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
"""
from __future__ import annotations


import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cepsql.compile.conditions import STR
from cepsql.compile.worker_config import CepConfig
from cepsql.runtime.pending import PendingRows, pieces
from cepsql.runtime.worker import (CHUNK_ROWS, MatchWorker, measure_lanes, raise_vm_error,
                     window_micros)




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
        for _, func, col in aggs:
            if func in (4, 5) and col >= 0 and c.code.column_kinds[col] == STR:
                return False
        return True

    def _new_push(self):
        """Push state of one stream (``__call__``, ``feed``/``finish`` are MatchWorker's).
        A clause planned inside its tasks runs as task_planning.PlanningWorker."""
        return _WindowPush(self) if self.streamable() else _GroupPush(self)

    def _record_stats(self, matcher) -> None:
        self.last_stats = matcher.stats()

    def _new_matcher(self):
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
        rows, numbers, leaves, aggregates = matcher.run(values, nulls, bounds, wts, wnulls,
                                                        int(open_last), int(cont),
                                                        breaks=breaks)
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
    """One stream under WITHIN: chunks of about CHUNK_ROWS rows; the evaluator carries
    the open group's state and says which rows it may still read (``keep``)."""

    def __init__(self, worker: CepWorker):
        self.worker = worker
        self.matcher = worker._new_matcher()
        self.pending = PendingRows(worker._group_starts, CHUNK_ROWS)
        self.carried = 0  # leading pending rows the evaluator's open state refers to

    def feed(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        out: list[pa.RecordBatch] = []
        for piece in pieces([batch], CHUNK_ROWS):
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
