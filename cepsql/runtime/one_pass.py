"""One pass for a whole workload: many MATCH_RECOGNIZE plans over one source, backend-neutral.

Two halves: on the driver, ``plan_pass`` / ``SharedPass.bind`` lay the pass out (groups,
shared input columns, the sharing stage's global plans, bound workers); in tasks,
``SharedPassWorker`` runs a group's sorted batches through ``pass_evaluator``
(``DagEvaluator`` over the runtime.shared_evaluator, unshared patterns' own workers).

``plan_pass(source_schema, plans)`` groups the plans by partitioning (PARTITION BY + ORDER BY
+ tie-breakers, compared as expressions): each group is one shuffle + sort. A group's input
is the source plus the union of its plans' prepared columns (``__cep_p0``... of every plan
renamed to ``__cep_s<k>``, equal expressions computed once). ``SharedPassWorker`` is the one
mapInArrow / in-process function of a group: every sorted batch is handed to the group's
evaluator, and each output batch comes back tagged with its pattern's index.

Output layout: ``__cep_view`` (int32, the pattern index) + one struct column
``__cep_r<i>`` per pattern of the workload holding that pattern's worker row (NULL on the
other patterns' rows); or, compact (``SharedPass.bind(compact=True)``, the Spark batch
pass), one struct column per distinct worker row type, shared by the patterns with
equal measure types (a workload of rules written from a few templates has a few
columns, not one per view; ``SharedPass.column_of(i)`` names pattern i's). Chosen over a wide union of all worker columns because every
plan names its columns alike (``__cep_a0``, ``__cep_mn``...) with other types: a struct per
pattern keeps each pattern's names and exact Arrow/Spark types with no renaming or casts,
and ``select(__cep_r<i>.*)`` gives back exactly the worker output the pattern's own
final projection expects. Every group uses the same schema, so the groups' outputs
union into one relation (persisted once on Spark).

Sharing: ``global_plan_for`` runs the sharing stage's planner (cepsql.sharing) over the
patterns the shared DAG evaluator can run; ``pass_evaluator`` runs the resulting GlobalPlan
(runtime.shared_evaluator: candidate matches formed once per shared node, each pattern's own matcher
finishing them) next to the unshared patterns' own workers.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cepsql.algebra.expressions import ColumnRef, Expr, children
from cepsql.algebra.rowrefs import rebuild
from cepsql.compile.query_plan import QueryPlan, SortColumn
from cepsql.errors import CepError
from cepsql.exprs.arrow_eval import evaluate_arrow
from cepsql.runtime.error_position import sited_column_error
from cepsql.runtime.adaptive import adaptable
from cepsql.runtime.cep_worker import CepWorker
from cepsql.runtime.shared_adaptive import AdaptiveSharedEvaluator, WorkloadReplanner
from cepsql.runtime.shared_evaluator import SharedEvaluator
from cepsql.runtime.worker import CHUNK_ROWS, LaneCache
from cepsql.runtime.workers import BoundWorker, bind_worker
from cepsql.sharing.global_plan import GlobalPlan
from cepsql.sharing.planner import patterns_from_plans, plan_workload
from cepsql.sharing.support import dag_unsupported

__all__ = ["PassPattern", "PassGroup", "SharedPass", "SharedPassWorker", "plan_pass", "task_group", "sharing_patterns",
           "global_plan_for", "pass_evaluator", "DagEvaluator", "unshared_reason", "TAG", "result_column",
           "split_output", "joined_batches", "BATCH_ROWS"]

TAG = "__cep_view"
#: rows per batch the pass evaluates (Spark hands mapInArrow 10k-row batches)
BATCH_ROWS = 65536


def result_column(index: int) -> str:
    """The struct column holding pattern ``index``'s worker rows (the compact layout:
    ``SharedPass.column_of``)."""
    return f"__cep_r{index}"


@dataclass
class PassPattern:
    """One pattern of the pass: its plan, and which shared input column each column its
    worker reads comes from ((shared name, the plan's own name))."""
    index: int
    plan: QueryPlan
    inputs: list[tuple[str, str]] = field(default_factory=list)
    bound: BoundWorker | None = None   # set by SharedPass.bind
    # the shared boolean input column holding the plan's relevance filter (None: every
    # row goes to the pattern); rows where it is not TRUE cannot change its matches
    relevant: str | None = None

    def worker_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The shared input batch as this pattern's own worker expects it (zero-copy),
        without the rows its relevance filter drops."""
        own = pa.RecordBatch.from_arrays([batch.column(s) for s, _ in self.inputs],
                                         names=[own for _, own in self.inputs])
        if self.relevant is not None:  # filter the pattern's own columns, not the group's
            own = own.filter(_kept(batch.column(self.relevant)))
        return own


def _kept(mask: pa.Array) -> pa.Array:
    """A relevance column as a filter mask: NULL drops the row, as in the filter itself."""
    return pc.fill_null(mask, False) if mask.null_count else mask


@dataclass
class PassGroup:
    """Patterns with the same partitioning and order: one shuffle and one sort."""
    prepare: list[tuple[str, Expr]]          # shared prepared columns over the source
    partition_columns: list[str]             # shared names
    sort_keys: list[SortColumn]              # shared names, partition keys first
    primary_sort_keys: int | None
    patterns: list[PassPattern]
    break_column: str | None = None          # STRICT_CONTIGUITY across partitions (alone)
    global_plan: GlobalPlan | None = None
    # what the sharing planner saw (sharing.WorkloadPattern per pattern, in group order)
    workload_patterns: list = field(default_factory=list)
    # every pattern's relevance filter when all have one: a row none keeps is dropped
    # before the shuffle (None: every row is shuffled)
    relevance: list[Expr] | None = None
    # re-plans the shared patterns in tasks as the statistics drift (None: the start-up
    # plan throughout; ``adaptive_note`` says why)
    replanner: WorkloadReplanner | None = None
    adaptive_note: str = ""


@dataclass
class SharedPass:
    groups: list[PassGroup]
    n_patterns: int
    output_schema: pa.Schema | None = None   # set by bind()
    # pattern index -> the struct column holding its rows (set by bind())
    slots: dict[int, str] = field(default_factory=dict)

    def bind(self, prepared_schemas: list[pa.Schema], compact: bool = False) -> None:
        """Bind every plan to its group's prepared input schema (one per group, in order)
        and fix the tagged output schema: one struct column per pattern, or with
        ``compact`` one per distinct worker row type (patterns with equal measures
        share it; ``__cep_view`` tells them apart)."""
        fields = [pa.field(TAG, pa.int32(), nullable=False)]
        structs: dict[int, pa.DataType] = {}
        for group, schema in zip(self.groups, prepared_schemas):
            for p in group.patterns:
                own = pa.schema([pa.field(own_name, schema.field(shared).type)
                                 for shared, own_name in p.inputs])
                p.bound = bind_worker(p.plan, own)
                structs[p.index] = pa.struct(list(p.bound.worker_schema))
            _check_adaptable(group)
        by_type: dict[pa.DataType, str] = {}
        for i in range(self.n_patterns):
            if not compact:
                self.slots[i] = result_column(i)
            elif structs[i] not in by_type:
                by_type[structs[i]] = self.slots[i] = result_column(len(by_type))
            else:
                self.slots[i] = by_type[structs[i]]
            if self.slots[i] not in {f.name for f in fields}:
                fields.append(pa.field(self.slots[i], structs[i]))
        self.output_schema = pa.schema(fields)

    def column_of(self, index: int) -> str:
        """The struct column holding pattern ``index``'s worker rows."""
        return self.slots.get(index) or result_column(index)


def _check_adaptable(group: PassGroup) -> None:
    """Keep the group's replanner only where plan switches are exact for every pattern
    the shared DAG runs (else the tasks need not carry the patterns)."""
    if group.replanner is None:
        return
    members = _dag_members(group.global_plan)
    for p in members:
        worker = group.patterns[p].bound.worker
        if not isinstance(worker, CepWorker) or not adaptable(worker.config):
            group.replanner = None
            group.adaptive_note = (f"start-up plan kept: pattern {group.patterns[p].index}'s "
                                   "matches may depend on earlier ones (adaptive re-planning "
                                   "needs WITHIN, SKIP_TILL_ANY_MATCH, no SKIP PAST LAST ROW, "
                                   "no unmatched rows)")
            return
    group.adaptive_note = "re-planned in tasks as the statistics drift (cepsql.adaptive.*)"


def _resolved(plan: QueryPlan, name: str):
    """A partition/sort column as what it computes: the prepared expression or the
    source column (so plans naming their prepared columns alike compare by meaning)."""
    for own, expr in plan.prepare_columns:
        if own == name:
            return ("expr", _key(expr))
    return ("column", name)


def _key(expr: Expr):
    try:
        hash(expr)
        return expr
    except TypeError:  # pragma: no cover - an expression holding a list
        return repr(expr)


def _full_sort(plan: QueryPlan) -> list[SortColumn]:
    """PARTITION BY first, as the backends' run_plan / execute_plan sort."""
    keys = list(plan.sort_keys)
    leading = {k.column for k in keys[:len(plan.partition_columns)]}
    if leading != set(plan.partition_columns):
        keys = [SortColumn(c, True, True) for c in plan.partition_columns] + keys
    return keys


def plan_pass(source_schema: pa.Schema, plans: list[QueryPlan],
              sharing: dict | None = None,
              relevance: Callable[[QueryPlan], Expr | None] | None = None) -> SharedPass:
    """Group plans (all over a source with source_schema) by partitioning and lay out each
    group's shared input; ``sharing`` (algorithm, seconds: the cepsql.sharing.* settings)
    goes to the planner seam ``global_plan_for``. ``relevance(plan)``, when given, is the
    plan's relevance filter the backend can compute (or None): it becomes a shared boolean
    input column, and each pattern is fed only its relevant rows (``PassGroup.relevance``:
    the filters, when every pattern of the group has one, for a WHERE before the
    shuffle)."""
    by_key: dict[object, list[int]] = {}
    alone: list[int] = []
    for i, plan in enumerate(plans):
        if plan.break_column is not None:
            alone.append(i)
            continue
        key = (tuple(_resolved(plan, c) for c in plan.partition_columns),
               tuple((_resolved(plan, k.column), k.ascending, k.nulls_first)
                     for k in _full_sort(plan)))
        by_key.setdefault(key, []).append(i)
    groups = [_group(plans, members, source_schema, relevance)
              for members in by_key.values()]
    groups += [_own_group(i, plans[i], source_schema) for i in alone]
    sharing = dict(sharing or {})
    statistics = sharing.pop("statistics", None)
    asked = "adaptive" in sharing   # None: cepsql.adaptive.enabled=false
    adaptive = sharing.pop("adaptive", None)
    for g in groups:
        group_plans = [p.plan for p in g.patterns]
        g.workload_patterns = sharing_patterns(group_plans, statistics)
        g.global_plan = global_plan_for(group_plans, patterns=g.workload_patterns, **sharing)
        if adaptive is not None and g.global_plan.bindings:
            g.replanner = WorkloadReplanner(list(g.workload_patterns), adaptive,
                                            sharing.get("algorithm"),
                                            access=sharing.get("access"))
        elif asked and g.global_plan.bindings:
            g.adaptive_note = "start-up plan throughout (cepsql.adaptive.enabled=false)"
    return SharedPass(groups, len(plans))


def _group(plans: list[QueryPlan], members: list[int], source_schema: pa.Schema,
           relevance: Callable[[QueryPlan], Expr | None] | None = None) -> PassGroup:
    shared: dict[object, str] = {}
    prepare: list[tuple[str, Expr]] = []
    patterns = []

    def shared_column(expr: Expr) -> str:
        k = _key(expr)
        if k not in shared:
            shared[k] = f"__cep_s{len(prepare)}"
            prepare.append((shared[k], expr))
        return shared[k]

    filters: dict[int, tuple[Expr, str]] = {}
    for i in members:
        plan = plans[i]
        renames = {own: shared_column(expr) for own, expr in plan.prepare_columns}
        patterns.append((i, plan, renames))
        condition = relevance(plan) if relevance is not None else None
        if condition is not None:
            filters[i] = (condition, shared_column(condition))
    first_plan, first_renames = patterns[0][1], patterns[0][2]
    rename = lambda c: first_renames.get(c, c)  # noqa: E731
    sort = [SortColumn(rename(k.column), k.ascending, k.nulls_first)
            for k in _full_sort(first_plan)]
    primary = first_plan.primary_sort_keys
    if primary is not None:
        primary += len(sort) - len(first_plan.sort_keys)
    group = PassGroup(prepare, [rename(c) for c in first_plan.partition_columns], sort,
                      primary, [])
    if len(filters) == len(members):
        group.relevance = [condition for condition, _ in filters.values()]
    source = [(f.name, f.name) for f in source_schema]
    for i, plan, renames in patterns:  # the source's columns, then its prepared ones
        group.patterns.append(PassPattern(
            i, plan, source + [(shared_name, own) for own, shared_name in renames.items()],
            relevant=filters[i][1] if i in filters else None))
    return group


def _own_group(i: int, plan: QueryPlan, source_schema: pa.Schema) -> PassGroup:
    names = [f.name for f in source_schema] + [n for n, _ in plan.prepare_columns] \
        + [plan.break_column]
    pattern = PassPattern(i, plan, [(n, n) for n in names])
    return PassGroup(list(plan.prepare_columns), list(plan.partition_columns),
                     _full_sort(plan), plan.primary_sort_keys, [pattern],
                     break_column=plan.break_column)


# --- the sharing stage and the shared DAG evaluator ------------------------------------
def sharing_patterns(plans: list[QueryPlan], statistics=None) -> list:
    """What the sharing planner knows of each plan (sharing.WorkloadPattern); a pattern
    the shared DAG evaluator cannot run is unshared, with its reason."""
    patterns = patterns_from_plans(plans, statistics)
    for wp, plan in zip(patterns, plans):
        if not wp.shareable:
            continue
        why = "no MATCH_RECOGNIZE spec" if plan.spec is None else dag_unsupported(plan.spec)
        if why is None and plan.break_column is not None:
            why = "STRICT_CONTIGUITY across partitions"
        if why is not None:
            wp.shareable, wp.reason, wp.terms = False, why, []
    return patterns


def global_plan_for(plans: list[QueryPlan], *, algorithm: str = "BEST",
                    seconds: float | None = None, patterns: list | None = None,
                    statistics=None, access: float | None = None) -> GlobalPlan:
    """The global plan of one partitioning group (patterns numbered as in ``plans``):
    the sharing planner (``cepsql.sharing.plan_workload``: ``algorithm`` NONE / PREFIX /
    SA / TABU / BEST, time budget ``seconds``, pairs weight ``access``) over the patterns the shared DAG
    evaluator runs; the others are ``unshared`` (their own worker in the same pass)."""
    if patterns is None:
        patterns = sharing_patterns(plans, statistics)
    if not any(p.shareable for p in patterns):
        return GlobalPlan(unshared=list(range(len(plans))), algorithm="NONE")
    return plan_workload(patterns, algorithm=algorithm, seconds=seconds, access=access)


def unshared_reason(plan: QueryPlan, pattern=None) -> str:
    """Why a pattern runs its own evaluator in the pass (EXPLAIN WORKLOAD)."""
    if pattern is not None and getattr(pattern, "reason", ""):
        return pattern.reason
    spec = plan.spec
    strategy = getattr(spec, "strategy", None)
    if strategy is None:
        return "SQL:2016 mode (regex VM: preference order and contiguity are per pattern)"
    if str(strategy).upper() in ("STRICT_CONTIGUITY", "PARTITION_CONTIGUITY",
                                 "SKIP_TILL_NEXT_MATCH"):
        return f"STRATEGY {strategy} (in-order strategy: no sub-plan sharing)"
    return "not shareable"


class _UnsharedEvaluator:
    """The pass evaluator for unshared patterns: each runs its own worker (push style)."""

    def __init__(self, patterns: list[PassPattern]):
        self.streams = [(p, p.bound.worker) for p in patterns]

    def feed(self, batch: pa.RecordBatch) -> list[tuple[int, pa.RecordBatch]]:
        out = []
        for p, worker in self.streams:
            own = p.worker_batch(batch)
            if own.num_rows:
                out += [(p.index, b) for b in worker.feed(own)]
        return out

    def finish(self) -> list[tuple[int, pa.RecordBatch]]:
        out = []
        for p, worker in self.streams:
            out += [(p.index, b) for b in worker.finish()]
        return out


class DagEvaluator:
    """The shared DAG evaluator (runtime.shared_evaluator.SharedEvaluator) over the patterns the
    global plan binds, renumbered for it; outputs tagged with the workload's indices."""

    def __init__(self, global_plan: GlobalPlan, patterns: list[PassPattern],
                 members: list[int], replanner: WorkloadReplanner | None = None):
        """``replanner`` (group numbering): re-plan as the statistics drift."""
        local = {p: k for k, p in enumerate(members)}
        plan = GlobalPlan(
            nodes=[replace(n, owner=local[n.owner]) for n in global_plan.nodes],
            bindings=[replace(b, pattern=local[b.pattern]) for b in global_plan.bindings],
            algorithm=global_plan.algorithm, cost=global_plan.cost)
        chosen = [patterns[p] for p in members]
        self.indices = [p.index for p in chosen]
        bound, inputs = [p.bound for p in chosen], [p.inputs for p in chosen]
        # adaptive: evaluated in the chunks that are checked
        chunk = CHUNK_ROWS if replanner is None else replanner.settings.chunk_rows

        def make(plan: GlobalPlan) -> SharedEvaluator:
            return SharedEvaluator(plan, bound, chunk_rows=chunk, inputs=inputs)
        self.evaluator = make(plan) if replanner is None else \
            AdaptiveSharedEvaluator(plan, make, replanner.subset(members))
        masks = [p.relevant for p in chosen]
        self.relevant = None if None in masks else sorted(set(masks))

    def feed(self, batch: pa.RecordBatch) -> list[tuple[int, pa.RecordBatch]]:
        if self.relevant is not None:  # rows relevant to some pattern of the DAG
            keep = _kept(batch.column(self.relevant[0]))
            for name in self.relevant[1:]:
                keep = pc.or_(keep, _kept(batch.column(name)))
            batch = batch.filter(keep)
            if batch.num_rows == 0:
                return []
        return [(self.indices[k], b) for k, b in self.evaluator.feed(batch)]

    def finish(self) -> list[tuple[int, pa.RecordBatch]]:
        return [(self.indices[k], b) for k, b in self.evaluator.finish()]


class _Together:
    """Several evaluators fed the same batches."""

    def __init__(self, parts: list):
        self.parts = parts

    def feed(self, batch: pa.RecordBatch) -> list[tuple[int, pa.RecordBatch]]:
        return [out for part in self.parts for out in part.feed(batch)]

    def finish(self) -> list[tuple[int, pa.RecordBatch]]:
        return [out for part in self.parts for out in part.finish()]


def _dag_members(global_plan: GlobalPlan) -> list[int]:
    """The patterns the shared DAG evaluator runs: the bound ones and the nodes' owners."""
    return sorted({b.pattern for b in global_plan.bindings}
                  | {n.owner for n in global_plan.nodes})


def pass_evaluator(global_plan: GlobalPlan, patterns: list[PassPattern],
                   replanner: WorkloadReplanner | None = None):
    """The evaluator one task runs for a group: push-style ``feed(batch)`` /
    ``finish()`` returning [(pattern index, worker output batch)]. Patterns the global
    plan binds (and the owners of its nodes) run in the shared DAG evaluator (adaptive
    with a ``replanner``), the others their own workers."""
    members = _dag_members(global_plan)
    parts: list = []
    if members:
        parts.append(DagEvaluator(global_plan, patterns, members, replanner))
    own = [p for i, p in enumerate(patterns) if i not in set(members)]
    if own:
        parts.append(_UnsharedEvaluator(own))
    return parts[0] if len(parts) == 1 else _Together(parts)


def task_group(group: PassGroup) -> PassGroup:
    """What a task reads of a bound group (pickled into every task): the bound workers,
    their inputs and relevance columns, the global plan -- not the plans (specs, binding
    closures), the sharing planner's patterns or the prepared expressions, which are
    most of the pickle at hundreds of views."""
    return replace(group, prepare=[], workload_patterns=[], relevance=None,
                   patterns=[replace(p, plan=None) for p in group.patterns])


# --- the task function ----------------------------------------------------------------------
class SharedPassWorker:
    """Picklable mapInArrow function of one group: sorted shared-input batches in, tagged
    batches (``SharedPass.output_schema``) out."""

    def __init__(self, group: PassGroup, output_schema: pa.Schema,
                 evaluator: Callable = pass_evaluator,
                 computed: list[tuple[str, Expr]] | None = None,
                 batch_rows: int = BATCH_ROWS, slots: dict[int, str] | None = None,
                 ansi: bool | None = None,
                 column_sites: dict[str, tuple[str | None, str]] | None = None):
        self.group = group
        # computed column -> where its errors point (error_position.shared_column_sites)
        self.column_sites = dict(column_sites or {})
        self.slots = dict(slots or {})  # SharedPass.slots (default: a column per pattern)
        # sorted input batches are joined up to this many rows before evaluation: every
        # pattern of the group pays its per-batch cost once per joined batch
        self.batch_rows = batch_rows
        self.output_schema = output_schema
        self.evaluator = evaluator
        # prepared columns the task computes itself (Arrow kernels) and appends to each
        # batch, in order: cheaper than computing, moving and converting them in the engine
        self.computed = reused_subexpressions(list(computed or []))
        # the session's spark.sql.ansi.enabled for those columns' types: a Spark worker's
        # process does not see the driver's in-process options (None: read them here)
        self.ansi = ansi

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        lanes = LaneCache()  # the task's workers convert each batch column once
        patterns = [copy.copy(p) for p in self.group.patterns]
        for p in patterns:  # this task's own worker objects: streams never mix
            p.bound = copy.copy(p.bound)
            p.bound.worker = copy.copy(p.bound.worker)
            p.bound.worker._push = None
            p.bound.worker.lanes = lanes
        replanner = self.group.replanner   # only pass_evaluator takes it
        evaluator = self.evaluator(self.group.global_plan, patterns) if replanner is None \
            else self.evaluator(self.group.global_plan, patterns, replanner)
        for batch in joined_batches(batches, self.batch_rows):
            if self.computed:
                batch = with_computed(batch, self.computed, self.ansi, self.column_sites)
            yield from self._tagged(evaluator.feed(batch))
        yield from self._tagged(evaluator.finish())

    def _tagged(self, outputs: list[tuple[int, pa.RecordBatch]]) -> Iterator[pa.RecordBatch]:
        for index, out in outputs:
            if out.num_rows:
                yield tag_batch(index, out, self.output_schema, self.slots.get(index))


def joined_batches(batches: Iterator[pa.RecordBatch], rows: int
                   ) -> Iterator[pa.RecordBatch]:
    """The non-empty batches in order, consecutive ones concatenated until each holds at
    least ``rows`` rows (the last may hold fewer)."""
    pending: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        pending.append(batch)
        held += batch.num_rows
        if held >= rows:
            yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)
            pending, held = [], 0
    if pending:
        yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)


def with_computed(batch: pa.RecordBatch, computed: list[tuple[str, Expr]],
                  ansi: bool | None = None,
                  sites: dict[str, tuple[str | None, str]] | None = None) -> pa.RecordBatch:
    """batch with the row-local columns ``computed`` appended (exprs/arrow_eval, the
    in-process engine's evaluation of the same expressions); ansi: spark.sql.ansi.enabled
    (None: the in-process options'); sites: a column's errors' site and note
    (error_position.shared_column_sites)."""
    table = pa.Table.from_batches([batch])
    arrays = list(batch.columns)
    for name, expr in computed:  # each column readable by the later ones
        try:
            value = evaluate_arrow(expr, table, ansi)
        except CepError as err:
            if not sites or name not in sites:
                raise
            raise sited_column_error(err, *sites[name]) from None
        value = value.combine_chunks() if isinstance(value, pa.ChunkedArray) else value
        arrays.append(value)
        table = table.append_column(name, value)
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names
                                      + [name for name, _ in computed])


def reused_subexpressions(computed: list[tuple[str, Expr]]) -> list[tuple[str, Expr]]:
    """computed (for ``with_computed``) with every compound sub-expression equal to an
    earlier column's expression read from that column: a workload's relevance filters
    OR together conditions its views' columns hold already, so each is computed once
    per batch. The column holds exactly the value and type the sub-expression has
    (Arrow evaluation is bottom-up), and it is computed on its own anyway."""
    earlier: dict[object, str] = {}

    def reuse(expr: Expr) -> Expr:
        kids = children(expr)
        if not kids:
            return expr
        name = earlier.get(_key(expr))
        if name is not None:
            return ColumnRef(None, name)
        new = [reuse(k) for k in kids]
        return rebuild(expr, new) if any(a is not b for a, b in zip(new, kids)) else expr

    out = []
    for name, expr in computed:
        kids = children(expr)  # the column's own expression: its parts may be reused
        new = [reuse(k) for k in kids]
        out.append((name, rebuild(expr, new) if any(a is not b for a, b in zip(new, kids))
                    else expr))
        earlier.setdefault(_key(expr), name)
    return out


def computed_type(expr: Expr, schema: pa.Schema, ansi: bool | None = None
                  ) -> pa.DataType | None:
    """The Arrow type ``with_computed`` gives expr over schema (under ``ansi``), or None
    when the Arrow evaluation cannot compute it (the engine must)."""
    try:
        return evaluate_arrow(expr, schema.empty_table(), ansi).type
    except (CepError, pa.ArrowException, TypeError, ValueError):
        return None


def tag_batch(index: int, out: pa.RecordBatch, schema: pa.Schema,
              column: str | None = None) -> pa.RecordBatch:
    """A worker output batch of pattern ``index`` in the tagged layout (its rows in
    ``column``, default ``result_column(index)``)."""
    n = out.num_rows
    column = column or result_column(index)
    columns = [pa.array(np.full(n, index, dtype=np.int32))]
    for field_ in schema:
        if field_.name == TAG:
            continue
        if field_.name == column:
            columns.append(pa.StructArray.from_arrays(out.columns, fields=list(field_.type)))
        else:
            columns.append(pa.nulls(n, field_.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def split_output(tagged: pa.Table, shared_pass: SharedPass) -> list[pa.Table]:
    """In-process: each pattern's worker output (its ``worker_schema``) from the tagged
    rows. ``tag_batch`` makes every batch one pattern's: batches are routed whole (a
    batch holding several tags, e.g. after concatenation, is split by a filter)."""
    pieces: dict[int, list[pa.Array]] = {}
    for batch in tagged.to_batches():
        tags = batch.column(0)
        if batch.num_rows == 0:
            continue
        lo, hi = pc.min_max(tags).values()
        for index in ([lo.as_py()] if lo == hi else pc.unique(tags).to_pylist()):
            rows = batch if lo == hi else batch.filter(pc.equal(tags, index))
            pieces.setdefault(index, []).append(
                rows.column(batch.schema.get_field_index(shared_pass.column_of(index))))
    out = []
    for p in sorted((p for g in shared_pass.groups for p in g.patterns),
                    key=lambda p: p.index):
        schema = p.bound.worker_schema
        structs = pieces.get(p.index, [])
        if structs:
            struct = pa.concat_arrays(structs)
            arrays = [struct.field(i) for i in range(struct.type.num_fields)]
        else:
            arrays = [pa.array([], f.type) for f in schema]
        out.append(pa.Table.from_arrays(arrays, schema=schema))
    return out
