"""What the multi-pattern planner needs of one pattern view's MATCH_RECOGNIZE clause.

A view is *shareable* only under CEP mode ``STRATEGY SKIP_TILL_ANY_MATCH`` with a
plannable pattern (``planning.plannable.plannable_terms``): there a match is a set of rows, so any
evaluation order -- and any node computed for another view -- gives the same matches.
Everything else (SQL:2016 mode, the in-order strategies, composite KL, ...) is listed
as unshared with the reason; it still shares the scan with the workload.

Per OR-free disjunct (``planning.evaluator_choice.Term``) the planner sees: the components (one
variable each, maybe a Kleene closure), their *event types* (each variable's DEFINE
conjuncts that read no other variable), the *join checks* (conjuncts reading other
variables, applied at the lowest plan node holding all of them), the SEQ order
(transitively closed) and the checks only the complete match can run (NOTs, conjuncts
reading the whole match). Conjuncts are numbered exactly as ``plan_cep`` compiles them
(``analyze.cep_conjuncts``): ``spec.defines`` order, then each DEFINE's top-level AND
conjuncts.
"""
from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

import pyarrow as pa

from cepsql.algebra.expressions import Expr
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.errors import CepError
from cepsql.analyze.cep_conjuncts import conjunct_scope, define_conjuncts
from cepsql.analyze.columns import canonical_columns
from cepsql.analyze.decompose import DerivedColumns
from cepsql.analyze.rowsets import LabelSets
from cepsql.planning.evaluator_choice import PLANNED_STRATEGY, Term, planner_stats
from cepsql.planning.jqpg import PatternStats
from cepsql.planning.plannable import plannable_terms
from cepsql.sharing.canonical import expr_key, sort_keys

__all__ = ["Conjunct", "PatternTerm", "WorkloadPattern", "pattern_conjuncts", "window_of",
           "workload_pattern"]

WINDOW_NONE, WINDOW_ROWS, WINDOW_TIME = 0, 1, 2


@dataclass(frozen=True)
class Conjunct:
    """One top-level AND conjunct of a DEFINE, as plan_cep numbers it."""
    var: str                   # the DEFINE's variable
    refs: frozenset[str]       # other variables it reads
    late: bool                 # reads the match beyond named variables: complete match only
    expr: Expr                 # bound expression (RowValue references per variable)


@dataclass
class PatternTerm:
    """One OR-free disjunct as the multi-pattern planner sees it."""
    term: Term
    vars: tuple[str, ...]                        # variable per component
    kleene: tuple[tuple[int, int] | None, ...]   # (min, max or -1) per Kleene component
    leaf_conjuncts: tuple[tuple[int, ...], ...]  # event-type conjuncts per component
    leaf_keys: tuple[Hashable, ...]              # canonical event type per component
    joins: tuple[tuple[int, int], ...]           # (conjunct, mask of components it needs)
    closure: frozenset[tuple[int, int]]          # (i, j): rows of i before rows of j
    root_checks: tuple[tuple[str, Hashable], ...]  # NOTs and whole-match conjuncts

    @property
    def size(self) -> int:
        return len(self.vars)

    def orders_within(self, mask: int) -> list[tuple[int, int]]:
        """SEQ order pairs between components of mask."""
        return [(i, j) for i, j in self.closure if mask >> i & 1 and mask >> j & 1]


@dataclass
class WorkloadPattern:
    """One view of a workload; ``terms`` is empty when it is unshared (see ``reason``)."""
    name: str
    spec: MatchRecognizeSpec | None
    shareable: bool
    reason: str = ""
    terms: list[PatternTerm] = field(default_factory=list)
    conjuncts: list[Conjunct] = field(default_factory=list)
    stats: PatternStats | None = None
    stats_note: str = ""
    window_kind: int = WINDOW_NONE
    window: float | None = None       # spec units: microseconds (time) or rows
    compat: Hashable = ()             # views share nodes only within one class
    derived: dict = field(default_factory=dict)
    single: frozenset[str] = frozenset()   # variables that always take one row
    _keys: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def window_units(self) -> float:
        """W of the cost model (the statistics' time unit)."""
        return self.stats.window if self.stats is not None else 1.0

    def conjunct_key(self, index: int, slot_of: dict) -> Hashable:
        """Canonical key of conjunct ``index`` with variables renamed to slots."""
        memo = (index, tuple(sorted(slot_of.items())))
        got = self._keys.get(memo)
        if got is None:
            c = self.conjuncts[index]
            got = self._keys[memo] = expr_key(c.expr, slot_of, c.var, self.derived,
                                              self.single, id(self))
        return got


def workload_pattern(spec: MatchRecognizeSpec, schema: pa.Schema | None = None,
                     statistics=None, options=None, *, name: str = "") -> WorkloadPattern:
    """The planner's view of one clause. ``statistics`` is the planning stage's callable
    (spec -> PatternStatistics), ``options`` a PlannerOptions (unused fields ignored)."""
    del options  # the planner options of single clauses do not change what is shared
    if spec.strategy is None:
        return WorkloadPattern(name, spec, False, "SQL:2016 mode (no STRATEGY): regex "
                               "preference and contiguity depend on the evaluation order")
    if spec.strategy != PLANNED_STRATEGY:
        return WorkloadPattern(name, spec, False, f"STRATEGY {spec.strategy} decides each "
                               "take by the rows taken before it (in-order evaluation)")
    if schema is not None:
        spec = canonical_columns(spec, schema)
    terms, why = plannable_terms(spec)
    if terms is None:
        return WorkloadPattern(name, spec, False, why)
    try:
        conjuncts, derived = pattern_conjuncts(spec)
    except CepError as exc:
        return WorkloadPattern(name, spec, False, f"DEFINE not compilable ({exc.message})")
    pstats, _, note = planner_stats(spec, statistics)
    kind, size = window_of(spec)
    out = WorkloadPattern(name, spec, True, "", [], conjuncts, pstats, note, kind, size,
                          _compat(spec, kind), derived)
    several = {name for t in terms for name, lo, hi in t.comps if (lo, hi) != (1, 1)}
    out.single = frozenset(v for t in terms for v, _, _ in t.comps if v not in several)
    for t in terms:
        if len(t.comps) > 1 and all((lo, hi) != (1, 1) for _, lo, hi in t.comps):
            return WorkloadPattern(name, spec, False, "every component of a disjunct is a "
                                   "Kleene closure: the shared DAG joins a closure only "
                                   "with instances of single rows")
    out.terms = [_pattern_term(out, t) for t in terms]
    return out


def window_of(spec: MatchRecognizeSpec) -> tuple[int, float | None]:
    """(WINDOW_NONE / WINDOW_ROWS / WINDOW_TIME, size in spec units or None): the codes
    the evaluators' configs use too."""
    if spec.window is None:
        return WINDOW_NONE, None
    return (WINDOW_ROWS if spec.window.kind == "rows" else WINDOW_TIME), float(spec.window.size)


def _compat(spec: MatchRecognizeSpec, window_kind: int) -> Hashable:
    """Views share nodes only with the same partitioning, order and kind of window."""
    part = tuple(expr_key(k.expr, {}) for k in spec.partition_by)
    order = tuple((expr_key(k.expr, {}), k.ascending, k.effective_nulls_first)
                  for k in spec.order_by)
    return (spec.strategy, window_kind, part, order)


def pattern_conjuncts(spec: MatchRecognizeSpec) -> tuple[list[Conjunct], dict]:
    """The DEFINE conjuncts, bound and scoped exactly as plan_cep does it, and the
    derived row-local columns they read (name -> expression)."""
    labels = list(spec.variables)
    sets = LabelSets(labels, dict(spec.subsets))
    known = set(labels) | set(spec.subsets)
    derived = DerivedColumns()
    out: list[Conjunct] = []
    for var, refs, conj, local in define_conjuncts(spec, sets, known, derived):
        late, _ = conjunct_scope(local, refs)
        out.append(Conjunct(var, frozenset(refs), bool(late), conj))
    return out, {name: expr for expr, name in derived.columns.items()}


def _pattern_term(p: WorkloadPattern, term: Term) -> PatternTerm:
    names = tuple(c[0] for c in term.comps)
    comp_of = {v: i for i, v in enumerate(names)}
    kleene = tuple(None if (lo, hi) == (1, 1) else (lo, hi) for _, lo, hi in term.comps)
    leaf_conj: list[list[int]] = [[] for _ in names]
    joins, root = [], []
    for k, c in enumerate(p.conjuncts):
        if c.var not in comp_of:
            continue                  # a NOT variable's or another disjunct's condition
        if c.late or any(r not in comp_of for r in c.refs):
            root.append(("conjunct", k))
        elif not c.refs:
            leaf_conj[comp_of[c.var]].append(k)
        else:
            need = 1 << comp_of[c.var]
            for r in c.refs:
                need |= 1 << comp_of[r]
            joins.append((k, need))
    root += [("not", q) for q in range(len(term.negs))]
    after = term.after_masks()
    closure = frozenset((i, j) for i in range(len(names)) for j in range(len(names))
                        if after[i] >> j & 1)
    keys = []
    for i, v in enumerate(names):
        conds = sort_keys(p.conjunct_key(k, {v: 0}) for k in leaf_conj[i])
        keys.append(("leaf", p.compat, conds, kleene[i]))
    return PatternTerm(term, names, kleene, tuple(tuple(x) for x in leaf_conj), tuple(keys),
                       tuple(joins), closure, tuple(root))
