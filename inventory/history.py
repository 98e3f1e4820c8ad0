"""Small append-only Delta history tables (``inventory_runs``, ``vacuum_runs``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from inventory.paths import StorageLocation


def default_history_location(inventory_table: str, name: str) -> str:
    """``s3://b/warehouse/inventory`` -> ``s3://b/warehouse/<name>``: history beside the table."""
    location = StorageLocation.parse(inventory_table, what="--inventory-table")
    return location.sibling(name).uri


def append_rows(
    spark: SparkSession, location: str, schema: StructType, rows: Sequence[dict[str, Any]]
) -> None:
    """Append ``rows`` to the Delta table at ``location`` (created on first use)."""
    if not rows:
        return
    frame = spark.createDataFrame([tuple(row.get(f.name) for f in schema) for row in rows], schema)
    frame.write.format("delta").mode("append").save(location)
