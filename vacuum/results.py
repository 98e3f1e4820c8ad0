"""The result types of a vacuum run and of a restore, shared by the runner, the restore, the
history, the ledger and the renderers.

Every count here is either measured or labelled as a plan: ``planned_*`` is what the planner and
the gates allowed, ``deleted_*`` what was measured gone afterwards (``None`` when it could not be
measured), ``kept`` the objects under the table that were left out of the plan, by reason.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

from vacuum.context import DeleteWith, Mode, Status

# Why an object under a table was left out of the plan (the keys of ``TableRun.kept``).
KEPT_NESTED_TABLE = "nested_table"  # under a directory with its own _delta_log/
KEPT_PROTECTED_PATH = "protected_path"  # under the inventory, history or ledger table, or another table
KEPT_UNPARSABLE_KEY = "unparsable_key"  # a key Hadoop's Path cannot parse (e.g. "10:00.log")
KEPT_NOT_SENDABLE = "not_sendable"  # a key that cannot be sent safely in a DeleteObjects XML body
KEPT_DELETED_EARLIER = "deleted_earlier"  # the ledger shows it deleted after the inventory was taken
# an empty folder marker under --delete-with delta: Delta deletes by path, and S3A would take a
# file of the directory's name written since the inventory for it; the batch delete deletes its key
KEPT_FOLDER_MARKER = "folder_marker"
KEPT_DIRECTORY = "directory"  # Delta named a directory it derived from file paths, not an object of S3's
# an object whose path is also a directory of other objects: a file named like one, or a folder
# marker with other objects below it
KEPT_SHADOWS_DIRECTORY = "shadows_directory"


@dataclass
class TableRun:
    """The outcome for one table of one run."""

    name: str
    path: str
    status: Status
    mode: Mode
    dry_run: bool
    delete_with: DeleteWith
    retention_hours_effective: float | None = None
    inventory_taken_at: str | None = None
    inventory_version: int | None = None
    coverage: float | None = None
    planned_files: int = 0
    planned_bytes: int | None = 0
    deleted_files: int | None = 0  # None: not measured
    deleted_bytes: int | None = 0
    remaining_files: int | None = 0  # planned, not a dry run, and still there afterwards
    already_gone_files: int | None = None  # planned but gone before the delete (None: not checked)
    kept: dict[str, int] = field(default_factory=dict)
    nested_tables: list[dict[str, Any]] = field(default_factory=list)
    delete_requests: int | None = 0  # None: sent by a deletes' job whose outcomes could not be read
    seconds: float = 0.0
    reason: str | None = None
    table_version: int | None = None
    warnings: list[str] = field(default_factory=list)
    partitions: list[dict[str, Any]] = field(default_factory=list)
    # why Delta's dry run was not asked for this table's plan (its answer was known to be empty)
    delta_plan_skipped: str | None = None
    candidates: pa.Table | None = field(default=None, repr=False)

    def keep(self, reason: str, objects: int) -> None:
        """Count ``objects`` left out of the plan for ``reason``."""
        if objects:
            self.kept[reason] = self.kept.get(reason, 0) + int(objects)

    @property
    def kept_objects(self) -> int:
        return sum(self.kept.values())

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("candidates")
        for name in ("status", "mode", "delete_with"):  # plain text for JSON and Spark rows
            data[name] = str(data[name])
        data["kept_objects"] = self.kept_objects
        return data


@dataclass
class VacuumResult:
    tables: list[TableRun] = field(default_factory=list)
    run_id: str | None = None  # the run's id in vacuum_runs and the ledger (restore --run-id)

    @property
    def ok(self) -> bool:
        return all(t.status == Status.OK for t in self.tables)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "tables": [t.to_dict() for t in self.tables]}


# What a restore did, or would do, with one object the ledger shows deleted (``ObjectRestore.outcome``).
RESTORED = "restored"  # the tool's delete marker removed; the version below is current, verified
WOULD_RESTORE = "would_restore"  # a dry run's answer
ALREADY_RESTORED = "already_restored"  # the ledger shows it restored by an earlier restore
DELETED_AGAIN = "deleted_again"  # its newest version is a delete marker the tool did not make
CURRENT_AGAIN = "current_again"  # its newest version is an object (written again, or its marker removed)
EXPIRED = "expired"  # no version below the tool's delete marker is left (a lifecycle rule expired it)
DELETED_BEFORE = "deleted_before"  # below the tool's delete marker is another delete marker
TWO_MARKERS = "two_markers"  # two delete markers of the delete's time window: which is the tool's is unknown
MARKER_UNKNOWN = "marker_unknown"  # no marker recorded and no time window known: nothing matched by guess
LENGTH_DIFFERS = "length_differs"  # the version below is not of the ledger's length
ORDER_UNKNOWN = "order_unknown"  # versions of the same second: which would become current is unknown
SUPERSEDED = "superseded"  # a later ledger row deleted the same key; that row decides
FAILED = "failed"  # listing its versions or removing the marker failed
UNVERIFIED = "unverified"  # the marker is removed, but the current version is not the expected one


@dataclass
class ObjectRestore:
    """One ledger row's object: what the restore found and did, with the reason when it left it."""

    table: str
    path: str
    bucket: str
    key: str
    run_id: str  # the vacuum run that deleted it
    deleted_at: str
    length: int | None  # as ledgered
    outcome: str
    reason: str | None = None
    delete_marker_version_id: str | None = None  # the tool's marker (found, or removed)
    restored_version_id: str | None = None  # the version that is (or would become) current
    restored_length: int | None = None  # measured after the restore (HEAD); a dry run: the version's size
    e_tag: str | None = None


@dataclass
class TableRestore:
    """The outcome of a restore for one table; every count is of ledger rows (objects)."""

    name: str
    path: str
    status: Status
    dry_run: bool
    selected_files: int = 0  # what the ledger shows the selection deleted, restored or not
    restored_files: int = 0
    restored_bytes: int = 0  # measured: the current versions' lengths after the restore
    would_restore_files: int = 0
    would_restore_bytes: int = 0
    already_restored_files: int = 0
    not_restored: dict[str, int] = field(default_factory=dict)  # by outcome
    delete_requests: int = 0
    seconds: float = 0.0
    reason: str | None = None
    objects: list[ObjectRestore] = field(default_factory=list)

    @property
    def not_restored_files(self) -> int:
        return sum(self.not_restored.values())

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = str(self.status)
        data["not_restored_files"] = self.not_restored_files
        return data


@dataclass
class RestoreResult:
    run_id: str
    dry_run: bool
    ledger: str
    tables: list[TableRestore] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(t.status == Status.OK for t in self.tables)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "dry_run": self.dry_run,
            "ledger": self.ledger,
            "tables": [t.to_dict() for t in self.tables],
        }
