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
from datetime import datetime, timezone
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from core.paths import LOCAL_BUCKET, StorageLocation, overlapping_pair
from core.tables import VACUUM_INVENTORY_SCHEMA
from inventory.schema import is_current_version, with_owner
from vacuum.execute import sendable_key
from vacuum.results import (
    KEPT_DELETED_EARLIER,
    KEPT_FOLDER_MARKER,
    KEPT_NESTED_TABLE,
    KEPT_NOT_SENDABLE,
    KEPT_PROTECTED_PATH,
    KEPT_SHADOWS_DIRECTORY,
    KEPT_UNPARSABLE_KEY,
)
from vacuum.snapshot import TableState, live_relative_path
from vacuum.tuning import broadcast_threshold, in_one_partition


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


# the inventory columns a table's plan reads: Delta's four, where the object is, which version it
# is, and when the inventory was taken (the rest, storage class, ETag and so on, is chargeback's)
PLAN_COLUMNS = (
    *(f.name for f in VACUUM_INVENTORY_SCHEMA),
    "bucket",
    "key",
    "is_latest",
    "is_delete_marker",
    "inventory_taken_at",
)


def rows_under(inventory: DataFrame, location: StorageLocation) -> DataFrame:
    """Every inventory row of the table's bucket whose key lies under ``<table path>/``, in the
    columns a plan reads (:data:`PLAN_COLUMNS`): the rows are cached per table, and caching a
    column costs in proportion to its bytes. :func:`tables_figures` counts the same rows for many
    tables at once, and must select exactly these."""
    return inventory.where(
        (F.col("bucket") == location.bucket) & F.col("key").startswith(f"{location.key}/")
    ).select(*PLAN_COLUMNS)


def table_objects(inventory: DataFrame, location: StorageLocation) -> DataFrame:
    """The current-version objects under ``<table path>/``, with ``relative_path`` (the key below
    the table) and its ``components``. An S3 folder marker (a zero-byte key ending in ``/``, which
    the console, S3A and other tools write for a directory) is an object too, ``folder_marker``
    true, its ``relative_path`` the directory's, without the ``/``; a ``/``-terminated key with
    bytes, the table root's own marker and keys with ``//`` (no Hadoop path can name them) are
    left out.
    """
    return _with_relative_path(rows_under(inventory, location), location).where(_is_table_object())


def _is_folder_marker() -> Column:
    return F.col("key").endswith("/")


def _is_table_object() -> Column:
    return (
        is_current_version()
        & (~_is_folder_marker() | (F.col("length") == 0))
        & (F.col("relative_path") != "")
        & ~F.col("key").contains("//")
        & F.col("length").isNotNull()
        & F.col("modificationTime").isNotNull()
    )


def _with_relative_path(rows: DataFrame, location: StorageLocation) -> DataFrame:
    return _with_relative_path_below(rows, F.lit(len(location.key) + 1))


def _with_relative_path_below(rows: DataFrame, prefix_length: Column) -> DataFrame:
    """``rows`` with ``folder_marker``, ``relative_path`` (the key after its first
    ``prefix_length`` characters, a table's ``<key>/``; a folder marker's without its ``/``) and
    its ``components``."""
    return (
        rows.withColumn("folder_marker", _is_folder_marker())
        .withColumn(
            "relative_path",
            F.when(F.col("folder_marker"), F.expr("substring(key, 1, length(key) - 1)")).otherwise(
                F.col("key")
            ),
        )
        .withColumn("relative_path", F.col("relative_path").substr(prefix_length + 1, F.lit(1 << 30)))
        .withColumn("components", F.split(F.col("relative_path"), "/"))
    )


def nested_table_root() -> Column:
    """For a row of :func:`table_objects`: the relative directory of the nested Delta table that
    holds it (the directory above a ``_delta_log`` component below the table root), else null."""
    position = F.array_position(F.col("components"), "_delta_log")
    # a directory named _delta_log, not a file of that name
    is_directory = position < F.size(F.col("components"))
    return F.when(
        (position > 1) & is_directory, F.array_join(F.slice(F.col("components"), 1, position - 1), "/")
    )


def under_any(relative_path: Column, prefixes: Sequence[str]) -> Column:
    """True when ``relative_path`` lies below one of ``prefixes`` (relative directories)."""
    condition = F.lit(False)
    for prefix in prefixes:
        directory = prefix.rstrip("/")
        # the path itself too: a protected location may be a file (tables.yaml on S3)
        condition = condition | (relative_path == directory) | relative_path.startswith(directory + "/")
    return condition


def first_matching_root(relative_path: Column, roots: Sequence[str]) -> Column:
    """The first of ``roots`` (relative directories) that holds ``relative_path``, else null."""
    result: Column = F.lit(None).cast("string")
    for root in sorted(roots, key=len, reverse=True):
        result = F.when(relative_path.startswith(root + "/"), F.lit(root)).otherwise(result)
    return result


def unparsable_by_hadoop(relative_path: Column, *, local: bool = False) -> Column:
    """Keys Hadoop's ``new Path(relative)`` rejects: a colon in the first component reads as a
    URI scheme ("Relative path in absolute URI"), which would fail Delta's whole VACUUM. On a
    local file system a colon anywhere does (the checksum file ``.name.crc`` is parsed too)."""
    if local:
        return relative_path.contains(":")
    return F.split(relative_path, "/").getItem(0).contains(":")


def classify_objects(
    objects: DataFrame,
    state: TableState,
    *,
    nested_roots: Sequence[str],
    protected_prefixes: Sequence[str],
    deleted_earlier: DataFrame | None,
    check_sendable: bool,
    delete_markers: bool = True,
) -> DataFrame:
    """Add ``kept_reason`` (null: the object goes to Delta) and ``nested_root`` to the table's
    objects. Hidden paths are dropped altogether: they are the table's own (``_delta_log``, ...).
    """
    hidden = F.exists(
        F.col("components"),
        lambda c: is_hidden_component(c, state.partition_columns, state.iceberg_enabled),
    )
    # Delta never names a file whose path is also a directory it keeps: leave such objects out.
    # A folder marker goes to Delta only when no other object lies below it, the parity of Delta's
    # deleting of empty directories on S3, and when no file has its directory's name: Delta
    # deletes by path, and S3A would take that file for the path. Its own path counts once here,
    # as a directory and as the marker, and so does a file of the same name: two or more means
    # another object is below the marker, or beside it under the same name.
    markers = objects.where(F.col("folder_marker")).select("relative_path")
    # a handful of markers, but a filtered frame's size estimate is its input's: asked for by name
    # unless the session broadcasts nothing (a plan of one wave of tasks, where each broadcast is
    # one more Spark job; see vacuum.tuning)
    distinct_markers = markers.distinct()
    if broadcast_threshold(objects.sparkSession) >= 0:
        distinct_markers = F.broadcast(distinct_markers)
    # an inner join with the distinct markers is the semi join's rows (one match at most), and
    # Spark's optimiser does not move it below a coalesce to one partition as it does a semi join
    # (see vacuum.tuning.in_one_partition), where it would need a shuffle
    named_like_markers = (
        objects.where(~F.col("folder_marker"))
        .select("relative_path")
        .join(distinct_markers, "relative_path", "inner")
    )
    paths_of_directories = (
        objects.where(F.size("components") > 1)
        .select(
            F.explode(
                F.transform(
                    F.sequence(F.lit(1), F.size("components") - 1),
                    lambda i: F.array_join(F.slice(F.col("components"), 1, i), "/"),
                )
            ).alias("relative_path")
        )
        .unionByName(markers)
        .unionByName(named_like_markers)
    )
    # a union of three inputs is three partitions, which the count by path would shuffle (a query
    # stage of its own) even when each is one: read in one partition, a small table's is none
    directories = (
        in_one_partition(objects.sparkSession, paths_of_directories)
        .groupBy("relative_path")
        .agg(F.count(F.lit(1)).alias("paths_below"))
    )
    frame = (
        objects.where(~hidden)
        .withColumn("nested_root", first_matching_root(F.col("relative_path"), nested_roots))
        .join(directories, "relative_path", "left")
        .withColumn(
            "shadows_directory",
            F.col("paths_below").isNotNull() & (~F.col("folder_marker") | (F.col("paths_below") > 1)),
        )
    )
    if deleted_earlier is not None:
        gone = deleted_earlier.select("bucket", "key", F.lit(True).alias("deleted_earlier"))
        frame = frame.join(gone, ["bucket", "key"], "left")
    else:
        frame = frame.withColumn("deleted_earlier", F.lit(None).cast("boolean"))
    reason = (
        F.when(under_any(F.col("relative_path"), protected_prefixes), F.lit(KEPT_PROTECTED_PATH))
        .when(F.col("nested_root").isNotNull(), F.lit(KEPT_NESTED_TABLE))
        .when(
            unparsable_by_hadoop(F.col("relative_path"), local=state.bucket == LOCAL_BUCKET),
            F.lit(KEPT_UNPARSABLE_KEY),
        )
        .when(F.col("deleted_earlier").isNotNull(), F.lit(KEPT_DELETED_EARLIER))
    )
    if check_sendable:
        reason = reason.when(~sendable_key(F.col("key")), F.lit(KEPT_NOT_SENDABLE))
    reason = reason.when(F.col("shadows_directory"), F.lit(KEPT_SHADOWS_DIRECTORY))
    if not delete_markers:
        reason = reason.when(F.col("folder_marker"), F.lit(KEPT_FOLDER_MARKER))
    return frame.withColumn("kept_reason", reason)


# what the slice and the count of kept objects read of the classified objects
CLASSIFIED_COLUMNS = (
    "kept_reason",
    "folder_marker",
    "nested_root",
    "relative_path",
    "length",
    "isDir",
    "modificationTime",
    "key",
    "bucket",
)


def inventory_slice(classified: DataFrame, state: TableState) -> DataFrame:
    """The rows Delta's USING INVENTORY sees for one table: ``path`` rebuilt on the table's
    qualified location, plus ``relative_path``, ``key`` and ``bucket``."""
    return classified.where(F.col("kept_reason").isNull()).select(
        F.concat(F.lit(state.base), F.col("relative_path")).alias("path"),
        "length",
        # a folder marker goes as a zero-byte file named by its directory: Delta names a file only
        # past the retention, and never one that is a directory of a live file or tombstone; a
        # directory row it would name whatever its age
        F.when(F.col("folder_marker"), F.lit(False)).otherwise(F.col("isDir")).alias("isDir"),
        "modificationTime",
        "relative_path",
        "key",
        "bucket",
    )


def reported_path(path: str = "path", key: str = "key") -> Column:
    """The path to report and ledger for a deleted object: a folder marker's, which Delta names
    by its directory (``s3a://b/t/ghi``), with the ``/`` of its key (``s3a://b/t/ghi/``), so that
    nobody acting on the report takes it for another object."""
    marker = F.col(key).endswith("/") & ~F.col(path).endswith("/")
    return F.when(marker, F.concat(F.col(path), F.lit("/"))).otherwise(F.col(path))


def delta_inventory(slice_frame: DataFrame) -> DataFrame:
    """Exactly Delta's inventory schema (names, order, types, nullable, no metadata)."""
    return slice_frame.select(
        *[F.col(f.name).cast(f.dataType).alias(f.name) for f in VACUUM_INVENTORY_SCHEMA]
    )


@dataclass(frozen=True)
class InventoryFigures:
    """What the inventory says about one table, from one Spark job over the table's own rows."""

    objects_under_table: int
    # when the delivery holding the table's rows was taken, and their newest modificationTime:
    # None when the table has no rows (see with_bucket_times), or its rows have none
    inventory_taken_at: datetime | None
    newest_modification_millis: int | None
    nested_roots: tuple[str, ...]


def bucket_figures(inventory: DataFrame, bucket: str) -> tuple[int | None, int | None]:
    """(when the bucket's inventory was taken, its newest ``modificationTime``), both in epoch
    milliseconds: a scan of the bucket's whole partition, which a run makes only for a table
    without rows (:func:`with_bucket_times`)."""
    row = inventory.where(F.col("bucket") == bucket).agg(*_times()).first()
    assert row is not None
    return row["taken_at_ms"], row["newest_ms"]


def _times() -> tuple[Column, Column]:
    """The aggregations of a figures query's times: ``taken_at_ms``, when the inventory was taken,
    and ``newest_ms``, the newest ``modificationTime``, both the greatest of the rows, in epoch
    milliseconds (PySpark would turn a timestamp into the driver's local time zone)."""
    return (
        F.max(F.unix_millis("inventory_taken_at")).alias("taken_at_ms"),
        F.max("modificationTime").alias("newest_ms"),
    )


def with_bucket_times(
    figures: InventoryFigures, bucket_wide: tuple[int | None, int | None]
) -> InventoryFigures:
    """``figures`` of a table without rows with the bucket's :func:`bucket_figures`: the freshness
    gate then judges the delivery that found nothing under the table, before the presence gate
    refuses it. Figures of a table with rows are returned as they are, their times or none.

    A table's own times are the ones its gates need: every row of a bucket's partition comes from
    one delivery (the ingest replaces the partition whole), so they are the bucket's times, read
    from the table's rows alone rather than from a scan of the whole bucket. Were a partition ever
    to mix deliveries, the table's own time would be the one its rows were taken at, no later than
    the bucket's: the freshness gate would judge them older (and a time in the future by the rows'
    own), the unit check would read a newest time no greater, refusing at least as often, the
    ledger's margin would leave out at least as much, and the coverage gate would ask the rows to
    list the live files written before they were taken, not those written before another delivery
    was."""
    if figures.objects_under_table:
        return figures
    return _figures(figures.objects_under_table, figures.nested_roots, bucket_wide)


def inventory_figures(inventory: DataFrame, location: StorageLocation) -> InventoryFigures:
    """Objects under the table's path, the nested Delta tables below it and the times of its rows
    (:func:`_times`), from one Spark job over the table's keys."""
    # one pass: every row under the table counts; the nested roots come from its objects only
    row = (
        _with_relative_path(rows_under(inventory, location), location)
        .agg(
            F.count(F.lit(1)).alias("objects"),
            F.collect_set(_nested_root_of_object()).alias("roots"),
            *_times(),
        )
        .first()
    )
    assert row is not None
    return _figures(int(row["objects"]), row["roots"] or [], (row["taken_at_ms"], row["newest_ms"]))


def tables_figures(
    inventory: DataFrame, bucket: str, locations: Sequence[StorageLocation]
) -> dict[str, InventoryFigures]:
    """Each table's :func:`inventory_figures`, by key, from one query for them all (not one per
    table). No table of ``locations`` (all in ``bucket``) may lie inside another: each row then
    belongs to at most one.

    The query reads only the rows under the tables (:func:`rows_under` each one: a range of keys
    per table, which Delta's file skipping uses as it does a single table's), gives each row the
    table whose ``<key>/`` holds its key (the ingest's owner tagging, on the run's tables: the
    inventory's own ``table`` column was tagged by the registry of its day), then counts it, looks
    for nested tables in that table's terms and takes its times. It reads nothing else of the
    bucket: a table without rows has no times (:func:`with_bucket_times`).
    """
    if overlapping_pair(locations, lambda location: location) is not None:
        raise ValueError("tables_figures needs tables none of which lies inside another")
    # each table is its own owner's name: the key, whose length (and its '/') prefixes its rows
    owners = [(bucket, location.key, location.key) for location in locations]
    tagged = with_owner(
        inventory.where((F.col("bucket") == bucket) & under_tables(locations)), owners, "owner"
    )
    rows = (
        _with_relative_path_below(tagged, F.length(F.col("owner")) + 1)
        .where(F.col("owner").isNotNull())
        .groupBy("owner")
        .agg(
            F.count(F.lit(1)).alias("objects"),
            F.collect_set(_nested_root_of_object()).alias("roots"),
            *_times(),
        )
        .collect()
    )
    by_owner = {r["owner"]: r for r in rows}
    figures = {}
    for location in locations:
        row = by_owner.get(location.key)  # none: no object under the table
        figures[location.key] = (
            _figures(int(row["objects"]), row["roots"] or [], (row["taken_at_ms"], row["newest_ms"]))
            if row
            else _figures(0, [], (None, None))
        )
    return figures


def tables_rows(
    inventory: DataFrame, bucket: str, locations: Sequence[StorageLocation], under: Column | None = None
) -> DataFrame:
    """The rows of ``bucket`` under any of ``locations``, in :data:`PLAN_COLUMNS`: a superset of
    each table's :func:`rows_under`, which gives exactly that table's rows when applied to it. The
    same ``locations`` in the same order give the same plan, which is how a run's tables find these
    rows in Spark's cache (:meth:`vacuum.context.RunContext.share_rows`). ``under`` is
    :func:`under_tables` of ``locations``, when the caller kept it."""
    condition = under_tables(locations) if under is None else under
    return inventory.where((F.col("bucket") == bucket) & condition).select(*PLAN_COLUMNS)


def under_tables(locations: Sequence[StorageLocation]) -> Column:
    """The key lies under one of ``locations``. Building it takes some 20 calls into the JVM per
    table, so a group's tables share one (:meth:`vacuum.context.RunContext.share_rows`): were each
    table of a group to build its own, a run would make calls in the square of the group's size.
    A Column is an immutable expression of no session: one may go into any number of queries."""
    return _any_of([_key_under(location.key) for location in locations])


def _key_under(table_key: str) -> Column:
    """The key lies under ``<table_key>/``, as a range of keys, which file skipping reads from
    each file's smallest and largest key: ``'/'`` is followed by ``'0'`` in byte order, the order
    of Spark's string comparison."""
    return (F.col("key") >= F.lit(f"{table_key}/")) & (F.col("key") < F.lit(f"{table_key}0"))


def _any_of(conditions: Sequence[Column]) -> Column:
    """The conditions or-ed as a balanced tree (a chain of thousands would be as deep)."""
    if not conditions:
        return F.lit(False)
    if len(conditions) == 1:
        return conditions[0]
    middle = len(conditions) // 2
    return _any_of(conditions[:middle]) | _any_of(conditions[middle:])


def _nested_root_of_object() -> Column:
    """For a row with ``relative_path`` and ``components``: the :func:`nested_table_root` of a
    table object (null for any other row). Only a key holding ``/_delta_log/`` can have one, so
    no other row computes it."""
    return F.when(F.col("key").contains("/_delta_log/") & _is_table_object(), nested_table_root())


def _figures(objects: int, roots: Sequence[str], times: tuple[int | None, int | None]) -> InventoryFigures:
    taken_at_ms, newest_ms = times
    taken_at = (
        datetime.fromtimestamp(taken_at_ms / 1000, tz=timezone.utc) if taken_at_ms is not None else None
    )
    return InventoryFigures(objects, taken_at, newest_ms, _outermost(roots))


def _outermost(roots: Sequence[str]) -> tuple[str, ...]:
    """Drop roots that lie inside another root (a table nested in a nested table)."""
    ordered = sorted(set(roots), key=len)
    kept: list[str] = []
    for root in ordered:
        if not any(root.startswith(outer + "/") for outer in kept):
            kept.append(root)
    return tuple(kept)


@dataclass(frozen=True)
class PlanCheck:
    """Delta's candidates checked against the snapshot and the slice, from one Spark job."""

    # candidates that are live files of the snapshot, tombstones inside the retention window, or
    # lie outside the table: must be none
    suspicious: int
    suspicious_examples: tuple[str, ...]
    # candidates that are not one of the slice's files (``in_slice`` null; every one without a slice)
    not_in_slice: int
    # per top-level partition, the candidates that are slice files: {partition, files, bytes}
    slice_partitions: tuple[dict[str, Any], ...]
    # with a slice only (both 0 and None without one): of the candidates that are not slice
    # files, how many name a directory of the slice, how many do not (strangers), and one of those
    not_in_slice_directories: int = 0
    strangers: int = 0
    stranger_example: str | None = None


def check_plan(
    details: DataFrame,
    files: DataFrame,
    state: TableState,
    retained_since_millis: int | None = None,
    slice_frame: DataFrame | None = None,
) -> PlanCheck:
    """Check Delta's answer (:func:`candidate_details`) against the snapshot's files
    (:func:`~vacuum.snapshot.load_table_state`) in our own terms (decoded relative paths of the
    objects readers open), so a path-form mismatch can never turn into a deleted live file; and,
    in the same aggregation, count what is not a slice file and size what is.

    Delta decides what is valid; a candidate that is live (a live file or its deletion vector's
    file), or a tombstone (or its vector's file) removed at or after
    ``retained_since_millis`` (a version inside the retention window reads it), or lies outside
    the table, or (a slice file) was modified at or after ``retained_since_millis`` (Delta applied
    a shorter retention than the one reported), refuses the table whatever else the check finds.
    ``retained_since_millis`` must be no earlier than the cut-off Delta used, so that nothing
    Delta rightly plans is refused. With ``slice_frame``, the same job also tells the candidates
    that are not slice files apart: Delta's inventory mode adds directories it derives from the
    file paths (some of them wrong for deep partition trees), and anything else means Delta and our
    input disagree.
    """
    live = (
        needed_files(files, state, retained_since_millis)
        .select(F.split("relative_path", "/").alias("components"))
        # and so are its directories: a folder marker of one is never garbage
        .select(
            F.explode(
                F.transform(
                    F.sequence(F.lit(1), F.size("components")),
                    lambda i: F.array_join(F.slice(F.col("components"), 1, i), "/"),
                )
            ).alias("relative_path")
        )
        .distinct()  # a count per candidate, whatever the log holds
        .withColumn("live", F.lit(True))
    )
    suspicious = F.col("relative_path").isNull() | F.col("live").isNotNull()
    if retained_since_millis is not None:
        # a slice file written after the cut-off: Delta applied a shorter retention than ours
        suspicious = suspicious | (F.col("modificationTime") >= retained_since_millis)
    in_slice = F.col("in_slice").isNotNull()
    checked = details.join(live, "relative_path", "left")
    if slice_frame is not None:
        checked = _with_directory_flag(checked, slice_frame)
        stranger = ~in_slice & ~F.col("directory")
    else:  # every candidate is "not in the slice": the listing mode checks them its own way
        checked = checked.withColumn("directory", F.lit(False))
        stranger = F.lit(False)
    rows = (
        checked.groupBy("partition")
        .agg(
            F.count(F.when(suspicious, F.lit(1))).alias("suspicious"),
            F.min(F.when(suspicious, F.col("path"))).alias("example"),
            F.count(F.when(~in_slice, F.lit(1))).alias("not_in_slice"),
            F.count(F.when(~in_slice & F.col("directory"), F.lit(1))).alias("directories"),
            F.count(F.when(stranger, F.lit(1))).alias("strangers"),
            F.min(F.when(stranger, F.col("path"))).alias("stranger_example"),
            F.count(F.when(in_slice, F.lit(1))).alias("files"),
            F.sum(F.when(in_slice, F.col("length"))).alias("bytes"),
        )
        .collect()
    )
    rows.sort(key=lambda r: r["partition"])  # here, not by a Spark sort: that is two more jobs
    return PlanCheck(
        suspicious=sum(int(r["suspicious"]) for r in rows),
        suspicious_examples=tuple(r["example"] for r in rows if r["example"] is not None)[:5],
        not_in_slice=sum(int(r["not_in_slice"]) for r in rows),
        slice_partitions=tuple(
            {"partition": r["partition"], "files": int(r["files"]), "bytes": r["bytes"]}
            for r in rows
            if r["files"]
        ),
        not_in_slice_directories=sum(int(r["directories"]) for r in rows),
        strangers=sum(int(r["strangers"]) for r in rows),
        stranger_example=min((r["stranger_example"] for r in rows if r["stranger_example"]), default=None),
    )


def _needed(retained_since_millis: int | None) -> Column:
    """A row of :func:`~vacuum.snapshot.load_table_state`'s files that a version inside the
    retention window reads: a live file, or a tombstone removed at or after the cut-off."""
    needed = ~F.col("tombstone")
    if retained_since_millis is not None:
        needed = needed | (F.col("deletionTimestamp") >= retained_since_millis)
    return needed


# A path in the log that is relative and made only of these characters and escapes, with no
# empty component and none that starts with ".", names one file to the tool and to Delta alike.
# The tool decodes it (``%20`` a space, ``%25`` a percent sign) and compares keys. Delta compares
# strings: the path as its log holds it (a relative URI without dot segments, which Java's URI
# keeps as written) with each inventory key relative to the table, encoded by Hadoop's Path
# (Java's URI quoting: a space is ``%20``, a percent sign always ``%25``, and every character
# below is left as it is). Decoding such a path and encoding it again gives the path back, so the
# two comparisons agree. The escapes are the ones a partition value with a space or with a
# character Spark escapes in a directory name (``%3A`` for a colon, say) leaves in Delta's own
# log. A path in any other form (another escape, a scheme, a dot segment) may be one file to the
# tool's decoding and another to Delta's comparison.
# (\z, not $: Java's $ also matches before a final line terminator)
_PLAIN_FIRST = r"(?:[A-Za-z0-9_=-]|%2[05])"
_PLAIN_NEXT = r"(?:[A-Za-z0-9._=-]|%2[05])"
PLAIN_RELATIVE_PATH = rf"^{_PLAIN_FIRST}{_PLAIN_NEXT}*(/{_PLAIN_FIRST}{_PLAIN_NEXT}*)*\z"


def needed_files(files: DataFrame, state: TableState, retained_since_millis: int | None) -> DataFrame:
    """``relative_path`` of every file inside the table that a version inside the retention window
    reads: the snapshot's live files, its tombstones removed at or after ``retained_since_millis``
    (none of them when None) and the files holding their deletion vectors, in the decoded form of
    the inventory's relative paths. ``files`` is :func:`~vacuum.snapshot.load_table_state`'s."""
    return (
        files.where(_needed(retained_since_millis))
        # a needed file, and the file holding its deletion vector (one scan of the snapshot for
        # both; they are in the same form, so one expression reads them: two copies of it in one
        # generated method pass Java's 64 KB limit, and Spark would fall back to interpreting it)
        .select(F.explode(F.array("path", "deletionVectorPath")).alias("path"))
        .where(F.col("path").isNotNull())
        # a live file recorded by its absolute URI inside the table is live all the same
        .select(live_relative_path(state).alias("relative_path"))
        .where(F.col("relative_path").isNotNull())  # outside the table: no candidate is it
    )


def coverage_counts(
    live_files: DataFrame, slice_frame: DataFrame, taken_at_millis: int, state: TableState
) -> tuple[int, int]:
    """(live files of the table older than the inventory, how many of them the slice lists), in
    one job. A file recorded by its absolute URI counts when it lies inside the table; one
    outside (a shallow clone's source) is not the table's to list. ``live_files`` has every
    column of :func:`~vacuum.snapshot.load_table_state`'s files: the counts are
    :func:`slice_counts`' own (:func:`_file_counts`), of which this reads two."""
    row = _file_counts(live_files, slice_frame, taken_at_millis, state, None).first()
    assert row is not None
    return int(row["eligible"]), int(row["covered"])


def _file_counts(
    live_files: DataFrame,
    slice_frame: DataFrame,
    taken_at_millis: int,
    state: TableState,
    retained_since_millis: int | None,
) -> DataFrame:
    """One row of what :class:`SliceCounts` counts of the snapshot's files and the slice:
    ``eligible`` and ``covered`` (:func:`coverage_counts`), ``unneeded`` (the slice's objects,
    each of them, whose path no :func:`needed_files` row with ``retained_since_millis`` has),
    ``other_forms`` and ``vectors_vacuum_fails_on`` (needed rows of the log, each once).

    One scan of the snapshot's files and one of the slice, each grouped by the relative path,
    and one join of the two groupings on it: a needed row gives its file's path (flagged
    eligible when it is a live file older than the inventory: every live file is needed) and its
    deletion vector's file, both in the decoded form of the slice's relative paths; the row's own
    counts ride on its file's path, so each row counts once. A path outside the table (null)
    joins nothing: it counts toward the row's forms, not toward the coverage."""
    needed = live_files.where(_needed(retained_since_millis))
    # a vector Delta's VACUUM fails on is no form it reads alike either (nor one the tool can name)
    plain = (
        F.col("path").rlike(PLAIN_RELATIVE_PATH)
        & ~F.col("deletionVectorVacuumFails")
        & (F.col("deletionVectorPath").isNull() | F.col("deletionVectorPath").rlike(PLAIN_RELATIVE_PATH))
    )
    eligible = ~F.col("tombstone") & (F.col("modificationTime") < taken_at_millis)
    no = F.lit(False)
    paths = (
        needed.select(
            F.explode(
                F.array(
                    F.struct(
                        F.col("path").alias("path"),
                        eligible.alias("eligible"),
                        (~plain).alias("other_form"),
                        F.col("deletionVectorVacuumFails").alias("vector_fails"),
                    ),
                    F.struct(
                        F.col("deletionVectorPath").alias("path"),
                        no.alias("eligible"),
                        no.alias("other_form"),
                        no.alias("vector_fails"),
                    ),
                )
            ).alias("file")
        )
        .select("file.*")
        # (a row's own counts stay with it even if it had no path: they are the log's rows)
        .where(F.col("path").isNotNull() | F.col("other_form") | F.col("vector_fails"))
        # one expression reads both forms: two copies of it in one generated method pass Java's
        # 64 KB limit, and Spark would fall back to interpreting it
        .select(live_relative_path(state).alias("relative_path"), "eligible", "other_form", "vector_fails")
        .groupBy("relative_path")
        .agg(
            F.count(F.lit(1)).alias("needed_rows"),
            F.count(F.when(F.col("eligible"), F.lit(1))).alias("eligible_rows"),
            F.count(F.when(F.col("other_form"), F.lit(1))).alias("other_form_rows"),
            F.count(F.when(F.col("vector_fails"), F.lit(1))).alias("vector_fails_rows"),
        )
    )
    listed = slice_frame.groupBy("relative_path").agg(F.count(F.lit(1)).alias("slice_objects"))
    # the group of the needed paths outside the table (null) joins no slice row, nor counts as
    # live files the slice should list
    inside = F.col("relative_path").isNotNull()
    joined = paths.join(listed, "relative_path", "full")
    return joined.agg(
        F.coalesce(F.sum(F.when(inside, F.col("eligible_rows"))), F.lit(0)).alias("eligible"),
        F.coalesce(F.sum(F.when(F.col("slice_objects").isNotNull(), F.col("eligible_rows"))), F.lit(0)).alias(
            "covered"
        ),
        F.coalesce(F.sum(F.when(F.col("needed_rows").isNull(), F.col("slice_objects"))), F.lit(0)).alias(
            "unneeded"
        ),
        F.coalesce(F.sum("other_form_rows"), F.lit(0)).alias("other_forms"),
        F.coalesce(F.sum("vector_fails_rows"), F.lit(0)).alias("vectors_vacuum_fails_on"),
    )


@dataclass(frozen=True)
class SliceCounts:
    """What the classification kept, the coverage of the slice it left, and whether Delta can name
    any of its objects (:attr:`delta_names_nothing`), from one Spark job."""

    # objects kept out of the slice, by (reason, nested table root or None)
    kept: dict[tuple[str, str | None], int]
    # live files older than the inventory, and how many of them the slice lists
    eligible: int
    covered: int
    # the slice's objects that are not :func:`needed_files` (whatever their age)
    unneeded: int
    # needed files whose path in the log (or whose deletion vector's file) is not in
    # PLAIN_RELATIVE_PATH's form, the one Delta and the tool read alike, or whose deletion
    # vector is one Delta's VACUUM fails on
    needed_in_other_forms: int
    # needed files (log entries: live files and tombstones) whose deletion vector Delta's VACUUM
    # fails on (it cannot vacuum the table)
    vectors_vacuum_fails_on: int = 0

    @property
    def delta_names_nothing(self) -> bool:
        """Delta's inventory mode can name no object of the slice: it names only the slice's
        objects (and directory paths it derives from them, which are never deleted, see
        ``check_plan``), and never a file its log says a version inside the retention window
        reads. Every object of the slice is such a file, by a path Delta compares as the tool
        does."""
        return self.unneeded == 0 and self.needed_in_other_forms == 0


# slice_counts' union: each aggregation's row, tagged by ``row``, with the counts it has
_COUNT_ROW_COLUMNS = {
    "kept_reason": "string",
    "nested_root": "string",
    "objects": "long",
    "eligible": "long",
    "covered": "long",
    "unneeded": "long",
    "other_forms": "long",
    "vectors_vacuum_fails_on": "long",
}


def _count_row(counts: DataFrame, row: str) -> DataFrame:
    """``counts`` as rows of :func:`slice_counts`' union: tagged ``row``, a column it lacks null."""
    present = set(counts.columns)
    return counts.select(
        F.lit(row).alias("row"),
        *(
            F.col(name) if name in present else F.lit(None).cast(kind).alias(name)
            for name, kind in _COUNT_ROW_COLUMNS.items()
        ),
    )


def slice_counts(
    classified: DataFrame,
    slice_frame: DataFrame,
    live_files: DataFrame,
    taken_at_millis: int,
    state: TableState,
    retained_since_millis: int,
) -> SliceCounts:
    """The objects :func:`classify_objects` kept, by reason and nested root,
    :func:`coverage_counts` of ``slice_frame`` (:func:`inventory_slice` of ``classified``), the
    slice's objects that are not :func:`needed_files` with ``retained_since_millis``, and the
    needed files logged in another form than PLAIN_RELATIVE_PATH's or with a deletion vector
    Delta's VACUUM fails on (:func:`~vacuum.snapshot.deletion_vector_vacuum_fails`): the
    aggregations in one Spark job, a union of their rows (a job per aggregation would cost a small
    table as much as the aggregation itself), the snapshot's files read once
    (:func:`_file_counts`)."""
    kept = _count_row(
        classified.where(F.col("kept_reason").isNotNull())
        .groupBy("kept_reason", "nested_root")
        .agg(F.count(F.lit(1)).alias("objects")),
        "kept",
    )
    files = _count_row(
        _file_counts(live_files, slice_frame, taken_at_millis, state, retained_since_millis), "files"
    )
    rows = kept.unionByName(files).collect()
    # one row of the files' counts: a global aggregation is one row, and its counts are never null
    (counted,) = [row for row in rows if row["row"] == "files"]
    return SliceCounts(
        kept={
            (row["kept_reason"], row["nested_root"]): int(row["objects"])
            for row in rows
            if row["row"] == "kept"
        },
        eligible=int(counted["eligible"]),
        covered=int(counted["covered"]),
        unneeded=int(counted["unneeded"]),
        needed_in_other_forms=int(counted["other_forms"]),
        vectors_vacuum_fails_on=int(counted["vectors_vacuum_fails_on"]),
    )


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
    """Candidates with ``relative_path``, ``bucket``, ``key``, ``length`` and ``modificationTime``
    (from the inventory when there is one), ``in_slice`` (the candidate is one of the slice's files) and the top-level
    ``partition``."""
    frame = candidates.select("path").withColumn(
        "relative_path",
        F.when(
            F.col("path").startswith(state.base), F.substring(F.col("path"), len(state.base) + 1, 1 << 30)
        ),
    )
    if slice_frame is not None:
        files = slice_frame.select(
            "path", "length", "modificationTime", "bucket", "key", F.lit(True).alias("in_slice")
        )
        frame = frame.join(files, "path", "left")
    else:
        frame = (
            frame.withColumn("length", F.lit(None).cast("long"))
            .withColumn("modificationTime", F.lit(None).cast("long"))
            .withColumn("bucket", F.lit(state.bucket))
            .withColumn("key", F.concat(F.lit(state.key_prefix), F.col("relative_path")))
            .withColumn("in_slice", F.lit(None).cast("boolean"))
        )
    first = F.split(F.col("relative_path"), "/").getItem(0)
    nested = F.col("relative_path").contains("/")
    return frame.withColumn(
        "partition", F.when(nested & first.contains("="), first).otherwise(F.lit("(table root)"))
    )


def _with_directory_flag(candidates: DataFrame, slice_frame: DataFrame) -> DataFrame:
    """``candidates`` with ``directory``: the candidate's last path component is the name of a
    directory some slice file lies in (at most one match per candidate: the names are distinct)."""
    components = F.split(F.col("relative_path"), "/")
    directory_names = (
        slice_frame.select(F.explode(F.slice(components, 1, F.size(components) - 1)).alias("name"))
        .distinct()
        .withColumn("directory_name", F.lit(True))
    )
    return (
        candidates.withColumn("name", F.element_at(F.split(F.col("relative_path"), "/"), -1))
        .join(directory_names, "name", "left")
        .withColumn("directory", F.col("relative_path").isNotNull() & F.col("directory_name").isNotNull())
        .drop("name", "directory_name")
    )
