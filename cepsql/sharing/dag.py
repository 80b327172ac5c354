"""Local plans of every disjunct, their nodes' canonical keys and the global cost.

A *local plan* of one disjunct is a tree plan over its components (planning.trees.TreeNode,
leaf = component index) plus the set of subtree masks built *order-relaxed* (MOTTO's
operator transformation: the subtree computes the AND of its components, its SEQ order
checks are left to the node above). Each node of a local plan has a canonical key
(``node_key``): equal keys = the same instances, so the node is built once for every
disjunct that has it. The global cost is the planning stage's Cost_tree summed over
distinct keys (SIGMOD 2019 appendix C, ``Cost_tree^multi``), a node priced with the
largest window among its consumers (MOTTO's window mark-point).

A join node also costs the pairs it tries, as single patterns are planned
(planning/cost.py ``CostEvaluator.join_extra``: ``access * PM(left) * PM(right)``, with
the single-pattern planner's ``access`` weight, conf ``cepsql.planner.accessCost``):
the shared DAG evaluator tries every instance of one side against every instance of
the other before the conditions reject most pairs. Without it a re-planned global plan
that runs 2x faster was priced 1.005-1.10x cheaper (bench_adaptive_workload.md).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, replace

from cepsql.planning import CostEvaluator, CostModel
from cepsql.planning.jqpg import reduce_term
from cepsql.planning.options import PlannerOptions
from cepsql.planning.trees import TreeNode, join, leaf
from cepsql.sharing.canonical import sort_keys
from cepsql.sharing.patterns import PatternTerm, WorkloadPattern

__all__ = ["LocalPlan", "NodeInfo", "WorkloadContext", "DagCost", "sharing_model"]


def sharing_model(access: float | None = None) -> CostModel:
    """The cost model global plans are priced with: the single-pattern planner's access
    weight (None: its default, ``PlannerOptions.access``); no latency term (alpha = 0:
    a shared node has no one last event)."""
    return CostModel(access=PlannerOptions().access if access is None else access)


@dataclass(frozen=True)
class LocalPlan:
    """A disjunct's tree plan and its order-relaxed subtree masks."""
    tree: TreeNode
    relaxed: frozenset[int] = frozenset()

    def node_relaxed(self, mask: int) -> bool:
        return any(mask & r == mask for r in self.relaxed)


@dataclass(frozen=True)
class NodeInfo:
    """What the first disjunct that built a key knows about it."""
    term: int                 # owner disjunct (workload-wide index)
    mask: int                 # components of the owner it holds
    relaxed: bool
    slots: tuple[int, ...]    # owner component per slot
    left: int = -1            # child keys' ids
    right: int = -1
    checks: tuple = ()        # ("conjunct", k) / ("order", (i, j)) over owner components


class WorkloadContext:
    """The shareable disjuncts of a workload, key interning and cost evaluators."""

    def __init__(self, patterns: list[WorkloadPattern], model: CostModel | None = None):
        self.patterns = patterns
        self.term_ids: list[tuple[int, int]] = []     # (pattern, term) per disjunct
        self.terms: list[PatternTerm] = []
        for p, wp in enumerate(patterns):
            if wp.shareable:
                for t, pt in enumerate(wp.terms):
                    self.term_ids.append((p, t))
                    self.terms.append(pt)
        self.model = sharing_model() if model is None else model
        self.ids: dict[Hashable, int] = {}
        self.keys: list[Hashable] = []
        self.info: list[NodeInfo] = []
        self._evs: dict[tuple, CostEvaluator] = {}
        self._orders: dict[tuple[int, int], float] = {}
        self._pm: dict[tuple, float] = {}
        self._nodes: dict[tuple, tuple] = {}
        #: search.best_local_plan's results by sub-problem (it is a pure function of this
        #: context and its arguments; the search asks the same sub-problems again and again)
        self.local_plans: dict[tuple, LocalPlan] = {}
        self._walks: dict[tuple, tuple] = {}

    def pattern_of(self, t: int) -> WorkloadPattern:
        return self.patterns[self.term_ids[t][0]]

    def window_of(self, t: int) -> float:
        return self.pattern_of(t).window_units

    # --- cost ---------------------------------------------------------------------------
    def evaluator(self, t: int, window: float | None = None) -> CostEvaluator:
        """Cost_tree evaluator of disjunct t at window W (default its own) without the
        SEQ order selectivities (``pm`` applies them)."""
        wp = self.pattern_of(t)
        window = wp.window_units if window is None else window
        key = (t, window)
        ev = self._evs.get(key)
        if ev is None:
            stats = replace(wp.stats, window=window, order_selectivity=1.0)
            ev = CostEvaluator(reduce_term(self.terms[t].term.node, stats), self.model)
            self._evs[key] = ev
        return ev

    def pm(self, t: int, mask: int, relaxed: bool = False,
           window: float | None = None) -> float:
        """Partial matches of disjunct t's components in mask (the node's Cost_tree
        term). The SEQ orders a node applies are the closure restricted to it, priced
        like the reduction prices SEQ neighbours: one order selectivity per pair of its
        transitive reduction (for the whole disjunct exactly the reduction's factor), so
        a node's price depends on its key alone, whoever owns it."""
        memo = (t, mask, relaxed, window)
        c = self._pm.get(memo)
        if c is None:
            c = self.evaluator(t, window).term(mask)
            if not relaxed:
                c *= self._order_factor(t, mask)
            self._pm[memo] = c
        return c

    def _order_factor(self, t: int, mask: int) -> float:
        key = (t, mask)
        got = self._orders.get(key)
        if got is None:
            pt = self.terms[t]
            pairs = set(pt.orders_within(mask))
            inside = [k for k in range(pt.size) if mask >> k & 1]
            reduced = [(i, j) for i, j in pairs
                       if not any((i, k) in pairs and (k, j) in pairs for k in inside)]
            sel = self.pattern_of(t).stats.order_selectivity
            got = self._orders[key] = sel ** len(reduced)
        return got

    def pairs(self, t: int, left: int, right: int, relaxed: tuple[bool, bool] = (False, False),
              window: float | None = None) -> float:
        """What joining disjunct t's components ``left`` and ``right`` costs for the pairs
        it tries: cost.py's ``join_extra`` over the two sides' partial matches, each with
        the SEQ orders ``pm`` applies (unless that side is order-relaxed)."""
        if not self.model.access:
            return 0.0
        c = self.evaluator(t, window).join_extra(left, right)
        if not relaxed[0]:
            c *= self._order_factor(t, left)
        if not relaxed[1]:
            c *= self._order_factor(t, right)
        return c

    def node_cost(self, node: int, window: float) -> float:
        """The node's partial matches and, for a join, the pairs it tries (its key alone
        decides both: the sides are the children's keys)."""
        inf = self.info[node]
        cost = self.pm(inf.term, inf.mask, inf.relaxed, window)
        if inf.left >= 0 and self.model.access:
            k = len(self.info[inf.left].slots)
            left = sum(1 << c for c in inf.slots[:k])
            cost += self.pairs(inf.term, left, inf.mask ^ left,
                               (self.info[inf.left].relaxed, self.info[inf.right].relaxed),
                               window)
        return cost

    def local_cost(self, t: int, plan: LocalPlan) -> float:
        """The disjunct's own Cost_tree for the plan (no sharing), pairs included."""
        cost = 0.0
        for n in plan.tree.nodes():
            cost += self.pm(t, n.mask, plan.node_relaxed(n.mask))
            if not n.is_leaf:
                cost += self.pairs(t, n.left.mask, n.right.mask,
                                   (plan.node_relaxed(n.left.mask),
                                    plan.node_relaxed(n.right.mask)))
        return cost

    # --- keys ---------------------------------------------------------------------------
    def nodes(self, t: int, plan: LocalPlan, private: bool = False) -> tuple:
        """((key id, mask), ...) of the plan's nodes, children first; ``private`` tags
        the keys with the disjunct so nothing is shared (algorithm NONE)."""
        memo = (t, plan, private)
        got = self._nodes.get(memo)
        if got is None:
            out: list[tuple[int, int]] = []
            self._walk(t, plan, plan.tree, private, out)
            got = self._nodes[memo] = tuple(out)
        return got

    def _intern(self, key: Hashable, info: NodeInfo) -> int:
        got = self.ids.get(key)
        if got is None:
            got = self.ids[key] = len(self.keys)
            self.keys.append(key)
            self.info.append(info)
        return got

    def _walk(self, t: int, plan: LocalPlan, node: TreeNode, private: bool,
              out: list) -> tuple[int, tuple[int, ...]]:
        """Interns node's key; returns (id, owner component per slot). A subtree's keys
        depend only on it and the relaxed masks that meet it, so each is walked once
        (the search re-plans around the same subtrees again and again)."""
        memo = (t, node, private, frozenset(r for r in plan.relaxed if r & node.mask))
        got = self._walks.get(memo)
        if got is None:
            below: list[tuple[int, int]] = []
            nid, slots = self._walk_node(t, plan, node, private, below)
            got = self._walks[memo] = (nid, slots, tuple(below))
        out.extend(got[2])
        return got[0], got[1]

    def _walk_node(self, t: int, plan: LocalPlan, node: TreeNode, private: bool,
                   out: list) -> tuple[int, tuple[int, ...]]:
        """_walk without the memo."""
        pt = self.terms[t]
        if node.is_leaf:
            c = node.leaf
            key = ("leaf", pt.leaf_keys[c]) + ((("private", t),) if private else ())
            checks = tuple(("conjunct", k) for k in pt.leaf_conjuncts[c])
            nid = self._intern(key, NodeInfo(t, node.mask, False, (c,), checks=checks))
            out.append((nid, node.mask))
            return nid, (c,)
        a, sa = self._walk(t, plan, node.left, private, out)
        b, sb = self._walk(t, plan, node.right, private, out)
        if b < a:
            a, b, sa, sb = b, a, sb, sa
        slots = sa + sb
        checks = self.node_checks(t, plan, node)
        wp = self.pattern_of(t)
        slot_of = {pt.vars[c]: s for s, c in enumerate(slots)}
        rank = {c: s for s, c in enumerate(slots)}
        canon = []
        for kind, payload in checks:
            if kind == "conjunct":
                canon.append(("c", wp.conjunct_key(payload, slot_of)))
            else:
                canon.append(("o", rank[payload[0]], rank[payload[1]]))
        key = ("join", a, b, sort_keys(canon))
        nid = self._intern(key, NodeInfo(t, node.mask, plan.node_relaxed(node.mask), slots,
                                         a, b, checks))
        out.append((nid, node.mask))
        return nid, slots

    def node_checks(self, t: int, plan: LocalPlan, node: TreeNode) -> tuple:
        """Checks a join node applies: the join conjuncts whose components it is the
        lowest to hold, and (unless order-relaxed) the SEQ orders not applied below."""
        pt = self.terms[t]
        m, lm, rm = node.mask, node.left.mask, node.right.mask
        out = [("conjunct", k) for k, need in pt.joins
               if need & m == need and need & lm != need and need & rm != need]
        if not plan.node_relaxed(m):
            done = [c for c in (lm, rm) if not plan.node_relaxed(c)]
            out += [("order", (i, j)) for i, j in sorted(pt.orders_within(m))
                    if not any(c >> i & 1 and c >> j & 1 for c in done)]
        return tuple(out)


class DagCost:
    """Cost_tree^multi of the current local plans, updated per changed disjunct."""

    def __init__(self, ctx: WorkloadContext):
        self.ctx = ctx
        self.refs: dict[int, Counter] = {}
        self.cost: dict[int, float] = {}
        self.total = 0.0

    def _update(self, node: int) -> None:
        windows = self.refs.get(node)
        new = self.ctx.node_cost(node, max(windows)) if windows else 0.0
        self.total += new - self.cost.get(node, 0.0)
        if windows:
            self.cost[node] = new
        else:
            self.cost.pop(node, None)
            self.refs.pop(node, None)

    def add(self, t: int, nodes: tuple) -> None:
        w = self.ctx.window_of(t)
        for nid in {n for n, _ in nodes}:
            self.refs.setdefault(nid, Counter())[w] += 1
            self._update(nid)

    def remove(self, t: int, nodes: tuple) -> None:
        w = self.ctx.window_of(t)
        for nid in {n for n, _ in nodes}:
            c = self.refs[nid]
            c[w] -= 1
            if c[w] <= 0:
                del c[w]
            self._update(nid)

    def consumers(self, node: int) -> int:
        c = self.refs.get(node)
        return sum(c.values()) if c else 0


def map_plan(plan: LocalPlan, comp_map: dict[int, int]) -> LocalPlan:
    """The plan with components renamed (one disjunct's subtree in another's terms)."""
    def go(n: TreeNode) -> TreeNode:
        return leaf(comp_map[n.leaf]) if n.is_leaf else join(go(n.left), go(n.right))

    def mask(m: int) -> int:
        return sum(1 << comp_map[i] for i in comp_map if m >> i & 1)
    return LocalPlan(go(plan.tree), frozenset(mask(r) for r in plan.relaxed))
