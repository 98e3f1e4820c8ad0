"""Load verified deliveries with Spark into the bucket-partitioned inventory Delta table.

One Spark job per bucket checks every row (bucket, key) and sums the delivery into usage rows
(:mod:`inventory.usage`: the run's figures, noncurrent versions, the chargeback's trend) before
anything is written; a second writes the bucket's partition with one atomic Delta commit that
replaces exactly that partition, in files of contiguous key ranges cut from the first job's
counts (:mod:`inventory.layout`). A failure anywhere leaves the inventory table as it was. The
usage rows of the bucket and date are replaced last; that derived table failing only warns.
"""

from __future__ import annotations

import time
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
from core.session import job_group, name_jobs
from core.tables import INVENTORY_RUNS_SCHEMA, append_run_rows
from inventory.layout import key_groups, key_ranges, laid_out, write_partitions
from inventory.manifest import Delivery, find_delivery
from inventory.schema import csv_read_schema, is_current_version, normalise, sql_string, tag_owning_table
from inventory.usage import CURRENT, DELETE_MARKER, NONCURRENT, usage_aggregate, write_usage


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


def normalised_delivery(spark: SparkSession, delivery: Delivery) -> DataFrame:
    """Every row of a delivery in the inventory table's schema (``table`` still null)."""
    return normalise(
        read_delivery(spark, delivery),
        file_format=delivery.file_format,
        inventory_date=delivery.inventory_date,
        inventory_taken_at_ms=delivery.inventory_taken_at_ms,
    )


def delivery_checks(bucket: str) -> list[Column]:
    """Aggregates that find the rows no delivery of ``bucket`` may hold (summed per usage group)."""
    current = is_current_version()
    return [
        F.count(F.when(F.col("bucket").isNull() | (F.col("bucket") != bucket), 1)).alias("foreign_rows"),
        F.first(F.when(F.col("bucket") != bucket, F.col("bucket")), ignorenulls=True).alias("foreign_bucket"),
        F.count(F.when(F.col("key").isNull() | (F.col("key") == ""), 1)).alias("keyless_rows"),
        F.count(F.when(current & (F.col("length").isNull() | F.col("modificationTime").isNull()), 1)).alias(
            "incomplete_rows"
        ),
    ]


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
        F.first("foreign_bucket", ignorenulls=True).alias("foreign_bucket"),
        total(F.col("keyless_rows")).alias("keyless_rows"),
        total(F.col("incomplete_rows")).alias("incomplete_rows"),
    ).first()
    assert figures is not None
    return figures.asDict()


def load_delivery(
    spark: SparkSession,
    delivery: Delivery,
    inventory_table: str,
    registry: TableRegistry | None,
    usage_table: str | None = None,
) -> dict[str, Any]:
    """Check a delivery's rows and replace its bucket's partition of the inventory table, then its
    bucket and date in the usage table (computed in the checking job: no extra pass)."""
    rows = normalised_delivery(spark, delivery)
    usage = usage_aggregate(tag_owning_table(rows, registry), *delivery_checks(delivery.source_bucket))
    usage = usage.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        name_jobs(spark, "checks")
        figures = delivery_figures(usage)
        where = delivery.manifest_uri
        if figures["foreign_rows"]:
            raise InventoryDataError(
                f"{where}: {figures['foreign_rows']} row(s) name bucket "
                f"{figures['foreign_bucket']!r}, not the manifest's {delivery.source_bucket!r}"
            )
        if figures["keyless_rows"]:
            raise InventoryDataError(f"{where}: {figures['keyless_rows']} row(s) have no key")
        if figures["incomplete_rows"]:
            raise InventoryDataError(
                f"{where}: {figures['incomplete_rows']} object row(s) lack Size or LastModifiedDate"
            )
        name_jobs(spark, "layout")
        partitions = write_partitions(spark, figures["objects"])
        ranges = key_ranges(key_groups(usage, registry, delivery.source_bucket), partitions)
        name_jobs(spark, "write inventory")
        (
            # contiguous key ranges per file: Delta's min/max stats skip most files
            laid_out(
                tag_owning_table(rows.where(is_current_version()), registry),
                ranges,
                rows_per_file=-(-figures["objects"] // partitions),
            )
            .write.format("delta")
            .mode("overwrite")
            # replaceWhere is dynamic partition overwrite of exactly this bucket, which also empties
            # the partition when the bucket is now empty, and Delta checks every row against it.
            .option("replaceWhere", f"bucket = '{sql_string(delivery.source_bucket)}'")
            .partitionBy("bucket")
            .save(inventory_table)
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
            with job_group(spark, f"ingest {bucket}"):
                figures = load_delivery(
                    spark, delivery, request.inventory_table, request.registry, request.usage_table
                )
            outcome.rows = figures["objects"]
            outcome.bytes = figures["bytes"]
            outcome.noncurrent_objects = figures["noncurrent_objects"]
            outcome.noncurrent_bytes = figures["noncurrent_bytes"]
            outcome.delete_markers = figures["delete_markers"]
            outcome.status = "ok"
        except InventoryVacuumError as error:
            outcome.error = str(error)
        except Exception as error:  # Spark/JVM failures: unreadable files, a bad table location
            outcome.error = f"{_delivery_name(bucket, delivery)}: {spark_error_summary(error)}"
        outcome.seconds = round(time.monotonic() - started, 3)
        result.buckets.append(outcome)
    if request.runs_table:
        record_runs(spark, request.runs_table, run_id, result.buckets)
    return result


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
