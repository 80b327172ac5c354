"""Merge sharing (MOTTO's MST on SIGMOD'19 trees): a GlobalPlan from each pattern's own
best plan, with identical sub-trees across patterns made one node.

Every term's join tree (cep_planner's choice: order plans as left-deep trees) becomes
DagNodes; a node's key is its canonical sub-pattern -- the kind of window, the leaf's
DEFINE conjuncts or the children's keys plus the join's checks (SEQ order between slots,
cross-variable conjuncts) with the variables renamed to slot numbers. Conjuncts compare
as expression trees (positions ignored), never as SQL text. Equal keys are one node,
whose window is the largest of its consumers' (each root filters by its own window).
Conjuncts go to the lowest node binding every variable they read, as in the pattern's
own plan; late conjuncts and NOT checks stay with the pattern's own matcher.

This is the baseline the workload planner's searches (PREFIX / SA / TABU) improve on;
it is also what the tests and the benchmark run.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Hashable

from cepsql.algebra.expressions import BinaryOp, Expr
from cepsql.planning.plans import OrderPlan, TreeNode, left_deep_tree
from cepsql.sharing.global_plan import Binding, DagNode, GlobalPlan
from cepsql.planning.evaluator_choice import pattern_terms
from cepsql.compile.query_plan import BoundPlan, QueryPlan
from cepsql.sharing.support import dag_unsupported


def _split_and(expr: Expr) -> list[Expr]:
    if isinstance(expr, BinaryOp) and expr.op.upper() == "AND":
        return _split_and(expr.left) + _split_and(expr.right)
    return [expr]


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

    def __init__(self, index: int, query: QueryPlan, bound: BoundPlan):
        self.index = index
        self.config = bound.config
        self.spec = query.spec
        self.terms = pattern_terms(self.spec.pattern)
        self.trees = [left_deep_tree(p.order) if isinstance(p, OrderPlan) else p.root
                      for p in query.chosen_plans]
        c = self.config
        self.window = (0, None) if not c.window_kind else (c.window_kind, float(c.window_size))
        raw = [(var, conj) for var, cond in self.spec.defines.items()
               for conj in _split_and(cond)]
        labels = [c.labels[int(x)] for x in c.conj_label]
        # the conjuncts as plan_cep numbers them; None: keys unique to this pattern
        self.conjuncts = [e for _, e in raw] if [v for v, _ in raw] == labels else None

    def conj_key(self, c: int, names: dict[str, Hashable]) -> Hashable:
        if self.conjuncts is None:
            return ("pattern", self.index, c)
        return _freeze(_renamed(self.conjuncts[c], names, ("pattern", self.index)))


def merge_plan(queries: list[QueryPlan], bounds: list[BoundPlan]) -> GlobalPlan:
    """The merge-sharing GlobalPlan of the patterns (queries[i], bounds[i]); patterns
    the DAG cannot run (dag_unsupported) are listed as unshared."""
    plan = GlobalPlan(algorithm="MERGE")
    index: dict[Hashable, int] = {}
    for i, (query, bound) in enumerate(zip(queries, bounds)):
        if query.spec is None or dag_unsupported(query.spec) is not None or \
                not query.chosen_plans or bound.config.plan_nodes is None:
            plan.unshared.append(i)
            continue
        pat = _Pattern(i, query, bound)
        for t, (term, tree) in enumerate(zip(pat.terms, pat.trees)):
            root, slot_vars = _add_tree(plan, index, pat, term, tree)
            plan.bindings.append(Binding(pattern=i, root=root, slot_vars=slot_vars, term=t))
    return plan


def _add_tree(plan: GlobalPlan, index: dict, pat: _Pattern, term, tree: TreeNode
              ) -> tuple[int, tuple[str, ...]]:
    c = pat.config
    names = [n for n, _, _ in term.comps]
    comp_of = {n: k for k, n in enumerate(names)}
    after = term.after_masks()
    nodes = list(_post_order(tree))
    # each non-late conjunct of the term's variables at the lowest node covering it
    placed: dict[int, list[int]] = {id(n): [] for n in nodes}
    for k, (lab, mask, late) in enumerate(zip(c.conj_label, c.conj_mask, c.conj_late)):
        var = c.labels[int(lab)]
        if var not in comp_of or late:
            continue
        need = 1 << comp_of[var]
        for j, other in enumerate(c.labels):
            if int(mask) >> j & 1 and other in comp_of:
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
            + [("conjunct", slots[c.labels[int(c.conj_label[k])]], pat.conj_key(k, canon))
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
