"""The prepared sample: one row per sampled input row, with exactly what estimation
reads — PARTITION BY keys, the first ORDER BY key, one boolean per variable (its
single-row conditions hold) and the raw columns the pair conditions read.

Both inputs end up in this shape (Spark computes it inside the sampled query, an Arrow
table through ``arrow_eval``), so the estimator itself has a single code path.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cepsql.algebra.expressions import ColumnRef
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.errors import CepUnsupportedError
from cepsql.exprs.arrow_eval import evaluate_arrow
from cepsql.analyze.conjuncts import COLUMN_PREFIX, ConditionSplit
from cepsql.stats.sample_memo import SampleMemo

ORDER_COLUMN = "__cep_o"


def partition_column(i: int) -> str:
    return f"__cep_p{i}"


def unary_column(var_index: int) -> str:
    return f"__cep_u{var_index}"


def sample_table(table: pa.Table, max_rows: int,
                 rng: np.random.Generator) -> tuple[pa.Table, float]:
    """Uniform sample of at most max_rows rows (input order kept) and its fraction."""
    n = table.num_rows
    if n <= max_rows:
        return table, 1.0
    idx = np.sort(rng.choice(n, size=max_rows, replace=False))
    return table.take(pa.array(idx)), max_rows / n


def prepare_table(spec: MatchRecognizeSpec, split: ConditionSplit, table: pa.Table,
                  notes: list[str], memo: SampleMemo | None = None) -> pa.Table:
    """Prepared columns of a (sampled) Arrow table, evaluated with arrow_eval (``memo``
    of table: a column another clause computed is reused)."""
    def computed(key, compute):
        return compute() if memo is None else memo.get(key, compute)

    n = table.num_rows
    columns: dict[str, pa.Array | pa.ChunkedArray] = {}
    for i, key in enumerate(spec.partition_by):
        columns[partition_column(i)] = computed(("value", key.expr),
                                                lambda e=key.expr: evaluate_arrow(e, table))
    if spec.order_by:
        order = spec.order_by[0].expr
        columns[ORDER_COLUMN] = computed(("value", order), lambda: evaluate_arrow(order, table))
    for idx, var in enumerate(split.variables):
        flags, said = computed(("unary", tuple(split.unary[var])),
                               lambda v=var: _flags_and_notes(split, v, table))
        columns[unary_column(idx)] = flags
        notes += [f"{var}:" + note.split(":", 1)[1] for note in said]
    for k, name in enumerate(split.columns):
        column = ColumnRef(None, name)
        columns[f"{COLUMN_PREFIX}{k}"] = computed(("value", column),
                                                  lambda c=column: evaluate_arrow(c, table))
    return pa.table(columns) if columns else pa.table({"__cep_n": pa.nulls(n)})


def _flags_and_notes(split: ConditionSplit, var: str, table: pa.Table):
    """(unary_flags of var, the notes they add)."""
    said: list[str] = []
    return unary_flags(split, var, table, said), said


def unary_flags(split: ConditionSplit, var: str, table: pa.Table,
                notes: list[str]) -> pa.Array | pa.ChunkedArray:
    """Per row of table: whether var's single-row conditions hold (NULL counts as no)."""
    flag: pa.Array | pa.ChunkedArray = pa.repeat(pa.scalar(True), table.num_rows)
    for conjunct in split.unary[var]:
        try:
            value = evaluate_arrow(conjunct, table)
        except CepUnsupportedError as exc:
            notes.append(f"{var}: single-row condition left out ({exc})")
            continue
        flag = pc.and_kleene(flag, value)
    return pc.fill_null(flag, False)
