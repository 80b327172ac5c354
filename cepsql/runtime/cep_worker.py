"""The CEP-mode worker: sorted Arrow batches in, match rows out (cep.pyx does the work).

Same contract and output layout as the SQL-mode MatchWorker (whose column encoding and
output assembly it reuses). CEP state lives per PARTITION BY group: the worker cuts the
stream at group boundaries into chunks of whole groups (at least CHUNK_ROWS rows), so
the input rows of the group being matched are held in memory until the group ends
(inside the evaluator, runs and the shared match buffer are pruned by the window).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa

from .conditions import ConditionCode
from .worker import CHUNK_ROWS, MatchWorker, _with_zero, window_micros


@dataclass
class CepConfig:
    labels: list[str]
    code: ConditionCode
    conj_off: np.ndarray
    conj_label: np.ndarray
    conj_mask: np.ndarray
    refs: np.ndarray
    membership: np.ndarray
    comps: np.ndarray
    seq_start: np.ndarray
    negs: np.ndarray
    leaves: np.ndarray
    leaf_columns: list[str | None]
    measure_aggregates: np.ndarray
    aggregate_columns: list[tuple[str, str | None]]
    rank: np.ndarray
    strategy: int
    all_rows: bool
    with_unmatched: bool
    select_past_last: bool
    partition_columns: list[str]
    passthrough: list[str]
    window_kind: int
    window_size: float
    window_column: str | None
    output_schema: pa.Schema
    merging: bool = True


LAST_STATS: dict = {}  # evaluator counters of the last worker run in this process


class CepWorker(MatchWorker):
    """Picklable callable: Iterator[RecordBatch] -> Iterator[RecordBatch]."""

    def __init__(self, config: CepConfig):
        self.config = config
        self.last_stats: dict | None = None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        matcher = self._new_matcher()
        pending: list[pa.RecordBatch] = []
        starts: list[np.ndarray] = []
        pending_rows = 0
        previous = None
        threshold = CHUNK_ROWS
        for batch in batches:
            if batch.num_rows == 0:
                continue
            starts.append(self._group_starts(batch, previous) + pending_rows)
            previous = batch.slice(batch.num_rows - 1)
            pending.append(batch)
            pending_rows += batch.num_rows
            if pending_rows < threshold:
                continue
            all_starts = _with_zero(np.concatenate(starts))
            cut = int(all_starts[-1])  # the last group may continue in the next batch
            if cut == 0:
                threshold = 2 * pending_rows
                continue
            table = pa.Table.from_batches(pending)
            yield from self._process(matcher, table.slice(0, cut), all_starts[:-1])
            rest = table.slice(cut)
            pending = rest.to_batches()
            pending_rows = rest.num_rows
            starts = [np.zeros(1, dtype=np.int64)]
            threshold = CHUNK_ROWS
        if pending_rows:
            table = pa.Table.from_batches(pending)
            yield from self._process(matcher, table, _with_zero(np.concatenate(starts)))
        self.last_stats = matcher.stats()
        LAST_STATS.clear()
        LAST_STATS.update(self.last_stats)

    def _new_matcher(self):
        from .._ext.cep import CepMatcher
        c = self.config
        matcher = CepMatcher(
            c.code.code, c.conj_off, c.conj_label, c.conj_mask, c.code.consts, c.refs,
            c.membership, c.code.aggregates, c.comps, c.seq_start, c.negs, c.leaves,
            c.measure_aggregates, c.rank, c.strategy, int(c.all_rows), int(c.with_unmatched),
            int(c.select_past_last), c.window_kind, float(c.window_size), c.code.max_stack)
        # CEPSQL_CEP_MERGE=0 switches run merging off (benchmarks/bench_cep.py)
        matcher.merging = int(c.merging and os.environ.get("CEPSQL_CEP_MERGE", "1") != "0")
        return matcher

    def _process(self, matcher, table: pa.Table, starts: np.ndarray):
        n = table.num_rows
        values, nulls, consts = self._vm_columns(table)
        matcher.set_consts(consts)
        bounds = np.append(np.unique(starts), n).astype(np.int64)
        wts = wnulls = None
        if self.config.window_kind == 2:
            wts, wnulls = window_micros(table.column(self.config.window_column))
        rows, numbers, leaves, aggregates = matcher.run(values, nulls, bounds, wts, wnulls)
        if len(rows) == 0:
            return []
        return self._output(table, rows, numbers, leaves, aggregates,
                            np.zeros(0, dtype=np.int64))
