"""Plan cost models (Kolchinsky & Schuster, VLDB 2018, Sections 3.1, 3.2, 5.1, 5.2).

Every model counts *partial matches* of a set S of relations, PM(S):

* skip-till-any-match (Sections 3.1/3.2):
  ``PM(S) = prod_{i in S} W r_i * prod_{i <= j in S} sel_ij`` (diagonal = unary);
* skip-till-next-match (Section 5.2): an event joins at most one match, so a prefix is
  limited by its rarest member: ``m(S) = W * min_{i in S} r_i * prod_{i <= j in S} sel_ij``.

Throughput costs:

* ``Cost_ord(O) = sum_k PM({p_1..p_k})`` (Section 3.1) for an order plan O,
* ``Cost_tree(T) = sum_{N in nodes(T)} PM(leaves(N))`` (Section 3.2) for a tree plan T,
* ``Cost^next_ord(O) = sum_k W * m[k]`` exactly as the paper writes it (Section 5.2; the
  extra factor W is a constant, so it changes nothing but the weight of alpha), and its
  "trivial extension" to trees, ``sum_N W * m(leaves(N))``.

Latency (Section 5.1): ``Cost_lat_ord(O) = sum_{T_i in Succ_O(T_n)} W r_i`` (events still
to be scanned after the pattern's last event T_n arrives) and
``Cost_lat_tree(T) = sum_{N in Anc_T(T_n)} PM(sibling(N))``. For a conjunction the last
event is not known in advance; the paper suggests an output profiler, which we do not
have, so we take the *expected* latency with every possible last relation
(``query.last_candidates``) equally likely. That keeps the latency additive over plan
steps / tree nodes, so the DP algorithms stay exact for ``alpha > 0``. For a single last
candidate (any sequence) it is the paper's formula. Combined (Section 5.1):
``Cost = Cost_trpt + alpha * Cost_lat`` with alpha = 0 by default.

Access (SIGMOD 2019 section 4, the per-event cost's C_a; ZStream's |L| * |R| join cost):
the evaluator checks a new partial match against every one buffered on the other side
before the conditions reject most pairs, so with ``access`` > 0 each step / join node also
costs ``access * PM(prefix) * W r_j`` (order: the prefix's matches times the next
relation's buffer) or ``access * PM(L) * PM(R)`` (tree node). Without it a plan that
joins a frequent relation late, under a selective condition, looks cheap (few partial
matches) while the evaluator tries every pair: measured on SEQ of 5 (benchmarks/
bench_adaptive.py --plans) CPU follows PM + 0.29 * pairs (log correlation 0.95), not PM
alone (0.69). Like the latency terms, it depends only on the step's (prefix, relation) or
the node's (left, right), so the dynamic programs stay exact.

Contiguity strategies use the skip-till-next-match model, which the paper bases them on.
Negation checks do not enter the cost (the paper plans the positive part only).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cepsql.planning.jqpg import ConjunctiveQuery
from cepsql.planning.trees import TreeNode

__all__ = [
    "ANY_MATCH",
    "DEFAULT_MODEL",
    "NEXT_MATCH",
    "STRATEGIES",
    "CostEvaluator",
    "CostModel",
    "cost_ord",
    "cost_tree",
    "plan_cost",
    "latency_ord",
    "latency_tree",
]

ANY_MATCH = "SKIP_TILL_ANY_MATCH"
NEXT_MATCH = "SKIP_TILL_NEXT_MATCH"
STRATEGIES = (ANY_MATCH, NEXT_MATCH, "STRICT_CONTIGUITY", "PARTITION_CONTIGUITY")


@dataclass(frozen=True)
class CostModel:
    """Which cost function a planner minimizes: selection strategy, latency weight and
    the weight of a pair tried against a created partial match (access; 0: the VLDB 2018
    costs exactly)."""
    alpha: float = 0.0
    strategy: str = ANY_MATCH
    access: float = 0.0

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown selection strategy {self.strategy!r}")
        if not self.alpha >= 0:
            raise ValueError("alpha must be >= 0")
        if not self.access >= 0:
            raise ValueError("access must be >= 0")

    @property
    def next_match(self) -> bool:
        return self.strategy != ANY_MATCH


#: The default model: skip-till-any-match, throughput only (alpha = 0).
DEFAULT_MODEL = CostModel()


def _popcount(x: int) -> int:
    return x.bit_count()


class CostEvaluator:
    """Cost functions of one (query, model) pair with memoized PM over relation sets.

    Sets are bitmasks (bit i = relation i). ``count(S)`` is the expected number of
    partial matches over S (PM or m); ``term(S)`` its contribution to the throughput
    cost (count, or W * count under skip-till-next-match).
    """

    def __init__(self, query: ConjunctiveQuery, model: CostModel = DEFAULT_MODEL):
        self.query = query
        self.model = model
        self.n = query.size
        self.cards = [float(c) for c in query.cardinalities]
        self.sel = [list(map(float, row)) for row in query.selectivity]
        self.window = float(query.window)
        self.leaf_size = [self.cards[i] * self.sel[i][i] for i in range(self.n)]
        self.cand_mask = 0
        for i in query.last_candidates:
            self.cand_mask |= 1 << i
        self.n_cand = max(_popcount(self.cand_mask), 1)
        self._selprod: dict[int, float] = {0: 1.0}
        self._count: dict[int, float] = {}

    # --- partial matches -----------------------------------------------------------
    def selprod(self, mask: int) -> float:
        """prod_{i <= j in mask} sel_ij."""
        got = self._selprod.get(mask)
        if got is not None:
            return got
        j = mask.bit_length() - 1
        rest = mask ^ (1 << j)
        f = self.selprod(rest) * self.sel[j][j]
        row = self.sel[j]
        r = rest
        while r:
            low = r & -r
            f *= row[low.bit_length() - 1]
            r ^= low
        self._selprod[mask] = f
        return f

    def count(self, mask: int) -> float:
        """Expected partial matches over the relations in mask (PM, or m for next-match)."""
        got = self._count.get(mask)
        if got is not None:
            return got
        if mask == 0:
            return 0.0
        idx = [i for i in range(self.n) if mask >> i & 1]
        if self.model.next_match:
            c = min(self.cards[i] for i in idx) * self.selprod(mask)
        else:
            c = math.prod(self.cards[i] for i in idx) * self.selprod(mask)
        self._count[mask] = c
        return c

    pm = count

    def term(self, mask: int) -> float:
        """Throughput-cost contribution of a prefix / tree node over mask."""
        c = self.count(mask)
        return self.window * c if self.model.next_match else c

    # --- pairs tried (access; additive like the latency) -----------------------------
    def access_append(self, prefix: int, j: int) -> float:
        """Pairs tried when relation j is taken after the relations in prefix: each of
        prefix's partial matches against each of j's buffered events (none for the
        first relation)."""
        return self.count(prefix) * self.leaf_size[j] if prefix else 0.0

    def access_join(self, left: int, right: int) -> float:
        """Pairs tried at a join node: every partial match of one side against every
        one of the other's."""
        return self.count(left) * self.count(right)

    def step_extra(self, prefix: int, j: int) -> float:
        """What taking j after prefix adds besides term(prefix | j): weighted latency
        and pairs tried (0 under the default model)."""
        model = self.model
        extra = model.alpha * self.latency_append(prefix, j) if model.alpha else 0.0
        if model.access:
            extra += model.access * self.access_append(prefix, j)
        return extra

    def join_extra(self, left: int, right: int) -> float:
        """What a join node of left and right adds besides term(left | right)."""
        model = self.model
        extra = model.alpha * self.latency_join(left, right) if model.alpha else 0.0
        if model.access:
            extra += model.access * self.access_join(left, right)
        return extra

    # --- latency pieces (additive, see module docstring) ----------------------------
    def latency_append(self, prefix: int, j: int) -> float:
        """Expected latency added by taking relation j after the relations in prefix:
        its buffered events are scanned when the last event was already in prefix."""
        return self.leaf_size[j] * _popcount(prefix & self.cand_mask) / self.n_cand

    def latency_join(self, left: int, right: int) -> float:
        """Expected latency of a join node: a last event arriving on one side is
        compared with every partial match buffered on the other (its sibling)."""
        return (self.count(right) * _popcount(left & self.cand_mask)
                + self.count(left) * _popcount(right & self.cand_mask)) / self.n_cand

    # --- plan costs -----------------------------------------------------------------
    def order_throughput(self, order: tuple[int, ...]) -> float:
        total, mask = 0.0, 0
        for j in order:
            mask |= 1 << j
            total += self.term(mask)
        return total

    def order_latency(self, order: tuple[int, ...]) -> float:
        total, mask = 0.0, 0
        for j in order:
            total += self.latency_append(mask, j)
            mask |= 1 << j
        return total

    def order_cost(self, order: tuple[int, ...]) -> float:
        _check_order(order, self.n)
        cost = self.order_throughput(order)
        if self.model.alpha or self.model.access:
            mask = 0
            for j in order:
                cost += self.step_extra(mask, j)
                mask |= 1 << j
        return cost

    def tree_throughput(self, root: TreeNode) -> float:
        return sum(self.term(node.mask) for node in root.nodes())

    def tree_latency(self, root: TreeNode) -> float:
        return sum(self.latency_join(node.left.mask, node.right.mask)
                   for node in root.nodes() if not node.is_leaf)

    def tree_cost(self, root: TreeNode) -> float:
        if root.mask != (1 << self.n) - 1:
            raise ValueError("a tree plan must have every relation as exactly one leaf")
        cost = self.tree_throughput(root)
        if self.model.alpha or self.model.access:
            cost += sum(self.join_extra(node.left.mask, node.right.mask)
                        for node in root.nodes() if not node.is_leaf)
        return cost

    # --- whole tables for the dynamic programs --------------------------------------
    def tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(count, term, popcount(mask & candidates)) for all 2^n masks, built by
        doubling: entries for masks containing bit j are those for masks below 2^j times
        j's factors. O(2^n * n) numpy work, no per-mask Python."""
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            return self._tables()

    def _tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = self.n
        sp = np.ones(1)
        minc = np.full(1, np.inf)
        prodc = np.ones(1)
        pc = np.zeros(1, dtype=np.int64)
        for j in range(n):
            f = np.ones(1)
            for i in range(j):
                f = np.concatenate([f, f * self.sel[i][j]])
            sp = np.concatenate([sp, sp * f * self.sel[j][j]])
            minc = np.concatenate([minc, np.minimum(minc, self.cards[j])])
            prodc = np.concatenate([prodc, prodc * self.cards[j]])
            pc = np.concatenate([pc, pc + (self.cand_mask >> j & 1)])
        count = (minc if self.model.next_match else prodc) * sp
        count[0] = 0.0
        term = self.window * count if self.model.next_match else count
        return count, term, pc


def _check_order(order: tuple[int, ...], n: int) -> None:
    if sorted(order) != list(range(n)):
        raise ValueError(f"an order plan must be a permutation of 0..{n - 1}, got {order}")


def cost_ord(query: ConjunctiveQuery, order: tuple[int, ...],
             model: CostModel = DEFAULT_MODEL) -> float:
    """Cost of an order-based plan: Cost_ord (or Cost^next_ord) + alpha * Cost_lat_ord."""
    return CostEvaluator(query, model).order_cost(tuple(order))


def cost_tree(query: ConjunctiveQuery, root: TreeNode, model: CostModel = DEFAULT_MODEL) -> float:
    """Cost of a tree-based plan: Cost_tree (or its next-match form) + alpha * Cost_lat_tree."""
    return CostEvaluator(query, model).tree_cost(root)


def plan_cost(plan, query: ConjunctiveQuery, model: CostModel = DEFAULT_MODEL) -> float:
    """Cost of an order or tree plan's shape on ``query`` -- the same term reduced with
    other statistics (adaptive re-planning prices the running plan on fresh numbers)."""
    if plan.kind == "order":
        return cost_ord(query, plan.order, model)
    return cost_tree(query, plan.root, model)


def latency_ord(query: ConjunctiveQuery, order: tuple[int, ...]) -> float:
    """Cost_lat_ord alone (expected over the possible last relations)."""
    return CostEvaluator(query).order_latency(tuple(order))


def latency_tree(query: ConjunctiveQuery, root: TreeNode,
                 model: CostModel = DEFAULT_MODEL) -> float:
    """Cost_lat_tree alone (expected over the possible last relations)."""
    return CostEvaluator(query, model).tree_latency(root)
