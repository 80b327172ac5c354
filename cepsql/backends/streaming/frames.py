"""Wire a QueryPlan into a streaming DataFrame: pack rows per key as Arrow IPC, keep
them in transformWithState state (a bucket of keys per state key), unpack the decided
matches."""
from __future__ import annotations

import warnings

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType

from cepsql.algebra.expressions import ColumnRef
from cepsql.algebra.pattern import Anchor, pattern_pos, walk as walk_pattern
from cepsql.errors import CepAnalysisError, CepUnsupportedError
from cepsql.exprs.spark_sql import to_spark_sql
from cepsql.compile.query_plan import QueryPlan
from cepsql.runtime.cep_worker import CepWorker
from cepsql.exprs.spark_arrow import arrow_schema
from cepsql.exprs.spark_conf import conf_value
from cepsql.exprs.spark_relevance import where_relevant
from cepsql.backends.streaming.late import late_counter, observe_late, task_counter
from cepsql.backends.streaming.packing import (BUCKET_COLUMN, DEFAULT_BUCKETS, KID_COLUMN,
                                               LATE_COLUMN, PACK_ROWS, ROWS_COLUMN, RowPacker,
                                               RowUnpacker)
from cepsql.backends.streaming.processor import OUTPUT_SCHEMA, MatchProcessor, late_rows_schema
from cepsql.runtime.workers import bind_worker

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER_CONF = "spark.sql.streaming.stateStore.providerClass"
CHANGELOG_CONF = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
# keys per stateful-operator key (packing.py); stored with the state: a checkpoint written
# with another value is refused (ipc.check_layout)
BUCKETS_CONF = "cepsql.streaming.keyBuckets"
# rows the packer gathers from a task's input batches before packing them (packing.py);
# 0: a blob per key and input batch, as before
PACK_ROWS_CONF = "cepsql.streaming.packRows"
# true (default): the stateful operator emits the matches as rows; false: as Arrow IPC
# blobs a RowUnpacker stage (one more Python runner per task) turns into rows -- cheaper
# only when a micro-batch emits very many rows (per-row Python conversion)
OUTPUT_ROWS_CONF = "cepsql.streaming.outputRows"
SHUFFLE_CONF = "spark.sql.shuffle.partitions"
# Spark 4.1+: the state partitions of a new streaming query's stateful operators, recorded
# in its checkpoint in place of SHUFFLE_CONF (batch shuffles keep SHUFFLE_CONF)
STATE_PARTITIONS_CONF = "spark.sql.streaming.internal.stateStore.partitions"
# state partitions per core above which planning a streaming clause warns (see below)
STATE_PARTITIONS_PER_CORE = 4


class StatePartitionsWarning(UserWarning):
    """The stateful operator would get many more state partitions than there are cores."""


def run_streaming_plan(df: DataFrame, plan: QueryPlan, name: str | None = None) -> DataFrame:
    """The plan's matches over the streaming df, as a streaming DataFrame (append mode);
    its late rows are listed by ``spark.cep.late_rows()`` under ``name``."""
    event_column = check_streamable(df, plan)
    use_rocksdb(df)
    # rows no variable can take never reach the packer, the shuffle or the state (as in
    # batch): over ticks with a selective DEFINE most of a micro-batch's rows
    df = where_relevant(df, plan.relevance_filter)
    if plan.prepare_columns:
        df = df.select("*", *[F.expr(to_spark_sql(e)).alias(n) for n, e in plan.prepare_columns])
    bound = bind_worker(plan, arrow_schema(df))
    check_streamable_worker(bound.worker)
    keys = list(plan.partition_columns)
    buckets = int_conf(df.sparkSession, BUCKETS_CONF, DEFAULT_BUCKETS, 1)
    packed_schema = StructType([StructField(BUCKET_COLUMN, IntegerType(), False),
                                StructField(KID_COLUMN, StringType(), False),
                                StructField(ROWS_COLUMN, BinaryType())])
    pack_rows = int_conf(df.sparkSession, PACK_ROWS_CONF, PACK_ROWS, 0)
    packed = df.mapInArrow(RowPacker(keys, buckets, pack_rows), packed_schema)
    sort_keys = plan.sort_keys[len(keys):]
    counter = None if name is None else late_counter(df.sparkSession, name)
    as_rows = bool_conf(df.sparkSession, OUTPUT_ROWS_CONF, True)
    processor = MatchProcessor(bound.worker, event_column, sort_keys, task_counter(counter),
                               buckets, plan.spec, as_rows)
    matches = from_arrow_schema(bound.worker_schema)
    schema = late_rows_schema(matches) if as_rows else OUTPUT_SCHEMA
    out = packed.groupBy(F.col(BUCKET_COLUMN)) \
        .transformWithState(processor, schema, "Append", "EventTime")
    out = observe_late(out, name, counter)
    if as_rows:  # late-count rows out, then the matches' columns
        rows = out.where(F.col(LATE_COLUMN).isNull()).drop(LATE_COLUMN)
    else:
        rows = out.mapInArrow(RowUnpacker(), matches)
    return rows.select(*[F.expr(to_spark_sql(e, strict_division=True)).alias(n)
                         for n, e in bound.final_projection])


def int_conf(spark, key: str, default: int, least: int) -> int:
    """An integer cepsql setting (``default`` when unset); CepAnalysisError naming the key
    when it is not an integer >= least."""
    text = conf_value(spark, key)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least:
        raise CepAnalysisError(f"{key} must be an integer >= {least} (it is {text!r})")
    return value


def bool_conf(spark, key: str, default: bool) -> bool:
    """A true/false cepsql setting (``default`` when unset); CepAnalysisError naming the
    key otherwise."""
    text = conf_value(spark, key)
    if text is None or text == "":
        return default
    if text.strip().lower() not in ("true", "false"):
        raise CepAnalysisError(f"{key} must be true or false (it is {text!r})")
    return text.strip().lower() == "true"


def check_streamable(df: DataFrame, plan: QueryPlan) -> str:
    """The event-time column (first ORDER BY key); raises what the user must change."""
    spec = plan.spec
    if not spec.order_by:
        raise CepAnalysisError("MATCH_RECOGNIZE over a stream needs ORDER BY an event-time "
                               "column with a watermark")
    key = spec.order_by[0]
    pos = getattr(key.expr, "pos", None)
    if not isinstance(key.expr, ColumnRef) or not key.ascending:
        raise CepUnsupportedError("over a stream the first ORDER BY key must be an event-time "
                                  "column in ascending order", pos=pos)
    names = {f.name.lower(): f for f in df.schema.fields}
    field = names.get(key.expr.column.lower())
    if field is None:
        raise CepAnalysisError(f"unknown column {key.expr.column}", pos=pos)
    if field.dataType.typeName() not in ("timestamp", "timestamp_ntz"):
        raise CepAnalysisError(f"over a stream ORDER BY {field.name} must be a TIMESTAMP "
                               f"event-time column (it is {field.dataType.simpleString()})",
                               pos=pos)
    if "spark.watermarkDelayMs" not in (field.metadata or {}):
        raise CepAnalysisError(
            f"the stream has no watermark on its event-time column {field.name}: add "
            f".withWatermark('{field.name}', '10 seconds') (any delay) to the source "
            "DataFrame before registering the view, or write the source as "
            f"`src WATERMARK {field.name} DELAY OF INTERVAL 10 SECONDS`", pos=pos)
    check_streamable_spec(plan)
    return field.name


def check_streamable_spec(plan: QueryPlan) -> None:
    """The clause's own constructs that have no streaming meaning (or no bounded state)."""
    spec = plan.spec
    if plan.break_column is not None:
        raise CepUnsupportedError("STRATEGY STRICT_CONTIGUITY with PARTITION BY is not "
                                  "supported over a stream (it needs the global order)")
    if spec.strategy is None:
        for node in walk_pattern(spec.pattern):
            if isinstance(node, Anchor) and node.kind == "end":
                raise CepUnsupportedError("the $ anchor (end of partition) never matches over "
                                          "an unbounded stream", pos=pattern_pos(spec.pattern))
    elif spec.window is None or spec.window.kind != "time":
        raise CepUnsupportedError("CEP mode over a stream needs WITHIN INTERVAL (a time "
                                  "window bounds what each key keeps)",
                                  pos=getattr(spec.window, "pos", None)
                                  or pattern_pos(spec.pattern))


def check_streamable_worker(worker) -> None:
    """What the bound CEP evaluator cannot carry between chunks (MIN/MAX over strings).
    PREV runs: a closed segment keeps its last rows as the next segment's context; NEXT
    runs: a key reading it never closes its segment (engine.py)."""
    if not isinstance(worker, CepWorker):
        return
    if not worker.streamable():
        raise CepUnsupportedError("MIN/MAX over a string column in DEFINE is not supported "
                                  "in CEP mode over a stream")


def use_rocksdb(df: DataFrame) -> None:
    """transformWithState runs only on the RocksDB state store. Unless the user chose,
    commits write a changelog instead of a snapshot per micro-batch (about half the
    commit time here; snapshots are then made in the background). Warns when the state
    would get many more partitions than there are cores."""
    conf = df.sparkSession.conf
    current = conf.get(PROVIDER_CONF, None) or ""
    if current != ROCKSDB:
        conf.set(PROVIDER_CONF, ROCKSDB)
    if conf.get(CHANGELOG_CONF, None) is None:
        conf.set(CHANGELOG_CONF, "true")
    _warn_many_state_partitions(df)  # here: pattern views and workloads come through too


def state_partitions(spark) -> int:
    """The state partitions a new streaming query of this session gets: Spark (4.1+)
    records STATE_PARTITIONS_CONF in the checkpoint when it is set, else
    spark.sql.shuffle.partitions."""
    for key in (STATE_PARTITIONS_CONF, SHUFFLE_CONF):
        value = spark.conf.get(key, None)
        if value:
            return int(value)
    return 200


def _warn_many_state_partitions(df: DataFrame) -> None:
    """The stateful operator gets state_partitions() partitions when its checkpoint is
    created, for ever; each one loads and commits a RocksDB store every micro-batch, rows
    or not (Spark's default 200 made a 50k-row micro-batch on 2 cores 27x slower than 2
    partitions). Spark reads the count from the session when the query starts, so cepsql
    cannot set it for this query alone: it says what to set (STATE_PARTITIONS_CONF
    leaves batch shuffles alone)."""
    spark = df.sparkSession
    partitions = state_partitions(spark)
    try:
        cores = int(spark.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - Spark Connect: no SparkContext to ask
        return
    if partitions > STATE_PARTITIONS_PER_CORE * max(cores, 1):
        warnings.warn(
            f"a new streaming query's pattern state gets {partitions} partitions with "
            f"{cores} cores, each committed every micro-batch (a fixed cost per "
            f"micro-batch). Set {STATE_PARTITIONS_CONF} (state partitions of new streaming "
            f"queries only; batch shuffles keep {SHUFFLE_CONF}) to about the number of "
            "cores before start(); an existing checkpoint keeps its count "
            "(docs/streaming.md, Throughput and tuning).", StatePartitionsWarning,
            stacklevel=4)
