"""One clause's trace and near misses from its spec and input rows: the single engine the
in-process functions (``cepsql.trace``) and Spark (``spark.cep.trace``) both call; a
backend only finds the clause and collects the slice's rows."""
from __future__ import annotations

from typing import Any, Mapping

import pandas as pd
import pyarrow as pa

from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.compile.clause import plan_query
from cepsql.debugging.cep_trace import trace_cep_slices
from cepsql.debugging.near_misses import misses_frame, near_misses
from cepsql.debugging.slice import MAX_ROWS, PartitionSlice, partition_names, select_slices
from cepsql.debugging.trace import MAX_STEPS, Step, steps_frame, trace_slices
from cepsql.errors import CepError, CepUnsupportedError
from cepsql.parse import find_match_recognize


def single_clause(sql: str):
    """The query's one MATCH_RECOGNIZE clause (its site: spec, source, offsets)."""
    stmt = sql.rstrip().rstrip(";")
    sites = find_match_recognize(stmt, offset=0, full_sql=stmt)
    if len(sites) != 1:
        raise CepUnsupportedError(
            f"trace and near_misses take a query with one MATCH_RECOGNIZE clause; this one "
            f"has {len(sites)}", sql=stmt, pos=sites[1].start if len(sites) > 1 else 0)
    return stmt, sites[0]


def trace_frame(sql: str, spec: MatchRecognizeSpec, table: pa.Table, *,
                partition: Mapping[str, Any] | None = None, rows: tuple[int, int] | None = None,
                max_steps: int = MAX_STEPS, max_rows: int = MAX_ROWS) -> pd.DataFrame:
    """The trace of ``spec`` over ``table``'s slice (see trace.py for the columns)."""
    try:
        plan_query(spec, table.schema, sql)  # the engine's own checks and errors first
        parts = select_slices(spec, table, partition, rows, max_rows)
        return steps_frame(spec, _steps(spec, table.schema, parts, sql, max_steps), parts)
    except CepError as err:
        raise err.with_sql(sql) from None


def near_misses_frame(sql: str, spec: MatchRecognizeSpec, table: pa.Table, k: int = 10, *,
                      per_partition: bool = False,
                      partition: Mapping[str, Any] | None = None,
                      rows: tuple[int, int] | None = None, max_steps: int = MAX_STEPS,
                      max_rows: int = MAX_ROWS) -> pd.DataFrame:
    """The ``k`` longest attempts of ``spec`` over the slice that did not complete."""
    try:
        plan_query(spec, table.schema, sql)
        parts = select_slices(spec, table, partition, rows, max_rows)
        steps = _steps(spec, table.schema, parts, sql, max_steps)
        return misses_frame(partition_names(spec), near_misses(steps, k, per_partition))
    except CepError as err:
        raise err.with_sql(sql) from None


def _steps(spec: MatchRecognizeSpec, schema: pa.Schema, parts: list[PartitionSlice],
           sql: str, max_steps: int) -> list[Step]:
    """SQL:2016 mode (also with WITHIN) through the instrumented search, CEP mode through
    the observed CEP reference evaluator."""
    if spec.strategy is None:
        return trace_slices(spec, schema.names, parts, sql, max_steps)
    return trace_cep_slices(spec, schema, parts, sql, max_steps)
