"""Cost-based plans for CEP mode: which evaluator runs a clause, and with which plan.

SKIP_TILL_ANY_MATCH selects *sets* of rows, so the order in which a match's rows are
combined does not change the result: such clauses are planned (VLDB 2018: statistics ->
JQPG reduction -> one of nine algorithms) and run by the planned evaluator of cep.pyx,
an instance-based join tree per OR-free disjunct (an order plan is the left-deep tree:
the lazy chain NFA with one input buffer per variable and one partial-match store per
prefix; a tree plan is ZStream's bushy tree). The other strategies decide what a run
takes by the rows it has already taken, so they run in order (the SASE+ run NFA) and
EXPLAIN says so.

Every disjunct becomes a ``Term``: its components (a variable, or a Kleene closure of
one), the precedence between them (SEQ: every row of an item before every row of the
next, transitively closed) and its NOT(var) checks, laid out exactly like the in-order
evaluator's sequences (component indices = relation indices of the JQPG reduction).
"""
from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from cepsql.algebra.pattern import Concat, Negation, PatternNode, Permute, Quantified, Var
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.errors import CepUnsupportedError
from cepsql.planning.algorithms import (ALGORITHMS, DP_B_MAX_RELATIONS, DP_LD_MAX_RELATIONS,
                                       choose_plan, estimate_dp_seconds)
from cepsql.planning.cost import CostEvaluator, CostModel
from cepsql.planning.jqpg import PatternStats, dnf_terms, reduce_term
from cepsql.planning.plans import OrderPlan
from cepsql.planning.trees import TreeNode, left_deep_tree
from cepsql.planning.options import PlannerOptions

PLANNED_STRATEGY = "SKIP_TILL_ANY_MATCH"
EVALUATOR_LAZY = "lazy chain NFA (order plan: per-variable input buffers, prefix stores)"
EVALUATOR_TREE = "instance-based tree evaluator (tree plan, ZStream-style)"
#: time box of each iterative-improvement search run only to price the alternatives
ALTERNATIVE_SECONDS = 0.02
EVALUATOR_IN_ORDER = "in-order SASE+ run NFA (shared versioned buffer, run merging)"


@dataclass
class Term:
    """One OR-free disjunct as the evaluators see it."""
    node: PatternNode
    comps: list = field(default_factory=list)   # (label, min, max or -1)
    # NOT checks laid out as cep_expand.LinearSeq.negs: (negated node, a, b, c, d, pending)
    negs: list = field(default_factory=list)
    precedes: set = field(default_factory=set)  # (i, j): rows of comp i before comp j
    # per NOT (aligned with negs): (left, right) masks of the components that fix its
    # region: the last components of the item before it (or before its AND) in its SEQ,
    # the first components of the item after it; (0, 0) when a side is open
    neg_sides: list = field(default_factory=list)

    def after_masks(self) -> list[int]:
        """Per component, the bit mask of components whose rows must all come later
        (transitive closure of the SEQ neighbour relation)."""
        n = len(self.comps)
        after = [0] * n
        for i, j in self.precedes:
            after[i] |= 1 << j
        changed = True
        while changed:
            changed = False
            for i in range(n):
                new = after[i]
                for j in range(n):
                    if after[i] >> j & 1:
                        new |= after[j]
                if new != after[i]:
                    after[i] = new
                    changed = True
        return after


def pattern_terms(pattern: PatternNode) -> list[Term]:
    """The pattern's disjuncts (planning.dnf_terms) as Terms; raises for shapes the
    planned evaluator does not run (the caller then evaluates in order)."""
    return [_term(t) for t in dnf_terms(pattern)]


def _term(node: PatternNode) -> Term:
    term = Term(node)
    _walk(node, term)
    # AND NOTs no SEQ encloses: both sides open (R6)
    term.negs = [(c, b, b, cc, cc, False) if p else (c, a, b, cc, d, p)
                 for c, a, b, cc, d, p in term.negs]
    names = [c[0] for c in term.comps]
    if len(set(names)) != len(names):
        raise CepUnsupportedError("a pattern variable occurs twice in one disjunct")
    return term


def _walk(node: PatternNode, term: Term) -> tuple[frozenset, frozenset]:
    """Adds node's components; returns (first, last) component sets (as planning.jqpg)."""
    if isinstance(node, Var):
        term.comps.append((node.name, 1, 1))
        s = frozenset([len(term.comps) - 1])
        return s, s
    if isinstance(node, Quantified) and isinstance(node.child, Var):
        term.comps.append((node.child.name, node.min, -1 if node.max is None else node.max))
        s = frozenset([len(term.comps) - 1])
        return s, s
    if isinstance(node, Concat):
        start = len(term.comps)
        spans, neg_at, pending = [], [], []
        for item in node.items:
            if isinstance(item, Negation):
                neg_at.append((item.child, len(spans)))
                continue
            n0, c0 = len(term.negs), len(term.comps)
            fl = _walk(item, term)
            spans.append((c0, fl))
            pending += [(q, len(spans) - 1, c0, len(term.comps))
                        for q in range(n0, len(term.negs)) if term.negs[q][5]]
        for (_, a), (_, b) in itertools.pairwise(spans):
            term.precedes.update((x, y) for x in a[1] for y in b[0])
        end = len(term.comps)
        if not spans:
            raise CepUnsupportedError("a SEQ of NOT(...) items only", pos=getattr(node, "pos", None))

        def sides(before: int, after: int) -> tuple[int, int]:
            if 0 <= before and after < len(spans):
                return _mask(spans[before][1][1]), _mask(spans[after][1][0])
            return 0, 0
        for child, at in neg_at:
            mid = spans[at][0] if at < len(spans) else end
            term.negs.append((child, start, mid, mid, end, False))
            term.neg_sides.append(sides(at - 1, at))
        for q, k, lo, hi in pending:   # an item's AND NOTs: the item's slot here
            term.negs[q] = (term.negs[q][0], start, lo, hi, end, False)
            term.neg_sides[q] = sides(k - 1, k + 1)
        return spans[0][1][0], spans[-1][1][1]
    if isinstance(node, Permute):
        start = len(term.comps)
        first, last = frozenset(), frozenset()
        negated = []
        for item in node.items:
            if isinstance(item, Negation):
                negated.append(item.child)
            else:
                f, l = _walk(item, term)
                first, last = first | f, last | l
        end = len(term.comps)
        term.negs += [(child, start, start, end, end, True) for child in negated]
        term.neg_sides += [(0, 0)] * len(negated)
        return first, last
    raise CepUnsupportedError(f"{type(node).__name__} inside a planned CEP pattern",
                              pos=getattr(node, "pos", None))


def _mask(indices) -> int:
    return sum(1 << i for i in indices)


@dataclass
class CepPlanChoice:
    """What EXPLAIN shows and the evaluator runs."""
    evaluator: str
    reason: str
    algorithm: str | None = None
    plans: list = field(default_factory=list)          # per term: OrderPlan | TreePlan
    priced: dict | None = None                         # algorithm -> total cost, once priced
    statistics: object = None                          # PatternStatistics | None
    stats_note: str = ""
    plan_seconds: float = 0.0
    #: prices the alternatives when first asked (only EXPLAIN shows them, so a workload's
    #: many clauses and plain queries do not pay ~11 plan searches per term up front)
    pricing: Callable[[], dict] | None = field(default=None, repr=False, compare=False)

    @property
    def alternatives(self) -> dict:
        """algorithm -> total cost of its plans (priced on first use)."""
        if self.priced is None:
            self.priced = self.pricing() if self.pricing is not None else {}
            self.pricing = None
        return self.priced

    @property
    def planned(self) -> bool:
        return bool(self.plans)

    def trees(self) -> list[TreeNode]:
        """The plan of every term as a join tree (order plans left-deep)."""
        return [left_deep_tree(p.order) if isinstance(p, OrderPlan) else p.root
                for p in self.plans]


def planner_stats(spec: MatchRecognizeSpec, statistics) -> tuple[PatternStats, object, str]:
    """PatternStats for the reduction, the PatternStatistics behind them and a note."""
    labels = list(spec.variables)
    stats, note = None, ""
    if statistics is not None:
        try:
            stats = statistics(spec)
        except Exception as exc:  # statistics are an optimization: never fail the query
            note = f"statistics unavailable ({type(exc).__name__}: {exc}); uniform estimates"
    if stats is None:
        note = note or "no statistics source; uniform estimates (TRIVIAL order)"
        return PatternStats(rates={v: 1.0 for v in labels}, window=1.0), None, note
    rates = {v: float(stats.rates.get(v, 0.0)) for v in labels}
    window = stats.window_units
    if not window or window <= 0:
        window = 1.0
        note = "no WITHIN window: relation sizes are per-unit rates"
    sels = {k: min(max(float(s), 0.0), 1.0) for k, s in stats.selectivities.items()}
    return PatternStats(rates=rates, window=window, selectivities=sels), stats, note


def choose_cep_plan(spec: MatchRecognizeSpec, terms: list[Term], options: PlannerOptions,
                    statistics, alternatives: bool = True) -> CepPlanChoice:
    """Plans for the terms of a SKIP_TILL_ANY_MATCH clause (see module docstring);
    the other algorithms are priced when EXPLAIN first reads ``choice.alternatives``;
    alternatives=False never prices them (plans made inside tasks, e.g. adaptive
    re-plans)."""
    started = time.perf_counter()
    pstats, stats, note = planner_stats(spec, statistics)
    model = options.cost_model()
    queries = [reduce_term(t.node, pstats) for t in terms]
    share = options.plan_seconds / len(queries)
    algorithm = options.algorithm
    plans = []
    for q in queries:
        if q.size == 1:
            plans.append(choose_plan(q, "TRIVIAL", model=model))
        elif algorithm is not None:
            plans.append(choose_plan(q, algorithm, model=model, budget_seconds=share))
        else:
            plans.append(_default_plan(q, model, share))
    kinds = {p.kind for p in plans}
    chosen = plans[0].algorithm if len({p.algorithm for p in plans}) == 1 else "mixed"
    evaluator = EVALUATOR_TREE if kinds == {"tree"} else (
        EVALUATOR_LAZY if kinds == {"order"} else EVALUATOR_LAZY + " / " + EVALUATOR_TREE)
    reason = ("algorithm set by cepsql.planner.algorithm" if algorithm else
              "cepsql's choice: cheapest of the exact DPs within the plan-time budget, "
              "GREEDY / II beyond")
    return CepPlanChoice(evaluator, reason, chosen, plans, None if alternatives else {},
                         stats, note, time.perf_counter() - started,
                         partial(_price_alternatives, queries, model, share)
                         if alternatives else None)


def _price_alternatives(queries: list, model: CostModel, share: float) -> dict:
    """Every affordable algorithm's total cost over the terms' queries."""
    priced = {}
    for name in ALGORITHMS:
        if _affordable(name, queries, share):
            priced[name] = sum(
                choose_plan(q, name if q.size > 1 else "TRIVIAL", model=model,
                            budget_seconds=min(share, ALTERNATIVE_SECONDS)).cost
                for q in queries)
    return priced


def _affordable(name: str, queries, share: float) -> bool:
    n = max(q.size for q in queries)
    if name == "DP_LD":
        return n <= DP_LD_MAX_RELATIONS and estimate_dp_seconds(n, "order") <= share
    if name == "DP_B":
        return n <= DP_B_MAX_RELATIONS and estimate_dp_seconds(n, "tree") <= share
    return True


def _default_plan(query, model: CostModel, budget: float):
    """The cheaper of the best order plan and the best tree plan cepsql can afford."""
    order = choose_plan(query, None, kind="order", model=model, budget_seconds=budget / 2)
    tree = choose_plan(query, None, kind="tree", model=model, budget_seconds=budget / 2)
    # Cost_tree also counts the leaves' buffers, which the order plan holds too (its
    # input buffers): compare on the tree scale
    as_tree = CostEvaluator(query, model).tree_cost(left_deep_tree(order.order))
    return tree if tree.cost < as_tree * (1 - 1e-9) else order


def _plural(unit: str) -> str:
    """'second' -> 'seconds', 'unit of seq' -> 'units of seq'."""
    head, _, tail = unit.partition(" ")
    return head + "s" + (" " + tail if tail else "")


def describe_choice(choice: CepPlanChoice, terms: list[Term] | None) -> str:
    """EXPLAIN text of the planning stage."""
    lines = [f"evaluator: {choice.evaluator}", f"  why: {choice.reason}"]
    if not choice.planned:
        return "\n".join(lines)
    st = choice.statistics
    if st is not None:
        unit = st.rate_unit
        lines.append(f"statistics: {st.sample_rows} sampled rows"
                     + (f" of {st.input_rows}" if st.input_rows is not None else "")
                     + f", {st.seconds:.3f} s" + (" (time budget hit)" if st.truncated else ""))
        lines.append("  rates (rows per " + unit + "): " + ", ".join(
            f"{v}={r:.4g}" for v, r in st.rates.items()))
        if st.selectivities:
            lines.append("  selectivities: " + ", ".join(
                f"{a}~{b}={s:.3g}" for (a, b), s in st.selectivities.items()))
        if st.window_units is not None:
            lines.append(f"  window: {st.window_units:.4g} {_plural(unit)}")
        for n in st.notes:
            lines.append(f"  note: {n}")
    if choice.stats_note:
        lines.append(f"  note: {choice.stats_note}")
    lines.append(f"plan ({choice.algorithm}, {choice.plan_seconds * 1000:.1f} ms):")
    for i, plan in enumerate(choice.plans):
        if len(choice.plans) > 1:
            lines.append(f"  disjunct {i + 1}:")
        lines += ["    " + line for line in plan.describe().splitlines()]
    if choice.alternatives:
        best = min(choice.alternatives.values()) or 1.0
        lines.append("alternatives (total cost, ratio to the cheapest):")
        for name, cost in sorted(choice.alternatives.items(), key=lambda kv: kv[1]):
            lines.append(f"  {name:<12} {cost:12.5g}  x{cost / best if best else 1:.3f}")
    return "\n".join(lines)
