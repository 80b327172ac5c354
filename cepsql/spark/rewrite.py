"""Rewrite one statement for Spark: run each MATCH_RECOGNIZE clause as a DataFrame
(registered as a temp view with a generated name) and hand the spliced text to spark.sql."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import DataFrame, SparkSession

from ..dialect.statements import clause_output_names
from ..runtime.subqueries import bind_subqueries
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
        try:
            inputs = planning_inputs(spark, df)
            spec = bind_subqueries(site.spec, lambda sub: _scalar(spark, sub, full))
            plan = plan_query(spec, arrow_schema(df), full, **inputs)
            sliced = slice_plan(spark, df, plan, **inputs)  # unpartitioned, time-windowed
            if sliced is not None:  # (plan.explain notes it; the sliced plan is internal)
                df = sliced.frame
                plan = default_planner()(sliced.spec, arrow_schema(df), full,
                                         **sliced.planning_inputs)
            out = run_plan(df, plan)
            if sliced is not None:
                out = sliced.finish(out)
            names = clause_output_names(site, out.columns)
            if names != out.columns:
                out = out.toDF(*names)
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


def _scalar(spark: SparkSession, sub, full: str) -> tuple[list[str | None], str]:
    """Run an uncorrelated scalar subquery (before the clause's job): at most two of its
    values as Spark's own text form, and its Spark type."""
    try:
        df = spark.sql(sub.sql)
        if len(df.columns) != 1:
            raise CepAnalysisError(f"a scalar subquery must return one column, not "
                                   f"{len(df.columns)}", sql=full, pos=sub.pos)
        type_name = df.schema.fields[0].dataType.simpleString()
        rows = df.select(df[0].cast("string")).limit(2).collect()
    except (AnalysisException, ParseException) as e:
        raise CepAnalysisError(f"in the scalar subquery: {_message(e)} (only uncorrelated "
                               "scalar subqueries are supported)", sql=full,
                               pos=sub.pos) from None
    return [r[0] for r in rows], type_name


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
