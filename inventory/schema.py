"""AWS S3 Inventory formats, and the normalised schema of the inventory Delta table.

AWS writes Parquet and ORC with snake_case columns (``last_modified_date``) and CSV with no header,
in the order its manifest's ``fileSchema`` names in CamelCase (``LastModifiedDate``). CSV keys are
URL-encoded; Parquet and ORC keys are not. Everything here is a pure DataFrame transform.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DateType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from core.errors import DeliveryError
from core.registry import TableRegistry
from core.session import local_frame, strings_schema
from core.tables import INVENTORY_TABLE_SCHEMA

FILE_FORMATS = ("CSV", "ORC", "Parquet")


# Source columns we read, with the type each is normalised to. Any AWS may leave out.
_SOURCE_TYPES = {
    "bucket": StringType(),
    "key": StringType(),
    "version_id": StringType(),
    "is_latest": BooleanType(),
    "is_delete_marker": BooleanType(),
    "size": LongType(),
    "last_modified_date": TimestampType(),
    "e_tag": StringType(),
    "storage_class": StringType(),
    "is_multipart_uploaded": BooleanType(),
    "encryption_status": StringType(),
    "intelligent_tiering_access_tier": StringType(),
}
REQUIRED_FIELDS = ("bucket", "key", "size")


def snake_case(name: str) -> str:
    """``LastModifiedDate`` -> ``last_modified_date``; ``ETag`` -> ``e_tag``; snake stays snake."""
    name = name.strip()
    if "_" in name or name.islower():
        return name.lower()
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def file_schema_fields(file_format: str, file_schema: str) -> list[str]:
    """The snake_case column names, in order, that a manifest's ``fileSchema`` declares.

    CSV: ``"Bucket, Key, Size, ..."``; ORC: ``"struct<bucket:string,key:string,...>"``;
    Parquet: ``"message s3.inventory { required binary bucket (STRING); ... }"``.
    """
    if file_format == "CSV":
        names = [part for part in (p.strip() for p in file_schema.split(",")) if part]
    elif file_format == "ORC":
        names = re.findall(r"[<,]\s*([A-Za-z_][A-Za-z0-9_]*)\s*:", file_schema)
    elif file_format == "Parquet":
        names = re.findall(r"(?:required|optional|repeated)\s+\w+\s+([A-Za-z_][A-Za-z0-9_]*)", file_schema)
    else:
        raise DeliveryError(f"unknown fileFormat {file_format!r}; expected one of {FILE_FORMATS}")
    return [snake_case(name) for name in names]


def check_file_schema(fields: Sequence[str], where: str) -> None:
    missing = [name for name in REQUIRED_FIELDS if name not in fields]
    if missing:
        readable = ", ".join({"bucket": "Bucket", "key": "Key", "size": "Size"}[m] for m in missing)
        raise DeliveryError(f"{where}: fileSchema has no {readable} field")


def csv_read_schema(fields: Sequence[str]) -> StructType:
    """All-string schema for a header-less AWS CSV file, columns in fileSchema order."""
    return StructType([StructField(name, StringType()) for name in fields])


def _source_column(raw: DataFrame, name: str) -> Column:
    columns = {snake_case(c): c for c in raw.columns}
    target = _SOURCE_TYPES[name]
    if name not in columns:
        return F.lit(None).cast(target)
    column = F.col(f"`{columns[name]}`")
    source_type = raw.schema[columns[name]].dataType
    if isinstance(target, TimestampType) and isinstance(source_type, StringType):
        # CSV: ISO-8601 with milliseconds and a Z, e.g. 2024-01-15T10:20:30.000Z
        return F.to_timestamp(column)
    if isinstance(target, BooleanType) and isinstance(source_type, StringType):
        return F.lower(F.trim(column)).cast(BooleanType())
    return column.cast(target)


def normalise(
    raw: DataFrame,
    *,
    file_format: str,
    inventory_date: str,
    inventory_taken_at_ms: int,
) -> DataFrame:
    """Turn the rows of one AWS delivery into the inventory table's columns (``table`` null).

    Keys are URL-decoded exactly once, and only for CSV (``+`` is a space there; a literal ``+``
    arrives as ``%2B``). ``isDir`` is true only for keys ending in ``/``: S3 has no directories,
    and a zero-byte object is a file. ``modificationTime`` is epoch milliseconds.
    """
    key = _source_column(raw, "key")
    if file_format == "CSV":
        key = F.url_decode(key)
    last_modified = _source_column(raw, "last_modified_date")
    bucket = _source_column(raw, "bucket")
    columns = {
        "path": F.concat(F.lit("s3://"), bucket, F.lit("/"), key),
        "length": _source_column(raw, "size"),
        "isDir": key.endswith("/"),
        "modificationTime": F.unix_millis(last_modified),
        "bucket": bucket,
        "key": key,
        **{
            name: _source_column(raw, name)
            for name in (
                "storage_class",
                "e_tag",
                "is_multipart_uploaded",
                "encryption_status",
                "intelligent_tiering_access_tier",
                "version_id",
                "is_latest",
                "is_delete_marker",
            )
        },
        "inventory_date": F.lit(inventory_date).cast(DateType()),
        "inventory_taken_at": F.timestamp_millis(F.lit(inventory_taken_at_ms)),
        "table": F.lit(None).cast(StringType()),
    }
    return raw.select(*[columns[f.name].cast(f.dataType).alias(f.name) for f in INVENTORY_TABLE_SCHEMA])


def prefix_column(depth: int) -> Column:
    """``bucket/`` plus the first ``depth`` folder components of the key, each ending in ``/``.

    ``lake``, ``warehouse/events/day=1/part-0.parquet``, depth 2 -> ``lake/warehouse/events/``;
    a key at the bucket root -> ``lake/``. The file name itself is never a prefix.
    """
    parts = F.split(F.col("key"), "/")
    folders = F.slice(parts, 1, F.least(F.lit(depth), F.size(parts) - 1))
    return F.concat(
        F.col("bucket"),
        F.lit("/"),
        F.when(F.size(folders) > 0, F.concat(F.array_join(folders, "/"), F.lit("/"))).otherwise(F.lit("")),
    )


def sql_string(value: str) -> str:
    """``value`` as the inside of a single-quoted Spark SQL string literal."""
    return value.replace("\\", "\\\\").replace("'", "\\'")


def with_optional_columns(frame: DataFrame, names: Sequence[str]) -> DataFrame:
    """``frame`` with each of ``names`` it lacks added as nulls of the inventory table's type (an
    inventory table written by an older version of this tool, or by another tool)."""
    types = {f.name: f.dataType for f in INVENTORY_TABLE_SCHEMA}
    for name in names:
        if name not in frame.columns:
            frame = frame.withColumn(name, F.lit(None).cast(types[name]))
    return frame


def is_current_version() -> Column:
    """Rows that are the current version of a live object (unversioned inventories: all rows)."""
    return F.coalesce(F.col("is_latest"), F.lit(True)) & ~F.coalesce(F.col("is_delete_marker"), F.lit(False))


# At most this many hash joins, one per depth (the depths of the most tables): a chain of one per
# depth for a registry of 60 depths overflowed the stack. Tables at other depths share one join.
HASHED_DEPTHS = 8


def tag_owning_table(inventory: DataFrame, registry: TableRegistry | None) -> DataFrame:
    """Set ``table`` to the registered table whose path holds each key, on a component boundary.

    ``s3://b/w/events_v2/x`` does not belong to table ``s3://b/w/events``, nor does an object
    named ``w/events`` itself. Registered paths never nest (the registry refuses it), so a key has
    at most one owner (:func:`with_owner`).
    """
    if registry is None or not registry.tables:
        return inventory
    owners = [
        (table.location.bucket, table.location.key, table.name)  # a key is never empty: no whole buckets
        for table in registry.tables
        if table.location.is_s3
    ]
    if not owners:  # local tables only: no key of an S3 inventory is theirs
        return inventory.withColumn("table", F.lit(None).cast(StringType()))
    tagged = with_owner(inventory.drop("table"), owners, "table")
    return tagged.select(*[f.name for f in INVENTORY_TABLE_SCHEMA])


def with_owner(rows: DataFrame, owners: Sequence[tuple[str, str, str]], column: str) -> DataFrame:
    """``rows`` (with ``bucket`` and ``key``) and ``column``: the name of the owner, of
    ``owners`` (bucket, key, name), whose key holds the row's key below it on a component
    boundary, or null. No owner's key may lie below another's (so a key has at most one owner).

    The owner whose key is the key's first n components, for some n, is found by one broadcast
    hash join on (bucket, first n components) per distinct n among the owners: a key is looked
    up, not compared with every owner of its bucket (a join on the bucket with a ``startswith``
    condition, rows times owners). Past :data:`HASHED_DEPTHS` depths, the owners at the depths
    with the fewest of them are matched that way, in one join. The joins go from the shallowest
    depth down, and a row that one of them tagged is not looked up again (it has its one owner):
    finding a key's first n components scans it byte by byte, the most of a tagging's work.
    """
    by_depth: dict[int, list[tuple[str, str, str]]] = {}
    for bucket, key, name in owners:
        by_depth.setdefault(key.count("/") + 1, []).append((bucket, key, name))
    ranked = sorted(by_depth.items(), key=lambda item: (-len(item[1]), item[0]))
    joins: list[tuple[int | None, list[tuple[str, str, str]]]] = sorted(ranked[:HASHED_DEPTHS])
    if len(ranked) > HASHED_DEPTHS:
        joins.append((None, [entry for _, entries in ranked[HASHED_DEPTHS:] for entry in entries]))
    spark = rows.sparkSession
    tagged = rows
    names: list[Column] = []
    for index, (depth, entries) in enumerate(joins):
        bucket, key, name = (f"owner_{part}_{index}" for part in ("bucket", "key", "name"))
        lookup = local_frame(spark, entries, strings_schema(bucket, key, name))
        untagged = F.coalesce(*names).isNull() if names else F.lit(True)
        if depth is None:
            below = untagged & F.col("key").startswith(F.concat(F.col(key), F.lit("/")))
        else:
            # the key's first ``depth`` components (the whole key when it has fewer), where more
            # follow: an object named like the owner's folder is not below it
            leading = F.substring_index(F.col("key"), "/", depth)
            below = (F.when(untagged, leading) == F.col(key)) & (F.col("key") != F.col(key))
        tagged = tagged.join(F.broadcast(lookup), (F.col("bucket") == F.col(bucket)) & below, "left")
        names.append(F.col(name))
    return tagged.select(*[F.col(c) for c in rows.columns], F.coalesce(*names).alias(column))
