"""The per-partition worker: sorted Arrow batches in, match rows out.

Runs in tasks: inside Spark's Python workers (mapInArrow) and in the local path's
threads, built from a compile.worker_config.WorkerConfig (SQL:2016 mode; the CEP-mode
worker extends it). Also the column lanes every worker loads (``LaneCache``). Rows of one
PARTITION BY group are contiguous; the worker cuts the stream into chunks of whole
groups, hands each chunk's columns to the Cython matcher as typed arrays, and gathers
the output columns with Arrow ``take`` — no Python object per row.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cepsql.errors import CepAnalysisError, CepRuntimeError, error_site
from cepsql.exprs.arrow_eval import spark_compare
from cepsql.analyze.aggregate_functions import aggregate_lane
from cepsql.compile.conditions import STR, ConditionCode
from cepsql.compile.worker_config import WorkerConfig
from cepsql.runtime.gathered import compute
from cepsql.runtime.pending import PendingRows
from cepsql.runtime.vm_errors import vm_error_message

CHUNK_ROWS = 1 << 16
NULL_BITS = np.int64(0x7FF8DEADBEEF0001)


class MatchWorker:
    """Picklable callable: Iterator[RecordBatch] -> Iterator[RecordBatch]."""

    # the run's cancel flag (uint8[1]) its matchers watch when it runs outside the main
    # thread, where Ctrl-C does not reach (backends/local/threads.py sets it on its copy)
    cancel: np.ndarray | None = None
    # the evaluator's counters of the last stream run (EXPLAIN ANALYZE, run_stats.py)
    last_stats: dict | None = None

    def __init__(self, config: WorkerConfig):
        self.config = config
        self._derived = {"config": config}  # _compiled's table, shared by shallow copies

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Stream chunks through the matcher (pull style: built on a fresh push state,
        so one worker object can serve several streams at once). A CepError without a
        position carries the config's error_site, for the driver to locate."""
        with error_site(getattr(self.config, "error_site", None)):
            push = self._new_push()
            for batch in batches:
                yield from push.feed(batch)
            yield from push.finish()

    def resumed(self, batches: Iterator[pa.RecordBatch], start: int
                ) -> Iterator[pa.RecordBatch]:
        """As ``__call__`` over ONE PARTITION BY group whose search begins at its row
        ``start``: the rows before it are read only through PREV. (A sliced SKIP PAST
        LAST ROW chain enters its slice there: backends/spark/chain_slicing.py.)"""
        with error_site(getattr(self.config, "error_site", None)):
            push = self._new_push()
            push.enter_at(start)
            for batch in batches:
                yield from push.feed(batch)
            yield from push.finish()

    # push style: one stream per worker object (the shared pass feeds many workers) -----
    def feed(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        """Push one sorted batch (continuing the stream of earlier feeds); returns the
        output rows decided so far. Memory stays bounded as in ``__call__``."""
        with error_site(getattr(self.config, "error_site", None)):
            if getattr(self, "_push", None) is None:
                self._push = self._new_push()
            return self._push.feed(batch)

    def finish(self) -> list[pa.RecordBatch]:
        """End the stream fed so far: the remaining output rows. The worker can then
        start a new stream with ``feed``."""
        push = getattr(self, "_push", None)
        self._push = None
        with error_site(getattr(self.config, "error_site", None)):
            return push.finish() if push is not None else []

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_push", None)  # an open stream never travels with the worker
        state.pop("lanes", None)  # nor a task's lane cache (SharedPassWorker sets one)
        state.pop("_derived", None)  # rebuilt where it runs (_compiled)
        return state

    def __copy__(self) -> "MatchWorker":
        """A copy as pickling makes it (no open stream, no lane cache) that shares what
        was derived from the config (_compiled): the local backend copies the worker
        per run and slice."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__getstate__())
        if "_derived" in self.__dict__:
            new._derived = self._derived
        return new

    def _lane_cache(self) -> "LaneCache":
        """The lane cache this worker shares with the other workers of its task (set on
        the task's own worker copies by the shared pass), or one that keeps nothing."""
        return getattr(self, "lanes", None) or _NO_CACHE

    def _new_push(self) -> "_SqlPush":
        return _SqlPush(self)

    def know_group_changes(self, column: pa.Array, changes: np.ndarray) -> None:
        """Tell this worker copy where the PARTITION BY groups of ``column`` (the one
        partition column of the rows it will be fed, or a longer array they are slices
        of) change: ``changes[j]`` as ``row_changes`` gives it. The caller that grouped
        the rows knows this already (threads.py, from partition ranks), and the worker
        then does not compare the keys again. The copy gets a lane cache of its own (a
        shallow copy would share its original's)."""
        self.lanes = LaneCache()
        self.lanes.put(column, _CHANGES, (changes,))

    # ------------------------------------------------------------------
    def _new_matcher(self):
        from cepsql._ext.matcher import SqlMatcher
        matcher = SqlMatcher(self._spec())
        matcher.cancel_with(self.cancel)
        return matcher

    def _spec(self):
        """The config's SqlSpec (read-only), built once per config (_compiled)."""
        spec = self._compiled("spec")
        if spec is None:
            from cepsql._ext.matcher import SqlSpec
            c = self.config
            spec = self._compiled("spec", SqlSpec(
                prog=c.program, n_labels=c.n_labels, n_slots=c.n_slots, code=c.code.code,
                cond_off=c.code.offsets, consts=c.code.consts, refs=c.refs,
                member=c.membership, leaves=c.leaves, daggs=c.code.aggregates,
                maggs=c.measure_aggregates, row_local=c.code.row_local,
                skip_mode=c.skip_mode, skip_set=c.skip_set, all_rows=int(c.all_rows),
                empty_mode=c.empty_mode, full_history=int(c.full_history),
                window_kind=c.window_kind, window_size=float(c.window_size),
                closure_depth=c.closure_depth, xconsts=c.code.xconsts,
                ansi=int(c.code.ansi), dlane=c.code.aggregate_exact,
                mlane=self._measure_lanes(), dprog=c.code.aggregate_programs))
        return spec

    def _measure_lanes(self) -> np.ndarray:
        """measure_lanes of the config (read-only), computed once per config."""
        lanes = self._compiled("lanes")
        if lanes is None:
            lanes = measure_lanes(self.config.code, self.config.aggregate_columns)
            lanes.flags.writeable = False
            self._compiled("lanes", lanes)
        return lanes

    def _compiled(self, name: str, value: object = None) -> object:
        """What the worker derives from its config once (its matcher's spec, ...): read
        (value None) or store under name. The table is one dict that shallow copies of
        the worker share (a cached plan's worker is copied per run and slice, and each
        copy starts a matcher), and it is kept with the config object it was derived
        from, so a worker given another config derives afresh."""
        table = self.__dict__.get("_derived")
        if table is None or table.get("config") is not self.config:
            table = self._derived = {"config": self.config}
        if value is not None:
            table[name] = value
        return table.get(name)

    def _group_starts(self, batch: pa.RecordBatch, previous: pa.RecordBatch | None
                      ) -> np.ndarray:
        """Offsets in batch where a new PARTITION BY group begins; row 0 counts when it
        differs from the previous batch's last row (or there is none). The changes
        inside the batch come from the lane cache (workers fed the same batch share
        them); only row 0 is compared here."""
        n = batch.num_rows
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        change = np.zeros(n, dtype=bool)
        change[0] = previous is None
        lanes = self._lane_cache()
        for name in self.config.partition_columns:
            col = batch.column(name)
            if isinstance(col, pa.ChunkedArray):
                col = col.combine_chunks()
            if n > 1:
                change[1:] |= lanes.get(col, _CHANGES, row_changes)[0][1:]
            if previous is not None and not change[0]:
                pair = pa.concat_arrays([previous.column(name), col.slice(0, 1)])
                change[0] = bool(row_changes(pair)[0][1])
        return np.flatnonzero(change).astype(np.int64)

    def _process(self, matcher, table: pa.Table, starts: np.ndarray, open_last: bool,
                 carry: tuple[int, int, int, bool] | None):
        """Match one chunk; returns (output batches, resume state of its last group)."""
        n = table.num_rows
        values, nulls = self._load_vm(matcher, table)
        bounds = np.append(starts, n).astype(np.int64)
        cont_pos, cont_mn, cont_cov, has_start = carry if carry is not None else (-1, 0, 0, True)
        wts, wnulls = (None, None)
        if self.config.window_kind == 2:
            wts, wnulls = self._lane_cache().column(table.column(self.config.window_column),
                                                    "window", _window_chunk)
        result = matcher.run(values, nulls, bounds, int(open_last), cont_pos, cont_mn, cont_cov,
                             int(has_start), wts, wnulls)
        if result.error:
            self._raise_runtime(result.error)
        raise_vm_error(matcher.vm_error())
        if len(result.rows) == 0:
            return [], result.resume
        return self._output(table, result.rows, result.match_numbers, result.leaves,
                            result.aggregates, result.list_rows), result.resume

    def _output(self, table, rows, match_numbers, leaves, aggregates, list_rows):
        return self._output_batches(self._output_columns(
            table, rows, match_numbers, leaves, aggregates, list_rows))

    def _output_columns(self, table, rows, match_numbers, leaves, aggregates, list_rows,
                        take=None) -> list:
        """The output columns of the matcher's result. ``take(name, indices, mask)``
        gathers rows of an input column (default: from table); the shared pass defers
        these gathers to make one per input column for all its patterns."""
        c = self.config
        if take is None:
            def take(name, indices, mask=None):
                return take_rows(table.column(name), indices, mask)
        columns = [take(name, rows) for name in c.passthrough]
        for i, column in enumerate(c.leaf_columns):
            idx = leaves[:, i]
            if column is None:
                labels = pa.array(c.labels, pa.string())
                codes = pa.array(idx.astype(np.int32), mask=idx < 0)
                columns.append(labels.take(codes))
            else:
                columns.append(take(column, idx, idx < 0))
        columns += self._aggregate_columns(table, aggregates, list_rows, match_numbers)
        columns.append(pa.array(match_numbers, mask=match_numbers < 0))
        return columns

    def _output_batches(self, columns: list) -> list[pa.RecordBatch]:
        """The output batches of _output_columns' columns."""
        if len(columns[-1]) and all(isinstance(col, pa.Array) for col in columns):
            return [pa.RecordBatch.from_arrays(columns, schema=self.config.output_schema)]
        return pa.Table.from_arrays(columns, schema=self.config.output_schema).to_batches()

    def _aggregate_columns(self, table: pa.Table, raw: np.ndarray, list_rows: np.ndarray,
                           match_numbers: np.ndarray) -> list[pa.Array]:
        """Decode the matcher's aggregate outputs into typed Arrow columns, then the
        gathered aggregates over the ROWS lists."""
        out = []
        lanes = self._measure_lanes()
        lists: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        list_counts = [raw[:, q, 0] for q, (func, _) in enumerate(self.config.aggregate_columns)
                       if func in ("LIST", "ROWS")]
        # list rows are laid out per output row, then per LIST aggregate
        offsets = np.zeros(0, dtype=np.int64)
        if list_counts:
            counts = np.stack(list_counts, axis=1).clip(min=0)
            offsets = np.concatenate([[0], np.cumsum(counts.ravel())])
        list_index = 0
        n_lists = len(list_counts)
        for q, (func, column) in enumerate(self.config.aggregate_columns):
            values = raw[:, q, 0]
            if func == "ROWS":  # a gathered aggregate's row list: no column of its own
                starts = offsets[list_index:-1:n_lists]
                lists[q] = (starts, offsets[list_index + 1::n_lists] - starts)
                list_index += 1
                continue
            field = self.config.output_schema.field(f"__cep_a{q}")
            if func in ("COUNT_STAR", "COUNT"):
                out.append(pa.array(values, pa.int64(), mask=values < 0))
            elif func in ("SUM", "AVG") and lanes[q, 0] and lanes[q, 3] >= 0:
                out.append(exact_array(raw[:, q], field.type))
            elif func in ("SUM", "AVG"):
                null = values == NULL_BITS
                floats = values.view(np.float64)
                arr = pa.array(floats, pa.float64(), mask=null)
                out.append(arr.cast(field.type) if field.type != pa.float64() else arr)
            elif func in ("MIN", "MAX"):
                out.append(take_rows(table.column(column), values, values < 0))
            else:
                starts = offsets[list_index:-1:n_lists]
                lengths = offsets[list_index + 1::n_lists] - starts
                bounds = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
                picks = (np.arange(bounds[-1]) - np.repeat(bounds[:-1], lengths)
                         + np.repeat(starts, lengths))
                flat = table.column(column).take(pa.array(list_rows[picks]))
                if isinstance(flat, pa.ChunkedArray):
                    flat = flat.combine_chunks()
                out.append(pa.ListArray.from_arrays(pa.array(bounds.astype(np.int32)), flat,
                                                    mask=pa.array(values < 0)))
                list_index += 1
        for spec in getattr(self.config, "gathered", ()):  # CepConfig has none
            out.append(compute(spec, table, lists, list_rows, match_numbers))
        return out

    def _load_vm(self, matcher, table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """Hand the chunk's constants and exact columns to the matcher; returns the
        double-lane values and the null masks of every VM column."""
        values, nulls, consts, exact = self._vm_columns(table)
        matcher.set_consts(consts)
        matcher.set_exact_columns(exact)
        return values, nulls

    def _vm_columns(self, table: pa.Table):
        """Double-lane values, null masks, constants and the exact lane (int64[k, n, 2]:
        128-bit values) of the columns the condition VM reads. Each column fills only
        its own lane (np.zeros leaves the other lane's pages untouched). Non-string
        columns are converted per Arrow chunk through the lane cache: the shared pass's
        workers read the same batch columns, and carried rows are slices of chunks
        already converted."""
        code = self.config.code
        n = table.num_rows
        k = len(code.columns)
        values = np.zeros((k, n), dtype=np.float64)
        nulls = np.zeros((k, n), dtype=np.uint8)
        any_exact = any(t.exact for t in code.column_types)
        exact = np.zeros((k if any_exact else 0, n, 2), dtype=np.int64)
        consts = code.consts.copy()
        strings = [name for name, kind in zip(code.columns, code.column_kinds) if kind == STR]
        if strings or code.string_consts:  # the string codes: no dictionary without strings
            dictionary = sorted_dictionary(table, strings, [s for _, s in code.string_consts])
        for slot, text in code.string_consts:
            consts[slot] = float(pc.index_in(pa.scalar(text), value_set=dictionary).as_py())
        lanes = self._lane_cache()
        for i, (name, kind) in enumerate(zip(code.columns, code.column_kinds)):
            if code.column_types[i].exact:
                lanes.fill(table.column(name), "exact", _exact_chunk, exact[i], nulls[i])
            elif kind == STR:
                col = table.column(name).combine_chunks()
                nulls[i] = col.is_null().to_numpy(zero_copy_only=False)
                num = pc.index_in(col, value_set=dictionary).cast(pa.float64())
                values[i] = pc.fill_null(num, 0.0).to_numpy(zero_copy_only=False)
            else:
                lanes.fill(table.column(name), "float", _float_chunk, values[i], nulls[i])
        return values, nulls, consts, exact

    def _raise_runtime(self, code: int) -> None:
        var = self.config.skip_var
        where = {"sql": self.config.sql or None, "pos": self.config.skip_pos}
        if code == 1:
            raise CepRuntimeError(
                f"AFTER MATCH SKIP TO {var}: cannot skip to the first row of the match", **where)
        if code == 2:
            raise CepRuntimeError(
                f"AFTER MATCH SKIP TO {var}: variable {var} does not appear in the match",
                **where)
        raise MemoryError("cepsql matcher ran out of memory")


class _SqlPush:
    """The state of one stream through a MatchWorker. The last PARTITION BY group of a
    chunk stays open: rows it may still need (from the first undecided start row, minus
    the deepest PREV) are carried into the next chunk, so memory follows the longest
    match attempt rather than the partition size."""

    def __init__(self, worker: MatchWorker):
        self.worker = worker
        self.matcher = worker._new_matcher()
        self.pending = PendingRows(worker._group_starts, CHUNK_ROWS)
        self.carry = None  # (resume row, match number, covered, has start) of the open group
        self.entry = False  # carry is an entry point into the stream's first group

    def enter_at(self, start: int) -> None:
        """Search the stream's first group from its row ``start`` on (no ``^`` there)."""
        self.carry, self.entry = (start, 0, start, False), True

    def feed(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        if batch.num_rows == 0:
            return []
        w = self.worker
        was_empty = self.pending.rows == 0
        new_starts = self.pending.add(batch)
        if self.carry is not None and was_empty and len(new_starts) and new_starts[0] == 0 \
                and not self.entry:
            self.carry = None  # the carried group ended exactly at the previous chunk's end
        if not self.pending.ready:
            return []
        self.entry = False
        table, all_starts = self.pending.table()
        out, resume = w._process(self.matcher, table, all_starts, True, self.carry)
        pos, match_no, covered = resume
        keep = max(min(pos, table.num_rows) - w.config.max_lookback, int(all_starts[-1]))
        self.pending.keep(table.slice(keep))
        group_start = int(all_starts[-1])
        carry = self.carry
        has_start = keep == group_start and (carry is None or carry[3] or group_start > 0)
        self.carry = (pos - keep, match_no, max(covered - keep, 0), has_start)
        return list(out)

    def finish(self) -> list[pa.RecordBatch]:
        out = []
        if self.pending.rows:
            table, all_starts = self.pending.table()
            out, _ = self.worker._process(self.matcher, table, all_starts, False, self.carry)
            self.pending.clear()
        self.worker.last_stats = self.matcher.stats()
        return list(out)


def take_rows(column, indices: np.ndarray, mask: np.ndarray | None = None):
    """column's rows at indices (NULL where mask): a one-chunk column is gathered as an
    Array (the output then needs no Table to make its batch), and a mask without a
    missing row is left out (no validity bitmap to build)."""
    if isinstance(column, pa.ChunkedArray) and column.num_chunks == 1:
        column = column.chunk(0)
    if mask is not None and not mask.any():
        mask = None
    return column.take(pa.array(indices, mask=mask))


def measure_lanes(code: ConditionCode, aggregates: list[tuple[str, str | None]]) -> np.ndarray:
    """int32[n, 4]: how the evaluator computes each MEASURES aggregate (aggregate_lane)."""
    lanes = [aggregate_lane(func, None if column is None
                            else code.column_types[code.columns.index(column)])[0]
             for func, column in aggregates]
    return np.asarray(lanes, dtype=np.int32).reshape(-1, 4)


def exact_array(words: np.ndarray, dtype: pa.DataType) -> pa.Array:
    """An Arrow column from the evaluator's 128-bit results (int64[n, 2]; high word
    INT64_MIN = NULL): decimal128 zero-copy, integers and durations from the low word."""
    null = words[:, 1] == np.iinfo(np.int64).min
    mask = pa.array(null) if null.any() else None
    if pa.types.is_decimal(dtype):
        data = np.ascontiguousarray(words)
        data[null] = 0
        validity = None if mask is None else pc.invert(mask).buffers()[1]
        return pa.Array.from_buffers(dtype, len(words), [validity, pa.py_buffer(data)],
                                     null_count=int(null.sum()))
    return pa.array(words[:, 0], pa.int64(), mask=null).cast(dtype)


def raise_vm_error(error) -> None:
    """A run-time error of the condition VM (``ConditionHost.vm_error()``: 0, or its code,
    the failing instruction's words and operands) as a CepRuntimeError in Spark's words,
    at the expression's offset when the instruction knows it (runtime/vm_errors.py)."""
    code, words, a, b = error if isinstance(error, tuple) else (error, (), 0, 0)
    found = vm_error_message(code, words, a, b)
    if found is not None:
        raise CepRuntimeError(found[0], pos=found[1])


def exact_lane(col: pa.Array, out: np.ndarray) -> None:
    """Fill out (int64[n, 2]) with the 128-bit values of an exact-lane column: decimals
    unscaled (Arrow's decimal128 buffer is that layout already), integers sign-extended,
    timestamps and durations in microseconds, dates in days. NULL rows stay 0."""
    t = col.type
    if pa.types.is_decimal(t) and t.bit_width != 128:
        col, t = col.cast(pa.decimal128(t.precision, t.scale)), pa.decimal128(t.precision, t.scale)
    if pa.types.is_decimal(t):
        buf = col.buffers()[1]
        raw = np.frombuffer(buf, dtype=np.int64).reshape(-1, 2)[col.offset:col.offset + len(col)]
        out[:] = raw
        if col.null_count:
            out[col.is_null().to_numpy(zero_copy_only=False)] = 0
        return
    if pa.types.is_timestamp(t):
        col = col.cast(pa.timestamp("us", t.tz))
    elif pa.types.is_duration(t):
        col = col.cast(pa.duration("us"))
    elif pa.types.is_date64(t):
        col = col.cast(pa.date32())
    v = pc.fill_null(col.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    out[:, 0] = v
    out[:, 1] = v >> 63


def window_micros(column) -> tuple[np.ndarray, np.ndarray]:
    """The ORDER BY key as microseconds for WITHIN INTERVAL: timestamps as they are,
    dates as whole days, numbers as seconds (Spark's numeric-to-timestamp rule)."""
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    t = col.type
    if pa.types.is_timestamp(t):
        micros = col.cast(pa.timestamp("us", t.tz)).cast(pa.int64()).cast(pa.float64())
    elif pa.types.is_date(t):
        days = col.cast(pa.date32()).cast(pa.int32()).cast(pa.float64())
        micros = pc.multiply(days, 86_400_000_000.0)
    elif pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        micros = pc.multiply(col.cast(pa.float64()), 1_000_000.0)
    else:
        raise CepAnalysisError(f"WITHIN INTERVAL cannot measure time on {t} values")
    nulls = null_flags(col)
    return pc.fill_null(micros, 0.0).to_numpy(zero_copy_only=False), nulls


def sorted_dictionary(table: pa.Table, columns: list[str], literals: list[str]) -> pa.Array:
    """The sorted distinct strings of the columns and literals: the codes the condition
    VM compares strings by (one dictionary per chunk)."""
    values = [pa.array(literals, pa.string())]
    for name in columns:
        values.append(pc.unique(table.column(name).combine_chunks().cast(pa.string())))
    merged = pc.unique(pa.concat_arrays(values).drop_null())
    return merged.take(pc.sort_indices(merged))


def _as_float(col: pa.Array) -> pa.Array:
    t = col.type
    if pa.types.is_timestamp(t):  # microseconds, whatever the unit: intervals are too
        return col.cast(pa.timestamp("us", t.tz)).cast(pa.int64()).cast(pa.float64())
    if pa.types.is_duration(t):
        return col.cast(pa.duration("us")).cast(pa.int64()).cast(pa.float64())
    if pa.types.is_time(t):
        return col.cast(pa.int64()).cast(pa.float64())
    if pa.types.is_date32(t):
        return col.cast(pa.int32()).cast(pa.float64())
    if pa.types.is_date64(t):
        return col.cast(pa.int64()).cast(pa.float64())
    if pa.types.is_boolean(t):
        return col.cast(pa.int8()).cast(pa.float64())
    return col.cast(pa.float64(), safe=False)


# --- lanes shared by the workers of one task -------------------------------------------
class LaneCache:
    """Conversions of Arrow arrays to the evaluators' lanes (numpy arrays, one row per
    array row), made once per array for every worker of a task: the shared pass feeds
    the same batch to many workers, and a worker's carried rows are slices of arrays it
    converted before. An entry is keyed by the array's type and buffer addresses and
    keeps the array alive, so no other array can take those addresses while it is
    cached; a slice of a cached array is served by slicing its lanes. Least recently
    used entries leave beyond ``capacity``. One cache per task (never module-level)."""

    def __init__(self, capacity: int = 64):
        self.capacity = capacity
        self._entries: dict[tuple, tuple[pa.Array, tuple[np.ndarray, ...]]] = {}

    def put(self, array: pa.Array, kind: str, lanes: tuple[np.ndarray, ...]) -> None:
        """Store lanes (one row per array row) as array's conversion of this kind, known
        beforehand (the caller computed them from something cheaper)."""
        if self.capacity > 0:
            self._store(self._key(array, kind), array, lanes)

    def _key(self, array: pa.Array, kind: str) -> tuple:
        return (kind, array.type, tuple(0 if b is None else b.address for b in array.buffers()))

    def _store(self, key: tuple, array: pa.Array, lanes: tuple[np.ndarray, ...]) -> None:
        self._entries.pop(key, None)
        self._entries[key] = (array, lanes)
        while len(self._entries) > self.capacity:
            del self._entries[next(iter(self._entries))]

    def get(self, array: pa.Array, kind: str, convert) -> tuple[np.ndarray, ...]:
        """convert(array) (a tuple of numpy arrays, one row per array row), computed once
        per underlying array; the returned arrays are views the caller must not write."""
        if self.capacity <= 0:
            return convert(array)
        key = self._key(array, kind)
        found = self._entries.pop(key, None)
        if found is not None:
            base, lanes = found
            start = array.offset - base.offset
            if 0 <= start and start + len(array) <= len(base):
                self._entries[key] = found  # most recently used last
                return tuple(lane[start:start + len(array)] for lane in lanes)
        lanes = convert(array)
        self._store(key, array, lanes)
        return lanes

    def fill(self, column, kind: str, convert, values: np.ndarray, nulls: np.ndarray) -> None:
        """Write a (chunked) column's (values, nulls) lanes into the given rows."""
        pos = 0
        for chunk in _chunks(column):
            m = len(chunk)
            if m:
                lane, null = self.get(chunk, kind, convert)
                values[pos:pos + m] = lane
                nulls[pos:pos + m] = null
                pos += m

    def column(self, column, kind: str, convert) -> tuple[np.ndarray, ...]:
        """A (chunked) column's lanes as contiguous arrays."""
        chunks = [c for c in _chunks(column) if len(c)]
        if len(chunks) == 1:
            return tuple(np.ascontiguousarray(a) for a in self.get(chunks[0], kind, convert))
        if not chunks:
            return convert(pa.array([], type=column.type))
        parts = [self.get(c, kind, convert) for c in chunks]
        return tuple(np.concatenate([p[j] for p in parts]) for j in range(len(parts[0])))


_NO_CACHE = LaneCache(0)
_CHANGES = "changes"  # the lane kind of row_changes' flags


def _chunks(column) -> list[pa.Array]:
    return column.chunks if isinstance(column, pa.ChunkedArray) else [column]


def float_lane(col: pa.Array) -> np.ndarray:
    """The double lane (NULL as 0) of a non-string VM column: DOUBLE / BOOLEAN columns
    without NULLs skip the Arrow cast (zero-copy / bit unpacking), others _as_float."""
    if not col.null_count and pa.types.is_float64(col.type):
        return col.to_numpy(zero_copy_only=False)
    if not col.null_count and pa.types.is_boolean(col.type):
        bits = np.unpackbits(np.frombuffer(col.buffers()[1], dtype=np.uint8),
                             bitorder="little")
        return bits[col.offset:col.offset + len(col)].astype(np.float64)
    num = _as_float(col)
    if num.null_count:
        num = pc.fill_null(num, 0.0)
    return np.asarray(num.to_numpy(zero_copy_only=False), dtype=np.float64)


def null_flags(col: pa.Array) -> np.ndarray:
    """uint8 per row: 1 where col is NULL (most columns have none: no is_null kernel
    call then, 20 us of a small call's lanes)."""
    if not col.null_count:
        return np.zeros(len(col), dtype=np.uint8)
    return col.is_null().to_numpy(zero_copy_only=False).astype(np.uint8)


def _float_chunk(col: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The double lane (NULL as 0) and null mask of a non-string VM column."""
    return float_lane(col), null_flags(col)


def _exact_chunk(col: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The 128-bit exact lane (exact_lane) and null mask of a VM column."""
    out = np.zeros((len(col), 2), dtype=np.int64)
    exact_lane(col, out)
    return out, null_flags(col)


def _window_chunk(col: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    return window_micros(col)


def row_changes(col: pa.Array) -> tuple[np.ndarray]:
    """flags[j]: row j is not in row j-1's PARTITION BY group by this column (Spark's
    equality: NaN = NaN; NULL only equals NULL); flags[0] is False."""
    flags = np.zeros(len(col), dtype=bool)
    if len(col) > 1:
        prev, cur = col.slice(0, len(col) - 1), col.slice(1)
        differs = pc.fill_null(spark_compare("<>", prev, cur), False)
        null_flip = pc.xor(pc.is_null(prev), pc.is_null(cur))
        flags[1:] = pc.or_(differs, null_flip).to_numpy(zero_copy_only=False)
    return (flags,)
