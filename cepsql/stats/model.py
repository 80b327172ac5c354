"""The result of the statistics stage: what the planner reads.

The JQPG reduction (Kolchinsky & Schuster, VLDB 2018, section 3) turns every pattern
variable into a relation of cardinality ``W * r`` (window times arrival rate) and every
cross-variable DEFINE condition into a join predicate with a selectivity. Those two
numbers per variable/pair are exactly what ``PatternStatistics`` carries, together with
how they were obtained (sample size, time spent, whether the time budget cut it short)
so that EXPLAIN can show how much to trust them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

Pair = tuple[str, str]


@dataclass(frozen=True)
class PatternStatistics:
    """Estimated statistics of one MATCH_RECOGNIZE spec over one input.

    rates: per pattern variable, rows per ``rate_unit`` that satisfy the variable's
        single-row conditions, within one PARTITION BY group (groups pooled: total
        qualifying rows over total observed group time span, i.e. the duration-weighted
        mean of the per-group rates).
    rate_unit: 'second' (first ORDER BY key a timestamp/date, converted to seconds),
        'unit of <column>' (a plain number: one step of that key) or 'row' (no usable ORDER BY key: rates are then the
        fraction of rows, i.e. events per input row).
    selectivities: per pair of variables (in pattern order) linked by at least one
        conjunct referencing exactly those two variables, the fraction of row pairs
        (each satisfying its variable's single-row conditions, same partition, within the
        window) that satisfy all such conjuncts.
    unary_selectivity: fraction of input rows satisfying each variable's single-row part.
    window_units: the WITHIN window in ``rate_unit`` (so ``window_units * rates[v]`` is
        the expected number of v rows per window, the JQPG relation cardinality); a row
        window is converted to time through the overall row rate. None without WITHIN.
    sample_rows: rows the estimate is based on; input_rows: rows of the input when known.
    seconds: wall time of the estimation; truncated: the time budget ran out and the
        result rests on a smaller sample (or on defaults if nothing arrived) — see notes.
    pairs_evaluated: number of sampled row pairs behind each selectivity.
    notes: conjuncts left out of the estimate and other caveats, human readable.
    """
    rates: dict[str, float]
    selectivities: dict[Pair, float]
    unary_selectivity: dict[str, float]
    sample_rows: int
    seconds: float
    truncated: bool
    window_units: float | None
    rate_unit: str = "second"
    input_rows: int | None = None
    pairs_evaluated: dict[Pair, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def cardinality(self, var: str) -> float | None:
        """JQPG relation size ``W * r`` for var (None without a window)."""
        if self.window_units is None:
            return None
        return self.window_units * self.rates[var]
