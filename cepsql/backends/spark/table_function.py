"""``cep_match(TABLE(t) PARTITION BY k ORDER BY ts, '<body>')`` and ``cep_view('name')``
through ``spark.cep.sql`` — the batch-based path.

Each cep_match call is planned on the driver (the output schema depends on the body and
the input's schema, and an ``@arrow_udtf`` needs a fixed return type), a per-query Arrow
UDTF carrying the bound plan is applied through the DataFrame API to the input as a
table argument (``df.asTable().partitionBy(...).orderBy(...)``, ``withSinglePartition()``
when there is no PARTITION BY) — no function name is registered in the session — and the
call is replaced by a generated name bound to that DataFrame (frames.py).
Spark shuffles by the partition keys and gives each partition a fresh instance: eval
buffers Arrow batches, terminate sorts them with the plan's keys (adding the
deterministic tie-breakers Spark's ORDER BY lacks) and runs the matcher — no Python
object per row in cepsql's code. ``cep_view('v')`` becomes the view name itself.
The portable fallback for plain ``spark.sql`` lives in tf_plain.py.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping

import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from cepsql.errors import CepAnalysisError, CepError, transported
from cepsql.exprs.spark_sql import quote_identifier
from cepsql.backends.spark.columns import expression
from cepsql.exprs.spark_arrow import arrow_schema
from cepsql.parse.splice import (CteContext, SOURCE_ALIAS, apply_replacements, new_view_name,
                     normalize_name, scan_ctes, wrap_ctes)
from cepsql.parse.tf_calls import MatchCall, ViewCall, find_calls, map_body_pos
from cepsql.backends.spark.tf_plan import TablePlan, Typer, build_table_plan, run_table_plan
from cepsql.backends.spark.tf_spec import call_spec, check_keys, relocate


@dataclass
class FunctionRun:
    """What one cep_match call became (for the pattern-view registry)."""
    view: str       # the generated function name
    source: str
    pattern: str


@dataclass
class TfRewritten:
    sql: str
    runs: list[FunctionRun] = field(default_factory=list)
    edits: list[tuple[int, int, int]] = field(default_factory=list)  # abs (start, end, new len)


class CepMatchBatches:
    """Base of the per-query Arrow UDTFs; subclasses set ``plan``. One instance per
    partition: eval keeps the batches, terminate matches them all at once (the sort
    with tie-breakers needs the whole partition)."""
    plan: TablePlan

    def __init__(self) -> None:
        self.batches: list[pa.RecordBatch] = []

    def eval(self, batch: pa.RecordBatch) -> Iterator[pa.Table]:
        self.batches.append(batch)
        return iter(())

    def terminate(self) -> Iterator[pa.Table]:
        if self.batches:
            table = pa.Table.from_batches(self.batches)
        else:
            table = self.plan.input_schema.empty_table()
        self.batches = []
        with transported():
            result = run_table_plan(table, self.plan)
        yield result


def spark_typer(spark: SparkSession) -> Typer:
    """Column types as Spark computes them (as ``run_plan`` would), so the table function
    returns exactly the clause form's types."""
    def typer(schema: pa.Schema, exprs) -> list[pa.DataType]:
        if not exprs:
            return []
        df = spark.createDataFrame([], from_arrow_schema(schema))
        out = df.select(*[expression(e).alias(f"c{i}") for i, (_, e) in enumerate(exprs)])
        return [f.type for f in arrow_schema(out)]
    return typer


def rewrite_table_functions(spark: SparkSession, sql: str, *, offset: int, full_sql: str,
                            views: Mapping[str, object],
                            run_query: Callable[[str], DataFrame],
                            frames: dict[str, DataFrame]) -> TfRewritten:
    """sql with its cep_match / cep_view calls replaced (see module docstring); the
    generated names are bound in ``frames``. ``run_query`` runs a query with cepsql's
    full rewriting (for the inputs)."""
    calls = find_calls(sql, offset=offset, full_sql=full_sql)
    result = TfRewritten(sql)
    if not calls:
        return result
    ctes = scan_ctes(sql)
    done: list[tuple[int, int, str]] = []
    for call in calls:
        start, end = call.start - offset, call.end - offset
        if isinstance(call, ViewCall):
            text = _view_replacement(call, views, full_sql)
        else:
            visible = [c for c in ctes if c[2] <= start]
            contexts = []
            if visible:
                cte_text = ", ".join(apply_replacements(sql, lo, hi, done) for _, lo, hi in visible)
                contexts.append(CteContext(cte_text, frozenset(n for n, _, _ in visible)))
            text, run = _match_replacement(spark, call, full_sql, views, run_query, contexts,
                                           frames)
            result.runs.append(run)
        done.append((start, end, text))
        result.edits.append((call.start, call.end, len(text)))
    result.sql = apply_replacements(sql, 0, len(sql), done)
    return result


def original_pos(pos: int | None, edits: list[tuple[int, int, int]]) -> int | None:
    """A position in the edited statement mapped back to the original one (a position
    inside a replacement maps to the replaced call's start)."""
    if pos is None:
        return None
    delta = 0
    for start, end, new_len in sorted(edits):
        if pos < start + delta:
            break
        if pos < start + delta + new_len:
            return start
        delta += new_len - (end - start)
    return pos - delta


def _view_replacement(call: ViewCall, views: Mapping[str, object], full: str) -> str:
    view = views.get(normalize_name(call.name))
    if view is None:
        known = ", ".join(sorted(getattr(v, "name", k) for k, v in views.items())) or "none"
        raise CepAnalysisError(f"unknown pattern view {call.name!r} in cep_view (pattern views "
                               f"defined through spark.cep.sql: {known})", sql=full,
                               pos=call.name_pos)
    return ".".join(quote_identifier(part) for part in getattr(view, "name").split("."))


def _match_replacement(spark, call: MatchCall, full: str, views, run_query, contexts, frames):
    table = call.table
    source = table.source
    if table.is_query:  # inner calls first: the query is re-emitted rewritten
        inner = rewrite_table_functions(spark, source.text, offset=source.pos, full_sql=full,
                                        views=views, run_query=run_query, frames=frames).sql
        query = f"SELECT * FROM ({inner}) AS {SOURCE_ALIAS}"
    else:
        query = f"SELECT * FROM {source.text}"
    try:
        input_frame = run_query(wrap_ctes(query, contexts))
        input_schema = arrow_schema(input_frame)
    except AnalysisException as e:
        raise CepAnalysisError(f"cannot read the cep_match input: {_first_line(e)}", sql=full,
                               pos=source.pos) from None
    except CepError as e:
        raise type(e)(e.message, sql=full, pos=source.pos) from None
    spec = call_spec(call, full)
    check_keys(spec, input_schema, partition=table.partition_by, order=table.order_by, sql=full)
    try:
        plan = build_table_plan(spec, input_schema, typer=spark_typer(spark))
    except CepError as err:
        raise relocate(err, call, full) from None
    _locate_run_time_errors(plan, call, full)
    name = new_view_name().replace("__cep_mr_", "__cep_tf_")
    try:
        frames[name] = _apply(plan, _table_argument(input_frame, call, spec))
    except AnalysisException as e:
        raise CepAnalysisError(f"cannot partition the cep_match input: {_first_line(e)}",
                               sql=full, pos=call.start) from None
    return quote_identifier(name), FunctionRun(
        name, "(subquery)" if table.is_query else source.text, spec.pattern_text or "")


def _locate_run_time_errors(plan: TablePlan, call: MatchCall, full: str) -> None:
    """Errors the matcher raises while running point into the statement (the body was
    parsed as a text of its own)."""
    config = getattr(plan.bound.worker, "config", None)
    if config is not None and hasattr(config, "skip_pos"):
        config.sql = full
        config.skip_pos = map_body_pos(call, config.skip_pos)


def _table_argument(df: DataFrame, call: MatchCall, spec):
    """The input as Spark's table argument: partitioning/ordering as written in TABLE(...)
    when given there, else from the body."""
    table = call.table
    arg = df.asTable()
    if table.partition_by:
        arg = arg.partitionBy(*[F.expr(p.text) for p in table.partition_by])
    elif spec.partition_by and not table.single_partition:
        arg = arg.partitionBy(*[expression(k.expr) for k in spec.partition_by])
    else:
        arg = arg.withSinglePartition()
    if table.order_by:
        arg = arg.orderBy(*[_written_sort(p.text) for p in table.order_by])
    elif spec.order_by:
        arg = arg.orderBy(*[_sort(expression(k.expr), k.ascending,
                                  k.effective_nulls_first) for k in spec.order_by])
    return arg


_SORT_SUFFIX = re.compile(r"\s+(ASC|DESC)?\s*(NULLS\s+(FIRST|LAST))?\s*$", re.IGNORECASE)


def _written_sort(text: str):
    """A sort item as written (``expr [ASC|DESC] [NULLS FIRST|LAST]``) as a Column."""
    m = _SORT_SUFFIX.search(text)
    if m is None or not m.group(0).strip():
        return F.expr(text)
    ascending = (m.group(1) or "ASC").upper() == "ASC"
    nulls_first = ascending if m.group(3) is None else m.group(3).upper() == "FIRST"
    return _sort(F.expr(text[:m.start()]), ascending, nulls_first)


def _sort(col, ascending: bool, nulls_first: bool):
    if ascending:
        return col.asc_nulls_first() if nulls_first else col.asc_nulls_last()
    return col.desc_nulls_first() if nulls_first else col.desc_nulls_last()


def _apply(plan: TablePlan, table_arg) -> DataFrame:
    """The per-query Arrow UDTF applied to the table argument (never registered by name)."""
    from pyspark.sql.functions import arrow_udtf
    handler = type("CepMatchQuery", (CepMatchBatches,), {"plan": plan,
                                                         "__module__": __name__})
    function = arrow_udtf(handler, returnType=from_arrow_schema(plan.output_schema))
    return function(table_arg)


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
