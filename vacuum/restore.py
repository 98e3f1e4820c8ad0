"""Undo a vacuum on a versioned bucket: remove exactly the delete markers the tool's deletes made.

A delete on a versioned bucket makes a delete marker and keeps the object as a noncurrent version;
removing that marker (deleting it by its version id) makes the version below it current again. The
restore works from the deletion ledger alone and never touches a key the ledger does not list:

1. select the ledger's deletions of the named tables (of one run, or since a time), leaving out
   what an earlier restore restored and what the vacuum found already gone;
2. per key, list its versions (ListObjectVersions) and find the tool's marker: the one whose
   version id the ledger holds (DeleteObjects named it), else the newest delete marker made
   between the vacuum's start and the ledger row's time (Delta's own delete names none);
3. remove it only when it is still the key's newest version and the version below it is an
   object of the ledger's length. A newer delete marker (someone deleted the key again) and a newer
   object (the key was written again) are left alone, as is a key whose noncurrent version a
   lifecycle rule expired; each is reported with its reason;
4. remove the markers with DeleteObjects by version id, 1000 a request, retried as the vacuum's
   deletes are (:func:`vacuum.execute.delete_keys`); then HEAD each key: the version that is
   current must be the one expected, of the ledger's length;
5. ledger each restored object (``restored_by``) and record the restore in ``vacuum_runs``
   (mode ``restore``).

The planning (which rows, which marker, whether to remove it) is pure, in :mod:`vacuum.restore_plan`;
the S3 calls are in :mod:`core.s3` and :mod:`vacuum.execute`.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from core.errors import InventoryTableError, InventoryVacuumError, UsageError
from core.registry import RegisteredTable
from core.s3 import bucket_versioning, current_version, describe, key_versions, lifecycle_rules, s3_client
from core.tables import VACUUM_RUNS_SCHEMA, append_run_rows, delta_table_exists, read_ledger
from vacuum.context import Status
from vacuum.execute import MAX_KEYS_PER_REQUEST, delete_keys
from vacuum.ledger import ALREADY_GONE, record_restores
from vacuum.restore_plan import (
    Deletion,
    Plan,
    Version,
    expiring_rule,
    plan_object,
    select_deletions,
)
from vacuum.results import (
    EXPIRED,
    FAILED,
    RESTORED,
    SUPERSEDED,
    UNVERIFIED,
    WOULD_RESTORE,
    ObjectRestore,
    RestoreResult,
    TableRestore,
)

log = logging.getLogger("inventory_vacuum")


class NothingToRestoreFrom(InventoryVacuumError):
    """A bucket without versioning keeps no copy of what was deleted."""


@dataclass(frozen=True)
class RestoreOptions:
    """What to restore (the flags of ``inventory-vacuum restore``): the ledger's deletions of one
    vacuum run (``run_id``), or since a time (``since``), or both."""

    ledger_table: str
    history_table: str | None = None
    run_id: str | None = None
    since: datetime | None = None
    dry_run: bool = False
    parallel: int = 16  # keys listed (and checked after) at once
    max_attempts: int = 6  # per DeleteObjects request, as the vacuum's deletes

    def __post_init__(self) -> None:
        if self.run_id is None and self.since is None:
            raise UsageError("name what to restore: --run-id RUN_ID, --since TIMESTAMP, or both")

    def selection(self) -> str:
        """The selection in words, for messages."""
        parts = [f"run {self.run_id}"] if self.run_id else []
        if self.since is not None:
            parts.append(f"since {self.since.astimezone(timezone.utc):%Y-%m-%dT%H:%M:%SZ}")
        return ", ".join(parts)


# ---- the flow ---------------------------------------------------------------------------------


@dataclass
class _Work:
    """One table's deletions on their way through the restore."""

    table: RegisteredTable
    run: TableRestore
    objects: dict[tuple[str, str], ObjectRestore] = field(default_factory=dict)  # (bucket, key)
    plans: dict[tuple[str, str], tuple[Deletion, Plan]] = field(default_factory=dict)


def restore_tables(
    spark: SparkSession, tables: Sequence[RegisteredTable], options: RestoreOptions, run_id: str
) -> RestoreResult:
    """Restore what the ledger shows the selection deleted from ``tables``; see the module.

    Example::

        result = restore_tables(spark, registry.select(["events"]),
                                RestoreOptions("s3://meta/warehouse/vacuum_deletions",
                                               run_id="20261125T213000Z-1a2b3c4d", dry_run=True),
                                run_id="20261126T080000Z-5e6f7a8b")
    """
    started = time.monotonic()
    rows, restored, others = _read_selection(spark, options, tables)
    names = ", ".join(t.name for t in tables)
    if not rows:
        raise UsageError(
            f"the ledger {options.ledger_table} lists no object deleted ({options.selection()}) "
            f"from table(s) {names}"
        )
    versioning = _check_versioning(rows, options)
    pending, already, superseded = select_deletions(rows, restored, others)
    works = {t.name: _Work(t, TableRestore(t.name, t.path, Status.OK, options.dry_run)) for t in tables}
    for row in rows:
        works[row.table].run.selected_files += 1
    for row in already:
        works[row.table].run.already_restored_files += 1
    for row, later in superseded:
        _settle(
            works[row.table],
            row,
            SUPERSEDED,
            f"deleted again by vacuum run {later.run_id} at {later.deleted_at:%Y-%m-%dT%H:%M:%SZ}: that "
            f"deletion decides (restore it with --run-id {later.run_id})",
        )

    client = s3_client()
    plans = _plan_all(client, pending, options.parallel)
    rules = _expiry_rules(client, [d for d, p in plans if p.outcome == EXPIRED])
    to_remove: list[tuple[Deletion, Plan]] = []
    for deletion, plan in plans:
        work = works[deletion.table]
        if plan.outcome == WOULD_RESTORE:
            assert plan.version is not None
            to_remove.append((deletion, plan))
            _settle(work, deletion, WOULD_RESTORE, None, plan, length=plan.version.size)
        elif plan.outcome == EXPIRED:
            rule = rules.get(deletion.bucket, {}).get(deletion.key)
            if versioning.get(deletion.bucket) == "Suspended":
                why = (
                    f"bucket {deletion.bucket} has versioning Suspended, where a delete replaces for "
                    "good a version written before versioning was enabled or while it was suspended "
                    "(version id null), so the delete itself may have removed it"
                    + (f"; or the lifecycle rule {rule} expired it" if rule else "")
                )
            elif rule:
                why = f"expired by the lifecycle rule {rule} (NoncurrentVersionExpiration)"
            else:
                why = (
                    "no lifecycle rule with NoncurrentVersionExpiration covers it (deleted by "
                    "someone, or a rule since removed)"
                )
            _settle(work, deletion, EXPIRED, f"{plan.reason}: cannot be restored; {why}", plan)
        else:
            _settle(work, deletion, plan.outcome, plan.reason, plan)

    if not options.dry_run and to_remove:
        _remove_markers(client, works, to_remove, options)
        ledgered = _verify(client, works, to_remove, run_id, options.parallel)
        warning = record_restores(spark, options.ledger_table, ledgered)
        if warning:
            for work in works.values():
                work.run.reason = (work.run.reason + "; " if work.run.reason else "") + warning
    for work in works.values():
        work.run.objects = list(work.objects.values())
        _total(work.run)
        work.run.seconds = round(time.monotonic() - started, 3)
    result = RestoreResult(run_id, options.dry_run, options.ledger_table, [w.run for w in works.values()])
    if options.history_table and not options.dry_run:
        _record_history(spark, options.history_table, run_id, result.tables)
    return result


def _read_selection(
    spark: SparkSession, options: RestoreOptions, tables: Sequence[RegisteredTable]
) -> tuple[list[Deletion], list[tuple[str, str, str]], list[Deletion]]:
    """The ledger's deletions of the selection; ``(run_id, bucket, key)`` of the restore rows of
    their keys; and the other deletions of those keys (other runs, other times), which decide
    when they are newer. One read of the ledger."""
    if not delta_table_exists(spark, options.ledger_table):
        raise InventoryTableError(
            f"no deletion ledger at {options.ledger_table}: no vacuum deleted anything recorded there"
        )
    ledger = read_ledger(spark, options.ledger_table).where(
        F.col("table").isin([t.name for t in tables]) & (F.col("deleted_with") != ALREADY_GONE)
    )
    chosen = F.lit(True)
    if options.run_id:
        chosen = chosen & (F.col("run_id") == options.run_id)
    if options.since is not None:
        since_ms = int(options.since.timestamp() * 1000)
        chosen = chosen & (F.unix_millis("deleted_at") >= F.lit(since_ms))
    keys = ledger.where(chosen & F.col("restored_by").isNull()).select("bucket", "key").distinct()
    ledger = (
        ledger.join(keys, ["bucket", "key"], "left_semi")
        .withColumn("chosen", chosen)
        .withColumn("deleted_at_ms", F.unix_millis("deleted_at"))
        .withColumn("delete_started_ms", F.unix_millis("delete_started_at"))
    )
    starts = _run_starts(spark, options.history_table)
    if starts is not None:
        ledger = ledger.join(starts, "run_id", "left")
    else:
        ledger = ledger.withColumn("started_ms", F.lit(None).cast("long"))
    deletions: list[Deletion] = []
    restored: list[tuple[str, str, str]] = []
    others: list[Deletion] = []
    for row in ledger.collect():
        if row["restored_by"] is not None:
            restored.append((row["run_id"], row["bucket"], row["key"]))
            continue
        (deletions if row["chosen"] else others).append(
            Deletion(
                run_id=row["run_id"],
                table=row["table"],
                path=row["path"],
                bucket=row["bucket"],
                key=row["key"],
                length=row["length"],
                deleted_with=row["deleted_with"],
                deleted_at=_from_ms(row["deleted_at_ms"]),
                delete_marker_version_id=row["delete_marker_version_id"],
                delete_started_at=_when(row["delete_started_ms"]),
                run_started_at=_when(row["started_ms"]),
            )
        )
    return deletions, restored, others


def _run_starts(spark: SparkSession, history_table: str | None) -> Any:
    """``run_id, started_ms``: no later than each vacuum run's first table began, from the run
    history (its rows are written together after every table ran: their time less the tables'
    seconds added up), or None when there is no history to read."""
    if not history_table or not delta_table_exists(spark, history_table):
        return None
    try:
        runs = spark.read.format("delta").load(history_table)
        return runs.groupBy("run_id").agg(
            (
                F.min(F.unix_millis("run_at"))
                - (F.coalesce(F.sum("seconds"), F.lit(0.0)) * 1000).cast("long")
            ).alias("started_ms")
        )
    except Exception as error:  # the time match then has no lower bound
        log.warning("cannot read the vacuum history %s: %s", history_table, describe(error))
        return None


def _from_ms(millis: int) -> datetime:
    return datetime.fromtimestamp(millis / 1000, tz=timezone.utc)


def _when(millis: int | None) -> datetime | None:
    return None if millis is None else _from_ms(millis)


def _check_versioning(rows: Sequence[Deletion], options: RestoreOptions) -> dict[str, str]:
    """Each bucket's versioning state. A bucket whose versioning was never enabled kept no
    noncurrent version: refuse, changing nothing, and point to the ledger for a restore from a
    backup."""
    counts: dict[str, int] = defaultdict(int)
    for row in rows:
        counts[row.bucket] += 1
    states = {}
    for bucket in sorted(counts):
        try:
            status = bucket_versioning(bucket)
        except Exception as error:
            raise InventoryVacuumError(
                f"cannot read the versioning state of bucket {bucket}: {describe(error)}; nothing changed"
            ) from None
        if status is None:
            raise NothingToRestoreFrom(
                f"bucket {bucket} has no versioning, so S3 kept no copy of the {counts[bucket]} "
                f"deleted object(s) to restore; the ledger {options.ledger_table} lists them "
                f"({options.selection()}) for a restore from a backup; nothing changed"
            )
        states[bucket] = status
    return states


def _plan_all(client: Any, pending: Sequence[Deletion], parallel: int) -> list[tuple[Deletion, Plan]]:
    """List each key's versions (``parallel`` at once) and plan it; a listing that fails leaves
    its key alone, with the error."""

    def one(deletion: Deletion) -> tuple[Deletion, Plan]:
        try:
            versions = [Version.of(v) for v in key_versions(client, deletion.bucket, deletion.key)]
        except Exception as error:
            return deletion, Plan(FAILED, f"cannot list its versions: {describe(error)}")
        return deletion, plan_object(deletion, versions)

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        return list(pool.map(one, pending))


def _expiry_rules(client: Any, expired: Sequence[Deletion]) -> dict[str, dict[str, str]]:
    """Per bucket, per expired key: the lifecycle rule that expires its noncurrent versions."""
    found: dict[str, dict[str, str]] = defaultdict(dict)
    for bucket in sorted({d.bucket for d in expired}):
        try:
            rules = lifecycle_rules(client, bucket)
        except Exception as error:
            log.warning("cannot read the lifecycle configuration of bucket %s: %s", bucket, describe(error))
            continue
        for deletion in expired:
            if deletion.bucket == bucket:
                rule = expiring_rule(rules, deletion.key, deletion.length)
                if rule:
                    found[bucket][deletion.key] = rule
    return found


def _settle(
    work: _Work,
    deletion: Deletion,
    outcome: str,
    reason: str | None,
    plan: Plan | None = None,
    *,
    length: int | None = None,
) -> None:
    marker = plan.marker.version_id if plan and plan.marker else deletion.delete_marker_version_id
    version = plan.version if plan else None
    key = (deletion.bucket, deletion.key)
    if outcome == SUPERSEDED:  # more than one row of a key: the key's entry is the deciding row's
        key = (deletion.bucket, f"{deletion.key}\0{deletion.run_id}")
    work.objects[key] = ObjectRestore(
        table=deletion.table,
        path=deletion.path,
        bucket=deletion.bucket,
        key=deletion.key,
        run_id=deletion.run_id,
        deleted_at=deletion.deleted_at.isoformat(),
        length=deletion.length,
        outcome=outcome,
        reason=reason,
        delete_marker_version_id=marker,
        restored_version_id=version.version_id if version else None,
        restored_length=length,
        e_tag=version.e_tag if version else None,
    )
    if plan is not None:
        work.plans[(deletion.bucket, deletion.key)] = (deletion, plan)


def _remove_markers(
    client: Any,
    works: Mapping[str, _Work],
    to_remove: Sequence[tuple[Deletion, Plan]],
    options: RestoreOptions,
) -> None:
    """DeleteObjects with version ids: each bucket's markers, 1000 a request; a marker whose
    removal failed leaves its object as it was, with the error."""
    own_retries = s3_client(own_retries=True)
    by_bucket: dict[str, list[tuple[Deletion, Plan]]] = defaultdict(list)
    for deletion, plan in to_remove:
        by_bucket[deletion.bucket].append((deletion, plan))
    for bucket, items in sorted(by_bucket.items()):
        for start in range(0, len(items), MAX_KEYS_PER_REQUEST):
            batch = items[start : start + MAX_KEYS_PER_REQUEST]
            markers = {d.key: p.marker.version_id for d, p in batch if p.marker is not None}
            outcome = delete_keys(
                own_retries, bucket, list(markers), options.max_attempts, version_ids=markers
            )
            tables = {d.table for d, _ in batch}
            for name in tables:  # the requests are the tables' together: counted once, on the first
                works[name].run.delete_requests += outcome.requests if name == min(tables) else 0
            for deletion, _ in batch:
                if deletion.key in outcome.failed:
                    entry = works[deletion.table].objects[(bucket, deletion.key)]
                    entry.outcome = FAILED
                    entry.reason = f"the delete marker could not be removed: {outcome.failed[deletion.key]}"
                    entry.restored_length = None


def _verify(
    client: Any,
    works: Mapping[str, _Work],
    to_remove: Sequence[tuple[Deletion, Plan]],
    restore_run_id: str,
    parallel: int,
) -> list[dict[str, Any]]:
    """HEAD each key whose marker was removed: restored when its current version is the one
    expected, of the ledger's length. Returns the ledger rows of every removed marker."""
    removed = [
        (d, p) for d, p in to_remove if works[d.table].objects[(d.bucket, d.key)].outcome == WOULD_RESTORE
    ]

    def head(item: tuple[Deletion, Plan]) -> tuple[Deletion, Plan, dict[str, Any] | None, str | None]:
        deletion, plan = item
        try:
            return deletion, plan, current_version(client, deletion.bucket, deletion.key), None
        except Exception as error:
            return deletion, plan, None, describe(error)

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        checked = list(pool.map(head, removed))
    now = datetime.now(timezone.utc)
    rows = []
    for deletion, plan, current, error in checked:
        assert plan.version is not None and plan.marker is not None
        entry = works[deletion.table].objects[(deletion.bucket, deletion.key)]
        expected = plan.version
        length = current.get("ContentLength") if current else None
        if (
            current is not None
            and current.get("VersionId") == expected.version_id
            and (deletion.length is None or length == deletion.length)
        ):
            entry.outcome, entry.restored_length = RESTORED, length
            entry.e_tag = current.get("ETag") or entry.e_tag
        else:
            found = (
                f"cannot be read ({error})"
                if error
                else "is none"
                if current is None
                else f"is {current.get('VersionId')} ({length} bytes)"
            )
            entry.outcome, entry.restored_length = UNVERIFIED, length
            entry.reason = (
                f"the tool's delete marker is removed, but the current version {found}, not "
                f"{expected.version_id} ({deletion.length} bytes)"
            )
        rows.append(
            {
                "run_id": deletion.run_id,
                "table": deletion.table,
                "path": deletion.path,
                "bucket": deletion.bucket,
                "key": deletion.key,
                "length": length,
                "deleted_with": deletion.deleted_with,
                "deleted_at": deletion.deleted_at,
                "delete_marker_version_id": plan.marker.version_id,
                "delete_started_at": deletion.delete_started_at,
                "restored_by": restore_run_id,
                "restored_at": now,
            }
        )
    return rows


def _total(run: TableRestore) -> None:
    """The table's counts, from its objects' outcomes; failed when a removal failed or a restored
    version could not be verified."""
    outcomes: dict[str, int] = defaultdict(int)
    for entry in run.objects:
        outcomes[entry.outcome] += 1
    run.objects = sorted(run.objects, key=lambda o: (o.outcome != FAILED, o.outcome, o.key))
    run.restored_files = outcomes.pop(RESTORED, 0)
    run.restored_bytes = sum(o.restored_length or 0 for o in run.objects if o.outcome == RESTORED)
    run.would_restore_files = outcomes.pop(WOULD_RESTORE, 0)
    run.would_restore_bytes = sum(o.restored_length or 0 for o in run.objects if o.outcome == WOULD_RESTORE)
    run.not_restored = dict(sorted(outcomes.items()))
    problems = outcomes.get(FAILED, 0) + outcomes.get(UNVERIFIED, 0)
    if problems:
        run.status = Status.FAILED
        first = next(o for o in run.objects if o.outcome in (FAILED, UNVERIFIED))
        run.reason = f"{problems} object(s) not restored for an error; first: {first.key}: {first.reason}"


def _record_history(spark: SparkSession, location: str, run_id: str, runs: Sequence[TableRestore]) -> None:
    records = [
        {
            "table": r.name,
            "path": r.path,
            "mode": "restore",
            "dry_run": r.dry_run,
            "planned_files": r.selected_files - r.already_restored_files,
            "restored_files": r.restored_files,
            "restored_bytes": r.restored_bytes,
            "not_restored_files": r.not_restored_files,
            "delete_requests": r.delete_requests,
            "seconds": r.seconds,
            "status": str(r.status),
            "reason": r.reason,
        }
        for r in runs
    ]
    append_run_rows(spark, location, VACUUM_RUNS_SCHEMA, run_id, records)


__all__ = ["NothingToRestoreFrom", "RestoreOptions", "restore_tables"]
