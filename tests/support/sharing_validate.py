"""``check_global_plan``: does a global plan compute exactly every pattern's matches?

Checked from each consumer's point of view, independently of how the plan was found:
every disjunct of a shareable pattern has one root whose subtree covers exactly its
variables; every check a node applies, renamed from the node's owner to the consumer by
slot, is a condition the consumer has (a shared node never filters too much); every
DEFINE conjunct, SEQ order (up to transitivity), NOT and window of the consumer is
applied somewhere on the path or at the root (nothing filters too little); a node's
window is never smaller than a consumer's, and a consumer whose root window is larger
re-filters by its own; and the node's key equals the key recomputed from the consumer.
"""
from __future__ import annotations

from collections.abc import Hashable

from cepsql.sharing.canonical import sort_keys
from cepsql.sharing.global_plan import Binding, DagNode, GlobalPlan
from cepsql.sharing.patterns import PatternTerm, WorkloadPattern

__all__ = ["GlobalPlanError", "check_global_plan", "global_plan_problems"]


class GlobalPlanError(ValueError):
    """A global plan that does not compute its patterns' matches."""


def check_global_plan(plan: GlobalPlan, patterns: list[WorkloadPattern]) -> None:
    """Raises GlobalPlanError listing every problem found."""
    problems = global_plan_problems(plan, patterns)
    if problems:
        raise GlobalPlanError("invalid global plan:\n  " + "\n  ".join(problems[:40]))


def global_plan_problems(plan: GlobalPlan, patterns: list[WorkloadPattern]) -> list[str]:
    out: list[str] = []
    for i, n in enumerate(plan.nodes):
        if n.is_leaf:
            if n.arity != 1 or n.right >= 0:
                out.append(f"node {i}: a leaf has one slot and no children")
        elif not (0 <= n.left < i and 0 <= n.right < i):
            out.append(f"node {i}: children must be earlier nodes")
        elif n.arity != plan.nodes[n.left].arity + plan.nodes[n.right].arity:
            out.append(f"node {i}: arity is not the sum of its children's")
        elif plan.nodes[n.left].kleene is not None and plan.nodes[n.right].kleene is not None:
            out.append(f"node {i}: joins two Kleene leaves (the shared DAG cannot run it)")
        if len(n.owner_vars) != n.arity:
            out.append(f"node {i}: owner_vars do not name every slot")
    expected_unshared = [i for i, p in enumerate(patterns) if not p.shareable]
    if sorted(plan.unshared) != expected_unshared:
        out.append(f"unshared patterns {sorted(plan.unshared)} != {expected_unshared}")
    seen: dict[tuple[int, int], int] = {}
    for b in plan.bindings:
        seen[(b.pattern, b.term)] = seen.get((b.pattern, b.term), 0) + 1
    for p, wp in enumerate(patterns):
        for t in range(len(wp.terms) if wp.shareable else 0):
            if seen.get((p, t), 0) != 1:
                out.append(f"pattern {p} disjunct {t}: {seen.get((p, t), 0)} roots, want 1")
    for b in plan.bindings:
        if not (0 <= b.pattern < len(patterns)) or not patterns[b.pattern].shareable or \
                not 0 <= b.term < len(patterns[b.pattern].terms):
            out.append(f"binding {b}: no such shareable pattern disjunct")
            continue
        out += _check_binding(plan, b, patterns)
    return out


def _check_binding(plan: GlobalPlan, b: Binding, patterns) -> list[str]:
    wp = patterns[b.pattern]
    pt = wp.terms[b.term]
    where = f"pattern {b.pattern} ({wp.name or '?'}) disjunct {b.term}"
    if not 0 <= b.root < len(plan.nodes):
        return [f"{where}: root {b.root} is not a node"]
    if sorted(b.slot_vars) != sorted(pt.vars) or plan.nodes[b.root].arity != len(pt.vars):
        return [f"{where}: root slots {b.slot_vars} do not cover exactly {pt.vars}"]
    problems: list[str] = []
    applied_conj: set[int] = set()
    applied_order: set[tuple[str, str]] = set()
    _walk(plan, b.root, b.slot_vars, wp, pt, patterns, where, problems, applied_conj,
          applied_order)
    nots = set()
    for kind, payload in b.extra_checks:
        if kind == "conjunct":
            applied_conj.add(payload)
        elif kind == "order":
            applied_order.add(tuple(payload))
            if not _in_closure(pt, *payload):
                problems.append(f"{where}: root re-checks an order {payload} it does not have")
        elif kind == "not":
            nots.add(payload)
    comp = set(pt.vars)
    need = {k for k, c in enumerate(wp.conjuncts) if c.var in comp}
    if need - applied_conj:
        problems.append(f"{where}: conjuncts {sorted(need - applied_conj)} never applied")
    implied = _closure(applied_order)
    for i, j in pt.term.precedes:
        if (pt.vars[i], pt.vars[j]) not in implied:
            problems.append(f"{where}: order {pt.vars[i]} before {pt.vars[j]} never applied")
    if nots != set(range(len(pt.term.negs))):
        problems.append(f"{where}: NOT checks {sorted(nots)} != all {len(pt.term.negs)}")
    root = plan.nodes[b.root]
    if wp.window is not None and root.window != wp.window and \
            ("window", None) not in b.extra_checks:
        problems.append(f"{where}: root window {root.window} != {wp.window} and no re-filter")
    return problems


def _in_closure(pt: PatternTerm, u: str, v: str) -> bool:
    return (pt.vars.index(u), pt.vars.index(v)) in pt.closure


def _closure(pairs: set) -> set:
    out = set(pairs)
    changed = True
    while changed:
        changed = False
        for a, b in list(out):
            for c, d in list(out):
                if b == c and (a, d) not in out:
                    out.add((a, d))
                    changed = True
    return out


def _walk(plan: GlobalPlan, i: int, slot_vars: tuple[str, ...], wp: WorkloadPattern,
          pt: PatternTerm, patterns, where: str, problems: list, applied_conj: set,
          applied_order: set) -> Hashable:
    """Checks node i as seen by the consumer; returns the consumer's key for it."""
    node: DagNode = plan.nodes[i]
    here = f"{where}, node {i}"
    if node.window_kind != wp.window_kind:
        problems.append(f"{here}: window kind {node.window_kind} != {wp.window_kind}")
    if wp.window is None and node.window is not None:
        problems.append(f"{here}: a windowed node feeds a pattern without a window")
    if wp.window is not None and node.window is not None and node.window < wp.window:
        problems.append(f"{here}: node window {node.window} < consumer window {wp.window}")
    owner = patterns[node.owner]
    rename = dict(zip(node.owner_vars, slot_vars))
    own_slot = {v: s for s, v in enumerate(node.owner_vars)}
    my_slot = {v: s for s, v in enumerate(slot_vars)}
    canon = []
    for kind, payload in node.checks:
        if kind == "conjunct":
            c = owner.conjuncts[payload]
            if c.var not in own_slot or not c.refs <= set(own_slot):
                problems.append(f"{here}: conjunct {payload} reads variables off the node")
                continue
            key = owner.conjunct_key(payload, own_slot)
            mine = [k for k, cc in enumerate(wp.conjuncts)
                    if cc.var in my_slot and cc.refs <= set(my_slot)
                    and wp.conjunct_key(k, my_slot) == key]
            if not mine:
                problems.append(f"{here}: applies owner conjunct {payload}, which "
                                f"{wp.name or 'the consumer'} does not have")
                continue
            applied_conj.update(mine)
            canon.append(("c", key))
        elif kind == "order":
            u, v = rename.get(payload[0]), rename.get(payload[1])
            if u is None or v is None or not _in_closure(pt, u, v):
                problems.append(f"{here}: applies an order {payload} the consumer lacks")
                continue
            applied_order.add((u, v))
            canon.append(("o", my_slot[u], my_slot[v]))
        else:
            problems.append(f"{here}: unknown check kind {kind!r}")
    if node.is_leaf:
        c = pt.vars.index(slot_vars[0])
        if node.kleene != pt.kleene[c]:
            problems.append(f"{here}: Kleene bounds {node.kleene} != {pt.kleene[c]}")
        mine = ("leaf", pt.leaf_keys[c])
        if node.key[:2] != mine:
            problems.append(f"{here}: leaf key differs from {slot_vars[0]}'s event type")
        return node.key
    la = plan.nodes[node.left].arity
    lk = _walk(plan, node.left, slot_vars[:la], wp, pt, patterns, where, problems,
               applied_conj, applied_order)
    rk = _walk(plan, node.right, slot_vars[la:], wp, pt, patterns, where, problems,
               applied_conj, applied_order)
    mine = ("join", lk, rk, sort_keys(canon))
    if node.key != mine:
        problems.append(f"{here}: node key differs from the consumer's key")
    return node.key
