"""Which CEP clauses the planned evaluator runs, as which disjuncts.

Under ``STRATEGY SKIP_TILL_ANY_MATCH`` a match is a set of rows, so a clause whose
pattern reduces to OR-free disjuncts of variables and Kleene closures of single
variables (with NOT checks the DNF does not move) is planned cost-based; everything
else runs in order, and ``plannable_terms`` says why. The compiler and the workload
planner both ask here, so a clause is planned, and shared, under one rule.
"""
from __future__ import annotations

from cepsql.algebra.pattern import (Alternation, Anchor, Concat, Empty, Exclusion, Negation,
                                    PatternNode, Permute, Quantified, Var, contains_negation,
                                    pattern_variables, walk)
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.errors import CepUnsupportedError
from cepsql.planning.evaluator_choice import PLANNED_STRATEGY, Term, pattern_terms

__all__ = ["plannable_terms"]


def plannable_terms(spec: MatchRecognizeSpec) -> tuple[list[Term] | None, str]:
    """(terms, "") for a planned clause, else (None, why it runs in order)."""
    if spec.strategy != PLANNED_STRATEGY:
        return None, (f"STRATEGY {spec.strategy} decides each take by the rows taken "
                      "before it, so out-of-order plans would change the result")
    for node in walk(spec.pattern):
        if isinstance(node, (Exclusion, Anchor)):
            return None, "pattern shape not plannable"   # expand() raises the precise error
        if isinstance(node, Quantified) and not isinstance(node.child, Var):
            return None, ("KL over a composite pattern has no JQPG reduction (the reduction "
                          "applies Kleene closure to single events only)")
        if isinstance(node, (Concat, Permute)) and \
                any(isinstance(i, Negation) for i in node.items) and \
                all(_nullable(i) for i in node.items if not isinstance(i, Negation)):
            # a NOT whose SEQ/AND may be empty still checks (R6); DNF drops it
            return None, "a NOT whose SEQ/AND may match no row has no disjunct to check it"
    if _flattened_negation(spec.pattern, None):
        return None, ("a SEQ holding a NOT nested in another SEQ: the DNF would flatten it "
                      "and move the NOT's region")
    try:
        terms = pattern_terms(spec.pattern)
    except CepUnsupportedError as exc:
        return None, f"pattern shape not plannable ({exc.message})"
    for t in terms:
        if any(set(pattern_variables(n[0])) & {c[0] for c in t.comps} for n in t.negs):
            return None, "a variable is both negated and positive in one disjunct"
    if not terms:
        return None, "pattern shape not plannable"
    return terms, ""


def _flattened_negation(node: PatternNode, container: type | None) -> bool:
    """Whether a SEQ holding a NOT (its own item, or an AND's NOT whose slot it fixes)
    sits directly in another SEQ: the DNF flattens it, which would move the NOT's region
    (R6 scopes it to its own SEQ). An AND in an AND shares its slot, so flattening it is
    exact."""
    if isinstance(node, (Concat, Permute)):
        if container is Concat and isinstance(node, Concat) and contains_negation(node):
            return True
        container = type(node)
    return any(_flattened_negation(c, container) for c in
               list(getattr(node, "items", ()) or ()) + [getattr(node, "child", None)]
               if c is not None)


def _nullable(node: PatternNode) -> bool:
    """Whether node can match no row at all."""
    if isinstance(node, (Empty, Negation)):
        return True
    if isinstance(node, Quantified):
        return node.min == 0 or _nullable(node.child)
    if isinstance(node, Alternation):
        return any(_nullable(i) for i in node.items)
    if isinstance(node, (Concat, Permute)):
        return all(_nullable(i) for i in node.items)
    return False
