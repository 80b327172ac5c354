"""A workload of MATCH_RECOGNIZE queries over one Arrow table, in-process: each query
planned alone (its derived columns under its own prefix, so the union of the prepared
columns has no clash), each distinct row-local expression computed once into one input
column every pattern reads under its own name (as the Spark pass lays out its input),
the rows prepared once, sorted once, then run by the shared
evaluator or by every pattern's own CepWorker. Used by the tests and the benchmark."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

import pyarrow as pa

from cepsql.exprs.arrow_eval import evaluate_arrow
from cepsql.compile import clause as clause_module
from cepsql.analyze.decompose import DerivedColumns
from cepsql.compile.query_plan import BoundPlan, QueryPlan
from cepsql.runtime.workers import bind_worker


@dataclass
class LocalWorkload:
    queries: list[QueryPlan]
    bounds: list[BoundPlan]           # each bound to its own input (own column names)
    batches: list[pa.RecordBatch]     # the prepared input, sorted, in batches
    # per pattern: (input column, its own name) for every column of its own input (the
    # workload's shared pass layout: one input column per distinct expression)
    inputs: list[list[tuple[str, str]]]

    def own_batches(self, i: int) -> list[pa.RecordBatch]:
        """The input batches as pattern i's own worker names them (zero-copy)."""
        cols = self.inputs[i]
        return [pa.RecordBatch.from_arrays([b.column(s) for s, _ in cols],
                                           names=[own for _, own in cols])
                for b in self.batches]

    def own_outputs(self) -> list[pa.Table]:
        """Every pattern's worker output from its own CepWorker."""
        return [pa.Table.from_batches(list(b.worker(iter(self.own_batches(i)))),
                                      schema=b.worker_schema)
                for i, b in enumerate(self.bounds)]

    def evaluator(self, plan, **kwargs):
        """A SharedEvaluator of ``plan`` over this workload's input layout."""
        from cepsql.runtime.shared_evaluator import SharedEvaluator
        return SharedEvaluator(plan, self.bounds, inputs=self.inputs, **kwargs)

    def shared_outputs(self, plan, chunk_rows: int | None = None) -> list[pa.Table]:
        """Every pattern's worker output from one SharedEvaluator pass."""
        kwargs = {} if chunk_rows is None else {"chunk_rows": chunk_rows}
        ev = self.evaluator(plan, **kwargs)
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
    from cepsql.backends.local.engine import sort_for_matching, table_statistics, global_breaks
    from cepsql.compile.clause import plan_query
    stats = statistics or partial(table_statistics, table=table)
    queries = []
    original = clause_module.DerivedColumns
    try:
        for i, spec in enumerate(specs):
            clause_module.DerivedColumns = partial(DerivedColumns, prefix=f"__cep_w{i}_d")
            queries.append(plan_query(spec, table.schema, statistics=stats))
    finally:
        clause_module.DerivedColumns = original
    keys = [tuple(k for k in q.sort_keys[:q.primary_sort_keys]) for q in queries]
    if len(set(keys)) > 1:
        raise ValueError("the patterns of a workload must share PARTITION BY and ORDER BY")
    seen: dict[str, object] = {}
    canonical: dict[object, str] = {}   # one input column per distinct expression
    for q in queries:
        for name, expr in q.prepare_columns:
            if seen.setdefault(name, expr) != expr:
                raise ValueError(f"prepared column {name} differs between patterns")
            canonical.setdefault(expr, name)
    # the sort keys' columns first (queries[0] names them: its names are canonical);
    # the rest added to the sorted rows
    sort_names = {k.column for k in queries[0].sort_keys}
    prepared = table
    for expr, name in canonical.items():
        if name in sort_names:
            prepared = prepared.append_column(name, evaluate_arrow(expr, table))
    breaks = [q for q in queries if q.break_column is not None]
    if breaks:   # STRICT_CONTIGUITY across partitions: one flag column for all
        prepared = prepared.append_column(breaks[0].break_column,
                                          global_breaks(prepared, breaks[0]))
    prepared = sort_for_matching(prepared, list(queries[0].sort_keys), queries[0])
    prepared = prepared.combine_chunks()
    for expr, name in canonical.items():
        if name not in sort_names:
            prepared = prepared.append_column(name, evaluate_arrow(expr, prepared))
    source = [(f.name, f.name) for f in table.schema]
    inputs = [source + [(canonical[expr], own) for own, expr in q.prepare_columns]
              + ([(breaks[0].break_column, q.break_column)] if q.break_column else [])
              for q in queries]
    bounds = [bind_worker(q, pa.schema([pa.field(own, prepared.schema.field(s).type)
                                        for s, own in cols]))
              for q, cols in zip(queries, inputs)]
    batches = prepared.to_batches(max_chunksize=batch_rows)
    return LocalWorkload(queries, bounds, batches, inputs)
