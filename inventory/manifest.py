"""Find and verify S3 Inventory deliveries with boto3.

AWS delivers an inventory to ``DEST/PREFIX/SOURCE_BUCKET/CONFIG_ID/``::

    2024-01-15T01-00Z/manifest.json       list of data files, format and schema
    2024-01-15T01-00Z/manifest.checksum   MD5 of manifest.json
    data/<uuid>.parquet | .csv.gz | .orc  the rows
    hive/dt=2024-01-15-01-00/symlink.txt  the data files again, for Hive/Athena

A timestamp folder without ``manifest.json`` is a delivery still being written and is skipped.
"""

from __future__ import annotations

import hashlib
import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from core.errors import DeliveryError, InventoryDataError
from core.paths import StorageLocation
from core.s3 import describe, error_code
from inventory.schema import FILE_FORMATS, check_file_schema, file_schema_fields

_TIMESTAMP_FOLDER = re.compile(r"^(\d{4}-\d{2}-\d{2})T(\d{2})-(\d{2})Z$")
_REQUIRED_MANIFEST_FIELDS = ("sourceBucket", "destinationBucket", "fileFormat", "fileSchema", "files")


@dataclass(frozen=True)
class DataFile:
    """One data file a manifest lists."""

    key: str
    size: int
    md5_checksum: str


@dataclass(frozen=True)
class Delivery:
    """A verified S3 Inventory delivery: where it is, what it holds, when it was taken."""

    source_bucket: str
    destination_bucket: str
    config_id: str
    manifest_key: str
    file_format: str
    file_schema: str
    fields: tuple[str, ...]
    files: tuple[DataFile, ...]
    inventory_taken_at_ms: int
    inventory_date: str

    @property
    def manifest_uri(self) -> str:
        return f"s3://{self.destination_bucket}/{self.manifest_key}"

    def data_file_uris(self, scheme: str = "s3a") -> list[str]:
        """Data files as Hadoop URIs (S3A by default: the connector every Spark build has)."""
        return [f"{scheme}://{self.destination_bucket}/{f.key}" for f in self.files]

    @property
    def inventory_taken_at(self) -> datetime:
        return datetime.fromtimestamp(self.inventory_taken_at_ms / 1000, tz=timezone.utc)


def config_prefix(destination: StorageLocation, source_bucket: str, config_id: str) -> str:
    """The key prefix under which AWS writes one inventory configuration's deliveries."""
    base = f"{destination.key}/" if destination.key else ""
    return f"{base}{source_bucket}/{config_id}/"


def list_delivery_folders(
    s3: Any, destination: StorageLocation, source_bucket: str, config_id: str
) -> list[str]:
    """Timestamp folder names (``YYYY-MM-DDTHH-MMZ``) of a configuration, oldest first."""
    prefix = config_prefix(destination, source_bucket, config_id)
    folders: list[str] = []
    try:
        pages = s3.get_paginator("list_objects_v2").paginate(
            Bucket=destination.bucket, Prefix=prefix, Delimiter="/"
        )
        for page in pages:
            for common in page.get("CommonPrefixes", []):
                name = common["Prefix"][len(prefix) :].rstrip("/")
                if _TIMESTAMP_FOLDER.match(name):
                    folders.append(name)
    except (ClientError, BotoCoreError) as error:
        raise DeliveryError(f"cannot list s3://{destination.bucket}/{prefix}: {describe(error)}") from None
    return sorted(folders)


def find_delivery(
    s3: Any,
    destination: StorageLocation,
    source_bucket: str,
    config_id: str,
    inventory_date: date | None = None,
) -> Delivery:
    """The newest complete delivery (of ``inventory_date``, when given), verified.

    Example::

        delivery = find_delivery(s3_client(), StorageLocation.parse("s3://inv/reports"),
                                 "lake", "daily", date(2024, 1, 15))
    """
    prefix = config_prefix(destination, source_bucket, config_id)
    folders = list_delivery_folders(s3, destination, source_bucket, config_id)
    if inventory_date is not None:
        folders = [f for f in folders if f.startswith(inventory_date.isoformat())]
    for folder in reversed(folders):
        manifest_key = f"{prefix}{folder}/manifest.json"
        body = _get_bytes(s3, destination.bucket, manifest_key, missing_ok=True)
        if body is None:
            continue  # still being written
        return verify_manifest(s3, destination.bucket, manifest_key, body, source_bucket, config_id)
    when = f" for {inventory_date.isoformat()}" if inventory_date else ""
    raise DeliveryError(
        f"no complete S3 Inventory delivery{when} for bucket {source_bucket} "
        f"(config {config_id}) under s3://{destination.bucket}/{prefix}"
    )


def verify_manifest(
    s3: Any, bucket: str, manifest_key: str, body: bytes, source_bucket: str, config_id: str
) -> Delivery:
    """Check a manifest against its checksum, its fields and the data files it lists."""
    where = f"s3://{bucket}/{manifest_key}"
    checksum_key = manifest_key[: -len("manifest.json")] + "manifest.checksum"
    checksum = _get_bytes(s3, bucket, checksum_key, missing_ok=True)
    if checksum is None:
        raise DeliveryError(f"{where}: manifest.checksum is missing beside it")
    expected = checksum.decode("ascii", "replace").strip().lower()
    actual = hashlib.md5(body).hexdigest()
    if expected != actual:
        raise DeliveryError(f"{where}: MD5 {actual} does not match manifest.checksum {expected}")
    try:
        manifest = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise DeliveryError(f"{where}: not valid JSON ({error})") from None
    if not isinstance(manifest, dict):
        raise DeliveryError(f"{where}: expected a JSON object")
    missing = [name for name in _REQUIRED_MANIFEST_FIELDS if name not in manifest]
    if missing:
        raise DeliveryError(f"{where}: missing field(s) {', '.join(missing)}")
    if manifest["sourceBucket"] != source_bucket:
        raise DeliveryError(
            f"{where}: sourceBucket is {manifest['sourceBucket']!r}, not the requested {source_bucket!r}"
        )
    file_format = manifest["fileFormat"]
    if file_format not in FILE_FORMATS:
        raise DeliveryError(f"{where}: unknown fileFormat {file_format!r}; expected CSV, ORC or Parquet")
    fields = file_schema_fields(file_format, str(manifest["fileSchema"]))
    check_file_schema(fields, where)
    files = _parse_files(manifest["files"], where)
    destination_bucket = str(manifest["destinationBucket"]).removeprefix("arn:aws:s3:::")
    folder = manifest_key.rsplit("/", 2)[-2]
    taken_at_ms = _taken_at_ms(manifest.get("creationTimestamp"), folder, where)
    _check_data_files(s3, destination_bucket, files, where)
    return Delivery(
        source_bucket=source_bucket,
        destination_bucket=destination_bucket,
        config_id=config_id,
        manifest_key=manifest_key,
        file_format=file_format,
        file_schema=str(manifest["fileSchema"]),
        fields=tuple(fields),
        files=files,
        inventory_taken_at_ms=taken_at_ms,
        inventory_date=folder[:10],
    )


def _parse_files(entries: Any, where: str) -> tuple[DataFile, ...]:
    if not isinstance(entries, list) or not entries:
        raise DeliveryError(f"{where}: 'files' must be a non-empty list")
    files = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
            raise DeliveryError(f"{where}: files[{index}] has no key")
        try:
            size = int(entry["size"])
        except (KeyError, TypeError, ValueError):
            raise DeliveryError(f"{where}: files[{index}] ({entry['key']}) has no valid size") from None
        files.append(DataFile(entry["key"], size, str(entry.get("MD5checksum", ""))))
    return tuple(files)


def _taken_at_ms(raw: Any, folder: str, where: str) -> int:
    if raw is not None:
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise DeliveryError(f"{where}: creationTimestamp {raw!r} is not epoch milliseconds") from None
    match = _TIMESTAMP_FOLDER.match(folder)
    if not match:
        raise DeliveryError(f"{where}: no creationTimestamp")
    day, hour, minute = match.groups()
    moment = datetime.fromisoformat(f"{day}T{hour}:{minute}:00+00:00")
    return int(moment.timestamp() * 1000)


def _check_data_files(s3: Any, bucket: str, files: tuple[DataFile, ...], where: str) -> None:
    """Every listed data file exists with the size the manifest states (HEADs, in parallel)."""

    def check(data_file: DataFile) -> str | None:
        try:
            head = s3.head_object(Bucket=bucket, Key=data_file.key)
        except ClientError as error:
            if error_code(error) in ("404", "NoSuchKey", "NotFound"):
                return f"data file s3://{bucket}/{data_file.key} is missing"
            return f"data file s3://{bucket}/{data_file.key}: {describe(error)}"
        if int(head["ContentLength"]) != data_file.size:
            return (
                f"data file s3://{bucket}/{data_file.key} has {head['ContentLength']} bytes, "
                f"the manifest says {data_file.size}"
            )
        return None

    with ThreadPoolExecutor(max_workers=16) as pool:
        problems = [p for p in pool.map(check, files) if p]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InventoryDataError(f"{where}: {problems[0]}{more}")


def _get_bytes(s3: Any, bucket: str, key: str, *, missing_ok: bool) -> bytes | None:
    try:
        return bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    except ClientError as error:
        if missing_ok and error_code(error) in ("NoSuchKey", "404", "NotFound"):
            return None
        raise DeliveryError(f"cannot read s3://{bucket}/{key}: {describe(error)}") from None
    except BotoCoreError as error:
        raise DeliveryError(f"cannot read s3://{bucket}/{key}: {describe(error)}") from None
