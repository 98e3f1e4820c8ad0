"""An inventory of one table made now, from one flat listing: ``vacuum --mode flat``.

For tables with no S3 Inventory delivery yet, and for small tables, where a delivery is not
worth waiting for. One paginated ``ListObjectsV2`` of ``<table path>/`` without a delimiter (1000
keys a page, whatever the partition layout), turned into rows of the inventory table's schema, so
the planner, every gate and Delta's ``USING INVENTORY`` run unchanged. Delta's own listing VACUUM
lists directory by directory instead: one request per partition directory at least.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from core.paths import LOCAL_BUCKET, StorageLocation
from core.s3 import s3_client
from core.tables import INVENTORY_TABLE_SCHEMA


def listing_inventory(spark: SparkSession, location: StorageLocation) -> DataFrame:
    """The objects under ``location`` now, as inventory-table rows (``inventory_taken_at``: the
    moment the listing started, so anything written during it counts as younger)."""
    taken_at = datetime.now(timezone.utc)
    rows = [
        _row(location.bucket, key, size, modified, storage_class, taken_at)
        for key, size, modified, storage_class in _objects(location)
    ]
    return spark.createDataFrame(rows, INVENTORY_TABLE_SCHEMA)


def _objects(location: StorageLocation) -> Iterator[tuple[str, int, datetime, str | None]]:
    if not location.is_s3:
        root = "/" + location.key
        for directory, _, files in os.walk(root):
            for name in files:
                path = os.path.join(directory, name)
                stat = os.stat(path)
                yield (
                    path.lstrip("/"),
                    stat.st_size,
                    datetime.fromtimestamp(stat.st_mtime, timezone.utc),
                    None,
                )
        return
    pages = (
        s3_client()
        .get_paginator("list_objects_v2")
        .paginate(Bucket=location.bucket, Prefix=location.key + "/")
    )
    for page in pages:
        for item in page.get("Contents", []):
            yield item["Key"], item["Size"], item["LastModified"], item.get("StorageClass")


def _row(
    bucket: str, key: str, size: int, modified: datetime, storage_class: str | None, taken_at: datetime
) -> tuple[Any, ...]:
    scheme = "file:/" if bucket == LOCAL_BUCKET else f"s3://{bucket}/"
    values = {
        "path": scheme + key,
        "length": size,
        "isDir": key.endswith("/"),
        "modificationTime": int(modified.timestamp() * 1000),
        "bucket": bucket,
        "key": key,
        "storage_class": storage_class,
        "inventory_date": taken_at.date(),
        "inventory_taken_at": taken_at,
    }
    return tuple(values.get(field.name) for field in INVENTORY_TABLE_SCHEMA)
