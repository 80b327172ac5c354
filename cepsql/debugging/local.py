"""``cepsql.trace`` and ``cepsql.near_misses``: the in-process forms (tables given as
pandas DataFrames or Arrow tables, as ``cepsql.match_recognize`` takes them)."""
from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from cepsql.backends.local.engine import LocalStatement, to_arrow
from cepsql.backends.local.sql import Scope
from cepsql.compile.clause import plan_query
from cepsql.debugging.run import near_misses_frame, single_clause, trace_frame
from cepsql.debugging.slice import MAX_ROWS
from cepsql.debugging.trace import MAX_STEPS
from cepsql.errors import CepError
from cepsql.parse import find_match_recognize
from cepsql.parse.splice import normalize_name


def trace(query: str, *, partition: Mapping[str, Any] | None = None,
          rows: tuple[int, int] | None = None, max_steps: int = MAX_STEPS,
          max_rows: int = MAX_ROWS, **tables: Any) -> pd.DataFrame:
    """The matcher's steps for the query's MATCH_RECOGNIZE clause over a slice of its input:
    the partitions ``partition`` (PARTITION BY column -> value) selects, rows
    ``rows=(first, stop)`` of each (positions after ORDER BY). One row per step: the row,
    the variable tried, ``event`` (extended / failed / window / pruned / end / match /
    skipped), the attempt (its start row), the path so far, the conjunct that failed and
    the values its operands had. More than ``max_steps`` steps or ``max_rows`` rows is an
    error (narrow the slice)."""
    stmt, spec, table = _clause_input(query, tables)
    return trace_frame(stmt, spec, table, partition=partition, rows=rows,
                       max_steps=max_steps, max_rows=max_rows)


def near_misses(query: str, k: int = 10, *, per_partition: bool = False,
                partition: Mapping[str, Any] | None = None,
                rows: tuple[int, int] | None = None, max_steps: int = MAX_STEPS,
                max_rows: int = MAX_ROWS, **tables: Any) -> pd.DataFrame:
    """The ``k`` longest attempts that did not complete (per partition with
    ``per_partition``): their rows, the variable they stopped at, the conjunct that failed
    there and its operands' values. The slice arguments are those of ``trace``."""
    stmt, spec, table = _clause_input(query, tables)
    return near_misses_frame(stmt, spec, table, k, per_partition=per_partition,
                             partition=partition, rows=rows, max_steps=max_steps,
                             max_rows=max_rows)


def _clause_input(query: str, tables: Mapping[str, Any]):
    """The statement, the clause's spec and its input rows (run in-process)."""
    stmt, site = single_clause(query)
    scope = Scope({normalize_name(k): to_arrow(v) for k, v in tables.items()})
    try:
        table = LocalStatement(stmt, find_match_recognize, plan_query).source(site, scope)
    except CepError as err:
        raise err.with_sql(stmt) from None
    return stmt, site.spec, table
