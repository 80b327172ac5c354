"""``spark.cep``: run statements containing MATCH_RECOGNIZE, and remember the pattern views
they define (so later tooling can list and plan them together).

Here the batch and the streaming paths meet: the Spark backend runs every statement and
hands each input that is a stream to the streaming backend (``STREAMING``), which this
module gives it -- the two backends never import each other."""
from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Callable

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from cepsql import parse
from cepsql.errors import CepAnalysisError
from cepsql.explain.analyze import clause_blocks
from cepsql.parse.splice import new_view_name, normalize_name
from cepsql.explain.svg import clauses_svg
from cepsql.exprs.spark_conf import conf_snapshot
from cepsql.backends.spark.analyze import SparkAnalysis
from cepsql.backends.spark.profile_cache import ProfileCache
from cepsql.backends.spark.rewrite import (default_finder, default_planner, driver_statistics,
                                           rewrite, run_sql)
from cepsql.backends.spark.streams import StreamRunner
from cepsql.backends.spark.task_errors import quiet_task_logs
from cepsql.backends.spark.tf_plain import register as register_table_functions
from cepsql.backends.spark.workload import Workload
from cepsql.backends.streaming import run_streaming_plan
from cepsql.backends.streaming.late import LateRows
from cepsql.backends.streaming.workload import streaming_matches, streaming_pass
from cepsql.debugging.run import near_misses_frame, single_clause, trace_frame
from cepsql.debugging.slice import MAX_ROWS
from cepsql.debugging.spark_slice import (clause_source, collect_slice, spread_near_misses,
                                          to_spark)
from cepsql.debugging.trace import MAX_STEPS

# what the Spark backend calls when a clause's or a workload's input is a stream
STREAMING = StreamRunner(run_plan=run_streaming_plan, shared_pass=streaming_pass,
                         matches=streaming_matches)


@dataclass
class PatternView:
    name: str
    pattern: str
    source: str
    sql: str
    # (normalized source table, semanticHash of what it resolved to when the view was
    # created): the Spark view keeps that plan, so a source replaced since makes the view
    # stale -- a workload recomputing it over the new source would change its rows
    source_ids: tuple = ()
    # what parsing the view's text gave (parsing depends on the text alone): the CREATE
    # statement and the clause sites found in it, kept so a workload recording the view
    # does not tokenize and parse it again per build; a replaced view is a new PatternView
    parsed: "ParsedView" = field(default_factory=lambda: ParsedView(), repr=False,
                                 compare=False)


class ParsedView:
    """A pattern view's parse results: its CREATE statement, and ``finder`` (the
    session's clause finder memoized on (text, offset, statement))"""

    def __init__(self, create: object | None = None, sites: dict | None = None):
        self.create = create
        self.sites: dict[tuple, list] = {} if sites is None else sites

    def finder(self, find: Callable | None) -> Callable:
        """find (the session's finder, or the default) answering from the memo."""
        find = find or default_finder()
        sites = self.sites

        def memoized(sql: str, *, offset: int = 0, full_sql: str | None = None) -> list:
            key = (sql, offset, full_sql)
            if key not in sites:
                sites[key] = find(sql, offset=offset, full_sql=full_sql)
            return list(sites[key])
        return memoized


class CepSession:
    """cepsql's statement runner bound to one SparkSession (obtain it as ``spark.cep``)."""

    def __init__(self, spark: SparkSession, *, finder: Callable | None = None,
                 planner: Callable | None = None, dialect: object | None = None):
        self.spark = spark
        # parse_create_view / parse_drop_view / split_statements (tests pass a fake)
        self._dialect = parse if dialect is None else dialect
        self.streams = STREAMING  # inputs that are streams go to the streaming backend
        self._finder = finder
        self._planner = planner
        self._views: dict[str, PatternView] = {}
        self._views_version = 0  # bumped on every view change (workloads rebuild on it)
        self._workloads: dict[tuple, object] = {}  # selector -> Workload (keeps its pass)
        self._late_rows = LateRows()  # streaming clauses' and workload passes' late rows
        # the ordered scan's partition profiles per file set (profile_cache.py)
        self.profile_cache = ProfileCache()

    # public API -------------------------------------------------------------
    def sql(self, text: str) -> DataFrame:
        """Run one statement (a query, CREATE [OR REPLACE] TEMPORARY VIEW, DROP VIEW, or any
        other Spark statement) and return its DataFrame; several ';'-separated statements run
        in order and the last one's DataFrame is returned."""
        statements = _split(text, self._dialect)
        if not statements:
            raise CepAnalysisError("no SQL statement given", sql=text)
        result = None
        for stmt in statements:
            with conf_snapshot():  # the session's conf read once (Spark Connect: one request)
                result = self._statement(stmt)
        return result

    def clear_cache(self) -> None:
        """Forget the ordered scan's cached partition profiles (the next query over any
        file source runs its profile job again)."""
        self.profile_cache.clear()

    def late_rows(self) -> dict[str, int]:
        """Rows dropped as late (behind the watermark) by each streaming clause started in
        this session, keyed by the clause's generated view name (Spark accumulators: a
        retried task may count its rows twice; on Spark Connect the counts of a
        micro-batch's progress, listed a moment after the micro-batch ends)."""
        return self._late_rows.counts()

    def views(self) -> list[dict]:
        """Pattern views defined through this session: {name, pattern, source, sql}."""
        return [{"name": v.name, "pattern": v.pattern, "source": v.source, "sql": v.sql}
                for v in self._views.values()]

    def explain(self, text: str, file: str | None = None, analyze: bool = False) -> str:
        """EXPLAIN of a query (or of ``EXPLAIN [ANALYZE] <query>``): each MATCH_RECOGNIZE
        clause's plan, then the Spark SQL the statement runs as. Nothing is executed,
        unless ``analyze`` (or ANALYZE): then the statement runs (its rows are dropped)
        and each clause's block adds what the run measured (backends/spark/analyze.py).
        ``EXPLAIN FORMAT SVG <query>`` returns the plans drawn as SVG instead; ``file``
        (a path ending in .svg) also writes that drawing there."""
        dialect = self._dialect
        parse_explain = getattr(dialect, "parse_explain", None)
        explained = parse_explain(text) if parse_explain else None
        query = explained[0] if explained else text
        fmt = getattr(dialect, "explain_format", None)
        svg = explained is not None and fmt is not None and fmt(text) == "SVG"
        is_analyze = getattr(dialect, "explain_analyze", None)
        analyze = analyze or (explained is not None and is_analyze is not None
                              and is_analyze(text))
        recorded: list[tuple[object, object]] = []
        base = self._planner or default_planner()

        def recording_planner(spec, schema, sql, **planning):
            plan = base(spec, schema, sql, **planning)
            recorded.append((spec, plan))
            return plan

        analysis = SparkAnalysis() if analyze else None
        # EXPLAIN shows the driver's sample; ANALYZE plans as the statement would run
        sampling = nullcontext() if analyze else driver_statistics()
        with sampling, conf_snapshot():
            rewritten = rewrite(self.spark, query, finder=self._finder,
                                planner=recording_planner, views=self._views,
                                streams=self.streams,
                                clause_runner=analysis.run_clause if analysis else None)
        analyzed, returned = None, None
        if analysis is not None:
            returned = _run_for_analysis(run_sql(self.spark, rewritten, query))
            analysis.finish()
            analyzed = analysis.for_plans([plan for _, plan in recorded])
        if svg or file is not None:
            drawing = clauses_svg(recorded, analyzed, file=file)
            if svg:
                return drawing
        blocks = clause_blocks(recorded, analyzed)
        generated = [f"  `{run.view}` := MATCH_RECOGNIZE clause {i} over {run.source}"
                     + (f", PATTERN ({run.pattern})" if run.pattern else "")
                     for i, run in enumerate(rewritten.clauses, 1)]
        blocks.append("== Spark SQL after rewriting ==\n" + rewritten.sql.strip()
                      + ("\nwhere\n" + "\n".join(generated) if generated else ""))
        if returned is not None:
            blocks.append(f"== Statement ==\nrows returned: {returned[0]:,}; "
                          f"wall time of the run: {returned[1]:.3f} s")
        return "\n\n".join(blocks)

    def trace(self, query: str, *, partition: dict | None = None,
              rows: tuple[int, int] | None = None, max_steps: int = MAX_STEPS,
              max_rows: int = MAX_ROWS) -> DataFrame:
        """The matcher's steps for the query's MATCH_RECOGNIZE clause over a slice of its
        input (``partition``: PARTITION BY column -> value; ``rows=(first, stop)``:
        positions after ORDER BY), as ``cepsql.trace`` computes them in-process: Spark
        selects and collects the slice (at most ``max_rows`` rows), the steps are traced
        on the driver."""
        stmt, spec, table = self._trace_input(query, partition, rows, max_rows)
        return to_spark(self.spark, trace_frame(stmt, spec, table, partition=partition,
                                                rows=rows, max_steps=max_steps,
                                                max_rows=max_rows))

    def near_misses(self, query: str, k: int = 10, *, per_partition: bool = False,
                    partition: dict | None = None, rows: tuple[int, int] | None = None,
                    max_steps: int = MAX_STEPS, max_rows: int = MAX_ROWS) -> DataFrame:
        """The ``k`` longest attempts that did not complete (``cepsql.near_misses``) over
        the slice ``trace`` would trace. Without ``partition`` and ``rows``, every
        partition is searched in Spark tasks (``max_rows`` and ``max_steps`` then bound
        each partition)."""
        if partition is None and rows is None:
            stmt, site = single_clause(query)
            source = clause_source(self.spark, site, self.sql)
            spread = spread_near_misses(source, stmt, site.spec, k, per_partition,
                                        max_steps, max_rows)
            if spread is not None:
                return spread
        stmt, spec, table = self._trace_input(query, partition, rows, max_rows)
        return to_spark(self.spark, near_misses_frame(
            stmt, spec, table, k, per_partition=per_partition, partition=partition,
            rows=rows, max_steps=max_steps, max_rows=max_rows))

    def _trace_input(self, query: str, partition, rows, max_rows: int):
        stmt, site = single_clause(query)
        source = clause_source(self.spark, site, self.sql)
        return stmt, site.spec, collect_slice(source, site.spec, partition, rows, max_rows)

    def workloads(self) -> dict[str, list[str]]:
        """Pattern views grouped by source table: each group is one workload, the unit a
        multi-pattern plan shares work across (one scan, shared subpatterns). A view whose
        source was replaced after the view was created belongs to none (``stale_views``)."""
        stale = self.stale_views()
        groups: dict[str, list[str]] = {}
        for view in self._views.values():
            if view.name in stale:
                continue
            for source in view.source.split(", "):
                groups.setdefault(normalize_name(source), []).append(view.name)
        return groups

    def stale_views(self) -> dict[str, str]:
        """{view: source} for pattern views whose source table now resolves to another
        plan than when the view was created (replaced, or dropped): the view still answers
        over the old source when queried, so it cannot join a pass over the new one."""
        current: dict[str, int | None] = {}
        stale = {}
        for view in self._views.values():
            for source, identity in view.source_ids:
                if source not in current:
                    current[source] = _source_identity(self.spark, source)
                if current[source] != identity:
                    stale[view.name] = source
                    break
        return stale

    def workload(self, views: str | list[str]) -> Workload:
        """The pattern views reading a source (``workload("ticks")``) or an explicit list
        of views, evaluated by one shared pass: ``dataframes()``, ``matches()``,
        ``explain()`` (see cepsql/backends/spark/workload.py). Unknown names raise
        CepAnalysisError. The same selector gives the same object: its persisted pass is
        reused until the views change (``close()`` unpersists it)."""
        key = (("source", normalize_name(views)) if isinstance(views, str)
               else ("views", tuple(normalize_name(v) for v in views)))
        workload = self._workloads.get(key)
        if workload is None:
            workload = Workload(self, views, self.streams)  # checks the names first
            self._workloads[key] = workload
        else:
            workload.names  # noqa: B018  (a view may have been dropped since)
        return workload

    def rewrite(self, query: str) -> str:
        """The Spark SQL text a query runs as (clauses replaced by generated names, which
        are bound to DataFrames only while the statement runs, never put in the catalog);
        evaluates the clauses. For debugging."""
        return rewrite(self.spark, query, finder=self._finder, planner=self._planner,
                       views=self._views, streams=self.streams).sql

    # statements -------------------------------------------------------------
    def _statement(self, stmt: str) -> DataFrame:
        dialect = self._dialect
        needs_rewrite = getattr(dialect, "needs_rewrite", None)
        if needs_rewrite is not None and not needs_rewrite(stmt) and \
                _explain_workload(dialect, stmt) is None:
            df = self.spark.sql(stmt)  # not cepsql's: Spark's statement, result and errors
            self._forget_view(dialect.changed_view(stmt))
            return df
        create = dialect.parse_create_view(stmt)
        if create is not None:
            return self._create_view(stmt, create)
        workload = _explain_workload(dialect, stmt)
        if workload is not None:
            text = self._explain_workload(stmt, workload)
            return self.spark.createDataFrame([(text,)], "plan string")
        parse_explain = getattr(dialect, "parse_explain", None)
        if parse_explain is not None and parse_explain(stmt) is not None:
            text = self.explain(stmt)
            return self.spark.createDataFrame([(text,)], "plan string")
        drop = dialect.parse_drop_view(stmt)
        if drop is not None:
            df = self.spark.sql(stmt)
            name = drop[0] if isinstance(drop, tuple) else drop.name  # (name, if_exists)
            self._views.pop(normalize_name(name), None)
            self._views_changed()
            return df
        stmt, bound = self._workload_calls(stmt)
        rewritten = rewrite(self.spark, stmt, finder=self._finder, planner=self._planner,
                            views=self._views, streams=self.streams)
        rewritten.frames.update(bound)
        if not rewritten.clauses and rewritten.sql == stmt and not bound:
            return self.spark.sql(stmt)
        return run_sql(self.spark, rewritten, stmt)

    def _forget_view(self, name: str | None) -> None:
        """A view Spark replaced or dropped is no pattern view any more."""
        if name is not None and self._views.pop(normalize_name(name), None) is not None:
            self._views_changed()

    def _views_changed(self) -> None:
        """A pattern view was created, replaced or dropped: every workload rebuilds on its
        next call, so the passes they persisted are released now (not when, if ever,
        they are called again)."""
        self._views_version += 1
        for workload in self._workloads.values():
            workload.refresh()

    def _workload_calls(self, stmt: str) -> tuple[str, dict[str, DataFrame]]:
        """``cep_workload('src')`` table function calls replaced by generated names bound
        to the workload's matches()."""
        frames: dict[str, DataFrame] = {}
        if "cep_workload" not in stmt.lower():
            return stmt, frames
        for start, end, name, pos in reversed(parse.find_workload_calls(stmt)):
            try:
                matches = self.workload(name).matches()
            except CepAnalysisError as e:
                raise CepAnalysisError(e.message, sql=stmt, pos=pos) from None
            generated = new_view_name()
            frames[generated] = matches
            stmt = stmt[:start] + generated + stmt[end:]
        return stmt, frames

    def _explain_workload(self, stmt: str, target: tuple) -> str:
        names, pos = target
        is_analyze = getattr(self._dialect, "explain_analyze", None)
        try:
            return self.workload(names).explain(
                analyze=is_analyze is not None and is_analyze(stmt))
        except CepAnalysisError as e:
            raise CepAnalysisError(e.message, sql=stmt, pos=pos) from None

    def _create_view(self, stmt: str, create) -> DataFrame:
        name = create.name
        exists = self.spark.catalog.tableExists(create.quoted)
        if exists and create.if_not_exists:
            return _empty(self.spark)
        if exists and not create.or_replace:
            raise CepAnalysisError(f"view {name} already exists (use CREATE OR REPLACE)",
                                   sql=stmt)
        parsed = ParsedView(create)  # kept with the view when stmt is its recorded text
        rewritten = rewrite(self.spark, create.query_text, offset=create.query_offset,
                            full_sql=stmt, finder=parsed.finder(self._finder),
                            planner=self._planner, views=self._views, streams=self.streams)
        self._views_changed()
        if not rewritten.clauses:
            self._views.pop(normalize_name(name), None)
            if rewritten.sql == create.query_text:
                return self.spark.sql(stmt)
        df = run_sql(self.spark, rewritten, stmt)
        if create.columns:
            df = _renamed(df, create.columns, stmt, create.query_offset)
        df.createOrReplaceTempView(create.quoted)
        clauses = rewritten.clauses
        if not clauses:  # e.g. a view over cep_view(...): an ordinary view
            return _empty(self.spark)
        self._views[normalize_name(name)] = PatternView(
            name=name,
            pattern="; ".join(c.pattern for c in clauses),
            source=", ".join(dict.fromkeys(c.source for c in clauses)),
            sql=stmt.strip(),
            source_ids=_source_ids(self.spark, clauses),
            parsed=parsed if stmt == stmt.strip() else ParsedView())
        return _empty(self.spark)


def _run_for_analysis(df: DataFrame) -> tuple[int, float]:
    """Run a statement's DataFrame to the end, its rows dropped (the noop sink computes
    every column); returns (rows, wall seconds)."""
    seen = Observation()
    started = time.perf_counter()
    df.observe(seen, F.count(F.lit(1)).alias("rows")).write.format("noop") \
        .mode("overwrite").save()
    elapsed = time.perf_counter() - started
    return int(seen.get["rows"]), elapsed


def _renamed(df: DataFrame, columns: tuple[str, ...], stmt: str, pos: int) -> DataFrame:
    """``CREATE TEMPORARY VIEW v (a, b) AS query``: the query's columns renamed."""
    if len(columns) != len(df.columns):
        raise CepAnalysisError(f"the view's column list has {len(columns)} names but its "
                               f"query returns {len(df.columns)} columns", sql=stmt, pos=pos)
    return df.toDF(*columns)


def _explain_workload(dialect, stmt: str):
    parse = getattr(dialect, "parse_explain_workload", None)
    return parse(stmt) if parse is not None else None


def _source_identity(spark: SparkSession, name: str) -> int | None:
    """The semanticHash of what table ``name`` resolves to now; None when it does not
    resolve (dropped) or is not a table name (a subquery's display)."""
    try:
        return spark.table(name).semanticHash()
    except Exception:
        return None


def _source_ids(spark: SparkSession, clauses) -> tuple:
    """(normalized source, identity) for every source table the clauses read."""
    ids = []
    for source in dict.fromkeys(normalize_name(c.source) for c in clauses):
        identity = _source_identity(spark, source)
        if identity is not None:
            ids.append((source, identity))
    return tuple(ids)


def _empty(spark: SparkSession) -> DataFrame:
    """What Spark returns for DDL: an empty DataFrame without columns."""
    return spark.range(0).select()


def _split(text: str, dialect) -> list[str]:
    if hasattr(dialect, "split_statements"):
        parts = dialect.split_statements(text)
        return [p if isinstance(p, str) else getattr(p, "text", p[0]) for p in parts
                if (p if isinstance(p, str) else getattr(p, "text", p[0])).strip()]
    stripped = text.strip()
    while stripped.endswith(";"):
        stripped = stripped[:-1].rstrip()
    return [stripped] if stripped else []


def register_quietly(spark: SparkSession) -> bool:
    """Register cep_match / cep_view for plain spark.sql and quiet the console for task
    errors cepsql reports itself (task_errors.py); never fails the caller (the
    spark.cep.sql path does not need them)."""
    if getattr(spark, "_cepsql_registered", False):
        return True
    quiet_task_logs(spark)
    try:
        register_table_functions(spark)
    except Exception:  # pragma: no cover - e.g. a Spark Connect server without Python UDTFs
        return False
    try:  # once per session: registering again only makes Spark warn about replacing
        spark._cepsql_registered = True
    except AttributeError:  # pragma: no cover - slotted session classes
        pass
    return True


def attach(session_cls: type) -> None:
    """Give session_cls a ``cep`` property returning the session's CepSession."""
    def cep(self) -> CepSession:
        existing = getattr(self, "_cepsql_session", None)
        if existing is None:
            existing = CepSession(self)
            register_quietly(self)
            try:
                self._cepsql_session = existing
            except AttributeError:  # pragma: no cover - slotted session classes
                pass
        return existing
    if not isinstance(getattr(session_cls, "cep", None), property):
        session_cls.cep = property(cep, doc="cepsql statement runner for this session.")


__all__ = ["CepSession", "PatternView", "STREAMING", "attach", "register_quietly"]
