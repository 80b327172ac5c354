"""Run a statement with MATCH_RECOGNIZE in-process, without Spark: the clauses run through
the same QueryPlan as on Spark (expressions via Arrow compute, the partitions' evaluators on
all cores: backends/local/threads.py), the SQL around them through ``sql.py``, our
vectorised evaluator of a subset of Spark SQL, and what lies outside that subset (joins,
window functions, subqueries, ...) on DuckDB with Spark's semantics (backends/local/duck.py,
whose docstring lists the differences fixed). Nothing derived from the SQL text is ever
passed to eval/exec.

Results are pandas DataFrames; integer and boolean columns use pandas' nullable dtypes
(Int8..Int64, UInt.., boolean) so NULLs never turn integers into floats.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import time
from collections import ChainMap
from functools import partial
from typing import Callable, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from cepsql.errors import CepAnalysisError, CepError, CepUnsupportedError
from cepsql.parse import find_match_recognize
from cepsql.parse.splice import is_select_star_from, normalize_name, strip_parens
from cepsql.parse.statements import clause_output_names
from cepsql.algebra.expressions import ColumnRef
from cepsql.exprs.arrow_eval import evaluate_arrow, spark_compare
from cepsql.exprs.spark_sql import quote_identifier
from cepsql.analyze.subqueries import arrow_constant, bind_subqueries
from cepsql.stats import CACHE
from cepsql.planning.options import current_options
from cepsql.compile.clause import plan_query
from cepsql.compile.query_plan import QueryPlan, SortColumn
from cepsql.runtime.error_position import located_run_error
from cepsql.runtime.ordering import comparable, sort_indices
from cepsql.runtime.run_stats import ClauseStatistics, GroupSizes, PositionalCounts, RunStatistics
from cepsql.runtime.workers import BoundWorker, bind_worker
from cepsql.backends.local.duck import run_duckdb
from cepsql.backends.local.plan_cache import PLANS, CachedPlan, SchemaKey, StatisticsProbe
from cepsql.backends.local.sequence import sequence_shape
from cepsql.backends.local.sql import OutsideSubset, Scope, Virtual, run_sql, unsupported
from cepsql.backends.local.threads import (RANK_COLUMN, KnownEncodings, partition_ranks,
                                           run_by_partition, run_worker)

__all__ = ["match_recognize", "run_local", "plan_local", "execute_plan", "to_arrow", "to_pandas"]

TableLike = pd.DataFrame | pa.Table
_placeholders = itertools.count(1)


def match_recognize(sql: str, **tables: TableLike) -> pd.DataFrame:
    """Result of sql (one query) over the given tables (pandas DataFrames or Arrow tables,
    matched to table names case-insensitively)."""
    # PARTITION BY string columns factorized on the way, for the ranks
    encodings = KnownEncodings(_partition_key_columns(sql))
    arrow = {k: to_arrow(v, encodings) for k, v in tables.items()}
    out = run_local(sql, arrow, encodings=encodings)
    return to_pandas(out)


def _partition_key_columns(sql: str) -> set[str]:
    """The lower-case names of the plain columns the statement's clauses PARTITION BY
    (none when it does not parse: run_local reports that, located)."""
    stmt = sql.rstrip().rstrip(";")
    try:
        sites = _parsed(stmt, offset=0, full_sql=stmt)
    except CepError:
        return set()
    return {key.expr.column.lower() for site in sites for key in site.spec.partition_by
            if isinstance(key.expr, ColumnRef)}


def run_local(sql: str, tables: Mapping[str, TableLike], *, finder: Callable | None = None,
              planner: Callable | None = None,
              stats: RunStatistics | None = None,
              encodings: KnownEncodings | None = None) -> pa.Table:
    """Result of sql as an Arrow table (finder/planner default to cepsql's own). With
    stats, each MATCH_RECOGNIZE clause run adds its evaluator's counters there (partial
    matches, runs, peak rows held, ...: runtime/run_stats.py). encodings: dictionary
    encodings of the tables' columns known from their conversion (to_arrow)."""
    outer = _parsed if finder is None else finder
    finder = finder or find_match_recognize
    planner = planner or plan_query
    stmt = sql.rstrip().rstrip(";")
    scope = Scope({normalize_name(k): to_arrow(v) for k, v in tables.items()})
    run = LocalStatement(stmt, finder, planner, stats, encodings)
    try:
        sites = outer(stmt, offset=0, full_sql=stmt)
        if len(sites) == 1 and _select_star(stmt, sites[0].start, sites[0].end):
            return run.clause(sites[0], scope)  # fast path: no SQL around the clause
        return run.query(stmt, 0, scope, sites)
    except CepError as e:
        raise e.with_sql(stmt) from None


def plan_local(sql: str, tables: Mapping[str, TableLike], *,
               planner: Callable | None = None) -> list[tuple[object, QueryPlan]]:
    """(spec, QueryPlan) of each outermost clause of sql over the tables, without running
    the clauses (their sources' SQL runs: a clause is planned over its input's schema and
    statistics). For EXPLAIN in-process."""
    stmt = sql.rstrip().rstrip(";")
    scope = Scope({normalize_name(k): to_arrow(v) for k, v in tables.items()})
    run = LocalStatement(stmt, find_match_recognize, planner or plan_query)
    try:
        plans = [run.plan(site, run.source(site, scope), scope)
                 for site in _parsed(stmt, offset=0, full_sql=stmt)]
        return [(cached.spec, cached.plan) for cached in plans]
    except CepError as e:
        raise e.with_sql(stmt) from None


@functools.lru_cache(maxsize=128)
def _parsed(stmt: str, *, offset: int, full_sql: str) -> tuple:
    """The statement's MATCH_RECOGNIZE clauses, parsed once per statement text (a query
    run every minute is parsed once; the sites are never modified)."""
    return tuple(find_match_recognize(stmt, offset=offset, full_sql=full_sql))


@functools.lru_cache(maxsize=128)
def _select_star(stmt: str, start: int, end: int) -> bool:
    """is_select_star_from, once per statement text like _parsed (it scans the text:
    15 us of a small call)."""
    return is_select_star_from(stmt, start, end)


class LocalStatement:
    """One statement on the in-process path. Each query text has its MATCH_RECOGNIZE
    clauses masked by placeholder names (padded to the clause's length, so every position
    in the masked text is a position in the statement); sql.py evaluates the rest and
    runs a clause when it reads its placeholder, in the scope of that point (so a CTE name
    as the clause's source resolves like any table name)."""

    def __init__(self, stmt: str, finder: Callable, planner: Callable,
                 stats: RunStatistics | None = None,
                 encodings: KnownEncodings | None = None):
        self.stmt, self.finder, self.planner = stmt, finder, planner
        self.stats = stats
        self.encodings = encodings
        self.done: dict[tuple[int, int], tuple[pa.Table, pa.Table]] = {}

    def query(self, text: str, offset: int, scope: Scope, sites: list | None = None
              ) -> pa.Table:
        """Result of the query text starting at offset in the statement."""
        if sites is None:
            sites = self.finder(text, offset=offset, full_sql=self.stmt)
        parts, cursor, virtual = [], 0, {}
        for site in sorted(sites, key=lambda s: s.start):
            lo, hi = site.start - offset, site.end - offset
            name = f"#cep{next(_placeholders)}"
            token = quote_identifier(name)
            if len(token) > hi - lo:  # cannot happen: a clause is longer than its name
                raise CepUnsupportedError("MATCH_RECOGNIZE clause too short", pos=site.start)
            parts += [text[cursor:lo], token.ljust(hi - lo)]
            cursor = hi
            alias = None if site.alias is None else normalize_name(site.alias)
            virtual[name] = Virtual(partial(self.clause, site), alias)
        parts.append(text[cursor:])
        masked, scope = "".join(parts), scope.with_virtual(virtual)
        try:
            return run_sql(masked, scope, base=offset)
        except OutsideSubset as outside:
            return self.on_duckdb(masked, offset, scope, outside)

    def on_duckdb(self, masked: str, offset: int, scope: Scope, outside: OutsideSubset
                  ) -> pa.Table:
        """The query outside sql.py's subset, on DuckDB (a clause whose source is one of
        the query's own WITH names reads it from DuckDB). When DuckDB cannot run it
        either, the subset error says where and why."""
        def lookup(parts, written, pos, ctes):
            inner = dataclasses.replace(scope, ctes=ChainMap(ctes, scope.ctes))
            return inner.lookup(parts, written, pos)
        try:
            return run_duckdb(masked, lookup, base=offset)
        except CepAnalysisError as err:
            if not err.message.startswith("DuckDB cannot run"):
                raise
            raise type(outside)(f"{outside.message} (DuckDB: {err.message})",
                                pos=outside.pos) from None

    def clause(self, site, scope: Scope) -> pa.Table:
        """One clause's result: its source's rows through the QueryPlan (computed once per
        source table: a query that falls back to DuckDB may have run it already)."""
        table = self.source(site, scope)
        key = (site.start, id(table))
        if key not in self.done:
            self.done[key] = (table, self.run_clause(site, table, scope))
        return self.done[key][1]

    def run_clause(self, site, table: pa.Table, scope: Scope) -> pa.Table:
        cached = self.plan(site, table, scope)
        try:
            out = execute_plan(table, cached.plan, stats=None if self.stats is None
                               else self.stats.clause(site.start), binder=cached.bind,
                               encodings=self.encodings)
        except CepError as err:
            raise located_run_error(err, cached.spec, self.stmt) from None
        try:
            return out.rename_columns(clause_output_names(site, out.schema.names))
        except CepError as err:
            raise err.with_sql(self.stmt) from None

    def plan(self, site, table: pa.Table, scope: Scope) -> CachedPlan:
        """The clause's plan over table: from PLANS when this statement's clause was
        planned for the same schema, options and planner (plan_cache.py says which plans
        are kept)."""
        key = (self.stmt, site.start, SchemaKey(table.schema), current_options(),
               self.planner)
        cached = PLANS.get(key)
        if cached is not None:
            return cached
        spec = bind_subqueries(site.spec, partial(self.scalar, scope=scope))
        statistics = StatisticsProbe(partial(table_statistics, table=table))
        try:
            cached = CachedPlan(spec, self.planner(spec, table.schema, self.stmt,
                                                   statistics=statistics))
        finally:
            statistics.release()
        if not statistics.asked and spec is site.spec:
            PLANS.put(key, cached)
        return cached

    def scalar(self, sub, scope: Scope) -> tuple[list[str | None], str]:
        """An uncorrelated scalar subquery, run by the local SQL engine in the clause's
        scope (its errors point at the subquery)."""
        try:
            return arrow_constant(self.query(sub.sql, 0, scope))
        except CepError as err:
            raise type(err)(f"in the scalar subquery: {err.message} (only uncorrelated "
                            "scalar subqueries are supported)", sql=self.stmt,
                            pos=sub.pos) from None

    def source(self, site, scope: Scope) -> pa.Table:
        if site.source_is_query:
            inner, shift = strip_parens(site.source_text)
            return self.query(inner, site.source_offset + shift, scope)
        name = site.source_text.strip()
        if "(" in name:
            raise unsupported(f"the table-valued function {name} as a MATCH_RECOGNIZE source",
                              site.source_offset)
        parts = [normalize_name(p) for p in _split_dotted(name)]
        return scope.lookup(parts, name, site.source_offset)[0]


def table_statistics(spec, table: pa.Table):
    """Statistics of spec over an in-process input (cached per table object)."""
    opts = current_options()
    return CACHE.get_or_estimate(spec, table, sample_rows=opts.sample_rows,
                                 time_budget_s=opts.sample_seconds)


def _split_dotted(name: str) -> list[str]:
    """Parts of a dotted name, keeping dots inside backquotes."""
    parts, current, quoted = [], "", False
    for ch in name:
        if ch == "`":
            quoted = not quoted
        if ch == "." and not quoted:
            parts.append(current)
            current = ""
        else:
            current += ch
    return parts + [current]


def to_arrow(table: TableLike, encodings: KnownEncodings | None = None) -> pa.Table:
    """table as Arrow (pandas frames converted as from_pandas converts them, without the
    index); with encodings, the string columns it wants are factorized on the way and
    their dictionary encodings noted there."""
    if isinstance(table, pa.Table):
        # the same object when possible: statistics are cached per input table object
        return table if table.schema.metadata is None else table.replace_schema_metadata(None)
    if isinstance(table, pd.DataFrame):
        if _plain_columns(table):
            # what from_pandas does per column (pa.array(column, from_pandas=True)),
            # without its pandas metadata, which is dropped anyway (0.1 of 0.3 ms at
            # 3,000 rows and 4 columns)
            return pa.Table.from_arrays([_column_to_arrow(column, encodings
                                                          if encodings is not None
                                                          and encodings.wants(name)
                                                          else None)
                                         for name, column in table.items()],
                                        names=list(table.columns))
        # one thread: pyarrow's pool costs a millisecond to start and saves nothing here
        # (1M ticks: the same time; strings are converted under the GIL)
        return pa.Table.from_pandas(table, preserve_index=False, nthreads=1
                                    ).replace_schema_metadata(None)
    raise TypeError(f"expected a pandas DataFrame or a pyarrow Table, got {type(table).__name__}")


def _column_to_arrow(column: pd.Series, encodings: KnownEncodings | None) -> pa.Array:
    """pa.array(column, from_pandas=True); with encodings, an object column of strings
    without missing values goes through pandas' factorize instead, its encoding noted
    there (a PARTITION BY column: as fast for few distinct values, and its codes spare
    partition_ranks a second hashing pass; 4x slower for all-distinct values, hence only
    the keys)."""
    dtype = column.dtype
    if encodings is not None and dtype == object and len(column):
        factorized = _factorized(column.to_numpy())
        if factorized is not None:
            encodings.add(*factorized)
            return factorized[0]
    if isinstance(dtype, np.dtype) and dtype.kind in _NUMPY_KINDS:
        # what pa.array does with the Series, minus its pandas checks (3,000 doubles:
        # 3 instead of 24 us); floats without a NaN have no NULL to find, and are taken
        # as they are (1M doubles: 0.4 ms to check against 2.5 to look for NULLs;
        # datetimes are scanned for NaT either way)
        values = column.to_numpy()
        return pa.array(values, from_pandas=dtype.kind != "f" or bool(np.isnan(values).any()))
    return pa.array(column, from_pandas=True)


# numpy dtypes whose pandas Series converts as its ndarray does: booleans, integers,
# floats, datetime64 and timedelta64 (objects, strings and extension dtypes do not)
_NUMPY_KINDS = frozenset("biufmM")


def _factorized(values: np.ndarray) -> tuple[pa.Array, pa.DictionaryArray] | None:
    """(the string array, its dictionary encoding) of an object array holding only
    strings; None when anything else is there (a missing value, another type: then
    pa.array decides, as from_pandas would)."""
    codes, uniques = pd.factorize(values)
    if (codes < 0).any():
        return None
    try:
        dictionary = pa.array(uniques, from_pandas=True)
        if not isinstance(dictionary, pa.StringArray) or dictionary.null_count:
            return None
        encoded = pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)),
                                                 dictionary)
        return encoded.dictionary_decode(), encoded  # (over 2 GiB of text: refused)
    except (pa.ArrowException, TypeError, ValueError):
        return None


def _plain_columns(frame: pd.DataFrame) -> bool:
    """Whether the frame's columns are named by distinct strings (no MultiIndex): then
    each column converts on its own exactly as from_pandas converts it."""
    columns = frame.columns
    return (type(columns) is pd.Index and len(columns) > 0 and columns.is_unique
            and all(type(name) is str for name in columns))


_NULLABLE = {
    pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(), pa.int32(): pd.Int32Dtype(),
    pa.int64(): pd.Int64Dtype(), pa.uint8(): pd.UInt8Dtype(), pa.uint16(): pd.UInt16Dtype(),
    pa.uint32(): pd.UInt32Dtype(), pa.uint64(): pd.UInt64Dtype(), pa.bool_(): pd.BooleanDtype(),
}


def to_pandas(table: pa.Table) -> pd.DataFrame:
    """pandas with nullable integer/boolean dtypes (see module docstring). On one thread:
    Arrow's pool was slower at every size measured (566 rows: 0.26 against 0.19 ms of
    CPU; 149k rows: 7.9 against 2.9 ms)."""
    return table.to_pandas(types_mapper=_NULLABLE.get, use_threads=False)


def sort_for_matching(table: pa.Table, keys: list[SortColumn], plan: QueryPlan) -> pa.Table:
    """table sorted by PARTITION BY + ORDER BY (+ tie-breakers where needed)."""
    if not keys or table.num_rows == 0:
        return table
    return table.take(_order_for_matching(table, keys, plan))


def _order_for_matching(table: pa.Table, keys: list[SortColumn], plan: QueryPlan) -> pa.Array:
    """The row order by PARTITION BY + ORDER BY; the tie-breaking keys are added only when
    that order actually has ties (sorting on every column is the expensive part)."""
    primary = plan.primary_sort_keys
    if primary is None or primary >= len(plan.sort_keys):
        return sort_indices(table, keys)
    head = keys[:len(keys) - len(plan.sort_keys) + primary]
    if not head:
        return sort_indices(table, keys)
    order = sort_indices(table, head)
    names = list(dict.fromkeys(k.column for k in head))  # a key may repeat (id ASC, id DESC)
    if table.num_rows < 2 or not _has_ties(table.select(names).take(order), names):
        return order
    return sort_indices(table, keys)


def _slice_order(prepared: pa.Table, rows: np.ndarray, ranks: np.ndarray,
                 keys: list[SortColumn], plan: QueryPlan, presorted: bool = False
                 ) -> np.ndarray | None:
    """The order of one slice's rows (positions in rows; None: rows are in order),
    computed on its sort keys only (run_by_partition then takes each input row once)."""
    if presorted or _in_input_order(prepared, rows, ranks, keys, plan):
        return None
    names = list(dict.fromkeys(k.column for k in keys if k.column != RANK_COLUMN))
    # column by column: with no key but the rank (PARTITION BY only), prepared.select([])
    # would be a table of no rows
    taken = pa.array(rows)
    columns = {name: prepared.column(name).take(taken) for name in names}
    columns[RANK_COLUMN] = pa.array(ranks, pa.int32())
    table = pa.table(columns)
    return _order_for_matching(table, keys, plan).to_numpy()


def _in_input_order(prepared: pa.Table, rows: np.ndarray, ranks: np.ndarray,
                    keys: list[SortColumn], plan: QueryPlan) -> bool:
    """Whether rows (grouped by partition rank, input order within a group) are already
    in ORDER BY order without ties - time series mostly arrive in time order, and then
    the sort is skipped. Checked for one ascending integer, date or timestamp ORDER BY
    key without NULLs; ties (whose order the tie-breakers decide) say no."""
    values = _order_values(prepared, keys, plan)
    if values is None:
        return False
    values = values[rows]
    same_group = ranks[1:] == ranks[:-1]
    return not np.any(same_group & (values[1:] <= values[:-1]))


def _ascending_throughout(prepared: pa.Table, keys: list[SortColumn], plan: QueryPlan
                         ) -> bool:
    """Whether the ORDER BY key _in_input_order checks rises strictly over the whole
    input, in input order: then every slice's rows are in order (a partition's rows are
    a subsequence), checked once on contiguous values instead of gathered per slice.
    The first rows are tried first, so an unsorted input costs next to nothing."""
    values = _order_values(prepared, keys, plan)
    if values is None:
        return False
    if len(values) > 4096:
        head = values[:1025]
        if np.any(head[1:] <= head[:-1]):
            return False
    return not np.any(values[1:] <= values[:-1])


def _order_values(prepared: pa.Table, keys: list[SortColumn], plan: QueryPlan
                  ) -> np.ndarray | None:
    """The one ascending integer, date or timestamp ORDER BY key without NULLs as numpy
    (in input order), or None when the ORDER BY is not that."""
    if plan.primary_sort_keys != 2 or len(keys) < 2 or not keys[1].ascending:
        return None
    col = prepared.column(keys[1].column)
    t = col.type
    if col.null_count or not (pa.types.is_integer(t) or pa.types.is_timestamp(t)
                              or pa.types.is_date(t)):
        return None
    return _numpy_of(col)


def _numpy_of(col: pa.ChunkedArray) -> np.ndarray:
    """A column without NULLs as numpy, zero-copy when it is one chunk (combine_chunks
    copies even then, and every slice calls this); dates and timestamps as their int64
    values: numpy compares datetime64 a third slower, and reads the valid Arrow value
    INT64_MIN as NaT, which compares false with everything."""
    values = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    values = values.to_numpy(zero_copy_only=False)
    return values.view(np.int64) if values.dtype.kind == "M" else values


def _has_ties(table: pa.Table, columns: list[str]) -> bool:
    """Whether two adjacent rows agree on every column (NULL equal to NULL)."""
    n = table.num_rows
    same = None
    plain = _plain_equal_adjacent(table, columns)
    if plain is not None:
        return bool(plain.any())
    for name in columns:
        col = comparable(table.column(name))
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        a, b = col.slice(0, n - 1), col.slice(1)
        eq = pc.or_kleene(spark_compare("=", a, b), pc.and_(pc.is_null(a), pc.is_null(b)))
        eq = pc.fill_null(eq, False)
        same = eq if same is None else pc.and_(same, eq)
    return bool(pc.any(same).as_py())


def _plain_equal_adjacent(table: pa.Table, columns: list[str]) -> np.ndarray | None:
    """_has_ties' per-pair equality in numpy when every column is an integer, date or
    timestamp column without NULLs (the common ORDER BY keys); None otherwise."""
    same = None
    for name in columns:
        col = table.column(name)
        t = col.type
        if col.null_count or not (pa.types.is_integer(t) or pa.types.is_timestamp(t)
                                  or pa.types.is_date(t)):
            return None
        values = _numpy_of(col)
        eq = values[1:] == values[:-1]
        same = eq if same is None else same & eq
    return same


def global_breaks(prepared: pa.Table, plan: QueryPlan) -> pa.Array:
    """STRICT_CONTIGUITY with PARTITION BY (docs/cep_mode.md R5): per row 1 when its
    predecessor in ``plan.global_order`` (the whole input, PARTITION BY ignored) has other
    partition keys, NULL keys compared as values; 0 for the globally first row. The keys
    are compared as the worker compares them to find its partitions."""
    n = prepared.num_rows
    if n == 0:
        return pa.array([], pa.uint8())
    order = sort_indices(prepared, plan.global_order) if plan.global_order else \
        pa.array(np.arange(n))
    changed = np.zeros(n, dtype=bool)
    for name in plan.partition_columns:
        col = prepared.column(name).take(order).combine_chunks()
        prev, cur = col.slice(0, n - 1), col.slice(1)
        differs = pc.fill_null(spark_compare("<>", prev, cur), False)  # NaN = NaN
        null_flip = pc.xor(pc.is_null(prev), pc.is_null(cur))
        changed[1:] |= pc.or_(differs, null_flip).to_numpy(zero_copy_only=False)
    flags = np.zeros(n, dtype=np.uint8)
    flags[np.asarray(order)] = changed
    return pa.array(flags, pa.uint8())


def relevant_rows(table: pa.Table, plan: QueryPlan) -> pa.Table:
    """table without the rows the plan's relevance filter drops (NULL = drop)."""
    if plan.relevance_filter is None or table.num_rows == 0:
        return table
    try:
        keep = evaluate_arrow(plan.relevance_filter, table)
    except CepUnsupportedError:  # not vectorizable here: the evaluator still decides
        return table
    if isinstance(keep, pa.Scalar):  # a constant condition
        return table if keep.as_py() is True else table.slice(0, 0)
    return table.filter(keep, null_selection_behavior="drop")


def execute_plan(table: pa.Table, plan: QueryPlan, batch_rows: int = 65536,
                 threads: int | None = None, *,
                 stats: ClauseStatistics | None = None,
                 binder: Callable[[QueryPlan, pa.Schema], BoundWorker] = bind_worker,
                 encodings: KnownEncodings | None = None) -> pa.Table:
    """The QueryPlan contract, in-process: prepare, bind (with binder: a cached plan
    keeps its binding), sort, stream through the worker (on ``threads`` threads, default
    the planner options' or all cores: backends/local/threads.py), project. With stats,
    the evaluator's counters and the EXPLAIN ANALYZE figures (rows, partitions, time per
    stage) go there; encodings: the input columns' known dictionary encodings."""
    opts = current_options()
    threads = opts.threads if threads is None else threads
    clock = _Stages(stats)
    if stats is not None:
        stats.rows_read = table.num_rows
    table = relevant_rows(table, plan)
    if stats is not None:
        if plan.relevance_filter is not None:
            stats.rows_relevant = table.num_rows
    prepared = table
    for name, expr in plan.prepare_columns:
        prepared = prepared.append_column(name, evaluate_arrow(expr, table))
    if plan.break_column is not None:
        prepared = prepared.append_column(plan.break_column, global_breaks(prepared, plan))
    bound = binder(plan, prepared.schema)
    shape = sequence_shape(plan.spec, bound.worker, vector_masks=opts.vector_masks) \
        if opts.sequence_fast_path else None
    clock.lap("input")
    keys = list(plan.sort_keys)
    leading = {k.column for k in keys[:len(plan.partition_columns)]}
    if leading != set(plan.partition_columns):  # the contract: partitions contiguous
        keys = [SortColumn(c, True, True) for c in plan.partition_columns] + keys
    ranks = partition_ranks(prepared, keys[0], threads=threads, encodings=encodings) \
        if plan.partition_columns == [keys[0].column] and prepared.num_rows else None
    ordered = None
    if ranks is not None:  # sorted and matched per slice of partitions, in threads
        if stats is not None:
            stats.partition_rows = [int(c) for c in np.bincount(ranks) if c]
        clock.lap("shuffle+sort")
        by_rank = [SortColumn(RANK_COLUMN, True, True)] + keys[1:]
        out = run_by_partition(prepared, ranks, bound,
                               partial(_slice_order, keys=by_rank, plan=plan,
                                       presorted=_ascending_throughout(prepared, by_rank,
                                                                      plan)),
                               batch_rows=batch_rows, threads=threads, shape=shape,
                               stats=stats, rank_column=keys[0].column)
        clock.lap("evaluation")  # (run_by_partition moved its slices' sort time)
    else:
        ordered = sort_for_matching(prepared, keys, plan).combine_chunks()
        if stats is not None:
            sizes = GroupSizes(plan.partition_columns)
            sizes.add(ordered)
            stats.partition_rows = sizes.sizes()
        clock.lap("shuffle+sort")
        out = run_worker(ordered, bound, plan.partition_columns, batch_rows=batch_rows,
                         threads=threads, shape=shape, stats=stats)
        clock.lap("evaluation")
    names = [n for n, _ in bound.final_projection]
    result = pa.Table.from_arrays([evaluate_arrow(e, out, strict_division=True)
                                   for _, e in bound.final_projection],
                                  names=names)
    clock.lap("output")
    if stats is not None:
        stats.variable_rows = variable_rows(plan, prepared, ordered, keys)  # not timed
        stats.output_rows = result.num_rows
        if shape is not None:
            stats.notes.append("sequence fast path (backends/local/sequence.py): it keeps "
                               "no attempt or partial-match counters")
    return result


def variable_rows(plan: QueryPlan, prepared: pa.Table, ordered: pa.Table | None,
                  keys: list[SortColumn]) -> dict[str, int | None]:
    """Per variable, the rows of the clause's input where the conjuncts of its DEFINE
    that read only the current row and PREV/NEXT of it all hold (runtime/run_stats.py
    PositionalCounts), in the engine's order (``ordered``: the sorted input, None when
    it was sorted per slice: then sorted here if some conjunct reads PREV/NEXT)."""
    counts = PositionalCounts(plan.spec, plan.partition_columns)
    if ordered is None:
        ordered = sort_for_matching(prepared, keys, plan) if counts.reads_neighbours \
            else prepared
    counts.add(ordered)
    return counts.counts()


class _Stages:
    """Wall time between laps, added to a ClauseStatistics' stages (nothing without one)."""

    def __init__(self, stats: ClauseStatistics | None):
        self.stats = stats
        self.last = time.perf_counter()

    def lap(self, stage: str) -> None:
        if self.stats is None:
            return
        now = time.perf_counter()
        self.stats.add_seconds(stage, now - self.last)
        self.last = now
