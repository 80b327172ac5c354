"""From a cep_match call to a checked MatchRecognizeSpec, with every error located in the
statement (positions inside the body literal are mapped through its escapes)."""
from __future__ import annotations

from typing import Sequence

import pyarrow as pa

from cepsql.algebra.expressions import ColumnRef, walk
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.parse import parse_clause_body
from cepsql.errors import CepAnalysisError, CepError
from cepsql.parse.tf_calls import MatchCall, Piece, map_body_pos


def relocate(err: CepError, call: MatchCall, full: str) -> CepError:
    """err (located in the body, or in one PARTITION BY / ORDER BY item's own text, or
    not yet located) re-located in the full statement."""
    pos = None
    pieces = list(call.table.partition_by) + list(call.table.order_by)
    owner = next((p for p in pieces if err.sql is not None and err.sql is p.text), None)
    if owner is not None and err.pos is not None:
        pos = owner.pos + err.pos
    elif err.sql is None or err.sql is call.body or err.sql == call.body:
        pos = map_body_pos(call, err.pos)
    return type(err)(err.message, sql=full, pos=pos)


def call_spec(call: MatchCall, full: str) -> MatchRecognizeSpec:
    """Parse the body with the TABLE(...) PARTITION BY / ORDER BY items."""
    try:
        return parse_clause_body(call.body, [p.text for p in call.table.partition_by],
                                 [p.text for p in call.table.order_by])
    except CepError as err:
        raise relocate(err, call, full) from None


def check_keys(spec: MatchRecognizeSpec, schema: pa.Schema, *,
               partition: Sequence[Piece] = (), order: Sequence[Piece] = (),
               sql: str | None = None) -> None:
    """PARTITION BY items must be input columns (the UDTF partitions are formed by Spark on
    exactly those values); ORDER BY items may be expressions over input columns. Checked
    here so the error points at the item rather than somewhere in the body."""
    names = {f.name.lower() for f in schema}
    for i, key in enumerate(spec.partition_by):
        at = partition[i].pos if i < len(partition) else None
        if not isinstance(key.expr, ColumnRef) or key.expr.var is not None:
            raise CepAnalysisError(
                "cep_match: PARTITION BY items must be columns of the input table (compute "
                "expressions in TABLE(SELECT ...) first)", sql=sql, pos=at)
        if key.expr.column.lower() not in names:
            raise CepAnalysisError(f"cep_match: unknown PARTITION BY column {key.expr.column}",
                                   sql=sql, pos=at)
    for i, key in enumerate(spec.order_by):
        at = order[i].pos if i < len(order) else None
        for node in walk(key.expr):
            if isinstance(node, ColumnRef) and node.column.lower() not in names:
                raise CepAnalysisError(f"cep_match: unknown ORDER BY column {node.column}",
                                       sql=sql, pos=at)
