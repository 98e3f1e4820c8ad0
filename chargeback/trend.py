"""The trend: bytes and monthly cost per inventory date over the last days, in all, per owner and
for the costliest tables, priced at today's prices.

Dates come from the usage table (:mod:`inventory.usage`); days before its first row from older
versions of the inventory table (Delta time travel, the newest version of each commit day), while
they are kept. A bucket without a delivery on some date counts with its newest earlier one
(``carried_forward`` names it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta, timezone
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from chargeback.grouping import owner_column
from chargeback.prices import PriceTable, usage_cost
from chargeback.report import UNOWNED, Tally, Trend, TrendPoint, add, ranked, rounded_cost
from core.errors import spark_error_summary
from core.registry import TableRegistry
from inventory.usage import CURRENT, USAGE_SCHEMA, USAGE_SUMS, usage_from_inventory_versions

DEFAULT_TREND_DAYS = 30
TREND_TOP_TABLES = 10
_USAGE_RANK = 1 << 62  # the usage table's rows win over any time-travelled version of the same date


def trend(
    spark: SparkSession,
    usage: DataFrame | None,
    inventory_table: str,
    prices: PriceTable,
    registry: TableRegistry | None,
    by_table: Mapping[str, Tally],
    days: int,
    warnings: list[str],
) -> Trend:
    """The trend over the last ``days`` days; ``by_table`` (today's figures) picks the
    :data:`TREND_TOP_TABLES` costliest tables followed one by one."""
    since = (datetime.now(timezone.utc) - timedelta(days=days)).date()
    sources: list[str] = []
    frames: list[DataFrame] = []
    first_usage_date = None
    if usage is not None:
        # every date, also before the window: a bucket counts with its newest earlier delivery
        first = usage.agg(F.min("inventory_date")).first()
        first_usage_date = first[0] if first else None
        if first_usage_date is not None:
            columns = [f.name for f in USAGE_SCHEMA]
            frames.append(usage.select(*columns).withColumn("version", F.lit(_USAGE_RANK)))
            sources.append("inventory_usage")
    versions = _versions_to_backfill(spark, inventory_table, since, first_usage_date, warnings)
    backfill = usage_from_inventory_versions(spark, inventory_table, versions) if versions else None
    if backfill is not None:
        frames.append(backfill)
        sources.append("time_travel")
    top = [name for name, _ in ranked({k: v for k, v in by_table.items() if k != UNOWNED})][:TREND_TOP_TABLES]
    try:
        collected = _trend_rows(frames, registry, top)
    except Exception as error:  # an old version's files removed by a VACUUM of the inventory table
        if backfill is None:
            raise
        warnings.append(
            f"trend: older inventory-table versions not readable, left out: {spark_error_summary(error)[:160]}"
        )
        frames, sources = frames[:-1], sources[:-1]
        collected = _trend_rows(frames, registry, top)
    points = _trend_points(collected, prices, warnings, since)
    return Trend(tuple(sources), days, prices.prices_as_of, points)


def _trend_rows(frames: Sequence[DataFrame], registry: TableRegistry | None, top: Sequence[str]) -> list[Any]:
    """Current usage per bucket, date, class, owner and top table: of each bucket and date, only
    the rows of its best source (the usage table, else the newest inventory-table version)."""
    if not frames:
        return []
    rows = frames[0]
    for frame in frames[1:]:
        rows = rows.unionByName(frame)
    chosen = rows.join(
        rows.groupBy("bucket", "inventory_date").agg(F.max("version").alias("version")),
        ["bucket", "inventory_date", "version"],
    )
    return (
        chosen.select(
            "bucket",
            "inventory_date",
            "state",
            "storage_class",
            "intelligent_tiering_access_tier",
            owner_column(registry).alias("owner"),
            F.when(F.col("table").isin(top), F.col("table")).alias("table"),
            *USAGE_SUMS,
        )
        .groupBy(
            "bucket",
            "inventory_date",
            "state",
            "storage_class",
            "intelligent_tiering_access_tier",
            "owner",
            "table",
        )
        .agg(*[F.sum(name).alias(name) for name in USAGE_SUMS])
        .collect()
    )


def _versions_to_backfill(
    spark: SparkSession, inventory_table: str, since: date, before: date | None, warnings: list[str]
) -> list[int]:
    """The newest inventory-table version of each commit day from ``since`` up to (not including)
    ``before`` (None: up to today)."""
    try:
        history = spark.sql(f"DESCRIBE HISTORY delta.`{inventory_table}`").select(
            "version", F.to_date("timestamp").alias("day")
        )
        window = history.where(F.col("day") >= F.lit(since))
        if before is not None:
            window = window.where(F.col("day") < F.lit(before))
        return sorted(
            r["version"] for r in window.groupBy("day").agg(F.max("version").alias("version")).collect()
        )
    except Exception as error:
        warnings.append(f"no inventory table history for the trend: {spark_error_summary(error)[:120]}")
        return []


def _trend_points(
    rows: Sequence[Any], prices: PriceTable, warnings: list[str], since: date
) -> tuple[TrendPoint, ...]:
    """One point per delivery date from ``since`` on; a date a bucket has no delivery on counts
    its newest earlier one. Any row (also of noncurrent versions, or the zero marker) marks a
    delivery; only current objects are summed."""
    by_bucket: dict[str, dict[Any, list[Any]]] = {}
    for row in rows:
        by_bucket.setdefault(row["bucket"], {}).setdefault(row["inventory_date"], []).append(row)
    dates = sorted({d for dated in by_bucket.values() for d in dated if d >= since})
    points = []
    for day in dates:
        objects = size = 0
        cost = 0.0
        owners: dict[str, Tally] = {}
        tables: dict[str, Tally] = {}
        carried = []
        for bucket, dated in sorted(by_bucket.items()):
            known = [d for d in dated if d <= day]
            if not known:
                continue
            if max(known) != day:
                carried.append(bucket)
            for row in dated[max(known)]:
                if row["state"] != CURRENT:
                    continue
                row_cost = usage_cost(row, prices, warnings)
                add(owners, row["owner"], None, row["objects"], row["bytes"] or 0, row_cost)
                if row["table"] is not None:
                    add(tables, row["table"], None, row["objects"], row["bytes"] or 0, row_cost)
                objects += row["objects"]
                size += row["bytes"] or 0
                cost += row_cost
        points.append(
            TrendPoint(
                day.isoformat(),
                objects,
                size,
                rounded_cost(cost),
                tuple(ranked(owners)),
                tuple(ranked(tables)),
                tuple(carried),
            )
        )
    return tuple(points)
