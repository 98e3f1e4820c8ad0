"""The restore's planning, on plain values: which ledger rows to check, which delete marker of a key
is the tool's, and whether removing it brings the deleted object back. No I/O here; the flow that
lists versions and removes markers is :mod:`vacuum.restore`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from vacuum.results import (
    CURRENT_AGAIN,
    DELETED_AGAIN,
    DELETED_BEFORE,
    EXPIRED,
    LENGTH_DIFFERS,
    ORDER_UNKNOWN,
    WOULD_RESTORE,
)

# S3's clock (a version's LastModified, in whole seconds) against the driver's (the ledger's
# deleted_at, written after the delete): how far S3's may run ahead
CLOCK_SKEW = timedelta(seconds=10)


@dataclass(frozen=True)
class Deletion:
    """One ledger row of an object the tool deleted."""

    run_id: str
    table: str
    path: str
    bucket: str
    key: str
    length: int | None
    deleted_with: str
    deleted_at: datetime
    delete_marker_version_id: str | None = None
    run_started_at: datetime | None = None  # no later than the vacuum run began (from vacuum_runs)


@dataclass(frozen=True)
class Version:
    """One version of a key, as ListObjectVersions gives it."""

    version_id: str
    is_delete_marker: bool
    is_latest: bool
    last_modified: datetime
    size: int | None = None
    e_tag: str | None = None

    @classmethod
    def of(cls, listed: Mapping[str, Any]) -> Version:
        return cls(
            version_id=str(listed["VersionId"]),
            is_delete_marker=bool(listed["IsDeleteMarker"]),
            is_latest=bool(listed.get("IsLatest")),
            last_modified=listed["LastModified"],
            size=listed.get("Size"),
            e_tag=listed.get("ETag"),
        )


@dataclass(frozen=True)
class Plan:
    """What to do with one deletion: ``outcome`` is ``would_restore`` (remove ``marker``, making
    ``version`` current) or why it is left as it is."""

    outcome: str
    reason: str | None = None
    marker: Version | None = None
    version: Version | None = None


def select_deletions(
    rows: Iterable[Deletion], restored: Iterable[tuple[str, str, str]]
) -> tuple[list[Deletion], list[Deletion], list[tuple[Deletion, Deletion]]]:
    """Split the selected ledger rows into (to check, already restored, superseded with the row
    that supersedes each). ``restored``: ``(run_id, bucket, key)`` of the ledger's restore rows.

    One row per key is checked, the newest deletion: an older row of the same key is a delete
    that a later vacuum's delete covered, and only the newest marker can be removed."""
    done = set(restored)
    pending: list[Deletion] = []
    already: list[Deletion] = []
    for row in rows:
        (already if (row.run_id, row.bucket, row.key) in done else pending).append(row)
    newest: dict[tuple[str, str], Deletion] = {}
    superseded = []
    for row in sorted(pending, key=lambda r: r.deleted_at, reverse=True):
        kept = newest.setdefault((row.bucket, row.key), row)
        if kept is not row:
            superseded.append((row, kept))
    return list(newest.values()), already, superseded


def newest_first(versions: Iterable[Version]) -> list[Version]:
    """The key's versions, newest first: the latest, then by time (ListObjectVersions' order among
    versions of one second)."""
    return sorted(versions, key=lambda v: (not v.is_latest, -v.last_modified.timestamp()))


def plan_object(deletion: Deletion, versions: Sequence[Version], *, skew: timedelta = CLOCK_SKEW) -> Plan:
    """Find the tool's delete marker among ``versions`` of the deleted key and decide.

    The marker is the one whose version id the ledger holds; without one (Delta's own delete, or a
    ledger row older than the column), the newest delete marker made at or before the row's
    ``deleted_at`` (plus ``skew``) and not before the vacuum began. It is removed only when it is
    the key's newest version and the version below it is an object of the ledger's length.
    """
    ordered = newest_first(versions)
    if not ordered:
        return Plan(EXPIRED, "no version of the key is left")
    ours = _our_marker(deletion, ordered, skew)
    newest = ordered[0]
    if ours is None or ours is not newest:
        if not newest.is_delete_marker:
            return Plan(
                CURRENT_AGAIN,
                f"the key has a current object again (version {newest.version_id}, "
                f"{newest.size} bytes, {_when(newest)}): not overwritten",
            )
        if ours is None and deletion.delete_marker_version_id is None:
            return Plan(
                DELETED_AGAIN,
                f"its newest version is a delete marker of {_when(newest)}, after the vacuum's "
                "delete: not the tool's, left in place",
            )
        return Plan(
            DELETED_AGAIN,
            f"deleted again since the vacuum: its newest version is a delete marker the tool did not "
            f"make ({newest.version_id}, {_when(newest)}), left in place",
        )
    below = ordered[1:]
    if not below:
        return Plan(EXPIRED, "no version below the tool's delete marker is left", marker=ours)
    top = [v for v in below if v.last_modified == below[0].last_modified]
    if len({v.is_delete_marker for v in top}) > 1:
        return Plan(
            ORDER_UNKNOWN,
            "an object version and a delete marker of the same second lie below the tool's delete "
            "marker: which would become current is unknown; left in place",
            marker=ours,
        )
    version = below[0]
    if version.is_delete_marker:
        return Plan(
            DELETED_BEFORE,
            f"below the tool's delete marker is another delete marker ({version.version_id}, "
            f"{_when(version)}): removing it would not bring the object back; left in place",
            marker=ours,
        )
    if deletion.length is not None and version.size != deletion.length:
        return Plan(
            LENGTH_DIFFERS,
            f"the version below the tool's delete marker has {version.size} bytes, the ledger "
            f"{deletion.length}: not the object deleted; left in place",
            marker=ours,
        )
    return Plan(WOULD_RESTORE, marker=ours, version=version)


def _our_marker(deletion: Deletion, ordered: Sequence[Version], skew: timedelta) -> Version | None:
    if deletion.delete_marker_version_id is not None:
        return next(
            (v for v in ordered if v.version_id == deletion.delete_marker_version_id and v.is_delete_marker),
            None,
        )
    latest = deletion.deleted_at + skew
    earliest = deletion.run_started_at.replace(microsecond=0) - skew if deletion.run_started_at else None
    for version in ordered:  # the newest marker of the window
        if version.is_delete_marker and version.last_modified <= latest:
            return version if earliest is None or version.last_modified >= earliest else None
    return None


def expiring_rule(rules: Sequence[Mapping[str, Any]], key: str, length: int | None) -> str | None:
    """The first enabled lifecycle rule that expires noncurrent versions
    (``NoncurrentVersionExpiration``) and whose filter covers ``key`` (of ``length`` bytes):
    ``'ID'``, with a note when a tag condition could not be checked (the object is gone)."""
    for rule in rules:
        if rule.get("Status") != "Enabled" or "NoncurrentVersionExpiration" not in rule:
            continue
        conditions = dict(rule.get("Filter") or {})
        conditions.update(conditions.pop("And", None) or {})
        if "Prefix" in rule and "Prefix" not in conditions:  # the older form, outside Filter
            conditions["Prefix"] = rule["Prefix"]
        if not key.startswith(conditions.get("Prefix") or ""):
            continue
        if length is not None and (
            ("ObjectSizeGreaterThan" in conditions and not length > conditions["ObjectSizeGreaterThan"])
            or ("ObjectSizeLessThan" in conditions and not length < conditions["ObjectSizeLessThan"])
        ):
            continue
        name = f"'{rule.get('ID') or '(no ID)'}'"
        if "Tag" in conditions or "Tags" in conditions:
            name += " (if the object had the rule's tags)"
        return name
    return None


def _when(version: Version) -> str:
    return f"{version.last_modified.astimezone(timezone.utc):%Y-%m-%dT%H:%M:%SZ}"
