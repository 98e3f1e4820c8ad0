"""The ``vacuum_runs`` history: one row per table per run, appended to a Delta table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from core.tables import append_run_rows

if TYPE_CHECKING:
    from vacuum.results import TableRun

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
    ]
)


def record_vacuum_runs(spark: SparkSession, location: str, run_id: str, runs: Sequence[TableRun]) -> None:
    """Append one ``vacuum_runs`` row per table of this run."""
    records = [{**r.to_dict(), "table": r.name, "retention_hours": r.retention_hours_effective} for r in runs]
    append_run_rows(spark, location, VACUUM_RUNS_SCHEMA, run_id, records)
