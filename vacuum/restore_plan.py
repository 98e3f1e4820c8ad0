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
    MARKER_UNKNOWN,
    ORDER_UNKNOWN,
    TWO_MARKERS,
    WOULD_RESTORE,
)

# S3's clock (a version's LastModified, in whole seconds) against the driver's (the ledger's
# delete_started_at and deleted_at): how far apart they may be. Small on purpose: a marker outside
# the window is left in place (restoring too little), one inside it may be someone else's
CLOCK_SKEW = timedelta(seconds=2)
# the version id of every version a bucket with versioning Suspended writes, delete markers included:
# a later delete of the key replaces the tool's marker with one of the same id
NULL_VERSION = "null"


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
    delete_started_at: datetime | None = None  # the ledger's: when the table's delete step began
    run_started_at: datetime | None = None  # no later than the vacuum run began (from vacuum_runs)

    def window(self, skew: timedelta) -> tuple[datetime | None, datetime]:
        """When the delete's markers were made, on S3's clock: (earliest or None, latest). It opens
        when the delete began as the ledger recorded it, else when the run began (an older ledger),
        and is unknown when neither is known."""
        start = self.delete_started_at or self.run_started_at
        earliest = start.replace(microsecond=0) - skew if start else None
        return earliest, self.deleted_at + skew


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
    rows: Iterable[Deletion], restored: Iterable[tuple[str, str, str]], others: Iterable[Deletion] = ()
) -> tuple[list[Deletion], list[Deletion], list[tuple[Deletion, Deletion]]]:
    """Split the selected ledger rows into (to check, already restored, superseded with the row
    that supersedes each). ``restored``: ``(run_id, bucket, key)`` of the ledger's restore rows;
    ``others``: the ledger's other deletions of the same keys, outside the selection.

    One row per key is checked, the newest deletion: an older row of the same key is a delete
    that a later vacuum's delete covered, and only the newest marker can be removed. A newer
    deletion outside the selection (a later vacuum run) supersedes the selected one too."""
    done = set(restored)
    pending: list[Deletion] = []
    already: list[Deletion] = []
    for row in rows:
        (already if (row.run_id, row.bucket, row.key) in done else pending).append(row)
    chosen = {id(row) for row in pending}
    deciding = [*pending, *(o for o in others if (o.run_id, o.bucket, o.key) not in done)]
    newest: dict[tuple[str, str], Deletion] = {}
    superseded = []
    for row in sorted(deciding, key=lambda r: r.deleted_at, reverse=True):
        kept = newest.setdefault((row.bucket, row.key), row)
        if kept is not row and id(row) in chosen:
            superseded.append((row, kept))
    return [row for row in newest.values() if id(row) in chosen], already, superseded


def newest_first(versions: Iterable[Version]) -> list[Version]:
    """The key's versions, newest first: the latest, then by time (ListObjectVersions' order among
    versions of one second)."""
    return sorted(versions, key=lambda v: (not v.is_latest, -v.last_modified.timestamp()))


def plan_object(deletion: Deletion, versions: Sequence[Version], *, skew: timedelta = CLOCK_SKEW) -> Plan:
    """Find the tool's delete marker among ``versions`` of the deleted key and decide.

    The marker is the one whose version id the ledger holds (DeleteObjects named it); on a bucket
    with versioning Suspended, where every marker's id is ``null``, it must also have been made in
    the delete's time window (:meth:`Deletion.window`). Without an id (Delta's own delete, or a
    ledger row older than the column), it is the newest delete marker made in that window; with no
    window known, nothing is matched (``marker_unknown``). The marker is removed only when it is
    the key's newest version and the version below it is an object of the ledger's length; a
    second marker of the window below it (a retried request, or someone's delete at the same time)
    leaves both in place (``two_markers``).
    """
    ordered = newest_first(versions)
    if not ordered:
        return Plan(EXPIRED, "no version of the key is left")
    earliest, latest = deletion.window(skew)
    if earliest is None and deletion.delete_marker_version_id in (None, NULL_VERSION):
        return Plan(
            MARKER_UNKNOWN,
            f"the ledger names no delete marker of its own and no start of the delete (no "
            f"delete_started_at, and no vacuum_runs row of run {deletion.run_id}): which delete "
            "marker is the tool's is unknown; left in place",
        )
    ours = _our_marker(deletion, ordered, earliest, latest)
    newest = ordered[0]
    if ours is None or ours is not newest:
        if not newest.is_delete_marker:
            current = f"version {newest.version_id}, {newest.size} bytes, {_when(newest)}"
            if earliest is None:  # when the delete began is not known: nor is what the object is
                return Plan(CURRENT_AGAIN, f"the key has a current object again ({current}): not overwritten")
            if ours is None and newest.last_modified < earliest:
                return Plan(
                    CURRENT_AGAIN,
                    f"the key's current object ({current}) is older than the vacuum's delete, and "
                    "the tool's delete marker is no longer there (removed by someone, or by an "
                    "earlier restore whose ledger rows were not written): it is current again; "
                    "nothing to restore",
                )
            since = ": written since the vacuum's delete began" if newest.last_modified >= earliest else ""
            return Plan(
                CURRENT_AGAIN, f"the key has a current object again ({current}){since}; not overwritten"
            )
        if earliest is not None and newest.last_modified < earliest:
            return Plan(
                DELETED_AGAIN,
                f"its newest version is a delete marker made before the vacuum's delete began "
                f"({newest.version_id}, {_when(newest)}): deleted by someone else; left in place",
            )
        return Plan(
            DELETED_AGAIN,
            f"its newest version is a delete marker the tool did not make ({newest.version_id}, "
            f"{_when(newest)}): deleted again since the vacuum; left in place",
        )
    guessed = deletion.delete_marker_version_id in (None, NULL_VERSION)
    window = [
        v
        for v in ordered
        if v.is_delete_marker and earliest is not None and earliest <= v.last_modified <= latest
    ]
    if guessed and len(window) > 1:  # matched by time: any other marker of the window may be the tool's
        return Plan(
            TWO_MARKERS,
            f"{len(window)} delete markers were made while the vacuum deleted it "
            f"({', '.join(f'{v.version_id} at {_when(v)}' for v in window)}): which is the tool's is "
            "not known (the ledger names none), so all are left in place",
            marker=ours,
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
        if earliest is not None and version.last_modified >= earliest:
            return Plan(
                TWO_MARKERS,
                f"below the tool's delete marker ({ours.version_id}, {_when(ours)}) is another made "
                f"while the vacuum deleted it ({version.version_id}, {_when(version)}): a retried "
                "delete request makes two, and so does someone's delete at the same time; removing "
                "the tool's alone would not bring the object back, so both are left in place",
                marker=ours,
            )
        made = "before the vacuum's delete began, " if earliest is not None else ""
        return Plan(
            DELETED_BEFORE,
            f"below the tool's delete marker is an older delete marker ({version.version_id}, "
            f"{made}{_when(version)}): removing the tool's would not bring the object back; left in place",
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


def _our_marker(
    deletion: Deletion, ordered: Sequence[Version], earliest: datetime | None, latest: datetime
) -> Version | None:
    def in_window(version: Version) -> bool:
        return earliest is not None and earliest <= version.last_modified <= latest

    recorded = deletion.delete_marker_version_id
    if recorded is not None:
        marker = next((v for v in ordered if v.version_id == recorded and v.is_delete_marker), None)
        if marker is not None and recorded == NULL_VERSION and not in_window(marker):
            return None  # a later delete on the Suspended bucket replaced the tool's null marker
        return marker
    for version in ordered:  # the newest marker of the window
        if version.is_delete_marker and version.last_modified <= latest:
            return version if in_window(version) else None
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
