"""The deletion ledger, ``vacuum_deletions``: one row per object a vacuum deleted (measured).

It is the audit trail for restoring from a versioned bucket or a backup, and it keeps a rerun on
the same inventory honest: S3 answers "Deleted" for keys that no longer exist, so without the
ledger a second run on the same day would report the same files deleted again. The planner leaves
out every object the ledger shows deleted after the inventory was taken.

A restore (:mod:`vacuum.restore`) appends its own rows: the deletion's ``run_id``, ``deleted_at``
and ``deleted_with``, with ``restored_by`` (the restore's run id) and ``restored_at``. An object
restored is there again: :func:`deleted_since` no longer counts its deletion.

Columns added since the first ledger (``delete_marker_version_id``, ``restored_by``,
``restored_at``) are added to an older ledger by its next append, and read as null until then.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from core.errors import spark_error_summary
from core.session import local_frame
from core.tables import LEDGER_SCHEMA, append_to_own_table, delta_table_exists, is_ledger, read_ledger
from vacuum.tuning import broadcast_threshold

log = logging.getLogger("inventory_vacuum")
_APPEND_LOCK = threading.Lock()
_APPEND_ATTEMPTS = 5
# ``deleted_with`` of a planned object found already gone before the delete (--verify-existence):
# not deleted by this tool, and its length is not counted, but later runs leave it out all the same
ALREADY_GONE = "already_gone"


def deleted_since(spark: SparkSession, location: str, bucket: str, since: datetime) -> DataFrame | None:
    """``bucket, key`` of the objects of ``bucket`` the ledger shows deleted at or after ``since``
    and not restored since.

    ``None`` when there is no ledger yet. Any other read error is raised: a ledger that exists
    but cannot be read must not quietly turn into "nothing deleted yet".
    """
    if not delta_table_exists(spark, location):
        return None
    ledger = read_ledger(spark, location).where(F.col("bucket") == bucket)
    since_ms = int(since.timestamp() * 1000)
    deletions = ledger.where(F.col("restored_by").isNull() & (F.unix_millis("deleted_at") >= F.lit(since_ms)))
    restored = ledger.where(F.col("restored_by").isNotNull()).select("run_id", "bucket", "key")
    return _naming_no_table(
        deletions.join(restored, ["run_id", "bucket", "key"], "left_anti").select("bucket", "key").distinct()
    )


def _naming_no_table(frame: DataFrame) -> DataFrame:
    """The same rows, from the same read of the ledger (the Delta version planned now), under a
    plan that names no table.

    Every append to the ledger makes Spark re-plan each cached frame whose plan reads the ledger
    (its cache manager refreshes the cached plans of a path it writes). A table's slice, its
    classified objects, Delta's candidates and the deletions measured all read
    :func:`deleted_since`: each append re-planned them all, with Delta's file skipping, for the
    appending table and for every table running beside it: 31 Spark jobs and about 4 s an append
    of a few rows (Spark's event log). Re-planned, they would read the ledger as it is then,
    which only leaves out more; behind a plain RDD they read it as planned, and no append
    touches them.

    An RDD has no size for Spark to plan with (it counts as the largest possible, or as 1 GiB in a
    small table's session, which broadcasts nothing by size: see :mod:`vacuum.tuning`), so the
    frame keeps the broadcast the ledger's own read would get: the planner joins it with each
    table's objects, which would otherwise all be shuffled.
    """
    spark = frame.sparkSession
    size = int(str(frame._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))
    threshold = broadcast_threshold(spark)
    jvm_frame = spark._jsparkSession.createDataFrame(frame._jdf.rdd(), frame._jdf.schema())  # type: ignore[union-attr]
    detached: DataFrame = type(frame)(jvm_frame, spark)  # type: ignore[call-arg]
    return detached.hint("broadcast") if 0 <= size <= threshold else detached


def record_deletions(
    spark: SparkSession,
    location: str,
    deleted: DataFrame,
    *,
    run_id: str,
    table: str,
    deleted_with: str,
    delete_started_at: datetime | None = None,
    deleted_at: datetime | None = None,
) -> str | None:
    """Append one row per deleted object (``deleted`` has ``path, bucket, key, length``, and
    ``delete_marker_version_id`` when the delete named the markers it made). ``delete_started_at``:
    when the table's delete step began; every marker of its deletes was made after it.
    ``deleted_at``: when the deletes had all been sent (default: the time of the append).

    Returns a warning when the ledger could not be written (the objects are gone either way).
    """
    marker = (
        F.col("delete_marker_version_id") if "delete_marker_version_id" in deleted.columns else F.lit(None)
    )
    rows = deleted.select(
        F.lit(run_id).alias("run_id"),
        F.lit(table).alias("table"),
        "path",
        "bucket",
        "key",
        (F.lit(None) if deleted_with == ALREADY_GONE else F.col("length")).cast("long").alias("length"),
        F.lit(deleted_with).alias("deleted_with"),
        (F.lit(deleted_at).cast("timestamp") if deleted_at else F.current_timestamp()).alias("deleted_at"),
        marker.cast("string").alias("delete_marker_version_id"),
        F.lit(None).cast("string").alias("restored_by"),
        F.lit(None).cast("timestamp").alias("restored_at"),
        F.lit(delete_started_at).cast("timestamp").alias("delete_started_at"),
    )
    return _append(spark, location, rows)


def record_restores(spark: SparkSession, location: str, records: Sequence[Mapping[str, Any]]) -> str | None:
    """Append one row per restored object (``records`` hold the ledger's columns). Returns a
    warning when the ledger could not be written (the objects are restored either way)."""
    if not records:
        return None
    rows = [tuple(record.get(f.name) for f in LEDGER_SCHEMA) for record in records]
    return _append(spark, location, local_frame(spark, rows, LEDGER_SCHEMA))


def _append(spark: SparkSession, location: str, rows: DataFrame) -> str | None:
    """Append ``rows`` to the ledger, retrying concurrent appends; a warning when it failed.
    A ledger written before the newer columns existed gains them (only a ledger: another table
    at the location is never reshaped, and the append then fails)."""
    last_error = ""
    for attempt in range(_APPEND_ATTEMPTS):
        try:
            with _APPEND_LOCK:  # tables of one run append one at a time; other runs: retried
                append_to_own_table(rows, location, lambda: is_ledger(spark, location))
            return None
        except Exception as error:
            last_error = spark_error_summary(error)
            # an append cancelled by the interrupt that stops a run (PySpark cancels the jobs running
            # when Ctrl-C comes) commits nothing, and the deletes must still be ledgered
            retried = ("Concurrent", "CONCURRENT", "PROTOCOL_CHANGED", "cancelled", "CANCELLED")
            if not any(word in last_error for word in retried):
                break
            time.sleep(0.5 * 2**attempt)
    message = f"could not append to the deletion ledger {location}: {last_error}"
    log.warning(message)
    return message


def ensure_ledger(spark: SparkSession, location: str) -> None:
    """Create the empty ledger table once, before tables run concurrently: appends to an existing
    Delta table do not conflict, but two first appends would both try to create it."""
    if not delta_table_exists(spark, location):
        spark.createDataFrame([], LEDGER_SCHEMA).write.format("delta").mode("append").save(location)
