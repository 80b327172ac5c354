"""``plan_workload``: the global plan of a workload of pattern views.

Algorithms (``cepsql.sharing.algorithm``; unset, AUTO or BEST = choose): ``NONE`` (every disjunct its own best plan,
nothing shared, not even event-type leaves), ``PREFIX`` (multi-pattern trees: left-deep
local plans sharing prefixes, SIGMOD 2019 section 3, searched by simulated annealing),
``SA`` and ``TABU`` (multi-pattern multitrees, arbitrary subtree sharing, section 5).
A suffix picks the neighbourhood: ``:EDGE`` (default) or ``:VERTEXk`` (k >= 3), e.g.
``TABU:VERTEX4``. Unset (the default): SA and TABU with the edge neighbourhood, half the
budget each, the cheaper plan wins. Plans are priced with the single-pattern planner's
pairs weight (``cepsql.planner.accessCost``, keyword ``access``; dag.py).
``cepsql.sharing.seconds`` is the budget of the search (default 1 s); the multi-pattern graph and the disjuncts' own plans are built
before it and come on top (``GlobalPlan.seconds`` is the whole planning time). The same
seed and ``max_iterations`` give the same plan (iterations = neighbours evaluated).
"""
from __future__ import annotations

import re
import time

from cepsql.errors import CepAnalysisError
from cepsql.planning.options import conf_values, options_from_conf as planner_options_from_conf
from cepsql.sharing.dag import LocalPlan, WorkloadContext, sharing_model
from cepsql.sharing.global_plan import Binding, DagNode, GlobalPlan
from cepsql.sharing.graph import build_graph
from cepsql.sharing.patterns import WorkloadPattern, workload_pattern
from cepsql.sharing.search import Search, independent_plans, trivial_plans

__all__ = ["CONF_KEYS", "DEFAULT_SECONDS", "options_from_conf", "parse_algorithm",
           "patterns_from_plans", "plan_workload", "trivial_global_plan"]

DEFAULT_SECONDS = 1.0
#: Spark conf key -> plan_workload keyword
CONF_KEYS = {"cepsql.sharing.algorithm": "algorithm", "cepsql.sharing.seconds": "seconds",
             "cepsql.planner.accessCost": "access"}
_NAMES = ("NONE", "PREFIX", "SA", "TABU")


def parse_algorithm(text: str | None) -> tuple[str | None, int]:
    """(algorithm or None = choose, vertex k: 0 = edge neighbourhood)."""
    if text is None or text.strip().upper() in ("", "AUTO", "DEFAULT", "BEST"):
        return None, 0
    m = re.fullmatch(r"\s*(NONE|PREFIX|SA|TABU)\s*(?::\s*(EDGE|VERTEX(\d+)))?\s*",
                     text.upper())
    if m is None or (m.group(3) is not None and int(m.group(3)) < 2):
        raise CepAnalysisError(
            f"unknown cepsql.sharing.algorithm {text!r}: use one of {', '.join(_NAMES)}, "
            "optionally with :EDGE or :VERTEXk (k >= 2), e.g. SA:VERTEX4")
    k = int(m.group(3)) if m.group(3) else 0
    return m.group(1), (0 if k == 2 else k)


def options_from_conf(get) -> dict:
    """plan_workload keywords from conf lookups (``get(key) -> str | None``), checked."""
    return conf_values(get, CONF_KEYS, _conf_value)


def _conf_value(key: str, name: str, text: str):
    if name == "algorithm":
        parse_algorithm(text)
        return text
    if name == "access":   # the single-pattern planner's key: its checks
        return planner_options_from_conf({key: text}.get).access
    try:
        seconds = float(text)
    except ValueError:
        raise CepAnalysisError(f"{key} must be a number of seconds, got {text!r}") from None
    if not seconds > 0:
        raise CepAnalysisError(f"{key} must be a positive number")
    return seconds


def patterns_from_plans(plans: list, statistics=None,
                        names: list[str] | None = None) -> list[WorkloadPattern]:
    """WorkloadPatterns of compiled clauses (runtime QueryPlans: their ``spec`` has the
    schema's column spelling already); ``statistics`` as for workload_pattern."""
    out = []
    for i, plan in enumerate(plans):
        name = names[i] if names else ""
        spec = getattr(plan, "spec", None)
        if spec is None:
            out.append(WorkloadPattern(name, None, False, "no MATCH_RECOGNIZE clause"))
        else:
            out.append(workload_pattern(spec, None, statistics, name=name))
    return out


def plan_workload(patterns: list[WorkloadPattern], *, algorithm: str | None = None,
                  seconds: float | None = DEFAULT_SECONDS, seed: int = 0,
                  max_iterations: int | None = None,
                  access: float | None = None) -> GlobalPlan:
    """The global plan (see global_plan.py) of ``patterns`` (a Binding's ``pattern`` is
    an index into this list). ``algorithm`` None / AUTO / BEST = choose; ``seconds``
    None = DEFAULT_SECONDS; ``access`` None = the planner's default pairs weight."""
    name, k = parse_algorithm(algorithm)
    seconds = DEFAULT_SECONDS if seconds is None else seconds
    if not seconds > 0:
        raise CepAnalysisError("cepsql.sharing.seconds must be a positive number")
    started = time.perf_counter()
    ctx = WorkloadContext(patterns, sharing_model(access))
    unshared = [i for i, p in enumerate(patterns) if not p.shareable]
    own = independent_plans(ctx)
    independent = sum(ctx.local_cost(t, p) for t, p in enumerate(own))
    trivial = sum(ctx.local_cost(t, p) for t, p in enumerate(trivial_plans(ctx)))
    suffix = f":VERTEX{k}" if k else ":EDGE"
    if name == "NONE":
        plan = _materialize(ctx, own, True)
        plan.algorithm, plan.cost = "NONE", independent
    else:
        graph = build_graph(ctx)
        left = seconds
        runs = {}
        if name == "PREFIX":
            s = Search(ctx, graph, independent_plans(ctx, order_only=True), order_only=True,
                       vertex_k=k, seed=seed)
            runs["PREFIX" + suffix] = s.annealing(left, max_iterations)
        for meta in ("SA", "TABU"):
            if name not in (meta, None):
                continue
            share = left if name else left / 2
            iters = max_iterations if name or max_iterations is None else max_iterations // 2
            s = Search(ctx, graph, own, vertex_k=k, seed=seed)
            runs[meta + suffix] = (s.annealing if meta == "SA" else s.tabu)(share, iters)
        chosen = min(runs, key=lambda r: (runs[r].cost, r))
        result = runs[chosen]
        plan = _materialize(ctx, result.plans, False)
        plan.algorithm, plan.cost = chosen, result.cost
        plan.iterations = sum(r.iterations for r in runs.values())
        plan.graph_edges = len(graph.pairs)
        plan.alternatives = {r: v.cost for r, v in runs.items()}
    plan.unshared = unshared
    plan.independent_cost, plan.trivial_cost = independent, trivial
    plan.seconds = time.perf_counter() - started
    return plan


def trivial_global_plan(patterns: list[WorkloadPattern],
                        access: float | None = None) -> GlobalPlan:
    """The baseline of the paper's experiments: every disjunct in its written order, no
    reordering and nothing shared (not even event-type leaves)."""
    started = time.perf_counter()
    ctx = WorkloadContext(patterns, sharing_model(access))
    plans = trivial_plans(ctx)
    plan = _materialize(ctx, plans, True)
    plan.algorithm = "TRIVIAL"
    plan.cost = plan.trivial_cost = sum(ctx.local_cost(t, p) for t, p in enumerate(plans))
    plan.unshared = [i for i, p in enumerate(patterns) if not p.shareable]
    plan.seconds = time.perf_counter() - started
    return plan


def _materialize(ctx: WorkloadContext, plans: list[LocalPlan], private: bool) -> GlobalPlan:
    """The DAG of distinct node keys (children first) and one Binding per disjunct."""
    index: dict[int, int] = {}
    order: list[int] = []
    windows: dict[int, list] = {}
    for t, plan in enumerate(plans):
        for nid, _ in ctx.nodes(t, plan, private):
            if nid not in index:
                index[nid] = len(order)
                order.append(nid)
            windows.setdefault(nid, []).append(ctx.pattern_of(t).window)
    nested: dict[int, object] = {}

    def key(nid: int):
        got = nested.get(nid)
        if got is None:
            k = ctx.keys[nid]
            got = nested[nid] = (k if k[0] == "leaf" else
                                 ("join", key(k[1]), key(k[2]), k[3]))
        return got
    nodes = []
    for nid in order:
        inf = ctx.info[nid]
        p, _ = ctx.term_ids[inf.term]
        pt = ctx.terms[inf.term]
        ws = windows[nid]
        window = None if any(w is None for w in ws) else max(ws)
        checks = tuple((kind, (pt.vars[x[0]], pt.vars[x[1]]) if kind == "order" else x)
                       for kind, x in inf.checks)
        kl = pt.kleene[inf.slots[0]] if inf.left < 0 else None
        nodes.append(DagNode(
            key=key(nid), arity=len(inf.slots),
            left=index[inf.left] if inf.left >= 0 else -1,
            right=index[inf.right] if inf.right >= 0 else -1,
            window=window, window_kind=ctx.patterns[p].window_kind, kleene=kl, owner=p,
            owner_vars=tuple(pt.vars[c] for c in inf.slots), checks=checks))
    bindings = []
    for t, plan in enumerate(plans):
        p, term = ctx.term_ids[t]
        pt, wp = ctx.terms[t], ctx.patterns[p]
        root_id, slots = ctx._walk(t, plan, plan.tree, private, [])
        extra = list(pt.root_checks)
        if plan.node_relaxed(plan.tree.mask):
            extra += [("order", (pt.vars[i], pt.vars[j]))
                      for i, j in sorted(pt.orders_within(plan.tree.mask))]
        root = nodes[index[root_id]]
        if wp.window is not None and (root.window is None or root.window > wp.window):
            extra.append(("window", None))
        bindings.append(Binding(p, index[root_id], tuple(pt.vars[c] for c in slots),
                                tuple(extra), term))
    return GlobalPlan(nodes=nodes, bindings=bindings)
