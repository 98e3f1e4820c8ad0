"""The usage aggregate: objects and bytes per bucket, inventory date, owning table, top-level
prefix, storage class and version state (``current``, ``noncurrent``, ``delete_marker``).

The inventory table holds current versions only, as Delta's ``USING INVENTORY`` needs, and only
the newest delivery of each bucket. What the chargeback needs beyond that is kept here, small:

- **noncurrent versions and delete markers**, priced on their own rows (they cost money and no
  vacuum frees them);
- **the trend**: one set of rows per bucket and inventory date, so bytes and cost per table and
  owner can be followed over time without keeping every delivery.

Ingest computes it in the same Spark job that checks the delivery (no extra pass over the data)
and replaces the rows of its bucket and inventory date, so a second ingest on the same day
replaces, never doubles. For days before this table existed, :func:`usage_from_inventory_versions`
rebuilds the current rows from older versions of the inventory table (Delta time travel), as far
as they are kept.

Objects under 128 KB are counted apart (``small_objects``, ``small_bytes``): that is AWS's
minimum billable size for the IA classes and Glacier Instant Retrieval, and the smallest size
Intelligent-Tiering monitors, so the chargeback can apply both to aggregated rows.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from core.errors import spark_error_summary
from core.tables import USAGE_SCHEMA
from inventory.schema import is_current_version, prefix_column, sql_string, with_optional_columns

log = logging.getLogger("inventory_vacuum")

SMALL_OBJECT_BYTES = 128 * 1024
CURRENT = "current"
NONCURRENT = "noncurrent"
DELETE_MARKER = "delete_marker"

USAGE_KEYS = (
    "bucket",
    "inventory_date",
    "inventory_taken_at",
    "state",
    "table",
    "prefix",
    "storage_class",
    "intelligent_tiering_access_tier",
)
USAGE_SUMS = ("objects", "bytes", "small_objects", "small_bytes")
OPTIONAL_COLUMNS = (
    "intelligent_tiering_access_tier",
    "is_latest",
    "is_delete_marker",
    "table",
    "inventory_date",
)


def state_column() -> Column:
    """``current``, ``noncurrent`` or ``delete_marker`` (unversioned inventories: all current)."""
    return (
        F.when(is_current_version(), F.lit(CURRENT))
        .when(F.coalesce(F.col("is_delete_marker"), F.lit(False)), F.lit(DELETE_MARKER))
        .otherwise(F.lit(NONCURRENT))
    )


def usage_sums() -> list[Column]:
    """The aggregates of :data:`USAGE_SUMS` over rows in the inventory table's schema."""
    length = F.coalesce(F.col("length"), F.lit(0)).cast("long")
    small = F.col("length").isNotNull() & (length < SMALL_OBJECT_BYTES)
    return [
        F.count(F.lit(1)).alias("objects"),
        F.sum(length).alias("bytes"),
        F.count(F.when(small, 1)).alias("small_objects"),
        F.sum(F.when(small, length).otherwise(0)).alias("small_bytes"),
    ]


def with_usage_keys(rows: DataFrame) -> DataFrame:
    """``rows`` with the ``state`` and ``prefix`` a usage row is keyed by (:data:`USAGE_KEYS`)."""
    return rows.select(
        *[c for c in rows.columns if c not in ("state", "prefix")],
        state_column().alias("state"),
        prefix_column(1).alias("prefix"),
    )


def usage_aggregate(rows: DataFrame, *extra: Column) -> DataFrame:
    """Sum rows in the inventory table's schema (``table`` tagged) into :data:`USAGE_SCHEMA` rows.

    ``extra`` aggregates (e.g. the ingest's row checks) are computed in the same pass.
    """
    return with_usage_keys(rows).groupBy(*USAGE_KEYS).agg(*usage_sums(), *extra)


def write_usage(
    spark: SparkSession, usage: DataFrame, location: str, bucket: str, inventory_date: str
) -> None:
    """Replace the rows of ``bucket`` and ``inventory_date`` with ``usage`` (one Delta commit),
    plus one row of zero objects that marks the delivery: an empty bucket, or one whose objects
    are all deleted, still has a delivery that day (the trend must not carry older rows forward).

    The usage table is derived data: a failure here is logged, never fails the ingest.
    """
    condition = f"bucket = '{sql_string(bucket)}' AND inventory_date = DATE'{inventory_date}'"
    columns = [F.col(f.name).cast(f.dataType).alias(f.name) for f in USAGE_SCHEMA]
    marker = (
        usage.sparkSession.range(1)
        .select(
            F.lit(bucket).alias("bucket"),
            F.lit(inventory_date).cast("date").alias("inventory_date"),
            *[F.lit(None).alias(name) for name in ("inventory_taken_at", "table", "storage_class")],
            F.lit(CURRENT).alias("state"),
            F.lit(f"{bucket}/").alias("prefix"),
            F.lit(None).alias("intelligent_tiering_access_tier"),
            *[F.lit(0).alias(name) for name in USAGE_SUMS],
        )
        .select(*columns)
    )
    try:
        (
            usage.select(*columns)
            .unionByName(marker)
            .coalesce(1)
            .write.format("delta")
            .mode("overwrite")
            .option("replaceWhere", condition)
            .partitionBy("bucket")
            .save(location)
        )
    except Exception as error:
        log.warning(
            "could not write the usage rows of bucket %s, %s, to %s: %s",
            bucket,
            inventory_date,
            location,
            spark_error_summary(error),
        )


def read_usage(spark: SparkSession, location: str) -> DataFrame | None:
    """The usage table, or None when there is none (yet) at ``location``."""
    try:
        frame = spark.read.format("delta").load(location)
        missing = [f.name for f in USAGE_SCHEMA if f.name not in frame.columns]
    except Exception as error:
        log.info("no usage table at %s (%s)", location, spark_error_summary(error)[:120])
        return None
    if missing:
        log.warning("%s is not a usage table (no column %s): not read", location, ", ".join(missing))
        return None
    return frame


def usage_from_inventory_versions(
    spark: SparkSession, inventory_table: str, versions: Sequence[int]
) -> DataFrame | None:
    """Current usage rows rebuilt from older versions of the inventory table (Delta time travel),
    one Spark job for all of them, with a ``version`` column; None when none can be read.

    A version whose files a VACUUM of the inventory table removed is left out with a warning.
    """
    frames = []
    for version in versions:
        try:
            frame = spark.read.format("delta").option("versionAsOf", version).load(inventory_table)
            frame.columns  # noqa: B018 - resolves the version now, inside the try
        except Exception as error:
            log.warning("inventory table %s version %d not readable: %s", inventory_table, version, error)
            continue
        frame = with_optional_columns(frame, OPTIONAL_COLUMNS)
        frames.append(usage_aggregate(frame).withColumn("version", F.lit(version)))
    if not frames:
        return None
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result
