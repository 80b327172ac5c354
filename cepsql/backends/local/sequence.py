"""The in-process fast path for the commonest SQL:2016 query shape: a PATTERN that is a
sequence of greedy quantified variables (``A B+ C``) whose DEFINEs depend on the row
alone (physical PREV/NEXT included), ONE ROW PER MATCH, AFTER MATCH SKIP PAST LAST ROW,
no WITHIN and no aggregates in MEASURES.

The DEFINEs are evaluated as whole-column masks (masks.py: the condition bytecode over
numpy columns; the general matcher's VM, ``SqlMatcher.row_local_masks``, for instructions
outside that subset), the matches found by the linear backtracking search of
cython_ext/sequence.pyx, and the MEASURES' row references (FIRST/LAST with logical and
physical offsets, CLASSIFIER) resolved from each match's per-element counts there too; the
output batch is the one MatchWorker builds. Results equal the general VM's (property
tests in tests/test_local_sequence.py); the planner options sequence_fast_path=False
turn the path off and vector_masks=False keep the masks on the VM (for comparisons).

Run on a slice of partitions given as row positions (threads.run_by_partition), only the
DEFINEs' columns are gathered; the output columns are taken from the input once, at the
matched rows."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from cepsql.algebra.pattern import Concat, Quantified, Var
from cepsql.compile.worker_config import WorkerConfig
from cepsql.runtime.worker import MatchWorker, raise_vm_error
from cepsql.backends.local.masks import vector_masks

__all__ = ["SequenceShape", "sequence_shape", "run_sequence", "define_masks"]


@dataclass(frozen=True)
class SequenceShape:
    """The pattern as elements: labels[e]{lows[e], highs[e]} (highs -1: unbounded);
    vector_masks: whether the DEFINE masks may be computed in numpy (masks.py)."""
    labels: np.ndarray
    lows: np.ndarray
    highs: np.ndarray
    vector_masks: bool = True


def sequence_shape(spec, worker, *, vector_masks: bool = True) -> SequenceShape | None:
    """The shape of spec when the fast path computes exactly what ``worker`` (the bound
    plan's worker) would, else None."""
    if spec is None or not isinstance(worker, MatchWorker):
        return None
    c = worker.config
    if not isinstance(c, WorkerConfig) or getattr(spec, "strategy", None) is not None:
        return None
    if (spec.rows_per_match != "ONE" or spec.after_match_skip.kind != "PAST_LAST_ROW"
            or spec.window is not None or c.window_kind != 0 or c.all_rows
            or len(c.measure_aggregates) or c.aggregate_columns or c.gathered):
        return None
    items = spec.pattern.items if isinstance(spec.pattern, Concat) else (spec.pattern,)
    labels, lows, highs = [], [], []
    for item in items:
        low, high = 1, 1
        if isinstance(item, Quantified):
            if not item.greedy:
                return None
            low, high = item.min, (-1 if item.max is None else item.max)
            item = item.child
        if not isinstance(item, Var) or item.name not in c.labels:
            return None
        label = c.labels.index(item.name)
        if c.code.offsets[label] >= 0 and not c.code.row_local[label]:
            return None  # DEFINE reads other rows of the match: the general VM decides
        labels.append(label)
        lows.append(low)
        highs.append(high)
    if c.code.row_errors:
        return None  # a DEFINE raises at the rows tested: the general VM knows which
    if sum(lows) < 1 or any(0 <= h < lo for lo, h in zip(lows, highs)):
        return None  # empty matches (and empty quantifier ranges) stay with the general VM
    return SequenceShape(np.asarray(labels, np.int32), np.asarray(lows, np.int64),
                         np.asarray(highs, np.int64), vector_masks)


def run_sequence(worker: MatchWorker, table: pa.Table, shape: SequenceShape,
                 starts: np.ndarray | None = None, rows: np.ndarray | None = None
                 ) -> pa.Table:
    """The worker's output over table (sorted, whole partitions contiguous); starts: the
    rows where a partition begins, when the caller knows them. With rows, the input is
    table's rows at those positions, in that order (starts then index into rows): only
    the DEFINEs' columns are gathered, the output columns are taken from table directly."""
    from cepsql._ext.sequence import match_sequences, sequence_leaves
    c = worker.config
    if rows is None:
        table = table.combine_chunks()
    n = table.num_rows if rows is None else len(rows)
    if n == 0:
        return c.output_schema.empty_table()
    if starts is None:
        starts = _group_starts(worker, table)
    bounds = np.append(starts, n).astype(np.int64)
    masks = define_masks(worker, table, rows, bounds, vectorised=shape.vector_masks)
    first, counts, parts = match_sequences(masks, bounds, shape.labels, shape.lows,
                                           shape.highs, c.code.offsets < 0,
                                           cancel=worker.cancel)
    if len(first) == 0:
        return c.output_schema.empty_table()
    numbers = _match_numbers(parts)
    member = np.asarray(c.membership).reshape(-1, max(len(c.labels), 1))
    leaves = sequence_leaves(first, counts, parts, bounds, shape.labels, member,
                             c.leaves, rows)
    if rows is not None:  # slice positions -> table rows
        first = rows[first]
    aggregates = np.zeros((len(first), 0, 2), dtype=np.int64)
    out = worker._output(table, first, numbers, leaves, aggregates, np.zeros(0, np.int64))
    return pa.Table.from_batches(out, schema=c.output_schema)


def define_masks(worker: MatchWorker, table: pa.Table, rows: np.ndarray | None,
                 bounds: np.ndarray, *, vectorised: bool = True) -> np.ndarray:
    """uint8[n_labels, n]: each label's row-local DEFINE per row (of rows, when given),
    vectorised (masks.py) when allowed and every instruction allows, else by the
    condition VM."""
    c = worker.config
    n = int(bounds[-1])
    loaded = _double_columns(c, table, rows)
    if loaded is None:
        if not c.code.columns:  # no column read: a table of n rows all the same
            columns = pa.table({"__cep_rows": pa.nulls(n)})
        else:
            columns = table.select(list(c.code.columns))
            if rows is not None:
                columns = columns.take(pa.array(rows))
        loaded = worker._vm_columns(columns.combine_chunks())
    values, nulls, consts, exact = loaded
    if not len(exact) and vectorised:
        masks = vector_masks(c.code, c.refs, values, nulls, consts, bounds, c.n_labels)
        if masks is not None:
            return masks
    return vm_masks(worker, (values, nulls, consts, exact), bounds)


def vm_masks(worker: MatchWorker, loaded: tuple, bounds: np.ndarray) -> np.ndarray:
    """The row-local DEFINE masks from the condition VM (loaded: worker._vm_columns)."""
    values, nulls, consts, exact = loaded
    matcher = worker._new_matcher()
    matcher.set_consts(consts)
    matcher.set_exact_columns(exact)
    masks = matcher.row_local_masks(values, nulls, bounds)
    raise_vm_error(matcher.vm_error())
    return masks


def _double_columns(c: WorkerConfig, table: pa.Table, rows: np.ndarray | None):
    """MatchWorker._vm_columns' result, gathered straight from numpy, when every column
    the DEFINEs read is a single-chunk DOUBLE column without NULLs (the commonest case:
    prices); None otherwise."""
    code = c.code
    if not code.columns or code.string_consts or any(t.exact for t in code.column_types):
        return None
    arrays = []
    for name in code.columns:
        col = table.column(name)
        if col.type != pa.float64() or col.num_chunks != 1 or col.null_count:
            return None
        x = col.chunk(0).to_numpy(zero_copy_only=False)
        arrays.append(x if rows is None else x[rows])
    values = np.stack(arrays) if len(arrays) > 1 else arrays[0].reshape(1, -1)
    nulls = np.zeros(values.shape, dtype=np.uint8)
    return values, nulls, code.consts.copy(), np.zeros((0, values.shape[1], 2), np.int64)


def _group_starts(worker: MatchWorker, table: pa.Table) -> np.ndarray:
    """Group starts of a table of several batches, as offsets into the whole table."""
    out, previous, offset = [], None, 0
    for batch in table.to_batches():
        if batch.num_rows == 0:
            continue
        out.append(worker._group_starts(batch, previous) + offset)
        previous = batch.slice(batch.num_rows - 1)
        offset += batch.num_rows
    return np.concatenate(out)


def _match_numbers(parts: np.ndarray) -> np.ndarray:
    """1, 2, ... per partition, in match order."""
    first = np.flatnonzero(np.r_[True, parts[1:] != parts[:-1]])
    runs = np.diff(np.r_[first, len(parts)])
    return np.arange(len(parts), dtype=np.int64) - np.repeat(first, runs) + 1
