"""Rewrite one statement for Spark: run each MATCH_RECOGNIZE clause as a DataFrame
(bound to a generated name, see frames.py) and hand the spliced text to spark.sql."""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Callable, Mapping

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import DataFrame, SparkSession

from cepsql.parse import find_match_recognize
from cepsql.parse.statements import clause_output_names
from cepsql.parse.splice import Source, new_view_name, rewrite_text
from cepsql.analyze.subqueries import bind_subqueries
from cepsql.errors import CepAnalysisError, CepError, CepSyntaxError
from cepsql.exprs.spark_arrow import arrow_schema
from cepsql.exprs.spark_conf import conf_reader, snapshot_memo
from cepsql.stats import CACHE
from cepsql.stats.worker import (DriverSampleForExplain, InWorkerStatistics, stats_mode,
                                 worker_sample_rows)
from cepsql.planning.options import options_from_conf
from cepsql.compile.clause import plan_query as clause_planner
from cepsql.runtime.adaptive import adaptive_settings
from cepsql.runtime.error_position import located_run_error
from cepsql.backends.spark.execute import relevant_rows, run_plan
from cepsql.backends.spark.frames import sql_with_frames, table_or_frame
from cepsql.backends.spark.slicing import slice_plan
from cepsql.backends.spark.spark_positions import located, seen_text
from cepsql.backends.spark.streams import StreamRunner, require_streams
from cepsql.backends.spark.task_errors import remember_clause, remember_statement
from cepsql.backends.spark.table_function import TfRewritten, original_pos, rewrite_table_functions


def default_finder() -> Callable:
    """The clause finder of parse/ (sessions and tests may pass their own)."""
    return find_match_recognize


def default_planner() -> Callable:
    """The clause planner of compile/ (sessions and tests may pass their own)."""
    return clause_planner


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
    frames: dict[str, DataFrame] = field(default_factory=dict)  # generated name -> result


def rewrite(spark: SparkSession, sql: str, *, offset: int = 0, full_sql: str | None = None,
            finder: Callable | None = None, planner: Callable | None = None,
            views: Mapping[str, object] | None = None,
            frames: dict[str, DataFrame] | None = None,
            clause_runner: Callable | None = None,
            streams: StreamRunner | None = None) -> Rewritten:
    """sql (a query, at ``offset`` in ``full_sql``) with every cep_match / cep_view table
    function call replaced (table_function.py; ``views`` = the pattern-view registry) and
    then every clause replaced by a generated name bound to its result in ``frames``
    (shared by nested rewrites of the same statement). ``clause_runner(df, plan, source)``,
    when given, computes a batch clause's result from its input and plan instead of
    run_plan (the workload's shared pass); returning None keeps run_plan. ``streams``
    runs the clauses whose input is a stream (api/ passes the streaming backend)."""
    original_full = sql if full_sql is None else full_sql
    frames = {} if frames is None else frames
    tf = _table_functions(spark, sql, offset, original_full, finder, planner, views or {},
                          frames, streams)
    full = original_full
    if tf.edits:  # the clause pass works on the edited statement
        full = original_full[:offset] + tf.sql + original_full[offset + len(sql):]
    sql = tf.sql
    find = finder or default_finder()
    plan_query = planner or default_planner()
    result = Rewritten(sql, [ClauseRun(r.view, r.source, r.pattern) for r in tf.runs], frames)

    def run_clause(site, source: Source) -> str:
        df = _source_frame(spark, source, full, site, frames)
        if df.isStreaming:
            return _run_streaming_clause(spark, df, site, source, full, offset, plan_query,
                                         result, frames, require_streams(streams),
                                         clause_runner, _task_error_locator(
                                             site.spec, full, original_full, tf.edits))
        with _clause_errors(full, site, offset):
            inputs = planning_inputs(spark, df)
            spec = bind_subqueries(site.spec, lambda sub: _scalar(spark, sub, full))
            locate = _task_error_locator(spec, full, original_full, tf.edits)
            plan = remember_clause(spark, plan_query(spec, _schema_of(df), full, **inputs),
                                   locate)
            hooked = None if clause_runner is None else clause_runner(df, plan, source)
            # unpartitioned, time-windowed: slices cut from the relevant rows only
            sliced = None if hooked is not None else \
                slice_plan(spark, relevant_rows(df, plan), plan, **inputs)
            if sliced is not None:  # (plan.explain notes it; the sliced plan is internal)
                df = sliced.frame
                plan = remember_clause(spark, default_planner()(
                    sliced.spec, arrow_schema(df), full, **sliced.planning_inputs), locate)
            out = hooked if hooked is not None else \
                (sliced.run if sliced is not None else run_plan)(df, plan)
            if sliced is not None:
                out = sliced.finish(out)
            out = _renamed(site, out)
        view = new_view_name()
        frames[view] = out
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


def _run_streaming_clause(spark, df, site, source, full, offset, plan_query, result,
                          frames: dict[str, DataFrame], streams: StreamRunner,
                          clause_runner=None, locate=None) -> str:
    """A clause over a streaming source: the streaming backend (no sampling, no slicing),
    or ``clause_runner`` (a workload's one streaming pass). ``locate``: how the driver
    locates its tasks' errors that know no position (remember_clause)."""
    get = conf_reader(spark)
    options = options_from_conf(get)
    # no driver sample of a stream: each key plans from its own rows and re-plans as
    # they drift (backends/streaming/replanning.py)
    statistics = InWorkerStatistics(worker_sample_rows(get), adaptive=adaptive_settings(get))
    view = new_view_name()
    with _clause_errors(full, site, offset):
        plan = plan_query(site.spec, arrow_schema(df), full, options=options,
                          statistics=statistics)
        if locate is not None:
            plan = remember_clause(spark, plan, locate)
        hooked = None if clause_runner is None else clause_runner(df, plan, source)
        # late rows listed under the view's name (a workload counts its own)
        out = _renamed(site, hooked if hooked is not None
                       else streams.run_plan(df, plan, view))
    frames[view] = out
    result.clauses.append(ClauseRun(view, source.display,
                                    getattr(site.spec, "pattern_text", "") or ""))
    return view


def _task_error_locator(spec, full: str, original: str, edits) -> Callable:
    """How the driver locates an error a clause's task raised without a position: as
    in-process (runtime/error_position.py), in the statement as the user wrote it."""
    def locate(err: CepError) -> CepError:
        found = located_run_error(err, spec, full)
        if not edits:
            return found
        return type(found)(found.message, sql=original, pos=original_pos(found.pos, edits))
    return locate


@contextmanager
def _clause_errors(full: str, site, offset: int):
    """Errors while planning or wiring one clause, located in the user's statement."""
    try:
        yield
    except CepError as e:
        raise e.with_sql(full) from None
    except AnalysisException as e:
        raise CepAnalysisError(f"cannot evaluate MATCH_RECOGNIZE: {_message(e)}",
                               sql=full, pos=site.start + offset) from None


def _renamed(site, out: DataFrame) -> DataFrame:
    """The clause's output under the column aliases written after it (AS m(a, b))."""
    if not getattr(site, "column_aliases", ()):  # none: no schema request (Spark Connect)
        return out
    names = clause_output_names(site, out.columns)
    return out if names == out.columns else out.toDF(*names)


_DRIVER_STATISTICS: ContextVar[bool] = ContextVar("cepsql_driver_statistics", default=False)


@contextmanager
def driver_statistics():
    """Inside the block, clauses are planned from the driver-side sample whatever
    cepsql.stats.mode says (EXPLAIN: it shows the estimates and runs nothing)."""
    token = _DRIVER_STATISTICS.set(True)
    try:
        yield
    finally:
        _DRIVER_STATISTICS.reset(token)


def _schema_of(df: DataFrame):
    """arrow_schema(df), once per DataFrame inside ``conf_snapshot`` (the schema follows
    the session's time zone conf, fixed there; a workload's views read one source)."""
    memo = snapshot_memo()
    if memo is None:
        return arrow_schema(df)
    key = ("arrow schema", id(df))
    if key not in memo:  # the entry keeps df alive: its id is not reused meanwhile
        memo[key] = (df, arrow_schema(df))
    return memo[key][1]


def planning_inputs(spark: SparkSession, df: DataFrame) -> dict:
    """Planner options from the session's conf and the statistics source: each task's
    own first rows (cepsql.stats.mode=worker, the default: no extra Spark job) or a lazy,
    cached driver-side sample (driver, and always under ``driver_statistics``)."""
    get = conf_reader(spark)
    options = options_from_conf(get)
    in_worker = stats_mode(get) == "worker"
    if in_worker and not _DRIVER_STATISTICS.get():
        return {"options": options,
                "statistics": InWorkerStatistics(worker_sample_rows(get),
                                                 adaptive=adaptive_settings(get))}

    def statistics(spec):
        return CACHE.get_or_estimate(spec, df, sample_rows=options.sample_rows,
                                     time_budget_s=options.sample_seconds)
    if in_worker:  # EXPLAIN: a driver sample, noted as such
        return {"options": options,
                "statistics": DriverSampleForExplain(statistics, worker_sample_rows(get))}
    return {"options": options, "statistics": statistics}


def _table_functions(spark, sql, offset, full, finder, planner, views, frames,
                     streams) -> TfRewritten:
    def run_query(query: str) -> DataFrame:
        inner = rewrite(spark, query, finder=finder, planner=planner, views=views,
                        frames=frames, streams=streams)
        return sql_with_frames(spark, inner.sql, frames)
    return rewrite_table_functions(spark, sql, offset=offset, full_sql=full, views=views,
                                   run_query=run_query, frames=frames)


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


def _source_frame(spark: SparkSession, source: Source, full: str, site,
                  frames: dict[str, DataFrame]) -> DataFrame:
    try:
        if source.sql is None:
            return table_or_frame(spark, source.table, frames)
        return sql_with_frames(spark, source.sql, frames)
    except AnalysisException as e:
        raise CepAnalysisError(f"cannot read the MATCH_RECOGNIZE input {source.display}: "
                               f"{_message(e)}", sql=full,
                               pos=getattr(site, "source_offset", None)) from None


def run_sql(spark: SparkSession, rewritten: Rewritten, original: str) -> DataFrame:
    """spark.sql on rewritten text; Spark's errors become cepsql errors at the position in
    the user's text (spark_positions.py)."""
    try:
        df = sql_with_frames(spark, rewritten.sql, rewritten.frames)
    except ParseException as e:
        raise _located(CepSyntaxError, e, rewritten, original) from None
    except AnalysisException as e:
        raise _located(CepAnalysisError, e, rewritten, original) from None
    remember_statement(spark, seen_text(rewritten.sql, rewritten.frames), original)
    return df


def _located(cls: type[CepError], e: Exception, rewritten: Rewritten, original: str) -> CepError:
    message, pos, generated = located(e, seen_text(rewritten.sql, rewritten.frames), original)
    if pos is None or generated:
        message = _explain(message, rewritten)
    return cls(message, sql=original, pos=pos)


def _message(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _explain(msg: str, rewritten: Rewritten) -> str:
    if rewritten.clauses:
        names = ", ".join(c.view for c in rewritten.clauses)
        msg += (f" (in the statement as rewritten by cepsql; {names} are cepsql's views holding "
                "the MATCH_RECOGNIZE results)")
    return msg
