"""Local search over global plans (SIGMOD 2019 sections 4.2 and 5, appendices B and C).

A state is one local plan per disjunct; its cost is Cost_tree^multi (``dag.DagCost``).
Neighbourhoods: ``N_edge`` picks an edge of the multi-pattern graph and a common
subpattern P of at least two components and re-plans both disjuncts so that they share
P's subtree; ``N_vertex^k`` picks a disjunct, a subpattern P of its vicinity and up to k
disjuncts containing P (itself included) and re-plans them all around P. The local plan
generator A (Theorem C.1) returns the cheapest tree holding given subtrees: a DP over
bushy trees whose leaves are the subtrees and the remaining components; each disjunct
keeps its other shared subtrees with probability 1/2 (section 5). Under PREFIX sharing
(MPT, section 3) plans are left-deep: A puts P's best order first and appends the rest
in its best order given that prefix, so only prefixes are shared.
Meta-heuristics (appendix B): simulated annealing (c_0 = the largest cost difference
among the first neighbours of the start, c_k = 0.99 c_{k-1}) and tabu search (the
cheapest of L sampled neighbours not visited recently). Both keep the best state seen,
so they never return a plan worse than their start, and stop on a time budget or an
iteration count (deterministic for a given seed).
"""
from __future__ import annotations

import math
import random
import time
from collections import deque
from dataclasses import dataclass

from cepsql.planning.trees import TreeNode, join, leaf, left_deep_tree
from cepsql.sharing.dag import DagCost, LocalPlan, WorkloadContext, map_plan
from cepsql.sharing.graph import MultiPatternGraph

__all__ = ["SearchResult", "Search", "best_local_plan", "independent_plans",
           "trivial_plans"]

#: the DP of the local plan generator runs up to this many units (3^n work)
BUSHY_DP_UNITS = 9
ORDER_DP_UNITS = 12
SA_COOLING = 0.99
SA_PROBES = 30
TABU_SAMPLES = 12
TABU_CAPACITY = 10_000
#: under a time budget, a search stops early once it has converged: the best plan did not
#: improve for as many iterations as it took to find it, and at least
#: max(STALL_MIN, STALL_PER_PAIR * graph pairs) (the best plans of the synthetic and
#: benchmark workloads are found within a few hundred iterations; a search still
#: improving keeps going, up to the budget); tabu also after TABU_EXHAUSTED rounds in a
#: row whose every sampled neighbour was tabu (a small graph's few plans are all
#: visited). A fixed iteration count (max_iterations) runs in full. Improvements below
#: a relative 1e-9 (float noise of equal costs summed in another order) do not count.
STALL_MIN = 200
STALL_PER_PAIR = 2
TABU_EXHAUSTED = 20
#: random picks of an edge before giving up (an edge may map fewer than two components)
MAX_TRIES = 50


def _better(cost: float, than: float) -> bool:
    """cost improves on than beyond float noise."""
    return cost < than - 1e-9 * abs(than)


def independent_plans(ctx: WorkloadContext, order_only: bool = False) -> list[LocalPlan]:
    """Each disjunct's own best plan (generator A without units: the exact DP over
    bushy trees / orders up to BUSHY_DP_UNITS / ORDER_DP_UNITS components, greedy
    beyond)."""
    return [best_local_plan(ctx, t, [], order_only) for t in range(len(ctx.terms))]


def trivial_plans(ctx: WorkloadContext) -> list[LocalPlan]:
    """The written order, left-deep: no reordering."""
    return [LocalPlan(left_deep_tree(tuple(range(pt.size)))) for pt in ctx.terms]


def _find(node: TreeNode, mask: int) -> TreeNode | None:
    for n in node.nodes():
        if n.mask == mask:
            return n
    return None


def _subplan(plan: LocalPlan, node: TreeNode) -> LocalPlan:
    return LocalPlan(node, frozenset(r for r in plan.relaxed if r & node.mask == r))


def best_local_plan(ctx: WorkloadContext, t: int, units: list[LocalPlan],
                    order_only: bool = False, relaxed: bool = False,
                    comps: int | None = None) -> LocalPlan:
    """Generator A: the cheapest plan over ``comps`` (default all components) holding
    every unit as a subtree (order_only: units[0] as the prefix of a left-deep plan).
    Memoised in ``ctx.local_plans``: the search poses the same sub-problems repeatedly."""
    memo = (t, tuple(units), order_only, relaxed, comps)
    got = ctx.local_plans.get(memo)
    if got is None:
        got = ctx.local_plans[memo] = _generate(ctx, t, units, order_only, relaxed, comps)
    return got


def _generate(ctx: WorkloadContext, t: int, units: list[LocalPlan], order_only: bool,
              relaxed: bool, comps: int | None) -> LocalPlan:
    """best_local_plan without the memo."""
    pt = ctx.terms[t]
    full = (1 << pt.size) - 1 if comps is None else comps
    def ev(mask: int) -> float:
        return ctx.pm(t, mask, relaxed)

    def pair(a: int, b: int) -> float:
        return ctx.pairs(t, a, b, (relaxed, relaxed))
    covered = 0
    for u in units:
        covered |= u.tree.mask
    pieces = [u.tree for u in units] + [leaf(i) for i in range(pt.size)
                                        if full >> i & 1 and not covered >> i & 1]
    closures = {i for i, k in enumerate(pt.kleene) if k is not None}
    rel = frozenset().union(*(u.relaxed for u in units)) if units else frozenset()
    if relaxed:
        rel |= {full}
    if order_only:
        head = pieces[0] if units else None
        rest = [p.leaf for p in pieces[1:]] if units else [p.leaf for p in pieces]
        tree = _append_order(ev, head, rest, closures, pair)
    else:
        tree = _bushy(ev, pieces, closures, pair)
    return LocalPlan(tree, rel)


def _closure_pair(a: TreeNode, b: TreeNode, closures: set[int]) -> bool:
    """Whether a join of a and b would join two Kleene leaves directly (the shared DAG
    evaluator forms a closure only next to instances of single rows)."""
    return a.is_leaf and b.is_leaf and a.leaf in closures and b.leaf in closures


def _no_pairs(a: int, b: int) -> float:
    return 0.0


def _bushy(ev, pieces: list[TreeNode], closures: set[int] = frozenset(),
           pair=_no_pairs) -> TreeNode:
    """The cheapest tree over pieces: ``ev(mask)`` a node's partial matches, ``pair(a,
    b)`` what joining masks a and b adds for the pairs it tries."""
    k = len(pieces)
    if k == 1:
        return pieces[0]
    if k > BUSHY_DP_UNITS:
        work = list(pieces)
        while len(work) > 1:
            best = None
            for i in range(len(work)):
                for j in range(i + 1, len(work)):
                    if _closure_pair(work[i], work[j], closures):
                        continue
                    c = ev(work[i].mask | work[j].mask) + pair(work[i].mask, work[j].mask)
                    if best is None or c < best[0]:
                        best = (c, i, j)
            _, i, j = best
            merged = join(work[i], work[j])
            work = [w for x, w in enumerate(work) if x not in (i, j)] + [merged]
        return work[0]
    size = 1 << k
    umask = [0] * size
    for s in range(1, size):
        low = s & -s
        umask[s] = umask[s ^ low] | pieces[low.bit_length() - 1].mask
    best = [0.0] * size
    split = [0] * size
    for s in range(1, size):
        if s & (s - 1) == 0:
            continue
        low = s & -s
        sub = (s - 1) & s
        top, arg = math.inf, 0
        while sub:
            if sub & low and not (sub & (sub - 1) == 0 and (s ^ sub) & (s ^ sub) - 1 == 0
                                  and _closure_pair(pieces[sub.bit_length() - 1],
                                                    pieces[(s ^ sub).bit_length() - 1],
                                                    closures)):
                v = best[sub] + best[s ^ sub] + pair(umask[sub], umask[s ^ sub])
                if v < top:
                    top, arg = v, sub
            sub = (sub - 1) & s
        best[s] = ev(umask[s]) + top
        split[s] = arg

    def build(s: int) -> TreeNode:
        if s & (s - 1) == 0:
            return pieces[s.bit_length() - 1]
        return join(build(split[s]), build(s ^ split[s]))
    return build(size - 1)


def _append_order(ev, head: TreeNode | None, rest: list[int],
                  closures: set[int] = frozenset(), pair=_no_pairs) -> TreeNode:
    """head (a left-deep prefix) followed by rest in the cheapest order given it (never
    two Kleene closures as the first two leaves); ev and pair as for ``_bushy``."""
    base = head.mask if head is not None else 0
    first_closure = head is not None and head.is_leaf and head.leaf in closures

    def bad(order_so_far: tuple, j: int) -> bool:
        if head is None:
            return len(order_so_far) == 1 and order_so_far[0] in closures and j in closures
        return first_closure and not order_so_far and j in closures
    if len(rest) > ORDER_DP_UNITS:
        order, mask = [], base
        todo = list(rest)
        while todo:
            ok = [r for r in todo if not bad(tuple(order), r)] or todo
            j = min(ok, key=lambda r: ev(mask | 1 << r) + (pair(mask, 1 << r) if mask
                                                            else 0.0))
            todo.remove(j)
            order.append(j)
            mask |= 1 << j
    else:
        k = len(rest)
        best = {0: (0.0, ())}
        for s in range(1, 1 << k):
            m = base | sum(1 << rest[i] for i in range(k) if s >> i & 1)
            here = ev(m) if (head is not None or s & (s - 1)) else 0.0
            options = []
            for i in range(k):
                if s >> i & 1:
                    c, o = best[s ^ (1 << i)]
                    if bad(o, rest[i]):
                        c = math.inf
                    elif m ^ (1 << rest[i]):
                        c += pair(m ^ (1 << rest[i]), 1 << rest[i])
                    options.append((c, o + (rest[i],)))
            c, o = min(options)
            best[s] = (c + here, o)
        order = list(best[(1 << k) - 1][1])
    node = head
    for j in order:
        node = leaf(j) if node is None else join(node, leaf(j))
    return node


@dataclass
class SearchResult:
    plans: list[LocalPlan]
    cost: float
    start_cost: float
    iterations: int
    seconds: float


class Search:
    """Current state, its incremental cost and the neighbourhood moves."""

    def __init__(self, ctx: WorkloadContext, graph: MultiPatternGraph,
                 start: list[LocalPlan], *, order_only: bool = False,
                 vertex_k: int = 0, seed: int = 0):
        self.ctx, self.graph = ctx, graph
        self.order_only, self.vertex_k = order_only, vertex_k
        self.rng = random.Random(seed)
        self.plans = list(start)
        self.nodes = [ctx.nodes(t, p) for t, p in enumerate(self.plans)]
        self.dag = DagCost(ctx)
        for t, n in enumerate(self.nodes):
            self.dag.add(t, n)
        self.signature = 0
        for t, n in enumerate(self.nodes):
            self.signature ^= hash((t, n[-1][0]))
        self.edge_ids = list(range(len(graph.pairs)))
        self.vertices = sorted(graph.adjacent)

    # --- state ----------------------------------------------------------------------------
    def apply(self, changes: list[tuple[int, LocalPlan]]) -> list[tuple[int, LocalPlan]]:
        """Replace local plans; returns the changes that undo it."""
        undo = []
        for t, plan in changes:
            undo.append((t, self.plans[t]))
            old = self.nodes[t]
            new = self.ctx.nodes(t, plan)
            self.dag.remove(t, old)
            self.dag.add(t, new)
            self.signature ^= hash((t, old[-1][0])) ^ hash((t, new[-1][0]))
            self.plans[t], self.nodes[t] = plan, new
        return undo[::-1]

    @property
    def cost(self) -> float:
        return self.dag.total

    # --- neighbourhoods -----------------------------------------------------------------
    def neighbour(self) -> list[tuple[int, LocalPlan]] | None:
        """A random neighbour as the local plans to change (None: none found, e.g. no
        edges)."""
        if not self.edge_ids:
            return None
        rng = self.rng
        for _ in range(MAX_TRIES):
            if self.vertex_k > 2:
                t0 = rng.choice(self.vertices)
                e = self.graph.edge(rng.choice(self.graph.adjacent[t0]))
            else:
                e = self.graph.edge(rng.choice(self.edge_ids))
                t0 = rng.choice((e.a, e.b)) if e is not None else -1
            if e is None:
                continue
            relaxed = not e.strict or rng.random() < 0.5
            pairs = e.relaxed if relaxed else e.strict
            side = {i: j for i, j in pairs} if t0 == e.a else {j: i for i, j in pairs}
            size = rng.randint(2, len(side))
            chosen = sorted(rng.sample(sorted(side), size))
            if all(self.ctx.terms[t0].kleene[c] is not None for c in chosen):
                continue     # closures alone have no plan the shared DAG runs
            members = [(e.b if t0 == e.a else e.a, {c: side[c] for c in chosen})]
            if self.vertex_k > 2:
                members += self._containing(t0, e, chosen, relaxed)
            return self._share(t0, chosen, members, relaxed)
        return None

    def _containing(self, t0, e0, chosen, relaxed) -> list:
        """Up to k-2 further disjuncts holding t0's components ``chosen`` (Gamma_P)."""
        out = []
        for eid in self.graph.adjacent[t0]:
            e = self.graph.edge(eid)
            if e is None or e is e0:
                continue
            pairs = e.relaxed if relaxed else e.strict
            side = {i: j for i, j in pairs} if t0 == e.a else {j: i for i, j in pairs}
            if all(c in side for c in chosen):
                out.append((e.b if t0 == e.a else e.a, {c: side[c] for c in chosen}))
        self.rng.shuffle(out)
        return out[:self.vertex_k - 2]

    def _share(self, t0: int, chosen: list[int], members: list, relaxed: bool):
        mask = sum(1 << c for c in chosen)
        sub = best_local_plan(self.ctx, t0, [], self.order_only, relaxed, comps=mask)
        changes = [(t0, self._around(t0, sub))]
        seen = {t0}
        for t, comp_map in members:
            if t in seen:
                continue
            seen.add(t)
            changes.append((t, self._around(t, map_plan(sub, comp_map))))
        return changes

    def _around(self, t: int, sub: LocalPlan) -> LocalPlan:
        """t's best plan holding sub, keeping its other shared subtrees with prob. 1/2."""
        units = [sub]
        if not self.order_only and self.rng.random() < 0.5:
            taken = sub.tree.mask
            plan = self.plans[t]
            for nid, m in reversed(self.nodes[t]):    # parents before children
                if m & taken or m & (m - 1) == 0 or self.dag.consumers(nid) < 2:
                    continue
                node = _find(plan.tree, m)
                units.append(_subplan(plan, node))
                taken |= m
        return best_local_plan(self.ctx, t, units, self.order_only)

    # --- meta-heuristics ----------------------------------------------------------------
    def _budget(self, seconds: float, iterations: int | None):
        deadline = time.perf_counter() + seconds

        def more(done: int) -> bool:
            if iterations is not None:
                return done < iterations
            return time.perf_counter() < deadline
        return more

    def _snapshot(self, best):
        return (self.cost, list(self.plans)) if best is None or self.cost < best[0] else best

    def annealing(self, seconds: float, iterations: int | None = None) -> SearchResult:
        started = time.perf_counter()
        start_cost = self.cost
        best = self._snapshot(None)
        more = self._budget(seconds, iterations)
        spread = 0.0
        done = 0
        while done < SA_PROBES and more(done):     # c_0: the largest difference seen
            mv = self.neighbour()
            if mv is None:
                break
            before = self.cost
            undo = self.apply(mv)
            spread = max(spread, abs(self.cost - before))
            self.apply(undo)
            done += 1
        temperature = spread or 1.0
        improved = done
        while more(done):
            mv = self.neighbour()
            if mv is None:
                break
            before = self.cost
            undo = self.apply(mv)
            delta = self.cost - before
            done += 1
            if delta > 0 and self.rng.random() >= math.exp(-delta / max(temperature, 1e-300)):
                self.apply(undo)
            else:
                previous, best = best[0], self._snapshot(best)
                if _better(best[0], previous):
                    improved = done
            temperature *= SA_COOLING
            if self._converged(done, improved, iterations):
                break
        return self._finish(best, start_cost, done, started)

    def tabu(self, seconds: float, iterations: int | None = None) -> SearchResult:
        started = time.perf_counter()
        start_cost = self.cost
        best = self._snapshot(None)
        more = self._budget(seconds, iterations)
        recent: deque = deque(maxlen=TABU_CAPACITY)
        banned = {self.signature}
        recent.append(self.signature)
        done = exhausted = improved = 0
        while more(done):
            candidates = []
            for _ in range(TABU_SAMPLES):
                mv = self.neighbour()
                if mv is None:
                    break
                undo = self.apply(mv)
                candidates.append((self.cost, self.signature, mv))
                self.apply(undo)
                done += 1
            allowed = [c for c in candidates if c[1] not in banned]
            if not allowed:
                exhausted += 1
                if not candidates or (iterations is None and exhausted >= TABU_EXHAUSTED):
                    break
                continue
            exhausted = 0
            cost, sig, mv = min(allowed, key=lambda c: c[0])
            self.apply(mv)
            if len(recent) == recent.maxlen:
                banned.discard(recent[0])
            recent.append(sig)
            banned.add(sig)
            previous, best = best[0], self._snapshot(best)
            if _better(best[0], previous):
                improved = done
            elif self._converged(done, improved, iterations):
                break
        return self._finish(best, start_cost, done, started)

    def _converged(self, done: int, improved: int, iterations: int | None) -> bool:
        """A time-budgeted search has not found a better plan for as many iterations as
        it took to find its best one, and at least the stall floor (see STALL_MIN)."""
        if iterations is not None:
            return False
        floor = max(STALL_MIN, STALL_PER_PAIR * len(self.graph.pairs))
        return done - improved > max(floor, improved)

    def _finish(self, best, start_cost, done, started) -> SearchResult:
        cost, plans = best
        self.apply([(t, p) for t, p in enumerate(plans) if p is not self.plans[t]])
        return SearchResult(plans, self.cost, start_cost, done, time.perf_counter() - started)
