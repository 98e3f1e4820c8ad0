"""The ``vacuum_runs`` history: one row per table per run, appended to a Delta table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

from core.tables import VACUUM_RUNS_SCHEMA, append_run_rows

if TYPE_CHECKING:
    from vacuum.results import TableRun


def record_vacuum_runs(spark: SparkSession, location: str, run_id: str, runs: Sequence[TableRun]) -> bool:
    """Append one ``vacuum_runs`` row per table of this run; whether they were appended."""
    records = [{**r.to_dict(), "table": r.name, "retention_hours": r.retention_hours_effective} for r in runs]
    return append_run_rows(spark, location, VACUUM_RUNS_SCHEMA, run_id, records)
