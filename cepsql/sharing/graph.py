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
Edges come from an inverted index of two-component signatures (event types + join
conditions; appendix A's hash tables), so only disjuncts that share one are paired; an
edge's common subpatterns are computed when the search first picks it.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from cepsql.sharing.canonical import sort_keys
from cepsql.sharing.dag import WorkloadContext

__all__ = ["Edge", "MultiPatternGraph", "build_graph", "common_subpattern", "mpg_density"]


@dataclass(frozen=True)
class Edge:
    """Common subpatterns of disjuncts a and b: (component of a, component of b) pairs."""
    a: int
    b: int
    strict: tuple[tuple[int, int], ...]
    relaxed: tuple[tuple[int, int], ...]


@dataclass
class MultiPatternGraph:
    """Edges are found eagerly (disjunct pairs sharing a two-component sub-pattern whose
    event types and join conditions agree), their maximal common subpatterns lazily, when
    the search first picks the edge (most edges of a big workload are never picked)."""
    ctx: WorkloadContext
    pairs: list[tuple[int, int]] = field(default_factory=list)
    adjacent: dict[int, list[int]] = field(default_factory=dict)   # disjunct -> pair ids
    seconds: float = 0.0
    _edges: dict[int, Edge | None] = field(default_factory=dict)
    _cache: dict = field(default_factory=dict)

    def edge(self, pid: int) -> Edge | None:
        """The common subpatterns of pair ``pid`` (None when fewer than two components
        can be mapped consistently)."""
        if pid not in self._edges:
            a, b = self.pairs[pid]
            relaxed = common_subpattern(self.ctx, a, b, False, self._cache)
            strict = common_subpattern(self.ctx, a, b, True, self._cache, start=relaxed) \
                if relaxed else ()
            self._edges[pid] = Edge(a, b, strict, relaxed) if relaxed else None
        return self._edges[pid]


def build_graph(ctx: WorkloadContext) -> MultiPatternGraph:
    """Pairs of disjuncts with a common two-component sub-pattern, found through an
    index of (event type, event type, join conditions) signatures (appendix A's hash
    tables): only disjuncts sharing a signature are ever compared."""
    import time
    started = time.perf_counter()
    g = MultiPatternGraph(ctx)
    ids: dict = {}
    index: dict[tuple, list[int]] = defaultdict(list)
    for t, pt in enumerate(ctx.terms):
        pairs, _ = _pair_conditions(ctx, t, g._cache)
        leaves = [ids.setdefault(k, len(ids)) for k in pt.leaf_keys]
        sigs = set()
        for i in range(pt.size):
            for j in range(pt.size):
                if i != j:
                    cond = ids.setdefault(("cond", pairs.get((i, j), ())), len(ids))
                    sigs.add((leaves[i], leaves[j], cond))
        for sig in sigs:
            index[sig].append(t)
    found: set[tuple[int, int]] = set()
    for terms in index.values():
        for x, a in enumerate(terms):
            for b in terms[x + 1:]:
                found.add((a, b))
    for pid, (a, b) in enumerate(sorted(found)):
        g.pairs.append((a, b))
        g.adjacent.setdefault(a, []).append(pid)
        g.adjacent.setdefault(b, []).append(pid)
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
                      cache: dict | None = None,
                      start: tuple[tuple[int, int], ...] | None = None
                      ) -> tuple[tuple[int, int], ...]:
    """A maximal common subpattern of disjuncts a and b as component pairs (``start``:
    a mapping to shrink instead of the event-type intersection, e.g. the relaxed one
    when looking for the strict one)."""
    cache = {} if cache is None else cache
    ta, tb = ctx.terms[a], ctx.terms[b]
    mapping: dict[int, int] = {}
    if start is not None:
        mapping = dict(start)
    else:
        occurrences: dict = defaultdict(list)
        for j, key in enumerate(tb.leaf_keys):
            occurrences[key].append(j)
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


def mpg_density(graph: MultiPatternGraph) -> float:
    """The paper's MPG density (appendix D): the mean fraction of the other disjuncts a
    disjunct is an MPG neighbour of (an edge with a common subpattern of >= 2 components;
    computes every candidate edge's common subpattern)."""
    n = len(graph.ctx.terms)
    if n < 2:
        return 0.0
    edges = sum(1 for pid in range(len(graph.pairs)) if graph.edge(pid) is not None)
    return 2.0 * edges / (n * (n - 1))
