"""``cep_match`` / ``cep_view`` for plain ``spark.sql`` (no cepsql rewriting): the portable
fallback, registered by ``cepsql.register(spark)``.

Spark's ``@arrow_udtf`` (batch input) needs a fixed return type and may not have an
``analyze`` method, so a function whose output schema depends on its arguments must be a
regular Python UDTF: ``analyze`` (run by Spark in a separate Python process on the
driver) computes the schema from the body literal and the table argument's type, and
``eval`` is called once per input row — rows cross the Python boundary one at a time.
``eval`` only appends values column-wise; matching runs in ``terminate`` over Arrow
arrays with the same worker as every other path. ``spark.cep.sql`` replaces these calls
by the batch-based functions of table_function.py.

``analyze`` sees neither the call's ``TABLE(...) PARTITION BY / ORDER BY`` nor the
session, hence: PARTITION BY / ORDER BY go into the body here
(``cep_match(TABLE(t), 'PARTITION BY k ORDER BY ts MEASURES ...')``) and analyze asks
Spark to partition accordingly (``WITH SINGLE PARTITION`` without PARTITION BY); and
``cep_view`` cannot see cepsql's pattern-view registry — it raises an error saying so.
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql.udtf import AnalyzeArgument, AnalyzeResult, PartitioningColumn

from cepsql.errors import CepAnalysisError, transported
from cepsql.exprs.spark_sql import quote_identifier
from cepsql.parse import parse_clause_body
from cepsql.parse.tf_calls import MATCH_FUNCTION, VIEW_FUNCTION
from cepsql.backends.spark.tf_plan import TablePlan, build_table_plan, run_table_plan
from cepsql.backends.spark.tf_spec import check_keys

_PLANS: dict[tuple[str, str], TablePlan] = {}  # per process: parse/plan once per query


def plan_for(body: str, input_schema: pa.Schema) -> TablePlan:
    """The TablePlan of body over input_schema (cached: one UDTF instance per partition)."""
    key = (body, input_schema.to_string(show_schema_metadata=False))
    plan = _PLANS.get(key)
    if plan is None:
        spec = parse_clause_body(body)
        check_keys(spec, input_schema)
        plan = _PLANS[key] = build_table_plan(spec, input_schema)
    return plan


@dataclass
class MatchAnalysis(AnalyzeResult):
    """AnalyzeResult plus what each instance needs to rebuild the plan."""
    body: str = ""
    input_schema: Any = None  # pa.Schema


class CepMatchFunction:
    """``cep_match(TABLE(t), '<[PARTITION BY ...] [ORDER BY ...] MEASURES ... PATTERN ...>')``."""

    @staticmethod
    def analyze(table: AnalyzeArgument, body: AnalyzeArgument) -> AnalyzeResult:
        from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
        if not table.isTable:
            raise CepAnalysisError(f"{MATCH_FUNCTION}: the first argument must be TABLE(...)")
        if not body.isConstantExpression or not isinstance(body.value, str):
            raise CepAnalysisError(f"{MATCH_FUNCTION}: the second argument must be a string "
                                   "literal holding the MATCH_RECOGNIZE body")
        schema = to_arrow_schema(table.dataType, timezone="UTC")
        plan = plan_for(body.value, schema)
        partition = [PartitioningColumn(quote_identifier(c)) for c in plan.partition_columns]
        return MatchAnalysis(schema=from_arrow_schema(plan.output_schema),
                             withSinglePartition=not partition, partitionBy=partition,
                             body=body.value, input_schema=schema)

    def __init__(self, analysis: MatchAnalysis) -> None:
        self.plan = plan_for(analysis.body, analysis.input_schema)
        self.columns: list[list] = [[] for _ in self.plan.input_schema]

    def eval(self, row: Any, body: str) -> None:
        for values, value in zip(self.columns, row):
            values.append(value)

    def terminate(self) -> Iterator[tuple]:
        schema = self.plan.input_schema
        arrays = [_to_arrow(values, f.type) for values, f in zip(self.columns, schema)]
        self.columns = [[] for _ in schema]
        with transported():
            out = run_table_plan(pa.Table.from_arrays(arrays, schema=schema), self.plan)
        yield from zip(*[c.to_pylist() for c in out.columns])


def _to_arrow(values: list, dtype: pa.DataType) -> pa.Array:
    if pa.types.is_timestamp(dtype) and dtype.tz is not None:
        # Spark hands TIMESTAMP values over as naive local-time datetimes
        values = [v.astimezone() if isinstance(v, datetime.datetime) and v.tzinfo is None else v
                  for v in values]
    return pa.array(values, type=dtype)


class CepViewFunction:
    """``cep_view('name')`` outside spark.cep.sql: always an error that says what to do."""

    @staticmethod
    def analyze(name: AnalyzeArgument) -> AnalyzeResult:
        shown = name.value if isinstance(name.value, str) else "<name>"
        raise CepAnalysisError(
            f"{VIEW_FUNCTION}('{shown}') works only through spark.cep.sql: Spark analyzes "
            "Python table functions in a separate process that cannot see the session's "
            f"pattern views. Run the query with spark.cep.sql(...), or read the view "
            f"directly: SELECT * FROM {shown}")

    def eval(self, name: str) -> Iterator[tuple]:  # pragma: no cover - analyze always fails
        return iter(())


def register(spark) -> None:
    """Register cep_match and cep_view as temporary table functions of ``spark``."""
    from pyspark.sql.functions import udtf
    spark.udtf.register(MATCH_FUNCTION, udtf(CepMatchFunction, useArrow=True))
    spark.udtf.register(VIEW_FUNCTION, udtf(CepViewFunction, useArrow=True))
