"""The nine plan-generation algorithms of Kolchinsky & Schuster, VLDB 2018, Section 6.1.

Order-based (plans for the lazy chain NFA):

* ``TRIVIAL`` - the pattern's own order (SASE, Cayuga).
* ``EFREQ`` - ascending arrival frequency, i.e. relation cardinality (PB-CED, Lazy NFA).
* ``GREEDY`` - Swami's greedy join ordering [48]: start from nothing and repeatedly append
  the relation that minimizes the cost added by that step.
* ``II_RANDOM`` / ``II_GREEDY`` - iterative improvement [48]: local search with the swap
  (exchange two positions) and 3-cycle (rotate three positions) moves, first improvement,
  until a local minimum; from random starts (restarted, seeded) or from the GREEDY order.
  Time-boxed by ``budget_seconds``.
* ``DP_LD`` - Selinger-style dynamic programming over subsets for left-deep trees [46]:
  ``best(S) = term(S) + min_{j in S} best(S - j) + alpha * lat(S - j, j)`` (+ the pairs
  tried, ``access * PM(S - j) * W r_j``, cost.py). Exact.

Tree-based (plans for the ZStream-like tree evaluator):

* ``ZSTREAM`` - ZStream's DP over all tree topologies for the fixed leaf sequence (the
  pattern order): interval DP, ``best(i..j) = term(i..j) + min_k best(i..k) + best(k+1..j)``.
* ``ZSTREAM_ORD`` - ZSTREAM applied to the leaf sequence produced by GREEDY (as the paper
  describes), lifting ZStream's fixed-leaf-order restriction heuristically.
* ``DP_B`` - DP over bushy trees [46]: ``best(S) = term(S) + min over splits S = L + R of
  best(L) + best(R) + alpha * lat(L, R)`` (+ ``access * PM(L) * PM(R)``). Exact.

Every algorithm has the signature ``f(query, model=CostModel(), *, budget_seconds=None,
seed=0) -> OrderPlan | TreePlan``, and the returned plan's ``cost`` is recomputed with
the plain cost function of ``cost.py`` (not the algorithm's internal bookkeeping), so
costs of different algorithms are always comparable.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable

import numpy as np

from cepsql.planning.cost import DEFAULT_MODEL, CostEvaluator, CostModel
from cepsql.planning.jqpg import ConjunctiveQuery
from cepsql.planning.plans import OrderPlan, TreePlan, order_negation_steps, tree_negation_nodes
from cepsql.planning.trees import TreeNode, join, leaf

__all__ = [
    "ALGORITHMS",
    "II_DEFAULT_SECONDS",
    "ORDER_ALGORITHMS",
    "TREE_ALGORITHMS",
    "Plan",
    "choose_plan",
    "dp_b",
    "dp_ld",
    "efreq",
    "estimate_dp_seconds",
    "greedy",
    "ii_greedy",
    "ii_random",
    "make_order_plan",
    "make_tree_plan",
    "trivial",
    "zstream",
    "zstream_ord",
]

Plan = OrderPlan | TreePlan
#: Time box of the iterative-improvement searches when the caller gives none.
II_DEFAULT_SECONDS = 0.5
#: Beyond these sizes the 2^n / 3^n tables no longer fit comfortably in memory.
DP_LD_MAX_RELATIONS = 22
DP_B_MAX_RELATIONS = 18


def make_order_plan(query: ConjunctiveQuery, order, model: CostModel, algorithm: str,
                    ev: CostEvaluator | None = None) -> OrderPlan:
    """An OrderPlan with its cost and the negation checks placed (earliest step)."""
    order = tuple(int(i) for i in order)
    ev = ev or CostEvaluator(query, model)
    return OrderPlan(order=order, cost=ev.order_cost(order), algorithm=algorithm,
                     negation_steps=order_negation_steps(query, order), query=query)


def make_tree_plan(query: ConjunctiveQuery, root: TreeNode, model: CostModel, algorithm: str,
                   ev: CostEvaluator | None = None) -> TreePlan:
    """A TreePlan with its cost and the negation checks placed (lowest covering node)."""
    ev = ev or CostEvaluator(query, model)
    return TreePlan(root=root, cost=ev.tree_cost(root), algorithm=algorithm,
                    negation_nodes=tree_negation_nodes(query, root), query=query)


# --- order-based ------------------------------------------------------------------------

def trivial(query: ConjunctiveQuery, model: CostModel = DEFAULT_MODEL, *,
            budget_seconds: float | None = None, seed: int = 0) -> OrderPlan:
    """TRIVIAL: relations are numbered in pattern order, so the plan is 0..n-1."""
    return make_order_plan(query, range(query.size), model, "TRIVIAL")


def _efreq_order(query: ConjunctiveQuery) -> list[int]:
    return sorted(range(query.size), key=lambda i: (query.cardinalities[i], i))


def efreq(query: ConjunctiveQuery, model: CostModel = DEFAULT_MODEL, *,
          budget_seconds: float | None = None, seed: int = 0) -> OrderPlan:
    """EFREQ: ascending arrival frequency (cardinality W*r; 2^(rW) for a closure)."""
    return make_order_plan(query, _efreq_order(query), model, "EFREQ")


def _greedy_order(ev: CostEvaluator) -> list[int]:
    order: list[int] = []
    mask = 0
    remaining = set(range(ev.n))
    while remaining:
        j = min(remaining, key=lambda k, m=mask: (ev.term(m | 1 << k) + ev.step_extra(m, k), k))
        order.append(j)
        remaining.discard(j)
        mask |= 1 << j
    return order


def greedy(query: ConjunctiveQuery, model: CostModel = DEFAULT_MODEL, *,
           budget_seconds: float | None = None, seed: int = 0) -> OrderPlan:
    """GREEDY: append, at each step, the relation minimizing that step's cost."""
    ev = CostEvaluator(query, model)
    return make_order_plan(query, _greedy_order(ev), model, "GREEDY", ev)


def _moves(n: int) -> list[tuple[int, ...]]:
    """The II neighbourhood: swaps (i, j) and 3-cycles (i, j, k) in both directions."""
    out: list[tuple[int, ...]] = [(i, j) for i in range(n) for j in range(i + 1, n)]
    for i in range(n):
        for j in range(i + 1, n):
            for k in range(j + 1, n):
                out.append((i, j, k))
                out.append((i, k, j))
    return out


def _apply(order: list[int], move: tuple[int, ...]) -> list[int]:
    new = list(order)
    if len(move) == 2:
        i, j = move
        new[i], new[j] = new[j], new[i]
    else:  # rotate the three positions: a<-b<-c<-a
        i, j, k = move
        new[i], new[j], new[k] = order[j], order[k], order[i]
    return new


def _local_search(ev: CostEvaluator, start: list[int], rng: random.Random,
                  moves: list[tuple[int, ...]], deadline: float) -> tuple[list[int], float]:
    """First-improvement descent to a local minimum of the swap/3-cycle neighbourhood
    (or until the deadline)."""
    state, cost = list(start), ev.order_cost(tuple(start))
    improved = True
    while improved and time.perf_counter() < deadline:
        improved = False
        rng.shuffle(moves)
        for k, move in enumerate(moves):
            if k % 256 == 255 and time.perf_counter() >= deadline:
                break
            cand = _apply(state, move)
            c = ev.order_cost(tuple(cand))
            if c < cost * (1 - 1e-12):
                state, cost, improved = cand, c, True
                break
    return state, cost


def _iterative_improvement(query: ConjunctiveQuery, model: CostModel, starts, name: str,
                           budget_seconds: float | None, seed: int) -> OrderPlan:
    ev = CostEvaluator(query, model)
    rng = random.Random(seed)
    budget = II_DEFAULT_SECONDS if budget_seconds is None else budget_seconds
    deadline = time.perf_counter() + budget
    moves = _moves(query.size)
    best: tuple[list[int], float] | None = None
    for start in starts(ev, rng):
        if best is not None and time.perf_counter() >= deadline:
            break
        found = _local_search(ev, start, rng, moves, deadline)
        if best is None or found[1] < best[1]:
            best = found
    return make_order_plan(query, best[0], model, name, ev)


def ii_random(query: ConjunctiveQuery, model: CostModel = DEFAULT_MODEL, *,
              budget_seconds: float | None = None, seed: int = 0,
              restarts: int | None = None) -> OrderPlan:
    """II_RANDOM: local search from seeded random orders; ``restarts`` starts (default
    max(4, n)), fewer if the time box runs out; the best local minimum wins."""
    count = restarts if restarts is not None else max(4, query.size)

    def starts(ev, rng):
        for _ in range(count):
            order = list(range(ev.n))
            rng.shuffle(order)
            yield order
    return _iterative_improvement(query, model, starts, "II_RANDOM", budget_seconds, seed)


def ii_greedy(query: ConjunctiveQuery, model: CostModel = DEFAULT_MODEL, *,
              budget_seconds: float | None = None, seed: int = 0) -> OrderPlan:
    """II_GREEDY: local search from the GREEDY order."""
    def starts(ev, rng):
        yield _greedy_order(ev)
    return _iterative_improvement(query, model, starts, "II_GREEDY", budget_seconds, seed)


def _layers(n: int) -> list[np.ndarray]:
    pc = np.zeros(1, dtype=np.int64)
    for _ in range(n):
        pc = np.concatenate([pc, pc + 1])
    return [np.nonzero(pc == k)[0] for k in range(n + 1)]


def dp_ld(query: ConjunctiveQuery, model: CostModel = DEFAULT_MODEL, *,
          budget_seconds: float | None = None, seed: int = 0) -> OrderPlan:
    """DP_LD: exact optimum over left-deep plans, layer by layer over subset size."""
    n = query.size
    if n > DP_LD_MAX_RELATIONS:
        raise ValueError(f"DP_LD over {n} relations needs 2^{n} table entries; use GREEDY")
    ev = CostEvaluator(query, model)
    count, term, pc = ev.tables()
    lat_scale = model.alpha / ev.n_cand
    leaf_size = np.array(ev.leaf_size)
    size = 1 << n
    best = np.full(size, np.inf)
    choice = np.zeros(size, dtype=np.int64)
    for j in range(n):
        best[1 << j] = term[1 << j]
        choice[1 << j] = j
    for masks in _layers(n)[2:]:
        cur = np.full(len(masks), np.inf)
        cur_choice = np.full(len(masks), -1, dtype=np.int64)
        for j in range(n):
            has = np.nonzero(masks >> j & 1)[0]
            prev = masks[has] ^ (1 << j)
            val = best[prev]
            if lat_scale:
                val = val + lat_scale * leaf_size[j] * pc[prev]
            if model.access:
                val = val + model.access * count[prev] * leaf_size[j]
            # the first candidate always counts, so overflowed (inf) costs still yield
            # a valid plan
            better = (val < cur[has]) | (cur_choice[has] < 0)
            cur[has[better]] = val[better]
            cur_choice[has[better]] = j
        best[masks] = cur + term[masks]
        choice[masks] = cur_choice
    order = []
    mask = size - 1
    while mask:
        j = int(choice[mask])
        order.append(j)
        mask ^= 1 << j
    return make_order_plan(query, reversed(order), model, "DP_LD", ev)


# --- tree-based -------------------------------------------------------------------------

def _interval_dp(ev: CostEvaluator, seq: list[int]) -> TreeNode:
    """ZStream's DP: the cheapest tree whose leaves, left to right, are ``seq``."""
    n = len(seq)
    masks = [[0] * n for _ in range(n)]
    for i in range(n):
        m = 0
        for j in range(i, n):
            m |= 1 << seq[j]
            masks[i][j] = m
    best = [[0.0] * n for _ in range(n)]
    split = [[-1] * n for _ in range(n)]
    for i in range(n):
        best[i][i] = ev.term(1 << seq[i])
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length - 1
            top, arg = np.inf, -1
            for k in range(i, j):
                v = best[i][k] + best[k + 1][j] + ev.join_extra(masks[i][k], masks[k + 1][j])
                if v < top or arg < 0:
                    top, arg = v, k
            best[i][j] = top + ev.term(masks[i][j])
            split[i][j] = arg

    def build(i: int, j: int) -> TreeNode:
        if i == j:
            return leaf(seq[i])
        k = split[i][j]
        return join(build(i, k), build(k + 1, j))
    return build(0, n - 1)


def zstream(query: ConjunctiveQuery, model: CostModel = DEFAULT_MODEL, *,
            budget_seconds: float | None = None, seed: int = 0) -> TreePlan:
    """ZSTREAM: best tree topology over the pattern-order leaf sequence."""
    ev = CostEvaluator(query, model)
    return make_tree_plan(query, _interval_dp(ev, list(range(query.size))), model,
                          "ZSTREAM", ev)


def zstream_ord(query: ConjunctiveQuery, model: CostModel = DEFAULT_MODEL, *,
                budget_seconds: float | None = None, seed: int = 0) -> TreePlan:
    """ZSTREAM_ORD: ZStream's DP over the GREEDY order's leaf sequence."""
    ev = CostEvaluator(query, model)
    return make_tree_plan(query, _interval_dp(ev, _greedy_order(ev)), model,
                          "ZSTREAM_ORD", ev)


def dp_b(query: ConjunctiveQuery, model: CostModel = DEFAULT_MODEL, *,
         budget_seconds: float | None = None, seed: int = 0) -> TreePlan:
    """DP_B: exact optimum over bushy trees. Each set S is split as L + R with L holding
    S's lowest relation (Cost_tree is symmetric in the children, so this visits every
    unordered split once); 3^n / 2 candidate splits in all, vectorized per set."""
    n = query.size
    if n > DP_B_MAX_RELATIONS:
        raise ValueError(f"DP_B over {n} relations needs ~3^{n} steps; use ZSTREAM_ORD")
    ev = CostEvaluator(query, model)
    count, term, pc = ev.tables()
    lat_scale = model.alpha / ev.n_cand
    size = 1 << n
    best = np.full(size, np.inf)
    split = np.zeros(size, dtype=np.int64)
    for j in range(n):
        best[1 << j] = term[1 << j]
    # bit patterns of every width, to spread over a set's bits with one matrix product
    patterns = [((np.arange(1 << m)[:, None] >> np.arange(m)) & 1) for m in range(n)]
    for masks in _layers(n)[2:]:
        for mask in masks.tolist():
            bits = [b for b in range(n) if mask >> b & 1]
            low, rest = 1 << bits[0], bits[1:]
            subs = low + patterns[len(rest)][:-1] @ (1 << np.array(rest, dtype=np.int64))
            other = mask ^ subs
            val = best[subs] + best[other]
            if lat_scale:
                val = val + lat_scale * (count[other] * pc[subs] + count[subs] * pc[other])
            if model.access:
                val = val + model.access * count[subs] * count[other]
            k = int(np.argmin(val))
            best[mask] = term[mask] + val[k]
            split[mask] = subs[k]

    def build(mask: int) -> TreeNode:
        if mask & (mask - 1) == 0:
            return leaf(mask.bit_length() - 1)
        left = int(split[mask])
        return join(build(left), build(mask ^ left))
    return make_tree_plan(query, build(size - 1), model, "DP_B", ev)


ORDER_ALGORITHMS: dict[str, Callable[..., OrderPlan]] = {
    "TRIVIAL": trivial, "EFREQ": efreq, "GREEDY": greedy, "II_RANDOM": ii_random,
    "II_GREEDY": ii_greedy, "DP_LD": dp_ld}
TREE_ALGORITHMS: dict[str, Callable[..., TreePlan]] = {
    "ZSTREAM": zstream, "ZSTREAM_ORD": zstream_ord, "DP_B": dp_b}
ALGORITHMS: dict[str, Callable[..., Plan]] = {**ORDER_ALGORITHMS, **TREE_ALGORITHMS}


# --- choosing -------------------------------------------------------------------------

def estimate_dp_seconds(n: int, kind: str) -> float:
    """Rough plan-time of DP_LD (kind 'order') or DP_B (kind 'tree') for n relations,
    from the work the vectorized programs do (calibrated on a ~3 GHz core by
    benchmarks/bench_planning.py; only used to stay inside a budget)."""
    if kind == "order":
        return 1.5e-8 * n * (1 << n) + 1e-3
    return 5e-9 * 3 ** n + 8e-6 * (1 << n)


def choose_plan(query: ConjunctiveQuery, algorithm: str | None = None, *,
                kind: str = "order", model: CostModel = DEFAULT_MODEL,
                budget_seconds: float = 1.0, seed: int = 0) -> Plan:
    """Plan one conjunctive query.

    With ``algorithm`` set, run that registry entry. Unset: the exact DP (DP_LD for
    ``kind='order'``, DP_B for ``kind='tree'``) when its estimated run time fits in
    ``budget_seconds``; beyond, the cheaper of GREEDY and II_GREEDY (order), or of
    ZSTREAM_ORD and ZStream over the II_GREEDY order (tree) - the paper found GREEDY the
    best time/quality trade-off for large patterns (Section 6.3, Figure 7).
    """
    if algorithm is not None:
        try:
            fn = ALGORITHMS[algorithm.upper()]
        except KeyError:
            raise ValueError(f"unknown plan algorithm {algorithm!r}; "
                             f"known: {', '.join(ALGORITHMS)}") from None
        return fn(query, model, budget_seconds=budget_seconds, seed=seed)
    if kind not in ("order", "tree"):
        raise ValueError("kind must be 'order' or 'tree'")
    n = query.size
    start = time.perf_counter()
    if kind == "order":
        if n <= DP_LD_MAX_RELATIONS and estimate_dp_seconds(n, "order") <= budget_seconds:
            return dp_ld(query, model)
        base = greedy(query, model)
        left = max(budget_seconds - (time.perf_counter() - start), 0.0)
        improved = ii_greedy(query, model, budget_seconds=left, seed=seed)
        return improved if improved.cost < base.cost else base
    if n <= DP_B_MAX_RELATIONS and estimate_dp_seconds(n, "tree") <= budget_seconds:
        return dp_b(query, model)
    base = zstream_ord(query, model)
    left = max(budget_seconds - (time.perf_counter() - start), 0.0)
    order = ii_greedy(query, model, budget_seconds=left / 2, seed=seed).order
    ev = CostEvaluator(query, model)
    alt = make_tree_plan(query, _interval_dp(ev, list(order)), model, "ZSTREAM_ORD", ev)
    return alt if alt.cost < base.cost else base
