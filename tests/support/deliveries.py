"""Hand-written S3 Inventory deliveries, byte by byte, independent of the project's writer."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

CSV_SCHEMA = "Bucket, Key, Size, LastModifiedDate, ETag, StorageClass, IsMultipartUploaded, EncryptionStatus"


def put_delivery(
    s3: Any,
    destination_bucket: str,
    source_bucket: str,
    config_id: str,
    folder: str,
    data_files: dict[str, bytes],
    *,
    file_format: str = "CSV",
    file_schema: str = CSV_SCHEMA,
    prefix: str = "inventory",
    manifest_overrides: dict[str, Any] | None = None,
    manifest_body: bytes | None = None,
    checksum: str | None = None,
    creation_ms: int | None = None,
) -> str:
    """Upload data files and a manifest (with its checksum); returns the manifest key."""
    base = f"{prefix}/{source_bucket}/{config_id}"
    files = []
    for name, body in data_files.items():
        key = f"{base}/data/{name}"
        s3.put_object(Bucket=destination_bucket, Key=key, Body=body)
        files.append({"key": key, "size": len(body), "MD5checksum": hashlib.md5(body).hexdigest()})
    manifest: dict[str, Any] = {
        "sourceBucket": source_bucket,
        "destinationBucket": f"arn:aws:s3:::{destination_bucket}",
        "version": "2016-11-30",
        "creationTimestamp": str(creation_ms if creation_ms is not None else _folder_ms(folder)),
        "fileFormat": file_format,
        "fileSchema": file_schema,
        "files": files,
    }
    manifest.update(manifest_overrides or {})
    body = manifest_body if manifest_body is not None else json.dumps(manifest).encode()
    manifest_key = f"{base}/{folder}/manifest.json"
    s3.put_object(
        Bucket=destination_bucket,
        Key=f"{base}/{folder}/manifest.checksum",
        Body=(checksum or hashlib.md5(body).hexdigest()).encode(),
    )
    s3.put_object(Bucket=destination_bucket, Key=manifest_key, Body=body)
    return manifest_key


def _folder_ms(folder: str) -> int:
    from datetime import datetime

    day, hm = folder.rstrip("Z").split("T")
    return int(datetime.fromisoformat(f"{day}T{hm.replace('-', ':')}:00+00:00").timestamp() * 1000)


def csv_gz(rows: list[list[str]]) -> bytes:
    """AWS CSV: every value double-quoted, no header, gzip."""
    lines = [",".join(f'"{value}"' for value in row) for row in rows]
    return gzip.compress(("\n".join(lines) + "\n").encode("utf-8"))


def aws_parquet(rows: list[dict[str, Any]]) -> bytes:
    """Parquet the way AWS writes it: snake_case, size int64, last_modified_date TIMESTAMP_MILLIS."""
    schema = pa.schema(
        [
            pa.field("bucket", pa.string(), nullable=False),
            pa.field("key", pa.string(), nullable=False),
            pa.field("version_id", pa.string()),
            pa.field("is_latest", pa.bool_()),
            pa.field("is_delete_marker", pa.bool_()),
            pa.field("size", pa.int64()),
            pa.field("last_modified_date", pa.timestamp("ms", tz="UTC")),
            pa.field("e_tag", pa.string()),
            pa.field("storage_class", pa.string()),
            pa.field("intelligent_tiering_access_tier", pa.string()),
        ]
    )
    table = pa.Table.from_pylist([{f.name: row.get(f.name) for f in schema} for row in rows], schema=schema)
    buffer = io.BytesIO()
    pq.write_table(table, buffer, coerce_timestamps="ms")
    return buffer.getvalue()


PARQUET_SCHEMA = (
    "message s3.inventory { required binary bucket (STRING); required binary key (STRING); "
    "optional binary version_id (STRING); optional boolean is_latest; optional boolean is_delete_marker; "
    "optional int64 size; optional int64 last_modified_date (TIMESTAMP(MILLIS,true)); "
    "optional binary e_tag (STRING); optional binary storage_class (STRING); "
    "optional binary intelligent_tiering_access_tier (STRING);}"
)
