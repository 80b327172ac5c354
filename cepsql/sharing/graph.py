"""The multi-pattern graph (SIGMOD 2019 section 4.1, appendix A).

One vertex per shareable disjunct; an edge between two disjuncts holding a common
subpattern of at least two components (single components -- event types -- are always
shared: equal leaf keys are one node). A common subpattern maps components of one
disjunct to components of the other with equal event types such that the conditions
projected on it agree: the join conjuncts between every mapped pair (and among mapped
triples...) and the SEQ order. Appendix A's procedure: intersect the event types, then
drop components until the projected conditions agree (greedily, the component in most
conflicts first). Each edge stores the maximal *strict* common subpattern and the
maximal *order-relaxed* one (conditions agree, SEQ order may differ: MOTTO's operator
transformation shares its AND and each consumer re-applies its own order).
Candidate pairs come from an inverted index over event-type keys (appendix A's hash
tables), so disjuncts with fewer than two event types in common are never compared.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from .canonical import sort_keys
from .dag import WorkloadContext

__all__ = ["Edge", "MultiPatternGraph", "build_graph", "common_subpattern"]


@dataclass(frozen=True)
class Edge:
    """Common subpatterns of disjuncts a and b: (component of a, component of b) pairs."""
    a: int
    b: int
    strict: tuple[tuple[int, int], ...]
    relaxed: tuple[tuple[int, int], ...]


@dataclass
class MultiPatternGraph:
    edges: list[Edge] = field(default_factory=list)
    adjacent: dict[int, list[int]] = field(default_factory=dict)   # disjunct -> edge ids
    seconds: float = 0.0


def build_graph(ctx: WorkloadContext) -> MultiPatternGraph:
    import time
    started = time.perf_counter()
    index: dict[object, list[int]] = defaultdict(list)
    for t, pt in enumerate(ctx.terms):
        for key in set(pt.leaf_keys):
            index[key].append(t)
    common: dict[tuple[int, int], int] = defaultdict(int)
    for terms in index.values():
        for i, a in enumerate(terms):
            for b in terms[i + 1:]:
                common[(a, b)] += 1
    g = MultiPatternGraph()
    cache: dict = {}
    for (a, b), n in sorted(common.items()):
        if n < 2:
            continue
        strict = common_subpattern(ctx, a, b, True, cache)
        relaxed = common_subpattern(ctx, a, b, False, cache)
        if len(relaxed) < 2:
            continue
        g.adjacent.setdefault(a, []).append(len(g.edges))
        g.adjacent.setdefault(b, []).append(len(g.edges))
        g.edges.append(Edge(a, b, strict if len(strict) >= 2 else (), relaxed))
    g.seconds = time.perf_counter() - started
    return g


def _pair_conditions(ctx: WorkloadContext, t: int, cache: dict) -> dict:
    """(i, j) -> canonical keys of the join conjuncts needing exactly components i, j
    (slot 0 = i); larger conjuncts under their component masks."""
    got = cache.get(t)
    if got is None:
        pt, wp = ctx.terms[t], ctx.pattern_of(t)
        pairs: dict = defaultdict(list)
        multi: list[tuple[int, int]] = []
        for k, need in pt.joins:
            comps = [c for c in range(pt.size) if need >> c & 1]
            if len(comps) == 2:
                i, j = comps
                pairs[(i, j)].append(wp.conjunct_key(k, {pt.vars[i]: 0, pt.vars[j]: 1}))
                pairs[(j, i)].append(wp.conjunct_key(k, {pt.vars[j]: 0, pt.vars[i]: 1}))
            else:
                multi.append((k, need))
        got = cache[t] = ({k: sort_keys(v) for k, v in pairs.items()}, multi)
    return got


def common_subpattern(ctx: WorkloadContext, a: int, b: int, strict: bool,
                      cache: dict | None = None) -> tuple[tuple[int, int], ...]:
    """A maximal common subpattern of disjuncts a and b as component pairs."""
    cache = {} if cache is None else cache
    ta, tb = ctx.terms[a], ctx.terms[b]
    occurrences: dict = defaultdict(list)
    for j, key in enumerate(tb.leaf_keys):
        occurrences[key].append(j)
    mapping: dict[int, int] = {}
    for i, key in enumerate(ta.leaf_keys):
        if occurrences.get(key):
            mapping[i] = occurrences[key].pop(0)
    pa_, multi_a = _pair_conditions(ctx, a, cache)
    pb_, multi_b = _pair_conditions(ctx, b, cache)
    while len(mapping) >= 2:
        conflicts: dict[int, int] = defaultdict(int)
        dom = sorted(mapping)
        for x, i in enumerate(dom):
            for j in dom[x + 1:]:
                ok = pa_.get((i, j), ()) == pb_.get((mapping[i], mapping[j]), ())
                if ok and strict:
                    ok = (((i, j) in ta.closure) == ((mapping[i], mapping[j]) in tb.closure)
                          and ((j, i) in ta.closure) == ((mapping[j], mapping[i]) in tb.closure))
                if not ok:
                    conflicts[i] += 1
                    conflicts[j] += 1
        bad = _multi_conflicts(ctx, a, b, mapping, multi_a, multi_b)
        for i in bad:
            conflicts[i] += 1
        if not conflicts:
            break
        worst = max(sorted(conflicts), key=lambda i: conflicts[i])
        del mapping[worst]
    return tuple(sorted(mapping.items())) if len(mapping) >= 2 else ()


def _multi_conflicts(ctx, a, b, mapping, multi_a, multi_b) -> list[int]:
    """Components of conjuncts over 3+ components present on one side only."""
    if not multi_a and not multi_b:
        return []
    ta, tb = ctx.terms[a], ctx.terms[b]
    dom = sorted(mapping)
    rank = {i: r for r, i in enumerate(dom)}
    dom_a = sum(1 << i for i in dom)
    dom_b = sum(1 << mapping[i] for i in dom)
    inverse = {j: i for i, j in mapping.items()}

    def keys(t, pt, multi, dmask, slot):
        out = {}
        for k, need in multi:
            if need & dmask == need:
                slot_of = {pt.vars[c]: slot[c] for c in range(pt.size) if need >> c & 1}
                out[ctx.pattern_of(t).conjunct_key(k, slot_of)] = need
        return out
    ka = keys(a, ta, multi_a, dom_a, rank)
    kb = keys(b, tb, multi_b, dom_b, {j: rank[i] for j, i in inverse.items()})
    bad = []
    for key, need in ka.items():
        if key not in kb:
            bad.append(max(c for c in dom if need >> c & 1))
    for key, need in kb.items():
        if key not in ka:
            bad.append(max(inverse[c] for c in inverse if need >> c & 1))
    return bad
