"""The safety gates. Each returns quietly or raises :class:`VacuumRefused` with its reason.

Every path to a delete passes all of them; a dry run passes them too, so it shows what a real
run would do.
"""

from __future__ import annotations

import math
from datetime import datetime

from core.errors import VacuumRefused

RETENTION_WINDOW_IGNORE = "spark.databricks.delta.vacuum.retentionWindowIgnore.enabled"


def effective_retention_hours(
    requested_hours: float | None,
    table_retention_hours: float,
    *,
    allow_unsafe: bool,
    retain_honoured: bool = True,
    delta_version: str = "",
) -> float:
    """The retention the vacuum applies, in hours.

    The default is the table's own ``delta.deletedFileRetentionDuration``. Shorter needs
    ``allow_unsafe`` (as in Delta). Longer is refused too: Delta drops a removed file's tombstone
    from the snapshot once the table's retention has passed, so it cannot protect the versions
    between the two; raising the table property is the way to keep more.
    Delta rounds RETAIN to whole hours; the value returned is the whole number actually passed.

    From Delta 4.1 on, ``RETAIN n HOURS`` is ignored unless n is 0 (``retain_honoured`` False):
    Delta would apply the table's retention while the run reported the shorter one, so a shorter
    retention other than 0 is refused there, with the two ways to get it.
    """
    if requested_hours is None or requested_hours == table_retention_hours:
        return table_retention_hours
    hours = float(math.ceil(requested_hours))
    if requested_hours < table_retention_hours <= hours:
        # rounded up past a fractional table retention: the table's own is the one to apply
        return table_retention_hours
    if hours < table_retention_hours and not allow_unsafe:
        raise VacuumRefused(
            f"retention {hours:g}h is shorter than the table's delta.deletedFileRetentionDuration "
            f"({table_retention_hours:g}h); pass --allow-unsafe-retention if no reader or writer needs it"
        )
    if hours > table_retention_hours:
        raise VacuumRefused(
            f"retention {hours:g}h is longer than the table's delta.deletedFileRetentionDuration "
            f"({table_retention_hours:g}h), which Delta cannot honour; raise that table property instead"
        )
    if hours < table_retention_hours and hours != 0 and not retain_honoured:
        raise VacuumRefused(
            f"Delta {delta_version} ignores RETAIN {hours:g} HOURS (only 0 is honoured) and would keep the "
            f"table's {table_retention_hours:g}h: set the table's delta.deletedFileRetentionDuration to "
            f"'interval {hours:g} hours' (time travel and every other vacuum of the table then keep only "
            f"that), or run with --conf {RETENTION_WINDOW_IGNORE}=false (an internal Delta setting a "
            "later Delta may drop)"
        )
    return hours


def retain_is_honoured(delta_version: tuple[int, ...], window_ignore_setting: str | None) -> bool:
    """Whether Delta applies ``RETAIN n HOURS`` for any n: always before Delta 4.1; from 4.1 on
    only with the session's :data:`RETENTION_WINDOW_IGNORE` set to false (its default is true)."""
    if delta_version[:2] < (4, 1):
        return True
    return (window_ignore_setting or "true").strip().lower() == "false"


def check_inventory_present(objects_under_table: int, bucket: str, table_location: str) -> None:
    """An inventory with nothing under the table's path describes some other place."""
    if objects_under_table == 0:
        raise VacuumRefused(
            f"the inventory has no objects under {table_location} (bucket {bucket}): "
            "wrong bucket, prefix or scheme, or the bucket's inventory is not loaded"
        )


_CLOCK_SKEW_HOURS = 1.0  # how far in the future an inventory's timestamp may be


def check_freshness(taken_at: datetime | None, now: datetime, max_age_hours: float, bucket: str) -> float:
    """Refuse an inventory older than ``max_age_hours``; return its age in hours."""
    if taken_at is None:
        raise VacuumRefused(f"the inventory table has no rows for bucket {bucket}")
    age_hours = (now - taken_at).total_seconds() / 3600
    if age_hours < -_CLOCK_SKEW_HOURS:
        # a scan that has not begun yet: the manifest or a clock is wrong, and every age-based
        # check (coverage, the ledger) would be measured from the wrong moment
        raise VacuumRefused(
            f"inventory of bucket {bucket} says it was taken at {taken_at.isoformat()}, "
            f"{-age_hours:.1f}h in the future: check the delivery's manifest and this machine's clock"
        )
    if age_hours > max_age_hours:
        raise VacuumRefused(
            f"inventory of bucket {bucket} was taken {age_hours:.1f}h ago "
            f"(at {taken_at.isoformat()}), older than --max-inventory-age-hours {max_age_hours:g}"
        )
    return age_hours


def check_coverage(eligible_files: int, covered_files: int, min_coverage: float) -> float:
    """Refuse when the inventory misses live files it should have seen; return the coverage.

    ``eligible_files``: live files of the current snapshot written before the inventory was
    taken; ``covered_files``: how many of them the inventory slice lists.
    """
    coverage = 1.0 if eligible_files == 0 else covered_files / eligible_files
    if coverage < min_coverage:
        raise VacuumRefused(
            f"the inventory lists only {covered_files} of the {eligible_files} live files older than it "
            f"({coverage:.1%} < {min_coverage:.0%}): it does not describe this table "
            "(wrong bucket, scheme or prefix, or a partial delivery)"
        )
    return coverage


def check_versioning(status: str | None, bucket: str, *, allow_versioned: bool) -> list[str]:
    """Deleting in a versioned bucket only adds delete markers and frees nothing."""
    if status not in ("Enabled", "Suspended"):
        return []
    message = (
        f"bucket {bucket} has versioning {status}: deletes only add delete markers and free no storage "
        "until a lifecycle rule expires noncurrent versions"
    )
    if status == "Suspended":
        message += (
            "; except an object written before versioning was enabled or while it was suspended "
            "(version id null): its delete replaces it for good, and no restore can bring it back"
        )
    if not allow_versioned:
        raise VacuumRefused(message + "; pass --allow-versioned to vacuum anyway")
    return [message]
