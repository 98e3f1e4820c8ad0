"""The tool's own Delta tables: their names, where they live, their schemas, and how they are
read and appended to.

Five tables, all beside the inventory table unless a flag puts one elsewhere:

- ``inventory``: every object of the inventoried buckets (``s3://b/warehouse/inventory``, given);
- ``inventory_runs``: one row per bucket per ingest;
- ``inventory_usage``: objects and bytes per table, prefix, storage class and version state;
- ``vacuum_runs``: one row per table per vacuum;
- ``vacuum_deletions``: the deletion ledger, one row per object a vacuum deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DateType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from core.errors import InventoryTableError, spark_error_summary
from core.paths import StorageLocation
from core.session import INTERPRETED_UP_TO_OBJECTS, local_frame, session_default

log = logging.getLogger("inventory_vacuum")

SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"
_DELTA_DEFAULT_SNAPSHOT_PARTITIONS = 50
# 100k actions a partition rebuilt a 100k-file table's snapshot in one task, on one of 2 cores;
# with 50k its dry run took 8.46 s against 8.48 s, no slower (benchmarks/results/plan_sizing.md)
_ACTIONS_PER_SNAPSHOT_PARTITION = 50_000

INVENTORY_RUNS = "inventory_runs"
INVENTORY_USAGE = "inventory_usage"
VACUUM_RUNS = "vacuum_runs"
VACUUM_DELETIONS = "vacuum_deletions"
INGEST_TABLES = (INVENTORY_RUNS, INVENTORY_USAGE)  # what an ingest writes beside the inventory
VACUUM_TABLES = (VACUUM_RUNS, VACUUM_DELETIONS)  # what a vacuum writes beside it


def default_location(inventory_table: str, name: str) -> str:
    """``s3://b/warehouse/inventory`` -> ``s3://b/warehouse/<name>``: the tool's tables live beside
    the inventory table."""
    location = StorageLocation.parse(inventory_table, what="--inventory-table")
    return location.sibling(name).uri


@dataclass(frozen=True)
class ToolTables:
    """Where each of the tool's tables is, for one inventory table.

    Example::

        tables = ToolTables.beside("s3://meta/warehouse/inventory", vacuum_runs=None)
        tables.vacuum_deletions  # 's3://meta/warehouse/vacuum_deletions'
    """

    inventory: str
    inventory_runs: str
    inventory_usage: str
    vacuum_runs: str
    vacuum_deletions: str

    @classmethod
    def beside(cls, inventory_table: str, **given: str | None) -> ToolTables:
        """Each table at the location given for it (a flag), else beside ``inventory_table``."""
        unknown = set(given) - {INVENTORY_RUNS, INVENTORY_USAGE, VACUUM_RUNS, VACUUM_DELETIONS}
        assert not unknown, f"not a table of the tool's: {unknown}"
        names = (INVENTORY_RUNS, INVENTORY_USAGE, VACUUM_RUNS, VACUUM_DELETIONS)
        return cls(inventory_table, *(given.get(n) or default_location(inventory_table, n) for n in names))


# ---- schemas --------------------------------------------------------------------------------

# What Delta's VACUUM ... USING INVENTORY requires: these names, this relative order, these
# types, nullable, no column metadata (Delta compares the StructType for equality).
VACUUM_INVENTORY_SCHEMA = StructType(
    [
        StructField("path", StringType()),
        StructField("length", LongType()),
        StructField("isDir", BooleanType()),
        StructField("modificationTime", LongType()),
    ]
)

INVENTORY_TABLE_SCHEMA = StructType(
    [
        *VACUUM_INVENTORY_SCHEMA.fields,
        StructField("bucket", StringType()),
        StructField("key", StringType()),
        StructField("storage_class", StringType()),
        StructField("e_tag", StringType()),
        StructField("is_multipart_uploaded", BooleanType()),
        StructField("encryption_status", StringType()),
        StructField("intelligent_tiering_access_tier", StringType()),
        StructField("version_id", StringType()),
        StructField("is_latest", BooleanType()),
        StructField("is_delete_marker", BooleanType()),
        StructField("inventory_date", DateType()),
        StructField("inventory_taken_at", TimestampType()),
        StructField("table", StringType()),
    ]
)

# The inventory table's columns that Delta keeps min/max/null statistics of, set when an ingest
# creates the table (``delta.dataSkippingStatsColumns``, Delta 3.0 on): the columns the product
# filters the table on. A table's slice and figures are ranges of ``key``; the rows no table owns
# are ``table IS NULL``; the checks look for a null ``length`` or ``modificationTime``; the figures
# take the maxima of ``inventory_taken_at`` and ``modificationTime``. ``bucket`` is the partition
# column, skipped by its values. Statistics of the other eleven columns (the full ``path`` and the
# ETag among them) cost the write time and skip no file for any of the product's queries. A table
# created before keeps its own setting; docs/ingest.md gives the ALTER TABLE that narrows it.
INVENTORY_STATS_COLUMNS = ("key", "table", "length", "modificationTime", "inventory_taken_at")

INVENTORY_RUNS_SCHEMA = StructType(
    [
        StructField("run_id", StringType()),
        StructField("run_at", TimestampType()),
        StructField("bucket", StringType()),
        StructField("status", StringType()),
        StructField("manifest_key", StringType()),
        StructField("inventory_date", DateType()),
        StructField("inventory_taken_at", TimestampType()),
        StructField("objects", LongType()),
        StructField("bytes", LongType()),
        StructField("noncurrent_objects", LongType()),
        StructField("noncurrent_bytes", LongType()),
        StructField("delete_markers", LongType()),
        StructField("data_files", LongType()),
        StructField("seconds", DoubleType()),
        StructField("error", StringType()),
    ]
)

USAGE_SCHEMA = StructType(
    [
        StructField("bucket", StringType()),
        StructField("inventory_date", DateType()),
        StructField("inventory_taken_at", TimestampType()),
        StructField("state", StringType()),
        StructField("table", StringType()),
        StructField("prefix", StringType()),
        StructField("storage_class", StringType()),
        StructField("intelligent_tiering_access_tier", StringType()),
        StructField("objects", LongType()),
        StructField("bytes", LongType()),
        StructField("small_objects", LongType()),
        StructField("small_bytes", LongType()),
    ]
)

VACUUM_RUNS_SCHEMA = StructType(
    [
        StructField("run_id", StringType()),
        StructField("run_at", TimestampType()),
        StructField("table", StringType()),
        StructField("path", StringType()),
        StructField("table_version", LongType()),
        StructField("mode", StringType()),
        StructField("delete_with", StringType()),
        StructField("dry_run", BooleanType()),
        StructField("retention_hours", DoubleType()),
        StructField("inventory_taken_at", TimestampType()),
        StructField("coverage", DoubleType()),
        StructField("inventory_version", LongType()),
        StructField("planned_files", LongType()),
        StructField("planned_bytes", LongType()),
        StructField("deleted_files", LongType()),
        StructField("deleted_bytes", LongType()),
        StructField("remaining_files", LongType()),
        StructField("already_gone_files", LongType()),
        StructField("kept_objects", LongType()),
        StructField("delete_requests", LongType()),
        StructField("seconds", DoubleType()),
        StructField("status", StringType()),
        StructField("reason", StringType()),
        # why Delta's dry run was not asked (its plan was known to hold nothing to delete); null
        # when Delta planned, and in a restore's row
        StructField("delta_plan_skipped", StringType()),
        # a restore's row (mode "restore"): delete markers removed, the bytes made current again
        # (measured), and the selected objects left as they were
        StructField("restored_files", LongType()),
        StructField("restored_bytes", LongType()),
        StructField("not_restored_files", LongType()),
    ]
)

LEDGER_SCHEMA = StructType(
    [
        StructField("run_id", StringType()),
        StructField("table", StringType()),
        StructField("path", StringType()),
        StructField("bucket", StringType()),
        StructField("key", StringType()),
        StructField("length", LongType()),
        StructField("deleted_with", StringType()),
        StructField("deleted_at", TimestampType()),
        # on a versioned bucket, the delete marker the delete made (as DeleteObjects named it)
        StructField("delete_marker_version_id", StringType()),
        # a restore's row: the restore's run id and time; the other columns are the deletion's
        # (run_id, deleted_at) and what the restore measured (length, the marker it removed)
        StructField("restored_by", StringType()),
        StructField("restored_at", TimestampType()),
        # when the vacuum's delete step for the table began (the driver's clock): the earliest
        # time a delete marker of the row's delete can have
        StructField("delete_started_at", TimestampType()),
    ]
)
# the ledger's first columns: a ledger written before the others were added has only these
LEDGER_CORE_COLUMNS = ("run_id", "table", "path", "bucket", "key", "length", "deleted_with", "deleted_at")


# ---- readers and appenders ------------------------------------------------------------------


def read_inventory(
    spark: SparkSession,
    location: str,
    version: int | None = None,
    *,
    required: StructType = INVENTORY_TABLE_SCHEMA,
    purpose: str = "",
    check_types: bool = True,
) -> DataFrame:
    """The inventory Delta table (at ``version``, if given); an :class:`InventoryTableError` when it
    cannot be read, lacks a column of ``required`` or (``check_types``) has one of another type.
    ``purpose`` ends the message of a missing column (what the caller could not do without it)."""
    try:
        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        frame = reader.load(location)
        types = {f.name: f.dataType for f in frame.schema}
    except Exception as error:
        raise InventoryTableError(
            f"inventory table {location} cannot be read: {spark_error_summary(error)}"
        ) from None
    missing = [f.name for f in required if f.name not in types]
    if missing:
        raise InventoryTableError(
            f"inventory table {location} lacks column(s) {', '.join(missing)}{purpose and ': ' + purpose}"
        )
    wrong = [
        f"{f.name} is {types[f.name].simpleString()}, expected {f.dataType.simpleString()}"
        for f in required
        if check_types and types[f.name] != f.dataType
    ]
    if wrong:
        raise InventoryTableError(f"inventory table {location}: column {'; '.join(wrong)}")
    return frame


def read_ledger(spark: SparkSession, location: str) -> DataFrame:
    """The deletion ledger with every column of :data:`LEDGER_SCHEMA`: a column an older ledger
    lacks reads as null (no delete marker recorded, not restored)."""
    frame = spark.read.format("delta").load(location)
    for column in LEDGER_SCHEMA:
        if column.name not in frame.columns:
            frame = frame.withColumn(column.name, F.lit(None).cast(column.dataType))
    return frame


def is_ledger(spark: SparkSession, location: str) -> bool:
    """True when ``location`` holds a Delta table with the ledger's first columns: one this tool
    wrote, which an append may give the newer columns (``mergeSchema``)."""
    if not delta_table_exists(spark, location):
        return False
    return set(LEDGER_CORE_COLUMNS) <= set(spark.read.format("delta").load(location).columns)


def delta_table_exists(spark: SparkSession, location: str) -> bool:
    """True when ``location`` itself has a ``_delta_log/``.

    Not ``DeltaTable.isDeltaTable``: Delta walks up to the nearest ``_delta_log``, so a table path
    below another table (a ledger under a warehouse table, say) would be taken for its partition.
    """
    jvm = spark._jvm
    assert jvm is not None
    log_path = jvm.org.apache.hadoop.fs.Path(location.rstrip("/") + "/_delta_log")
    file_system = log_path.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf())
    return bool(file_system.exists(log_path))


def append_run_rows(
    spark: SparkSession, location: str, schema: StructType, run_id: str, records: Sequence[Mapping[str, Any]]
) -> bool:
    """Append one row per record (plus ``run_id`` and ``run_at``) to the Delta table at ``location``;
    whether they were appended (a failure is logged, not raised).

    Records may hold more keys than the schema (ignored) and ISO strings for dates and
    timestamps (parsed). The table is created on first use.
    """
    if not records:
        return True
    run_at = datetime.now(timezone.utc)
    rows = [
        tuple(_typed({"run_id": run_id, "run_at": run_at, **record}.get(f.name), f.dataType) for f in schema)
        for record in records
    ]
    try:
        # a history table written by an older version gains the new columns; any other table
        # at that location is never reshaped (the append then fails and warns)
        append_to_own_table(
            local_frame(spark, rows, schema), location, lambda: _is_history_table(spark, location)
        )
    except Exception as error:  # the run itself is done; a history failure must not hide its result
        log.warning(
            "could not append %d row(s) to the history table %s: %s",
            len(rows),
            location,
            spark_error_summary(error),
        )
        return False
    return True


def append_to_own_table(rows: DataFrame, location: str, ours: Callable[[], bool]) -> None:
    """Append ``rows`` to the Delta table at ``location`` (created on first use). When Delta refuses
    them for their schema (a table of the tool's that an older version wrote lacks the newer
    columns) and ``ours()`` says the table is the tool's, they are appended again with
    ``mergeSchema``, which adds the columns; another table there is never reshaped, and its
    refusal is raised.

    ``ours()`` is asked only on that refusal: asked before every append, it read the table's log
    on every run (5 more requests to S3 an append to the history, 3 of them LISTs, on the local
    S3) for the rare run that meets an older table."""
    writer = rows.write.format("delta").mode("append")
    # At every tenth commit Delta rebuilds the table's whole state to write a checkpoint, in the
    # snapshot partitions of the session: sized to this table (snapshots_sized) unless the job or
    # the session has a size (a vacuum appends its ledger rows on the vacuumed table's session,
    # which keeps that table's). In a one-table dry run on the table and local S3 of
    # benchmarks/one_table.py (Java 17), a history append whose commit wrote the table's first
    # checkpoint took 6.0 and 5.9 s in Delta's default 50 tasks, against about 0.55 s for an
    # append that wrote none; sized, 1.9 and 2.0 s (two runs each, in turn)
    with snapshots_sized(rows.sparkSession, [location]):
        try:
            writer.save(location)
        except Exception as error:
            if _SCHEMA_REFUSED not in str(error) or not ours():
                raise
            writer.option("mergeSchema", "true").save(location)


# Delta's refusal of an append whose columns the table lacks (DELTA_METADATA_MISMATCH, 3.3 to 4.4)
_SCHEMA_REFUSED = "A schema mismatch detected when writing to the Delta table"


def _is_history_table(spark: SparkSession, location: str) -> bool:
    """True when ``location`` holds a Delta table with this tool's ``run_id``/``run_at`` columns."""
    if not delta_table_exists(spark, location):
        return False
    columns = set(spark.read.format("delta").load(location).columns)
    return {"run_id", "run_at"} <= columns


def _typed(value: Any, data_type: DataType) -> Any:
    if isinstance(value, str) and isinstance(data_type, TimestampType):
        return datetime.fromisoformat(value)
    if isinstance(value, str) and isinstance(data_type, DateType):
        return date.fromisoformat(value)
    return value


def snapshot_partitions(location: StorageLocation, default_parallelism: int) -> int:
    """How many partitions Delta should rebuild this table's snapshot in: sized to the table.

    Delta's default (50) suits a table of millions of files on a cluster; a small table pays
    for 50 tasks on every snapshot. The table's ``_delta_log/_last_checkpoint`` says how many
    actions its checkpoint holds (one small GET): a partition per 50k actions, at most Delta's
    default. Without a checkpoint (a young table, a few commits) the cluster's parallelism, at most
    Delta's default.
    """
    try:
        actions = checkpoint_actions(location)
    except Exception:  # only a size: an unreadable checkpoint counts as none
        actions = None
    if actions is None:
        return max(1, min(_DELTA_DEFAULT_SNAPSHOT_PARTITIONS, default_parallelism))
    return max(1, min(_DELTA_DEFAULT_SNAPSHOT_PARTITIONS, -(-actions // _ACTIONS_PER_SNAPSHOT_PARTITION)))


def checkpoint_actions(location: StorageLocation) -> int | None:
    """How many actions the table's newest checkpoint holds, from its
    ``_delta_log/_last_checkpoint`` (one small GET); None when there is no such file (no table, or
    a table of a few commits: Delta checkpoints every 10th). Raises when the file cannot be read
    or names no size."""
    import json

    from botocore.exceptions import ClientError

    key = f"{location.key}/_delta_log/_last_checkpoint"
    try:
        if location.is_s3:
            from core.s3 import s3_client

            text = s3_client().get_object(Bucket=location.bucket, Key=key)["Body"].read()
        else:
            with open("/" + key, "rb") as handle:
                text = handle.read()
    except FileNotFoundError:
        return None
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NoSuchBucket"):
            return None
        raise
    return int(json.loads(text)["size"])


def small_log(table: str) -> bool:
    """The tool's own Delta table at ``table`` (the inventory, the usage table) is small enough
    for its snapshot to be rebuilt on Spark's interpreted evaluation: its checkpoint holds at most
    :data:`~core.session.INTERPRETED_UP_TO_OBJECTS` actions, or it has none (a few commits, or no
    table yet). A location that does not parse, or a checkpoint that cannot be read or names no
    size, is not small."""
    try:
        actions = checkpoint_actions(StorageLocation.parse(table, what="table"))
    except Exception:
        return False
    return actions is None or actions <= INTERPRETED_UP_TO_OBJECTS


def snapshot_sized_by_user(spark: SparkSession) -> bool:
    """The user set Delta's snapshot partitions: every table and job keeps that setting."""
    return spark.conf.get(SNAPSHOT_PARTITIONS, None) is not None


@contextmanager
def snapshots_sized(spark: SparkSession, tables: Sequence[str | None]) -> Iterator[None]:
    """While a job reads and writes ``tables`` (locations; None: not used), Delta rebuilds their
    snapshots in as many partitions as the biggest of them needs (:func:`snapshot_partitions`),
    unless the job's configuration sets ``spark.databricks.delta.snapshotPartitions``; ``spark``
    has its own setting back after.

    The ingest and the chargeback read the snapshots of the tool's tables several times (an
    ingest: the last counts, the partition it replaces, the commit, the read-back); at Delta's
    default each is 50 tasks for a log of a few hundred actions, most of whose time goes to
    generating code. Every append to a table of the tool's is sized so too
    (:func:`append_to_own_table`: the checkpoint of every tenth commit). The setting changes how
    Delta partitions its log replay, never what a snapshot holds. It is the session's while the
    block runs: other threads on the same session see it too (it is put back only if it is still
    the one set here).
    """
    partitions = None if snapshot_sized_by_user(spark) else _most_partitions(spark, tables)
    with session_default(spark, SNAPSHOT_PARTITIONS, None if partitions is None else str(partitions)):
        yield


def _most_partitions(spark: SparkSession, tables: Sequence[str | None]) -> int | None:
    """The most snapshot partitions any of ``tables`` needs; None if one cannot be sized."""
    parallelism = spark.sparkContext.defaultParallelism
    sizes = []
    for table in tables:
        if table:
            try:
                sizes.append(snapshot_partitions(StorageLocation.parse(table, what="table"), parallelism))
            except Exception as error:  # only a size: Delta's own default then
                log.info("snapshot partitions of %s: %s", table, error)
                return None
    return max(sizes, default=None)
