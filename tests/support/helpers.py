"""Run the command line in-process, write registries, put objects, build and ingest inventories."""

from __future__ import annotations

import io
import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from core.paths import LOCAL_BUCKET, StorageLocation
from core.registry import parse_registry
from core.tables import INVENTORY_TABLE_SCHEMA
from inventory.delivery_writer import snapshot_bucket
from jobs.cli import run


def retention_deadline(seconds: float = 3.0) -> float:
    """When everything written so far is outside a test table's short retention (2 seconds, and
    a second's margin): files keep the times they were written at, so the inventory can be taken
    meanwhile; :func:`wait_until` the deadline before the vacuum."""
    return time.monotonic() + seconds


def wait_until(deadline: float) -> None:
    time.sleep(max(0.0, deadline - time.monotonic()))


def cli(*argv: str) -> tuple[int, str]:
    """Run ``inventory-vacuum ARGV`` in this process (sharing the test SparkSession)."""
    out = io.StringIO()
    code = run(list(argv), out)
    return code, out.getvalue()


def cli_json(*argv: str) -> tuple[int, dict[str, Any]]:
    code, text = cli(*argv, "--json")
    return code, json.loads(text)


def submitted_json(stdout: str) -> dict[str, Any]:
    """A job's JSON result from ``spark-submit``'s stdout. Spark 3.5's launcher JVM, resolving
    ``--packages``, prints Ivy's ``:: loading settings :: url = ...`` on stdout before the job
    starts (Spark 4's prints it on stderr); that one line is the only other one allowed."""
    import pyspark

    lines = stdout.splitlines()
    if lines and lines[0].startswith(":: loading settings :: ") and pyspark.__version__.startswith("3."):
        lines = lines[1:]
    return dict(json.loads("\n".join(lines)))


def registry_file(tmp_path: Path, entries: dict[str, str]) -> str:
    """A tables.yaml registering each ``name: path`` (owner ``team``), checked by the registry's parser."""
    path = tmp_path / "tables.yaml"
    path.write_text(
        "tables:\n" + "".join(f"  - {{name: {n}, path: '{p}', owner: team}}\n" for n, p in entries.items())
    )
    parse_registry(path.read_text())
    return str(path)


def put(s3: Any, bucket: str, *keys: str, body: bytes = b"x") -> None:
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=body)


def keys_of(s3: Any, bucket: str, prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys.update(o["Key"] for o in page.get("Contents", []))
    return keys


def write_local_inventory(
    spark: SparkSession, root: Path, inventory_table: str, taken_at: datetime | None = None
) -> None:
    """An inventory of local files, the way S3 Inventory describes a bucket (bucket _local).

    Stands in for an S3 Inventory delivery of a local file system, which AWS cannot produce.
    """
    taken_at = taken_at or datetime.now(timezone.utc)
    rows = []
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        key = str(path.resolve()).lstrip("/")
        stat = path.stat()
        rows.append(
            (
                f"file:/{key}",
                stat.st_size,
                False,
                int(stat.st_mtime * 1000),
                LOCAL_BUCKET,
                key,
                "STANDARD",
                None,
                False,
                None,
                None,
                None,
                None,
                None,
                taken_at.date(),
                taken_at,
                None,
            )
        )
    frame = spark.createDataFrame(rows, INVENTORY_TABLE_SCHEMA)
    frame.write.format("delta").mode("overwrite").option(
        "replaceWhere", f"bucket = '{LOCAL_BUCKET}'"
    ).partitionBy("bucket").save(inventory_table)


def take_inventory(
    s3: Any, source: str, inventory_bucket: str, table: str, file_format: str = "parquet"
) -> None:
    """Deliver an AWS-format inventory of ``source`` (config ``daily``) and ingest it into ``table``."""
    deliver_inventory(s3, source, inventory_bucket, file_format=file_format)
    ingest_inventory(source, inventory_bucket, table)


def deliver_inventory(
    s3: Any,
    source: str,
    inventory_bucket: str,
    *,
    file_format: str = "parquet",
    taken_at: datetime | None = None,
) -> None:
    """Write an AWS-format delivery of ``source`` (config ``daily``) as S3 Inventory would."""
    destination = StorageLocation.parse(f"s3://{inventory_bucket}/reports")
    snapshot_bucket(s3, source, destination, "daily", file_format=file_format, taken_at=taken_at)


def ingest_inventory(source: str, inventory_bucket: str, table: str) -> None:
    """Ingest the newest delivery of ``source`` (config ``daily``) into the inventory ``table``."""
    code, result = cli_json(
        "ingest",
        "--destination",
        f"s3://{inventory_bucket}/reports",
        "--source-bucket",
        source,
        "--config-id",
        "daily",
        "--inventory-table",
        table,
    )
    assert code == 0, result


def rows_at(spark: SparkSession, uri: str, version: int | None = None) -> int:
    """The rows of a version, read from its files: ``count()`` alone may answer from the log's
    statistics without opening a file, so it cannot show that a vacuum kept them."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return len(reader.load(uri).collect())
