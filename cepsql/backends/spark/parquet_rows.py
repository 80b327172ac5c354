"""The ordered scan's overlap rows read on the driver from local Parquet files: no job.

With gap pushdown the first query over new time-ordered Parquet files plans from the
footers (parquet_profile.py) but used to collect the rows around each partition border
with a second Spark job (``OrderedScan._overlap_rows``; the warm query takes them from
profile_cache's memo). Those rows are few, they lie in row groups the footers locate,
and the frame the job reads is a projection straight off the Parquet scan. So the driver
reads them itself:

1. per input partition, the row groups its task reads (``partition_row_groups``); of
   those whose key range meets a wanted time range, only the columns the projection
   references (pyarrow), the rows in the ranges kept;
2. the projection (the query's prepared columns, the gap flag) evaluated by Spark itself
   on the driver: the rows become a LocalRelation in place of the file relation under
   the frame's own Project, which Spark's optimizer folds (ConvertToLocalRelation, the
   interpreted projection: the same expressions, no job), then Arrow as ``toArrow``
   gives it (ArrowConverters on the driver).

Every doubt answers None (the caller runs the job): another plan shape, a
nondeterministic projection, directory partition columns, a column whose Arrow type is
not the one Spark reads (e.g. INT96, unsigned, binary as string), nested types, legacy
calendar files, more than MAX_ROWS rows, any error. And the tasks compare the rows
their neighbours got with their own kept rows, values included (ordered_scan._lent_rows),
so a difference from what Spark reads fails loudly rather than silently: this path is
used with gap pushdown only, where that check runs.
"""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_type

from cepsql.exprs.spark_arrow import arrow_schema
from cepsql.exprs.spark_conf import conf_value
from cepsql.backends.spark.gap_scan import key_ints
from cepsql.backends.spark.parquet_profile import (case_sensitive, parquet_relation,
                                                   partition_row_groups, plain_file_scan)

__all__ = ["MAX_ROWS", "driver_rows"]

MAX_ROWS = 200_000  # more rows than this: the job (the driver's interpreted projection)
_LEGACY = (b"org.apache.spark.legacyDateTime", b"org.apache.spark.legacyINT96")


def driver_rows(frame: DataFrame, key: str, spans: list[tuple[int, int]],
                pid_column: str) -> pa.Table | None:
    """frame's rows whose ``key`` (as an integer of its unit) lies in one of ``spans``
    (inclusive), each with its input partition's id in ``pid_column`` (int32), as
    ``frame.toArrow()`` would give them; None when they cannot be read without a job."""
    try:
        return _rows(frame, key, spans, pid_column)
    except Exception:  # noqa: BLE001  (no JVM plan, an unreadable file: the job answers)
        return None


def _rows(frame: DataFrame, key: str, spans: list[tuple[int, int]],
          pid_column: str) -> pa.Table | None:
    execution = frame._jdf.queryExecution()
    if not execution.analyzed().deterministic():
        return None
    project = execution.optimizedPlan()
    if not project.getClass().getName().endswith(".Project"):
        return None
    relation = parquet_relation(project)
    scan = plain_file_scan(execution)
    if relation is None or scan is None or relation.relation().partitionSchema().nonEmpty():
        return None
    source = _key_attribute(project, key)
    if source is None:
        return None
    dtype = frame.schema[key].dataType
    read = partition_row_groups(frame, scan, str(source.name()), dtype)
    if read is None:
        return None
    references = project.references()
    output = relation.output()
    attributes = [output.apply(i) for i in range(output.size())
                  if references.contains(output.apply(i))]
    names = [str(a.name()) for a in attributes]
    fields = {f.name: f.dataType for f in
              T.StructType.fromJson(json.loads(relation.schema().json())).fields}
    types = [fields[n] for n in names]
    exact = case_sensitive(frame.sparkSession)
    parts, pids = [], []
    for pid, groups in enumerate(read):
        for parquet, column, group in groups:
            if group.lo is None or not any(group.lo <= hi and lo <= group.hi
                                           for lo, hi in spans):
                continue
            table = _read(parquet, column, group.index, names, types, dtype, spans, exact)
            if table is None:
                return None
            if table.num_rows:
                parts.append(table)
                pids.append(np.full(table.num_rows, pid, np.int32))
    want = arrow_schema(frame).append(pa.field(pid_column, pa.int32(), nullable=False))
    if not parts:
        return want.empty_table()
    rows = pa.concat_tables(parts)
    if rows.num_rows > MAX_ROWS:
        return None
    evaluated = _projected(frame, project, attributes, rows, types)
    if evaluated is None:
        return None
    return evaluated.append_column(pid_column, pa.array(np.concatenate(pids))).cast(want)


def _key_attribute(project, key: str):
    """The file relation's attribute the projection outputs as ``key`` (as it is or
    renamed), else None."""
    items = project.projectList()
    for i in range(items.size()):
        item = items.apply(i)
        if str(item.name()) != key:
            continue
        ref = item.child() if item.getClass().getName().endswith(".Alias") else item
        if ref.getClass().getName().endswith(".AttributeReference") and \
                project.child().outputSet().contains(ref):
            return ref
        return None
    return None


def _read(parquet, column: str, index: int, names: list[str], types: list[T.DataType],
          dtype: T.DataType, spans: list[tuple[int, int]], exact: bool) -> pa.Table | None:
    """Row group ``index``'s rows whose key (file column ``column``, Spark type dtype)
    lies in a span, in the columns ``names`` as Spark reads them (types checked), or
    None."""
    metadata = parquet.metadata.metadata or {}
    if any(k in metadata for k in _LEGACY):
        return None  # (Spark may rebase such files' dates and times)
    files = parquet.schema_arrow.names
    chosen = []
    for name in names:
        found = [f for f in files if f == name or (not exact and f.lower() == name.lower())]
        if len(found) != 1:
            return None  # (a column the file lacks reads as NULLs in Spark)
        chosen.append(found[0])
    group = parquet.read_row_group(index, columns=sorted(set(chosen) | {column}))
    for name, spark_type in zip(chosen, types):
        if not isinstance(spark_type, T.AtomicType) or \
                from_arrow_type(group.schema.field(name).type, True) != spark_type:
            return None
    times = group.column(column).cast(to_arrow_type(dtype, timezone="UTC"))
    valid = np.asarray(times.is_valid())
    t = np.zeros(len(valid), np.int64)
    t[valid] = key_ints(times)
    keep = np.zeros(len(valid), bool)
    for lo, hi in spans:
        keep |= (t >= lo) & (t <= hi)
    keep &= valid
    return pa.Table.from_arrays([group.column(c) for c in chosen], names).filter(keep)


def _projected(frame: DataFrame, project, attributes: list, rows: pa.Table,
               types: list[T.DataType]) -> pa.Table | None:
    """frame's projection over ``rows`` (the file relation's ``attributes``), evaluated by
    Spark's optimizer on the driver (a LocalRelation it folds), as Arrow; None when
    Spark would not fold it (then it would run a job)."""
    spark = frame.sparkSession
    jvm = spark._jvm
    schema = T.StructType([T.StructField(a, t, True) for a, t in
                           zip(rows.column_names, types)])
    local = spark.createDataFrame(rows, schema=schema)._jdf.queryExecution().analyzed()
    if not local.getClass().getName().endswith(".LocalRelation"):
        return None  # (more bytes than spark.sql.execution.arrow.localRelationThreshold)
    listed = jvm.java.util.ArrayList()
    for a in attributes:
        listed.add(a)
    logical = jvm.org.apache.spark.sql.catalyst.plans.logical
    output = jvm.scala.jdk.javaapi.CollectionConverters.asScala(listed).toList()
    relation = logical.LocalRelation(output, local.data(), False,
                                     getattr(logical.LocalRelation, "apply$default$4")())
    dataset = getattr(jvm.org.apache.spark.sql.classic.Dataset, "ofRows")(
        spark._jsparkSession, logical.Project(project.projectList(), relation))
    folded = dataset.queryExecution().optimizedPlan()
    if not folded.getClass().getName().endswith(".LocalRelation"):
        return None
    converters = getattr(getattr(jvm.org.apache.spark.sql.execution.arrow,
                                 "ArrowConverters$"), "MODULE$")
    large = (conf_value(spark, "spark.sql.execution.arrow.useLargeVarTypes", "false")
             or "").strip().lower() == "true"
    zone = spark._jsparkSession.sessionState().conf().sessionLocalTimeZone()
    batches = converters.toBatchWithSchemaIterator(
        folded.data().iterator(), folded.schema(), rows.num_rows + 1, (1 << 62), zone, True,
        large)
    tables = []
    while batches.hasNext():
        tables.append(pa.ipc.open_stream(bytes(batches.next())).read_all())
    if not tables:
        return None
    out = pa.concat_tables(tables)
    return out if out.num_rows == rows.num_rows else None
