"""Plan a CEP-mode clause (STRATEGY ...) for the Cython evaluators (cep.pyx).

The pattern's shapes the evaluators run are those cep_expand turns into linear
sequences (run NFA) or cep_planner into plannable disjuncts (planned evaluator, under
SKIP_TILL_ANY_MATCH); everything else raises CepUnsupportedError naming the construct.

DEFINE follows rule R2: each top-level AND conjunct is compiled separately with the
set of other variables it reads; the evaluator applies a conjunct when a run takes a
row (once those variables are bound, R5) and re-checks the rest on completion.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyarrow as pa

from cepsql.algebra.expressions import (AggregateValue, BinaryOp, Classifier, Expr, RowValue,
                                   children, walk)
from cepsql.algebra.pattern import (Alternation, Anchor, Concat, Empty, Exclusion, Negation,
                               Permute, Quantified, Var, pattern_to_text, walk as walk_pattern)
from cepsql.algebra.rowrefs import bind_rows, rebuild
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.errors import CepAnalysisError, CepError, CepUnsupportedError
from cepsql.compile.opcodes import FUNC_CODES, STRATEGY_CODES
from cepsql.analyze.aggregates import (MOMENT_FUNCS, normalize_aggregates, result_type,
                         value_navigation)
from cepsql.compile.conditions import compile_conditions
from cepsql.analyze.decompose import DerivedColumns, localize, normalize_define_ref
from cepsql.compile.gathered import bind_gathered_all
from cepsql.analyze.measures import MATCH_NUMBER_COLUMN, Leaves, project_measure
from cepsql.compile.query_plan import BoundPlan, QueryPlan, SortColumn
from cepsql.compile.cep_expand import (LinearSeq, expand, group_arrays, negated_variables, not_programs,
                         pack_not_programs, settle_open_negations)
from cepsql.stats.worker import is_in_worker
from cepsql.runtime.task_planning import WorkerPlanner
from cepsql.planning.evaluator_choice import (EVALUATOR_IN_ORDER, PLANNED_STRATEGY, CepPlanChoice, Term,
                          choose_cep_plan, describe_choice, pattern_terms)
from cepsql.analyze.partition_inference import (visible_partitions, whole_input_output,
                                  with_inferred_partitions)
from cepsql.planning.options import PlannerOptions
from cepsql.analyze.relevance import relevance_filter, relevance_line
from cepsql.analyze.rowsets import LabelSets, RefTable

_IN_WORKER_NOTE = ("statistics estimated inside each Spark task from its first {rows} rows "
                   "(cepsql.stats.mode=worker): every task plans for itself with the "
                   "configured algorithm; the plan below, on uniform estimates, is what "
                   "a task without rows would run")
BREAK_COLUMN = "__cep_gbreak"


def _conjuncts(expr: Expr) -> list[Expr]:
    if isinstance(expr, BinaryOp) and expr.op.upper() == "AND":
        return _conjuncts(expr.left) + _conjuncts(expr.right)
    return [expr]


def _map(expr: Expr, fn) -> Expr:
    kids = children(expr)
    if kids:
        expr = rebuild(expr, [_map(k, fn) for k in kids])
    out = fn(expr)
    return expr if out is None else out


def plan_cep(spec: MatchRecognizeSpec, schema: pa.Schema, *, options=None,
             statistics=None) -> QueryPlan:
    from cepsql.compile import clause as ex
    strategy = spec.strategy
    skip = spec.after_match_skip
    if skip.explicit and skip.kind in ("TO_FIRST", "TO_LAST"):
        raise CepUnsupportedError("AFTER MATCH SKIP TO FIRST/LAST is not available in CEP mode; "
                                  "use SKIP PAST LAST ROW (non-overlapping) or omit it (all "
                                  "matches)", pos=skip.pos)
    if spec.window is not None and spec.window.kind == "time" and not spec.order_by:
        raise CepAnalysisError("WITHIN INTERVAL needs an ORDER BY key to measure time")
    spec = ex._canonical_columns(spec, schema)
    inferred: list[tuple[str, str]] = []
    if options is None or options.infer_partitions:
        spec, inferred = with_inferred_partitions(spec, [f.name for f in schema])
    ex._check_standard_restrictions(spec)
    relevant, keep_reason = relevance_filter(spec)
    terms, in_order_reason = _plannable(spec)
    if terms is not None:
        seqs = [LinearSeq(list(t.comps), list(t.negs), [None] * len(t.comps)) for t in terms]
    else:
        seqs = [s for s in expand(spec.pattern, strategy) if s.comps]
        settle_open_negations(seqs)
    labels = list(spec.variables)
    if len(labels) > 63:
        raise CepUnsupportedError("the CEP evaluator supports at most 63 pattern variables")
    for s in seqs:
        names = [c[0] for c in s.comps]
        if not _once_outside_groups(s):
            if s.repeats:   # AND(a, b+) outside KL under SKIP_TILL_ANY_MATCH, not planned
                raise CepUnsupportedError(
                    "AND(...) of non-single-variable items under SKIP_TILL_ANY_MATCH "
                    "(interleaved closures) runs on the planned evaluator or inside "
                    "KL(...); this clause needs the in-order evaluator outside KL",
                    pos=getattr(spec.pattern, "pos", None))
            raise CepUnsupportedError(
                "a pattern variable occurs twice in one sequence; the CEP evaluator needs "
                "each variable once per sequence (rename the second occurrence)")
        if any(negated_variables(n[0]) & set(names) for n in s.negs):
            raise CepUnsupportedError("a variable is used both in NOT(...) and positively")
    sets = LabelSets(labels, dict(spec.subsets))
    known = set(labels) | set(spec.subsets)
    prepare: list = []
    partition_cols = [ex._column_or_prepared(k.expr, f"__cep_p{i}", prepare)
                      for i, k in enumerate(spec.partition_by)]
    sort_keys = [SortColumn(c, True, True) for c in partition_cols]
    order_cols = []
    for i, key in enumerate(spec.order_by):
        col = ex._column_or_prepared(key.expr, f"__cep_o{i}", prepare)
        order_cols.append(col)
        sort_keys.append(SortColumn(col, key.ascending, key.effective_nulls_first))
    used = set(partition_cols) | set(order_cols)
    for field in schema:
        if field.name not in used and ex._sortable(field.type):
            sort_keys.append(SortColumn(field.name, True, True))

    # STRICT_CONTIGUITY across partitions (R5): the backend adds BREAK_COLUMN, 1 where a
    # row's predecessor in this global order lies in another partition
    global_order = None
    if strategy == "STRICT_CONTIGUITY" and partition_cols:
        global_order = sort_keys[len(partition_cols):len(partition_cols) + len(order_cols)]
        global_order += [SortColumn(f.name, True, True) for f in schema
                         if f.name not in order_cols and ex._sortable(f.type)]
    derived = DerivedColumns()
    conj_exprs: list[Expr] = []
    conj_label: list[int] = []
    conj_mask: list[int] = []
    conj_late: list[int] = []      # reads the match beyond named variables: check on completion
    conj_rowlocal: list[int] = []  # reads the current row only
    for var, refs, _, local in define_conjuncts(spec, sets, known, derived, _no_moments):
        for e in walk(local):
            if isinstance(e, RowValue) and isinstance(e.value, Classifier) and \
                    e.ref.physical_offset != 0:
                raise CepUnsupportedError("PREV/NEXT of CLASSIFIER() in DEFINE is not "
                                          "supported in CEP mode", pos=e.pos)
        conj_exprs.append(local)
        conj_label.append(labels.index(var))
        conj_mask.append(sum(1 << labels.index(v) for v in refs))
        late, rowlocal = _conjunct_scope(local, refs)
        conj_late.append(late)
        conj_rowlocal.append(rowlocal)

    one = spec.rows_per_match == "ONE"
    leaves = Leaves()
    measures = []
    for m in spec.measures:
        expr = normalize_aggregates(value_navigation(m.expr), derived, final_default=one,
                                    known_vars=known, in_define=False, members=sets.members)
        bound = bind_rows(expr, in_define=False, final_default=one, known_vars=known)
        measures.append((m.name, project_measure(bound, leaves)))
    prepare += [(name, expr) for expr, name in derived.columns.items()]

    program_of, programs = not_programs(seqs, labels)
    comps, seq_start, negs = [], [0], []
    for k, s in enumerate(seqs):
        base = len(comps)
        comps += [[k, labels.index(n), lo, hi] for n, lo, hi in s.comps]
        negs += [[k, program_of[child], base + a, base + b, base + c, base + d]
                 for child, a, b, c, d, _ in s.negs]
        seq_start.append(len(comps))
    not_arrays = pack_not_programs(programs, conj_label, conj_mask, conj_late, labels)
    not_arrays.update(group_arrays(seqs, strategy, conj_label, conj_mask, labels))
    order = sorted(labels)
    rank = [order.index(n) for n in labels]
    proceed = _proceed_masks(seqs, labels) if strategy == "SKIP_TILL_NEXT_MATCH" else None
    choice = worker_planner = None
    if terms is not None:
        if is_in_worker(statistics):  # each task re-plans from its first rows
            choice = choose_cep_plan(spec, terms, options or PlannerOptions(), None)
            choice.stats_note = _IN_WORKER_NOTE.format(rows=statistics.sample_rows)
            worker_planner = WorkerPlanner(spec, terms, options or PlannerOptions(), labels,
                                           seq_start, conj_label, conj_mask, conj_late,
                                           statistics.sample_rows,
                                           getattr(statistics, "adaptive", None))
        else:
            choice = choose_cep_plan(spec, terms, options or PlannerOptions(), statistics)
            note = getattr(statistics, "note", "")
            if note:
                choice.stats_note = "; ".join(n for n in (choice.stats_note, note) if n)
    tree_arrays = _tree_arrays(choice, terms, labels, seq_start, conj_label, conj_mask,
                               conj_late)
    if tree_arrays:
        tree_arrays.update(_negation_nodes(choice, terms, labels, conj_label, conj_mask,
                                           conj_late))
    input_columns = [f.name for f in schema]
    pseudo = [f"\x00conj{i}" for i in range(len(conj_exprs))]

    def bind(prepared: pa.Schema) -> BoundPlan:
        try:
            return _bind(prepared)
        except CepError:
            raise
        except (KeyError, ValueError) as exc:
            raise CepAnalysisError(str(exc)) from exc

    def _bind(prepared: pa.Schema) -> BoundPlan:
        from cepsql.runtime.cep_worker import CepConfig, CepWorker
        refs = RefTable(sets)
        agg_columns = [a.column for a in leaves.aggregates if a.column is not None]
        code = compile_conditions(dict(zip(pseudo, conj_exprs)), labels + pseudo, refs,
                                  prepared, agg_columns,
                                  ansi=(options or PlannerOptions()).ansi)
        agg_vm_column = dict(zip(agg_columns, code.extra_columns))
        agg_specs, agg_fields = [], []
        for i, agg in enumerate(leaves.aggregates):
            arg_type = None if agg.column is None else prepared.field(agg.column).type
            agg_specs.append([sets.set_id(agg.var), FUNC_CODES[agg.func],
                              agg_vm_column.get(agg.column, -1), int(agg.final)])
            if agg.func != "ROWS":  # a gathered aggregate's row list has no column
                agg_fields.append(pa.field(f"__cep_a{i}", result_type(agg.func, arg_type)))
        gathered, gathered_fields = bind_gathered_all(leaves, prepared)
        agg_fields += gathered_fields
        leaf_specs, leaf_fields = [], []
        for i, (ref, column) in enumerate(leaves.items):
            leaf_specs.append([sets.set_id(ref.var), 0 if ref.logical == "FIRST" else 1,
                               ref.logical_offset, ref.physical_offset, int(ref.final),
                               1 if column is None else 0])
            dtype = pa.string() if column is None else prepared.field(column).type
            leaf_fields.append(pa.field(f"__cep_l{i}", dtype, nullable=True))
        if one:
            passthrough = list(partition_cols)
        else:
            passthrough = input_columns + [c for c in partition_cols if c not in input_columns]
        fields = [prepared.field(c) for c in passthrough] + leaf_fields + agg_fields
        fields.append(pa.field(MATCH_NUMBER_COLUMN, pa.int64(), nullable=True))
        n_labels = len(labels)
        config = CepConfig(
            labels=labels, code=code,
            conj_off=np.asarray(code.offsets[n_labels:], dtype=np.int32),
            conj_label=np.asarray(conj_label, dtype=np.int32),
            conj_mask=np.asarray(conj_mask, dtype=np.uint64),
            refs=refs.encode(), membership=sets.membership(),
            comps=np.asarray(comps, dtype=np.int32).reshape(-1, 4),
            seq_start=np.asarray(seq_start, dtype=np.int32),
            negs=np.asarray(negs, dtype=np.int32).reshape(-1, 6),
            leaves=np.asarray(leaf_specs, dtype=np.int32).reshape(-1, 6),
            leaf_columns=[c for _, c in leaves.items],
            measure_aggregates=np.asarray(agg_specs, dtype=np.int32).reshape(-1, 4),
            aggregate_columns=[(a.func, a.column) for a in leaves.aggregates],
            rank=np.asarray(rank, dtype=np.int32),
            strategy=STRATEGY_CODES[strategy],
            all_rows=not one,
            with_unmatched=spec.all_rows_option == "WITH_UNMATCHED",
            select_past_last=skip.explicit and skip.kind == "PAST_LAST_ROW",
            partition_columns=partition_cols, passthrough=passthrough,
            window_kind=0 if spec.window is None else (1 if spec.window.kind == "rows" else 2),
            window_size=0 if spec.window is None else spec.window.size,
            window_column=order_cols[0] if order_cols else None,
            output_schema=pa.schema(fields),
            breaks_column=BREAK_COLUMN if global_order else None,
            comp_proceed=proceed,
            conj_late=np.asarray(conj_late, dtype=np.uint8),
            conj_rowlocal=np.asarray(conj_rowlocal, dtype=np.uint8),
            worker_planner=worker_planner, gathered=tuple(gathered),
            **not_arrays, **tree_arrays)
        return BoundPlan(CepWorker(config), config.output_schema, projection)

    projection = ex._final_projection(*visible_partitions(spec, partition_cols), order_cols,
                                      measures, input_columns)
    ex._check_unique_names(projection, spec)
    return QueryPlan(prepare, partition_cols, sort_keys, bind,
                     primary_sort_keys=len(partition_cols) + len(order_cols), spec=spec,
                     global_order=global_order,
                     explain=_explain(spec, choice, terms, seqs, inferred, in_order_reason,
                                      relevance_line(relevant, keep_reason)),
                     chosen_plans=tuple(choice.plans) if choice is not None and choice.planned
                     else (),
                     break_column=BREAK_COLUMN if global_order else None,
                     relevance_filter=relevant)


def _once_outside_groups(seq: LinearSeq) -> bool:
    """Whether each variable has one component in the sequence, or several all inside
    one iteration group (alternatives of KL(AND(a, b)) or KL(OR(SEQ(a, b), a)) label the
    same variable: R6b names its rows of every iteration alike)."""
    where: dict[str, list] = {}
    for i, (name, _, _) in enumerate(seq.comps):
        group = next((g[0] for g in seq.groups or () if g[0] <= i <= g[1]), None)
        where.setdefault(name, []).append(group)
    return all(len(at) == 1 or (None not in at and len(set(at)) == 1)
               for at in where.values())


def _proceed_masks(seqs: list[LinearSeq], labels: list[str]) -> np.ndarray:
    """Per component (global index): the labels a run may take next without taking this
    component again -- the proceed states of the epsilon closure after a take there, in
    its own sequence and in every sequence that shares the NFA states up to it (same
    pattern nodes, same AND order). SKIP_TILL_NEXT_MATCH ignores a row only when no
    state of the closure takes it (R5): a waiting run dies when a sibling state could.
    Column 1: inside an iteration group, the labels of sibling sequences after the
    group (SEQ(KL(SEQ(a, b)), OR(c, d))): in the closure only when the walk leaves the
    group, which depends on the iteration count (cep.pyx _proceed_dynamic adds them)."""
    out = []
    for s in seqs:
        first_group = min((g[0] for g in s.groups or ()), default=None)
        for i in range(len(s.comps)):
            mask = leave = 0
            group = next((g for g in s.groups or () if g[0] <= i <= g[1]), None)
            for t in seqs:
                if len(t.comps) <= i or t.ids[:i + 1] != s.ids[:i + 1]:
                    continue
                if first_group is not None:
                    # the evaluator walks its own closure (it depends on the iteration
                    # count); other sequences may share states before the group and,
                    # inside it, the ones after it once the walk leaves the group
                    if t is s:
                        continue
                    if group is not None:
                        leave |= _next_labels(t, group[1], labels)
                        continue
                mask |= _next_labels(t, i, labels)
            if group is not None:
                mask |= _sibling_alternatives(s, group, i, labels)
            out.append((mask, leave))
    return np.asarray(out, dtype=np.uint64).reshape(-1, 2)


def _sibling_alternatives(s: LinearSeq, group: tuple, i: int, labels: list[str]) -> int:
    """Inside a group, alternatives sharing the NFA states up to i's (KL(SEQ(d, AND(a,
    b))): d, then a or b): the labels the others take next, up to a required one."""
    alts = group[4]
    own = next((a, b) for a, b in alts if a <= i <= b)
    rel = i - own[0]
    mask = 0
    for a, b in alts:
        if (a, b) != own and a + rel <= b and s.ids[a:a + rel + 1] == s.ids[own[0]:i + 1]:
            mask |= _next_labels(s, a + rel, labels, b + 1)
    return mask


def _next_labels(t: LinearSeq, i: int, labels: list[str], end: int | None = None) -> int:
    """Labels of t's components after i (before end) up to the first one that must
    take a row."""
    mask = 0
    for j in range(i + 1, len(t.comps) if end is None else end):
        mask |= 1 << labels.index(t.comps[j][0])
        if t.comps[j][1] > 0:
            break
    return mask


def _planned_terms(spec: MatchRecognizeSpec) -> list[Term] | None:
    """The disjuncts the planned evaluator runs, or None (in-order evaluation)."""
    return _plannable(spec)[0]


def _plannable(spec: MatchRecognizeSpec) -> tuple[list[Term] | None, str]:
    """(terms, "") for a planned clause, else (None, why it runs in order)."""
    if spec.strategy != PLANNED_STRATEGY:
        return None, (f"STRATEGY {spec.strategy} decides each take by the rows taken "
                      "before it, so out-of-order plans would change the result")
    for node in walk_pattern(spec.pattern):
        if isinstance(node, (Exclusion, Anchor)):
            return None, "pattern shape not plannable"   # expand() raises the precise error
        if isinstance(node, Quantified) and not isinstance(node.child, Var):
            return None, ("KL over a composite pattern has no JQPG reduction (the reduction "
                          "applies Kleene closure to single events only)")
        if isinstance(node, (Concat, Permute)) and \
                any(isinstance(i, Negation) for i in node.items) and \
                all(_nullable(i) for i in node.items if not isinstance(i, Negation)):
            # a NOT whose SEQ/AND may be empty still checks (R6); DNF drops it
            return None, "a NOT whose SEQ/AND may match no row has no disjunct to check it"
    if _flattened_negation(spec.pattern, None):
        return None, ("a SEQ holding a NOT nested in another SEQ: the DNF would flatten it "
                      "and move the NOT's region")
    try:
        terms = pattern_terms(spec.pattern)
    except CepUnsupportedError as exc:
        return None, f"pattern shape not plannable ({exc.message})"
    for t in terms:
        if any(negated_variables(n[0]) & {c[0] for c in t.comps} for n in t.negs):
            return None, "a variable is both negated and positive in one disjunct"
    if not terms:
        return None, "pattern shape not plannable"
    return terms, ""


def _flattened_negation(node, container) -> bool:
    """Whether a SEQ holding a NOT (its own item, or an AND's NOT whose slot it fixes)
    sits directly in another SEQ: the DNF flattens it, which would move the NOT's region
    (R6 scopes it to its own SEQ). An AND in an AND shares its slot, so flattening it is
    exact."""
    if isinstance(node, (Concat, Permute)):
        if container is Concat and isinstance(node, Concat) and _has_negation(node):
            return True
        container = type(node)
    return any(_flattened_negation(c, container) for c in
               list(getattr(node, "items", ()) or ()) + [getattr(node, "child", None)]
               if c is not None)


def _has_negation(node) -> bool:
    return isinstance(node, Negation) or any(
        _has_negation(c) for c in
        list(getattr(node, "items", ()) or ()) + [getattr(node, "child", None)]
        if c is not None)


def _nullable(node) -> bool:
    """Whether node can match no row at all."""
    if isinstance(node, (Empty, Negation)):
        return True
    if isinstance(node, Quantified):
        return node.min == 0 or _nullable(node.child)
    if isinstance(node, Alternation):
        return any(_nullable(i) for i in node.items)
    if isinstance(node, (Concat, Permute)):
        return all(_nullable(i) for i in node.items)
    return False



def _no_moments(cond: Expr) -> None:
    """CEP mode has no moment aggregates (stddev, variance, ...) in DEFINE."""
    for e in walk(cond):
        if isinstance(e, AggregateValue) and e.func in MOMENT_FUNCS:
            raise CepUnsupportedError(
                f"{e.func.lower()}() in DEFINE is not supported in CEP mode (SQL:2016 mode "
                "supports it)", pos=e.pos)


def define_conjuncts(spec, sets, known: set, derived, check=None):
    """Each DEFINE's top-level AND conjuncts as (variable, other variables read, bound
    conjunct, localized conjunct) — one loop for plan_cep and sharing.patterns, so both
    number and scope conjuncts the same way. ``check`` sees each normalized condition."""
    def own(ref_var, var):
        return ref_var is None or ref_var == var or var in sets.subsets.get(ref_var, ())

    for var, cond in spec.defines.items():
        cond = normalize_aggregates(value_navigation(cond), derived, final_default=False,
                                    known_vars=known, in_define=True, members=sets.members)
        if check is not None:
            check(cond)
        bound = bind_rows(cond, in_define=True, final_default=False, known_vars=known)

        def fix(e, var=var):
            if isinstance(e, RowValue) and not own(e.ref.var, var):
                return replace(e, ref=replace(e.ref, final=True))
            return None
        for conj in _conjuncts(_map(bound, fix)):
            refs: set[str] = set()
            for e in walk(conj):
                if isinstance(e, RowValue) and e.ref.var is not None:
                    refs |= sets.members(e.ref.var)
                elif isinstance(e, AggregateValue) and e.var is not None:
                    refs |= sets.members(e.var)
            refs.discard(var)
            local = localize(conj, derived,
                             lambda ref, v=var: normalize_define_ref(ref, v, sets.members))
            yield var, refs, conj, local

def _conjunct_scope(local: Expr, refs: set) -> tuple[int, int]:
    """(late, rowlocal) of a localized conjunct: late when it reads rows of the match
    other than its own variable's and the named variables' (unqualified FIRST/LAST with
    an offset, unqualified aggregates), so only the complete match decides it; rowlocal
    when it reads nothing but the current row (and rows PREV/NEXT of it)."""
    late, rowlocal = False, True
    for e in walk(local):
        if isinstance(e, RowValue):
            current = e.ref.logical == "LAST" and e.ref.logical_offset == 0
            if e.ref.var is None and not current:
                late = True
            if not current:
                rowlocal = False
        elif isinstance(e, AggregateValue):
            rowlocal = False
            if e.var is None:
                late = True
    return int(late), int(rowlocal and not refs)


def _post_order(root) -> list:
    """The plan tree's nodes, children before parents (the order cep.pyx numbers them)."""
    if root.is_leaf:
        return [root]
    return _post_order(root.left) + _post_order(root.right) + [root]


def _label_comps(comp_of: dict, labels: list[str], label_mask: int) -> int:
    """Components (bit mask) of a term that hold the variables in label_mask."""
    return sum(1 << i for v, i in comp_of.items() if label_mask >> labels.index(v) & 1)


def _covering(masks: list[int], need: int) -> list[int]:
    """Indices of the nodes holding every component in need, lowest first."""
    return sorted((k for k, m in enumerate(masks) if m & need == need),
                  key=lambda k: bin(masks[k]).count("1"))


def _csr(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    starts = np.cumsum([0] + [len(x) for x in lists]).astype(np.int32)
    return starts, np.asarray([v for x in lists for v in x], dtype=np.int32)


def _tree_arrays(choice, terms, labels, seq_start, conj_label, conj_mask, conj_late) -> dict:
    """The plans as arrays for cep.pyx: nodes (term, left, right, comp, parent) in
    post-order, each term's root last; per node the conjuncts to check when it forms an
    instance (the lowest node holding every variable a conjunct reads)."""
    if choice is None or not choice.planned:
        return {}
    nodes, node_conj, leaf_of, after = [], [], [], []
    for t, (term, root) in enumerate(zip(terms, choice.trees())):
        base = seq_start[t]
        comp_of = {name: i for i, (name, _, _) in enumerate(term.comps)}
        after += term.after_masks()
        leaf_of += [0] * len(term.comps)
        order = _post_order(root)
        index = {id(tn): len(nodes) + k for k, tn in enumerate(order)}
        for tn in order:
            if tn.is_leaf:
                leaf_of[base + tn.leaf] = index[id(tn)]
                nodes.append([t, -1, -1, base + tn.leaf, -1])
            else:
                li, ri = index[id(tn.left)], index[id(tn.right)]
                nodes[li][4] = nodes[ri][4] = index[id(tn)]
                nodes.append([t, li, ri, -1, -1])
        masks = [tn.mask for tn in order]
        lists = [[] for _ in order]
        for c, (lab, mask, late) in enumerate(zip(conj_label, conj_mask, conj_late)):
            name = labels[lab]
            if name not in comp_of or late:
                continue
            need = 1 << comp_of[name] | _label_comps(comp_of, labels, mask)
            lists[_covering(masks, need)[0]].append(c)
        node_conj += lists
    starts, flat = _csr(node_conj)
    return dict(
        plan_nodes=np.asarray(nodes, dtype=np.int32).reshape(-1, 5),
        plan_leaf_of=np.asarray(leaf_of, dtype=np.int32),
        plan_after=np.asarray(after, dtype=np.uint64),
        plan_conj_start=starts, plan_conj=flat)


def _negation_nodes(choice, terms, labels, conj_label, conj_mask, conj_late) -> dict:
    """Per plan node, the NOT checks to run as soon as it forms an instance (VLDB 2018
    section 4: the lowest node binding the region's neighbours and every variable the
    NOT's DEFINE reads). Open (window-bounded) regions and NOTs whose DEFINE needs the
    whole match stay on the complete match only."""
    lists, q_base = [], 0
    for term, root in zip(terms, choice.trees()):
        masks = [tn.mask for tn in _post_order(root)]
        term_lists = [[] for _ in masks]
        comp_of = {name: i for i, (name, _, _) in enumerate(term.comps)}
        after = term.after_masks()
        for q, ((child, *_), (left, right)) in enumerate(zip(term.negs, term.neg_sides)):
            names = negated_variables(child)
            conjs = [c for c, lab in enumerate(conj_label) if labels[lab] in names]
            if not left or any(conj_late[c] for c in conjs):
                continue
            need = left | right
            for c in conjs:
                need |= _label_comps(comp_of, labels, conj_mask[c])
            for k in _covering(masks, need):
                if k == len(masks) - 1:
                    break   # the root checks every NOT anyway
                if _region_settled(masks[k], left, right, after, len(term.comps)):
                    term_lists[k].append(q_base + q)
                    break
        lists += term_lists
        q_base += len(term.negs)
    starts, flat = _csr(lists)
    return dict(plan_neg_start=starts, plan_neg=flat)


def _region_settled(mask: int, left: int, right: int, after: list[int], n: int) -> bool:
    """Whether no component outside the instance (mask) can put a row inside the NOT's
    region (after the left components, before the right ones) -- rows of the match are
    not NOT candidates, so before that the check could reject an instance whose
    complete match passes."""
    bits = [i for i in range(n) if (left | right) >> i & 1]
    for x in range(n):
        if mask >> x & 1:
            continue
        before = any(after[x] >> b & 1 for b in bits if left >> b & 1)
        behind = any(after[b] >> x & 1 for b in bits if right >> b & 1)
        if not (before or behind):
            return False
    return True


def _explain(spec, choice, terms, seqs, inferred, in_order_reason: str = "",
             relevance: str = "") -> str:
    window = ""
    if spec.window is not None:
        window = (f", WITHIN {spec.window.size:g} ROWS" if spec.window.kind == "rows" else
                  f", WITHIN {spec.window.size / 1e6:g} SECONDS")
    lines = [f"CEP mode: STRATEGY {spec.strategy}{window}",
             f"pattern:       {getattr(spec, 'pattern_text', '') or ''}".rstrip()]
    if inferred:
        lines += [f"partition by:  {col} (inferred: {why})" for col, why in inferred]
    elif spec.partition_by:
        lines.append("partition by:  " + ", ".join(k.name or "<expr>" for k in spec.partition_by))
    elif whole_input_output(spec):
        lines.append(f"parallelism:   one task: {whole_input_output(spec)}, so no partition "
                     "key is inferred and no time slices are cut")
    if relevance:
        lines.append(relevance)
    if terms is not None and len(terms) > 1:
        lines.append(f"disjuncts:     {len(terms)} (planned separately, results unioned)")
    for node in walk_pattern(spec.pattern):
        if isinstance(node, Negation) and not isinstance(node.child, Var):
            lines.append(f"negation:      NOT({pattern_to_text(node.child)}) -- absence of any "
                         "match of it in its region (any-match search, R6a)")
        elif isinstance(node, Quantified) and not isinstance(node.child, Var):
            lines.append(f"kleene:        KL({pattern_to_text(node.child)}) -- iterations "
                         "looped in order on the run NFA (R6b)")
    if choice is None:
        choice = CepPlanChoice(EVALUATOR_IN_ORDER, in_order_reason or
                               "pattern shape not plannable (see docs/cep_mode.md)")
        lines.append(f"linear sequences: {len(seqs)}")
    lines.append(describe_choice(choice, terms))
    return "\n".join(lines)
