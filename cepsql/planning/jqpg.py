"""The CPG -> JQPG reduction (Kolchinsky & Schuster, VLDB 2018, Sections 3 and 4).

A CEP pattern is planned as one or more *conjunctive queries*: every positive pattern
variable becomes a relation of cardinality ``W * r_i`` (Section 3.1, proof of Theorem 1),
every cross-variable DEFINE predicate a join predicate of selectivity ``sel_ij``. The
general pattern types of Section 4 are folded in as the paper does:

* **Sequence patterns**: ``SEQ(e1, ..., en)`` = ``AND(e1, ..., en)`` plus the timestamp
  predicates ``e_k.ts < e_{k+1}.ts`` between SEQ neighbours. Each such predicate is an
  ordinary join predicate; we estimate its selectivity as ``order_selectivity`` (1/2: two
  independent arrivals inside one window are in either order with equal probability) and
  multiply it into ``sel_ij``.
* **Kleene closure**: ``KL(T_i)`` is replaced by a type ``T'_i`` whose "events" are the
  subsets of ``T_i``'s events in a window, so ``r'_i = 2^(r_i W) / W`` and the relation
  cardinality is ``2^(r_i W)``; selectivities are unchanged. The exponent is capped (see
  :data:`KLEENE_LOG2_CAP`) so that products of many cardinalities stay finite floats.
* **Negation**: not rewritten. The positive part is planned; the negated subpattern
  becomes a :class:`NegationConstraint` naming the positive relations that must be bound
  before the absence check can run, and every plan places the check at the earliest
  step (order plans) or lowest node (tree plans) where they are (see ``plans.py``).
* **Nested patterns**: converted to DNF (OR distributed over SEQ/AND; optional items
  become "absent or present" alternatives), one conjunctive query per disjunct; the plan
  set is the union of their plans.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from cepsql.algebra.pattern import (
    Alternation,
    Anchor,
    Concat,
    Empty,
    Exclusion,
    Negation,
    PatternNode,
    Permute,
    Quantified,
    Var,
    pattern_to_text,
    pattern_variables,
)
from cepsql.errors import CepUnsupportedError

__all__ = [
    "KLEENE_LOG2_CAP",
    "MAX_DNF_TERMS",
    "ConjunctiveQuery",
    "NegationConstraint",
    "PatternStats",
    "VarKind",
    "dnf_terms",
    "kleene_cardinality",
    "reduce_pattern",
    "reduce_term",
]

#: Kleene cardinality 2^(rW) is capped at 2^KLEENE_LOG2_CAP. The cap only has to keep the
#: closure "later than everything else" in every plan: 2^64 (~1.8e19) is far above any
#: realistic plain relation (W*r) yet 22 such factors still fit a float (< 1e308 needs
#: the product of the *other* relations to stay below ~1e-100 of it, which it does).
KLEENE_LOG2_CAP = 64.0

#: Guard against exponential DNF blow-up of deeply nested OR/optional patterns.
MAX_DNF_TERMS = 4096


class VarKind(str, Enum):
    """How a pattern variable takes part in a match."""
    PLAIN = "plain"
    KLEENE = "kleene"
    NEGATED = "negated"


def kleene_cardinality(rate: float, window: float, lo: int = 1, hi: int | None = None,
                       log2_cap: float = KLEENE_LOG2_CAP) -> float:
    """Cardinality ``W * r'`` of the relation that stands for ``KL(T)`` (Section 4).

    Unbounded closures use the paper's ``2^(r W)`` (one "event" per subset of the window's
    ``r W`` events). A closure bounded above by ``hi < r W`` has only
    ``sum_{k=lo..hi} C(rW, k)`` such subsets; we use that count (an extension: the paper
    only treats unbounded KL). Either way the result is capped at ``2^log2_cap`` to avoid
    float overflow; the cap never reorders a closure before a plain relation.
    """
    n = rate * window
    if n <= 0:
        return 1.0 if lo == 0 else 0.0
    if hi is None or hi >= n:
        log2_card = n
    else:
        lgn = math.lgamma(n + 1)
        logs = [lgn - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                for k in range(max(lo, 0), hi + 1)]
        if not logs:
            return 0.0
        top = max(logs)
        log2_card = (top + math.log(sum(math.exp(x - top) for x in logs))) / math.log(2)
    return 2.0 ** min(log2_card, log2_cap)


@dataclass(frozen=True)
class PatternStats:
    """Statistics the reduction needs (Section 3.1).

    ``rates[v]``: events per time unit satisfying v's single-row conditions (r_i).
    ``selectivities[(a, b)]``: selectivity of the cross-variable predicates between a and
    b (symmetric; a key's presence also means "a predicate exists", which is how negation
    checks learn which positive variables they depend on). ``(a, a)`` is the unary
    selectivity sel_ii (1 when r_a already counts only qualifying events).
    ``window``: W, in the same time unit as the rates.
    ``kinds``: optional declared kinds; ``reduce_pattern`` checks them against the pattern
    (the pattern is the authority: KL(...) makes a Kleene variable, NOT(...) a negated one).
    """
    rates: Mapping[str, float]
    window: float
    selectivities: Mapping[tuple[str, str], float] = field(default_factory=dict)
    kinds: Mapping[str, VarKind] = field(default_factory=dict)
    order_selectivity: float = 0.5
    kleene_log2_cap: float = KLEENE_LOG2_CAP

    def __post_init__(self) -> None:
        if not self.window > 0:
            raise ValueError(f"window must be positive, got {self.window!r}")
        for v, r in self.rates.items():
            if r < 0 or math.isnan(r):
                raise ValueError(f"arrival rate of {v} must be >= 0, got {r!r}")
        for key, s in self.selectivities.items():
            if not 0.0 <= s <= 1.0:
                raise ValueError(f"selectivity of {key} must be in [0, 1], got {s!r}")
        if not 0.0 < self.order_selectivity <= 1.0:
            raise ValueError("order_selectivity must be in (0, 1]")

    def rate(self, var: str) -> float:
        try:
            return float(self.rates[var])
        except KeyError:
            raise ValueError(f"no arrival rate for pattern variable {var}") from None

    def selectivity(self, a: str, b: str) -> float:
        """sel_ab (symmetric); 1 when no predicate links a and b."""
        s = self.selectivities.get((a, b))
        if s is None:
            s = self.selectivities.get((b, a), 1.0)
        return float(s)

    def has_predicate(self, a: str, b: str) -> bool:
        return (a, b) in self.selectivities or (b, a) in self.selectivities


@dataclass(frozen=True)
class NegationConstraint:
    """An absence check the plan must honour (Section 4, "Negation patterns").

    ``required``: indices of the positive relations that must be bound before the check
    can run: the SEQ neighbours bounding the gap, the match's first/last event for a
    window-bounded (leading/trailing) gap, every positive of the AND for an AND-level
    NOT, plus every positive the negated DEFINEs refer to. ``cardinality``: W * r of the
    negated events (None when no rate was given); it does not enter Cost_ord/Cost_tree,
    which count the positive part's partial matches as the paper does.
    """
    child: PatternNode
    variables: tuple[str, ...]
    required: frozenset[int]
    cardinality: float | None = None

    @property
    def label(self) -> str:
        return "NOT(" + pattern_to_text(self.child) + ")"


@dataclass(frozen=True)
class ConjunctiveQuery:
    """One JQPG instance: relations R_0..R_{n-1} with a predicate-selectivity matrix.

    ``names[i]``: the pattern variable of relation i (a variable occurring twice gives two
    relations, as the paper's orders repeat repeated types). ``selectivity[i][j]``:
    product of all predicate selectivities between i and j, timestamp-order predicates
    included; the diagonal holds unary selectivities. ``precedes``: the SEQ timestamp
    predicates (i, j) meaning ts_i < ts_j, kept for evaluators (lazy NFA scoping).
    ``last_candidates``: relations that can hold a match's last event (one for a
    sequence, several for a conjunction); the latency cost model needs them.
    ``pattern``: the OR-free disjunct this query came from.
    """
    names: tuple[str, ...]
    kinds: tuple[VarKind, ...]
    cardinalities: tuple[float, ...]
    selectivity: tuple[tuple[float, ...], ...]
    window: float
    precedes: frozenset[tuple[int, int]] = frozenset()
    negations: tuple[NegationConstraint, ...] = ()
    last_candidates: frozenset[int] = frozenset()
    kleene_bounds: tuple[tuple[int, int | None] | None, ...] = ()
    pattern: PatternNode | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        n = len(self.names)
        if n == 0:
            raise ValueError("a conjunctive query needs at least one relation")
        if len(self.cardinalities) != n or len(self.kinds) != n or len(self.selectivity) != n \
                or any(len(row) != n for row in self.selectivity):
            raise ValueError("names, kinds, cardinalities and selectivity sizes differ")
        if not self.last_candidates:
            object.__setattr__(self, "last_candidates", frozenset(range(n)))
        if not self.kleene_bounds:
            object.__setattr__(self, "kleene_bounds", (None,) * n)

    @property
    def size(self) -> int:
        return len(self.names)

    @property
    def labels(self) -> tuple[str, ...]:
        """Display names: repeated variables get #2, #3, ...; closures get a '+'."""
        seen: dict[str, int] = {}
        out = []
        for name, kind in zip(self.names, self.kinds):
            seen[name] = seen.get(name, 0) + 1
            text = name if seen[name] == 1 else f"{name}#{seen[name]}"
            out.append(f"KL({text})" if kind is VarKind.KLEENE else text)
        return tuple(out)

    @classmethod
    def from_arrays(cls, cardinalities, selectivity, window: float = 1.0,
                    names: tuple[str, ...] | None = None, **kw) -> ConjunctiveQuery:
        """A pure conjunctive query straight from numbers (tests, benchmarks, EXPLAIN)."""
        n = len(cardinalities)
        names = names or tuple(f"R{i}" for i in range(n))
        sel = tuple(tuple(float(selectivity[i][j]) for j in range(n)) for i in range(n))
        return cls(names=tuple(names), kinds=(VarKind.PLAIN,) * n,
                   cardinalities=tuple(float(c) for c in cardinalities),
                   selectivity=sel, window=window, **kw)


# --- DNF --------------------------------------------------------------------------------

def dnf_terms(node: PatternNode) -> list[PatternNode]:
    """The OR-free disjuncts of a pattern (Section 4, "Nested patterns").

    OR distributes over SEQ and AND; ``x?``/``x*`` (and ``KL(x, 0, ...)``) become "absent
    or present"; nested SEQs and ANDs are flattened. NOT's child is *not* expanded: a
    negated OR is one absence check. Disjuncts that match only the empty sequence are
    dropped (they need no plan). Duplicates are removed, order kept.
    """
    out: list[PatternNode] = []
    for t in _expand(node):
        if t is not None and t not in out:
            out.append(t)
    return out


def _expand(node: PatternNode) -> list[PatternNode | None]:
    if isinstance(node, Var):
        return [node]
    if isinstance(node, Empty):
        return [None]
    if isinstance(node, Exclusion):
        return _expand(node.child)
    if isinstance(node, Negation):
        return [node]
    if isinstance(node, Anchor):
        raise CepUnsupportedError("anchors (^, $) have no JQPG reduction; they exist only "
                                  "in SQL:2016 mode, which is not cost-planned")
    if isinstance(node, Alternation):
        out: list[PatternNode | None] = []
        for item in node.items:
            out.extend(_expand(item))
        _check_size(len(out))
        return out
    if isinstance(node, (Concat, Permute)):
        options = [_expand(i) for i in node.items]
        _check_size(math.prod(len(o) for o in options))
        return [_combine(type(node), choice) for choice in itertools.product(*options)]
    if isinstance(node, Quantified):
        return _expand_quantified(node)
    raise TypeError(f"unknown pattern node {node!r}")


def _expand_quantified(node: Quantified) -> list[PatternNode | None]:
    lo, hi = node.min, node.max
    if hi == 0:
        return [None]
    if lo == 0:
        return [None] + _expand_quantified(Quantified(node.child, 1, hi, node.greedy))
    child = node.child.child if isinstance(node.child, Exclusion) else node.child
    if isinstance(child, Var):
        if lo == 1 and hi == 1:
            return [child]
        return [Quantified(child, lo, hi)]
    if hi == 1:
        return _expand(child)
    raise CepUnsupportedError("KL over a composite pattern has no JQPG reduction (the "
                              "paper applies Kleene closure to single events only)")


def _combine(kind: type, items: tuple[PatternNode | None, ...]) -> PatternNode | None:
    flat: list[PatternNode] = []
    for item in items:
        if item is None:
            continue
        if isinstance(item, kind):
            flat.extend(item.items)  # SEQ(a, SEQ(b, c)) = SEQ(a, b, c); same for AND
        else:
            flat.append(item)
    if not flat or all(isinstance(i, Negation) for i in flat):
        # nothing positive left: matches the empty sequence only (a lone NOT without
        # positive neighbours cannot stand, the parser rejects it; here it was optional)
        return None
    return flat[0] if len(flat) == 1 else kind(tuple(flat))


def _check_size(n: int) -> None:
    if n > MAX_DNF_TERMS:
        raise CepUnsupportedError(f"the pattern's DNF has more than {MAX_DNF_TERMS} "
                                  "conjunctive subpatterns; planning it is not supported")


# --- the reduction of one disjunct -----------------------------------------------------

@dataclass
class _Walk:
    """State collected while walking one OR-free disjunct."""
    leaves: list[PatternNode] = field(default_factory=list)
    precedes: set[tuple[int, int]] = field(default_factory=set)
    # (negation node, required positives or None = "all positives of the disjunct")
    negations: list[tuple[Negation, frozenset[int] | None]] = field(default_factory=list)


def _walk(node: PatternNode, st: _Walk, root: PatternNode,
          root_span: list[frozenset[int]]) -> tuple[frozenset[int], frozenset[int], frozenset[int]]:
    """Returns (first, last, all): relations that can hold the node's first / last event."""
    if isinstance(node, (Var, Quantified)):
        idx = len(st.leaves)
        st.leaves.append(node)
        s = frozenset([idx])
        return s, s, s
    if isinstance(node, Concat):
        parts: list[tuple[frozenset[int], frozenset[int], frozenset[int]] | None] = [
            None if isinstance(i, Negation) else _walk(i, st, root, root_span)
            for i in node.items]
        positive = [p for p in parts if p is not None]
        for a, b in itertools.pairwise(positive):
            st.precedes.update((x, y) for x in a[1] for y in b[0])
        for k, item in enumerate(node.items):
            if not isinstance(item, Negation):
                continue
            left = next((p for p in reversed(parts[:k]) if p is not None), None)
            right = next((p for p in parts[k + 1:] if p is not None), None)
            if left is not None and right is not None:
                st.negations.append((item, left[1] | right[0]))
            elif node is root:
                # window-bounded side: the match's first (last) event fixes where the
                # window ends (starts), so that event must be bound too
                req = (left[1] | root_span[0]) if left is not None else (right[0] | root_span[1])
                st.negations.append((item, req))
            else:
                st.negations.append((item, None))  # window of the whole match: all
        first = positive[0][0]
        last = positive[-1][1]
        return first, last, frozenset().union(*(p[2] for p in positive))
    if isinstance(node, Permute):
        parts2 = [_walk(i, st, root, root_span) for i in node.items
                  if not isinstance(i, Negation)]
        everything = frozenset().union(*(p[2] for p in parts2))
        for item in node.items:
            if isinstance(item, Negation):
                st.negations.append((item, everything))  # strictly inside the AND's span
        return (frozenset().union(*(p[0] for p in parts2)),
                frozenset().union(*(p[1] for p in parts2)), everything)
    raise TypeError(f"unexpected node in an OR-free disjunct: {node!r}")


def _root_span(node: PatternNode) -> list[frozenset[int]]:
    """(first, last) of the disjunct root, computed by a dry walk (indices are stable)."""
    st = _Walk()
    first, last, _ = _walk(node, st, root=None, root_span=[frozenset(), frozenset()])
    return [first, last]


def reduce_term(term: PatternNode, stats: PatternStats) -> ConjunctiveQuery:
    """The conjunctive JQPG instance of one OR-free disjunct (a term of ``dnf_terms``)."""
    span = _root_span(term)
    st = _Walk()
    _, last, everything = _walk(term, st, term, span)
    W = stats.window
    names, kinds, cards, bounds = [], [], [], []
    for leaf in st.leaves:
        if isinstance(leaf, Quantified):
            name = leaf.child.name
            kinds.append(VarKind.KLEENE)
            cards.append(kleene_cardinality(stats.rate(name), W, leaf.min, leaf.max,
                                            stats.kleene_log2_cap))
            bounds.append((leaf.min, leaf.max))
        else:
            name = leaf.name
            kinds.append(VarKind.PLAIN)
            cards.append(W * stats.rate(name))
            bounds.append(None)
        names.append(name)
    n = len(names)
    sel = [[stats.selectivity(names[i], names[j]) if (i == j or names[i] != names[j]) else 1.0
            for j in range(n)] for i in range(n)]
    for i, j in st.precedes:
        sel[i][j] *= stats.order_selectivity
        sel[j][i] *= stats.order_selectivity
    negs = []
    for node, req in st.negations:
        nvars = tuple(pattern_variables(node.child))
        required = set(everything if req is None else req)
        required |= {i for i in range(n) for v in nvars if stats.has_predicate(names[i], v)}
        card = None
        if all(v in stats.rates for v in nvars):
            card = W * sum(stats.rate(v) for v in nvars)
        negs.append(NegationConstraint(node.child, nvars, frozenset(required), card))
    _check_kinds(stats, names, kinds, negs)
    return ConjunctiveQuery(
        names=tuple(names), kinds=tuple(kinds), cardinalities=tuple(cards),
        selectivity=tuple(tuple(r) for r in sel), window=W,
        precedes=frozenset(st.precedes), negations=tuple(negs),
        last_candidates=last, kleene_bounds=tuple(bounds), pattern=term)


def _check_kinds(stats: PatternStats, names, kinds, negs) -> None:
    actual: dict[str, set[VarKind]] = {}
    for name, kind in zip(names, kinds):
        actual.setdefault(name, set()).add(kind)
    for neg in negs:
        for v in neg.variables:
            actual.setdefault(v, set()).add(VarKind.NEGATED)
    for v, declared in stats.kinds.items():
        if v in actual and VarKind(declared) not in actual[v]:
            raise ValueError(f"variable {v} is declared {VarKind(declared).value} but the "
                             f"pattern uses it as {sorted(k.value for k in actual[v])}")


def reduce_pattern(pattern_node: PatternNode, stats: PatternStats) -> list[ConjunctiveQuery]:
    """Reduce a CEP pattern to the conjunctive JQPG instances to plan (Sections 3-4).

    One :class:`ConjunctiveQuery` per DNF disjunct; plan each separately, the union of
    their plans detects the pattern.
    """
    return [reduce_term(t, stats) for t in dnf_terms(pattern_node)]
