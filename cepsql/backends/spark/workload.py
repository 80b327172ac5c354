"""Workloads on Spark: many pattern views over one source computed by ONE shared pass.

``spark.cep.workload("ticks")`` (the pattern views over ticks) or
``spark.cep.workload(["v1", "v2"])``. Every batch MATCH_RECOGNIZE clause of the views is
planned as when the view is queried alone; the clauses over one source are then grouped
by partitioning (runtime/one_pass.py): per group one shuffle + sort and one
``mapInArrow(SharedPassWorker)``; the groups' tagged outputs are unioned and persisted
once. Each view's SQL is rewritten once: its clauses' results are placeholders while the
plans are recorded, then bound to their rows in the persisted relation (filter by tag,
the clause's own final projection), so SQL around a clause still applies; a view that is
just ``SELECT * FROM`` its clause is that projection (no Spark SQL). A statement that
needs a clause's rows while rewriting (a clause over another clause) is recorded with
empty typed stand-ins and replayed; the inner clause is in the pass, the outer runs on its
own. Collecting every view runs the source scan, shuffles and evaluation once.
``dataframes()`` of a small pass (at most ``cepsql.workload.localRows`` tagged rows,
default 100,000) runs it at once and collects it once: each view's frame is its slice of
those rows as a local relation (local_pass.py), so collecting a view runs no Spark job
over the cache (30 views: 34 -> 6 jobs, bench_workload_spark.py --kind stock).

In the pass, CEP plans' relevance filters (analyze/relevance.py) drop the rows no pattern
of a group can use before the shuffle (when every pattern has one) and each pattern is fed
only its own relevant rows; row-local prepared columns not used by the shuffle or sort
are computed after the sort, in the task with Arrow kernels where that gives Spark's type.

``matches()`` puts every clause's matches in one DataFrame: ``view`` STRING,
``partition`` VARIANT (object of the PARTITION BY columns), ``match_number`` BIGINT,
``measures`` VARIANT (object of the clause's other output columns). VARIANT, not a
struct: views have different measures, and a struct per view would make the schema as
wide as the workload; a variant object keeps each value's own type, and
``variant_get(measures, '$.x', '<type>')`` returns it exactly -- DECIMAL(38,10), BIGINT
near 2^63, TIMESTAMP (microseconds) and NaN survive (tests/test_workload_spark.py checks
each). The matches are those of the clauses themselves (before any SQL around them). It is one projection over the
persisted pass (a CASE over the tag, one branch per distinct final projection), not a
union of one branch per view. The persisted pass is compact: one struct column per
distinct worker row type, shared by the views whose measures have equal types.

The workload follows the session's view registry: after CREATE OR REPLACE / DROP VIEW the
next call rebuilds it (the session unpersists the previous pass at once, and a call
that fails leaves nothing persisted); ``close()`` unpersists too.
"""
from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import reduce

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.errors import AnalysisException
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, ByteType, DataType, DateType,
                               DecimalType, DoubleType, FloatType, IntegerType, LongType,
                               MapType, NullType, ShortType, StringType, StructType,
                               TimestampNTZType, TimestampType)

from cepsql.errors import CepAnalysisError, CepError, CepUnsupportedError
from cepsql.algebra.expressions import FIELD_ACCESS, ColumnRef, Expr, FunctionCall, Literal, children
from cepsql.algebra.rowrefs import rebuild
from cepsql.parse import parse_create_view
from cepsql.parse.splice import normalize_name
from cepsql.exprs.spark_arrow import arrow_schema
from cepsql.exprs.spark_conf import conf_reader, conf_snapshot, conf_value
from cepsql.exprs.spark_sql import quote_identifier, quote_string, to_spark_sql
from cepsql.stats import estimate_from_table
from cepsql.stats.sample_memo import SampleMemo
from cepsql.stats.worker import worker_sample_rows
from cepsql.sharing import options_from_conf as sharing_options_from_conf
from cepsql.compile.query_plan import QueryPlan
from cepsql.runtime.adaptive import adaptive_settings
from cepsql.runtime.one_pass import (TAG, SharedPass, SharedPassWorker, computed_type, plan_pass,
                                   task_group, unshared_reason)
from cepsql.explain.summary import summarize
from cepsql.explain.analyze import pass_block
from cepsql.explain.workload import describe_workload, workload_svg
from cepsql.backends.spark.columns import expression, shuffle_partitions, sort_column
from cepsql.backends.spark.execute import (RELEVANCE_CONF, co_located, final_frame, map_in_arrow,
                                           run_plan)
from cepsql.backends.spark.frames import GENERATED_NAME
from cepsql.backends.spark.local_pass import LocalPass, projected
from cepsql.backends.spark.rewrite import Rewritten, default_planner, rewrite, run_sql
from cepsql.runtime.error_position import shared_column_sites
from cepsql.runtime.workers import bind_worker
from cepsql.backends.spark.strict_breaks import with_global_breaks
from cepsql.backends.spark.analyze import session_ansi
from cepsql.backends.spark.workload_analyze import PassAnalysis
from cepsql.backends.spark.workload_slicing import PassSlicing, slice_pass, sliced_rows
from cepsql.backends.spark.slicing import unsliced_spec
from cepsql.analyze.measures import MATCH_NUMBER_COLUMN
from cepsql.backends.spark.streams import StreamRunner, require_streams

__all__ = ["Workload", "sharing_settings"]


@dataclass
class _Clause:
    view: str
    source: str          # normalized source display (the pass it joins)
    frame: DataFrame     # the clause's input
    plan: QueryPlan
    index: int = -1      # pattern index in its source's pass (-1: runs on its own)
    own: bool = False    # reads another clause's result: not in the pass
    # what the planner was given: (spec, sql, planning inputs), to plan it sliced again
    asked: tuple | None = None
    # its plan in a time-sliced pass (workload_slicing.py; None: the pass runs ``plan``)
    sliced: QueryPlan | None = None


@dataclass
class _Built:
    version: int
    names: list[str]
    clauses: list[_Clause] = field(default_factory=list)
    passes: dict[str, tuple[SharedPass, DataFrame]] = field(default_factory=dict)
    # source -> the pass's tagged rows on the driver (dataframes() of a small pass: each
    # view's frame is a local relation of its own rows, collecting it runs no Spark job)
    local: dict[str, LocalPass] = field(default_factory=dict)
    # source -> its pass's time slicing (the sliced source the pass reads), if any
    slicing: dict[str, PassSlicing] = field(default_factory=dict)
    frames: dict[str, DataFrame] = field(default_factory=dict)
    # (view, its step 1 record) whose DataFrame dataframes() builds on first use:
    # matches() and cep_workload() never need them (each is JVM calls per view)
    unbound: list = field(default_factory=list)
    # source DataFrame -> its statistics sample being taken while the views are recorded
    samples: "_SamplesAhead" = field(default_factory=lambda: _SamplesAhead())


@dataclass
class _Recorded:
    """Step 1's result for one view: its clauses' plans in order and, when recorded with
    placeholders, the rewritten statement (None: replay the view's SQL)."""
    plans: list[QueryPlan]
    rewritten: Rewritten | None
    pending: list


class _Pending:
    """A clause's result before the shared pass exists: the part of a DataFrame the
    rewrite touches (``columns``, ``toDF`` for ``AS m(a, b)``), with no Spark call."""

    def __init__(self, clause: _Clause, renames: list[str] | None = None):
        self.clause = clause
        self.renames = renames
        self._columns = _LazyNames(clause) if renames is None else list(renames)

    @property
    def columns(self) -> list[str]:
        return self._columns

    def toDF(self, *names: str) -> "_Pending":  # noqa: N802 - DataFrame's name
        return _Pending(self.clause, list(names))

    def frame(self, rows: DataFrame) -> DataFrame:
        """The clause frame under this placeholder's column names."""
        return rows if self.renames is None else rows.toDF(*self.renames)


class _LazyNames(list):
    """A clause's output names, asked of Spark only if the rewrite reads them (an alias
    list ``AS m(a, b)``); compared with itself (no alias list) they stay unasked."""

    def __init__(self, clause: _Clause):
        super().__init__()
        self._clause, self._ready = clause, False

    def _fill(self) -> None:
        if not self._ready:
            self._ready = True
            self.extend(_stand_in(self._clause.frame, self._clause.plan).columns)

    def __eq__(self, other):
        if other is self:
            return True
        self._fill()
        return list.__eq__(self, other)

    __hash__ = None

    def __len__(self):
        self._fill()
        return list.__len__(self)

    def __iter__(self):
        self._fill()
        return list.__iter__(self)

    def __getitem__(self, index):
        self._fill()
        return list.__getitem__(self, index)


class _SourceFrames:
    """The tables the workload's views read, each resolved by Spark once per build (not
    once per view: ``spark.table`` and its schema are JVM round trips)."""

    def __init__(self, spark: SparkSession):
        self.spark = spark
        self.tables: dict[str, DataFrame | None] = {}

    def lookup(self, name: str) -> DataFrame | None:
        if GENERATED_NAME.fullmatch(name):
            return None
        key = normalize_name(name)
        if key not in self.tables:
            try:
                self.tables[key] = self.spark.table(name)
            except AnalysisException:
                self.tables[key] = None  # the rewrite's own lookup reports it
        return self.tables[key]

    def frames(self) -> dict:
        """A frames mapping for one rewrite that also binds the source tables."""
        return _ResolvingFrames(self)


class _ResolvingFrames(dict):
    """rewrite's generated-name -> DataFrame mapping, also answering for source tables
    (frames.table_or_frame looks a table up here before asking Spark)."""

    def __init__(self, sources: _SourceFrames):
        super().__init__()
        self._sources = sources

    def __contains__(self, key) -> bool:
        return dict.__contains__(self, key) or self._sources.lookup(key) is not None

    def __getitem__(self, key):
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        found = self._sources.lookup(key)
        if found is None:
            raise KeyError(key)
        return found


def sharing_settings(spark: SparkSession) -> dict:
    """``cepsql.sharing.algorithm`` / ``.seconds`` and ``cepsql.planner.accessCost`` from the
    Spark conf, checked (sharing.options_from_conf): what the sharing planner seam
    (one_pass.global_plan_for) is given."""
    chosen = sharing_options_from_conf(conf_reader(spark))
    return {"seconds": None, **chosen,
            "algorithm": (chosen.get("algorithm") or "BEST").upper()}


class Workload:
    """Pattern views evaluated together (obtain as ``spark.cep.workload(...)``)."""

    def __init__(self, session, selector: str | list[str], streams: StreamRunner | None = None):
        self._session = session
        self._selector = selector
        self._streams = streams  # the streaming backend, for views over a stream (api/)
        self._built: _Built | None = None
        self.names  # noqa: B018  (unknown workloads / views fail here, not later)

    # public API -------------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        """The workload's views (as registered), in registration order."""
        return self._resolve()

    def dataframes(self) -> dict[str, DataFrame]:
        """{view: DataFrame}: every view from the workload's one shared pass."""
        with self._released_on_error():
            built = self._build()
            if built.unbound:
                _localize(self._session.spark, built)
            for view, record in built.unbound:
                built.frames[view.name] = self._view_frame(view, record, built)
            built.unbound = []
            return {name: built.frames[name] for name in built.names}

    def matches(self) -> DataFrame:
        """One DataFrame of every clause's matches: view, partition (VARIANT), match_number,
        measures (VARIANT); see the module docstring."""
        with self._released_on_error():
            return self._matches()

    def _matches(self) -> DataFrame:
        built = self._build()
        if any(tagged.isStreaming for _, tagged in built.passes.values()):
            return require_streams(self._streams).matches(built.clauses, built.passes)
        parts = [_pass_matches(*built.passes[source],
                               [(c, self._pattern(built, c)) for c in clauses],
                               built.slicing.get(source))
                 for source, clauses in _by_source(built.clauses).items()]
        if not parts:
            spark = self._session.spark
            return spark.createDataFrame([], "view string, partition variant, "
                                             "match_number bigint, measures variant")
        return reduce(DataFrame.unionByName, parts)

    def explain(self, file: str | None = None, analyze: bool = False) -> str:
        """The views, their partitioning groups, each group's global plan (multi-pattern
        graph, DAG with shared nodes marked, costs, search), which patterns run unshared
        and why, and each clause's own plan summary. ``file`` (a path ending in .svg)
        also writes the global plans drawn as DAGs. ``analyze`` (EXPLAIN ANALYZE
        WORKLOAD) runs each shared pass once more, measured, and adds its figures."""
        built = self._build()
        if analyze and any(tagged.isStreaming for _, tagged in built.passes.values()):
            raise CepUnsupportedError("EXPLAIN ANALYZE WORKLOAD runs batch workloads only "
                                      "(this one reads a stream): use EXPLAIN WORKLOAD")
        if file is not None:
            self._write_svg(built, file)
        settings = sharing_settings(self._session.spark)
        lines = [f"== Workload: {', '.join(built.names)} ==",
                 f"views: {len(built.names)}; clauses in shared passes: "
                 f"{sum(c.index >= 0 for c in built.clauses)}; sharing settings: "
                 f"cepsql.sharing.algorithm={settings['algorithm']}, "
                 f"cepsql.sharing.seconds={settings['seconds']}"]
        for source, (shared, _) in built.passes.items():
            lines.append(f"\n== One pass over {source}: {len(shared.groups)} partitioning "
                         f"group(s), one shuffle + sort each, outputs persisted once ==")
            if source in built.slicing:
                lines.append(f"time-sliced (no PARTITION BY): {built.slicing[source].how}")
            by_index = {c.index: c for c in built.clauses if c.source == source}
            for k, group in enumerate(shared.groups, 1):
                lines.append(_group_text(k, group))
                lines += _global_plan_text(group, by_index)
        lines.append("\n== Each clause's own plan ==")
        for c in built.clauses:
            state = "in the shared pass" if c.index >= 0 else "runs on its own"
            lines.append(f"-- view {c.view} ({state}) --\n{summarize(c.plan.spec, c.plan)}")
        if analyze:
            lines += ["", "== Analyze =="] + self._analyzed(built)
        return "\n".join(lines)

    def _analyzed(self, built: _Built) -> list[str]:
        """Each shared pass run again, measured (workload_analyze.py), as text blocks."""
        blocks = []
        relevance = _relevance(self._session.spark) or (lambda plan: None)
        for source, (shared, _) in built.passes.items():
            clauses = [c for c in built.clauses if c.source == source and c.index >= 0]
            analysis = PassAnalysis(source, shared, {c.index: c.view for c in clauses},
                                    relevance)
            sliced = built.slicing.get(source)
            analysis.run(_pass_frame(clauses[0].frame if sliced is None else sliced.frame,
                                     shared, analysis))
            alone = [c.view for c in built.clauses if c.source == source and c.index < 0]
            blocks.append(pass_block(analysis.finish(), alone))
        blocks += [f"view {c.view}: runs on its own, in no shared pass (not measured here: "
                   "EXPLAIN ANALYZE its query)" for c in built.clauses
                   if c.source not in built.passes]
        return blocks

    @staticmethod
    def _write_svg(built, file: str) -> None:
        """The global plan DAG of the first partitioning group that shares sub-patterns
        (EXPLAIN lists every group's plan in text)."""
        drawing = next((workload_svg(group.global_plan, group.workload_patterns)
                        for shared, _ in built.passes.values() for group in shared.groups
                        if group.global_plan is not None and group.global_plan.nodes), None)
        if drawing is None:
            drawing = ('<svg xmlns="http://www.w3.org/2000/svg" width="420" height="40">'
                       '<text x="8" y="24">no sub-pattern sharing in this workload</text></svg>')
        with open(file, "w", encoding="utf-8") as out:
            out.write(drawing)

    def refresh(self) -> None:
        """Drop the persisted pass; the next call rebuilds from the current views."""
        if self._built is not None:
            for _, tagged in self._built.passes.values():
                tagged.unpersist()
        self._built = None

    close = refresh

    @contextmanager
    def _released_on_error(self):
        """A call that fails leaves nothing persisted behind (the next call rebuilds)."""
        try:
            yield
        except BaseException:
            self.refresh()
            raise

    def __del__(self):  # pragma: no cover - garbage collection timing
        try:
            self.refresh()
        except Exception:
            pass

    # building -----------------------------------------------------------------------------
    def _resolve(self) -> list[str]:
        registry = self._session._views
        selector = self._selector
        if isinstance(selector, str):
            groups = self._session.workloads()
            key = normalize_name(selector)
            if key not in groups:
                known = ", ".join(sorted(groups)) or "none"
                raise CepAnalysisError(f"unknown workload {selector}: no pattern view reads "
                                       f"it (workloads by source: {known})")
            return list(groups[key])
        names = []
        stale = self._session.stale_views()
        for name in selector:
            view = registry.get(normalize_name(name))
            if view is None:
                raise CepAnalysisError(f"unknown pattern view {name} in the workload (views "
                                       "defined through spark.cep.sql: "
                                       f"{', '.join(v.name for v in registry.values()) or 'none'})")
            if view.name in stale:
                raise CepAnalysisError(
                    f"pattern view {view.name} reads {stale[view.name]} as it was when the "
                    f"view was created; {stale[view.name]} has been replaced or dropped "
                    f"since, so the view cannot join a shared pass over it: re-create "
                    f"{view.name} (CREATE OR REPLACE TEMPORARY VIEW) or leave it out")
            names.append(view.name)
        return names

    def _build(self) -> _Built:
        version = self._session._views_version
        if self._built is not None and self._built.version == version:
            return self._built
        self.refresh()
        built = _Built(version, self._resolve())
        views = [self._session._views[normalize_name(n)] for n in built.names]
        sources = _SourceFrames(self._session.spark)
        try:
            # one conf read per key for all the views' clauses and the passes' planning
            with conf_snapshot():
                recorded = [self._record(v, built, sources) for v in views]
                self._run_passes(built)
        except BaseException:  # a pass persisted before the failure is released
            for _, tagged in built.passes.values():
                tagged.unpersist()
            raise
        finally:
            built.samples.close()  # (a sample still running finishes on its own)
        built.unbound = list(zip(views, recorded))
        self._built = built
        return built

    def _rewrite(self, view, frames=None, **hooks):
        parsed = view.parsed  # what CREATE VIEW (or an earlier build) parsed of view.sql
        if parsed.create is None:
            parsed.create = parse_create_view(view.sql)
        create = parsed.create
        s = self._session
        return rewrite(s.spark, create.query_text, offset=create.query_offset,
                       full_sql=view.sql, finder=parsed.finder(s._finder), views=s._views,
                       frames=frames, streams=self._streams, **hooks)

    def _record(self, view, built: _Built, sources: "_SourceFrames") -> "_Recorded":
        """Step 1: plan every clause of the view (nothing runs). The clauses' results are
        placeholders (_Pending: no Spark call), so the view's rewritten SQL can be reused
        with the shared pass's frames in step 2; a statement that hands a clause result
        to Spark while rewriting (a clause over another clause) is recorded again with
        empty typed stand-ins and replayed in full."""
        mark = len(built.clauses)
        try:
            return self._record_with(view, built, sources, fast=True)
        except Exception:  # noqa: BLE001 - the general path below reports real errors
            del built.clauses[mark:]
            return self._record_with(view, built, sources, fast=False)

    def _record_with(self, view, built: _Built, sources, *, fast: bool) -> "_Recorded":
        plans: list[QueryPlan] = []
        pending: list[_Pending] = []
        base = self._session._planner or default_planner()

        asked: dict[int, tuple] = {}

        def planner(spec, schema, sql, **planning):
            plan = base(spec, schema, sql, **planning)
            plans.append(plan)
            asked[id(plan)] = (spec, sql, planning)
            return plan

        def runner(df, plan, source):
            clause = _Clause(view.name, normalize_name(source.display), df, plan,
                             asked=asked.get(id(plan)))
            built.clauses.append(clause)
            built.samples.clause_recorded(built.clauses, clause.source, self._session.spark)
            if not fast:
                # a clause over another clause's result runs on its own, after the pass
                clause.own = bool(GENERATED_NAME.search(source.sql or source.table or ""))
                return _stand_in(df, plan)
            pending.append(_Pending(clause))
            return pending[-1]

        rewritten = self._rewrite(view, planner=planner, clause_runner=runner,
                                  frames=sources.frames() if fast else None)
        return _Recorded(plans, rewritten if fast else None, pending)

    def _view_frame(self, view, record: "_Recorded", built: _Built) -> DataFrame:
        """Step 2: the view's DataFrame over the shared pass: its recorded SQL with each
        clause's placeholder bound to the clause's rows from the persisted result (a view
        that is just ``SELECT * FROM`` its one clause is that clause's frame, no Spark
        SQL), or, after a general recording, the view's SQL replayed."""
        if record.rewritten is None:
            return self._replay(view, record.plans, built)
        rewritten = record.rewritten
        frames = dict(rewritten.frames)
        generated = {}
        for name, frame in rewritten.frames.items():
            if isinstance(frame, _Pending):
                generated[name] = frames[name] = frame.frame(self._clause_frame(built,
                                                                                frame.clause))
        if len(generated) == 1:
            (name, frame), = generated.items()
            if re.fullmatch(rf"\s*select\s+\*\s+from\s+`?{name}`?\s*", rewritten.sql,
                            flags=re.IGNORECASE):
                return frame
        return run_sql(self._session.spark,
                       Rewritten(rewritten.sql, rewritten.clauses, frames), view.sql)

    def _run_passes(self, built: _Built) -> None:
        by_source: dict[str, list[_Clause]] = {}
        for c in built.clauses:
            if not c.own:
                by_source.setdefault(c.source, []).append(c)
        spark = self._session.spark
        for source, clauses in by_source.items():
            for i, c in enumerate(clauses):
                c.index = i
            statistics = _driver_statistics(spark, clauses[0].frame,
                                            built.samples.taken(clauses[0].frame))
            frame = clauses[0].frame
            sliced = slice_pass(spark, frame, [(c.plan, c.asked) for c in clauses],
                                self._session._planner or default_planner())
            if sliced is not None:  # the sharing planner sees the clauses as written
                built.slicing[source], plans = sliced
                frame = built.slicing[source].frame
                for c, plan in zip(clauses, plans):
                    c.sliced = plan
                statistics = _unsliced_statistics(statistics)
            settings = {**sharing_settings(spark), "statistics": statistics}
            shared, tagged = _shared_pass(frame, [c.sliced or c.plan for c in clauses],
                                          settings, self._streams, [c.view for c in clauses])
            built.passes[source] = (shared, tagged)

    def _replay(self, view, plans: list[QueryPlan], built: _Built) -> DataFrame:
        """Step 2: the view's SQL with each clause reading the shared pass."""
        queue = list(plans)
        mine = [c for c in built.clauses if c.view == view.name]

        def planner(spec, schema, sql, **planning):
            return queue.pop(0)  # the plans of step 1, in the same order

        def runner(df, plan, source):
            clause = next(c for c in mine if c.plan is plan)
            if clause.index < 0:  # over another clause's result: its own run (run_plan)
                return None
            return self._clause_frame(built, clause)

        rewritten = self._rewrite(view, planner=planner, clause_runner=runner)
        return run_sql(self._session.spark, rewritten, view.sql)

    def _clause_frame(self, built: _Built, clause: _Clause) -> DataFrame:
        """The clause's result: its worker rows from the pass under its own final
        projection (checked by final_frame when the view was created): a slice of a small
        pass's rows on the driver, else read from the persisted pass."""
        shared, tagged = built.passes[clause.source]
        column = shared.column_of(clause.index)
        projection = self._pattern(built, clause).bound.final_projection
        copy = None  # a sliced clause: the worker column flagging a copy's matches
        if clause.sliced is not None:
            read = sliced_rows(projection, built.slicing[clause.source].descending)
            projection, copy = read.projection, read.first
        local = built.local.get(clause.source)
        if local is not None:
            return local.frame(clause.index, column, projection, drop=copy)
        where = f"{quote_identifier(TAG)} = {clause.index}"
        if copy is not None:
            where += f" AND NOT {quote_identifier(column)}.{quote_identifier(copy)}"
        rows = tagged.filter(where).select(f"{quote_identifier(column)}.*")
        return projected(rows, projection)

    @staticmethod
    def _pattern(built: _Built, clause: _Clause):
        shared, _ = built.passes[clause.source]
        return next(p for g in shared.groups for p in g.patterns if p.index == clause.index)


def _by_source(clauses: list[_Clause]) -> dict[str, list[_Clause]]:
    """The clauses in a shared pass, by the pass (source) they are in."""
    out: dict[str, list[_Clause]] = {}
    for c in clauses:
        if c.index >= 0:
            out.setdefault(c.source, []).append(c)
    return out


#: a pass of at most this many tagged rows is collected once by dataframes() and its
#: views' frames read it as a local relation (0: never)
LOCAL_ROWS_CONF = "cepsql.workload.localRows"
LOCAL_ROWS_DEFAULT = 100_000
_MAX_LIMIT = 2 ** 31 - 1  # DataFrame.limit takes a Java int


def _localize(spark: SparkSession, built: _Built) -> None:
    """dataframes() of a small pass: run each batch pass once and, when it holds at most
    cepsql.workload.localRows rows of types Arrow carries exactly, bring its tagged rows
    to the driver once (local_pass.LocalPass): each view's frame is then a local
    relation of its own rows, and collecting it runs no Spark job (instead of one job
    over the cache per view). Larger passes, and types kept out of Arrow, keep frames
    over the persisted pass. One job: at most localRows + 1 rows are collected (which
    also fills the persisted cache matches() reads); more than localRows are dropped
    (a count job first, then the rows, cost two jobs for every small pass)."""
    limit = _local_rows(conf_value(spark, LOCAL_ROWS_CONF, None))
    for source, (_, tagged) in built.passes.items():
        if limit <= 0 or tagged.isStreaming or not _arrow_exact(tagged.schema):
            continue
        rows = (tagged.limit(limit + 1) if limit < _MAX_LIMIT else tagged).toArrow()
        if rows.num_rows <= limit:
            built.local[source] = LocalPass(spark, rows, tagged.schema, TAG)


def _local_rows(text: str | None) -> int:
    """cepsql.workload.localRows, checked (unset: LOCAL_ROWS_DEFAULT)."""
    if text is None or not text.strip():
        return LOCAL_ROWS_DEFAULT
    try:
        return int(text)
    except ValueError:
        raise CepAnalysisError(f"{LOCAL_ROWS_CONF} must be a whole number of rows (0: "
                               f"never), got {text!r}") from None


def _arrow_exact(dtype: DataType) -> bool:
    """Spark type -> Arrow -> Spark gives back the same type and values (intervals, user
    types and variants are left out: their Arrow forms vary across Spark versions)."""
    if isinstance(dtype, StructType):
        return all(_arrow_exact(f.dataType) for f in dtype.fields)
    if isinstance(dtype, ArrayType):
        return _arrow_exact(dtype.elementType)
    if isinstance(dtype, MapType):
        return _arrow_exact(dtype.keyType) and _arrow_exact(dtype.valueType)
    return isinstance(dtype, _ARROW_EXACT)


_ARROW_EXACT = (BooleanType, ByteType, ShortType, IntegerType, LongType, FloatType,
                DoubleType, DecimalType, StringType, BinaryType, DateType, TimestampType,
                TimestampNTZType, NullType)


def _pass_matches(shared: SharedPass, tagged: DataFrame, clauses: list,
                  slicing: PassSlicing | None = None) -> DataFrame:
    """matches() of one pass: ONE projection over the persisted tagged rows (a union of
    one filtered branch per clause would scan them once per view and make Spark plan
    and run hundreds of branches). Each output column is a CASE over the tag with one
    branch per distinct (struct column, final projection): views written from one
    template share a branch, so the expression stays small for hundreds of views.
    A time-sliced pass (``slicing``): the copies' matches are dropped and the match
    number is the whole stream's (workload_slicing.py: a dense rank per view)."""
    tag = quote_identifier(TAG)
    names = {c.index: c.view for c, _ in clauses}
    views = "element_at(array(" + ", ".join(
        quote_string(names.get(i, "")) for i in range(max(names) + 1)) + f"), {tag} + 1)"
    branches: dict[tuple[str, ...], list[int]] = {}
    for clause, pattern in clauses:
        column = ColumnRef(None, shared.column_of(clause.index))
        projection = pattern.bound.final_projection
        keep = order = "NULL"
        if clause.sliced is not None:  # its own columns, not the slice's
            read = sliced_rows(projection, slicing.descending)
            projection = read.projection
            keep = "NOT " + to_spark_sql(_in_struct(ColumnRef(None, read.first), column))
            order = to_spark_sql(_in_struct(ColumnRef(None, read.slice), column))
        final = [(n, _in_struct(e, column)) for n, e in projection]
        keys = set(clause.plan.partition_columns)
        part = [(n, e) for (n, e), (_, own) in zip(final, projection)
                if getattr(own, "column", None) in keys]
        other = [(n, e) for n, e in final if n not in {k for k, _ in part}]
        number = to_spark_sql(_in_struct(ColumnRef(None, MATCH_NUMBER_COLUMN), column))
        branches.setdefault((_variant_object(part), number, _variant_object(other), keep,
                             order), []).append(clause.index)

    def case(k: int) -> str:
        return "CASE " + " ".join(
            f"WHEN {tag} IN ({', '.join(map(str, indices))}) THEN {key[k]}"
            for key, indices in branches.items()) + " END"
    number = case(1)
    if slicing is not None:
        tagged = tagged.where(f"coalesce({case(3)}, true)")
        sliced = ", ".join(str(c.index) for c, _ in clauses if c.sliced is not None)
        rank = (f"dense_rank() OVER (PARTITION BY {tag} ORDER BY {case(4)} "
                f"{'DESC' if slicing.descending else 'ASC'}, {case(1)})")
        number = f"CASE WHEN {tag} IN ({sliced}) THEN {rank} ELSE {case(1)} END"
    return tagged.select(F.expr(views).alias("view"),
                         F.expr(case(0)).alias("partition"),
                         F.expr(f"CAST({number} AS BIGINT)").alias("match_number"),
                         F.expr(case(2)).alias("measures"))


def _in_struct(expr: Expr, struct: ColumnRef) -> Expr:
    """expr with its (worker output) column references read from the struct column."""
    if isinstance(expr, ColumnRef):
        return FunctionCall(FIELD_ACCESS, (struct, Literal(expr.column, "string")))
    kids = children(expr)
    return rebuild(expr, [_in_struct(k, struct) for k in kids]) if kids else expr


def _variant_object(named: list[tuple[str, Expr]]) -> str:
    """Spark SQL of a VARIANT object of the named values (each keeps its own type)."""
    fields = ", ".join(f"{quote_string(n)}, {to_spark_sql(e)}" for n, e in named)
    return f"to_variant_object(named_struct({fields}))"


def _stand_in(df: DataFrame, plan: QueryPlan) -> DataFrame:
    """Step 1's clause result: the clause's columns and types over no rows (never run;
    cheaper than run_plan: no shuffle, sort or pickled worker)."""
    if plan.break_column is not None:
        return run_plan(df, plan)
    if plan.prepare_columns:
        df = df.select("*", *[expression(e).alias(n) for n, e in plan.prepare_columns])
    bound = bind_worker(plan, arrow_schema(df))
    empty = df.sparkSession.createDataFrame([], from_arrow_schema(bound.worker_schema))
    return final_frame(empty, bound)


def _shared_pass(source: DataFrame, plans: list[QueryPlan], sharing: dict, streams=None,
                 views: list[str] | None = None) -> tuple[SharedPass, DataFrame]:
    """The tagged rows of every plan over source: one shuffle + sort and one mapInArrow per
    partitioning group, the groups unioned and persisted once (a streaming source: one
    stateful streaming query of ``streams``, the streaming backend). views: each plan's
    view name (where the errors of the columns they share point)."""
    if source.isStreaming:
        return require_streams(streams).shared_pass(source, plans, sharing)
    adaptive = adaptive_settings(conf_reader(source.sparkSession))   # cepsql.adaptive.*
    shared = plan_pass(arrow_schema(source), plans, {**sharing, "adaptive": adaptive},
                       relevance=_relevance(source.sparkSession))
    tagged = _pass_frame(source, shared, views=views).persist(StorageLevel.MEMORY_AND_DISK)
    return shared, tagged


def _pass_frame(source: DataFrame, shared: SharedPass, analysis: PassAnalysis | None = None,
                views: list[str] | None = None) -> DataFrame:
    """The tagged rows of a planned pass over source (binds ``shared``); with
    ``analysis`` (EXPLAIN ANALYZE WORKLOAD) its rows and tasks observed; views: each
    pattern's view name (a shared column's errors point at the first view reading it)."""
    ansi = session_ansi(source.sparkSession)
    if analysis is not None:
        source = analysis.observe_source(source)
    inputs, late_columns, computed, schemas = [], [], [], []
    for k, group in enumerate(shared.groups):
        df = source
        if group.relevance:  # a row no pattern of the group can use is not shuffled
            df = df.where(" OR ".join(f"({to_spark_sql(e)})" for e in group.relevance))
        if analysis is not None:
            df = analysis.observe_group(k, df)
        early, late = _prepare_split(group)
        if early:
            df = df.select("*", *[expression(e).alias(n) for n, e in early])
        if group.break_column is not None:
            df = with_global_breaks(df, group.patterns[0].plan, shuffle_partitions(df))
        in_engine, in_task, schema = _late_columns(df, late, ansi)
        inputs.append(df)
        late_columns.append(in_engine)
        computed.append(in_task)
        schemas.append(schema)
    shared.bind(schemas, compact=True)
    schema = shared.output_schema if analysis is None else analysis.schema(shared)
    outputs = []
    for group, df, late, own in zip(shared.groups, inputs, late_columns, computed):
        df = co_located(df, group.partition_columns)
        df = df.sortWithinPartitions(*[sort_column(k) for k in group.sort_keys])
        if late:
            df = df.select("*", *late)
        worker = SharedPassWorker(task_group(group), shared.output_schema, computed=own,
                                  slots=shared.slots, ansi=ansi,
                                  column_sites=shared_column_sites(group.patterns, views or []))
        if analysis is not None:
            worker = analysis.worker(worker, group)
        outputs.append(map_in_arrow(df, worker, from_arrow_schema(schema)))
    tagged = reduce(DataFrame.unionByName, outputs)
    return tagged if analysis is None else analysis.observe_output(tagged)


def _prepare_split(group) -> tuple[list, list]:
    """The group's shared prepared columns: those the shuffle or sort reads (computed
    before it), and the rest (computed after the sort, next to the evaluation: a workload
    has many row-local columns, and shuffling and sorting them costs more than computing
    them)."""
    keys = set(group.partition_columns) | {k.column for k in group.sort_keys}
    everything_early = group.break_column is not None
    early, late = [], []
    for name, expr in group.prepare:
        (early if everything_early or name in keys else late).append((name, expr))
    return early, late


def _late_columns(df: DataFrame, late: list, ansi: bool = True
                  ) -> tuple[list, list, pa.Schema]:
    """Split the late prepared columns into those Spark computes (Column list) and those
    the task computes with Arrow kernels (one_pass.with_computed: Spark would convert
    every one of them to Arrow for the task) -- only where the Arrow evaluation gives
    exactly the type Spark gives; and the prepared schema the task sees (Spark's
    columns, then the task's); ansi: the session's spark.sql.ansi.enabled."""
    if not late:
        return [], [], arrow_schema(df)
    spark_types = _spark_types(df, late)
    base = arrow_schema(df)
    in_engine, in_task = [], []
    for (name, expr), field_ in zip(late, spark_types):
        if computed_type(expr, base, ansi) == field_.type:
            in_task.append((name, expr))
        else:
            in_engine.append((expression(expr).alias(name), field_))
    schema = pa.schema(list(base) + [f for _, f in in_engine]
                       + [spark_types.field(n) for n, _ in in_task])
    return [c for c, _ in in_engine], in_task, schema


def _spark_types(df: DataFrame, named: list[tuple[str, Expr]]) -> pa.Schema:
    """The Arrow fields Spark gives the named expressions over df, from ONE analysed
    column (a struct of them all: a Column per expression costs ~7 JVM round trips, a
    workload has hundreds)."""
    fields = ", ".join(f"{quote_string(n)}, {to_spark_sql(e)}" for n, e in named)
    struct = arrow_schema(df.select(F.expr(f"named_struct({fields})").alias("s")))
    return pa.schema(list(struct.field(0).type))


def _relevance(spark: SparkSession):
    """The plans' relevance filters the pass may use (as run_plan: unless
    cepsql.pushdown.relevanceFilter=false, and only those Spark SQL can express)."""
    if (spark.conf.get(RELEVANCE_CONF, "true") or "").strip().lower() == "false":
        return None

    def relevance(plan: QueryPlan):
        if plan.relevance_filter is None:
            return None
        try:
            to_spark_sql(plan.relevance_filter)
        except CepError:
            return None
        return plan.relevance_filter
    return relevance


def _driver_statistics(spark: SparkSession, source: DataFrame, ahead=None):
    """Statistics for the sharing planner: the source's first rows taken to the driver
    once for the whole workload (one small job, only if some pattern is shareable; or
    ``ahead``, a future of that same sample started while the views were recorded), each
    pattern's rates and selectivities estimated from them as a task does
    (cepsql.stats.workerSampleRows rows); what the patterns' estimates have in common
    (partitioning, event types, pair conditions) is computed once (stats.SampleMemo)."""
    sample: list[pa.Table] = []
    memo = SampleMemo()

    def statistics(spec):
        if not sample:
            sample.append(ahead.result() if ahead is not None else
                          _first_rows(spark, source))
        return estimate_from_table(spec, sample[0], max_rows=max(sample[0].num_rows, 1),
                                   memo=memo)
    return statistics


def _unsliced_statistics(statistics):
    """The sharing planner's statistics of time-sliced clauses: those of the clauses as
    written (the sample has no slice column)."""
    return lambda spec: statistics(unsliced_spec(spec))


def _first_rows(spark: SparkSession, source: DataFrame) -> pa.Table:
    """The statistics sample: source's first cepsql.stats.workerSampleRows rows."""
    return source.limit(worker_sample_rows(lambda k: spark.conf.get(k, None))).toArrow()


class _SamplesAhead:
    """The statistics sample of each pass's source, taken in a thread while the rest of
    the views are recorded (the sample job and the recording's driver work overlap).
    Started once a source has two clauses (one alone shares nothing: no sample needed);
    the sample is the one _driver_statistics would take, of the same DataFrame."""

    def __init__(self):
        self._futures: dict[int, tuple[DataFrame, object]] = {}
        self._started: set[str] = set()
        self._pool = None

    def clause_recorded(self, clauses: list, source: str, spark: SparkSession) -> None:
        if source in self._started:
            return
        mine = [c for c in clauses if c.source == source and not c.own]
        if len(mine) < 2 or mine[0].frame.isStreaming:
            return
        self._started.add(source)
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor
            self._pool = ThreadPoolExecutor(max_workers=1,
                                            thread_name_prefix="cepsql-sample")
        frame = mine[0].frame
        self._futures[id(frame)] = (frame, self._pool.submit(_first_rows, spark, frame))

    def taken(self, frame: DataFrame):
        """The future of frame's sample, if one was started for this very DataFrame."""
        entry = self._futures.get(id(frame))
        return entry[1] if entry is not None and entry[0] is frame else None

    def close(self) -> None:
        """No more samples are started (those running finish)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False)


def _group_text(k: int, group) -> str:
    """``group k: PARTITION BY ..; ORDER BY ..`` with shared prepared columns shown as the
    expressions they compute."""
    computed = {name: to_spark_sql(expr) for name, expr in group.prepare}
    show = lambda c: computed.get(c, c)  # noqa: E731
    keys = ", ".join(map(show, group.partition_columns)) or "(none: one ordered stream)"
    order = group.sort_keys[len(group.partition_columns):group.primary_sort_keys]
    return (f"group {k}: PARTITION BY {keys}; ORDER BY "
            + ", ".join(f"{show(s.column)}{'' if s.ascending else ' DESC'}" for s in order)
            + f"; shared row-local columns: {len(group.prepare)}")


def _global_plan_text(group, by_index: dict[int, _Clause]) -> list[str]:
    """The group's global plan for EXPLAIN WORKLOAD: the sharing planner's multi-pattern
    graph, DAG, costs and search (explain.workload.describe_workload), views named."""
    patterns = list(group.workload_patterns)
    for k, (p, wp) in enumerate(zip(group.patterns, patterns)):
        c = by_index.get(p.index)
        wp.name = c.view if c is not None else f"pattern {p.index}"
    lines = ["  " + line for line in describe_workload(group.global_plan, patterns).splitlines()]
    for k in group.global_plan.unshared:
        p = group.patterns[k]
        lines.append(f"  - {patterns[k].name}: unshared -- "
                     f"{unshared_reason(p.plan, patterns[k])}")
    if group.adaptive_note:
        lines.append(f"  adaptive: {group.adaptive_note}")
    return lines
