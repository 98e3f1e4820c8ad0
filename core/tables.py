"""Small append-only Delta history tables (``inventory_runs``, ``vacuum_runs``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timezone
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import DataType, DateType, StructType, TimestampType

from core.errors import spark_error_summary
from core.paths import StorageLocation

log = logging.getLogger("inventory_vacuum")


def default_history_location(inventory_table: str, name: str) -> str:
    """``s3://b/warehouse/inventory`` -> ``s3://b/warehouse/<name>``: history beside the table."""
    location = StorageLocation.parse(inventory_table, what="--inventory-table")
    return location.sibling(name).uri


def append_run_rows(
    spark: SparkSession, location: str, schema: StructType, run_id: str, records: Sequence[Mapping[str, Any]]
) -> None:
    """Append one row per record (plus ``run_id`` and ``run_at``) to the Delta table at ``location``.

    Records may hold more keys than the schema (ignored) and ISO strings for dates and
    timestamps (parsed). The table is created on first use.
    """
    if not records:
        return
    run_at = datetime.now(timezone.utc)
    rows = [
        tuple(_typed({"run_id": run_id, "run_at": run_at, **record}.get(f.name), f.dataType) for f in schema)
        for record in records
    ]
    try:
        # a history table written by an older version gains the new columns; any other table
        # at that location is never reshaped (the append then fails and warns)
        writer = spark.createDataFrame(rows, schema).write.format("delta").mode("append")
        if _is_history_table(spark, location):
            writer = writer.option("mergeSchema", "true")
        writer.save(location)
    except Exception as error:  # the run itself is done; a history failure must not hide its result
        log.warning(
            "could not append %d row(s) to the history table %s: %s",
            len(rows),
            location,
            spark_error_summary(error),
        )


def _is_history_table(spark: SparkSession, location: str) -> bool:
    """True when ``location`` holds a Delta table with this tool's ``run_id``/``run_at`` columns."""
    jvm = spark._jvm
    assert jvm is not None
    log_path = jvm.org.apache.hadoop.fs.Path(location.rstrip("/") + "/_delta_log")
    if not log_path.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf()).exists(log_path):
        return False
    columns = set(spark.read.format("delta").load(location).columns)
    return {"run_id", "run_at"} <= columns


def _typed(value: Any, data_type: DataType) -> Any:
    if isinstance(value, str) and isinstance(data_type, TimestampType):
        return datetime.fromisoformat(value)
    if isinstance(value, str) and isinstance(data_type, DateType):
        return date.fromisoformat(value)
    return value
