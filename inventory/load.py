"""Load verified deliveries with Spark into the bucket-partitioned inventory Delta table.

Each bucket's partition is replaced with one atomic Delta commit, in files of contiguous key
ranges (:mod:`inventory.layout`), and the delivery is summed into usage rows
(:mod:`inventory.usage`: the run's figures, noncurrent versions, the chargeback's trend). Every
row is checked (its bucket, a key, a size and a date) before anything is committed. There are two
ways to do that:

- **Checked while written, one read of the delivery.** When the delivery has no version fields
  (every row is a current object, so every row is written), its data files total at least
  :data:`READ_ONCE_FROM_BYTES`, and the usage table holds the bucket's counts from an earlier
  delivery, the ranges are cut from those counts and the write itself checks each row: a bad row
  fails the write's tasks, so Delta commits nothing. The usage rows are then summed from the
  partition just written (at the version this ingest committed), which holds the very same rows,
  or from the delivery if that cannot be read back.
- **Checked first, two reads.** Otherwise (the first delivery of a bucket, no usage table, a
  small delivery, a versioned delivery, whose noncurrent rows are counted but never written) one
  Spark job checks every row and sums the usage rows, and a second writes, cut from the first
  job's counts.

The ranges decide only which task writes a row, never whether it is written: counts a day old
cost balance or file skipping at most. A failure before the commit leaves the inventory table as
it was; after it, the bucket is loaded (a failure to count its figures from both the partition
and the delivery says so in its error). The usage rows of the bucket and date are replaced last; that derived table failing only warns.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import date
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from core.errors import InventoryDataError, InventoryVacuumError, spark_error_summary
from core.paths import StorageLocation
from core.registry import TableRegistry
from core.session import (
    INTERPRETED_UP_TO_BYTES,
    codegen_set_by_user,
    interpreted_while,
    job_group,
    local_frame,
    name_jobs,
    session_default,
    strings_schema,
)
from core.tables import (
    INVENTORY_RUNS_SCHEMA,
    INVENTORY_STATS_COLUMNS,
    append_run_rows,
    small_log,
    snapshots_sized,
)
from inventory.layout import KeyGroup, KeyRange, key_groups, key_ranges, laid_out, write_partitions
from inventory.manifest import Delivery, find_delivery
from inventory.schema import (
    csv_read_schema,
    is_current_version,
    normalise,
    snake_case,
    sql_string,
    tag_owning_table,
    with_optional_columns,
)
from inventory.usage import (
    CURRENT,
    DELETE_MARKER,
    NONCURRENT,
    OPTIONAL_COLUMNS,
    USAGE_KEYS,
    USAGE_SUMS,
    read_usage,
    usage_aggregate,
    usage_sums,
    with_usage_keys,
    write_usage,
)

log = logging.getLogger("inventory_vacuum")

# The fields that make a delivery versioned: its rows may be noncurrent versions or delete markers
_VERSION_FIELDS = ("version_id", "is_latest", "is_delete_marker")
# What a Spark task raises on a row the delivery checks would count (a delivery checked while written)
_BAD_ROW = "inventory-vacuum: a row fails the delivery checks"
# How many of the inventory table's newest commits are searched for the one an ingest just made
_OWN_COMMIT_AMONG = 20
# Spark's setting for how many files a write task may keep open, one per partition value, and
# the ingest's: one more than a bucket's one value, since the writer sorts once the limit is met
UNSORTED_PARTITION_WRITE = "spark.sql.maxConcurrentOutputFileWriters"
_UNSORTED_WRITERS = "2"
# Spark's codec for the Parquet files it writes (snappy by default), and the inventory table's:
# zstd files take half the bytes of snappy's, so the write uploads and every later read of the
# table (a vacuum's slice, a chargeback) fetches half as much, and on 2 cores the write itself was no
# slower (docs/performance.md). Every Spark line the tool supports, Delta and delta-rs read them.
PARQUET_CODEC = "spark.sql.parquet.compression.codec"
INVENTORY_CODEC = "zstd"
# A delivery whose data files (the manifest's sizes) total fewer bytes is checked first: reading
# the bucket's counts and summing the partition written cost a few seconds whatever the size,
# more than the second read of a small delivery. Measured on 2 cores (docs/performance.md): read
# once, Parquet of 57 MB took 0.99x as long as checked first, of 114 MB 1.04x, of 228 MB 0.98x
# and of 569 MB 0.91x in one run and 1.10x in the next
READ_ONCE_FROM_BYTES = 128 * 1024 * 1024
# What a usage row or a check reads of a tagged row besides its key (:func:`written_usage`)
_TAGGED_GROUP_COLUMNS = (
    "bucket",
    "inventory_date",
    "inventory_taken_at",
    "is_latest",
    "is_delete_marker",
    "table",
    "storage_class",
    "intelligent_tiering_access_tier",
)


@dataclass(frozen=True)
class IngestRequest:
    """What one ``ingest`` run loads, and where."""

    destination: StorageLocation
    source_buckets: tuple[str, ...]
    config_id: str
    inventory_table: str
    inventory_date: date | None = None
    registry: TableRegistry | None = None
    runs_table: str | None = None
    usage_table: str | None = None


@dataclass
class BucketResult:
    """The outcome for one source bucket (``status`` is ``ok`` or ``failed``)."""

    bucket: str
    status: str
    rows: int = 0
    bytes: int = 0
    data_files: int = 0
    manifest_key: str | None = None
    inventory_taken_at: str | None = None
    seconds: float = 0.0
    error: str | None = None
    noncurrent_objects: int = 0
    noncurrent_bytes: int = 0
    delete_markers: int = 0
    inventory_date: str | None = None
    # the delivery was read once: its rows checked by the write itself (see the module's notes)
    checked_while_writing: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class IngestResult:
    buckets: list[BucketResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(b.status == "ok" for b in self.buckets)

    def to_dict(self) -> dict[str, Any]:
        return {"buckets": [b.to_dict() for b in self.buckets]}


def read_delivery(spark: SparkSession, delivery: Delivery) -> DataFrame:
    """The rows of every data file of ``delivery``, as one DataFrame in AWS's column names."""
    uris = delivery.data_file_uris()
    if delivery.file_format == "Parquet":
        return spark.read.parquet(*uris)
    if delivery.file_format == "ORC":
        return spark.read.orc(uris)
    return (
        spark.read.schema(csv_read_schema(delivery.fields))
        .option("header", "false")
        .option("mode", "FAILFAST")
        .option("escape", '"')
        .csv(uris)
    )


def normalised_delivery(spark: SparkSession, delivery: Delivery) -> tuple[DataFrame, bool]:
    """Every row of a delivery in the inventory table's schema (``table`` still null), and whether
    the delivery may be versioned: its manifest's ``fileSchema`` or the columns Spark reads (the
    schema of one Parquet or ORC file) name a version field."""
    raw = read_delivery(spark, delivery)
    versioned = any(snake_case(column) in _VERSION_FIELDS for column in (*raw.columns, *delivery.fields))
    rows = normalise(
        raw,
        file_format=delivery.file_format,
        inventory_date=delivery.inventory_date,
        inventory_taken_at_ms=delivery.inventory_taken_at_ms,
    )
    return rows, versioned


def check_conditions(bucket: str) -> dict[str, Column]:
    """Each check's name and the rows no delivery of ``bucket`` may hold (:func:`delivery_checks`)."""
    return {
        "foreign_rows": F.col("bucket").isNull() | (F.col("bucket") != bucket),
        "keyless_rows": F.col("key").isNull() | (F.col("key") == ""),
        "incomplete_rows": is_current_version()
        & (F.col("length").isNull() | F.col("modificationTime").isNull()),
    }


def delivery_checks(bucket: str) -> list[Column]:
    """Aggregates that count the rows no delivery of ``bucket`` may hold (summed per usage group).

    Counts only: an aggregate of a string (an example of a foreign bucket, say) has a buffer
    Spark's hash aggregation cannot hold, and it would sort the whole delivery by the usage keys
    instead (a quarter of an ingest's task time at 4M rows). The error's example is looked up by
    :func:`bad_rows_error` only when a row was counted.
    """
    return [F.count(F.when(rows, 1)).alias(name) for name, rows in check_conditions(bucket).items()]


def delivery_figures(usage: DataFrame) -> dict[str, Any]:
    """The run's counts and byte totals, and the checks, summed from the delivery's usage rows."""

    def total(column: Column) -> Column:
        return F.coalesce(F.sum(column), F.lit(0))

    def of_state(state: str, column: str) -> Column:
        return total(F.when(F.col("state") == state, F.col(column)))

    figures = usage.agg(
        of_state(CURRENT, "objects").alias("objects"),
        of_state(CURRENT, "bytes").alias("bytes"),
        of_state(NONCURRENT, "objects").alias("noncurrent_objects"),
        of_state(NONCURRENT, "bytes").alias("noncurrent_bytes"),
        of_state(DELETE_MARKER, "objects").alias("delete_markers"),
        total(F.col("foreign_rows")).alias("foreign_rows"),
        total(F.col("keyless_rows")).alias("keyless_rows"),
        total(F.col("incomplete_rows")).alias("incomplete_rows"),
    ).first()
    assert figures is not None
    return figures.asDict()


def bad_rows_error(figures: dict[str, Any], delivery: Delivery, rows: DataFrame) -> InventoryDataError | None:
    """The error for the rows :func:`delivery_checks` counted in ``rows``, or None when there are
    none. A foreign bucket's name is looked up in ``rows`` (a job of its own, on this error only;
    if it fails, the error names no example)."""
    where = delivery.manifest_uri
    if figures["foreign_rows"]:
        bucket = delivery.source_bucket
        try:
            example = rows.where(F.col("bucket") != bucket).select("bucket").first()
            named = f"bucket {example[0] if example is not None else None!r}"
        except Exception as error:  # only the example: the count is the finding
            log.info("an example of the foreign rows of %s: %s", where, spark_error_summary(error))
            named = "another bucket"
        return InventoryDataError(
            f"{where}: {figures['foreign_rows']} row(s) name {named}, not the manifest's {bucket!r}"
        )
    if figures["keyless_rows"]:
        return InventoryDataError(f"{where}: {figures['keyless_rows']} row(s) have no key")
    if figures["incomplete_rows"]:
        return InventoryDataError(
            f"{where}: {figures['incomplete_rows']} object row(s) lack Size or LastModifiedDate"
        )
    return None


def checked_rows(rows: DataFrame, bucket: str) -> DataFrame:
    """``rows`` that fail the Spark task holding a row :func:`delivery_checks` would count (the
    write's own check of every row it writes, current rows only)."""
    bad = (
        F.col("bucket").isNull()
        | (F.col("bucket") != bucket)
        | F.col("key").isNull()
        | (F.col("key") == "")
        | F.col("length").isNull()
        | F.col("modificationTime").isNull()
    )
    # the key is written, so Spark evaluates this for every row it writes
    return rows.withColumn("key", F.when(bad, F.raise_error(F.lit(_BAD_ROW))).otherwise(F.col("key")))


def last_key_groups(
    spark: SparkSession, usage_table: str, registry: TableRegistry | None, bucket: str
) -> list[KeyGroup] | None:
    """The bucket's key groups (:func:`inventory.layout.key_groups`) as its newest delivery in the
    usage table counted them, or None when it has none (or none with an object)."""
    usage = read_usage(spark, usage_table)
    if usage is None:
        return None
    try:
        mine = usage.where((F.col("bucket") == bucket) & (F.col("state") == CURRENT))
        newest = mine.agg(F.max("inventory_date")).first()
        if newest is None or newest[0] is None:
            return None
        groups = key_groups(mine.where(F.col("inventory_date") == newest[0]), registry, bucket)
    except Exception as error:  # only a layout's estimate: the checked-first path needs none
        log.info("no counts of bucket %s in %s: %s", bucket, usage_table, spark_error_summary(error)[:200])
        return None
    return groups if any(group.objects for group in groups) else None


def write_inventory(
    rows: DataFrame,
    ranges: Sequence[KeyRange] | None,
    objects: int,
    partitions: int,
    inventory_table: str,
    bucket: str,
    commit_tag: str | None = None,
) -> None:
    """Replace ``bucket``'s partition of the inventory table with ``rows`` (current, tagged), in
    ``partitions`` files of about ``objects / partitions`` rows cut at ``ranges``, zstd-compressed
    unless the job sets its own codec; the commit's ``userMetadata`` is ``commit_tag`` when one is
    given."""
    spark = rows.sparkSession
    name_jobs(spark, "write inventory")
    writer = (
        # contiguous key ranges per file: Delta's min/max stats skip most files
        laid_out(rows, ranges, rows_per_file=-(-objects // partitions))
        .write.format("delta")
        .mode("overwrite")
        # replaceWhere is dynamic partition overwrite of exactly this bucket, which also empties
        # the partition when the bucket is now empty, and Delta checks every row against it.
        .option("replaceWhere", f"bucket = '{sql_string(bucket)}'")
        .partitionBy("bucket")
        # a table property: it takes effect when this write creates the table, and is ignored after
        .option("delta.dataSkippingStatsColumns", ",".join(INVENTORY_STATS_COLUMNS))
    )
    if commit_tag is not None:
        writer = writer.option("userMetadata", commit_tag)
    # A partitioned write sorts each task's rows by the partition column first, unless their order
    # already has it (a file sorted by key) or the write may keep files open for several values:
    # then it writes rows as they come until as many files are open as the setting allows, and
    # sorts the rest. Here the column is the bucket, one value, so a limit of 2 is never reached
    # and nothing is sorted (docs/performance.md); at 1 the writer would sort from its first
    # file on. Rows of another value would be sorted and written still: the setting changes the
    # order of the work, never which rows are written.
    # The job's own codec, when its configuration sets one, wins over the inventory table's.
    with (
        session_default(spark, UNSORTED_PARTITION_WRITE, _UNSORTED_WRITERS),
        session_default(spark, PARQUET_CODEC, INVENTORY_CODEC),
    ):
        writer.save(inventory_table)


def own_commit(spark: SparkSession, inventory_table: str, commit_tag: str) -> int:
    """The version of the inventory table that the commit tagged ``commit_tag`` made."""
    target = "delta.`" + inventory_table.replace("`", "``") + "`"
    for row in spark.sql(f"DESCRIBE HISTORY {target} LIMIT {_OWN_COMMIT_AMONG}").collect():
        if row["userMetadata"] == commit_tag:
            return int(row["version"])
    raise InventoryVacuumError(
        f"{inventory_table}: the ingest's commit is not among its {_OWN_COMMIT_AMONG} newest"
    )


def written_usage(written: DataFrame, registry: TableRegistry | None, bucket: str) -> DataFrame:
    """The usage rows, with :func:`delivery_checks`, of ``bucket``'s partition just written, a
    tagged row's key read from its table instead of the inventory table.

    A usage row needs of a key only its first component (its ``prefix``, :func:`prefix_column`
    at depth 1) and that it is not empty (a check). A row tagged with a registered table of
    ``bucket`` lies below that table's key, on a component boundary, so both follow from the
    table: its key is given as the first component of its table's key plus ``/``, and the key
    column is read only from the files Delta's statistics say hold an untagged row. The tagged
    rows are first summed by table and by the other columns a usage row or a check reads (the
    key excepted), and only those sums are given their table's key and summed into usage rows: a
    hash aggregation of a few short columns over every row, instead of the eight usage keys with
    a prefix cut from each row's key (at 4M rows, 3.6 to 4.4 s against 5.8 to 7.6 s;
    docs/performance.md). The key's check then counts a group's objects at a time. The table is
    looked up by a broadcast hash join (a map expression of the tables would be searched row by
    row on Spark 3.5 and 4.0). A tagged row whose table the registry does not name (none is: the
    rows were tagged from this registry) fails the Spark task, and the figures are then counted
    from the delivery.
    """
    checks = check_conditions(bucket)
    first_components = sorted(
        {
            (table.name, table.location.key.split("/", 1)[0])
            for table in (registry.tables if registry is not None else ())
            if table.location.is_s3 and table.location.bucket == bucket
        }
    )
    if not first_components:
        return usage_aggregate(written, *delivery_checks(bucket))
    lookup = local_frame(
        written.sparkSession, first_components, strings_schema("owner_name", "owner_first_component")
    )
    keyless = "keyless_rows"  # the one check that reads the key
    tagged = (
        written.where(F.col("table").isNotNull())
        .groupBy(*_TAGGED_GROUP_COLUMNS)
        .agg(
            *usage_sums(),
            *[F.count(F.when(rows, 1)).alias(name) for name, rows in checks.items() if name != keyless],
        )
    )
    known = F.col("owner_first_component")
    owned = (
        tagged.join(F.broadcast(lookup), F.col("table") == F.col("owner_name"), "left")
        .withColumn(
            "key",
            F.when(known.isNotNull(), F.concat(known, F.lit("/"))).otherwise(
                F.raise_error(F.lit("inventory-vacuum: a row's table is not registered in its bucket"))
            ),
        )
        .drop("owner_name", "owner_first_component")
    )
    summed = (
        with_usage_keys(owned)
        .groupBy(*USAGE_KEYS)
        .agg(
            *[F.sum(name).alias(name) for name in (*USAGE_SUMS, *checks) if name != keyless],
            F.sum(F.when(checks[keyless], F.col("objects")).otherwise(0)).alias(keyless),
        )
    )
    untagged = usage_aggregate(written.where(F.col("table").isNull()), *delivery_checks(bucket))
    return summed.unionByName(untagged)


def summed_usage(
    spark: SparkSession, usage: DataFrame, usage_table: str | None, bucket: str, inventory_date: str
) -> dict[str, Any]:
    """The run's figures from ``usage`` (usage rows with :func:`delivery_checks`), which then
    replace the bucket's rows of ``inventory_date`` in the usage table, if there is one."""
    usage = usage.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        name_jobs(spark, "usage")
        figures = delivery_figures(usage)
        if usage_table:
            name_jobs(spark, "write usage")
            write_usage(spark, usage, usage_table, bucket, inventory_date)
    finally:
        usage.unpersist()
    return figures


def load_delivery(
    spark: SparkSession,
    delivery: Delivery,
    inventory_table: str,
    registry: TableRegistry | None,
    usage_table: str | None = None,
) -> dict[str, Any]:
    """Check a delivery's rows and replace its bucket's partition of the inventory table, then its
    bucket and date in the usage table: checked while written when it can be (the module's notes),
    else checked first. The run's figures, with ``checked_while_writing``."""
    rows, versioned = normalised_delivery(spark, delivery)
    bucket = delivery.source_bucket
    name_jobs(spark, "last counts")
    small = sum(data_file.size for data_file in delivery.files) < READ_ONCE_FROM_BYTES
    last = (
        None
        if versioned or small or not usage_table
        else last_key_groups(spark, usage_table, registry, bucket)
    )
    if last is None:
        return {
            **_load_checked_first(spark, delivery, rows, inventory_table, registry, usage_table),
            "checked_while_writing": False,
        }
    tagged = tag_owning_table(rows, registry)  # every row is current: the delivery has no versions
    objects = sum(group.objects for group in last)
    partitions = write_partitions(spark, objects)
    commit_tag = f"inventory-vacuum ingest {uuid.uuid4()}"
    try:
        write_inventory(
            checked_rows(tagged, bucket),
            key_ranges(last, partitions),
            objects,
            partitions,
            inventory_table,
            bucket,
            commit_tag,
        )
    except Exception as write_error:
        if _BAD_ROW not in str(write_error):
            raise
        # which rows, and how many: the checks' own job, run only when a row failed the write
        name_jobs(spark, "checks")
        try:
            checked = delivery_figures(usage_aggregate(tagged, *delivery_checks(bucket)))
        except Exception:
            raise write_error from None
        error = bad_rows_error(checked, delivery, tagged)
        if error is not None:
            raise error from None
        raise
    # the partition is replaced: from here on, a failure must not report the bucket as failed
    checks = delivery_checks(bucket)
    try:
        # the usage rows of what was just written, at the version this ingest made: the same rows
        written = (
            spark.read.format("delta")
            .option("versionAsOf", own_commit(spark, inventory_table, commit_tag))
            .load(inventory_table)
            .where(F.col("bucket") == bucket)
        )
        usage = written_usage(with_optional_columns(written, OPTIONAL_COLUMNS), registry, bucket)
        figures = summed_usage(spark, usage, usage_table, bucket, delivery.inventory_date)
    except Exception as error:
        log.warning(
            "bucket %s: the partition just written cannot be read back (%s); its figures are "
            "counted from the delivery instead",
            bucket,
            spark_error_summary(error),
        )
        try:
            figures = summed_usage(
                spark, usage_aggregate(tagged, *checks), usage_table, bucket, delivery.inventory_date
            )
        except Exception as second:
            raise InventoryVacuumError(
                f"{delivery.manifest_uri}: loaded into {inventory_table}, but its figures cannot be "
                f"counted: {spark_error_summary(second)}"
            ) from None
    return {**figures, "checked_while_writing": True}


def _load_checked_first(
    spark: SparkSession,
    delivery: Delivery,
    rows: DataFrame,
    inventory_table: str,
    registry: TableRegistry | None,
    usage_table: str | None,
) -> dict[str, Any]:
    """One job checks every row and sums the usage rows, cached; then the write, cut from its
    counts; then the usage rows."""
    usage = usage_aggregate(tag_owning_table(rows, registry), *delivery_checks(delivery.source_bucket))
    usage = usage.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        name_jobs(spark, "checks")
        figures = delivery_figures(usage)
        error = bad_rows_error(figures, delivery, rows)
        if error is not None:
            raise error
        name_jobs(spark, "layout")
        partitions = write_partitions(spark, figures["objects"])
        ranges = key_ranges(key_groups(usage, registry, delivery.source_bucket), partitions)
        write_inventory(
            tag_owning_table(rows.where(is_current_version()), registry),
            ranges,
            figures["objects"],
            partitions,
            inventory_table,
            delivery.source_bucket,
        )
        if usage_table:
            name_jobs(spark, "write usage")
            write_usage(spark, usage, usage_table, delivery.source_bucket, delivery.inventory_date)
    finally:
        usage.unpersist()
    return figures


def ingest(spark: SparkSession, s3: Any, request: IngestRequest, run_id: str) -> IngestResult:
    """Find, verify and load each source bucket's delivery; one bucket's failure spares the rest.

    Example::

        result = ingest(spark, s3_client(), IngestRequest(StorageLocation.parse("s3://inv/r"),
                        ("lake",), "daily", "s3://inv/tables/inventory"), run_id="manual")
    """
    result = IngestResult()
    with snapshots_sized(spark, (request.inventory_table, request.usage_table, request.runs_table)):
        _ingest_buckets(spark, s3, request, result)
        if request.runs_table:
            record_runs(spark, request.runs_table, run_id, result.buckets)
    return result


def _small_load(spark: SparkSession, delivery: Delivery, request: IngestRequest) -> bool:
    """The delivery's load reads and writes little enough to run on Spark's interpreted
    evaluation (:func:`~core.session.interpreted_while`): its data files hold at most
    :data:`~core.session.INTERPRETED_UP_TO_BYTES` (the manifest's sizes), and the snapshots it
    rebuilds (the inventory's, the usage table's) are of small logs. Not asked when the job chose
    its own code generation."""
    return (
        not codegen_set_by_user(spark)
        and sum(data_file.size for data_file in delivery.files) <= INTERPRETED_UP_TO_BYTES
        and all(small_log(table) for table in (request.inventory_table, request.usage_table) if table)
    )


def _ingest_buckets(spark: SparkSession, s3: Any, request: IngestRequest, result: IngestResult) -> None:
    for bucket in request.source_buckets:
        started = time.monotonic()
        outcome = BucketResult(bucket=bucket, status="failed")
        delivery: Delivery | None = None
        try:
            delivery = find_delivery(
                s3, request.destination, bucket, request.config_id, request.inventory_date
            )
            outcome.manifest_key = delivery.manifest_key
            outcome.data_files = len(delivery.files)
            outcome.inventory_taken_at = delivery.inventory_taken_at.isoformat()
            outcome.inventory_date = delivery.inventory_date
            with (
                job_group(spark, f"ingest {bucket}"),
                interpreted_while(spark, _small_load(spark, delivery, request)) as interpreted,
            ):
                if interpreted:
                    log.info("bucket %s: loaded on Spark's interpreted evaluation (a small delivery)", bucket)
                figures = load_delivery(
                    spark, delivery, request.inventory_table, request.registry, request.usage_table
                )
            outcome.rows = figures["objects"]
            outcome.bytes = figures["bytes"]
            outcome.noncurrent_objects = figures["noncurrent_objects"]
            outcome.noncurrent_bytes = figures["noncurrent_bytes"]
            outcome.delete_markers = figures["delete_markers"]
            outcome.checked_while_writing = figures["checked_while_writing"]
            outcome.status = "ok"
        except InventoryVacuumError as error:
            outcome.error = str(error)
        except Exception as error:  # Spark/JVM failures: unreadable files, a bad table location
            outcome.error = f"{_delivery_name(bucket, delivery)}: {spark_error_summary(error)}"
        outcome.seconds = round(time.monotonic() - started, 3)
        result.buckets.append(outcome)


def _delivery_name(bucket: str, delivery: Delivery | None) -> str:
    """Where a Spark failure happened: the bucket, and its delivery's manifest and format (a
    reader's own error often names neither: a corrupt ORC file fails with a bare protobuf message)."""
    if delivery is None:
        return f"bucket {bucket}"
    count = len(delivery.files)
    files = f"{count} {delivery.file_format} data file{'s' if count != 1 else ''}"
    return f"bucket {bucket} ({delivery.manifest_key}: {files})"


def record_runs(spark: SparkSession, runs_table: str, run_id: str, buckets: Sequence[BucketResult]) -> None:
    """Append one ``inventory_runs`` row per bucket of this run."""
    append_run_rows(
        spark,
        runs_table,
        INVENTORY_RUNS_SCHEMA,
        run_id,
        [{**b.to_dict(), "objects": b.rows} for b in buckets],
    )
