"""EXPLAIN WORKLOAD: the global plan as text and as an SVG drawing (plan_svg's layout)."""
from __future__ import annotations

from cepsql.algebra.expressions import AggregateValue, BinaryOp, ColumnRef, Literal, RowValue
from cepsql.explain.svg import Box, dag_svg
from cepsql.exprs.spark_sql import user_literal
from cepsql.sharing.global_plan import GlobalPlan
from cepsql.sharing.patterns import WorkloadPattern

__all__ = ["consumer_counts", "describe_workload", "node_patterns", "workload_svg"]

#: EXPLAIN lists at most this many nodes / patterns (big workloads are summarized)
LIST_LIMIT = 40


def node_patterns(plan: GlobalPlan) -> list[set[int]]:
    """Per node, the patterns whose roots' subtrees hold it."""
    out: list[set[int]] = [set() for _ in plan.nodes]
    for b in plan.bindings:
        stack = [b.root]
        while stack:
            i = stack.pop()
            if b.pattern in out[i]:
                continue
            out[i].add(b.pattern)
            n = plan.nodes[i]
            if not n.is_leaf:
                stack += [n.left, n.right]
    return out


def consumer_counts(plan: GlobalPlan) -> list[int]:
    """Per node, how many nodes and roots read it (GlobalPlan.consumers, in one pass)."""
    out = [0] * len(plan.nodes)
    for n in plan.nodes:
        if not n.is_leaf:
            out[n.left] += 1
            out[n.right] += 1
    for b in plan.bindings:
        out[b.root] += 1
    return out


def _name(patterns: list[WorkloadPattern], p: int) -> str:
    return patterns[p].name or f"pattern {p}"


def _expr_text(e, own: str) -> str:
    if isinstance(e, BinaryOp):
        return f"{_expr_text(e.left, own)} {e.op} {_expr_text(e.right, own)}"
    if isinstance(e, RowValue):
        var = e.ref.var or own
        inner = e.value.column if isinstance(e.value, ColumnRef) else "expr"
        text = f"{var}.{inner}"
        if e.ref.logical_offset or e.ref.physical_offset:
            text += f"[{e.ref.logical}-{e.ref.logical_offset}{e.ref.physical_offset:+d}]"
        return text
    if isinstance(e, Literal):
        return user_literal(e)
    if isinstance(e, AggregateValue):
        by = f", {e.by}" if e.by else ""
        by += f", {e.index}" if e.func == "ELEMENT" else ""
        distinct = "DISTINCT " if e.distinct else ""
        return (f"{e.func.lower()}({distinct}{e.var or ''}"
                f"{'.' + e.column if e.column else ''}{by})")
    return type(e).__name__


def _node_label(plan: GlobalPlan, i: int, patterns) -> str:
    n = plan.nodes[i]
    owner = patterns[n.owner]
    if n.is_leaf:
        var = n.owner_vars[0]
        conds = [_expr_text(owner.conjuncts[k].expr, var) for kind, k in n.checks
                 if kind == "conjunct"]
        kl = ""
        if n.kleene is not None:
            lo, hi = n.kleene
            kl = f" KL{{{lo},{'' if hi < 0 else hi}}}"
        return f"{var}{kl}: " + (" AND ".join(conds) or "any row")
    return "JOIN(" + ", ".join(n.owner_vars) + ")"


def _check_text(plan: GlobalPlan, i: int, patterns) -> str:
    n = plan.nodes[i]
    owner = patterns[n.owner]
    parts = []
    for kind, x in n.checks:
        if kind == "order":
            parts.append(f"{x[0]} before {x[1]}")
        elif not n.is_leaf:
            c = owner.conjuncts[x]
            parts.append(_expr_text(c.expr, c.var))
    return "; ".join(parts)


def _window_text(n, kind: int) -> str:
    if n.window is None:
        return ""
    return f" window {n.window:g} rows" if kind == 1 else f" window {n.window / 1e6:g} s"


def describe_workload(plan: GlobalPlan, patterns: list[WorkloadPattern]) -> str:
    """The multi-pattern graph, the DAG (shared nodes marked), costs and the search."""
    users = node_patterns(plan)
    reads = consumer_counts(plan)
    shared = [i for i in range(len(plan.nodes)) if reads[i] > 1]
    shared_joins = [i for i in shared if not plan.nodes[i].is_leaf]
    lines = [f"workload: {len(patterns)} pattern views, "
             f"{len(patterns) - len(plan.unshared)} planned together "
             f"({len(plan.bindings)} disjuncts), {len(plan.unshared)} run on their own "
             "(same scan, shuffle and sort)"]
    for p, wp in enumerate(patterns[:LIST_LIMIT]):
        text = wp.spec.pattern_text if wp.spec is not None else ""
        state = "shared" if wp.shareable else f"unshared: {wp.reason}"
        lines.append(f"  {_name(patterns, p)}: {text}  [{state}]")
    if len(patterns) > LIST_LIMIT:
        lines.append(f"  ... {len(patterns) - LIST_LIMIT} more")
    lines.append(f"multi-pattern graph: {plan.graph_edges} edges (pairs of disjuncts with a "
                 "common sub-pattern of two or more variables)")
    lines.append(f"shared sub-patterns: {len(shared_joins)} joins and "
                 f"{len(shared) - len(shared_joins)} event types read by several consumers")
    for i in sorted(shared_joins, key=lambda i: (-len(users[i]), i))[:LIST_LIMIT]:
        names = ", ".join(_name(patterns, p) for p in sorted(users[i]))
        lines.append(f"  #{i} {_node_label(plan, i, patterns)} <- {names}")
    refilter = [b for b in plan.bindings if ("window", None) in b.extra_checks]
    if refilter:
        lines.append(f"window mark-points: {len(refilter)} roots read nodes kept for a "
                     "larger window and re-filter by their own")
    relaxed = [b for b in plan.bindings if any(k == "order" for k, _ in b.extra_checks)]
    if relaxed:
        lines.append(f"operator transformation: {len(relaxed)} SEQ roots read an AND node "
                     "and check their own order")
    lines.append(f"global plan (DAG, children first, * = shared, {len(plan.nodes)} nodes):")
    for i, n in enumerate(plan.nodes[:LIST_LIMIT * 2]):
        mark = "*" if reads[i] > 1 else " "
        kids = "" if n.is_leaf else f" = #{n.left} x #{n.right}"
        checks = _check_text(plan, i, patterns)
        lines.append(f"  {mark}#{i} {_node_label(plan, i, patterns)}{kids}"
                     f"{_window_text(n, n.window_kind)}" + (f"  [{checks}]" if checks else ""))
    if len(plan.nodes) > LIST_LIMIT * 2:
        lines.append(f"  ... {len(plan.nodes) - LIST_LIMIT * 2} more nodes")
    lines.append("roots:")
    for b in plan.bindings[:LIST_LIMIT]:
        extra = ", ".join(k if v is None else f"{k} {v}" for k, v in b.extra_checks)
        lines.append(f"  {_name(patterns, b.pattern)}"
                     + (f" (disjunct {b.term + 1})" if b.term else "")
                     + f" <- #{b.root} ({', '.join(b.slot_vars)})"
                     + (f" then {extra}" if extra else ""))
    if len(plan.bindings) > LIST_LIMIT:
        lines.append(f"  ... {len(plan.bindings) - LIST_LIMIT} more")

    def ratio(x: float) -> str:
        return f" (x{x / plan.cost:.3g} the global plan)" if plan.cost > 0 else ""
    lines.append("cost (Cost_tree over distinct nodes, a shared node once):")
    lines.append(f"  global plan       {plan.cost:.6g}")
    lines.append(f"  independent plans {plan.independent_cost:.6g}{ratio(plan.independent_cost)}")
    lines.append(f"  trivial plans     {plan.trivial_cost:.6g}{ratio(plan.trivial_cost)}")
    tried = ", ".join(f"{k} {v:.6g}" for k, v in plan.alternatives.items())
    lines.append(f"search: {plan.algorithm}, {plan.iterations} iterations, "
                 f"{plan.seconds:.3f} s" + (f" (tried: {tried})" if tried else ""))
    return "\n".join(lines)


def workload_svg(plan: GlobalPlan, patterns: list[WorkloadPattern]) -> str:
    """The global plan's DAG: one box per pattern root on top, each node one row below
    its deepest consumer, shared nodes highlighted."""
    reads = consumer_counts(plan)
    boxes = []
    for i, n in enumerate(plan.nodes):
        kids = [] if n.is_leaf else [n.left, n.right]
        boxes.append(Box(_node_label(plan, i, patterns), kids, reads[i] > 1,
                         _check_text(plan, i, patterns)[:60]))
    for b in plan.bindings:
        kinds: dict[str, int] = {}
        for k, _ in b.extra_checks:
            kinds[k] = kinds.get(k, 0) + 1
        extra = ", ".join(k if n == 1 else f"{n} {k}s" for k, n in kinds.items())
        boxes.append(Box(_name(patterns, b.pattern), [b.root], False, extra))
    title = (f"workload: {plan.algorithm} cost {plan.cost:.4g} "
             f"(independent {plan.independent_cost:.4g}, trivial {plan.trivial_cost:.4g})")
    return dag_svg(boxes, title)
