"""Semantic checks of a parsed clause that need no schema.

The parser knows where every name was written, so variable-scoping errors are
reported here with positions; column existence is left to the planner (it has the
schema). Navigation nesting rules are delegated to ``algebra.rowrefs.bind_rows`` so
they live in exactly one place.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from cepsql.algebra.expressions import (Aggregate, Classifier, ColumnRef, Expr, MatchNumber,
                                   Navigation, walk)
from cepsql.algebra.pattern import pattern_variables
from cepsql.algebra.rowrefs import argument_label, bind_rows, transform
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.errors import CepAnalysisError


@dataclass
class NamePositions:
    """Where names were written: DEFINE variables, SUBSET names and their elements."""
    defines: dict[str, int] = field(default_factory=dict)
    subsets: dict[str, int] = field(default_factory=dict)
    subset_items: dict[str, list[tuple[str, int]]] = field(default_factory=dict)


def check_input_expr(expr: Expr, clause: str, input_name: str | None = None) -> Expr:
    """PARTITION BY / ORDER BY read plain input columns: no variables or navigation. A
    column qualified by input_name (the input's alias or table name, as Spark resolves
    ``t.x`` case-insensitively) is that input column; returns expr without those
    qualifiers."""
    if input_name is not None:
        expr = transform(expr, lambda e: replace(e, var=None) if isinstance(e, ColumnRef) and
                         e.var is not None and e.var.lower() == input_name.lower() else None)
    for node in walk(expr):
        if isinstance(node, ColumnRef) and node.var is not None:
            qualifier = "without a qualifier" if input_name is None else \
                f"unqualified or qualified by the input's name {input_name}"
            raise CepAnalysisError(
                f"{clause} must reference input columns {qualifier}, "
                f"found {node.var}.{node.column} (a field of a struct column is written "
                f"({node.var.lower()}).{node.column})", pos=node.pos)
        if isinstance(node, (Navigation, Aggregate, Classifier, MatchNumber)):
            name = type(node).__name__ if not isinstance(node, Navigation) else node.kind
            raise CepAnalysisError(f"{name} is not allowed in {clause}",
                                   pos=getattr(node, "pos", None))
    return expr


def check_spec(spec: MatchRecognizeSpec, names: NamePositions) -> None:
    """Raise CepAnalysisError for the first scoping mistake in the clause."""
    variables = pattern_variables(spec.pattern)
    var_set = set(variables)
    for name, items in spec.subsets.items():
        if name in var_set:
            raise CepAnalysisError(
                f"SUBSET name {name} is already a pattern variable", pos=names.subsets.get(name))
        for item, pos in names.subset_items.get(name, [(i, None) for i in items]):
            if item not in var_set:
                raise CepAnalysisError(
                    f"SUBSET {name} refers to {item}, which is not a variable of PATTERN", pos=pos)
    for var in spec.defines:
        if var not in var_set:
            raise CepAnalysisError(
                f"DEFINE of {var}, which does not appear in PATTERN", pos=names.defines.get(var))
    known = var_set | set(spec.subsets)
    skip = spec.after_match_skip
    if skip.var is not None and skip.var not in known:
        raise CepAnalysisError(f"AFTER MATCH SKIP {skip.kind.replace('_', ' ')} refers to "
                               f"unknown pattern variable {skip.var}", pos=skip.pos)
    for expr in spec.defines.values():
        _check_expr(expr, in_define=True, final_default=False, known=known)
    for measure in spec.measures:
        _check_expr(measure.expr, in_define=False,
                    final_default=spec.rows_per_match == "ONE", known=known)


def _check_expr(expr: Expr, *, in_define: bool, final_default: bool, known: set[str]) -> None:
    bind_rows(expr, in_define=in_define, final_default=final_default, known_vars=known)
    for node in walk(expr):
        if isinstance(node, Aggregate):
            _check_aggregate(node, in_define, known)


def _check_aggregate(agg: Aggregate, in_define: bool, known: set[str]) -> None:
    if in_define and agg.semantics == "FINAL":
        raise CepAnalysisError("FINAL semantics are not allowed in DEFINE", pos=agg.pos)
    if agg.star_var:
        _known_var(agg.star_var, agg.pos, known)
    labels: set[str | None] = set()
    for arg in agg.args:
        for node in walk(arg):
            if isinstance(node, (Aggregate, Navigation)):
                what = "aggregates" if isinstance(node, Aggregate) else node.kind
                raise CepAnalysisError(f"{what} cannot be nested inside {agg.name}()",
                                       pos=getattr(node, "pos", agg.pos))
            if isinstance(node, (ColumnRef, Classifier)) and node.var is not None:
                _known_var(node.var, node.pos, known)
        reads_row, label = argument_label(arg, agg.name, agg.pos)
        if reads_row:
            labels.add(label)
    if len(labels) > 1:
        names = ", ".join(sorted(v or "unqualified" for v in labels))
        raise CepAnalysisError(
            f"all arguments of {agg.name}() must read the rows of the same pattern variable "
            f"(all column references in {agg.name}() must use the same pattern variable), "
            f"found {names}", pos=agg.pos)


def _known_var(var: str, pos: int | None, known: set[str]) -> None:
    if var not in known:
        raise CepAnalysisError(f"unknown pattern variable {var}", pos=pos)
