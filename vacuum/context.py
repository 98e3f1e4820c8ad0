"""What a vacuum run is given and what it carries per table: the options, the run's shared state,
each table's context, and the enums its outcome is told in."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, SparkSession

from core.errors import VacuumRefused
from core.paths import StorageLocation, overlapping_pair
from core.registry import RegisteredTable
from vacuum.execute import REQUESTS_IN_FLIGHT

log = logging.getLogger("inventory_vacuum")

if TYPE_CHECKING:
    from vacuum.plan import InventoryFigures
    from vacuum.results import TableRun
    from vacuum.snapshot import TableState


class _TextEnum(str, Enum):
    """An enum whose members are their text everywhere: in f-strings, JSON and Spark rows."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Status(_TextEnum):
    """A table's outcome: done (``ok``), refused by a gate before any delete, or failed."""

    OK = "ok"
    REFUSED = "refused"
    FAILED = "failed"


class Mode(_TextEnum):
    """Where the plan's objects come from."""

    INVENTORY = "inventory"  # the inventory table, pinned to one version for the run
    FLAT = "flat"  # one flat listing of the table made now, used as the inventory
    LIST = "list"  # Delta's own listing VACUUM
    LITE = "lite"  # Delta's VACUUM LITE (the log's removes only)

    @property
    def uses_inventory(self) -> bool:
        """Delta's ``USING INVENTORY`` over a slice this tool prepared (and gated)."""
        return self in (Mode.INVENTORY, Mode.FLAT)


class DeleteWith(_TextEnum):
    """Who deletes the plan's files."""

    AUTO = "auto"  # batch for S3 tables in the inventory modes, else delta
    DELTA = "delta"  # Delta's own VACUUM, then a measurement of what is gone
    BATCH = "batch"  # this tool's DeleteObjects, after re-checking the plan against a fresh snapshot


@dataclass(frozen=True)
class VacuumOptions:
    """How to vacuum (the command-line flags of ``inventory-vacuum vacuum``)."""

    inventory_table: str | None = None
    mode: Mode = Mode.INVENTORY
    delete_with: DeleteWith = DeleteWith.AUTO
    dry_run: bool = False
    retain_hours: float | None = None
    allow_unsafe_retention: bool = False
    max_inventory_age_hours: float = 72.0
    min_coverage: float = 0.99
    allow_versioned: bool = False
    parallel: int = 4
    # DeleteObjects requests each Spark task of a batch delete keeps in flight (vacuum.execute)
    delete_requests_per_task: int = REQUESTS_IN_FLIGHT
    history_table: str | None = None
    ledger_table: str | None = None
    # locations no vacuum may delete under (the inventory, history and ledger tables, every
    # registered table); the run adds its own inventory, history and ledger tables itself
    protected_locations: tuple[str, ...] = ()
    collect_candidates: bool = False  # keep each table's candidate list for --candidates
    # check which candidates still exist before deleting (a request per directory or file), so
    # objects someone else deleted after the inventory was taken are reported as already gone and
    # not ledgered as deleted by this tool. None: on for Delta's own delete (it deletes by path
    # and says nothing about what it deleted), off for the batch delete (see verifies_existence)
    verify_existence: bool | None = None

    def __post_init__(self) -> None:  # plain strings (the library's callers) become the enums
        object.__setattr__(self, "mode", Mode(self.mode))
        object.__setattr__(self, "delete_with", DeleteWith(self.delete_with))

    def verifies_existence(self, delete_with: DeleteWith, *, on_s3: bool = True) -> bool:
        """Whether a table whose delete is ``delete_with`` (:meth:`delete_path`, ``auto``
        resolved for its location) checks its candidates' existence before deleting: as given,
        else when Delta deletes a table on S3 (``on_s3``).

        The batch delete on S3 leaves the check off by default: it costs up to a request per
        candidate where DeleteObjects costs one per 1000 keys, and on a versioned bucket
        DeleteObjects names the delete marker it made.
        """
        if self.verify_existence is not None:
            return bool(self.verify_existence)
        # only on S3 by default: on a local table the check set aside files that were there, and
        # Delta's delete then went unledgered (test_cross_writer's local tables). On S3, Delta's
        # delete is --delete-with delta, or auto in list and lite modes (delete_path)
        return on_s3 and delete_with == DeleteWith.DELTA

    def delete_path(self, location: StorageLocation) -> DeleteWith:
        """The delete this table gets: ``auto`` resolved for its location."""
        if self.delete_with != DeleteWith.AUTO:
            return self.delete_with
        return DeleteWith.BATCH if location.is_s3 and self.mode.uses_inventory else DeleteWith.DELTA

    def protected(self) -> tuple[StorageLocation, ...]:
        """The locations no table of the run may delete under, with the run's own tables."""
        uris = [*self.protected_locations, self.inventory_table, self.history_table, self.ledger_table]
        return tuple(StorageLocation.parse(u, what="protected location") for u in dict.fromkeys(uris) if u)


# Tables whose figures one query counts: its filter holds a range of keys per table, and the
# generated code of 2,500 ranges passed Java's 64 KB limit for a method
TABLES_PER_FIGURES_JOB = 64

# A run keeps in memory, for its tables of at most this many objects, their rows of the pinned
# inventory (read together, one query for every TABLES_PER_FIGURES_JOB of them), and for no more
# than SHARED_ROWS_LIMIT rows in all: each such table then builds its slice from memory, without a
# scan of the inventory table of its own (Delta's file skipping is a Spark job, and the read is
# requests to S3)
SHARED_ROWS_UP_TO_OBJECTS = 10_000
SHARED_ROWS_LIMIT = 1_000_000

# Spark settings under which a read skips a file it cannot read, silently
_SKIPS_UNREADABLE_FILES = ("spark.sql.files.ignoreCorruptFiles", "spark.sql.files.ignoreMissingFiles")


def _is_true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


@dataclass
class _SharedRows:
    """Rows of a group of a run's tables, persisted (:meth:`RunContext.share_rows`)."""

    frame: DataFrame
    under: Column  # the group's condition on keys (vacuum.plan.under_tables), for its tables' queries
    rows: int  # the group's rows in the cache, counted when read
    waiting: int  # the group's tables that have not read their rows yet


def _set_event() -> threading.Event:
    event = threading.Event()
    event.set()
    return event


@dataclass(frozen=True)
class RunContext:
    """What every table of one run shares."""

    run_id: str
    inventory_version: int | None
    protected: tuple[StorageLocation, ...]
    # per bucket of the pinned inventory: (taken at, newest modificationTime), computed once, and
    # only for a table without rows of its own (vacuum.plan.with_bucket_times)
    bucket_figures: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    # per (bucket, key) of a table of the run: its figures of the pinned inventory, when the run
    # computed them for all its tables at once (else each table computes its own)
    table_figures: dict[tuple[str, str], InventoryFigures] = field(default_factory=dict)
    # per (bucket, key) of a table whose rows the run keeps in memory: the tables read with it
    # (their locations in the order of the cached query, :meth:`share_rows`)
    shared_rows: dict[tuple[str, str], tuple[StorageLocation, ...]] = field(default_factory=dict)
    # per (bucket, tables read together): their cached rows (:meth:`share_rows`)
    shared_groups: dict[tuple[str, tuple[StorageLocation, ...]], _SharedRows] = field(
        default_factory=dict, repr=False
    )
    lock: threading.Lock = field(default_factory=threading.Lock)
    # clear while the run reads its tables' figures and rows (vacuum.runner: a one-table run reads
    # them beside its table's snapshot): a table's reads of them wait for it, so it gates on what
    # the run counted, as when it started after. Set otherwise
    figures_read: threading.Event = field(default_factory=_set_event, repr=False, compare=False)
    # set when the run ends early (an interrupt): a table that has not begun deleting does not begin
    stopped: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)
    # set by an interrupt (Ctrl-C) during the run (vacuum.interrupt.interrupts_stop)
    interrupted: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)
    # the job tags of the tables' deletes while they run (vacuum.deletion.deleting), and the lock
    # that orders their start after the run's stop
    deletes_running: set[str] = field(default_factory=set, repr=False, compare=False)
    deletes_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def begin_deletes(self, tag: str, refuse_if_stopped: Callable[[], None]) -> None:
        """Note that the deletes whose jobs carry the job tag ``tag`` begin, unless
        ``refuse_if_stopped`` refuses them (the run stopped): the two happen under one lock, so a
        stop either comes first and refuses them, or finds ``tag`` in :meth:`deletes_tags`."""
        with self.deletes_lock:
            refuse_if_stopped()
            self.deletes_running.add(tag)

    def end_deletes(self, tag: str) -> None:
        with self.deletes_lock:
            self.deletes_running.discard(tag)

    def deletes_tags(self) -> frozenset[str]:
        """The job tags of the deletes running now."""
        with self.deletes_lock:
            return frozenset(self.deletes_running)

    def figures_of_bucket(self, inventory: DataFrame, bucket: str) -> tuple[int | None, int | None]:
        """The bucket-wide figures of the pinned inventory (:func:`vacuum.plan.bucket_figures`),
        which only a table without rows of its own needs: counted once for the run, outside the
        run's lock (two such tables at the same moment may each count it; both get the same)."""
        from vacuum.plan import bucket_figures  # the plan's module reads results, which read this

        with self.lock:
            known = self.bucket_figures.get(bucket)
        if known is not None:
            return known
        counted = bucket_figures(inventory, bucket)
        with self.lock:
            return self.bucket_figures.setdefault(bucket, counted)

    def figures_of_tables(
        self, inventory: DataFrame, bucket: str, locations: Sequence[StorageLocation]
    ) -> None:
        """Count the figures of the tables at ``locations`` (all in ``bucket``), one query for
        every :data:`TABLES_PER_FIGURES_JOB` of them (:func:`vacuum.plan.tables_figures`).

        Nothing is counted (each table then counts its own, from the rows its slice is made of)
        when one table lies inside another, where a key would have two owners, or when the
        session skips files it cannot read (``spark.sql.files.ignoreCorruptFiles`` or
        ``ignoreMissingFiles``): a table's nested tables must be found in the same rows as its
        slice, and two reads that may each skip a file need not see the same rows.
        """
        from vacuum.plan import tables_figures

        if overlapping_pair(locations, lambda location: location) is not None:
            return
        if any(_is_true(inventory.sparkSession.conf.get(name, "false")) for name in _SKIPS_UNREADABLE_FILES):
            return
        ordered = sorted(locations, key=lambda location: location.key)
        for start in range(0, len(ordered), TABLES_PER_FIGURES_JOB):
            by_key = tables_figures(inventory, bucket, ordered[start : start + TABLES_PER_FIGURES_JOB])
            with self.lock:
                self.table_figures.update({(bucket, key): figures for key, figures in by_key.items()})

    def share_rows(self, inventory: DataFrame, bucket: str, locations: Sequence[StorageLocation]) -> None:
        """Read the rows of the run's small tables in ``bucket`` (:data:`SHARED_ROWS_UP_TO_OBJECTS`
        objects or fewer, by their figures: so only tables :meth:`figures_of_tables` counted) into
        Spark's cache, one query for every :data:`TABLES_PER_FIGURES_JOB` of them, while the run
        holds fewer than :data:`SHARED_ROWS_LIMIT` rows so. A group needs two tables at least: for
        one table alone the read together would be its own read plus a count.

        Each of those tables then reads :meth:`rows_source` instead of the inventory: the same
        query on its own session, which Spark answers from the cache (the cache is the
        SparkContext's, and a query of the same plan finds it), and its own :func:`rows_under` on
        top gives exactly its rows. Should the cache be gone (evicted, or released), the same
        query reads the same pinned version of the inventory instead.
        """
        from pyspark import StorageLevel

        from vacuum.plan import tables_rows, under_tables

        small = sorted(
            (
                location
                for location in locations
                if (figures := self._counted_figures(location)) is not None
                and 0 < figures.objects_under_table <= SHARED_ROWS_UP_TO_OBJECTS
            ),
            key=lambda location: location.key,
        )
        for start in range(0, len(small), TABLES_PER_FIGURES_JOB):
            group = tuple(small[start : start + TABLES_PER_FIGURES_JOB])
            if len(group) < 2:
                return
            objects = sum(
                self.table_figures[(bucket, location.key)].objects_under_table for location in group
            )
            with self.lock:
                held = sum(shared.rows for shared in self.shared_groups.values())
            if held + objects > SHARED_ROWS_LIMIT:  # the objects, before reading: a first bound
                return
            under = under_tables(group)
            frame = tables_rows(inventory, bucket, group, under).persist(StorageLevel.MEMORY_AND_DISK)
            try:
                # read now, in the run's figures step, not by whichever table runs first; a
                # versioned bucket's rows (noncurrent versions, delete markers) outnumber its objects
                rows = frame.count()
            except Exception:
                frame.unpersist()
                raise
            if held + rows > SHARED_ROWS_LIMIT:
                frame.unpersist()
                return
            with self.lock:
                self.shared_groups[(bucket, group)] = _SharedRows(frame, under, rows, len(group))
                self.shared_rows.update({(bucket, location.key): group for location in group})
            log.info(
                "the rows of %d small tables of bucket %s, %d rows in all, read together into Spark's cache",
                len(group),
                bucket,
                rows,
            )

    def rows_source(self, inventory: DataFrame, location: StorageLocation) -> DataFrame:
        """What the table at ``location`` reads its rows from (with :func:`vacuum.plan.rows_under`):
        ``inventory`` (the pinned version, on the table's session), or, when the run keeps the
        table's rows in memory (:meth:`share_rows`), the cached query of them on that session.
        Should Spark's cache no longer hold them (cleared by another caller in the same JVM), the
        table reads ``inventory``: the group's query would read every table of the group."""
        from pyspark import StorageLevel

        from vacuum.plan import tables_rows

        self.figures_read.wait()
        with self.lock:
            group = self.shared_rows.get((location.bucket, location.key))
            shared = None if group is None else self.shared_groups.get((location.bucket, group))
        if group is None or shared is None:
            return inventory
        rows = tables_rows(inventory, location.bucket, group, shared.under)
        if rows.storageLevel == StorageLevel.NONE:  # Spark's cache manager's answer for this plan
            log.info(
                "the rows read together for s3://%s/%s are no longer in Spark's cache: it reads its own",
                location.bucket,
                location.key,
            )
            return inventory
        return rows

    def release_rows(self, location: StorageLocation) -> None:
        """The table at ``location`` has read its rows: its group's cache goes once none of its
        tables needs it any more (once the run's rows are read: a table that stops before they are
        lets go of its share then)."""
        self.figures_read.wait()
        with self.lock:
            group = self.shared_rows.pop((location.bucket, location.key), None)
            if group is None:
                return
            shared = self.shared_groups[(location.bucket, group)]
            shared.waiting -= 1
            if shared.waiting > 0:
                return
            del self.shared_groups[(location.bucket, group)]
        shared.frame.unpersist()

    def release_all_rows(self) -> None:
        """The end of the run: every cache :meth:`share_rows` made goes (tables that stopped
        before reading their rows leave theirs)."""
        with self.lock:
            groups = list(self.shared_groups.values())
            self.shared_groups.clear()
            self.shared_rows.clear()
        for shared in groups:
            shared.frame.unpersist()

    def figures_of_table(self, location: StorageLocation) -> InventoryFigures | None:
        """The table's figures when the run computed them (:meth:`figures_of_tables`), else None;
        once the run has read them (:attr:`figures_read`)."""
        self.figures_read.wait()
        return self._counted_figures(location)

    def _counted_figures(self, location: StorageLocation) -> InventoryFigures | None:
        with self.lock:
            return self.table_figures.get((location.bucket, location.key))


@dataclass
class TableContext:
    """One table's vacuum: its session, registration, the run's options and shared state, the
    outcome being filled in, and what the steps learn on the way (the snapshot, its live files)."""

    spark: SparkSession
    table: RegisteredTable
    options: VacuumOptions
    run_context: RunContext
    run: TableRun
    state: TableState | None = None
    live_files: DataFrame | None = None
    # files removed before this (epoch milliseconds) are past the run's retention; fixed before
    # the slice is classified
    retained_since_millis: int | None = None
    # Delta's inventory mode can name no object of the slice
    # (:attr:`vacuum.plan.SliceCounts.delta_names_nothing`); False until the slice is counted
    delta_names_nothing: bool = False
    # when the table's deletes began (the driver's clock, just before the first request), ledgered
    # with each deletion: with the row's deleted_at it bounds when its delete markers were made
    delete_started_at: datetime | None = None
    # what runs once the snapshot is read (vacuum.runner: a choice that waits for the run's figures)
    after_snapshot: Callable[[], None] | None = None
    # how long after_snapshot waited for the run's figures: the run's time, not the table's
    waited_seconds: float = 0.0

    @property
    def location(self) -> StorageLocation:
        return self.table.location

    def refuse_if_stopped(self, before: str) -> None:
        """Refuse the table when its run has stopped (:attr:`RunContext.stopped`), before
        ``before``: nothing of it was deleted yet, and nothing will be."""
        if self.run_context.stopped.is_set():
            raise VacuumRefused(f"the run stopped (interrupted or failed) before {before}: nothing deleted")

    @property
    def ledger(self) -> str | None:
        return self.options.ledger_table

    @property
    def snapshot(self) -> TableState:
        assert self.state is not None, "the snapshot is read first"
        return self.state

    @property
    def protected_prefixes(self) -> list[str]:
        """The protected locations strictly inside the table, as directories relative to its root."""
        location = self.location
        return [
            p.key[len(location.key) + 1 :]
            for p in self.run_context.protected
            if location.contains(p) and not location.same_place(p)
        ]
