"""Plans as pictures: EXPLAIN FORMAT SVG and ``spark.cep.explain(..., file=)``.

A plan is drawn as a tidy layered tree or DAG (roots on top, each node one row below its
parent; cepsql/explain/layout.py): the chosen tree or order plan of a planned CEP clause,
otherwise the pattern's operator tree; the sharing stage draws a workload's global plan
with the same function (shared nodes marked). The SVG is written by hand (no graphviz, no
matplotlib needed) and every label is escaped.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from html import escape

from cepsql.algebra.pattern import (Alternation, Anchor, Concat, Empty, Exclusion, Negation,
                                    Permute, Quantified, Var)
from cepsql.explain.analyze import analyze_labels
from cepsql.explain.layout import tidy_layout

__all__ = ["Box", "clauses_svg", "dag_svg", "pattern_boxes", "plan_boxes", "plan_svg"]

_W, _H, _GAP_X, _GAP_Y, _PAD = 150, 34, 24, 46, 16


@dataclass
class Box:
    """One drawn node: its label, the boxes it reads (drawn below it), and whether it
    is shared by several consumers (drawn highlighted)."""
    label: str
    children: list[int] = field(default_factory=list)
    shared: bool = False
    note: str = ""


def dag_svg(boxes: list[Box], title: str = "") -> str:
    """A tidy layered drawing (cepsql/explain/layout.py): roots on top, every box one
    row below the parent it hangs from, no two boxes overlapping."""
    placed = tidy_layout([b.children for b in boxes])
    layers = max(placed.level, default=0) + 1
    slots = max(placed.slot, default=0.0) + 1
    width = max(2 * _PAD + slots * _W + (slots - 1) * _GAP_X,
                2 * _PAD + 7 * len(title))   # the bold title fits too
    top = _PAD + (24 if title else 0)
    total_h = top + layers * _H + (layers - 1) * _GAP_Y + _PAD + 14
    left = (width - (slots * _W + (slots - 1) * _GAP_X)) / 2
    pos = {i: (left + s * (_W + _GAP_X), top + lv * (_H + _GAP_Y))
           for i, (lv, s) in enumerate(zip(placed.level, placed.slot))}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
           f'height="{total_h:.0f}" font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>']
    if title:
        out.append(f'<text x="{_PAD}" y="{_PAD + 10}" font-weight="bold">{escape(title)}</text>')
    for i, b in enumerate(boxes):
        x, y = pos[i]
        for c in b.children:
            cx, cy = pos[c]
            out.append(f'<line x1="{x + _W / 2:.1f}" y1="{y + _H:.1f}" x2="{cx + _W / 2:.1f}" '
                       f'y2="{cy:.1f}" stroke="#555"/>')
    for i, b in enumerate(boxes):
        x, y = pos[i]
        fill, stroke = ("#ffe9b3", "#c98a00") if b.shared else ("#eef2ff", "#3f51b5")
        out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{_W}" height="{_H}" rx="6" '
                   f'fill="{fill}" stroke="{stroke}"/>')
        label = b.label if len(b.label) <= 22 else b.label[:21] + "…"
        out.append(f'<text x="{x + _W / 2:.1f}" y="{y + (14 if b.note else 21):.1f}" '
                   f'text-anchor="middle">{escape(label)}</text>')
        if b.note:
            out.append(f'<text x="{x + _W / 2:.1f}" y="{y + 28:.1f}" text-anchor="middle" '
                       f'font-size="10" fill="#555">{escape(b.note)}</text>')
        out.append(f'<title>{escape(b.label)}{" — " + escape(b.note) if b.note else ""}'
                   f'{" (shared)" if b.shared else ""}</title>')
    if any(b.shared for b in boxes):
        out.append(f'<text x="{_PAD}" y="{total_h - 6:.0f}" font-size="10" fill="#555">'
                   'highlighted: shared by several patterns</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def pattern_boxes(node, boxes: list[Box] | None = None) -> list[Box]:
    """The pattern's operator tree (for clauses evaluated in order / by the regex VM)."""
    boxes = [] if boxes is None else boxes
    kids: list = []
    if isinstance(node, Var):
        label = node.name
    elif isinstance(node, Quantified):
        hi = "" if node.max is None else node.max
        label, kids = f"KL{{{node.min},{hi}}}" + ("?" if not node.greedy else ""), [node.child]
    elif isinstance(node, Negation):
        label, kids = "NOT", [node.child]
    elif isinstance(node, Exclusion):
        label, kids = "EXCLUDE {- -}", [node.child]
    elif isinstance(node, Concat):
        label, kids = "SEQ", list(node.items)
    elif isinstance(node, Alternation):
        label, kids = "OR", list(node.items)
    elif isinstance(node, Permute):
        label, kids = "PERMUTE / AND", list(node.items)
    elif isinstance(node, Anchor):
        label = "^" if getattr(node, "kind", "") in ("start", "^") else "$"
    elif isinstance(node, Empty):
        label = "()"
    else:
        label = type(node).__name__
    children = [len(pattern_boxes(k, boxes)) - 1 for k in kids]
    boxes.append(Box(label, children))
    return boxes


def plan_boxes(plans: list) -> list[Box]:
    """The chosen plans of a planned CEP clause (one per disjunct): tree plans as their
    join trees, order plans as left-deep chains in evaluation order."""
    boxes: list[Box] = []
    for plan in plans:
        labels = plan.query.labels if plan.query is not None else None

        def name(leaf: int) -> str:
            return labels[leaf] if labels else f"R{leaf}"
        if plan.kind == "tree":
            index: dict[int, int] = {}
            for tn in plan.root.nodes():
                if tn.is_leaf:
                    boxes.append(Box(name(tn.leaf)))
                else:
                    boxes.append(Box("JOIN", [index[id(tn.left)], index[id(tn.right)]]))
                index[id(tn)] = len(boxes) - 1
            boxes[-1].note = f"{plan.algorithm} cost {plan.cost:.4g}"
        else:
            prev = None
            for k, rel in enumerate(plan.order):
                boxes.append(Box(name(rel)))
                leaf = len(boxes) - 1
                if prev is not None:
                    boxes.append(Box(f"step {k + 1}", [prev, leaf]))
                prev = len(boxes) - 1
            boxes[-1].note = f"{plan.algorithm} cost {plan.cost:.4g}"
    return boxes


def plan_svg(spec, plan, stats=None) -> str:
    """SVG of one clause's plan: the chosen CEP plans when the clause is planned, else
    the pattern's operator tree. With stats (a run's ClauseStatistics: EXPLAIN ANALYZE)
    each variable's box shows the rows its single-row DEFINE part held on, the root the
    run's matches, and the title the rows in and out and the time."""
    plans = list(getattr(plan, "chosen_plans", None) or [])
    if plans:
        boxes, title = plan_boxes(plans), "plan: " + spec.pattern_text
    else:
        boxes, title = pattern_boxes(spec.pattern), "pattern: " + (spec.pattern_text or "")
    if stats is not None:
        title = _measured(boxes, title, stats)
    return dag_svg(boxes, title)


def _measured(boxes: list[Box], title: str, stats) -> str:
    """Write a run's figures on the boxes; returns the title with its totals."""
    for box in boxes:
        held = stats.variable_rows.get(box.label)
        if held is not None:
            box.note = "; ".join(p for p in (box.note, f"{held:,} rows") if p)
    matches = stats.counters.get("matches_output")
    if boxes and matches is not None:
        boxes[-1].note = "; ".join(p for p in (boxes[-1].note, f"{matches:,} matches") if p)
    return f"{title} | " + ", ".join(analyze_labels(stats))


def clauses_svg(recorded: list[tuple[object, object]], analyzed: list | None = None,
                file: str | None = None) -> str:
    """One SVG for a statement's clauses ((spec, plan) pairs), stacked vertically;
    ``analyzed``: each clause's ClauseStatistics (EXPLAIN ANALYZE), drawn on its plan;
    ``file``: also written there (EXPLAIN's ``file=`` in-process and on Spark)."""
    drawing = _stacked(recorded, analyzed)
    if file is not None:
        with open(file, "w", encoding="utf-8") as handle:
            handle.write(drawing)
    return drawing


def _stacked(recorded: list[tuple[object, object]], analyzed: list | None) -> str:
    analyzed = list(analyzed or []) + [None] * len(recorded)
    parts = [plan_svg(spec, plan, stats)
             for (spec, plan), stats in zip(recorded, analyzed)]
    if not parts:
        return dag_svg([Box("no MATCH_RECOGNIZE clause")], "plan")
    if len(parts) == 1:
        return parts[0]
    sizes = [tuple(float(v) for v in re.search(r'width="([\d.]+)" height="([\d.]+)"', p).groups())
             for p in parts]
    width, y = max(w for w, _ in sizes), 0.0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
           f'height="{sum(h for _, h in sizes):.0f}">']
    for part, (_, h) in zip(parts, sizes):
        out.append(f'<g transform="translate(0,{y:.0f})">{part.split(">", 1)[1].rsplit("</svg>", 1)[0]}</g>')
        y += h
    out.append("</svg>")
    return "\n".join(out) + "\n"
