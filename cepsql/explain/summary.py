"""A plain-language summary that EXPLAIN prints before its expert detail.

Why: the detailed EXPLAIN (bytecode, plan trees, cost tables) answers an expert's
questions; a newcomer first wants to know what is matched, how the work is split across
cores, which plan was chosen and why, and what it is expected to cost. Everything here is
derived from the planned clause (its spec, its partitioning and the planner's own lines),
so the summary cannot disagree with the detail below it.
"""
from __future__ import annotations

import re

from cepsql.algebra.pattern import pattern_to_text
from cepsql.explain.clause import explain_clause
from cepsql.exprs.spark_sql import to_spark_sql

_STRATEGY = {
    "STRICT_CONTIGUITY": "the matched rows must follow each other in the whole stream",
    "PARTITION_CONTIGUITY": "the matched rows must follow each other within the partition",
    "SKIP_TILL_NEXT_MATCH": "rows that cannot extend a match are skipped; each match takes "
                            "the next row that fits",
    "SKIP_TILL_ANY_MATCH": "rows in between are skipped; every combination of rows that fits "
                           "is a match",
}


def summarize(spec, plan) -> str:
    """Four short paragraphs: what, how split, which plan and why, estimated cost."""
    detail = explain_clause(plan)   # the expert detail the summary is taken from
    lines = ["In short:"]
    lines.append("  matches   " + _what(spec))
    lines.append("  cores     " + _split(spec, plan, detail))
    rows = _rows(plan)
    if rows:
        lines.append("  rows      " + rows)
    how = _how(spec, detail)
    if how:
        lines.append("  plan      " + how)
    cost = _cost(detail)
    if cost:
        lines.append("  cost      " + cost)
    return "\n".join(lines)


def _what(spec) -> str:
    pattern = spec.pattern_text or pattern_to_text(spec.pattern)
    order = ", ".join(_text(k.expr) for k in spec.order_by) or "input order"
    text = f"PATTERN ({pattern}) over rows in {order} order"
    if spec.strategy is None:
        text += ", contiguous rows with regular-expression preference (SQL:2016)"
    else:
        text += f"; {_STRATEGY.get(spec.strategy, spec.strategy)}"
    if spec.window is not None:
        size = spec.window.size
        text += (f"; a match spans at most {size:g} rows" if spec.window.kind == "rows"
                 else f"; a match lasts at most {size / 1e6:g} seconds of "
                 f"{_text(spec.order_by[0].expr)}" if spec.order_by else "")
    per = "one row per match" if spec.rows_per_match == "ONE" else "every matched row"
    return f"{text}; output: {per}"


def _text(expr) -> str:
    return to_spark_sql(expr).replace("`", "")


def _split(spec, plan, explain: str) -> str:
    written = [k.name for k in spec.partition_by]
    used = list(plan.partition_columns or [])
    if written:
        return (f"one independent group per value of {', '.join(written)}, spread over all "
                "cores (Spark partitions)")
    if "SKIP PAST LAST ROW chains across slices" in explain:
        return ("no PARTITION BY: the input is read in time order, each input partition is a "
                "slice (no shuffle); where one match ends decides where the next search "
                "starts, so the driver first finds where that chain enters each slice from "
                "the rows around its start, and each slice searches from there")
    if "Time slicing: an ordered scan" in explain:
        return ("no PARTITION BY: the input is read in time order, each input partition is a "
                "time slice (no shuffle) that also reads the window's rows of its neighbours; "
                "each match is output once, by the slice of its first row")
    if "Time slicing:" in explain:
        return ("no PARTITION BY: the stream is cut into time slices that overlap by the "
                "window (a fixed time grid spread over the tasks); each match is output once, by "
                "the slice of its first row")
    if used:
        return (f"no PARTITION BY, but every variable is linked by equality on "
                f"{', '.join(used)}, so the groups of those values run on all cores")
    reason = re.search(r"parallelism:\s+one task: (.*?)(?:, so |$)", explain, re.M)
    if reason:
        return f"one task: {reason.group(1)}"
    return "one task (no PARTITION BY and no key or window to split by)"


def _rows(plan) -> str:
    """Whether the relevance filter drops rows before the shuffle (CEP mode)."""
    if getattr(plan, "relevance_filter", None) is None:
        return ""
    return ("only rows some variable's single-row condition accepts are read past the "
            "scan (relevance filter); the others cannot change a match")


def _how(spec, explain: str) -> str:
    if spec.strategy is None:
        return "the regex VM tries every start row, keeping equivalent threads only once"
    evaluator = re.search(r"^evaluator:\s*(.*)$", explain, re.M)
    why = re.search(r"^\s+why:\s*(.*)$", explain, re.M)
    algorithm = re.search(r"^plan \((\w+),", explain, re.M)
    text = evaluator.group(1).strip() if evaluator else "the SASE+ run NFA, rows in order"
    if algorithm:
        text = f"{algorithm.group(1)} chose a {text}"
    if why:
        text += f" ({why.group(1).strip()})"
    return text


def _cost(explain: str) -> str:
    cost = re.search(r"(?:ORDER|TREE) PLAN \[\w+\] cost=([\d.e+]+)", explain)
    worst = re.search(r"^\s+TRIVIAL\s+[\d.e+]+\s+x([\d.]+)", explain, re.M)
    if not cost:
        return ""
    text = f"about {float(cost.group(1)):,.4g} partial matches held per window (model estimate)"
    if worst and float(worst.group(1)) > 1.0:
        text += f"; the pattern's written order would hold {worst.group(1)}x as many"
    return text
