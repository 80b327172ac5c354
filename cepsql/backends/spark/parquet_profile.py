"""The ordered scan's partition profiles from Parquet footers, without a Spark job.

The first query over new files used to run a profile job (gap_scan.profile_rows: every
row's ORDER BY time through a Python worker) before its own. When the profiled frame is
a plain projection of a Parquet file scan, the driver already has what that job
computes: the scan's input partitions (its FilePartitions: file splits, in the order a
task reads them) and, in each file's footer, every row group's row count, NULL count and
min/max of the column. A split reads the row groups whose midpoint lies in it (Parquet's
rule, which Spark's readers apply: ``split_row_groups``), so a partition's count, NULLs
and range are sums and extremes over its row groups' statistics.

Whether a partition's times STRICTLY increase in file order (gap pushdown and column
pruning need it) is not in any statistic: with ``strict=True`` the driver reads the key
column's chunks of those row groups (pyarrow, that one column, no Spark job) when its
row groups' ranges are disjoint and increasing, else the partition is not strict.

Every doubt answers None (the caller runs the profile job): another source or plan
shape (a filter, a join, a cache), a non-local file, INT96 or nanosecond timestamps, a
Parquet type that is not the one Spark reads the column as (UTC-adjusted for TIMESTAMP,
local for TIMESTAMP_NTZ, signed integers, DATE), values old enough for calendar
rebasing, missing statistics, Parquet field ids, an ambiguous column name, or more key
data to read than MAX_READ_BYTES. The tasks still check their rows against the profile
(ordered_scan._ScanTask) and fail loudly if the files changed under it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from cepsql.exprs.spark_conf import conf_value
from cepsql.backends.spark.gap_scan import PartitionProfile, key_ints

__all__ = ["MAX_READ_BYTES", "RowGroup", "case_sensitive", "footer_profiles",
           "parquet_relation", "partition_row_groups", "plain_file_scan", "split_row_groups"]

MAX_READ_BYTES = 256 << 20  # (strict) key column bytes the driver may read, compressed
_EPOCH_1900_MICROS = -2_208_988_800_000_000  # older times may be rebased by Spark
_EPOCH_1583_DAYS = -141_427                  # 1583-01-01: older dates may be rebased
_INTEGERS = {T.ByteType: 8, T.ShortType: 16, T.IntegerType: 32, T.LongType: 64}


@dataclass(frozen=True)
class RowGroup:
    """One row group's footer facts about the key column (values in Spark's unit)."""
    index: int
    rows: int
    nulls: int
    lo: int | None   # None: every value NULL
    hi: int | None
    offset: int      # where the row group starts in the file (its first column chunk)
    size: int        # its columns' compressed bytes
    key_bytes: int   # the key column chunk's compressed bytes

    @property
    def midpoint(self) -> int:
        return self.offset + self.size // 2


def split_row_groups(groups: list[RowGroup], start: int, length: int) -> list[RowGroup]:
    """The row groups a file split [start, start + length) reads: those whose midpoint
    lies in it (parquet-mr's range filter, as Spark's Parquet readers use it)."""
    return [g for g in groups if start <= g.midpoint < start + length]


def footer_profiles(frame: DataFrame, strict: bool) -> list[PartitionProfile] | None:
    """gap_scan.profile_rows(frame) from the footers of the files ``frame`` (one column,
    a projection of a Parquet scan: gap_scan.profile_input) reads, or None when they
    cannot say. strict=False: the profiles' ``strict`` is False (no data read)."""
    try:
        return _profiles(frame, strict)
    except Exception:  # noqa: BLE001  (no JVM plan, an unreadable footer: the job answers)
        return None


def _profiles(frame: DataFrame, strict: bool) -> list[PartitionProfile] | None:
    field = frame.schema.fields[0] if len(frame.schema.fields) == 1 else None
    scan, name = _parquet_scan(frame)
    if field is None or scan is None:
        return None
    read = partition_row_groups(frame, scan, name, field.dataType)
    if read is None:
        return None
    if strict and sum(g.key_bytes for groups in read for *_, g in groups) > MAX_READ_BYTES:
        return None
    profiles = [_profile(i, groups, strict) for i, groups in enumerate(read)]
    return [p for p in profiles if p.count + p.nulls]


def partition_row_groups(frame: DataFrame, scan, name: str, dtype: T.DataType) -> list | None:
    """Per input partition of ``scan`` (a FileSourceScanExec of frame's plan), the row
    groups its task reads, in read order, as (open file, key column's name in it,
    RowGroup) with the key column ``name`` read as ``dtype``; None when some file's
    footer cannot say (``_footer``), a file is not local or Parquet field ids are on."""
    spark = frame.sparkSession
    if (conf_value(spark, "spark.sql.parquet.fieldId.read.enabled", "false") or "") \
            .strip().lower() == "true":
        return None
    exact = case_sensitive(spark)
    footers: dict[str, tuple[pq.ParquetFile, str, list[RowGroup]] | None] = {}
    partitions = scan.inputRDD().partitions()
    read = []
    for i, partition in enumerate(partitions):
        if partition.index() != i:
            return None
        groups = []
        for split in partition.files():
            path = _local_path(split)
            if path is None:
                return None
            if path not in footers:
                footers[path] = _footer(path, name, dtype, exact)
            found = footers[path]
            if found is None:
                return None
            parquet, column, row_groups = found
            groups += [(parquet, column, g) for g in
                       split_row_groups(row_groups, int(split.start()), int(split.length()))]
        read.append(groups)
    return read


def case_sensitive(spark) -> bool:
    """Whether Spark matches column names (also a file's to a relation's) exactly."""
    return (conf_value(spark, "spark.sql.caseSensitive", "false") or "").strip().lower() \
        == "true"


def _parquet_scan(frame: DataFrame):
    """(the FileSourceScanExec, the file column's name) when frame's optimized plan is a
    projection of one column straight off a Parquet relation, else (None, None)."""
    execution = frame._jdf.queryExecution()
    plan = execution.optimizedPlan()
    if not plan.getClass().getName().endswith(".Project") or plan.projectList().size() != 1:
        return None, None
    relation = parquet_relation(plan)
    if relation is None:
        return None, None
    item = plan.projectList().apply(0)
    ref = item.child() if item.getClass().getName().endswith(".Alias") else item
    if not ref.getClass().getName().endswith(".AttributeReference"):
        return None, None
    if str(ref.name()).lower() in {str(n).lower() for n in
                                   relation.relation().partitionSchema().fieldNames()}:
        return None, None  # a directory partition value (Spark reads it, not the files')
    scan = plain_file_scan(execution)
    return (None, None) if scan is None else (scan, str(ref.name()))


def parquet_relation(project):
    """The LogicalRelation of Parquet files a Project (optimized plan) reads straight
    from, else None."""
    relation = project.child()
    if not relation.getClass().getName().endswith(".LogicalRelation"):
        return None
    fs = relation.relation()
    if not fs.getClass().getName().endswith(".HadoopFsRelation") or \
            not fs.fileFormat().getClass().getName().endswith(".ParquetFileFormat"):
        return None
    return relation


def plain_file_scan(execution):
    """The physical plan's one leaf when it is a file scan without filters or buckets
    (its input partitions are the files' splits, every row read), else None."""
    leaves = execution.executedPlan().collectLeaves()
    if leaves.size() != 1:
        return None
    scan = leaves.apply(0)
    if not scan.getClass().getName().endswith(".FileSourceScanExec") or \
            scan.dataFilters().nonEmpty() or scan.partitionFilters().nonEmpty() or \
            scan.bucketedScan():
        return None
    return scan


def _local_path(split) -> str | None:
    uri = split.toPath().toUri()
    if uri.getScheme() not in (None, "file"):
        return None
    return str(uri.getPath())


def _footer(path: str, name: str, dtype: T.DataType, exact: bool):
    """(the open file, the key column's name in it, its row groups) or None: the file's key
    column is not what Spark reads as ``dtype`` from footer statistics alone."""
    parquet = pq.ParquetFile(path)
    meta = parquet.metadata
    schema = meta.schema
    matches = [j for j in range(len(schema)) if schema.column(j).path == name
               or (not exact and schema.column(j).path.lower() == name.lower())]
    if len(matches) != 1 or schema.column(matches[0]).max_repetition_level:
        return None
    column = matches[0]
    scale = _scale(schema.column(column), dtype)
    if scale is None:
        return None
    groups = []
    for r in range(meta.num_row_groups):
        group = meta.row_group(r)
        chunk = group.column(column)
        stats = chunk.statistics
        if stats is None or not stats.has_null_count:
            return None
        if stats.has_min_max:
            lo, hi = int(stats.min_raw) * scale, int(stats.max_raw) * scale
        elif stats.null_count == group.num_rows:
            lo = hi = None
        else:
            return None
        first = group.column(0)  # parquet-mr's start of a row group: its first chunk's
        offset = first.data_page_offset  # dictionary page, else first data page
        if first.has_dictionary_page and first.dictionary_page_offset is not None:
            offset = min(offset, first.dictionary_page_offset)
        size = sum(group.column(c).total_compressed_size for c in range(group.num_columns))
        groups.append(RowGroup(r, group.num_rows, int(stats.null_count), lo, hi, offset, size,
                               chunk.total_compressed_size))
    lows = [g.lo for g in groups if g.lo is not None]
    if lows and min(lows) < _oldest(dtype):
        return None  # (Spark may rebase such values from the hybrid calendar)
    return parquet, schema.column(column).path, groups


def _scale(column, dtype: T.DataType) -> int | None:
    """Spark's units per unit of the Parquet column's stored integers, or None when
    Spark would not read its statistics' integers as they are."""
    logical = json.loads(column.logical_type.to_json())
    kind, physical = logical.get("Type"), column.physical_type
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        utc = isinstance(dtype, T.TimestampType)
        if physical != "INT64" or kind != "Timestamp" or logical.get("isAdjustedToUTC") != utc:
            return None
        return {"milliseconds": 1000, "microseconds": 1}.get(logical.get("timeUnit"))
    if isinstance(dtype, T.DateType):
        return 1 if physical == "INT32" and kind == "Date" else None
    bits = _INTEGERS.get(type(dtype))
    if bits is None or physical not in ("INT32", "INT64"):
        return None
    if kind == "None" and column.converted_type == "NONE":
        return 1 if (physical == "INT64") == (bits == 64) else None
    if kind == "Int" and logical.get("isSigned") and logical.get("bitWidth") <= bits:
        return 1
    return None


def _oldest(dtype: T.DataType) -> int:
    if isinstance(dtype, T.DateType):
        return _EPOCH_1583_DAYS
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        return _EPOCH_1900_MICROS
    return -(1 << 63)


def _profile(pid: int, groups: list, strict: bool) -> PartitionProfile:
    """One partition's profile from its row groups (file, key column, RowGroup) in read
    order; with ``strict``, whether its times (NULLs aside, as profile_rows) strictly
    increase is read from the data when the row groups' ranges do (else it is False)."""
    nulls = sum(g.nulls for *_, g in groups)
    count = sum(g.rows for *_, g in groups) - nulls
    ranged = [g for *_, g in groups if g.lo is not None]
    lo = min((g.lo for g in ranged), default=0)
    hi = max((g.hi for g in ranged), default=0)
    ordered = strict and all(a.hi < b.lo for a, b in zip(ranged, ranged[1:]))
    if ordered:
        ordered = all(_strictly_increasing(parquet, column, g) for parquet, column, g in groups)
    return PartitionProfile(pid, count, nulls, lo, hi, ordered)


def _strictly_increasing(parquet: pq.ParquetFile, column: str, group: RowGroup) -> bool:
    """Whether the key's values in one row group strictly increase, NULLs aside (its
    chunk read)."""
    if group.lo is None:
        return True
    t = key_ints(parquet.read_row_group(group.index, columns=[column]).column(0))
    return len(t) == group.rows - group.nulls and bool(np.all(t[1:] > t[:-1]))
