"""A workload of MATCH_RECOGNIZE queries over one Arrow table, in-process: each query
planned alone (its derived columns under its own prefix, so the union of the prepared
columns has no clash), each distinct row-local expression computed once (added under
every name that needs it), the rows prepared once, sorted once, then run by the shared
evaluator or by every pattern's own CepWorker. Used by the tests and the benchmark."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

import pyarrow as pa

from ...exprs.arrow_eval import evaluate_arrow
from .. import cep_plan as cep_plan_module
from ..decompose import DerivedColumns
from ..plan import BoundPlan, QueryPlan


@dataclass
class LocalWorkload:
    queries: list[QueryPlan]
    bounds: list[BoundPlan]
    batches: list[pa.RecordBatch]     # the prepared input, sorted, in batches

    def own_outputs(self) -> list[pa.Table]:
        """Every pattern's worker output from its own CepWorker."""
        return [pa.Table.from_batches(list(b.worker(iter(self.batches))), schema=b.worker_schema)
                for b in self.bounds]

    def shared_outputs(self, plan, chunk_rows: int | None = None) -> list[pa.Table]:
        """Every pattern's worker output from one SharedEvaluator pass."""
        from .evaluator import SharedEvaluator
        kwargs = {} if chunk_rows is None else {"chunk_rows": chunk_rows}
        ev = SharedEvaluator(plan, self.bounds, **kwargs)
        out = ev.run(self.batches)
        self.last_stats = ev.stats
        return [pa.Table.from_batches([b for p, b in out if p == i], schema=bd.worker_schema)
                for i, bd in enumerate(self.bounds)]

    def projected(self, i: int, worker_output: pa.Table) -> pa.Table:
        """Pattern i's result columns from its worker output."""
        proj = self.bounds[i].final_projection
        return pa.Table.from_arrays([evaluate_arrow(e, worker_output) for _, e in proj],
                                    names=[n for n, _ in proj])


def plan_local_workload(specs: list, table: pa.Table, *, batch_rows: int = 65536,
                        statistics: Callable | None = None) -> LocalWorkload:
    """Plan every spec over table (all with the same PARTITION BY / ORDER BY)."""
    from ...backends.local.engine import _sort_for_matching, _table_statistics, global_breaks
    from ..executor import plan_query
    stats = statistics or partial(_table_statistics, table=table)
    queries = []
    original = cep_plan_module.DerivedColumns
    try:
        for i, spec in enumerate(specs):
            cep_plan_module.DerivedColumns = partial(DerivedColumns, prefix=f"__cep_w{i}_d")
            queries.append(plan_query(spec, table.schema, statistics=stats))
    finally:
        cep_plan_module.DerivedColumns = original
    keys = [tuple(k for k in q.sort_keys[:q.primary_sort_keys]) for q in queries]
    if len(set(keys)) > 1:
        raise ValueError("the patterns of a workload must share PARTITION BY and ORDER BY")
    seen: dict[str, object] = {}
    for q in queries:
        for name, expr in q.prepare_columns:
            if seen.setdefault(name, expr) != expr:
                raise ValueError(f"prepared column {name} differs between patterns")
    # the sort keys' columns first; the rest added to the sorted rows, one array per
    # distinct expression (so the shared pass converts it once)
    sort_names = {k.column for k in queries[0].sort_keys}
    prepared = table
    for name, expr in seen.items():
        if name in sort_names:
            prepared = prepared.append_column(name, evaluate_arrow(expr, table))
    breaks = [q for q in queries if q.break_column is not None]
    if breaks:   # STRICT_CONTIGUITY across partitions: one flag column for all
        prepared = prepared.append_column(breaks[0].break_column,
                                          global_breaks(prepared, breaks[0]))
    prepared = _sort_for_matching(prepared, list(queries[0].sort_keys), queries[0])
    prepared = prepared.combine_chunks()
    computed: dict[object, pa.ChunkedArray] = {}
    for name, expr in seen.items():
        if name not in sort_names:
            if expr not in computed:
                computed[expr] = evaluate_arrow(expr, prepared)
            prepared = prepared.append_column(name, computed[expr])
    bounds = [q.bind(prepared.schema) for q in queries]
    batches = prepared.to_batches(max_chunksize=batch_rows)
    return LocalWorkload(queries, bounds, batches)
