"""The contract between planning (driver side) and execution (Spark or local).

A QueryPlan tells an execution backend, in backend-neutral terms, how to run one
MATCH_RECOGNIZE clause over its input table:

1. add ``prepare_columns`` to the input (each an expression over the input's own
   columns: unqualified ``ColumnRef``s only, no navigation), keeping all input columns,
2. call ``bind(prepared_schema)`` with the Arrow schema of that prepared input,
3. co-locate rows by ``partition_columns`` and sort them within partitions by
   ``sort_keys`` (rows of one partition must be contiguous and ordered),
4. stream the sorted rows, as Arrow record batches, through ``BoundPlan.worker`` (a
   picklable callable: Iterator[pa.RecordBatch] -> Iterator[pa.RecordBatch] with
   schema ``worker_schema``),
5. compute the result as ``final_projection``: output name -> expression over the
   worker's output columns (unqualified ``ColumnRef``s), in that order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import pyarrow as pa

from cepsql.algebra.expressions import Expr


@dataclass(frozen=True)
class SortColumn:
    column: str
    ascending: bool
    nulls_first: bool


@dataclass
class BoundPlan:
    worker: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
    worker_schema: pa.Schema
    final_projection: list[tuple[str, Expr]]


@dataclass
class QueryPlan:
    prepare_columns: list[tuple[str, Expr]]
    partition_columns: list[str]
    sort_keys: list[SortColumn]
    bind: Callable[[pa.Schema], BoundPlan]
    # sort_keys[:primary_sort_keys] are PARTITION BY + ORDER BY; the rest only break ties
    primary_sort_keys: int | None = None
    explain: str = ""  # EXPLAIN text of the clause (see explain/clause.py)
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
