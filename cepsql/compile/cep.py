"""CEP mode's program builder (a STRATEGY clause) for the Cython evaluators (cep.pyx).

Called by the clause skeleton (``compile.clause``) through the ``ModeCompiler`` steps
of ``CepMode``: the run NFA's sequences or the planned evaluator's disjuncts, DEFINE
as conjuncts, the plan choice (``planning``), and the ``CepConfig`` the runtime's
CepWorker runs.

The pattern's shapes the evaluators run are those cep_expand turns into linear
sequences (run NFA) or planning.plannable / planning.evaluator_choice into plannable
disjuncts (planned evaluator, under SKIP_TILL_ANY_MATCH); everything else raises
CepUnsupportedError naming the construct.

DEFINE follows rule R2: each top-level AND conjunct is compiled separately with the
set of other variables it reads; the evaluator applies a conjunct when a run takes a
row (once those variables are bound, R5) and re-checks the rest on completion.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from cepsql.algebra.expressions import AggregateValue, Classifier, Expr, RowValue, walk
from cepsql.algebra.pattern import Negation, Quantified, Var, pattern_pos
from cepsql.algebra.pattern import walk as walk_pattern
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.analyze.aggregate_functions import MOMENT_FUNCS
from cepsql.analyze.cep_conjuncts import conjunct_scope, define_conjuncts
from cepsql.analyze.partition_inference import with_inferred_partitions
from cepsql.analyze.relevance import relevance_filter
from cepsql.compile.cep_expand import (
    expand,
    group_arrays,
    negated_variables,
    not_programs,
    pack_not_programs,
    settle_open_negations,
)
from cepsql.compile.cep_plan_arrays import plan_arrays
from cepsql.compile.clause_parts import BoundOutput, Clause, sortable
from cepsql.compile.linear_seq import LinearSeq
from cepsql.compile.opcodes import STRATEGY_CODES
from cepsql.compile.query_plan import CepExplainFacts, SortColumn
from cepsql.compile.worker_config import CepConfig, TaskPlanning
from cepsql.errors import CepUnsupportedError
from cepsql.planning.evaluator_choice import Term, choose_cep_plan
from cepsql.planning.options import PlannerOptions
from cepsql.planning.plannable import plannable_terms
from cepsql.stats.worker import is_in_worker

_IN_WORKER_NOTE = ("statistics estimated inside each Spark task from its first {rows} rows "
                   "(cepsql.stats.mode=worker): every task plans for itself with the "
                   "configured algorithm; the plan below, on uniform estimates, is what "
                   "a task without rows would run")
BREAK_COLUMN = "__cep_gbreak"


@dataclass
class Conjuncts:
    """DEFINE's top-level AND conjuncts in evaluator order (rule R2): the localized
    condition, its variable's label, the labels it reads (bit mask), whether only the
    complete match decides it (late) and whether it reads the current row only."""
    exprs: list[Expr] = field(default_factory=list)
    label: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    late: list[int] = field(default_factory=list)
    rowlocal: list[int] = field(default_factory=list)


@dataclass
class Sequences:
    """The run NFA's linear sequences as cep.pyx's arrays (CepConfig fields)."""
    comps: list[list[int]]
    seq_start: list[int]
    negs: list[list[int]]
    rank: list[int]
    proceed: np.ndarray | None
    arrays: dict            # NOT programs and iteration groups


class CepMode:
    """CEP mode (a STRATEGY clause): the steps of ``clause_parts.ModeCompiler``. Plans
    cost-based: ``statistics(spec)`` (called only when a plan choice needs it) returns
    the input's PatternStatistics, or tells the tasks to plan from their own rows."""

    def __init__(self, options: PlannerOptions, statistics=None):
        self.options = options
        self.statistics = statistics
        self.inferred: list[tuple[str, str]] = []
        self.conjuncts = Conjuncts()

    def check(self, spec: MatchRecognizeSpec) -> None:
        skip = spec.after_match_skip
        if skip.explicit and skip.kind in ("TO_FIRST", "TO_LAST"):
            raise CepUnsupportedError("AFTER MATCH SKIP TO FIRST/LAST is not available in CEP "
                                      "mode; use SKIP PAST LAST ROW (non-overlapping) or omit "
                                      "it (all matches)", pos=skip.pos)

    def shape(self, spec: MatchRecognizeSpec, schema: pa.Schema) -> MatchRecognizeSpec:
        """Inferred partition keys, the relevance filter, and the pattern as planned
        disjuncts or as the run NFA's linear sequences (checked for what it runs)."""
        if self.options.infer_partitions:
            spec, self.inferred = with_inferred_partitions(spec, [f.name for f in schema])
        self.relevant, self.keep_reason = relevance_filter(spec)
        self.terms, self.in_order_reason = plannable_terms(spec)
        self.seqs = linear_sequences(spec, self.terms)
        check_sequences(spec, self.seqs)
        return spec

    def conditions(self, clause: Clause) -> tuple[dict[str, Expr], list[str]]:
        """Each conjunct under a name of its own, after the variables' labels (their
        offsets in the VM code are CepConfig.conj_off)."""
        c, labels = self.conjuncts, clause.labels
        for var, refs, _, local in define_conjuncts(clause.spec, clause.sets, clause.known,
                                                    clause.derived, _no_moments):
            _check_classifier_navigation(local)
            late, rowlocal = conjunct_scope(local, refs)
            c.exprs.append(local)
            c.label.append(labels.index(var))
            c.mask.append(sum(1 << labels.index(v) for v in refs))
            c.late.append(late)
            c.rowlocal.append(rowlocal)
        pseudo = [f"\x00conj{i}" for i in range(len(c.exprs))]
        return dict(zip(pseudo, c.exprs)), labels + pseudo

    def program(self, clause: Clause) -> None:
        """The sequences' arrays, the plan choice (here or in each task) and its arrays."""
        self.global_order = strict_global_order(clause)
        self.sequences = sequence_arrays(self.seqs, clause.labels, clause.spec.strategy,
                                         self.conjuncts)
        self.choice, self.task_planning = self._choose(clause)
        c = self.conjuncts
        self.plan_arrays = plan_arrays(self.choice, self.terms, clause.labels,
                                       self.sequences.seq_start, c.label, c.mask, c.late)

    def _choose(self, clause: Clause):
        """(plan choice or None for in-order evaluation, TaskPlanning or None)."""
        if self.terms is None:
            return None, None
        spec, statistics = clause.spec, self.statistics
        if not is_in_worker(statistics):
            choice = choose_cep_plan(spec, self.terms, self.options, statistics)
            note = getattr(statistics, "note", "")
            if note:
                choice.stats_note = "; ".join(n for n in (choice.stats_note, note) if n)
            return choice, None
        # each task re-plans from its first rows
        choice = choose_cep_plan(spec, self.terms, self.options, None)
        choice.stats_note = _IN_WORKER_NOTE.format(rows=statistics.sample_rows)
        c = self.conjuncts
        planning = TaskPlanning(spec, self.terms, self.options, clause.labels,
                                self.sequences.seq_start, c.label, c.mask, c.late,
                                statistics.sample_rows, getattr(statistics, "adaptive", None))
        return choice, planning

    def config(self, clause: Clause, out: BoundOutput) -> CepConfig:
        spec, c, s = clause.spec, self.conjuncts, self.sequences
        skip = spec.after_match_skip
        return CepConfig(
            labels=clause.labels, code=out.code,
            conj_off=np.asarray(out.code.offsets[len(clause.labels):], dtype=np.int32),
            conj_label=np.asarray(c.label, dtype=np.int32),
            conj_mask=np.asarray(c.mask, dtype=np.uint64),
            refs=out.refs.encode(), membership=clause.sets.membership(),
            comps=np.asarray(s.comps, dtype=np.int32).reshape(-1, 4),
            seq_start=np.asarray(s.seq_start, dtype=np.int32),
            negs=np.asarray(s.negs, dtype=np.int32).reshape(-1, 6),
            leaves=out.leaves, leaf_columns=out.leaf_columns,
            measure_aggregates=out.measure_aggregates,
            aggregate_columns=out.aggregate_columns,
            rank=np.asarray(s.rank, dtype=np.int32), merging=self.options.run_merging,
            max_partial_matches=self.options.max_partial_matches,
            strategy=STRATEGY_CODES[spec.strategy],
            all_rows=spec.rows_per_match != "ONE",
            with_unmatched=spec.all_rows_option == "WITH_UNMATCHED",
            select_past_last=skip.explicit and skip.kind == "PAST_LAST_ROW",
            partition_columns=clause.partition_columns, passthrough=out.passthrough,
            **clause.window(), output_schema=out.output_schema,
            breaks_column=BREAK_COLUMN if self.global_order else None,
            comp_proceed=s.proceed,
            conj_late=np.asarray(c.late, dtype=np.uint8),
            conj_rowlocal=np.asarray(c.rowlocal, dtype=np.uint8),
            worker_planner=self.task_planning, gathered=out.gathered,
            **s.arrays, **self.plan_arrays)

    def plan_fields(self, clause: Clause) -> dict:
        choice = self.choice
        composites = [n for n in walk_pattern(clause.spec.pattern)
                      if isinstance(n, (Negation, Quantified)) and not isinstance(n.child, Var)]
        facts = CepExplainFacts(choice, self.terms, len(self.seqs), self.inferred,
                                self.in_order_reason, self.relevant, self.keep_reason,
                                composites)
        return dict(global_order=self.global_order,
                    break_column=BREAK_COLUMN if self.global_order else None,
                    relevance_filter=self.relevant, explain_facts=facts,
                    chosen_plans=tuple(choice.plans) if choice is not None and choice.planned
                    else ())


def linear_sequences(spec: MatchRecognizeSpec, terms: list[Term] | None) -> list[LinearSeq]:
    """The planned disjuncts as sequences, or the pattern expanded for the run NFA."""
    if terms is not None:
        return [LinearSeq(list(t.comps), list(t.negs), [None] * len(t.comps)) for t in terms]
    seqs = [s for s in expand(spec.pattern, spec.strategy) if s.comps]
    settle_open_negations(seqs)
    return seqs


def check_sequences(spec: MatchRecognizeSpec, seqs: list[LinearSeq]) -> None:
    """What the CEP evaluator cannot run: CepUnsupportedError naming the construct."""
    if len(spec.variables) > 63:
        raise CepUnsupportedError("the CEP evaluator supports at most 63 pattern variables")
    for s in seqs:
        names = [c[0] for c in s.comps]
        if not _once_outside_groups(s):
            if s.repeats:   # AND(a, b+) outside KL under SKIP_TILL_ANY_MATCH, not planned
                raise CepUnsupportedError(
                    "AND(...) of non-single-variable items under SKIP_TILL_ANY_MATCH "
                    "(interleaved closures) runs on the planned evaluator or inside "
                    "KL(...); this clause needs the in-order evaluator outside KL",
                    pos=pattern_pos(spec.pattern))
            raise CepUnsupportedError(
                "a pattern variable occurs twice in one sequence; the CEP evaluator needs "
                "each variable once per sequence (rename the second occurrence)",
                pos=_second_occurrence(spec, names))
        if any(negated_variables(n[0]) & set(names) for n in s.negs):
            raise CepUnsupportedError("a variable is used both in NOT(...) and positively",
                                      pos=pattern_pos(spec.pattern))


def _second_occurrence(spec: MatchRecognizeSpec, names: list[str]) -> int | None:
    """Where the pattern writes a variable of names a second time (the pattern's start
    when the repetition comes from expansion, e.g. of a quantified group)."""
    seen: set[str] = set()
    for node in walk_pattern(spec.pattern):
        if isinstance(node, Var) and node.name in names:
            if node.name in seen and node.pos is not None:
                return node.pos
            seen.add(node.name)
    return pattern_pos(spec.pattern)


def _check_classifier_navigation(local: Expr) -> None:
    for e in walk(local):
        if isinstance(e, RowValue) and isinstance(e.value, Classifier) and \
                e.ref.physical_offset != 0:
            raise CepUnsupportedError("PREV/NEXT of CLASSIFIER() in DEFINE is not "
                                      "supported in CEP mode", pos=e.pos)


def strict_global_order(clause: Clause) -> list[SortColumn] | None:
    """STRICT_CONTIGUITY across partitions (R5): the order in which the backend flags
    (BREAK_COLUMN) a row whose predecessor lies in another partition; else None."""
    if clause.spec.strategy != "STRICT_CONTIGUITY" or not clause.partition_columns:
        return None
    n_part, n_order = len(clause.partition_columns), len(clause.order_columns)
    order = clause.sort_keys[n_part:n_part + n_order]
    return order + [SortColumn(f.name, True, True) for f in clause.schema
                    if f.name not in clause.order_columns and sortable(f.type)]


def sequence_arrays(seqs: list[LinearSeq], labels: list[str], strategy: str,
                    conjuncts: Conjuncts) -> Sequences:
    """The sequences' components, NOT checks, NOT programs and iteration groups."""
    program_of, programs = not_programs(seqs, labels)
    comps, seq_start, negs = [], [0], []
    for k, s in enumerate(seqs):
        base = len(comps)
        comps += [[k, labels.index(n), lo, hi] for n, lo, hi in s.comps]
        negs += [[k, program_of[child], base + a, base + b, base + c, base + d]
                 for child, a, b, c, d, _ in s.negs]
        seq_start.append(len(comps))
    c = conjuncts
    arrays = pack_not_programs(programs, c.label, c.mask, c.late, labels)
    arrays.update(group_arrays(seqs, strategy, c.label, c.mask, labels))
    order = sorted(labels)
    proceed = _proceed_masks(seqs, labels) if strategy == "SKIP_TILL_NEXT_MATCH" else None
    return Sequences(comps, seq_start, negs, [order.index(n) for n in labels], proceed,
                     arrays)


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
    take a row. An iteration group that may run zero times (KL(SEQ(d, e), 0)) does not
    stop the walk: its first labels are reachable, and so are those after it."""
    mask = 0
    stop = len(t.comps) if end is None else end
    j = i + 1
    while j < stop:
        group = next((g for g in t.groups or () if g[0] == j and g[2] == 0 and g[1] < stop),
                     None)
        if group is not None:
            for k in range(j, group[1] + 1):
                mask |= 1 << labels.index(t.comps[k][0])
                if t.comps[k][1] > 0:
                    break
            j = group[1] + 1
            continue
        mask |= 1 << labels.index(t.comps[j][0])
        if t.comps[j][1] > 0:
            break
        j += 1
    return mask


def _no_moments(cond: Expr) -> None:
    """CEP mode has no moment aggregates (stddev, variance, ...) in DEFINE."""
    for e in walk(cond):
        if isinstance(e, AggregateValue) and e.func in MOMENT_FUNCS:
            raise CepUnsupportedError(
                f"{e.func.lower()}() in DEFINE is not supported in CEP mode (SQL:2016 mode "
                "supports it)", pos=e.pos)

