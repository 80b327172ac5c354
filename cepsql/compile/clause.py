"""The clause skeleton: plan one MATCH_RECOGNIZE clause for execution (driver side).

``plan_query`` checks the clause against the input schema and lays out what both modes
share: the PARTITION BY / ORDER BY keys as prepared columns, the sort keys, MEASURES as
leaves and aggregates, the final projection and the bind step. DEFINE and the pattern
program are the mode's (``compile.sql`` for SQL:2016 mode, ``compile.cep`` for CEP mode,
both ``clause_parts.ModeCompiler``). The result is the backend-neutral QueryPlan
(``query_plan``); its ``bind`` finishes compilation once the prepared input's Arrow
types are known and returns the BoundPlan carrying the worker's configuration.
"""
from __future__ import annotations

from functools import partial
from typing import Callable

import numpy as np
import pyarrow as pa

from cepsql.algebra.expressions import (Case, ColumnRef, Expr,
                                        IsNull, Literal, RowRef, RowValue,
                                        walk)
from cepsql.algebra.pattern import Exclusion
from cepsql.algebra.pattern import walk as walk_pattern
from cepsql.algebra.rowrefs import bind_rows
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.analyze.aggregate_functions import result_type
from cepsql.compile.opcodes import FUNC_CODES
from cepsql.analyze.aggregates import normalize_aggregates, value_navigation
from cepsql.analyze.columns import canonical_columns
from cepsql.analyze.decompose import DerivedColumns
from cepsql.analyze.measures import MATCH_NUMBER_COLUMN, project_measure
from cepsql.analyze.partition_inference import visible_partitions
from cepsql.analyze.rowsets import RefTable
from cepsql.analyze.subqueries import reject_unbound_subqueries
from cepsql.analyze.type_check import check_types
from cepsql.compile.cep import CepMode
from cepsql.compile.clause_parts import BoundOutput, Clause, ModeCompiler, sortable
from cepsql.compile.conditions import compile_conditions
from cepsql.compile.gathered import bind_gathered_all
from cepsql.compile.query_plan import BoundPlan, QueryPlan, SortColumn
from cepsql.compile.sql import SqlMode
from cepsql.errors import CepAnalysisError, CepError
from cepsql.planning.options import PlannerOptions, current_options


def plan_query(spec: MatchRecognizeSpec, input_schema: pa.Schema, sql: str = "", *,
               options: PlannerOptions | None = None,
               statistics: Callable[[MatchRecognizeSpec], object] | None = None) -> QueryPlan:
    """Plan ``spec`` over an input with ``input_schema``; errors carry positions in sql.

    CEP-mode clauses are planned cost-based: ``statistics(spec)`` (called only when a plan
    choice needs it) returns the input's PatternStatistics; ``options`` default to the
    in-process ``current_options()``."""
    try:
        return _plan(spec, input_schema, options or current_options(), statistics, sql)
    except CepError as err:
        raise err.with_sql(sql) if sql else err


def _plan(spec: MatchRecognizeSpec, schema: pa.Schema, options: PlannerOptions,
          statistics, sql: str = "") -> QueryPlan:
    reject_unbound_subqueries(spec)
    check_types(spec, schema)
    mode: ModeCompiler = SqlMode() if spec.strategy is None else CepMode(options, statistics)
    spec = _checked(spec, schema, mode)
    clause = _laid_out(spec, schema, options, sql)
    conditions = mode.conditions(clause)
    _add_measures(clause)
    clause.prepare += [(name, expr) for expr, name in clause.derived.columns.items()]
    mode.program(clause)
    visible, visible_keys = visible_partitions(spec, clause.partition_columns)
    projection = _final_projection(visible, visible_keys, clause.order_columns,
                                   clause.measures, clause.input_columns)
    bind = partial(_bind, mode, clause, conditions, projection)
    return QueryPlan(clause.prepare, clause.partition_columns, clause.sort_keys, bind,
                     primary_sort_keys=clause.primary_sort_keys, spec=spec,
                     **mode.plan_fields(clause))


def _checked(spec: MatchRecognizeSpec, schema: pa.Schema,
             mode: ModeCompiler) -> MatchRecognizeSpec:
    """The clause checked and in canonical form: the mode's rules first, column names as
    the schema spells them, then the mode's rewrites (CEP: inferred partition keys)."""
    mode.check(spec)
    if spec.window is not None and spec.window.kind == "time" and not spec.order_by:
        raise CepAnalysisError("WITHIN INTERVAL needs an ORDER BY key to measure time",
                               pos=spec.window.pos)
    spec = canonical_columns(spec, schema)
    _check_standard_restrictions(spec)
    return mode.shape(spec, schema)


def _laid_out(spec: MatchRecognizeSpec, schema: pa.Schema, options: PlannerOptions,
              sql: str) -> Clause:
    """The keys as columns of the prepared input, and the sort: PARTITION BY, ORDER BY,
    then every other sortable input column to break ties (a deterministic order)."""
    prepare: list[tuple[str, Expr]] = []
    partition_cols = [_column_or_prepared(k.expr, f"__cep_p{i}", prepare)
                      for i, k in enumerate(spec.partition_by)]
    sort_keys = [SortColumn(c, True, True) for c in partition_cols]
    order_cols = []
    for i, key in enumerate(spec.order_by):
        col = _column_or_prepared(key.expr, f"__cep_o{i}", prepare)
        order_cols.append(col)
        sort_keys.append(SortColumn(col, key.ascending, key.effective_nulls_first))
    used = set(partition_cols) | set(order_cols)
    sort_keys += [SortColumn(f.name, True, True) for f in schema
                  if f.name not in used and sortable(f.type)]
    return Clause(spec, schema, options, sql, prepare, partition_cols, order_cols, sort_keys,
                  derived=DerivedColumns())


def _add_measures(clause: Clause) -> None:
    """MEASURES over leaf columns (row reads) and aggregates the worker outputs."""
    final_default = clause.spec.rows_per_match == "ONE"
    sets = clause.sets
    for m in clause.spec.measures:
        expr = normalize_aggregates(value_navigation(m.expr), clause.derived,
                                    final_default=final_default, known_vars=clause.known,
                                    in_define=False, members=sets.members)
        bound = bind_rows(expr, in_define=False, final_default=final_default,
                          known_vars=clause.known)
        clause.measures.append((m.name, project_measure(bound, clause.leaves)))


def _bind(mode: ModeCompiler, clause: Clause, conditions: tuple[dict[str, Expr], list[str]],
          projection: list[tuple[str, Expr]], prepared: pa.Schema) -> BoundPlan:
    """QueryPlan.bind: the mode's worker configuration for the prepared input's types."""
    try:
        config = mode.config(clause, _bound_output(clause, conditions, prepared))
    except CepError:
        raise
    except (KeyError, ValueError) as exc:  # schema/type mismatches
        raise CepAnalysisError(str(exc)) from exc
    return BoundPlan(config, config.output_schema, projection)


def _bound_output(clause: Clause, conditions: tuple[dict[str, Expr], list[str]],
                  prepared: pa.Schema) -> BoundOutput:
    """The conditions compiled for the condition VM, and the measures' leaves and
    aggregates with the worker's output schema."""
    leaves, sets = clause.leaves, clause.sets
    refs = RefTable(sets)
    agg_columns = [a.column for a in leaves.aggregates if a.column is not None]
    named, names = conditions
    code = compile_conditions(named, names, refs, prepared, agg_columns,
                              ansi=clause.options.ansi)
    agg_vm_column = dict(zip(agg_columns, code.extra_columns))
    agg_specs, agg_fields = [], []
    for i, agg in enumerate(leaves.aggregates):
        arg_type = None if agg.column is None else prepared.field(agg.column).type
        agg_specs.append([sets.set_id(agg.var), FUNC_CODES[agg.func],
                          agg_vm_column.get(agg.column, -1), int(agg.final)])
        if agg.func != "ROWS":  # a gathered aggregate's row list has no column
            agg_fields.append(pa.field(f"__cep_a{i}", result_type(agg.func, arg_type)))
    gathered, gathered_fields = bind_gathered_all(leaves, prepared)
    leaf_specs, leaf_fields = [], []
    for i, (ref, column) in enumerate(leaves.items):
        leaf_specs.append([sets.set_id(ref.var), 0 if ref.logical == "FIRST" else 1,
                           ref.logical_offset, ref.physical_offset, int(ref.final),
                           1 if column is None else 0])
        dtype = pa.string() if column is None else prepared.field(column).type
        leaf_fields.append(pa.field(f"__cep_l{i}", dtype, nullable=True))
    passthrough = _passthrough(clause)
    fields = [prepared.field(c) for c in passthrough] + leaf_fields + agg_fields \
        + gathered_fields + [pa.field(MATCH_NUMBER_COLUMN, pa.int64(), nullable=True)]
    return BoundOutput(
        code=code, refs=refs, leaves=np.asarray(leaf_specs, dtype=np.int32).reshape(-1, 6),
        leaf_columns=[c for _, c in leaves.items],
        measure_aggregates=np.asarray(agg_specs, dtype=np.int32).reshape(-1, 4),
        aggregate_columns=[(a.func, a.column) for a in leaves.aggregates],
        gathered=tuple(gathered), passthrough=passthrough, output_schema=pa.schema(fields))


def _passthrough(clause: Clause) -> list[str]:
    """Input columns every output row carries: the keys (ONE ROW PER MATCH), or every
    input column and then the computed keys (ALL ROWS PER MATCH)."""
    keys = clause.partition_columns
    if clause.spec.rows_per_match == "ONE":
        return list(keys)
    inputs = clause.input_columns
    return inputs + [c for c in keys if c not in inputs]


def _check_standard_restrictions(spec: MatchRecognizeSpec) -> None:
    """Constructs SQL:2016 forbids in combination (Trino rejects them too). MATCH_NUMBER()
    in DEFINE is accepted like Trino does: the number the match gets if it succeeds."""
    if spec.rows_per_match == "ONE" and not spec.partition_by and not spec.measures:
        raise CepAnalysisError(  # Trino: TABLE_HAS_NO_COLUMNS
            "ONE ROW PER MATCH with neither PARTITION BY nor MEASURES has no output columns; "
            "add MEASURES (e.g. MATCH_NUMBER() AS match) or ALL ROWS PER MATCH",
            pos=spec.output_pos)
    if spec.rows_per_match == "ALL" and spec.all_rows_option == "WITH_UNMATCHED":
        for node in walk_pattern(spec.pattern):
            if isinstance(node, Exclusion):
                raise CepAnalysisError(
                    "pattern exclusion {- -} cannot be used with ALL ROWS PER MATCH WITH "
                    "UNMATCHED ROWS", pos=node.pos)


def _final_projection(spec, partition_cols, order_cols, measures, input_columns):
    out: list[tuple[str, Expr]] = []
    for key, col in zip(spec.partition_by, partition_cols):
        out.append((key.name, ColumnRef(None, col)))
    if spec.rows_per_match == "ALL":
        for key, col in zip(spec.order_by, order_cols):
            if isinstance(key.expr, ColumnRef):
                out.append((col, ColumnRef(None, col)))
    if spec.rows_per_match == "ALL" and spec.all_rows_option == "WITH_UNMATCHED":
        # unmatched rows carry null measures, whatever the expression would make of nulls
        unmatched = IsNull(ColumnRef(None, MATCH_NUMBER_COLUMN))
        measures = [(name, Case(None, ((unmatched, Literal(None, "null")),), expr))
                    for name, expr in measures]
    out += measures
    if spec.rows_per_match == "ALL":
        shown = {c.lower() for c in partition_cols} | {
            c.lower() for k, c in zip(spec.order_by, order_cols) if isinstance(k.expr, ColumnRef)}
        out += [(c, ColumnRef(None, c)) for c in input_columns if c.lower() not in shown]
    return out


def _column_or_prepared(expr: Expr, name: str, prepare: list) -> str:
    """A PARTITION BY / ORDER BY item as a column of the prepared input."""
    if isinstance(expr, ColumnRef):
        if expr.var is not None:
            raise CepAnalysisError("PARTITION BY / ORDER BY must not use pattern variables",
                                   pos=expr.pos)
        return expr.column
    for node in walk(expr):
        if not isinstance(node, ColumnRef) and type(node).__name__ in (
                "Navigation", "Classifier", "MatchNumber", "Aggregate"):
            raise CepAnalysisError("PARTITION BY / ORDER BY must be row expressions",
                                   pos=getattr(node, "pos", None))
    prepare.append((name, expr))
    return name


__all__ = ["plan_query", "RowRef", "RowValue"]
