"""Column names of a clause resolved against its input schema.

Spark resolves column names case-insensitively; every later stage (the compilers, the
workload planner's canonical keys) compares names exactly, so a clause is first
rewritten to the schema's own spelling, with nested access (``x.f``, ``x[i]``) made
concrete on the way.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pyarrow as pa

from cepsql.algebra.expressions import (FIELD_ACCESS, SUBSCRIPT, ColumnRef, Expr, FunctionCall,
                                        children)
from cepsql.algebra.rowrefs import rebuild
from cepsql.algebra.spec import MatchRecognizeSpec, PartitionKey
from cepsql.analyze.nested import resolve_nested
from cepsql.errors import CepAnalysisError, CepUnsupportedError

__all__ = ["canonical_columns"]


def canonical_columns(spec: MatchRecognizeSpec, schema: pa.Schema) -> MatchRecognizeSpec:
    """Resolve column names case-insensitively to the schema's spelling; unknown -> error."""
    by_lower: dict[str, str] = {}
    count = Counter(f.name.lower() for f in schema)
    for f in schema:
        by_lower.setdefault(f.name.lower(), f.name)

    def fix(e: Expr) -> Expr:
        if isinstance(e, ColumnRef):
            name = by_lower.get(e.column.lower())
            if name is None:
                raise CepAnalysisError(f"unknown column {e.column}", pos=e.pos)
            if count[name.lower()] > 1:  # e.g. a join below the clause (Spark: AMBIGUOUS_REFERENCE)
                raise CepAnalysisError(
                    f"column {e.column} is ambiguous: the clause's input has "
                    f"{count[name.lower()]} columns named {name}; select or rename them "
                    "below the clause", pos=e.pos)
            return replace(e, column=name)
        kids = children(e)
        e = rebuild(e, [fix(k) for k in kids]) if kids else e
        if isinstance(e, FunctionCall) and e.name in (FIELD_ACCESS, SUBSCRIPT):
            return resolve_nested(e, schema)
        return e

    twice = [f.name for f in schema if count[f.name.lower()] > 1]
    if twice and spec.rows_per_match == "ALL":
        raise CepUnsupportedError(
            f"ALL ROWS PER MATCH over an input with {count[twice[0].lower()]} columns named "
            f"{twice[0]}: select or rename them below the clause", pos=spec.output_pos)
    return replace(
        spec,
        partition_by=tuple(replace(k, expr=fix(k.expr), name=_fixed_name(k, by_lower))
                           for k in spec.partition_by),
        order_by=tuple(replace(k, expr=fix(k.expr)) for k in spec.order_by),
        measures=tuple(replace(m, expr=fix(m.expr)) for m in spec.measures),
        defines={v: fix(e) for v, e in spec.defines.items()})


def _fixed_name(key: PartitionKey, by_lower: dict[str, str]) -> str:
    if isinstance(key.expr, ColumnRef):
        return by_lower.get(key.expr.column.lower(), key.name)
    return key.name
