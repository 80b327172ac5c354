"""MEASURES as leaves + projections.

The matcher only decides *which row* each navigation reads (a leaf); the value is
gathered from that row's column, and the measure expression itself is then computed
by the backend (Spark SQL or Arrow) over the gathered leaf columns. So MEASURES get
the backend's full function library and exact types, and the matcher stays small.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from cepsql.algebra.expressions import (Aggregate, AggregateValue, Classifier, ColumnRef, Expr,
                                   GatheredAggregate, MatchNumber, RowRef, RowValue, children)
from cepsql.algebra.rowrefs import rebuild
from cepsql.errors import CepUnsupportedError

MATCH_NUMBER_COLUMN = "__cep_mn"
LEAF_PREFIX = "__cep_l"
AGGREGATE_PREFIX = "__cep_a"
GATHERED_PREFIX = "__cep_g"
CLASSIFIER_LEAF = None  # leaf "column" meaning the row's label


@dataclass
class Leaves:
    """Distinct (row reference, column) reads; column None reads CLASSIFIER()."""
    items: list[tuple[RowRef, str | None]] = field(default_factory=list)
    aggregates: list[AggregateValue] = field(default_factory=list)
    gathered: list[GatheredAggregate] = field(default_factory=list)

    def aggregate_name(self, agg: AggregateValue) -> str:
        if agg not in self.aggregates:
            self.aggregates.append(agg)
        return f"{AGGREGATE_PREFIX}{self.aggregates.index(agg)}"

    def gathered_name(self, agg: GatheredAggregate) -> str:
        """Output column of a gathered aggregate; registers one row list (a ROWS
        aggregate) per part."""
        if agg not in self.gathered:
            self.gathered.append(agg)
            for var, _ in agg.parts:
                self.aggregate_name(AggregateValue("ROWS", var, agg.rows_column, agg.final,
                                                   agg.pos))
        return f"{GATHERED_PREFIX}{self.gathered.index(agg)}"

    def name_for(self, ref: RowRef, column: str | None) -> str:
        key = (ref, column)
        if key not in self.items:
            self.items.append(key)
        return f"{LEAF_PREFIX}{self.items.index(key)}"


def project_measure(expr: Expr, leaves: Leaves) -> Expr:
    """A bound measure rewritten over leaf columns and the match-number column."""
    if isinstance(expr, RowValue):
        return _row_value(expr, leaves)
    if isinstance(expr, MatchNumber):
        return ColumnRef(None, MATCH_NUMBER_COLUMN, expr.pos)
    if isinstance(expr, AggregateValue):
        return ColumnRef(None, leaves.aggregate_name(expr), expr.pos)
    if isinstance(expr, GatheredAggregate):
        return ColumnRef(None, leaves.gathered_name(expr), expr.pos)
    if isinstance(expr, Aggregate):
        raise CepUnsupportedError(
            f"aggregate {expr.name}() must be normalized before projection", pos=expr.pos)
    kids = children(expr)
    if not kids:
        return expr
    return rebuild(expr, [project_measure(k, leaves) for k in kids])


def _row_value(node: RowValue, leaves: Leaves) -> Expr:
    def swap(e: Expr) -> Expr:
        if isinstance(e, ColumnRef):
            return ColumnRef(None, leaves.name_for(node.ref, e.column), e.pos)
        if isinstance(e, Classifier):
            return ColumnRef(None, leaves.name_for(node.ref, CLASSIFIER_LEAF), e.pos)
        kids = children(e)
        return rebuild(e, [swap(k) for k in kids]) if kids else e
    return swap(node.value)
