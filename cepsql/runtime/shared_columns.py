"""The condition VM columns of every pattern of a shared pass, each input column
converted once (MatchWorker._vm_columns does it per pattern). Runs in tasks, inside the
SharedEvaluator.

Columns are keyed by the input column holding them (the workload's shared layout: one
input column per distinct row-local expression, each pattern naming it its own way),
so a chunk converts each distinct column once (the loader knows them from the start).
String
columns are ranked in ONE sorted dictionary of the chunk's strings and every
pattern's string literals: a superset of each pattern's own dictionary, so ranks
compare (=, <, min/max) exactly as in the pattern's own run."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cepsql.compile.conditions import STR
from cepsql.runtime.worker import sorted_dictionary, exact_lane, float_lane


def pointer_ready(worker) -> bool:
    """Can the worker's matcher read its columns through pointers into the shared
    column set (CepMatcher.use_column_pointers)? Aggregates over columns read the
    run's matrices."""
    c = worker.config
    if len(np.asarray(c.code.aggregates)):
        return False
    maggs = np.asarray(c.measure_aggregates).reshape(-1, 4)
    return bool(np.all(maggs[:, 2] < 0))


class ColumnLoader:
    """Loads the condition VM columns of a shared pass's workers from each chunk. Built
    once per pass: which distinct input columns the workers read (keyed by input column
    name, kind and lane), each worker's slots into them and its string literals; per
    chunk, each distinct column is converted once and every worker gets references."""

    def __init__(self, workers: list, names: list[dict[str, str]] | None = None,
                 pointers: list[bool] | None = None):
        """``names[i]``: worker i's own column name -> the input column holding it (the
        workload's shared layout; None: the workers name the input's columns
        directly). ``pointers[i]`` (see pointer_ready): worker i reads the shared
        column set through pointers instead of its own matrices."""
        index: dict[tuple, int] = {}
        self.keys: list[tuple] = []          # (input column, kind, exact lane)
        self.slots: list[list[int]] = []     # per worker: its VM columns' keys
        literals: set[str] = set()
        for i, w in enumerate(workers):
            code = w.config.code
            rename = names[i] if names is not None else {}
            slots = []
            for c, k, t in zip(code.columns, code.column_kinds, code.column_types):
                key = (rename.get(c, c), k, t.exact)
                if key not in index:
                    index[key] = len(self.keys)
                    self.keys.append(key)
                slots.append(index[key])
            self.slots.append(slots)
            literals |= {text for _, text in code.string_consts}
        self.workers = workers
        self.pointers = pointers if pointers is not None else [False] * len(workers)
        self.literals = sorted(literals)
        self.strings = list(dict.fromkeys(name for name, k, _ in self.keys if k == STR))
        # workers reading the same columns without pointers share one matrix set
        self.layout = [tuple(s) for s in self.slots]
        self.no_nulls = np.zeros(0, dtype=np.uint8)

    def load(self, table: pa.Table) -> list[tuple]:
        """Per worker (values, nulls, consts, exact) as MatchWorker._vm_columns gives
        them; a pointer worker gets (values list, nulls list, consts, exact list): one
        array per VM column (exact: int64[n, 2] for an exact-lane column, else None),
        the same objects for every worker reading that column."""
        n = table.num_rows
        labels = [f"s{i}" for i in range(len(self.strings))]
        dictionary = sorted_dictionary(
            pa.Table.from_arrays([table.column(c) for c in self.strings], names=labels)
            if self.strings else pa.table({}), labels, self.literals)
        # the NULL flags of every column without NULLs this chunk (one array, so a
        # reader can tell "no NULL" by identity)
        self.no_nulls = no_nulls = np.zeros(n, dtype=np.uint8)
        no_values = np.zeros(n, dtype=np.float64)   # an exact-lane column's float lane
        loaded = [_convert(table.column(name), kind, exact, dictionary, no_nulls)
                  for name, kind, exact in self.keys]
        ranks = {text: float(pc.index_in(pa.scalar(text), value_set=dictionary).as_py())
                 for text in self.literals}
        matrices: dict[tuple, tuple] = {}
        out = []
        for w, slots, layout, pointer in zip(self.workers, self.slots, self.layout,
                                             self.pointers):
            code = w.config.code
            consts = code.consts
            if code.string_consts:
                consts = consts.copy()
                for slot, text in code.string_consts:
                    consts[slot] = ranks[text]
            if pointer:
                cols = [loaded[j] for j in slots]
                out.append(([no_values if c[0] is None else c[0] for c in cols],
                            [c[1] for c in cols], consts, [c[2] for c in cols]))
                continue
            if layout not in matrices:
                matrices[layout] = _matrices([loaded[j] for j in slots], n)
            values, nulls, exact = matrices[layout]
            out.append((values, nulls, consts, exact))
        return out


def _convert(col: pa.ChunkedArray, kind: str, exact: bool, dictionary: pa.Array,
             no_nulls: np.ndarray) -> tuple:
    """(float64 values or None, uint8 NULL flags, int64[n, 2] exact words or None) of
    one input column, as the condition VM reads it (strings: ranks in dictionary)."""
    col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    # most columns have no NULL: skip the bitmap conversion and the fill
    nulls = col.is_null().to_numpy(zero_copy_only=False).astype(np.uint8) \
        if col.null_count else no_nulls
    if exact:
        words = np.zeros((len(col), 2), dtype=np.int64)
        exact_lane(col, words)
        return None, nulls, words
    if kind != STR:
        return float_lane(col), nulls, None
    num = pc.index_in(col, value_set=dictionary).cast(pa.float64())
    if num.null_count:
        num = pc.fill_null(num, 0.0)
    return num.to_numpy(zero_copy_only=False), nulls, None


def _matrices(cols: list[tuple], n: int) -> tuple:
    """One worker's own (values, nulls, exact) matrices from its converted columns."""
    k = len(cols)
    values = np.zeros((k, n), dtype=np.float64)
    nulls = np.zeros((k, n), dtype=np.uint8)
    exact = np.zeros((k if any(c[2] is not None for c in cols) else 0, n, 2),
                     dtype=np.int64)
    for j, (vals, nl, words) in enumerate(cols):
        nulls[j] = nl
        if words is not None:
            exact[j] = words
        else:
            values[j] = vals
    return values, nulls, exact

