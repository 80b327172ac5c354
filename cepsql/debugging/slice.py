"""The slice a trace runs on: the partitions a ``partition={...}`` filter selects, each
ordered as the matcher sees it and cut to ``rows=(first, stop)`` (positions in the
ordered partition, as a Python slice). A slice is matched as if it were the whole
partition: PREV at its first row reads NULL, an attempt ends at its last row."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import pyarrow as pa

from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.errors import CepAnalysisError, CepRuntimeError
from cepsql.reference.sql import ReferenceQuery, partition_values, partitioned_rows

MAX_ROWS = 5_000  # rows a slice may hold: the trace is read by a person


@dataclass(frozen=True)
class PartitionSlice:
    key: tuple          # PARTITION BY values
    first: int          # position of rows[0] in the ordered partition
    rows: list[dict]


def partition_names(spec: MatchRecognizeSpec) -> list[str]:
    return [k.name for k in spec.partition_by]


def select_slices(spec: MatchRecognizeSpec, table: pa.Table,
                  partition: Mapping[str, Any] | None = None,
                  rows: tuple[int, int] | None = None,
                  max_rows: int = MAX_ROWS) -> list[PartitionSlice]:
    """The ordered partitions of ``table`` matching ``partition``, cut to ``rows``."""
    names = partition_names(spec)
    wanted = partition_filter(names, partition)
    first, stop = row_range(rows)
    query = ReferenceQuery(spec, list(table.column_names))
    out, total = [], 0
    for part in partitioned_rows(spec, table.to_pylist(), query.colmap):
        key = partition_values(query, part)
        if any(key[i] != value for i, value in wanted.items()):
            continue
        cut = part[first:stop]
        total += len(cut)
        if total > max_rows:
            raise CepRuntimeError(
                f"the slice has more than {max_rows} rows: choose a partition "
                f"(partition={{{', '.join(repr(n) + ': ...' for n in names) or ''}}}) "
                "or a row range (rows=(first, stop)), or raise max_rows")
        out.append(PartitionSlice(key, first, cut))
    return out


def partition_filter(names: list[str], partition: Mapping[str, Any] | None) -> dict[int, Any]:
    """PARTITION BY position -> wanted value (names matched case-insensitively); an unknown
    name is an error listing the PARTITION BY columns."""
    index = {n.lower(): i for i, n in enumerate(names)}
    wanted = {}
    for name, value in (partition or {}).items():
        if name.lower() not in index:
            listed = ", ".join(names) if names else "none: the clause has no PARTITION BY"
            raise CepAnalysisError(f"partition={{{name!r}: ...}}: {name} is not a PARTITION "
                                   f"BY column of the clause (they are: {listed})")
        wanted[index[name.lower()]] = value
    return wanted


def row_range(rows: tuple[int, int] | None) -> tuple[int, int | None]:
    if rows is None:
        return 0, None
    if len(rows) != 2 or not all(isinstance(r, int) and r >= 0 for r in rows) \
            or rows[1] < rows[0]:
        raise CepAnalysisError(f"rows={rows!r}: give (first, stop), two positions in the "
                               "ordered partition with 0 <= first <= stop")
    return rows[0], rows[1]
