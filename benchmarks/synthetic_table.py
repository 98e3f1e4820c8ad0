"""A synthetic partitioned Delta table on the local S3, built in seconds, and put back after a vacuum.

The table has hourly partitions over 30 days (``dt=YYYY-MM-DD/hr=HH``, 720 directories) and N
placeholder data files (tiny bodies: a vacuum reads only the log and the paths). Its
``_delta_log`` is written by hand as JSON commits, as a writer would leave it:

* version 0: ``protocol`` (reader 1, writer 2) and ``metaData`` (partition columns ``dt, hr``,
  ``delta.deletedFileRetentionDuration = interval 1 week``, Delta's default);
* versions 1..k: ``add`` actions in batches of :data:`ADD_BATCH` files (the live files and the
  files removed later), ``modificationTime`` the partition's hour, 12 to 42 days ago;
* a commit of ``remove`` actions, ``deletionTimestamp`` 10 days ago (tombstones past retention),
  and one 1 day ago (tombstones inside retention);
* a checkpoint of that version (delta-rs's ``create_checkpoint``);
* after the inventory is taken: the *fresh* files and a commit adding them (``modificationTime``
  now), which the inventory cannot know about.

Besides, *orphans* sit in the partitions: files no commit mentions (a failed job's output).

Every engine is run with a retention of 0 hours (``RETAIN 0 HOURS`` with the retention check off,
delta-rs's ``retention_hours=0, enforce_retention_duration=False``), so the garbage is exactly the
tombstoned files and the orphans. moto sets an object's LastModified when it is written, and it
cannot be set back, so at the default 7 days every orphan would be "new" to any engine that reads
ages from a listing, and nothing but the log's expired removes would be garbage.
VACUUM LITE finds only files the log removed, so its expected set is the tombstoned files.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from benchmarks.s3_server import delete_objects, object_names, put_objects

PARTITION_DAYS = 30
HOURS_PER_DAY = 24
ADD_BATCH = 10_000
PLACEHOLDER = b"placeholder data file\n"  # the files' body: vacuum never reads it
RETENTION = "interval 1 week"  # Delta's default delta.deletedFileRetentionDuration

LIVE, TOMBSTONED_OLD, TOMBSTONED_RECENT, ORPHAN, FRESH = (
    "live",
    "tombstoned_old",
    "tombstoned_recent",
    "orphan",
    "fresh",
)
GARBAGE = (TOMBSTONED_OLD, TOMBSTONED_RECENT, ORPHAN)  # what a full vacuum at 0 hours deletes
LOGGED_GARBAGE = (TOMBSTONED_OLD, TOMBSTONED_RECENT)  # what VACUUM LITE can find: the log's removes


@dataclass(frozen=True)
class Shares:
    """The share of the N files in each category (the rest of 1.0 is live)."""

    tombstoned_old: float = 0.12
    tombstoned_recent: float = 0.03
    orphan: float = 0.15
    fresh: float = 0.10

    def counts(self, files: int) -> dict[str, int]:
        """Files per category, summing to ``files`` exactly."""
        counts = {
            TOMBSTONED_OLD: round(files * self.tombstoned_old),
            TOMBSTONED_RECENT: round(files * self.tombstoned_recent),
            ORPHAN: round(files * self.orphan),
            FRESH: round(files * self.fresh),
        }
        counts[LIVE] = files - sum(counts.values())
        if counts[LIVE] < 0:
            raise ValueError("the shares add up to more than 1")
        return counts


@dataclass(frozen=True)
class DataFile:
    """One placeholder data file: its path relative to the table root, partition and category."""

    path: str
    dt: str
    hr: str
    category: str
    written_millis: int


def partitions(end: datetime) -> list[tuple[str, str, datetime]]:
    """``(dt, hr, hour start)`` for every hour of the :data:`PARTITION_DAYS` days before ``end``."""
    start = end.replace(minute=0, second=0, microsecond=0) - timedelta(days=PARTITION_DAYS)
    hours = [start + timedelta(hours=h) for h in range(PARTITION_DAYS * HOURS_PER_DAY)]
    return [(h.strftime("%Y-%m-%d"), h.strftime("%H"), h) for h in hours]


def plan_files(files: int, shares: Shares, now: datetime, seed: int = 7) -> list[DataFile]:
    """The N data files: spread round-robin over the partitions, categories shuffled (seeded)."""
    rng = random.Random(seed)
    categories = [c for c, n in shares.counts(files).items() for _ in range(n)]
    rng.shuffle(categories)
    hours = partitions(now - timedelta(days=12))
    planned = []
    for index, category in enumerate(categories):
        dt, hr, hour = hours[index % len(hours)]
        name = f"part-{index % 100_000:05d}-{uuid.UUID(int=rng.getrandbits(128))}.c000.snappy.parquet"
        # fresh files get their time when they are written, after the inventory
        written = now if category == FRESH else hour + timedelta(minutes=index % 60)
        planned.append(DataFile(f"dt={dt}/hr={hr}/{name}", dt, hr, category, _millis(written)))
    return planned


def _millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


@dataclass
class SyntheticTable:
    """A built table: where it is, its files by category, and the objects it was built with."""

    bucket: str
    root: str  # key prefix of the table root, no trailing slash
    files: list[DataFile]
    # key -> (ETag, log body; None for a data file): what restore() puts back
    built_with: dict[str, tuple[str, bytes | None]] = field(default_factory=dict)

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.root}"

    def paths(self, *categories: str) -> set[str]:
        """Relative paths of the files in ``categories``."""
        return {f.path for f in self.files if f.category in categories}

    def counts(self) -> dict[str, int]:
        result: dict[str, int] = {}
        for data_file in self.files:
            result[data_file.category] = result.get(data_file.category, 0) + 1
        return result

    @property
    def live_files(self) -> int:
        return len(self.paths(LIVE, FRESH))

    def data_keys(self) -> set[str]:
        """The data keys now under the table (read from moto's backend, not counted)."""
        log = f"{self.root}/_delta_log/"
        return {k for k in object_names(self.bucket, self.root + "/") if not k.startswith(log)}

    def remember(self) -> None:
        """Record every object under the table as it is now: what :meth:`restore` goes back to."""
        from benchmarks.s3_server import _backend

        store = _backend().get_bucket(self.bucket).keys
        log = f"{self.root}/_delta_log/"
        # the ETag as stored: a checkpoint big enough for a multipart upload has no MD5 ETag
        self.built_with = {
            key: (etag, store[key].value if key.startswith(log) else None)
            for key, etag in object_names(self.bucket, self.root + "/").items()
        }

    def restore(self) -> dict[str, int]:
        """Put the table back as :meth:`remember` saw it: delete objects a run added (vacuum
        commits, ``_last_vacuum_info``, directory markers), rewrite changed log files, re-create
        deleted data files. Goes through moto's backend: not counted, not part of any timing."""
        current = object_names(self.bucket, self.root + "/")
        extra = [k for k in current if k not in self.built_with]
        delete_objects(self.bucket, extra)
        missing = [
            (key, body if body is not None else PLACEHOLDER)
            for key, (etag, body) in self.built_with.items()
            if current.get(key) != etag
        ]
        put_objects(self.bucket, missing)
        if missing:  # a rewritten object's ETag is its body's MD5 from now on
            now = object_names(self.bucket, self.root + "/")
            self.built_with.update({key: (now[key], self.built_with[key][1]) for key, _ in missing})
        return {
            "deleted": len(extra),
            "rewritten": len(missing),
            "examples": sorted([*extra, *(key for key, _ in missing)])[:3],
        }


def _schema_string() -> str:
    fields = [
        {"name": "value", "type": "long", "nullable": True, "metadata": {}},
        {"name": "dt", "type": "string", "nullable": True, "metadata": {}},
        {"name": "hr", "type": "string", "nullable": True, "metadata": {}},
    ]
    return json.dumps({"type": "struct", "fields": fields})


def _commit_info(timestamp: int, operation: str, parameters: dict[str, str]) -> dict[str, Any]:
    return {
        "commitInfo": {
            "timestamp": timestamp,
            "operation": operation,
            "operationParameters": parameters,
            "isBlindAppend": operation == "WRITE",
            "engineInfo": "inventory-vacuum benchmarks",
        }
    }


def _add(data_file: DataFile, modified_millis: int | None = None) -> dict[str, Any]:
    return {
        "add": {
            "path": data_file.path,
            "partitionValues": {"dt": data_file.dt, "hr": data_file.hr},
            "size": len(PLACEHOLDER),
            "modificationTime": modified_millis or data_file.written_millis,
            "dataChange": True,
            "stats": json.dumps({"numRecords": 1}),
        }
    }


def _remove(data_file: DataFile, deleted_millis: int) -> dict[str, Any]:
    return {
        "remove": {
            "path": data_file.path,
            "deletionTimestamp": deleted_millis,
            "dataChange": True,
            "extendedFileMetadata": True,
            "partitionValues": {"dt": data_file.dt, "hr": data_file.hr},
            "size": len(PLACEHOLDER),
        }
    }


def _commit_body(actions: Iterator[dict[str, Any]] | list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions).encode("utf-8")


class TableBuilder:
    """Builds a :class:`SyntheticTable` in two steps around the inventory: :meth:`build` (all but
    the fresh files, checkpointed), then :meth:`add_fresh_files` (after the inventory is taken)."""

    def __init__(
        self, s3: Any, bucket: str, root: str, files: int, shares: Shares, storage_options: dict[str, str]
    ) -> None:
        self.s3 = s3
        self.now = datetime.now(timezone.utc)
        self.table = SyntheticTable(bucket, root.strip("/"), plan_files(files, shares, self.now))
        self.storage_options = storage_options
        self.version = -1

    def _commit(self, actions: list[dict[str, Any]]) -> None:
        self.version += 1
        key = f"{self.table.root}/_delta_log/{self.version:020d}.json"
        self.s3.put_object(Bucket=self.table.bucket, Key=key, Body=_commit_body(actions))

    def build(self) -> SyntheticTable:
        """Data files (but the fresh ones), the commits, and a checkpoint of the last commit."""
        table = self.table
        put_objects(
            table.bucket,
            ((f"{table.root}/{f.path}", PLACEHOLDER) for f in table.files if f.category != FRESH),
        )
        now = _millis(self.now)
        self._commit(
            [
                _commit_info(now - 43 * 86_400_000, "CREATE TABLE", {}),
                {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
                {
                    "metaData": {
                        "id": str(uuid.UUID(int=random.Random(table.bucket).getrandbits(128))),
                        "format": {"provider": "parquet", "options": {}},
                        "schemaString": _schema_string(),
                        "partitionColumns": ["dt", "hr"],
                        "configuration": {"delta.deletedFileRetentionDuration": RETENTION},
                        "createdTime": now - 43 * 86_400_000,
                    }
                },
            ]
        )
        added = [f for f in table.files if f.category in (LIVE, TOMBSTONED_OLD, TOMBSTONED_RECENT)]
        for start in range(0, len(added), ADD_BATCH):
            batch = added[start : start + ADD_BATCH]
            self._commit(
                [_commit_info(batch[-1].written_millis, "WRITE", {"mode": "Append"})]
                + [_add(f) for f in batch]
            )
        for category, age_days in ((TOMBSTONED_OLD, 10), (TOMBSTONED_RECENT, 1)):
            deleted = now - age_days * 86_400_000
            removed = [_remove(f, deleted) for f in table.files if f.category == category]
            if removed:
                self._commit([_commit_info(deleted, "DELETE", {"predicate": "[]"}), *removed])
        from deltalake import DeltaTable

        DeltaTable(table.uri, storage_options=self.storage_options).create_checkpoint()
        return table

    def add_fresh_files(self) -> SyntheticTable:
        """Write the fresh files and commit them (after the inventory was taken)."""
        table = self.table
        fresh = [f for f in table.files if f.category == FRESH]
        put_objects(table.bucket, ((f"{table.root}/{f.path}", PLACEHOLDER) for f in fresh))
        if fresh:
            written = _millis(datetime.now(timezone.utc))
            self._commit(
                [_commit_info(written, "WRITE", {"mode": "Append"})] + [_add(f, written) for f in fresh]
            )
        table.remember()
        return table
