"""The clause skeleton's pieces, as both modes' program builders read them.

``compile.clause`` builds a ``Clause`` (keys, sort, measures, derived columns) once for
either mode and, at bind time, a ``BoundOutput`` (the condition VM code, the measures'
leaves and aggregates, the output layout); ``compile.sql`` and ``compile.cep`` turn them
into their mode's program and worker configuration (``ModeCompiler``). Kept apart from
``clause`` so the builders never import the skeleton that drives them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pyarrow as pa

from cepsql.algebra.expressions import Expr
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.analyze.decompose import DerivedColumns
from cepsql.analyze.measures import Leaves
from cepsql.analyze.rowsets import LabelSets, RefTable
from cepsql.compile.conditions import ConditionCode
from cepsql.compile.query_plan import SortColumn
from cepsql.planning.options import PlannerOptions

WINDOW_CODES = {None: 0, "rows": 1, "time": 2}   # the workers' window_kind


@dataclass
class Clause:
    """One clause as the skeleton laid it out for matching (driver side)."""
    spec: MatchRecognizeSpec             # canonical column names (and inferred keys)
    schema: pa.Schema                    # the input's
    options: PlannerOptions
    sql: str
    prepare: list[tuple[str, Expr]]      # columns added to the input before matching
    partition_columns: list[str]
    order_columns: list[str]
    sort_keys: list[SortColumn]          # PARTITION BY, ORDER BY, then tie-breakers
    derived: DerivedColumns = field(default_factory=DerivedColumns)
    leaves: Leaves = field(default_factory=Leaves)
    measures: list[tuple[str, Expr]] = field(default_factory=list)  # over leaf columns
    labels: list[str] = field(init=False)     # the pattern variables, in VM label order
    sets: LabelSets = field(init=False)       # the variables and SUBSET names
    known: set[str] = field(init=False)

    def __post_init__(self) -> None:
        self.labels = list(self.spec.variables)
        self.sets = LabelSets(self.labels, dict(self.spec.subsets))
        self.known = set(self.labels) | set(self.spec.subsets)

    @property
    def input_columns(self) -> list[str]:
        return [f.name for f in self.schema]

    @property
    def primary_sort_keys(self) -> int:
        """How many sort keys are PARTITION BY + ORDER BY (the rest break ties)."""
        return len(self.partition_columns) + len(self.order_columns)

    def window(self) -> dict:
        """The WITHIN window as the workers' window_kind / window_size / window_column."""
        window = self.spec.window
        return dict(window_kind=WINDOW_CODES[None if window is None else window.kind],
                    window_size=0 if window is None else window.size,
                    window_column=self.order_columns[0] if self.order_columns else None)


@dataclass
class BoundOutput:
    """What the skeleton binds for both modes once the prepared input's types are known:
    the compiled conditions, the measures' leaves and aggregates, the output layout."""
    code: ConditionCode
    refs: RefTable                        # the row references the conditions read
    leaves: np.ndarray                    # int32[n, 6] per leaf column
    leaf_columns: list[str | None]
    measure_aggregates: np.ndarray        # int32[n, 4]: set id, function, VM column, final
    aggregate_columns: list[tuple[str, str | None]]
    gathered: tuple                       # GatherSpec per __cep_g column
    passthrough: list[str]                # input columns copied to every output row
    output_schema: pa.Schema


def sortable(dtype: pa.DataType) -> bool:
    """Whether a column can break ties in the sort (nested values cannot)."""
    return not (pa.types.is_nested(dtype) or pa.types.is_map(dtype))


class ModeCompiler(Protocol):
    """A mode's program builder, called by the skeleton in this order."""

    def check(self, spec: MatchRecognizeSpec) -> None:
        """Mode rules checked before anything else."""

    def shape(self, spec: MatchRecognizeSpec, schema: pa.Schema) -> MatchRecognizeSpec:
        """Mode rules and rewrites before the keys are laid out."""

    def conditions(self, clause: Clause) -> tuple[dict[str, Expr], list[str]]:
        """DEFINE as (name -> localized condition, names in VM order)."""

    def program(self, clause: Clause) -> None:
        """The mode's pattern program (after DEFINE and MEASURES)."""

    def config(self, clause: Clause, out: BoundOutput) -> object:
        """The worker configuration (compile.worker_config) of the bound clause."""

    def plan_fields(self, clause: Clause) -> dict:
        """The mode's QueryPlan fields (explain facts, CEP-only settings)."""
