"""Merge sharing (MOTTO's MST on SIGMOD'19 trees): a GlobalPlan from each pattern's own
best plan, with identical sub-trees across patterns made one node.

Every term's join tree (evaluator_choice's plan: order plans as left-deep trees) becomes
DagNodes; a node's key is its canonical sub-pattern -- the kind of window, the leaf's
DEFINE conjuncts or the children's keys plus the join's checks (SEQ order between slots,
cross-variable conjuncts) with the variables renamed to slot numbers. Conjuncts compare
as expression trees (positions ignored), never as SQL text. Equal keys are one node,
whose window is the largest of its consumers' (each root filters by its own window).
Conjuncts go to the lowest node binding every variable they read, as in the pattern's
own plan; late conjuncts and NOT checks stay with the pattern's own matcher.

This is the baseline the workload planner's searches (PREFIX / SA / TABU) improve on;
it is also what the tests and the benchmark run. It reads of each compiled clause only
its spec and chosen plans (``PlannedClause``; a QueryPlan is one): the conjuncts are
numbered from the spec as the compiler numbers them (analyze.cep_conjuncts).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from typing import Protocol

from cepsql.algebra.expressions import Expr
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.analyze.conjuncts import split_conjuncts
from cepsql.planning.evaluator_choice import pattern_terms
from cepsql.planning.plans import OrderPlan, TreePlan
from cepsql.planning.trees import TreeNode, left_deep_tree
from cepsql.sharing.global_plan import Binding, DagNode, GlobalPlan
from cepsql.sharing.patterns import pattern_conjuncts, window_of
from cepsql.sharing.support import dag_unsupported

__all__ = ["PlannedClause", "merge_plan"]


class PlannedClause(Protocol):
    """What merge sharing reads of one compiled clause (compile's QueryPlan has both)."""
    spec: MatchRecognizeSpec | None
    chosen_plans: tuple[OrderPlan | TreePlan, ...]   # per disjunct; () when not planned


def _renamed(value, names: dict[str, Hashable], alien: Hashable):
    """value with every variable name replaced by names[var] (a name outside the node
    by (alien, name): never equal across patterns)."""
    if isinstance(value, tuple):
        return tuple(_renamed(v, names, alien) for v in value)
    if not isinstance(value, Expr) and not dataclasses.is_dataclass(value):
        return value
    if isinstance(value, type):
        return value
    changes = {}
    for f in dataclasses.fields(value):
        v = getattr(value, f.name)
        if f.name == "var" and isinstance(v, str):
            changes[f.name] = names.get(v, (alien, v))
        elif isinstance(v, (tuple, Expr)) or dataclasses.is_dataclass(v):
            changes[f.name] = _renamed(v, names, alien)
    return dataclasses.replace(value, **changes) if changes else value


def _freeze(value) -> Hashable:
    """A hashable form of an expression tree (dicts inside become sorted tuples)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__,) + tuple(
            (f.name, _freeze(getattr(value, f.name))) for f in dataclasses.fields(value)
            if f.compare)
    if isinstance(value, (tuple, list)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


class _Pattern:
    """What merge sharing needs of one planned pattern."""

    def __init__(self, index: int, query: PlannedClause):
        self.index = index
        self.spec = query.spec
        self.terms = pattern_terms(self.spec.pattern)
        self.trees = [left_deep_tree(p.order) if isinstance(p, OrderPlan) else p.root
                      for p in query.chosen_plans]
        self.window = window_of(self.spec)
        # (variable, other variables read, late) per conjunct, as plan_cep numbers them
        self.scopes = [(c.var, c.refs, c.late) for c in pattern_conjuncts(self.spec)[0]]
        raw = [(var, conj) for var, cond in self.spec.defines.items()
               for conj in split_conjuncts(cond)]
        labels = [var for var, _, _ in self.scopes]
        # the conjuncts' unbound expressions; None: keys unique to this pattern
        self.conjuncts = [e for _, e in raw] if [v for v, _ in raw] == labels else None

    def conj_key(self, c: int, names: dict[str, Hashable]) -> Hashable:
        if self.conjuncts is None:
            return ("pattern", self.index, c)
        return _freeze(_renamed(self.conjuncts[c], names, ("pattern", self.index)))


def merge_plan(queries: Sequence[PlannedClause]) -> GlobalPlan:
    """The merge-sharing GlobalPlan of the compiled patterns; patterns the DAG cannot
    run (dag_unsupported) or not planned (no chosen plans) are listed as unshared."""
    plan = GlobalPlan(algorithm="MERGE")
    index: dict[Hashable, int] = {}
    for i, query in enumerate(queries):
        if query.spec is None or dag_unsupported(query.spec) is not None or \
                not query.chosen_plans:
            plan.unshared.append(i)
            continue
        pat = _Pattern(i, query)
        for t, (term, tree) in enumerate(zip(pat.terms, pat.trees)):
            root, slot_vars = _add_tree(plan, index, pat, term, tree)
            plan.bindings.append(Binding(pattern=i, root=root, slot_vars=slot_vars, term=t))
    return plan


def _add_tree(plan: GlobalPlan, index: dict, pat: _Pattern, term, tree: TreeNode
              ) -> tuple[int, tuple[str, ...]]:
    names = [n for n, _, _ in term.comps]
    comp_of = {n: k for k, n in enumerate(names)}
    after = term.after_masks()
    nodes = list(_post_order(tree))
    # each non-late conjunct of the term's variables at the lowest node covering it
    placed: dict[int, list[int]] = {id(n): [] for n in nodes}
    for k, (var, refs, late) in enumerate(pat.scopes):
        if var not in comp_of or late:
            continue
        need = 1 << comp_of[var]
        for other in refs:
            if other in comp_of:
                need |= 1 << comp_of[other]
        lowest = min((n for n in nodes if n.mask & need == need),
                     key=lambda n: bin(n.mask).count("1"))
        placed[id(lowest)].append(k)
    built: dict[int, tuple[int, tuple[str, ...]]] = {}
    for tn in nodes:
        kleene = None
        if tn.is_leaf:
            slot_vars = (names[tn.leaf],)
            left = right = -1
            orders = []
            _, lo, hi = term.comps[tn.leaf]
            kleene = None if (lo, hi) == (1, 1) else (lo, hi)
        else:
            left, lvars = built[id(tn.left)]
            right, rvars = built[id(tn.right)]
            slot_vars = lvars + rvars
            orders = []
            for a in lvars:
                for b in rvars:
                    ca, cb = comp_of[a], comp_of[b]
                    if after[ca] >> cb & 1:
                        orders.append((a, b))
                    elif after[cb] >> ca & 1:
                        orders.append((b, a))
        slots = {v: k for k, v in enumerate(slot_vars)}
        canon = {v: f"${k}" for k, v in enumerate(slot_vars)}
        conjs = placed[id(tn)]
        check_key = tuple(sorted(
            [("order", slots[a], slots[b]) for a, b in orders]
            + [("conjunct", slots[pat.scopes[k][0]], pat.conj_key(k, canon))
               for k in conjs], key=repr))
        key = ("leaf" if tn.is_leaf else "join", pat.window[0], kleene,
               plan.nodes[left].key if left >= 0 else None,
               plan.nodes[right].key if right >= 0 else None, check_key)
        found = index.get(key)
        if found is None:
            found = len(plan.nodes)
            index[key] = found
            checks = tuple([("order", o) for o in orders] + [("conjunct", k) for k in conjs])
            plan.nodes.append(DagNode(key=key, arity=len(slot_vars), left=left, right=right,
                                      window=pat.window[1], window_kind=pat.window[0],
                                      kleene=kleene,
                                      owner=pat.index, owner_vars=slot_vars, checks=checks))
        else:
            node = plan.nodes[found]
            if node.window is not None and pat.window[1] is not None and \
                    pat.window[1] > node.window:
                plan.nodes[found] = dataclasses.replace(node, window=pat.window[1])
        built[id(tn)] = (found, slot_vars)
    return built[id(tree)]


def _post_order(tree: TreeNode):
    if not tree.is_leaf:
        yield from _post_order(tree.left)
        yield from _post_order(tree.right)
    yield tree
