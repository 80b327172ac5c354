"""Aggregates computed over the rows the matcher lists per output row: the bind side.

The matcher's running accumulators cover count/sum/avg/min/max. Everything else that
MEASURES may aggregate (DISTINCT, the stddev/variance family, max_by/min_by, listagg,
count_if, bool_and/bool_or, collect_set, arguments reading CLASSIFIER() or
MATCH_NUMBER()) is folded in the worker (``runtime.gathered``) over the values of the
listed rows in match order, following Spark's definitions. Here each such aggregate
becomes a ``GatherSpec``: its arguments, their types and Spark's result type.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from cepsql.algebra.expressions import AggregateValue, Expr, GatheredAggregate
from cepsql.errors import CepUnsupportedError
from cepsql.analyze.aggregate_functions import result_type
from cepsql.analyze.aggregates import MATCH_NUMBER_COLUMN
from cepsql.analyze.measures import Leaves
from cepsql.exprs.arrow_eval import evaluate_arrow


@dataclass
class GatherSpec:
    """What the worker needs for one gathered aggregate (picklable)."""
    func: str
    distinct: bool
    parts: list[tuple[int, tuple[Expr, ...]]]  # (index of the ROWS aggregate, arguments)
    arg_types: list[pa.DataType]
    result: pa.DataType
    delimiter: str | None = None  # listagg's constant delimiter


def bind_gathered(agg: GatheredAggregate, rows_index: list[int],
                  schema: pa.Schema) -> GatherSpec:
    """Check the arguments' types against ``schema`` (the prepared input) and fix the
    result type by Spark's rules."""
    fields = list(schema) + [pa.field(MATCH_NUMBER_COLUMN, pa.int64())]
    empty = pa.schema(fields).empty_table()
    args = agg.parts[0][1]
    types = [evaluate_arrow(a, empty).type for a in args]
    result = result_type(agg.func, types[0], agg.pos)
    if pa.types.is_duration(types[0]) and agg.func in ("sum", "avg"):  # Spark's type, not our fold's
        raise CepUnsupportedError(f"{agg.func}() over an interval is not supported here "
                                  "(DISTINCT, or an argument the matcher cannot accumulate)",
                                  pos=agg.pos)
    delimiter = None
    if agg.func == "listagg" and len(args) > 1:
        delimiter = args[1].value  # a string constant (or NULL), checked when normalized
    return GatherSpec(agg.func, agg.distinct, [(q, a) for q, (_, a) in
                                               zip(rows_index, agg.parts)],
                      types, result, delimiter)


def bind_gathered_all(leaves: Leaves, schema: pa.Schema) -> tuple[list[GatherSpec], list[pa.Field]]:
    """GatherSpecs and output fields (``__cep_g<i>``) of a clause's gathered aggregates."""
    specs, fields = [], []
    for i, agg in enumerate(leaves.gathered):
        rows_index = [leaves.aggregates.index(AggregateValue("ROWS", var, agg.rows_column,
                                                             agg.final))
                      for var, _ in agg.parts]
        spec = bind_gathered(agg, rows_index, schema)
        specs.append(spec)
        fields.append(pa.field(f"__cep_g{i}", spec.result, nullable=True))
    return specs, fields


