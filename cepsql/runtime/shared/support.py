"""Which patterns the shared DAG evaluator runs (the rest stay unshared in the pass)."""
from __future__ import annotations

from ...algebra.spec import MatchRecognizeSpec
from ..cep_planner import PLANNED_STRATEGY


def dag_unsupported(spec: MatchRecognizeSpec) -> str | None:
    """Why the shared DAG cannot run the pattern (None: it can). The DAG forms the
    candidate matches of planned clauses (STRATEGY SKIP_TILL_ANY_MATCH, terms of
    cep_planner.pattern_terms) over plain variables; NOT(var) and OR are finished by
    the pattern's own matcher, so they are supported."""
    from ..cep_plan import _plannable
    if spec.strategy is None:
        return "SQL:2016 mode (regex preference) is evaluated in order, not as a join DAG"
    if spec.strategy != PLANNED_STRATEGY:
        return (f"STRATEGY {spec.strategy} decides each take by the rows taken before it; "
                "only SKIP_TILL_ANY_MATCH runs as a join DAG")
    terms, why = _plannable(spec)
    if terms is None:
        return why
    for term in terms:
        for name, lo, hi in term.comps:
            if (lo, hi) != (1, 1):
                return (f"Kleene closure KL({name}) is not shared yet (its closures are "
                        "enumerated in the context of the sibling instance)")
    return None
