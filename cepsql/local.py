"""Run a statement with MATCH_RECOGNIZE in-process, without Spark: the clauses run through
the same QueryPlan as on Spark (expressions via Arrow compute), the SQL around them through
sqlglot's Python executor. Meant for small data, notebooks and tests.

Results are pandas DataFrames; integer and boolean columns use pandas' nullable dtypes
(Int8..Int64, UInt.., boolean) so NULLs never turn integers into floats.
"""
from __future__ import annotations

from typing import Callable, Mapping

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .errors import CepAnalysisError, CepError, CepSyntaxError, CepUnsupportedError
from .exprs.arrow_eval import evaluate_arrow
from .runtime.plan import QueryPlan, SortColumn
from .spark.splice import Source, new_view_name, normalize_name, rewrite_text, \
    is_select_star_from

TableLike = pd.DataFrame | pa.Table


def match_recognize(sql: str, **tables: TableLike) -> pd.DataFrame:
    """Result of sql (one query) over the given tables (pandas DataFrames or Arrow tables,
    matched to table names case-insensitively)."""
    return to_pandas(run_local(sql, tables))


def run_local(sql: str, tables: Mapping[str, TableLike], *, finder: Callable | None = None,
              planner: Callable | None = None) -> pa.Table:
    """Result of sql as an Arrow table (finder/planner default to cepsql's own)."""
    if finder is None:
        from .dialect import find_match_recognize as finder
    if planner is None:
        from .runtime.executor import plan_query as planner
    given = {normalize_name(k): to_arrow(v) for k, v in tables.items()}
    generated: dict[str, pa.Table] = {}
    stmt = sql.rstrip().rstrip(";")
    top_sites: list = []

    def find(text: str, *, offset: int = 0, full_sql: str | None = None):
        sites = finder(text, offset=offset, full_sql=full_sql)
        if text is stmt and offset == 0:
            top_sites.extend(sites)
        return sites

    def run_clause(site, source: Source) -> str:
        table = _source_table(source, given, generated, stmt, site)
        plan = planner(site.spec, table.schema, stmt)
        name = new_view_name()
        generated[name] = execute_plan(table, plan)
        return name

    try:
        rewritten = rewrite_text(stmt, run_clause, find, full_sql=stmt)
        if len(top_sites) == 1 and is_select_star_from(stmt, top_sites[0].start, top_sites[0].end):
            return generated[_only_view(rewritten)]
        return run_sqlglot(rewritten, {**given, **generated}, stmt)
    except CepError as e:
        raise e.with_sql(stmt) from None


def _only_view(rewritten: str) -> str:
    start = rewritten.index("`") + 1
    return rewritten[start:rewritten.index("`", start)]


def to_arrow(table: TableLike) -> pa.Table:
    if isinstance(table, pa.Table):
        return table.replace_schema_metadata(None)
    if isinstance(table, pd.DataFrame):
        return pa.Table.from_pandas(table, preserve_index=False).replace_schema_metadata(None)
    raise TypeError(f"expected a pandas DataFrame or a pyarrow Table, got {type(table).__name__}")


_NULLABLE = {
    pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(), pa.int32(): pd.Int32Dtype(),
    pa.int64(): pd.Int64Dtype(), pa.uint8(): pd.UInt8Dtype(), pa.uint16(): pd.UInt16Dtype(),
    pa.uint32(): pd.UInt32Dtype(), pa.uint64(): pd.UInt64Dtype(), pa.bool_(): pd.BooleanDtype(),
}


def to_pandas(table: pa.Table) -> pd.DataFrame:
    """pandas with nullable integer/boolean dtypes (see module docstring)."""
    return table.to_pandas(types_mapper=_NULLABLE.get)


def _source_table(source: Source, given: dict[str, pa.Table], generated: dict[str, pa.Table],
                  stmt: str, site) -> pa.Table:
    if source.sql is not None:
        return run_sqlglot(source.sql, {**given, **generated}, stmt)
    key = normalize_name(source.table or "")
    if key not in given and "." in key:
        key = normalize_name(source.table.split(".")[-1])
    if key not in given:
        raise CepAnalysisError(
            f"unknown table {source.table}: pass it as match_recognize(sql, {key}=...)",
            pos=getattr(site, "source_offset", None))
    return given[key]


def execute_plan(table: pa.Table, plan: QueryPlan, batch_rows: int = 65536) -> pa.Table:
    """The QueryPlan contract, in-process: prepare, bind, sort, stream through the worker,
    project."""
    prepared = table
    for name, expr in plan.prepare_columns:
        prepared = prepared.append_column(name, evaluate_arrow(expr, table))
    bound = plan.bind(prepared.schema)
    keys = [SortColumn(c, True, True) for c in plan.partition_columns] + list(plan.sort_keys)
    ordered = sort_table(prepared, keys).combine_chunks()
    batches = ordered.to_batches(max_chunksize=batch_rows)
    out = pa.Table.from_batches(list(bound.worker(iter(batches))), schema=bound.worker_schema)
    names = [n for n, _ in bound.final_projection]
    return pa.Table.from_arrays([evaluate_arrow(e, out) for _, e in bound.final_projection],
                                names=names)


def sort_table(table: pa.Table, keys: list[SortColumn]) -> pa.Table:
    """Stable multi-key sort with per-key NULL placement; NaN sorts above every number
    (Spark's order)."""
    if not keys or table.num_rows == 0:
        return table
    arrays, sort_keys = [], []
    for key in keys:
        col = table.column(key.column)
        order = "ascending" if key.ascending else "descending"
        arrays.append(pc.is_valid(col) if key.nulls_first else pc.is_null(col))
        sort_keys.append((f"k{len(arrays) - 1}", "ascending"))
        if pa.types.is_floating(col.type):
            arrays.append(pc.fill_null(pc.is_nan(col), False))
            sort_keys.append((f"k{len(arrays) - 1}", order))
        arrays.append(col)
        sort_keys.append((f"k{len(arrays) - 1}", order))
    key_table = pa.Table.from_arrays(arrays, names=[f"k{i}" for i in range(len(arrays))])
    return table.take(pc.sort_indices(key_table, sort_keys=sort_keys))


def run_sqlglot(sql: str, tables: Mapping[str, pa.Table], stmt: str) -> pa.Table:
    """sql (Spark dialect, no MATCH_RECOGNIZE left) over tables with sqlglot's executor."""
    import sqlglot
    from sqlglot.errors import ExecuteError, ParseError
    from sqlglot.executor import execute

    try:
        result = execute(sql, dialect="spark", tables={k: v.to_pylist() for k, v in tables.items()})
    except ParseError as e:
        raise CepSyntaxError(f"cannot parse the SQL around MATCH_RECOGNIZE: {e}", sql=stmt) from None
    except ExecuteError as e:
        raise CepAnalysisError(f"cannot run the SQL around MATCH_RECOGNIZE locally: {e}",
                               sql=stmt) from None
    except (sqlglot.errors.SqlglotError, NotImplementedError, KeyError) as e:
        raise CepUnsupportedError(f"the local executor cannot run this statement: {e!r}",
                                  sql=stmt) from None
    columns = list(zip(*result.rows)) if result.rows else [[] for _ in result.columns]
    return pa.Table.from_arrays([pa.array(list(c)) for c in columns], names=list(result.columns))
