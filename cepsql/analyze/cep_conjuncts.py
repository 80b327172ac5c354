"""DEFINE conjuncts of a CEP-mode clause, numbered and scoped as the evaluators see them.

Rule R2: each top-level AND conjunct of a DEFINE is applied on its own, once the other
variables it reads are bound. The compiler (compile.cep) and the workload planner
(sharing.patterns) both take the conjuncts from ``define_conjuncts``, so a conjunct's
index means the same thing in a pattern's evaluator and in a shared plan.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from cepsql.algebra.expressions import AggregateValue, Expr, RowValue, walk
from cepsql.algebra.rowrefs import bind_rows, transform
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.analyze.aggregates import (normalize_aggregates, null_match_number_in_aggregates,
                                       value_navigation)
from cepsql.analyze.conjuncts import split_conjuncts
from cepsql.analyze.decompose import DerivedColumns, localize, normalize_define_ref
from cepsql.analyze.rowsets import LabelSets

__all__ = ["conjunct_scope", "define_conjuncts"]


def define_conjuncts(spec: MatchRecognizeSpec, sets: LabelSets, known: set,
                     derived: DerivedColumns, check: Callable[[Expr], None] | None = None
                     ) -> Iterator[tuple[str, set[str], Expr, Expr]]:
    """Each DEFINE's top-level AND conjuncts as (variable, other variables read, bound
    conjunct, localized conjunct), in ``spec.defines`` order. ``check`` sees each
    normalized condition (and may raise)."""
    def own(ref_var, var):
        return ref_var is None or ref_var == var or var in sets.subsets.get(ref_var, ())

    for var, cond in spec.defines.items():
        cond = null_match_number_in_aggregates(value_navigation(cond))  # R2
        cond = normalize_aggregates(cond, derived, final_default=False,
                                    known_vars=known, in_define=True, members=sets.members)
        if check is not None:
            check(cond)
        bound = bind_rows(cond, in_define=True, final_default=False, known_vars=known)

        def fix(e, var=var):
            if isinstance(e, RowValue) and not own(e.ref.var, var):
                return replace(e, ref=replace(e.ref, final=True))
            return None
        for conj in split_conjuncts(transform(bound, fix)):
            refs: set[str] = set()
            for e in walk(conj):
                if isinstance(e, RowValue) and e.ref.var is not None:
                    refs |= sets.members(e.ref.var)
                elif isinstance(e, AggregateValue) and e.var is not None:
                    refs |= sets.members(e.var)
            refs.discard(var)
            local = localize(conj, derived,
                             lambda ref, v=var: normalize_define_ref(ref, v, sets.members))
            yield var, refs, conj, local


def conjunct_scope(local: Expr, refs: set) -> tuple[int, int]:
    """(late, rowlocal) of a localized conjunct: late when it reads rows of the match
    other than its own variable's and the named variables' (unqualified FIRST/LAST with
    an offset, unqualified aggregates), so only the complete match decides it; rowlocal
    when it reads nothing but the current row (and rows PREV/NEXT of it)."""
    late, rowlocal = False, True
    for e in walk(local):
        if isinstance(e, RowValue):
            current = e.ref.logical == "LAST" and e.ref.logical_offset == 0
            if e.ref.var is None and not current:
                late = True
            if not current:
                rowlocal = False
        elif isinstance(e, AggregateValue):
            rowlocal = False
            if e.var is None:
                late = True
    return int(late), int(rowlocal and not refs)
