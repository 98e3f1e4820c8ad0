"""The deletion ledger, ``vacuum_deletions``: one row per object a vacuum deleted (measured).

It is the audit trail for restoring from a versioned bucket or a backup, and it keeps a rerun on
the same inventory honest: S3 answers "Deleted" for keys that no longer exist, so without the
ledger a second run on the same day would report the same files deleted again. The planner leaves
out every object the ledger shows deleted after the inventory was taken.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from core.errors import spark_error_summary
from core.tables import LEDGER_SCHEMA, delta_table_exists

log = logging.getLogger("inventory_vacuum")
_APPEND_LOCK = threading.Lock()
_APPEND_ATTEMPTS = 5
# ``deleted_with`` of a planned object found already gone before the delete (--verify-existence):
# not deleted by this tool, and its length is not counted, but later runs leave it out all the same
ALREADY_GONE = "already_gone"


def deleted_since(spark: SparkSession, location: str, bucket: str, since: datetime) -> DataFrame | None:
    """``bucket, key`` of the objects of ``bucket`` the ledger shows deleted at or after ``since``.

    ``None`` when there is no ledger yet. Any other read error is raised: a ledger that exists
    but cannot be read must not quietly turn into "nothing deleted yet".
    """
    if not delta_table_exists(spark, location):
        return None
    ledger = spark.read.format("delta").load(location)
    since_ms = int(since.timestamp() * 1000)
    return (
        ledger.where((F.col("bucket") == bucket) & (F.unix_millis("deleted_at") >= F.lit(since_ms)))
        .select("bucket", "key")
        .distinct()
    )


def record_deletions(
    spark: SparkSession, location: str, deleted: DataFrame, *, run_id: str, table: str, deleted_with: str
) -> str | None:
    """Append one row per deleted object (``deleted`` has ``path, bucket, key, length``).

    Returns a warning when the ledger could not be written (the objects are gone either way).
    """
    rows = deleted.select(
        F.lit(run_id).alias("run_id"),
        F.lit(table).alias("table"),
        "path",
        "bucket",
        "key",
        (F.lit(None) if deleted_with == ALREADY_GONE else F.col("length")).cast("long").alias("length"),
        F.lit(deleted_with).alias("deleted_with"),
        F.current_timestamp().alias("deleted_at"),
    )
    last_error = ""
    for attempt in range(_APPEND_ATTEMPTS):
        try:
            with _APPEND_LOCK:  # tables of one run append one at a time; other runs: retried
                rows.write.format("delta").mode("append").save(location)
            return None
        except Exception as error:
            last_error = spark_error_summary(error)
            if not any(word in last_error for word in ("Concurrent", "CONCURRENT", "PROTOCOL_CHANGED")):
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
