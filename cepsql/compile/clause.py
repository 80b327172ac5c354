"""Plan one MATCH_RECOGNIZE clause for execution (driver side).

``plan_query`` checks the clause against the input schema, splits DEFINE conditions
into row-local columns and cross-row bytecode, turns MEASURES into leaves, and returns
the backend-neutral QueryPlan (see plan.py). ``bind`` finishes compilation once the
prepared input's Arrow types are known and returns the picklable worker.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np
import pyarrow as pa

from cepsql.algebra.expressions import (FIELD_ACCESS, SUBSCRIPT, Case, ColumnRef, Expr, FunctionCall,
                                   IsNull, Literal, RowRef, RowValue, children,
                                   walk)
from cepsql.algebra.rowrefs import bind_rows, rebuild
from cepsql.algebra.pattern import Exclusion, walk as walk_pattern
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.analyze.type_check import check_types
from cepsql.errors import CepAnalysisError, CepError
from cepsql.analyze.aggregates import normalize_aggregates, result_type, value_navigation
from cepsql.compile.opcodes import FUNC_CODES, SKIP_CODES
from cepsql.compile.gathered import bind_gathered_all
from cepsql.compile.conditions import compile_conditions
from cepsql.analyze.decompose import DerivedColumns, localize, normalize_define_ref
from cepsql.explain.clause import explain_clause
from cepsql.analyze.measures import MATCH_NUMBER_COLUMN, Leaves, project_measure
from cepsql.analyze.nested import resolve_nested
from cepsql.analyze.subqueries import reject_unbound_subqueries
from cepsql.compile.query_plan import BoundPlan, QueryPlan, SortColumn
from cepsql.planning.options import PlannerOptions, current_options
from cepsql.compile.program import compile_pattern
from cepsql.analyze.rowsets import LabelSets, RefTable
from cepsql.runtime.worker import MatchWorker, WorkerConfig

EMPTY_CODES = {"SHOW_EMPTY": 0, "OMIT_EMPTY": 1, "WITH_UNMATCHED": 2}


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
    if spec.strategy is not None:
        from cepsql.compile.cep import plan_cep
        return plan_cep(spec, schema, options=options, statistics=statistics)
    if spec.window is not None and spec.window.kind == "time" and not spec.order_by:
        raise CepAnalysisError("WITHIN INTERVAL needs an ORDER BY key to measure time")
    spec = _canonical_columns(spec, schema)
    _check_standard_restrictions(spec)
    labels = spec.variables
    sets = LabelSets(labels, dict(spec.subsets))
    known = set(labels) | set(spec.subsets)

    prepare: list[tuple[str, Expr]] = []
    partition_cols = []
    for i, key in enumerate(spec.partition_by):
        partition_cols.append(_column_or_prepared(key.expr, f"__cep_p{i}", prepare))
    sort_keys = [SortColumn(c, True, True) for c in partition_cols]
    order_cols = []
    for i, key in enumerate(spec.order_by):
        col = _column_or_prepared(key.expr, f"__cep_o{i}", prepare)
        order_cols.append(col)
        sort_keys.append(SortColumn(col, key.ascending, key.effective_nulls_first))
    used = set(partition_cols) | set(order_cols)
    for field in schema:
        if field.name not in used and _sortable(field.type):
            sort_keys.append(SortColumn(field.name, True, True))

    derived = DerivedColumns()
    defines = {}
    for var, cond in spec.defines.items():
        cond = normalize_aggregates(value_navigation(cond), derived, final_default=False,
                                    known_vars=known, in_define=True, members=sets.members)
        bound = bind_rows(cond, in_define=True, final_default=False, known_vars=known)
        defines[var] = localize(bound, derived,
                                lambda ref, v=var: normalize_define_ref(ref, v, sets.members))
    leaves = Leaves()
    measures = []
    for m in spec.measures:
        final_default = spec.rows_per_match == "ONE"
        expr = normalize_aggregates(value_navigation(m.expr), derived,
                                    final_default=final_default, known_vars=known,
                                    in_define=False, members=sets.members)
        bound = bind_rows(expr, in_define=False, final_default=final_default, known_vars=known)
        measures.append((m.name, project_measure(bound, leaves)))

    prepare += [(name, expr) for expr, name in derived.columns.items()]
    program = compile_pattern(spec.pattern, labels)
    skip_set = -1
    if spec.after_match_skip.kind in ("TO_FIRST", "TO_LAST"):
        skip_set = sets.set_id(spec.after_match_skip.var)

    input_columns = [f.name for f in schema]

    def bind(prepared: pa.Schema) -> BoundPlan:
        try:
            return _bind(prepared)
        except CepError:
            raise
        except (KeyError, ValueError) as exc:  # schema/type mismatches
            raise CepAnalysisError(str(exc)) from exc

    def _bind(prepared: pa.Schema) -> BoundPlan:
        refs = RefTable(sets)
        agg_columns = [a.column for a in leaves.aggregates if a.column is not None]
        code = compile_conditions(defines, labels, refs, prepared, agg_columns,
                                  ansi=options.ansi)
        agg_vm_column = dict(zip(agg_columns, code.extra_columns))
        agg_specs, agg_fields = [], []
        for i, agg in enumerate(leaves.aggregates):
            arg_type = None if agg.column is None else prepared.field(agg.column).type
            agg_specs.append([sets.set_id(agg.var), FUNC_CODES[agg.func],
                              agg_vm_column.get(agg.column, -1), int(agg.final)])
            if agg.func != "ROWS":
                agg_fields.append(pa.field(f"__cep_a{i}", result_type(agg.func, arg_type)))
        gathered, gathered_fields = bind_gathered_all(leaves, prepared)
        agg_fields += gathered_fields
        full_history = _needs_full_history(refs) or code.reads_other_labels
        leaf_specs, leaf_fields = [], []
        for i, (ref, column) in enumerate(leaves.items):
            kind = 1 if column is None else 0
            leaf_specs.append([sets.set_id(ref.var), 0 if ref.logical == "FIRST" else 1,
                               ref.logical_offset, ref.physical_offset, int(ref.final), kind])
            dtype = pa.string() if column is None else prepared.field(column).type
            leaf_fields.append(pa.field(f"__cep_l{i}", dtype, nullable=True))
        if spec.rows_per_match == "ONE":
            passthrough = list(partition_cols)
        else:
            passthrough = input_columns + [c for c in partition_cols if c not in input_columns]
        fields = [prepared.field(c) for c in passthrough] + leaf_fields + agg_fields
        fields.append(pa.field(MATCH_NUMBER_COLUMN, pa.int64(), nullable=True))
        config = WorkerConfig(
            program=program.ops, n_labels=len(labels), n_slots=program.n_slots,
            labels=labels, code=code, refs=refs.encode(), membership=sets.membership(),
            leaves=np.asarray(leaf_specs, dtype=np.int32).reshape(-1, 6),
            leaf_columns=[c for _, c in leaves.items],
            measure_aggregates=np.asarray(agg_specs, dtype=np.int32).reshape(-1, 4),
            aggregate_columns=[(a.func, a.column) for a in leaves.aggregates],
            skip_mode=SKIP_CODES[spec.after_match_skip.kind], skip_set=skip_set,
            skip_var=spec.after_match_skip.var,
            all_rows=spec.rows_per_match == "ALL",
            empty_mode=EMPTY_CODES[spec.all_rows_option], full_history=full_history,
            partition_columns=partition_cols, passthrough=passthrough,
            max_lookback=_max_lookback(refs.refs + [ref for ref, _ in leaves.items]),
            window_kind=0 if spec.window is None else (1 if spec.window.kind == "rows" else 2),
            window_size=0 if spec.window is None else spec.window.size,
            window_column=order_cols[0] if order_cols else None,
            closure_depth=program.closure_depth,
            sql=sql or None, skip_pos=spec.after_match_skip.pos,
            output_schema=pa.schema(fields), gathered=tuple(gathered))
        return BoundPlan(MatchWorker(config), config.output_schema, projection)

    projection = _final_projection(spec, partition_cols, order_cols, measures, input_columns)
    _check_unique_names(projection, spec)
    primary = len(partition_cols) + len(order_cols)
    explain = explain_clause(spec, defines=defines,
                             derived=[(n, e) for e, n in derived.columns.items()],
                             program_size=len(program), sort_keys=sort_keys,
                             primary_sort_keys=primary)
    return QueryPlan(prepare, partition_cols, sort_keys, bind, primary_sort_keys=primary,
                     explain=explain, spec=spec)


def _check_standard_restrictions(spec: MatchRecognizeSpec) -> None:
    """Constructs SQL:2016 forbids in combination (Trino rejects them too). MATCH_NUMBER()
    in DEFINE is accepted like Trino does: the number the match gets if it succeeds."""
    if spec.rows_per_match == "ALL" and spec.all_rows_option == "WITH_UNMATCHED":
        for node in walk_pattern(spec.pattern):
            if isinstance(node, Exclusion):
                raise CepAnalysisError(
                    "pattern exclusion {- -} cannot be used with ALL ROWS PER MATCH WITH "
                    "UNMATCHED ROWS", pos=node.pos)


def _check_unique_names(projection: list[tuple[str, Expr]], spec: MatchRecognizeSpec) -> None:
    """Output columns must be unambiguous (Spark resolves names case-insensitively)."""
    seen: dict[str, Expr] = {}
    positions = {m.name.lower(): m.pos for m in spec.measures}
    n_keys = _key_column_count(spec)
    for i, (name, expr) in enumerate(projection):
        key = name.lower()
        if key in seen and i < n_keys and seen[key] == expr:
            continue  # a key written twice (ORDER BY id ASC, id DESC): shown per key, like Trino
        if key in seen:
            raise CepAnalysisError(
                f"output column {name} is produced twice (a measure has the name of a "
                "partitioning, ordering or input column); rename the measure",
                pos=positions.get(key))
        seen[key] = expr


def _key_column_count(spec: MatchRecognizeSpec) -> int:
    """How many leading output columns _final_projection takes from PARTITION BY / ORDER BY."""
    n = len(spec.partition_by)
    if spec.rows_per_match == "ALL":
        n += sum(isinstance(k.expr, ColumnRef) for k in spec.order_by)
    return n


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


def _canonical_columns(spec: MatchRecognizeSpec, schema: pa.Schema) -> MatchRecognizeSpec:
    """Resolve column names case-insensitively to the schema's spelling; unknown -> error."""
    by_lower: dict[str, str] = {}
    for f in schema:
        by_lower.setdefault(f.name.lower(), f.name)

    def fix(e: Expr) -> Expr:
        if isinstance(e, ColumnRef):
            name = by_lower.get(e.column.lower())
            if name is None:
                raise CepAnalysisError(f"unknown column {e.column}", pos=e.pos)
            return replace(e, column=name)
        kids = children(e)
        e = rebuild(e, [fix(k) for k in kids]) if kids else e
        if isinstance(e, FunctionCall) and e.name in (FIELD_ACCESS, SUBSCRIPT):
            return resolve_nested(e, schema)
        return e

    return replace(
        spec,
        partition_by=tuple(replace(k, expr=fix(k.expr), name=_fixed_name(k, by_lower))
                           for k in spec.partition_by),
        order_by=tuple(replace(k, expr=fix(k.expr)) for k in spec.order_by),
        measures=tuple(replace(m, expr=fix(m.expr)) for m in spec.measures),
        defines={v: fix(e) for v, e in spec.defines.items()})


def _fixed_name(key, by_lower) -> str:
    if isinstance(key.expr, ColumnRef):
        return by_lower.get(key.expr.column.lower(), key.name)
    return key.name


def _max_lookback(refs: list[RowRef]) -> int:
    """How far before a match's first row any reference can read."""
    return max([-r.physical_offset for r in refs if r.physical_offset < 0] + [0])


def _needs_full_history(refs: RefTable) -> bool:
    """Whether DEFINE can read deeper into a thread's past than first/last rows."""
    return any(r.var is not None and r.logical_offset > 0 for r in refs.refs)


def _sortable(dtype: pa.DataType) -> bool:
    return not (pa.types.is_nested(dtype) or pa.types.is_map(dtype))


__all__ = ["plan_query", "RowRef", "RowValue"]
