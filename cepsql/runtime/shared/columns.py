"""The condition VM columns of every pattern of a shared pass, each input column
converted once (MatchWorker._vm_columns does it per pattern).

Columns are keyed by the input column holding them (the workload's shared layout: one
input column per distinct row-local expression, each pattern naming it its own way),
so a chunk identifies and converts each distinct column once. String
columns are ranked in ONE sorted dictionary of the chunk's strings and every
pattern's string literals: a superset of each pattern's own dictionary, so ranks
compare (=, <, min/max) exactly as in the pattern's own run."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..conditions import STR
from ..worker import _as_float, _sorted_dictionary, exact_lane


def pointer_ready(worker) -> bool:
    """Can the worker's matcher read its columns through pointers into the shared
    column set (CepMatcher.use_column_pointers)? Aggregates over columns read the
    run's matrices."""
    c = worker.config
    if len(np.asarray(c.code.aggregates)):
        return False
    maggs = np.asarray(c.measure_aggregates).reshape(-1, 4)
    return bool(np.all(maggs[:, 2] < 0))


def load_columns(workers: list, table: pa.Table,
                 names: list[dict[str, str]] | None = None,
                 pointers: list[bool] | None = None) -> list[tuple]:
    """Per worker (values, nulls, consts, exact) as MatchWorker._vm_columns gives them,
    every distinct input column converted once. ``names[i]``: worker i's own column
    name -> the input column of ``table`` holding it (the workload's shared layout);
    None: the workers name ``table``'s columns directly (then columns holding the same
    memory under two names are told apart by _identity). With ``pointers[i]`` (see
    pointer_ready) worker i gets (values list, nulls list, consts, exact list): one
    array per VM column (exact: int64[n, 2] for an exact-lane column, else None), the
    same objects for every worker reading that column -- no per-pattern copy of the
    chunk's columns."""
    n = table.num_rows
    if names is None:   # key by memory: two names may hold one array
        ids: dict[str, tuple] = {}

        def source(_i: int, own: str) -> tuple:
            if own not in ids:
                ids[own] = _identity(table.column(own))
            return ids[own], own
    else:
        def source(i: int, own: str) -> tuple:
            name = names[i].get(own, own)
            return name, name
    sources = [[source(i, c) for c in w.config.code.columns] for i, w in enumerate(workers)]
    strings: dict[tuple, pa.ChunkedArray] = {}
    literals = set()
    for w, cols in zip(workers, sources):
        code = w.config.code
        for (key, name), k in zip(cols, code.column_kinds):
            if k == STR and key not in strings:
                strings[key] = table.column(name)
        literals |= {s for _, s in code.string_consts}
    labels = [f"s{i}" for i in range(len(strings))]
    dictionary = _sorted_dictionary(pa.Table.from_arrays(list(strings.values()), names=labels)
                                    if strings else pa.table({}), labels, sorted(literals))
    cache: dict[tuple, tuple] = {}
    no_nulls = np.zeros(n, dtype=np.uint8)
    no_values = np.zeros(n, dtype=np.float64)   # an exact-lane column's float lane

    def column(key: tuple, name: str) -> tuple:
        if key not in cache:
            col = table.column(name).combine_chunks()
            # most columns have no NULL: skip the bitmap conversion and the fill
            nulls = col.is_null().to_numpy(zero_copy_only=False).astype(np.uint8) \
                if col.null_count else no_nulls
            if key[2]:
                words = np.zeros((n, 2), dtype=np.int64)
                exact_lane(col, words)
                cache[key] = (None, nulls, words)
            else:
                num = pc.index_in(col, value_set=dictionary).cast(pa.float64()) \
                    if key[1] == STR else _as_float(col)
                if num.null_count:
                    num = pc.fill_null(num, 0.0)
                cache[key] = (num.to_numpy(zero_copy_only=False), nulls, None)
        return cache[key]

    ranks = {text: float(pc.index_in(pa.scalar(text), value_set=dictionary).as_py())
             for text in literals}
    matrices: dict[tuple, tuple] = {}   # patterns reading the same columns share them
    out = []
    for i, (w, cols) in enumerate(zip(workers, sources)):
        code = w.config.code
        names_i = [name for _, name in cols]
        layout = tuple((key, k, t.exact)
                       for (key, _), k, t in zip(cols, code.column_kinds, code.column_types))
        consts = code.consts.copy()
        for slot, text in code.string_consts:
            consts[slot] = ranks[text]
        if pointers is not None and pointers[i]:
            cols = [column(key, name) for key, name in zip(layout, names_i)]
            out.append(([no_values if c[0] is None else c[0] for c in cols],
                        [c[1] for c in cols], consts, [c[2] for c in cols]))
            continue
        if layout not in matrices:
            k = len(layout)
            values = np.zeros((k, n), dtype=np.float64)
            nulls = np.zeros((k, n), dtype=np.uint8)
            any_exact = any(key[2] for key in layout)
            exact = np.zeros((k if any_exact else 0, n, 2), dtype=np.int64)
            for j, (key, name) in enumerate(zip(layout, names_i)):
                vals, nl, words = column(key, name)
                nulls[j] = nl
                if words is not None:
                    exact[j] = words
                else:
                    values[j] = vals
            matrices[layout] = (values, nulls, exact)
        values, nulls, exact = matrices[layout]
        out.append((values, nulls, consts, exact))
    return out


def _identity(col: pa.ChunkedArray) -> tuple:
    """The memory a column's values live in (the table keeps it alive, so no other
    column can share it): columns added twice under two names (the same row-local
    expression of two patterns) are converted once."""
    return (str(col.type),) + tuple(
        (chunk.offset, len(chunk)) + tuple(b.address if b is not None else 0
                                           for b in chunk.buffers())
        for chunk in col.chunks)
