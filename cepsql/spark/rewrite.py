"""Rewrite one statement for Spark: run each MATCH_RECOGNIZE clause as a DataFrame
(registered as a temp view with a generated name) and hand the spliced text to spark.sql."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import DataFrame, SparkSession

from ..errors import CepAnalysisError, CepError, CepSyntaxError
from .execute import arrow_schema, run_plan
from .slicing import slice_plan
from .splice import Source, new_view_name, rewrite_text
from .table_function import TfRewritten, original_pos, rewrite_table_functions


def default_finder() -> Callable:
    from ..dialect import find_match_recognize
    return find_match_recognize


def default_planner() -> Callable:
    from ..runtime.executor import plan_query
    return plan_query


@dataclass
class ClauseRun:
    """What one clause site became (for the view registry)."""
    view: str
    source: str
    pattern: str


@dataclass
class Rewritten:
    sql: str
    clauses: list[ClauseRun] = field(default_factory=list)


def rewrite(spark: SparkSession, sql: str, *, offset: int = 0, full_sql: str | None = None,
            finder: Callable | None = None, planner: Callable | None = None,
            views: Mapping[str, object] | None = None) -> Rewritten:
    """sql (a query, at ``offset`` in ``full_sql``) with every cep_match / cep_view table
    function call replaced (table_function.py; ``views`` = the pattern-view registry) and
    then every clause replaced by a generated temp view holding its result."""
    original_full = sql if full_sql is None else full_sql
    tf = _table_functions(spark, sql, offset, original_full, finder, planner, views or {})
    full = original_full
    if tf.edits:  # the clause pass works on the edited statement
        full = original_full[:offset] + tf.sql + original_full[offset + len(sql):]
    sql = tf.sql
    find = finder or default_finder()
    plan_query = planner or default_planner()
    result = Rewritten(sql, [ClauseRun(r.view, r.source, r.pattern) for r in tf.runs])

    def run_clause(site, source: Source) -> str:
        df = _source_frame(spark, source, full, site)
        if df.isStreaming:
            return _run_streaming_clause(spark, df, site, source, full, offset, plan_query,
                                         result)
        try:
            inputs = planning_inputs(spark, df)
            plan = plan_query(site.spec, arrow_schema(df), full, **inputs)
            sliced = slice_plan(spark, df, plan, **inputs)  # unpartitioned, time-windowed
            if sliced is not None:  # (plan.explain notes it; the sliced plan is internal)
                df = sliced.frame
                plan = default_planner()(sliced.spec, arrow_schema(df), full,
                                         **sliced.planning_inputs)
            out = run_plan(df, plan)
            if sliced is not None:
                out = sliced.finish(out)
        except CepError as e:
            raise e.with_sql(full) from None
        except AnalysisException as e:
            raise CepAnalysisError(f"cannot evaluate MATCH_RECOGNIZE: {_message(e)}",
                                   sql=full, pos=site.start + offset) from None
        view = new_view_name()
        out.createOrReplaceTempView(view)
        result.clauses.append(ClauseRun(view, source.display,
                                        getattr(site.spec, "pattern_text", "") or ""))
        return view

    try:
        result.sql = rewrite_text(sql, run_clause, find, offset=offset, full_sql=full)
    except CepError as e:
        if tf.edits:  # locate the error in the statement as written
            raise type(e)(e.message, sql=original_full,
                          pos=original_pos(e.pos, tf.edits)) from None
        raise e.with_sql(full) from None
    return result


def _run_streaming_clause(spark, df, site, source, full, offset, plan_query, result) -> str:
    """A clause over a streaming source: the streaming backend (no sampling, no slicing)."""
    from ..backends.streaming import run_streaming_plan
    from ..runtime.planner_options import options_from_conf
    options = options_from_conf(lambda k: spark.conf.get(k, None))
    view = new_view_name()
    counter = spark.sparkContext.accumulator(0)
    try:
        plan = plan_query(site.spec, arrow_schema(df), full, options=options)
        out = run_streaming_plan(df, plan, counter)
    except CepError as e:
        raise e.with_sql(full) from None
    except AnalysisException as e:
        raise CepAnalysisError(f"cannot evaluate MATCH_RECOGNIZE: {_message(e)}",
                               sql=full, pos=site.start + offset) from None
    late = getattr(getattr(spark, "_cepsql_session", None), "_late_rows", None)
    if late is not None:
        late[view] = counter
    out.createOrReplaceTempView(view)
    result.clauses.append(ClauseRun(view, source.display,
                                    getattr(site.spec, "pattern_text", "") or ""))
    return view


def planning_inputs(spark: SparkSession, df: DataFrame) -> dict:
    """Planner options from the session's conf and a lazy, cached statistics sampler."""
    from ..runtime.planner_options import options_from_conf
    from ..stats import CACHE
    options = options_from_conf(lambda k: spark.conf.get(k, None))

    def statistics(spec):
        return CACHE.get_or_estimate(spec, df, sample_rows=options.sample_rows,
                                     time_budget_s=options.sample_seconds)
    return {"options": options, "statistics": statistics}


def _table_functions(spark, sql, offset, full, finder, planner, views) -> TfRewritten:
    def run_query(query: str) -> DataFrame:
        inner = rewrite(spark, query, finder=finder, planner=planner, views=views)
        return spark.sql(inner.sql)
    return rewrite_table_functions(spark, sql, offset=offset, full_sql=full, views=views,
                                   run_query=run_query)


def _source_frame(spark: SparkSession, source: Source, full: str, site) -> DataFrame:
    try:
        if source.sql is None:
            return spark.table(source.table)
        return spark.sql(source.sql)
    except AnalysisException as e:
        raise CepAnalysisError(f"cannot read the MATCH_RECOGNIZE input {source.display}: "
                               f"{_message(e)}", sql=full,
                               pos=getattr(site, "source_offset", None)) from None


def run_sql(spark: SparkSession, rewritten: Rewritten, original: str) -> DataFrame:
    """spark.sql on rewritten text; Spark's errors become cepsql errors."""
    try:
        return spark.sql(rewritten.sql)
    except ParseException as e:
        raise CepSyntaxError(_explain(e, rewritten), sql=original) from None
    except AnalysisException as e:
        raise CepAnalysisError(_explain(e, rewritten), sql=original) from None


def _message(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _explain(e: Exception, rewritten: Rewritten) -> str:
    msg = _message(e)
    if rewritten.clauses:
        names = ", ".join(c.view for c in rewritten.clauses)
        msg += (f" (in the statement as rewritten by cepsql; {names} are cepsql's views holding "
                "the MATCH_RECOGNIZE results)")
    return msg
