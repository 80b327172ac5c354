"""Which patterns the shared DAG evaluator runs (the rest stay unshared in the pass)."""
from __future__ import annotations

from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.planning.evaluator_choice import PLANNED_STRATEGY
from cepsql.planning.plannable import plannable_terms


def dag_unsupported(spec: MatchRecognizeSpec) -> str | None:
    """Why the shared DAG cannot run the pattern (None: it can). The DAG forms the
    candidate matches of planned clauses (STRATEGY SKIP_TILL_ANY_MATCH, terms of
    planning.plannable.plannable_terms): variables and Kleene closures KL(x) of single
    variables; NOT(var) and OR are finished by the pattern's own matcher."""
    if spec.strategy is None:
        return "SQL:2016 mode (regex preference) is evaluated in order, not as a join DAG"
    if spec.strategy != PLANNED_STRATEGY:
        return (f"STRATEGY {spec.strategy} decides each take by the rows taken before it; "
                "only SKIP_TILL_ANY_MATCH runs as a join DAG")
    terms, why = plannable_terms(spec)
    if terms is None:
        return why
    return None
