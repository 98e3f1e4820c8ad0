"""Write an S3 Inventory delivery from a live listing, byte-compatible with what AWS writes.

For buckets where AWS Inventory is not configured yet, and for S3-compatible stores that have no
inventory feature, ``inventory-vacuum snapshot`` lists the bucket once (ListObjectsV2, or
ListObjectVersions with ``--versions all``) and writes manifest.json, manifest.checksum, data files
split over several objects, and the Hive symlink file, exactly where and how AWS would.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import itertools
import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote_plus

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
from botocore.exceptions import BotoCoreError, ClientError

from core.errors import DeliveryError, UsageError
from core.paths import StorageLocation
from core.s3 import describe
from inventory.manifest import config_prefix

# (snake name, CSV name, Arrow type, Parquet fileSchema line, ORC type), in AWS's column order.
_FIELDS = [
    ("bucket", "Bucket", pa.string(), "required binary bucket (STRING)", "string"),
    ("key", "Key", pa.string(), "required binary key (STRING)", "string"),
    ("version_id", "VersionId", pa.string(), "optional binary version_id (STRING)", "string"),
    ("is_latest", "IsLatest", pa.bool_(), "optional boolean is_latest", "boolean"),
    ("is_delete_marker", "IsDeleteMarker", pa.bool_(), "optional boolean is_delete_marker", "boolean"),
    ("size", "Size", pa.int64(), "optional int64 size", "bigint"),
    (
        "last_modified_date",
        "LastModifiedDate",
        pa.timestamp("ms", tz="UTC"),
        "optional int64 last_modified_date (TIMESTAMP(MILLIS,true))",
        "timestamp",
    ),
    ("e_tag", "ETag", pa.string(), "optional binary e_tag (STRING)", "string"),
    ("storage_class", "StorageClass", pa.string(), "optional binary storage_class (STRING)", "string"),
    (
        "is_multipart_uploaded",
        "IsMultipartUploaded",
        pa.bool_(),
        "optional boolean is_multipart_uploaded",
        "boolean",
    ),
    (
        "checksum_algorithm",
        "ChecksumAlgorithm",
        pa.string(),
        "optional binary checksum_algorithm (STRING)",
        "string",
    ),
]
_VERSION_FIELDS = ("version_id", "is_latest", "is_delete_marker")
_EXTENSIONS = {"Parquet": "parquet", "ORC": "orc", "CSV": "csv.gz"}
FORMATS = {"parquet": "Parquet", "orc": "ORC", "csv": "CSV"}


@dataclass(frozen=True)
class SnapshotResult:
    """What ``snapshot`` wrote."""

    bucket: str
    manifest_uri: str
    file_format: str
    objects: int
    data_files: int
    inventory_taken_at: str


def snapshot_bucket(
    s3: Any,
    bucket: str,
    destination: StorageLocation,
    config_id: str,
    *,
    file_format: str = "parquet",
    versions: str = "current",
    rows_per_file: int = 250_000,
    taken_at: datetime | None = None,
) -> SnapshotResult:
    """List ``bucket`` once and write an S3 Inventory delivery of it under ``destination``.

    Example::

        snapshot_bucket(s3_client(), "lake", StorageLocation.parse("s3://inv/reports"), "daily")
    """
    if file_format.lower() not in FORMATS:
        raise UsageError(f"--format {file_format!r}: expected parquet, csv or orc")
    if versions not in ("current", "all"):
        raise UsageError(f"--versions {versions!r}: expected current or all")
    if rows_per_file < 1:
        raise UsageError("rows per file must be at least 1")
    return write_delivery(
        s3,
        bucket,
        inventory_rows(s3, bucket, versions),
        destination,
        config_id,
        file_format=file_format,
        versions=versions,
        rows_per_file=rows_per_file,
        taken_at=taken_at,
    )


def write_delivery(
    s3: Any,
    bucket: str,
    rows: Iterable[dict[str, Any]],
    destination: StorageLocation,
    config_id: str,
    *,
    file_format: str = "parquet",
    versions: str = "current",
    rows_per_file: int = 250_000,
    taken_at: datetime | None = None,
) -> SnapshotResult:
    """Write ``rows`` (the inventory rows of ``bucket``, as :func:`snapshot_bucket` lists them) as
    an S3 Inventory delivery: data files of ``rows_per_file`` rows, then the manifest. The rows
    are consumed a file at a time, so a delivery of any size fits in memory."""
    aws_format = FORMATS[file_format.lower()]
    taken_at = (taken_at or datetime.now(timezone.utc)).astimezone(timezone.utc)
    fields = [f for f in _FIELDS if versions == "all" or f[0] not in _VERSION_FIELDS]
    prefix = config_prefix(destination, bucket, config_id)
    folder = taken_at.strftime("%Y-%m-%dT%H-%MZ")
    files: list[dict[str, Any]] = []
    objects = 0
    try:
        iterator = iter(rows)
        while True:
            chunk = list(itertools.islice(iterator, rows_per_file))
            if not chunk and files:
                break  # an empty bucket still gets one (empty) data file
            objects += len(chunk)
            body = _encode(aws_format, fields, chunk)
            key = f"{prefix}data/{uuid.uuid4()}.{_EXTENSIONS[aws_format]}"
            s3.put_object(Bucket=destination.bucket, Key=key, Body=body)
            files.append({"key": key, "size": len(body), "MD5checksum": hashlib.md5(body).hexdigest()})
            if len(chunk) < rows_per_file:
                break
        manifest = {
            "sourceBucket": bucket,
            "destinationBucket": f"arn:aws:s3:::{destination.bucket}",
            "version": "2016-11-30",
            "creationTimestamp": str(int(taken_at.timestamp() * 1000)),
            "fileFormat": aws_format,
            "fileSchema": _file_schema(aws_format, fields),
            "files": files,
        }
        manifest_body = json.dumps(manifest, indent=2).encode("utf-8")
        symlinks = "".join(f"s3://{destination.bucket}/{f['key']}\n" for f in files)
        hive_key = f"{prefix}hive/dt={taken_at.strftime('%Y-%m-%d-%H-%M')}/symlink.txt"
        s3.put_object(Bucket=destination.bucket, Key=hive_key, Body=symlinks.encode("utf-8"))
        # manifest.json last: its presence is what marks a delivery complete.
        s3.put_object(
            Bucket=destination.bucket,
            Key=f"{prefix}{folder}/manifest.checksum",
            Body=hashlib.md5(manifest_body).hexdigest().encode("ascii"),
        )
        s3.put_object(Bucket=destination.bucket, Key=f"{prefix}{folder}/manifest.json", Body=manifest_body)
    except (ClientError, BotoCoreError) as error:
        raise DeliveryError(
            f"cannot write the delivery to s3://{destination.bucket}/{prefix}: {describe(error)}"
        ) from None
    return SnapshotResult(
        bucket=bucket,
        manifest_uri=f"s3://{destination.bucket}/{prefix}{folder}/manifest.json",
        file_format=aws_format,
        objects=objects,
        data_files=len(files),
        inventory_taken_at=taken_at.isoformat(),
    )


def inventory_rows(s3: Any, bucket: str, versions: str = "current") -> Iterator[dict[str, Any]]:
    """The bucket's objects (``versions="all"``: every version and delete marker) as the rows of
    an inventory delivery (:func:`write_delivery`), listed as they are consumed."""
    try:
        if versions == "current":
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
                for obj in page.get("Contents", []):
                    yield _row(bucket, obj, version_id=None, is_latest=None, is_delete_marker=None)
            return
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
            for obj in page.get("Versions", []):
                yield _row(bucket, obj, obj.get("VersionId"), obj.get("IsLatest"), False)
            for marker in page.get("DeleteMarkers", []):
                yield {
                    "bucket": bucket,
                    "key": marker["Key"],
                    "version_id": marker.get("VersionId"),
                    "is_latest": marker.get("IsLatest"),
                    "is_delete_marker": True,
                    "size": None,
                    "last_modified_date": marker["LastModified"],
                    "e_tag": None,
                    "storage_class": None,
                    "is_multipart_uploaded": None,
                    "checksum_algorithm": None,
                }
    except (ClientError, BotoCoreError) as error:
        raise DeliveryError(f"cannot list bucket {bucket}: {describe(error)}") from None


def _row(
    bucket: str,
    obj: dict[str, Any],
    version_id: str | None,
    is_latest: bool | None,
    is_delete_marker: bool | None,
) -> dict[str, Any]:
    e_tag = str(obj.get("ETag", "")).strip('"')
    algorithms = obj.get("ChecksumAlgorithm") or []
    return {
        "bucket": bucket,
        "key": obj["Key"],
        "version_id": version_id,
        "is_latest": is_latest,
        "is_delete_marker": is_delete_marker,
        "size": int(obj["Size"]),
        "last_modified_date": obj["LastModified"],
        "e_tag": e_tag,
        "storage_class": obj.get("StorageClass", "STANDARD"),
        "is_multipart_uploaded": "-" in e_tag,
        "checksum_algorithm": algorithms[0] if algorithms else None,
    }


def _file_schema(aws_format: str, fields: list[tuple[Any, ...]]) -> str:
    if aws_format == "CSV":
        return ", ".join(f[1] for f in fields)
    if aws_format == "ORC":
        return "struct<" + ",".join(f"{f[0]}:{f[4]}" for f in fields) + ">"
    return "message s3.inventory { " + " ".join(f"{f[3]};" for f in fields) + " }"


def _encode(aws_format: str, fields: list[tuple[Any, ...]], rows: list[dict[str, Any]]) -> bytes:
    if aws_format == "CSV":
        return _encode_csv(fields, rows)
    schema = pa.schema([pa.field(f[0], f[2], nullable=f[0] not in ("bucket", "key")) for f in fields])
    table = pa.Table.from_pylist([{f[0]: row[f[0]] for f in fields} for row in rows], schema=schema)
    buffer = io.BytesIO()
    if aws_format == "Parquet":
        pq.write_table(table, buffer, compression="snappy", coerce_timestamps="ms")
    else:
        # ORC's plain "timestamp" (what AWS writes), not "timestamp with local time zone".
        naive = pa.schema(
            [f.with_type(pa.timestamp("ms")) if pa.types.is_timestamp(f.type) else f for f in schema]
        )
        orc.write_table(table.cast(naive), buffer, compression="zlib")
    return buffer.getvalue()


def _csv_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return (
            value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.")
            + f"{value.microsecond // 1000:03d}Z"
        )
    return str(value)


def _encode_csv(fields: list[tuple[Any, ...]], rows: list[dict[str, Any]]) -> bytes:
    text = io.StringIO()
    writer = csv.writer(text, quoting=csv.QUOTE_ALL, lineterminator="\n")
    for row in rows:
        values = [_csv_value(row[f[0]]) for f in fields]
        values[1] = quote_plus(row["key"], safe="/")  # AWS URL-encodes CSV keys, spaces as '+'
        writer.writerow(values)
    return gzip.compress(text.getvalue().encode("utf-8"))
