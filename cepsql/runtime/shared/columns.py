"""The condition VM columns of every pattern of a shared pass, each input column
converted once (MatchWorker._vm_columns does it per pattern).

Columns are told apart by the memory they occupy, not by name (the workload adds a
row-local expression two patterns share once, under each pattern's name). String
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


def load_columns(workers: list, tables: pa.Table | list[pa.Table],
                 pointers: list[bool] | None = None) -> list[tuple]:
    """Per worker (values, nulls, consts, exact) as MatchWorker._vm_columns gives them;
    ``tables``: one table for all, or each worker's own view of the same rows. With
    ``pointers[i]`` (see pointer_ready) worker i gets (values list, nulls list, consts,
    exact list): one array per VM column (exact: int64[n, 2] for an exact-lane column,
    else None), the same objects for every worker reading that column -- no
    per-pattern copy of the chunk's columns."""
    if isinstance(tables, pa.Table):
        tables = [tables] * len(workers)
    n = tables[0].num_rows if tables else 0
    strings: dict[tuple, pa.ChunkedArray] = {}
    literals = set()
    for w, table in zip(workers, tables):
        code = w.config.code
        for c, k in zip(code.columns, code.column_kinds):
            if k == STR:
                col = table.column(c)
                strings.setdefault(_identity(col), col)
        literals |= {s for _, s in code.string_consts}
    names = [f"s{i}" for i in range(len(strings))]
    dictionary = _sorted_dictionary(pa.Table.from_arrays(list(strings.values()), names=names)
                                    if strings else pa.table({}), names, sorted(literals))
    cache: dict[tuple, tuple] = {}
    no_nulls = np.zeros(n, dtype=np.uint8)
    no_values = np.zeros(n, dtype=np.float64)   # an exact-lane column's float lane

    def column(key: tuple, name: str, table: pa.Table) -> tuple:
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
    identity: dict[str, tuple] = {}
    out = []
    for i, (w, table) in enumerate(zip(workers, tables)):
        code = w.config.code
        names = list(code.columns)
        for c in names:
            if (id(table), c) not in identity:
                identity[(id(table), c)] = _identity(table.column(c))
        layout = tuple((identity[(id(table), c)], k, t.exact)
                       for c, k, t in zip(names, code.column_kinds, code.column_types))
        consts = code.consts.copy()
        for slot, text in code.string_consts:
            consts[slot] = ranks[text]
        if pointers is not None and pointers[i]:
            cols = [column(key, name, table) for key, name in zip(layout, names)]
            out.append(([no_values if c[0] is None else c[0] for c in cols],
                        [c[1] for c in cols], consts, [c[2] for c in cols]))
            continue
        if layout not in matrices:
            k = len(layout)
            values = np.zeros((k, n), dtype=np.float64)
            nulls = np.zeros((k, n), dtype=np.uint8)
            any_exact = any(key[2] for key in layout)
            exact = np.zeros((k if any_exact else 0, n, 2), dtype=np.int64)
            for i, (key, name) in enumerate(zip(layout, names)):
                vals, nl, words = column(key, name, table)
                nulls[i] = nl
                if words is not None:
                    exact[i] = words
                else:
                    values[i] = vals
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
