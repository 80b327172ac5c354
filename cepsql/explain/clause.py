"""EXPLAIN text of a planned clause, rendered from what planning recorded on its QueryPlan
(``explain_facts``) and the lines a backend added (``explain_notes``).

SQL:2016 mode: what runs where (vectorised per row before matching, or in the condition
VM per thread), the pattern program, sort and output settings. CEP mode: the strategy,
partitioning (written or inferred), relevance filter, composite NOT / KL, and the plan
choice with its alternatives' costs and the statistics used.
"""
from __future__ import annotations

from cepsql.algebra.expressions import (AggregateValue, BinaryOp, Case, Classifier, ColumnRef,
                                        Expr, FunctionCall, IsNull, Literal, MatchNumber,
                                        RowRef, RowValue, UnaryOp, children)
from cepsql.algebra.pattern import Negation, pattern_to_text
from cepsql.analyze.partition_inference import whole_input_output
from cepsql.analyze.relevance import relevance_line
from cepsql.compile.query_plan import CepExplainFacts, QueryPlan, SqlExplainFacts
from cepsql.exprs.spark_sql import to_spark_sql, user_literal
from cepsql.planning.evaluator_choice import EVALUATOR_IN_ORDER, CepPlanChoice, describe_choice


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
        return user_literal(e)
    if isinstance(e, BinaryOp):
        return f"({describe_expr(e.left)} {e.op} {describe_expr(e.right)})"
    if isinstance(e, UnaryOp):
        return f"{e.op} {describe_expr(e.operand)}"
    if isinstance(e, IsNull):
        return f"{describe_expr(e.operand)} IS {'NOT ' if e.negated else ''}NULL"
    if isinstance(e, FunctionCall):
        return f"{e.name}({', '.join(describe_expr(a) for a in e.args)})"
    if isinstance(e, AggregateValue):
        at_row = e.computed[0] if e.computed else None  # an argument computed at the row
        arg = describe_expr(at_row) if at_row is not None else e.column or "*"
        over = e.var or "match"
        arg = ("DISTINCT " if e.distinct else "") + arg
        at = f", {e.index}" if e.func == "ELEMENT" else ""
        return f"{e.func.lower()}({arg}{at} over {over}{', final' if e.final else ''})"
    if isinstance(e, MatchNumber):
        return "MATCH_NUMBER()"
    if isinstance(e, Case):
        return "CASE(" + ", ".join(describe_expr(c) for c in children(e)) + ")"
    return type(e).__name__ + "(" + ", ".join(describe_expr(c) for c in children(e)) + ")"


def explain_clause(plan: QueryPlan) -> str:
    """The EXPLAIN block of one planned clause ("" when planning recorded nothing: a
    planner other than cepsql's), with the backend's notes after it."""
    facts = getattr(plan, "explain_facts", None)
    if isinstance(facts, SqlExplainFacts):
        text = _sql_mode(plan, facts)
    elif isinstance(facts, CepExplainFacts):
        text = _cep_mode(plan.spec, facts)
    else:
        text = ""
    return "\n".join(part for part in [text, *getattr(plan, "explain_notes", ())] if part)


def _sql_mode(plan: QueryPlan, facts: SqlExplainFacts) -> str:
    spec, sort_keys, primary = plan.spec, plan.sort_keys, plan.primary_sort_keys
    mode = ("SQL:2016 mode: regex VM, threads in preference order, equivalence pruning"
            if spec.strategy is None else f"CEP mode, STRATEGY {spec.strategy}")
    lines = [f"pattern:       {pattern_to_text(spec.pattern)}",
             f"evaluator:     {mode}; program of {facts.program_size} instructions"]
    keys = ", ".join(k.name for k in spec.partition_by) or "(none: one partition)"
    lines.append(f"partition by:  {keys}")
    order = [f"{k.column} {'ASC' if k.ascending else 'DESC'} NULLS "
             f"{'FIRST' if k.nulls_first else 'LAST'}"
             for k in sort_keys[len(spec.partition_by):primary]]
    ties = [k.column for k in sort_keys[primary:]]
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
    if facts.derived:
        lines.append("computed per row before matching (vectorised):")
        lines += [f"  {name} := {to_spark_sql(expr, readable=True)}"
                  for name, expr in facts.derived]
    lines.append("DEFINE (per thread, in the condition VM; x@row reads x at that row):")
    for var in spec.variables:
        cond = facts.defines.get(var)
        lines.append(f"  {var}: {'TRUE (no DEFINE)' if cond is None else describe_expr(cond)}")
    return "\n".join(lines)


def _cep_mode(spec, facts: CepExplainFacts) -> str:
    window = ""
    if spec.window is not None:
        window = (f", WITHIN {spec.window.size:g} ROWS" if spec.window.kind == "rows" else
                  f", WITHIN {spec.window.size / 1e6:g} SECONDS")
    lines = [f"CEP mode: STRATEGY {spec.strategy}{window}",
             f"pattern:       {getattr(spec, 'pattern_text', '') or ''}".rstrip()]
    lines += _cep_partitioning(spec, facts.inferred)
    relevance = relevance_line(facts.relevance, facts.relevance_reason)
    if relevance:
        lines.append(relevance)
    terms = facts.terms
    if terms is not None and len(terms) > 1:
        lines.append(f"disjuncts:     {len(terms)} (planned separately, results unioned)")
    for node in facts.composites:
        if isinstance(node, Negation):
            lines.append(f"negation:      NOT({pattern_to_text(node.child)}) -- absence of any "
                         "match of it in its region (any-match search, R6a)")
        else:
            lines.append(f"kleene:        KL({pattern_to_text(node.child)}) -- iterations "
                         "looped in order on the run NFA (R6b)")
    choice = facts.choice
    if choice is None:
        choice = CepPlanChoice(EVALUATOR_IN_ORDER, facts.in_order_reason or
                               "pattern shape not plannable (see docs/cep_mode.md)")
        lines.append(f"linear sequences: {facts.sequences}")
    lines.append(describe_choice(choice, terms))
    return "\n".join(lines)


def _cep_partitioning(spec, inferred: list[tuple[str, str]]) -> list[str]:
    """How a CEP clause's rows are split: inferred keys, written keys, or why one task."""
    if inferred:
        return [f"partition by:  {col} (inferred: {why})" for col, why in inferred]
    if spec.partition_by:
        return ["partition by:  " + ", ".join(k.name or "<expr>" for k in spec.partition_by)]
    if whole_input_output(spec):
        return [f"parallelism:   one task: {whole_input_output(spec)}, so no partition "
                "key is inferred and no time slices are cut"]
    return []
