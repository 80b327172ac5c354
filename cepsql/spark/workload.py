"""Workloads on Spark: many pattern views over one source computed by ONE shared pass.

``spark.cep.workload("ticks")`` (the pattern views over ticks) or
``spark.cep.workload(["v1", "v2"])``. Every batch MATCH_RECOGNIZE clause of the views is
planned as when the view is queried alone; the clauses over one source are then grouped
by partitioning (runtime/shared_pass.py): per group one shuffle + sort and one
``mapInArrow(SharedPassWorker)``; the groups' tagged outputs are unioned and persisted
once. Each view is then its own SQL again, its clauses reading their rows from the
persisted relation (filter by tag, the clause's own final projection) through the same
binding of generated names as any statement (rewrite.py), so SQL around a clause still
applies. Collecting every view runs the source scan, shuffles and evaluation once.

``matches()`` puts every clause's matches in one DataFrame: ``view`` STRING,
``partition`` VARIANT (object of the PARTITION BY columns), ``match_number`` BIGINT,
``measures`` VARIANT (object of the clause's other output columns). VARIANT, not a
struct: views have different measures, and a struct per view would make the schema as
wide as the workload; a variant object keeps each value's own type, and
``variant_get(measures, '$.x', '<type>')`` returns it exactly -- DECIMAL(38,10), BIGINT
near 2^63, TIMESTAMP (microseconds) and NaN survive (tests/test_workload_spark.py checks
each). The matches are those of the clauses themselves (before any SQL around them).

The workload follows the session's view registry: after CREATE OR REPLACE / DROP VIEW the
next call rebuilds it (and unpersists the previous pass); ``close()`` unpersists too.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from ..errors import CepAnalysisError
from ..exprs.spark_sql import to_spark_sql
from ..runtime.plan import QueryPlan
from ..runtime.shared_pass import (TAG, SharedPass, SharedPassWorker, plan_pass, result_column,
                                   unshared_reason)
from .execute import (TaskWorker, _col, _sort_column, arrow_schema, final_frame, run_plan,
                      shuffle_partitions)
from .rewrite import default_planner, rewrite, run_sql
from .splice import normalize_name

__all__ = ["Workload", "sharing_settings"]


@dataclass
class _Clause:
    view: str
    source: str          # normalized source display (the pass it joins)
    frame: DataFrame     # the clause's input
    plan: QueryPlan
    index: int = -1      # pattern index in its source's pass


@dataclass
class _Built:
    version: int
    names: list[str]
    clauses: list[_Clause] = field(default_factory=list)
    passes: dict[str, tuple[SharedPass, DataFrame]] = field(default_factory=dict)
    frames: dict[str, DataFrame] = field(default_factory=dict)


def sharing_settings(spark: SparkSession) -> dict:
    """``cepsql.sharing.algorithm`` / ``cepsql.sharing.seconds`` from the Spark conf: what
    the sharing planner seam (shared_pass.global_plan_for) is given."""
    algorithm = (spark.conf.get("cepsql.sharing.algorithm", None) or "BEST").upper()
    seconds = spark.conf.get("cepsql.sharing.seconds", None)
    return {"algorithm": algorithm, "seconds": float(seconds) if seconds else None}


class Workload:
    """Pattern views evaluated together (obtain as ``spark.cep.workload(...)``)."""

    def __init__(self, session, selector: str | list[str]):
        self._session = session
        self._selector = selector
        self._built: _Built | None = None
        self.names  # noqa: B018  (unknown workloads / views fail here, not later)

    # public API -------------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        """The workload's views (as registered), in registration order."""
        return self._resolve()

    def dataframes(self) -> dict[str, DataFrame]:
        """{view: DataFrame}: every view from the workload's one shared pass."""
        built = self._build()
        return dict(built.frames)

    def matches(self) -> DataFrame:
        """One DataFrame of every clause's matches: view, partition (VARIANT), match_number,
        measures (VARIANT); see the module docstring."""
        built = self._build()
        if any(tagged.isStreaming for _, tagged in built.passes.values()):
            from ..backends.streaming.workload import streaming_matches
            return streaming_matches(built.clauses, built.passes)
        parts = [self._clause_matches(built, c) for c in built.clauses if c.index >= 0]
        if not parts:
            spark = self._session.spark
            return spark.createDataFrame([], "view string, partition variant, "
                                             "match_number bigint, measures variant")
        return reduce(DataFrame.unionByName, parts)

    def explain(self, file: str | None = None) -> str:
        """The views, their partitioning groups, each group's global plan (multi-pattern
        graph, DAG with shared nodes marked, costs, search), which patterns run unshared
        and why, and each clause's own plan summary. ``file`` (a path ending in .svg)
        also writes the global plans drawn as DAGs."""
        built = self._build()
        if file is not None:
            self._write_svg(built, file)
        from ..runtime.explain_summary import summarize
        settings = sharing_settings(self._session.spark)
        lines = [f"== Workload: {', '.join(built.names)} ==",
                 f"views: {len(built.names)}; clauses in shared passes: "
                 f"{sum(c.index >= 0 for c in built.clauses)}; sharing settings: "
                 f"cepsql.sharing.algorithm={settings['algorithm']}, "
                 f"cepsql.sharing.seconds={settings['seconds']}"]
        for source, (shared, _) in built.passes.items():
            lines.append(f"\n== One pass over {source}: {len(shared.groups)} partitioning "
                         f"group(s), one shuffle + sort each, outputs persisted once ==")
            by_index = {c.index: c for c in built.clauses if c.source == source}
            for k, group in enumerate(shared.groups, 1):
                lines.append(_group_text(k, group))
                lines += _global_plan_text(group, by_index)
        lines.append("\n== Each clause's own plan ==")
        for c in built.clauses:
            state = "in the shared pass" if c.index >= 0 else "runs on its own"
            lines.append(f"-- view {c.view} ({state}) --\n{summarize(c.plan.spec, c.plan)}")
        return "\n".join(lines)

    @staticmethod
    def _write_svg(built, file: str) -> None:
        """The global plan DAG of the first partitioning group that shares sub-patterns
        (EXPLAIN lists every group's plan in text)."""
        from ..sharing.describe import workload_svg
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
        for name in selector:
            view = registry.get(normalize_name(name))
            if view is None:
                raise CepAnalysisError(f"unknown pattern view {name} in the workload (views "
                                       "defined through spark.cep.sql: "
                                       f"{', '.join(v.name for v in registry.values()) or 'none'})")
            names.append(view.name)
        return names

    def _build(self) -> _Built:
        version = self._session._views_version
        if self._built is not None and self._built.version == version:
            return self._built
        self.refresh()
        built = _Built(version, self._resolve())
        views = [self._session._views[normalize_name(n)] for n in built.names]
        recorded = [self._record(v, built) for v in views]
        self._run_passes(built)
        for view, plans in zip(views, recorded):
            built.frames[view.name] = self._replay(view, plans, built)
        self._built = built
        return built

    def _rewrite(self, view, **hooks):
        from ..dialect import parse_create_view
        create = parse_create_view(view.sql)
        s = self._session
        return rewrite(s.spark, create.query_text, offset=create.query_offset,
                       full_sql=view.sql, finder=s._finder, views=s._views, **hooks)

    def _record(self, view, built: _Built) -> list[QueryPlan]:
        """Step 1: plan every clause of the view (nothing runs), remember inputs and plans."""
        plans: list[QueryPlan] = []
        base = self._session._planner or default_planner()

        def planner(spec, schema, sql, **planning):
            plan = base(spec, schema, sql, **planning)
            plans.append(plan)
            return plan

        def runner(df, plan, source):
            built.clauses.append(_Clause(view.name, normalize_name(source.display), df, plan))
            return _stand_in(df, plan)

        self._rewrite(view, planner=planner, clause_runner=runner)
        return plans

    def _run_passes(self, built: _Built) -> None:
        by_source: dict[str, list[_Clause]] = {}
        for c in built.clauses:
            by_source.setdefault(c.source, []).append(c)
        for source, clauses in by_source.items():
            for i, c in enumerate(clauses):
                c.index = i
            settings = {**sharing_settings(self._session.spark),
                        "statistics": _driver_statistics(self._session.spark,
                                                         clauses[0].frame)}
            shared, tagged = _shared_pass(clauses[0].frame, [c.plan for c in clauses],
                                          settings)
            built.passes[source] = (shared, tagged)

    def _replay(self, view, plans: list[QueryPlan], built: _Built) -> DataFrame:
        """Step 2: the view's SQL with each clause reading the shared pass."""
        queue = list(plans)
        mine = [c for c in built.clauses if c.view == view.name]

        def planner(spec, schema, sql, **planning):
            return queue.pop(0)  # the plans of step 1, in the same order

        def runner(df, plan, source):
            clause = next(c for c in mine if c.plan is plan)
            return self._clause_frame(built, clause)

        rewritten = self._rewrite(view, planner=planner, clause_runner=runner)
        return run_sql(self._session.spark, rewritten, view.sql)

    @staticmethod
    def _worker_rows(built: _Built, clause: _Clause) -> tuple[DataFrame, object]:
        shared, tagged = built.passes[clause.source]
        pattern = next(p for g in shared.groups for p in g.patterns if p.index == clause.index)
        rows = tagged.filter(F.col(TAG) == clause.index).select(
            f"{result_column(clause.index)}.*")
        return rows, pattern.bound

    def _clause_frame(self, built: _Built, clause: _Clause) -> DataFrame:
        rows, bound = self._worker_rows(built, clause)
        return final_frame(rows, bound)

    def _clause_matches(self, built: _Built, clause: _Clause) -> DataFrame:
        rows, bound = self._worker_rows(built, clause)
        keys = set(clause.plan.partition_columns)
        cols = [F.expr(to_spark_sql(e)).alias(n) for n, e in bound.final_projection]
        part = [n for n, e in bound.final_projection if getattr(e, "column", None) in keys]
        other = [n for n, _ in bound.final_projection if n not in part]
        projected = rows.select(*cols, _col("__cep_mn").alias("__cep_match_number"))

        def variant(names):
            if not names:
                return F.expr("to_variant_object(named_struct())")
            return F.to_variant_object(F.struct(*[_col(n) for n in names]))
        return projected.select(F.lit(clause.view).alias("view"),
                                variant(part).alias("partition"),
                                _col("__cep_match_number").alias("match_number"),
                                variant(other).alias("measures"))


def _stand_in(df: DataFrame, plan: QueryPlan) -> DataFrame:
    """Step 1's clause result: the clause's columns and types over no rows (never run;
    cheaper than run_plan: no shuffle, sort or pickled worker)."""
    if plan.break_column is not None:
        return run_plan(df, plan)
    if plan.prepare_columns:
        df = df.select("*", *[F.expr(to_spark_sql(e)).alias(n) for n, e in plan.prepare_columns])
    bound = plan.bind(arrow_schema(df))
    empty = df.sparkSession.createDataFrame([], from_arrow_schema(bound.worker_schema))
    return final_frame(empty, bound)


def _shared_pass(source: DataFrame, plans: list[QueryPlan], sharing: dict
                 ) -> tuple[SharedPass, DataFrame]:
    """The tagged rows of every plan over source: one shuffle + sort and one mapInArrow per
    partitioning group, the groups unioned and persisted once."""
    if source.isStreaming:  # one stateful streaming query (backends/streaming/workload.py)
        from ..backends.streaming.workload import streaming_pass
        return streaming_pass(source, plans)
    shared = plan_pass(arrow_schema(source), plans, sharing)
    inputs = []
    for group in shared.groups:
        df = source
        if group.prepare:
            df = df.select("*", *[F.expr(to_spark_sql(e)).alias(n) for n, e in group.prepare])
        if group.break_column is not None:
            from .strict_breaks import with_global_breaks
            df = with_global_breaks(df, group.patterns[0].plan, shuffle_partitions(df))
        inputs.append(df)
    shared.bind([arrow_schema(df) for df in inputs])
    spark_schema = from_arrow_schema(shared.output_schema)
    outputs = []
    for group, df in zip(shared.groups, inputs):
        if group.partition_columns:
            df = df.repartition(shuffle_partitions(df), *[_col(c) for c in
                                                          group.partition_columns])
        else:
            df = df.repartition(1)  # one ordered stream
        df = df.sortWithinPartitions(*[_sort_column(k) for k in group.sort_keys])
        outputs.append(df.mapInArrow(TaskWorker(SharedPassWorker(group, shared.output_schema)),
                                     spark_schema))
    tagged = reduce(DataFrame.unionByName, outputs).persist(StorageLevel.MEMORY_AND_DISK)
    return shared, tagged


def _driver_statistics(spark: SparkSession, source: DataFrame):
    """Statistics for the sharing planner: the source's first rows taken to the driver
    once for the whole workload (one small job, only if some pattern is shareable), each
    pattern's rates and selectivities estimated from them as a task does
    (cepsql.stats.workerSampleRows rows)."""
    from ..stats import estimate_from_table
    from ..stats.worker import worker_sample_rows
    rows = worker_sample_rows(lambda k: spark.conf.get(k, None))
    sample: list[pa.Table] = []

    def statistics(spec):
        if not sample:
            sample.append(source.limit(rows).toArrow())
        return estimate_from_table(spec, sample[0], max_rows=max(sample[0].num_rows, 1))
    return statistics


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
    graph, DAG, costs and search (sharing.describe_workload), views named."""
    from ..sharing.describe import describe_workload
    patterns = list(group.workload_patterns)
    for k, (p, wp) in enumerate(zip(group.patterns, patterns)):
        c = by_index.get(p.index)
        wp.name = c.view if c is not None else f"pattern {p.index}"
    lines = ["  " + line for line in describe_workload(group.global_plan, patterns).splitlines()]
    for k in group.global_plan.unshared:
        p = group.patterns[k]
        lines.append(f"  - {patterns[k].name}: unshared -- "
                     f"{unshared_reason(p.plan, patterns[k])}")
    return lines
