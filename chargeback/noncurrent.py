"""Noncurrent versions and delete markers: they cost money and no vacuum frees them.

From the usage table (:mod:`inventory.usage`): per bucket and per owning table (or top-level
prefix under no table), priced by their own storage class. From ``inventory_runs`` (buckets
ingested without usage rows): per bucket only, priced at STANDARD (the class is not recorded).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import date

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from chargeback.grouping import owners
from chargeback.prices import GIB, PriceTable, price_key, usage_cost
from chargeback.read import read_history
from chargeback.report import (
    UNKNOWN_OWNER,
    UNOWNED,
    Noncurrent,
    NoncurrentBucket,
    NoncurrentGroup,
    Tally,
    add,
    rounded_cost,
)
from core.registry import TableRegistry
from inventory.usage import CURRENT, DELETE_MARKER, USAGE_SCHEMA

FROM_USAGE = "inventory_usage"
FROM_RUNS = "inventory_runs"


def noncurrent_from_runs(
    spark: SparkSession, location: str, prices: PriceTable, warnings: list[str]
) -> Noncurrent:
    """Per bucket, from the newest successful ingest of each bucket in ``inventory_runs``."""
    runs = read_history(spark, location, "inventory_runs history", warnings)
    if runs is None:
        return Noncurrent(FROM_RUNS, 0, 0, 0, 0.0, "STANDARD", ())
    newest = (
        runs.where(F.col("status") == "ok")
        .groupBy("bucket")
        .agg(
            F.max_by(
                F.struct("noncurrent_objects", "noncurrent_bytes", "delete_markers", "inventory_taken_at"),
                "run_at",
            ).alias("n")
        )
        .select("bucket", "n.*")
        .orderBy("bucket")
        .collect()
    )
    price = prices.standard.price_per_gb_month / GIB
    buckets = []
    for row in newest:
        objects, size, markers = (
            row[name] or 0 for name in ("noncurrent_objects", "noncurrent_bytes", "delete_markers")
        )
        taken = row["inventory_taken_at"]
        buckets.append(
            NoncurrentBucket(
                row["bucket"],
                objects,
                size,
                markers,
                rounded_cost(size * price),
                taken.isoformat() if taken else None,
                FROM_RUNS,
                "STANDARD",
            )
        )
    size = sum(b.bytes for b in buckets)
    return Noncurrent(
        FROM_RUNS,
        sum(b.objects for b in buckets),
        size,
        sum(b.delete_markers for b in buckets),
        rounded_cost(size * price),
        "STANDARD",
        tuple(buckets),
    )


def noncurrent_from_usage(
    usage: DataFrame,
    prices: PriceTable,
    registry: TableRegistry | None,
    bucket_dates: Mapping[str, date | None],
    warnings: list[str],
) -> Noncurrent:
    """Of the delivery each bucket has in the inventory table (``bucket_dates``; its newest in the
    usage table for a bucket the inventory table no longer holds)."""
    newest = usage.groupBy("bucket").agg(F.max("inventory_date").alias("newest_date"))
    chosen = usage.join(newest, "bucket")
    held = [(bucket, day) for bucket, day in bucket_dates.items() if day is not None]
    if held:
        dates = usage.sparkSession.createDataFrame(held, "bucket string, held_date date")
        chosen = chosen.join(F.broadcast(dates), "bucket", "left").withColumn(
            "newest_date", F.coalesce("held_date", "newest_date")
        )
    delivered = chosen.where(F.col("inventory_date") == F.col("newest_date")).select(
        *[f.name for f in USAGE_SCHEMA]
    )
    # one job: the noncurrent rows, and a row per bucket (state null) saying its delivery is there
    presence = [F.col("bucket")] + [
        F.lit(None).cast(f.dataType).alias(f.name) for f in USAGE_SCHEMA.fields[1:]
    ]
    collected = (
        delivered.where(F.col("state") != CURRENT)
        .unionByName(delivered.select("bucket").distinct().select(*presence))
        .collect()
    )
    present = {r["bucket"] for r in collected}
    owner_of = owners(registry)
    buckets: dict[str, _Sums] = {}
    groups: dict[tuple[str, str], _Sums] = {}
    taken_at: dict[str, str | None] = {}
    for row in (r for r in collected if r["state"] is not None):
        cost = usage_cost(row, prices, warnings)
        markers = row["objects"] if row["state"] == DELETE_MARKER else 0
        objects = 0 if markers else row["objects"]
        taken = row["inventory_taken_at"]
        taken_at.setdefault(row["bucket"], taken.isoformat() if taken else None)
        group = (row["bucket"], row["table"] or row["prefix"])
        key = None if markers else price_key(row["storage_class"], row["intelligent_tiering_access_tier"])
        for sums in (
            buckets.setdefault(row["bucket"], _Sums()),
            groups.setdefault(group, _Sums(row["table"])),
        ):
            sums.add(objects, row["bytes"] or 0, markers, cost, key)
    entries = [
        NoncurrentBucket(name, *sums.figures(), taken_at[name], FROM_USAGE, "storage class")
        for name, sums in buckets.items()
    ]
    entries += [  # a delivery without noncurrent versions
        NoncurrentBucket(name, 0, 0, 0, 0.0, None, FROM_USAGE, "storage class", taken_at_known=False)
        for name in present - set(buckets)
    ]
    ranked = sorted(
        (
            NoncurrentGroup(
                bucket,
                group,
                sums.table,
                (owner_of.get(sums.table, UNKNOWN_OWNER) if sums.table else UNOWNED),
                *sums.figures(),
                storage_classes=sums.storage_classes,
            )
            for (bucket, group), sums in groups.items()
        ),
        key=lambda g: (-g.monthly_cost, -g.bytes, g.bucket, g.group),
    )
    return Noncurrent(
        FROM_USAGE,
        sum(b.objects for b in entries),
        sum(b.bytes for b in entries),
        sum(b.delete_markers for b in entries),
        rounded_cost(sum(b.monthly_cost for b in entries)),
        "storage class",
        tuple(sorted(entries, key=lambda b: b.bucket)),
        tuple(ranked),
    )


class _Sums:
    """Running figures of one bucket or group (cost summed unrounded)."""

    def __init__(self, table: str | None = None) -> None:
        self.table = table
        self.objects = self.bytes = self.delete_markers = 0
        self.monthly_cost = 0.0
        self.storage_classes: dict[str, Tally] = {}

    def add(self, objects: int, size: int, markers: int, cost: float, key: str | None = None) -> None:
        self.objects += objects
        self.bytes += size
        self.delete_markers += markers
        self.monthly_cost += cost
        if key is not None:
            add(self.storage_classes, key, None, objects, size, cost)

    def figures(self) -> tuple[int, int, int, float]:
        return self.objects, self.bytes, self.delete_markers, rounded_cost(self.monthly_cost)


def with_runs_of(into: Noncurrent, runs: Noncurrent, buckets: Sequence[str]) -> Noncurrent:
    """``into`` with the ``inventory_runs`` figures of ``buckets`` (priced at STANDARD) added."""
    added = [b for b in runs.buckets if b.bucket in buckets]
    cost = into.monthly_cost
    for bucket in added:
        cost = rounded_cost(cost + bucket.monthly_cost)
    return replace(
        into,
        objects=into.objects + sum(b.objects for b in added),
        bytes=into.bytes + sum(b.bytes for b in added),
        delete_markers=into.delete_markers + sum(b.delete_markers for b in added),
        monthly_cost=cost,
        buckets=tuple(sorted((*into.buckets, *added), key=lambda b: b.bucket)),
    )
