"""The normalized MATCH_RECOGNIZE query: what every later stage consumes."""
from __future__ import annotations

from dataclasses import dataclass, field

from cepsql.algebra.expressions import Expr
from cepsql.algebra.pattern import PatternNode, pattern_variables


@dataclass(frozen=True)
class SortKey:
    expr: Expr
    ascending: bool = True
    nulls_first: bool | None = None  # None = Spark default: NULLS FIRST for ASC, LAST for DESC

    @property
    def effective_nulls_first(self) -> bool:
        return self.ascending if self.nulls_first is None else self.nulls_first


@dataclass(frozen=True)
class PartitionKey:
    """A PARTITION BY item; ``name`` is the output column name (the column name, or the
    expression's SQL text for an expression)."""
    expr: Expr
    name: str


@dataclass(frozen=True)
class Measure:
    name: str
    expr: Expr
    pos: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class SkipTo:
    """AFTER MATCH SKIP ...; kind: 'PAST_LAST_ROW' | 'TO_NEXT_ROW' | 'TO_FIRST' | 'TO_LAST'.
    ``TO v`` is parsed as TO_LAST v (the standard's definition).
    ``explicit``: the clause was written (CEP mode outputs all matches unless
    AFTER MATCH SKIP PAST LAST ROW is written); not part of equality."""
    kind: str = "PAST_LAST_ROW"
    var: str | None = None
    pos: int | None = field(default=None, compare=False)
    explicit: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class Window:
    """WITHIN clause: kind 'time' (size in microseconds; a match's last - first ORDER BY
    timestamp must be <= size) or 'rows' (last position - first position < size)."""
    kind: str
    size: int
    pos: int | None = field(default=None, compare=False)  # the WITHIN keyword


@dataclass(frozen=True)
class MatchRecognizeSpec:
    partition_by: tuple[PartitionKey, ...]
    order_by: tuple[SortKey, ...]
    measures: tuple[Measure, ...]
    rows_per_match: str  # 'ONE' | 'ALL'
    pattern: PatternNode
    defines: dict[str, Expr]
    after_match_skip: SkipTo = SkipTo()
    # ALL ROWS PER MATCH option: 'SHOW_EMPTY' (default) | 'OMIT_EMPTY' | 'WITH_UNMATCHED'
    all_rows_option: str = "SHOW_EMPTY"
    subsets: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # CEP mode (None = SQL:2016 mode): 'STRICT_CONTIGUITY' | 'PARTITION_CONTIGUITY' |
    # 'SKIP_TILL_NEXT_MATCH' | 'SKIP_TILL_ANY_MATCH'. A window without a strategy is
    # SQL:2016 mode with the window as an extra constraint on every match.
    strategy: str | None = None
    window: Window | None = None
    pattern_text: str = ""  # the PATTERN text as written, for listings
    # where the output's shape is written (ONE / ALL ROWS PER MATCH, else the clause's
    # first token), for errors about the output columns
    output_pos: int | None = field(default=None, compare=False)

    @property
    def variables(self) -> list[str]:
        """Primary pattern variables in order of first appearance."""
        return pattern_variables(self.pattern)
