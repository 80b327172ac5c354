"""EXPLAIN text of a planned clause: what runs where (vectorised per row before matching,
or in the condition VM per thread), the pattern program, sort and output settings."""
from __future__ import annotations

from cepsql.algebra.expressions import (AggregateValue, BinaryOp, Case, Classifier, ColumnRef,
                                   Expr, FunctionCall, IsNull, Literal, MatchNumber, RowRef,
                                   RowValue, UnaryOp, children)
from cepsql.algebra.pattern import pattern_to_text
from cepsql.algebra.spec import MatchRecognizeSpec


def describe_ref(ref: RowRef) -> str:
    """RowRef as the navigation it stands for (``PREV(LAST(A), 2)``)."""
    if ref == RowRef(None):
        return "current row"
    if ref.var is None and ref.logical == "LAST" and not ref.logical_offset:
        core = "current row"
    else:
        base = ref.var or "*"
        core = f"{ref.logical}({base}{', ' + str(ref.logical_offset) if ref.logical_offset else ''})"
    if ref.final:
        core = "FINAL " + core
    if ref.physical_offset:
        kind = "PREV" if ref.physical_offset < 0 else "NEXT"
        core = f"{kind}({core}, {abs(ref.physical_offset)})"
    return core


def describe_expr(e: Expr) -> str:
    """Compact text of a localized condition (RowValue reads shown as column@row)."""
    if isinstance(e, RowValue):
        inner = "CLASSIFIER()" if isinstance(e.value, Classifier) else describe_expr(e.value)
        return f"{inner}@{describe_ref(e.ref)}"
    if isinstance(e, ColumnRef):
        return e.column if e.var is None else f"{e.var}.{e.column}"
    if isinstance(e, Literal):
        return "NULL" if e.value is None else (repr(e.value) if e.type == "string"
                                               else str(e.value))
    if isinstance(e, BinaryOp):
        return f"({describe_expr(e.left)} {e.op} {describe_expr(e.right)})"
    if isinstance(e, UnaryOp):
        return f"{e.op} {describe_expr(e.operand)}"
    if isinstance(e, IsNull):
        return f"{describe_expr(e.operand)} IS {'NOT ' if e.negated else ''}NULL"
    if isinstance(e, FunctionCall):
        return f"{e.name}({', '.join(describe_expr(a) for a in e.args)})"
    if isinstance(e, AggregateValue):
        arg = "*" if e.column is None else e.column
        over = e.var or "match"
        arg = ("DISTINCT " if e.distinct else "") + arg
        at = f", {e.index}" if e.func == "ELEMENT" else ""
        return f"{e.func.lower()}({arg}{at} over {over}{', final' if e.final else ''})"
    if isinstance(e, MatchNumber):
        return "MATCH_NUMBER()"
    if isinstance(e, Case):
        return "CASE(" + ", ".join(describe_expr(c) for c in children(e)) + ")"
    return type(e).__name__ + "(" + ", ".join(describe_expr(c) for c in children(e)) + ")"


def explain_clause(spec: MatchRecognizeSpec, *, defines: dict[str, Expr],
                   derived: list[tuple[str, Expr]], program_size: int,
                   sort_keys: list, primary_sort_keys: int) -> str:
    """The EXPLAIN block of one clause."""
    from cepsql.exprs.spark_sql import to_spark_sql
    mode = ("SQL:2016 mode: regex VM, threads in preference order, equivalence pruning"
            if spec.strategy is None else f"CEP mode, STRATEGY {spec.strategy}")
    lines = [f"pattern:       {pattern_to_text(spec.pattern)}",
             f"evaluator:     {mode}; program of {program_size} instructions"]
    keys = ", ".join(k.name for k in spec.partition_by) or "(none: one partition)"
    lines.append(f"partition by:  {keys}")
    order = [f"{k.column} {'ASC' if k.ascending else 'DESC'} NULLS "
             f"{'FIRST' if k.nulls_first else 'LAST'}"
             for k in sort_keys[len(spec.partition_by):primary_sort_keys]]
    ties = [k.column for k in sort_keys[primary_sort_keys:]]
    lines.append(f"order by:      {', '.join(order) or '(none)'}"
                 + (f"; ties broken by {', '.join(ties)}" if ties else ""))
    window = "none" if spec.window is None else (
        f"{spec.window.size} rows" if spec.window.kind == "rows"
        else f"{spec.window.size} microseconds")
    skip = spec.after_match_skip.kind.replace("_", " ")
    if spec.after_match_skip.var:
        skip += f" {spec.after_match_skip.var}"
    lines.append(f"output:        {spec.rows_per_match} ROW(S) PER MATCH"
                 + (f" {spec.all_rows_option.replace('_', ' ')}"
                    if spec.rows_per_match == "ALL" else "")
                 + f"; AFTER MATCH SKIP {skip}; WITHIN {window}")
    if derived:
        lines.append("computed per row before matching (vectorised):")
        lines += [f"  {name} := {to_spark_sql(expr)}" for name, expr in derived]
    lines.append("DEFINE (per thread, in the condition VM; x@row reads x at that row):")
    for var in spec.variables:
        cond = defines.get(var)
        lines.append(f"  {var}: {'TRUE (no DEFINE)' if cond is None else describe_expr(cond)}")
    return "\n".join(lines)
