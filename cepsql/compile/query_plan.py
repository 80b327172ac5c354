"""The contract between planning (driver side) and execution (Spark or local).

A QueryPlan tells an execution backend, in backend-neutral terms, how to run one
MATCH_RECOGNIZE clause over its input table:

1. add ``prepare_columns`` to the input (each an expression over the input's own
   columns: unqualified ``ColumnRef``s only, no navigation), keeping all input columns,
2. call ``bind(prepared_schema)`` with the Arrow schema of that prepared input: the
   ``BoundPlan`` carries the clause's picklable ``config`` (worker_config.py),
3. co-locate rows by ``partition_columns`` and sort them within partitions by
   ``sort_keys`` (rows of one partition must be contiguous and ordered),
4. stream the sorted rows, as Arrow record batches, through the worker the runtime
   builds from that config (``runtime.workers``: a picklable callable
   Iterator[pa.RecordBatch] -> Iterator[pa.RecordBatch] with schema ``worker_schema``),
5. compute the result as ``final_projection``: output name -> expression over the
   worker's output columns (unqualified ``ColumnRef``s), in that order.

EXPLAIN is rendered by cepsql.explain.clause from what planning recorded here
(``explain_facts``) plus the lines a backend adds (``explain_notes``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pyarrow as pa

from cepsql.algebra.expressions import Expr


@dataclass(frozen=True)
class SortColumn:
    column: str
    ascending: bool
    nulls_first: bool


@dataclass
class BoundPlan:
    # WorkerConfig / CepConfig (worker_config.py) the runtime builds the worker from; a
    # backend test's fake planner may put a ready worker (a callable) here instead
    config: object
    worker_schema: pa.Schema
    final_projection: list[tuple[str, Expr]]


@dataclass
class SqlExplainFacts:
    """What EXPLAIN shows of a SQL:2016-mode clause besides the QueryPlan's own fields."""
    defines: dict[str, Expr]            # localized DEFINE conditions per variable
    derived: list[tuple[str, Expr]]     # row-local columns computed before matching
    program_size: int                   # regex VM instructions


@dataclass
class CepExplainFacts:
    """What EXPLAIN shows of a CEP-mode clause: the plan choice (None: the in-order run
    NFA, for ``in_order_reason``) and what shaped it."""
    choice: object                      # planning.evaluator_choice.CepPlanChoice or None
    terms: list | None                  # the planned disjuncts (None: in order)
    sequences: int                      # the run NFA's linear sequences
    inferred: list[tuple[str, str]]     # inferred PARTITION BY columns and why
    in_order_reason: str = ""
    relevance: Expr | None = None       # the relevance filter planned (analyze/relevance.py)
    relevance_reason: str = ""          # why every row is kept when it is None
    composites: list = field(default_factory=list)  # NOT / KL over composite patterns


@dataclass
class QueryPlan:
    prepare_columns: list[tuple[str, Expr]]
    partition_columns: list[str]
    sort_keys: list[SortColumn]
    bind: Callable[[pa.Schema], BoundPlan]
    # sort_keys[:primary_sort_keys] are PARTITION BY + ORDER BY; the rest only break ties
    primary_sort_keys: int | None = None
    # what EXPLAIN renders (explain/clause.py): SqlExplainFacts / CepExplainFacts, and the
    # lines a backend adds (e.g. how it slices an unpartitioned input)
    explain_facts: SqlExplainFacts | CepExplainFacts | None = None
    explain_notes: list[str] = field(default_factory=list)
    spec: object = None  # the MatchRecognizeSpec planned (backends may inspect it)
    # planned CEP clauses: the chosen OrderPlan / TreePlan per disjunct (EXPLAIN FORMAT SVG)
    chosen_plans: tuple = ()
    # STRICT_CONTIGUITY with PARTITION BY: before bind, add break_column (uint8/boolean) to
    # the prepared input: 1 where the row's predecessor in the *global* order global_order
    # (ORDER BY + tie-breakers, ignoring PARTITION BY) has other partition_columns values
    global_order: list[SortColumn] | None = None
    break_column: str | None = None
    # CEP relevance pushdown (analyze/relevance.py): before step 1 a backend may drop the
    # input rows for which this condition over the input's own columns is not TRUE (NULL
    # = drop); None = every row can matter. Ignoring it is always correct, only slower.
    relevance_filter: Expr | None = None
