"""In-process workloads: several pattern views over the same tables, every clause over one
source evaluated in ONE shared pass (runtime/one_pass.py) -- the same SharedPassWorker
the Spark backend runs in mapInArrow.

``cepsql.workload(views, **tables)`` takes ``CREATE [OR REPLACE] TEMPORARY VIEW v AS ...``
statements (a list, or one ';'-separated script). Each view is run in two steps: first
with every clause evaluated on an empty input (cheap: this records the clause's plan and
gives the view's result types), then every source's clauses run together in one pass and
each view's SQL is evaluated again with its clauses reading their rows from that pass.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from types import SimpleNamespace
import pandas as pd
import pyarrow as pa

from cepsql.errors import CepAnalysisError, CepError
from cepsql.parse import find_match_recognize, parse_create_view, split_statements
from cepsql.parse.splice import normalize_name
from cepsql.parse.statements import clause_output_names
from cepsql.exprs.arrow_eval import evaluate_arrow
from cepsql.analyze.subqueries import bind_subqueries
from cepsql.compile.clause import plan_query
from cepsql.compile.query_plan import QueryPlan
from cepsql.runtime.adaptive import adaptive_settings
from cepsql.runtime.error_position import located_run_error, sited_plan
from cepsql.runtime.one_pass import SharedPass, SharedPassWorker, plan_pass, split_output
from cepsql.backends.local.engine import (LocalStatement, TableLike, execute_plan, global_breaks,
                                          match_recognize, sort_for_matching, table_statistics,
                                          to_arrow, to_pandas)
from cepsql.backends.local.sql import Scope

__all__ = ["workload", "LocalWorkload", "run_shared_pass", "parse_views"]


@dataclass
class _Clause:
    """One clause of one view: its source rows, plan and (after the pass) its output."""
    view: str
    source: pa.Table
    plan: QueryPlan
    output: pa.Table | None = None
    projection: list | None = None  # the bound final projection (output name, expression)
    sql: str = ""  # the view's statement, where its errors are located
    site: str = ""  # the error_site its plan's workers tag errors with


@dataclass
class LocalWorkload:
    """The views' results from one shared pass per source."""
    names: list[str]
    tables: dict[str, pa.Table]
    clauses: list[_Clause] = field(default_factory=list)
    passes: int = 0  # shared passes run (one per distinct source)

    def dataframes(self) -> dict[str, pd.DataFrame]:
        """{view: pandas DataFrame} (nullable integer dtypes, as match_recognize)."""
        return {name: to_pandas(self.tables[name]) for name in self.names}

    def matches(self) -> pd.DataFrame:
        """All clauses' matches: view, partition (dict of the PARTITION BY columns),
        match_number, measures (dict of the other output columns). Values are Python
        objects (Decimal, int, datetime, float) so nothing is rounded."""
        rows = []
        for c in self.clauses:
            rows += _match_rows(c)
        return pd.DataFrame(rows, columns=["view", "partition", "match_number", "measures"])


def _match_rows(clause: _Clause) -> list[tuple]:
    table = clause.output
    keys = set(clause.plan.partition_columns)
    part = [n for n, e in clause.projection if getattr(e, "column", None) in keys]
    numbers = table.column("__cep_match_number").to_pylist()
    data = table.drop_columns(["__cep_match_number"]).to_pylist()
    return [(clause.view, {k: row[k] for k in part}, number,
             {k: v for k, v in row.items() if k not in part})
            for row, number in zip(data, numbers)]


def parse_views(views: list[str] | str) -> list[tuple[str, object, str]]:
    """(view name, CreateView, statement) of each CREATE TEMPORARY VIEW statement."""
    texts = [views] if isinstance(views, str) else list(views)
    out = []
    for text in texts:
        for stmt, _ in split_statements(text):
            create = parse_create_view(stmt)
            if create is None:
                raise CepAnalysisError("a workload is given as CREATE [OR REPLACE] TEMPORARY "
                                       "VIEW name AS <query> statements", sql=stmt, pos=0)
            out.append((create.name, create, stmt))
    return out


class _Recording(LocalStatement):
    """Step 1: every clause planned and run on zero rows (types only), plans recorded."""

    def __init__(self, stmt, finder, planner, view: str, clauses: list[_Clause]):
        super().__init__(stmt, finder, planner)
        self.view, self.clauses = view, clauses

    def clause(self, site, scope: Scope) -> pa.Table:
        table = self.source(site, scope)
        spec = bind_subqueries(site.spec, partial(self.scalar, scope=scope))
        plan = self.planner(spec, table.schema, self.stmt,
                            statistics=partial(table_statistics, table=table))
        # its errors in the shared pass carry this site (located by _run_passes)
        site = f"{self.view}/{len(self.clauses)}"
        self.clauses.append(_Clause(self.view, table, sited_plan(plan, site), sql=self.stmt,
                                    site=site))
        out = execute_plan(table.slice(0, 0), plan)
        return out.rename_columns(clause_output_names(site, out.schema.names))


class _Replaying(LocalStatement):
    """Step 2: each clause reads its rows from the shared pass, in step 1's order."""

    def __init__(self, stmt, finder, planner, outputs: list[pa.Table]):
        super().__init__(stmt, finder, planner)
        self.outputs = list(outputs)

    def clause(self, site, scope: Scope) -> pa.Table:
        out = self.outputs.pop(0)
        return out.rename_columns(clause_output_names(site, out.schema.names))


def workload(views: list[str] | str, sharing: dict | None = None,
             adaptive: dict | None = None, **tables: TableLike) -> LocalWorkload:
    """Run pattern views (CREATE TEMPORARY VIEW statements) over tables in-process, every
    source's clauses in one shared pass (sub-patterns shared by the sharing planner:
    ``sharing={"algorithm": "TABU", "seconds": 0.5}`` as cepsql.sharing.* on Spark;
    re-planned as the statistics drift unless ``adaptive={"cepsql.adaptive.enabled":
    "false"}``, the cepsql.adaptive.* keys as on Spark).
    ``.dataframes()`` -> {view: DataFrame}, ``.matches()`` -> all matches, ``.tables`` ->
    {view: pyarrow Table}."""
    finder, planner = find_match_recognize, plan_query
    scope = Scope({normalize_name(k): to_arrow(v) for k, v in tables.items()})
    parsed = parse_views(views)
    result = LocalWorkload([name for name, _, _ in parsed], {})
    per_view: list[list[_Clause]] = []
    for name, create, stmt in parsed:
        recorded: list[_Clause] = []
        _run_view(_Recording(stmt, finder, planner, name, recorded), create, stmt, scope)
        per_view.append(recorded)
        result.clauses += recorded
    result.passes = _run_passes(result.clauses, sharing, adaptive)
    for (name, create, stmt), recorded in zip(parsed, per_view):
        replay = _Replaying(stmt, finder, planner, [_final_output(c) for c in recorded])
        result.tables[name] = _run_view(replay, create, stmt, scope)
    return result


def _run_view(run: LocalStatement, create, stmt: str, scope: Scope) -> pa.Table:
    try:
        return run.query(create.query_text, create.query_offset, scope)
    except CepError as e:
        raise e.with_sql(stmt) from None


def _run_passes(clauses: list[_Clause], sharing: dict | None = None,
                adaptive: dict | None = None) -> int:
    """One shared pass per distinct source table (by identity: a named table given to
    ``workload``; a subquery source is its own)."""
    by_source: dict[int, list[_Clause]] = {}
    for c in clauses:
        by_source.setdefault(id(c.source), []).append(c)
    for group in by_source.values():
        try:
            outputs = run_shared_pass(group[0].source, [c.plan for c in group],
                                      sharing=sharing, adaptive=adaptive)
        except CepError as e:
            raise _located(e, group) from None
        for c, (out, projection) in zip(group, outputs):
            c.output, c.projection = out, projection
    return len(by_source)


def _located(err: CepError, group: list[_Clause]) -> CepError:
    """An error of a shared pass located in the view whose clause raised it (the site
    ``_Recording`` gave its plan), else in the pass's first view (a prepared column its
    clauses share, which knows its own position)."""
    site = getattr(err, "site", None)
    clause = next((c for c in group if c.site == site), group[0])
    return located_run_error(err, clause.plan.spec, clause.sql)


def run_shared_pass(table: pa.Table, plans: list[QueryPlan], batch_rows: int = 65536,
                    sharing: dict | None = None, adaptive: dict | None = None
                    ) -> list[tuple[pa.Table, list]]:
    """Every plan over table in one pass: per plan (its worker output with the match number
    as ``__cep_match_number`` appended after its final projection's columns, the final
    projection). ``adaptive``: cepsql.adaptive.* settings (conf key -> value)."""
    settings = {"statistics": partial(table_statistics, table=table), **(sharing or {}),
                "adaptive": adaptive_settings((adaptive or {}).get)}
    shared = plan_pass(table.schema, plans, settings)
    prepared = [_prepared(table, g) for g in shared.groups]
    shared.bind([p.schema for p in prepared])
    tagged = []
    for group, input_ in zip(shared.groups, prepared):
        order = SimpleNamespace(primary_sort_keys=group.primary_sort_keys,
                                sort_keys=group.sort_keys)
        ordered = sort_for_matching(input_, group.sort_keys, order).combine_chunks()
        worker = SharedPassWorker(group, shared.output_schema)
        tagged += list(worker(iter(ordered.to_batches(max_chunksize=batch_rows))))
    worker_rows = split_output(pa.Table.from_batches(tagged, schema=shared.output_schema),
                               shared)
    return [_projected(out, p) for out, p in zip(worker_rows, _bound_in_order(shared))]


def _bound_in_order(shared: SharedPass):
    return sorted((p for g in shared.groups for p in g.patterns), key=lambda p: p.index)


def _projected(out: pa.Table, pattern) -> tuple[pa.Table, list]:
    projection = pattern.bound.final_projection
    names = [n for n, _ in projection] + ["__cep_match_number"]
    arrays = [evaluate_arrow(e, out) for _, e in projection] + [out.column("__cep_mn")]
    return pa.Table.from_arrays(arrays, names=names), projection


def _final_output(clause: _Clause) -> pa.Table:
    return clause.output.drop_columns(["__cep_match_number"])


def _prepared(table: pa.Table, group) -> pa.Table:
    """The group's shared input: the source plus its prepared (and break) columns."""
    out = table
    for name, expr in group.prepare:
        out = out.append_column(name, evaluate_arrow(expr, table))
    if group.break_column is not None:
        plan = group.patterns[0].plan
        out = out.append_column(plan.break_column, global_breaks(out, plan))
    return out


def views_alone(views: list[str] | str, **tables: TableLike) -> dict[str, pd.DataFrame]:
    """Each view's query run on its own (match_recognize): what the workload must equal."""
    return {name: match_recognize(create.query_text, **tables)
            for name, create, _ in parse_views(views)}
