"""The one planner: which files of a table VACUUM may delete.

Delta's ``VACUUM ... USING INVENTORY`` decides what is valid; this module prepares its input so
that Delta sees exactly the table's objects, in the form it matches on:

* only the table's bucket partition and keys under ``<table path>/`` (a sibling table
  ``events_v2`` never matches ``events``);
* paths rebuilt on the table's own qualified location, so an ``s3a://`` table matches an
  inventory of ``s3://`` paths (Delta compares plain string prefixes);
* no ``/``-terminated keys, no keys with ``//``;
* hidden paths removed the way Delta's listing VACUUM removes them, at every level (its inventory
  mode only checks the first level, and would delete ``date=2024-01-01/_SUCCESS``), and the
  Iceberg ``metadata/`` folder of a UniForm table.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from inventory.paths import StorageLocation
from inventory.schema import VACUUM_INVENTORY_SCHEMA, is_current_version
from vacuum.snapshot import TableState, decoded_relative_path


def is_hidden_component(
    component: Column, partition_columns: Sequence[str], protect_metadata: bool
) -> Column:
    """Delta's ``isHiddenDirectory`` rule for one path component (a directory or file name)."""
    hidden = (component.startswith("_") | component.startswith(".")) & ~(
        component.startswith("_delta_index") | component.startswith("_change_data")
    )
    for column in partition_columns:
        hidden = hidden & ~component.startswith(f"{column}=")
    if protect_metadata:
        hidden = hidden | (component == "metadata")
    return hidden


def inventory_slice(inventory: DataFrame, location: StorageLocation, state: TableState) -> DataFrame:
    """The inventory rows of one table, in the form Delta's USING INVENTORY matches on.

    Columns: Delta's four (``path, length, isDir, modificationTime``) with ``path`` on the table's
    qualified location, plus ``relative_path`` (the key below the table).
    """
    prefix = f"{location.key}/"
    relative = F.substring(F.col("key"), len(prefix) + 1, 1 << 30)
    components = F.split(relative, "/")
    hidden = F.exists(
        components, lambda c: is_hidden_component(c, state.partition_columns, state.iceberg_enabled)
    )
    rows = inventory.where(
        (F.col("bucket") == location.bucket)
        & F.col("key").startswith(prefix)
        & is_current_version()
        & ~F.col("key").endswith("/")
        & ~F.col("key").contains("//")
        & F.col("length").isNotNull()
        & F.col("modificationTime").isNotNull()
    ).withColumn("relative_path", relative)
    return rows.where(~hidden).select(
        F.concat(F.lit(state.base), F.col("relative_path")).alias("path"),
        "length",
        "isDir",
        "modificationTime",
        "relative_path",
        "key",
    )


def delta_inventory(slice_frame: DataFrame) -> DataFrame:
    """Exactly Delta's inventory schema (names, order, types, nullable, no metadata)."""
    return slice_frame.select(
        *[F.col(f.name).cast(f.dataType).alias(f.name) for f in VACUUM_INVENTORY_SCHEMA]
    )


@dataclass(frozen=True)
class InventoryFigures:
    """What the inventory says about one table, from one Spark job."""

    objects_under_table: int
    inventory_taken_at: datetime | None


def inventory_figures(inventory: DataFrame, location: StorageLocation) -> InventoryFigures:
    """Objects under the table's path, and when the bucket's inventory was taken."""
    prefix = f"{location.key}/"
    row = (
        inventory.where(F.col("bucket") == location.bucket)
        .agg(
            F.count(F.when(F.col("key").startswith(prefix), 1)).alias("objects"),
            # epoch millis: PySpark would turn a timestamp into the driver's local time zone
            F.max(F.unix_millis("inventory_taken_at")).alias("taken_at_ms"),
        )
        .first()
    )
    assert row is not None
    taken_at_ms = row["taken_at_ms"]
    taken_at = datetime.fromtimestamp(taken_at_ms / 1000, tz=UTC) if taken_at_ms is not None else None
    return InventoryFigures(int(row["objects"]), taken_at)


def live_candidates(details: DataFrame, live_files: DataFrame) -> list[str]:
    """Candidates (from :func:`candidate_details`) that are live files of the snapshot, or lie
    outside the table: must be none.

    Delta decides what is valid; this checks its answer against the snapshot's files in our own
    terms (decoded relative paths), so a path-form mismatch can never turn into a deleted live file.
    """
    live = live_files.select(decoded_relative_path("path").alias("relative_path"), F.lit(True).alias("live"))
    bad = details.join(live, "relative_path", "left").where(
        F.col("relative_path").isNull() | F.col("live").isNotNull()
    )
    return [row["path"] for row in bad.select("path").limit(5).collect()]


def coverage_counts(live_files: DataFrame, slice_frame: DataFrame, taken_at_millis: int) -> tuple[int, int]:
    """(live files older than the inventory, how many of them the slice lists), in one job."""
    eligible = live_files.where(
        (F.col("modificationTime") < taken_at_millis) & ~F.col("path").rlike("^[A-Za-z][A-Za-z0-9+.-]*:")
    ).select(decoded_relative_path("path").alias("relative_path"))
    listed = slice_frame.select("relative_path", F.lit(True).alias("listed")).distinct()
    row = (
        eligible.join(listed, "relative_path", "left")
        .agg(F.count(F.lit(1)).alias("eligible"), F.count(F.col("listed")).alias("covered"))
        .first()
    )
    assert row is not None
    return int(row["eligible"]), int(row["covered"])


def vacuum_sql(
    state: TableState,
    *,
    mode: str,
    retention_hours: float | None,
    dry_run: bool,
    inventory_view: str | None = None,
) -> str:
    """The VACUUM statement for a table (``retention_hours`` None: the table's own default)."""
    target = "delta.`" + state.uri.replace("`", "``") + "`"
    parts = [f"VACUUM {target}"]
    if mode == "lite":
        parts.append("LITE")
    if inventory_view is not None:
        columns = ", ".join(f.name for f in VACUUM_INVENTORY_SCHEMA)
        parts.append(f"USING INVENTORY (SELECT {columns} FROM {inventory_view})")
    if retention_hours is not None:
        parts.append(f"RETAIN {int(retention_hours)} HOURS")
    if dry_run:
        parts.append("DRY RUN")
    return " ".join(parts)


@contextmanager
def temporary_view(frame: DataFrame) -> Iterator[str]:
    """Register ``frame`` under a unique name for the duration of a VACUUM statement."""
    name = f"inventory_vacuum_slice_{uuid.uuid4().hex}"
    frame.createOrReplaceTempView(name)
    try:
        yield name
    finally:
        frame.sparkSession.catalog.dropTempView(name)


def dry_run_candidates(spark: SparkSession, sql: str) -> DataFrame:
    """Run a DRY RUN VACUUM and return its candidates (``path``: absolute, decoded).

    Spark runs a command eagerly and keeps its rows in the returned frame (a ``CommandResult``),
    so every later use (sizes, re-check, delete) reads the same list without re-running VACUUM.
    """
    return spark.sql(sql)


def candidate_details(candidates: DataFrame, slice_frame: DataFrame | None, state: TableState) -> DataFrame:
    """Candidates with ``length`` (from the inventory when there is one) and top-level partition."""
    frame = candidates.withColumn(
        "relative_path",
        F.when(
            F.col("path").startswith(state.base), F.substring(F.col("path"), len(state.base) + 1, 1 << 30)
        ),
    )
    if slice_frame is not None:
        frame = frame.join(slice_frame.select("path", "length"), "path", "left")
    else:
        frame = frame.withColumn("length", F.lit(None).cast("long"))
    first = F.split(F.col("relative_path"), "/").getItem(0)
    nested = F.col("relative_path").contains("/")
    return frame.withColumn(
        "partition", F.when(nested & first.contains("="), first).otherwise(F.lit("(table root)"))
    )
