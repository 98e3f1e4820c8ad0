"""Reading the tables a chargeback prices: the inventory table's current objects, and the history
tables beside it (read only; one that cannot be read is a warning, not an error)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from core.errors import spark_error_summary
from core.tables import INVENTORY_TABLE_SCHEMA, read_inventory
from inventory.schema import with_optional_columns
from inventory.usage import OPTIONAL_COLUMNS

REQUIRED_COLUMNS = ("bucket", "key", "length", "storage_class")
_REQUIRED = StructType([f for f in INVENTORY_TABLE_SCHEMA if f.name in REQUIRED_COLUMNS])


def read_inventory_for_chargeback(spark: SparkSession, location: str) -> DataFrame:
    """The current objects of the inventory table; an :class:`InventoryTableError` (exit 2) when it
    cannot be read or lacks a column the chargeback needs (``storage_class`` above all)."""
    frame = read_inventory(
        spark,
        location,
        required=_REQUIRED,
        purpose="not an inventory-vacuum inventory table, nothing to price",
        check_types=False,  # a length of another integer type is priced all the same
    )
    frame = with_optional_columns(frame, OPTIONAL_COLUMNS)
    current = F.coalesce(F.col("is_latest"), F.lit(True)) & ~F.coalesce(
        F.col("is_delete_marker"), F.lit(False)
    )
    return frame.where(current)


def read_history(spark: SparkSession, location: str, what: str, warnings: list[str]) -> DataFrame | None:
    """The Delta table at ``location``, or None with a warning naming ``what`` when it cannot be read."""
    try:
        frame = spark.read.format("delta").load(location)
        frame.columns  # noqa: B018 - resolves the table now, inside the try
    except Exception as error:
        warnings.append(f"no {what} at {location} ({spark_error_summary(error)[:120]})")
        return None
    return frame
