"""The QueryPlan contract packed for table functions: everything one UDTF instance needs
to match the rows of its partition, fixed on the driver (output types included, since a
UDTF's return type must be known before it runs), picklable, no pyspark import.

Inside a UDTF the prepared columns, the sort and the final projection cannot be left to
Spark as in ``run_plan``; they are computed with ``evaluate_arrow`` and cast to the
types the plan was bound with. STRICT_CONTIGUITY with PARTITION BY is rejected here: it
needs each row's neighbour in the whole input (``QueryPlan.break_column``), and an
instance sees only its partition.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import pyarrow as pa

from cepsql.algebra.expressions import Expr
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.errors import CepUnsupportedError
from cepsql.exprs.arrow_eval import evaluate_arrow
from cepsql.compile.clause import plan_query
from cepsql.compile.query_plan import BoundPlan, SortColumn
from cepsql.runtime.workers import bind_worker
from cepsql.runtime.ordering import sort_table

# types of expressions over a schema: (schema, [(name, expr)]) -> one Arrow type each
Typer = Callable[[pa.Schema, Sequence[tuple[str, Expr]]], list[pa.DataType]]


def arrow_typer(schema: pa.Schema, exprs: Sequence[tuple[str, Expr]]) -> list[pa.DataType]:
    """Types as evaluate_arrow produces them (used where no Spark session is at hand,
    i.e. in a UDTF's ``analyze``)."""
    empty = schema.empty_table()
    return [evaluate_arrow(e, empty).type for _, e in exprs]


@dataclass
class TablePlan:
    input_schema: pa.Schema
    prepare_columns: list[tuple[str, Expr]]
    prepared_schema: pa.Schema
    sort_keys: list[SortColumn]
    bound: BoundPlan
    output_schema: pa.Schema
    partition_columns: list[str]


def build_table_plan(spec: MatchRecognizeSpec, input_schema: pa.Schema, *, sql: str = "",
                     typer: Typer = arrow_typer) -> TablePlan:
    """Plan spec over input_schema and bind it; ``typer`` fixes the prepared and output
    column types (the Spark path passes Spark's own typing so results match the clause
    form exactly)."""
    plan = plan_query(spec, input_schema, sql)
    if plan.break_column is not None:
        raise CepUnsupportedError(
            "STRATEGY STRICT_CONTIGUITY with PARTITION BY is not available in the table "
            "function form (cep_match): each function instance sees one partition, not the "
            "next row of the whole input that this strategy needs. Use the MATCH_RECOGNIZE "
            "clause through spark.cep.sql, or STRATEGY PARTITION_CONTIGUITY")
    prepared = input_schema
    for (name, _), dtype in zip(plan.prepare_columns, typer(input_schema, plan.prepare_columns)):
        prepared = prepared.append(pa.field(name, dtype))
    bound = bind_worker(plan, prepared)
    out_types = typer(bound.worker_schema, bound.final_projection)
    output = pa.schema([pa.field(n, t) for (n, _), t in zip(bound.final_projection, out_types)])
    return TablePlan(input_schema, list(plan.prepare_columns), prepared, list(plan.sort_keys),
                     bound, output, list(plan.partition_columns))


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """table's columns selected by name and cast to schema (Spark may hand over e.g.
    another timestamp zone or large string types)."""
    if table.schema.equals(schema):
        return table
    arrays = [table.column(f.name) for f in schema]
    return pa.Table.from_arrays([a if a.type == f.type else a.cast(f.type)
                                 for a, f in zip(arrays, schema)], schema=schema)


def run_table_plan(table: pa.Table, plan: TablePlan, batch_rows: int = 65536) -> pa.Table:
    """Match all rows of ``table`` (any order, any number of PARTITION BY groups):
    prepare, stable sort by the plan's keys (deterministic tie-breakers included),
    stream through the worker, project and cast to ``output_schema``."""
    table = conform(table, plan.input_schema)
    prepared = table
    added = list(plan.prepared_schema)[len(plan.input_schema):]
    for (name, expr), field in zip(plan.prepare_columns, added):
        value = evaluate_arrow(expr, table)
        prepared = prepared.append_column(field, value.cast(field.type))
    keys = [SortColumn(c, True, True) for c in plan.partition_columns] + plan.sort_keys
    ordered = sort_table(prepared, keys).combine_chunks()
    batches = ordered.to_batches(max_chunksize=batch_rows)
    bound = plan.bound
    out = pa.Table.from_batches(list(bound.worker(iter(batches))), schema=bound.worker_schema)
    arrays = [evaluate_arrow(e, out).cast(f.type)
              for (_, e), f in zip(bound.final_projection, plan.output_schema)]
    return pa.Table.from_arrays(arrays, schema=plan.output_schema)
