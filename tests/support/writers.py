"""Delta tables from two writers, and an independent reading of their logs (cross-writer matrix).

Writers: delta-rs (the ``deltalake`` package) and Delta-Spark with table features (v2 checkpoints,
column mapping, liquid clustering, row tracking, deletion vectors, random file prefixes). Every
table keeps 1 second of history (``delta.deletedFileRetentionDuration``), so its removed files are
garbage soon after it is written.

The expected garbage is computed here without the product and without Delta's JVM classes: the
table's ``_delta_log/*.json`` commits are replayed in Python (adds and removes keyed by path and
deletion vector, deletion-vector file names decoded from their Z85 ids), and the storage is listed
directly (local directory or S3 prefix).
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc

RETENTION_SECONDS = 1
RETENTION = f"interval {RETENTION_SECONDS} seconds"
_COMMIT = re.compile(r"^(\d{20})\.json$")
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


# --- storage: a table's files, local or on S3 -------------------------------------------------


class LocalStore:
    """The files of a table directory: relative path -> (size, mtime in seconds)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def listing(self) -> dict[str, tuple[int, float]]:
        found = {}
        for path in self.root.rglob("*"):
            if path.is_file():
                stat = path.stat()
                found[path.relative_to(self.root).as_posix()] = (stat.st_size, stat.st_mtime)
        return found

    def read(self, relative: str) -> bytes:
        return (self.root / relative).read_bytes()

    def log_names(self) -> list[str]:
        log = self.root / "_delta_log"
        return sorted(p.name for p in log.iterdir()) if log.is_dir() else []

    def put(self, relative: str, body: bytes = b"junk", *, mtime: float | None = None) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        if mtime is not None:
            os.utime(path, (mtime, mtime))


class S3Store:
    """The objects under ``s3://bucket/prefix/``, in the same terms as :class:`LocalStore`."""

    def __init__(self, s3: Any, bucket: str, prefix: str) -> None:
        self.s3, self.bucket, self.prefix = s3, bucket, prefix.strip("/") + "/"

    def _objects(self, prefix: str) -> list[dict[str, Any]]:
        objects: list[dict[str, Any]] = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            objects.extend(page.get("Contents", []))
        return objects

    def listing(self) -> dict[str, tuple[int, float]]:
        return {
            o["Key"][len(self.prefix) :]: (o["Size"], o["LastModified"].timestamp())
            for o in self._objects(self.prefix)
        }

    def read(self, relative: str) -> bytes:
        return self.s3.get_object(Bucket=self.bucket, Key=self.prefix + relative)["Body"].read()

    def log_names(self) -> list[str]:
        log = self.prefix + "_delta_log/"
        return sorted(o["Key"][len(log) :] for o in self._objects(log))

    def put(self, relative: str, body: bytes = b"junk", *, mtime: float | None = None) -> None:
        assert mtime is None, "S3 sets LastModified itself"
        self.s3.put_object(Bucket=self.bucket, Key=self.prefix + relative, Body=body)


Store = LocalStore | S3Store


# --- the log, replayed independently ----------------------------------------------------------


def z85_uuid(encoded: str) -> uuid.UUID:
    """Delta's Base85 (Z85 alphabet) encoding of a UUID's 16 big-endian bytes, decoded."""
    raw = bytearray()
    for start in range(0, len(encoded), 5):
        value = 0
        for char in encoded[start : start + 5]:
            value = value * 85 + _Z85.index(char)
        raw += value.to_bytes(4, "big")
    return uuid.UUID(bytes=bytes(raw))


def deletion_vector_file(descriptor: dict[str, Any] | None) -> str | None:
    """The relative path of the file holding a deletion vector (None: inline or no vector)."""
    if not descriptor:
        return None
    kind, value = descriptor["storageType"], descriptor["pathOrInlineDv"]
    if kind == "i":
        return None
    if kind == "p":
        return value  # absolute: outside the relative namespace, flagged by the caller
    assert kind == "u", descriptor
    prefix, encoded = value[:-20], value[-20:]
    name = f"deletion_vector_{z85_uuid(encoded)}.bin"
    return f"{prefix}/{name}" if prefix else name


def _dv_id(descriptor: dict[str, Any] | None) -> str:
    if not descriptor:
        return ""
    offset = descriptor.get("offset")
    return (
        descriptor["storageType"]
        + descriptor["pathOrInlineDv"]
        + (f"@{offset}" if offset is not None else "")
    )


@dataclass
class LogView:
    """A table's history read from its JSON commits: what every version references."""

    commits: dict[int, list[dict[str, Any]]]
    live_by_version: dict[int, set[str]] = field(default_factory=dict)
    data_files_by_version: dict[int, set[str]] = field(default_factory=dict)
    partition_columns: list[str] = field(default_factory=list)
    configuration: dict[str, str] = field(default_factory=dict)
    features: set[str] = field(default_factory=set)  # protocol reader and writer features
    operations: list[str] = field(default_factory=list)  # commitInfo.operation, in order
    rows_by_version: dict[int, int | None] = field(default_factory=dict)
    last_removal_ms: int = 0
    log_names: list[str] = field(default_factory=list)

    @property
    def versions(self) -> list[int]:
        return sorted(self.commits)

    @property
    def latest(self) -> int:
        return max(self.commits)

    def live(self, version: int | None = None) -> set[str]:
        """Relative (decoded) paths of the data files and deletion-vector files of a version."""
        return self.live_by_version[self.latest if version is None else version]


def read_log(store: Store) -> LogView:
    names = store.log_names()
    commits = {
        int(m.group(1)): [
            json.loads(line) for line in store.read(f"_delta_log/{name}").decode().splitlines() if line
        ]
        for name in names
        if (m := _COMMIT.match(name))
    }
    assert commits and min(commits) == 0, f"commits missing from the log: {names}"
    view = LogView(commits, log_names=names)
    adds: dict[tuple[str, str], dict[str, Any]] = {}
    for version in view.versions:
        for action in commits[version]:
            if "protocol" in action:
                protocol = action["protocol"]
                view.features = set(protocol.get("readerFeatures") or []) | set(
                    protocol.get("writerFeatures") or []
                )
            elif "commitInfo" in action:
                view.operations.append(str(action["commitInfo"].get("operation")))
            elif "metaData" in action:
                view.partition_columns = list(action["metaData"].get("partitionColumns") or [])
                view.configuration = dict(action["metaData"].get("configuration") or {})
            elif "remove" in action:
                remove = action["remove"]
                adds.pop((remove["path"], _dv_id(remove.get("deletionVector"))), None)
                view.last_removal_ms = max(view.last_removal_ms, int(remove.get("deletionTimestamp") or 0))
            elif "add" in action:
                add = action["add"]
                adds[(add["path"], _dv_id(add.get("deletionVector")))] = add
        data = {unquote(add["path"]) for add in adds.values()}
        vectors = {deletion_vector_file(add.get("deletionVector")) for add in adds.values()} - {None}
        assert not any(re.match(r"^[a-z][a-z0-9+.-]*:", p) for p in data | vectors), "absolute paths"  # type: ignore[arg-type]
        view.data_files_by_version[version] = data
        view.live_by_version[version] = data | vectors  # type: ignore[operator]
        view.rows_by_version[version] = _snapshot_rows(adds.values())
    return view


def _snapshot_rows(adds: Any) -> int | None:
    """Rows of a snapshot by its add actions' statistics: numRecords less deleted rows."""
    total = 0
    for add in adds:
        stats = json.loads(add.get("stats") or "{}")
        if "numRecords" not in stats:
            return None
        total += int(stats["numRecords"]) - int((add.get("deletionVector") or {}).get("cardinality", 0))
    return total


def is_hidden(relative: str, partition_columns: list[str]) -> bool:
    """Delta's ``isHiddenDirectory`` applied to every component of a path below the table."""
    for component in relative.split("/"):
        if (
            component.startswith(("_", "."))
            and not component.startswith(("_delta_index", "_change_data"))
            and not any(component.startswith(f"{c}=") for c in partition_columns)
        ):
            return True
    return False


def expected_garbage(store: Store, log: LogView, now: float | None = None) -> set[str]:
    """Files under the table that no version inside retention needs: not referenced by the latest
    snapshot, not hidden, older than retention. (Every tombstone is outside retention too: checked.)"""
    now = time.time() if now is None else now
    cutoff = now - RETENTION_SECONDS
    assert log.last_removal_ms / 1000 < cutoff, "a tombstone is still inside retention: sleep longer"
    live = log.live()
    return {
        path
        for path, (_, mtime) in store.listing().items()
        if path not in live and not is_hidden(path, log.partition_columns) and mtime < cutoff
    }


# --- delta-rs tables -------------------------------------------------------------------------

RS_CONFIGURATION = {"delta.deletedFileRetentionDuration": RETENTION}
CITIES = ["São Paulo", "a b", "x=y", "plain"]


def _rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "value": [f"v{i}" for i in ids],
            "city": [CITIES[i % len(CITIES)] for i in ids],
        }
    )


def rs_without_checkpoint(uri: str, storage_options: dict[str, str] | None = None) -> None:
    """write, append, full overwrite (the first two versions' files become removed files)."""
    from deltalake import write_deltalake

    write_deltalake(uri, _rows(0, 10), configuration=RS_CONFIGURATION, storage_options=storage_options)
    write_deltalake(uri, _rows(10, 10), mode="append", storage_options=storage_options)
    write_deltalake(uri, _rows(100, 5), mode="overwrite", storage_options=storage_options)
    write_deltalake(uri, _rows(200, 5), mode="append", storage_options=storage_options)


def rs_with_checkpoint(uri: str, storage_options: dict[str, str] | None = None) -> None:
    """write, DELETE (rewrites a file), append, checkpoint (with the tombstones), append."""
    from deltalake import DeltaTable, write_deltalake

    write_deltalake(uri, _rows(0, 10), configuration=RS_CONFIGURATION, storage_options=storage_options)
    DeltaTable(uri, storage_options=storage_options).delete("id % 3 = 0")
    write_deltalake(uri, _rows(10, 10), mode="append", storage_options=storage_options)
    DeltaTable(uri, storage_options=storage_options).create_checkpoint()
    write_deltalake(uri, _rows(20, 4), mode="append", storage_options=storage_options)


def rs_partitioned_overwrite(uri: str, storage_options: dict[str, str] | None = None) -> None:
    """Partitioned by city (awkward values), a partition overwrite, compaction, a checkpoint."""
    from deltalake import DeltaTable, write_deltalake

    write_deltalake(
        uri,
        _rows(0, 12),
        partition_by=["city"],
        configuration=RS_CONFIGURATION,
        storage_options=storage_options,
    )
    write_deltalake(uri, _rows(12, 12), mode="append", storage_options=storage_options)
    replacement = _rows(100, 8)
    replacement = replacement.filter(pc.equal(replacement["city"], "a b"))
    write_deltalake(
        uri, replacement, mode="overwrite", predicate="city = 'a b'", storage_options=storage_options
    )
    DeltaTable(uri, storage_options=storage_options).optimize.compact()
    DeltaTable(uri, storage_options=storage_options).create_checkpoint()


def rs_column_mapping(uri: str, storage_options: dict[str, str] | None = None) -> None:
    """Column mapping by name, partitioned: delta-rs writes the data files under random
    2-character directories (not ``city=...``); an overwrite removes the first files."""
    from deltalake import write_deltalake

    configuration = {**RS_CONFIGURATION, "delta.columnMapping.mode": "name"}
    write_deltalake(
        uri, _rows(0, 12), partition_by=["city"], configuration=configuration, storage_options=storage_options
    )
    write_deltalake(uri, _rows(12, 12), mode="append", storage_options=storage_options)
    write_deltalake(uri, _rows(100, 8), mode="overwrite", storage_options=storage_options)
    write_deltalake(uri, _rows(200, 4), mode="append", storage_options=storage_options)


# --- Delta-Spark tables ----------------------------------------------------------------------


def _spark_rows(spark: Any, start: int, count: int, files: int = 2) -> Any:
    rows = [(i, f"v{i}", ["2024-01-01", "2024-01-02"][i % 2]) for i in range(start, start + count)]
    return spark.createDataFrame(rows, "id bigint, value string, day string").repartition(files)


def _create(spark: Any, uri: str, clause: str, properties: dict[str, str]) -> None:
    props = {"delta.deletedFileRetentionDuration": RETENTION, **properties}
    listed = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
    spark.sql(
        f"CREATE TABLE delta.`{uri}` (id BIGINT, value STRING, day STRING) USING delta {clause} "
        f"TBLPROPERTIES ({listed})"
    )


def _append(spark: Any, uri: str, start: int, count: int, files: int = 2) -> None:
    _spark_rows(spark, start, count, files).write.format("delta").mode("append").save(uri)


def spark_v2_checkpoints(spark: Any, uri: str) -> None:
    """v2 checkpoint policy, a checkpoint every 2 commits (at the partition overwrite, so its
    tombstones are in a v2 checkpoint), then an append."""
    _create(
        spark, uri, "PARTITIONED BY (day)", {"delta.checkpointPolicy": "v2", "delta.checkpointInterval": "2"}
    )
    _append(spark, uri, 0, 20)
    _spark_rows(spark, 100, 10).where("day = '2024-01-01'").write.format("delta").mode("overwrite").option(
        "replaceWhere", "day = '2024-01-01'"
    ).save(uri)
    _append(spark, uri, 200, 6)


def spark_column_mapping(spark: Any, uri: str) -> None:
    """Column mapping by name, partitioned; a renamed column and a DELETE (files rewritten).
    Delta-Spark 4.0 writes the data under ``col-<uuid>=<value>/`` directories (the physical
    column name); Delta-Spark 3.3, like delta-rs, under random 2-character directories."""
    _create(
        spark,
        uri,
        "PARTITIONED BY (day)",
        {"delta.columnMapping.mode": "name", "delta.minReaderVersion": "2", "delta.minWriterVersion": "5"},
    )
    _append(spark, uri, 0, 20)
    spark.sql(f"ALTER TABLE delta.`{uri}` RENAME COLUMN value TO `the value`")
    spark.sql(f"DELETE FROM delta.`{uri}` WHERE id % 4 = 0")


def spark_liquid_clustering(spark: Any, uri: str) -> None:
    """CLUSTER BY, two small appends, OPTIMIZE (clusters them: the small files are removed)."""
    spark.sql(
        f"CREATE TABLE delta.`{uri}` (id BIGINT, value STRING, day STRING) USING delta CLUSTER BY (id) "
        f"TBLPROPERTIES ('delta.deletedFileRetentionDuration' = '{RETENTION}')"
    )
    for start in (0, 20):
        _append(spark, uri, start, 20)
    spark.sql(f"OPTIMIZE delta.`{uri}`")


def spark_row_tracking(spark: Any, uri: str) -> None:
    """Row tracking, no deletion vectors: an UPDATE rewrites files (the old ones are removed)."""
    _create(spark, uri, "", {"delta.enableRowTracking": "true", "delta.enableDeletionVectors": "false"})
    _append(spark, uri, 0, 20)
    spark.sql(f"UPDATE delta.`{uri}` SET value = 'updated' WHERE id % 3 = 0")


def spark_deletion_vectors(spark: Any, uri: str) -> None:
    """Deletion vectors: two DELETEs on the same files (the first vectors are replaced: garbage;
    the second ones are live), then a partition deleted (its file and its vector removed)."""
    _create(spark, uri, "PARTITIONED BY (day)", {"delta.enableDeletionVectors": "true"})
    _append(spark, uri, 0, 40, files=1)
    spark.sql(f"DELETE FROM delta.`{uri}` WHERE id % 5 = 0")
    spark.sql(f"DELETE FROM delta.`{uri}` WHERE id % 7 = 0")
    spark.sql(f"DELETE FROM delta.`{uri}` WHERE day = '2024-01-01'")


def spark_random_prefixes(spark: Any, uri: str) -> None:
    """``delta.randomizeFilePrefixes``. Delta-Spark 4.0.1 (OSS) applies it to deletion-vector
    files only (data files still go to partition directories): vectors under random 2-character
    directories, replaced by a second DELETE (the first ones garbage)."""
    _create(
        spark,
        uri,
        "PARTITIONED BY (day)",
        {"delta.randomizeFilePrefixes": "true", "delta.enableDeletionVectors": "true"},
    )
    _append(spark, uri, 0, 40, files=1)
    spark.sql(f"DELETE FROM delta.`{uri}` WHERE id % 5 = 0")
    spark.sql(f"DELETE FROM delta.`{uri}` WHERE id % 7 = 0")


def spark_type_widening(spark: Any, uri: str) -> None:
    """Type widening: an INT column widened to BIGINT, then a partition overwrite with values past
    INT's range (the old files removed)."""
    spark.sql(
        f"CREATE TABLE delta.`{uri}` (id INT, value STRING, day STRING) USING delta PARTITIONED BY (day) "
        f"TBLPROPERTIES ('delta.deletedFileRetentionDuration' = '{RETENTION}', 'delta.enableTypeWidening' = 'true')"
    )
    _spark_rows(spark, 0, 20).selectExpr("CAST(id AS INT) AS id", "value", "day").write.format("delta").mode(
        "append"
    ).save(uri)
    spark.sql(f"ALTER TABLE delta.`{uri}` ALTER COLUMN id TYPE BIGINT")
    _spark_rows(spark, 3_000_000_000, 10).where("day = '2024-01-01'").write.format("delta").mode(
        "overwrite"
    ).option("replaceWhere", "day = '2024-01-01'").save(uri)


def spark_variant(spark: Any, uri: str) -> None:
    """A VARIANT column (Delta 4.0 on): appends, then a DELETE that rewrites files."""
    spark.sql(
        f"CREATE TABLE delta.`{uri}` (id BIGINT, payload VARIANT, day STRING) USING delta PARTITIONED BY (day) "
        f"TBLPROPERTIES ('delta.deletedFileRetentionDuration' = '{RETENTION}', "
        "'delta.enableDeletionVectors' = 'false')"
    )
    _spark_rows(spark, 0, 20).selectExpr(
        "id", "parse_json(concat('{\"v\": \"', value, '\"}')) AS payload", "day"
    ).write.format("delta").mode("append").save(uri)
    spark.sql(f"DELETE FROM delta.`{uri}` WHERE id % 3 = 0")


def spark_in_commit_timestamps(spark: Any, uri: str) -> None:
    """In-commit timestamps (commit times in the log, not the files' own), an overwrite."""
    _create(spark, uri, "PARTITIONED BY (day)", {"delta.enableInCommitTimestamps": "true"})
    _append(spark, uri, 0, 20)
    _spark_rows(spark, 100, 10).write.format("delta").mode("overwrite").save(uri)


def spark_identity_columns(spark: Any, uri: str) -> None:
    """An identity column (GENERATED ALWAYS AS IDENTITY), appends, then a DELETE."""
    spark.sql(
        f"CREATE TABLE delta.`{uri}` (key BIGINT GENERATED ALWAYS AS IDENTITY, id BIGINT, value STRING, "
        f"day STRING) USING delta PARTITIONED BY (day) "
        f"TBLPROPERTIES ('delta.deletedFileRetentionDuration' = '{RETENTION}', "
        "'delta.enableDeletionVectors' = 'false')"
    )
    for start in (0, 20):
        _append(spark, uri, start, 20)
    spark.sql(f"DELETE FROM delta.`{uri}` WHERE id % 3 = 0")


def spark_row_tracking_with_vectors(spark: Any, uri: str) -> None:
    """Row tracking with deletion vectors: a DELETE (vectors), an UPDATE (files rewritten, their
    vectors replaced)."""
    _create(
        spark,
        uri,
        "PARTITIONED BY (day)",
        {"delta.enableRowTracking": "true", "delta.enableDeletionVectors": "true"},
    )
    _append(spark, uri, 0, 40, files=1)
    spark.sql(f"DELETE FROM delta.`{uri}` WHERE id % 5 = 0")
    spark.sql(f"UPDATE delta.`{uri}` SET value = 'updated' WHERE id % 7 = 0")


Builder = Callable[..., None]
