"""Vacuum a set of registered tables: plan, gate, delete, record. Tables run concurrently.

For each table, in order: read the snapshot; fix the retention; with an inventory, check its
age, that it has objects under the table and that it lists the table's live files; leave out
nested tables, protected paths, keys Delta cannot parse and what the ledger shows deleted; check
bucket versioning; ask Delta for the candidates (DRY RUN) and check every one; then, unless this
is a dry run, delete them (batched DeleteObjects after re-checking them against a fresh snapshot,
or Delta's own VACUUM followed by a check of what is really gone), and record every deleted object
in the ledger. A refusal or failure of one table never stops the others.

Every table runs on its own ``SparkSession.newSession()`` (same SparkContext, own SQL conf and
temporary views), made the active session of the thread that runs it: Delta needs an active
session on the calling JVM thread (for example to read a checkpoint another writer made), and a
table's retention-check setting must not be seen by another table running at the same time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from core.errors import InventoryTableError, InventoryVacuumError, VacuumRefused, spark_error_summary
from core.paths import StorageLocation
from core.registry import RegisteredTable
from core.s3 import describe, s3_client
from core.session import job_group, jvm_delta_version, name_jobs, version_tuple
from inventory.listing import listing_inventory
from inventory.schema import INVENTORY_TABLE_SCHEMA
from vacuum import gates
from vacuum.execute import delete_in_batches
from vacuum.history import record_vacuum_runs
from vacuum.ledger import ALREADY_GONE, deleted_since, ensure_ledger, record_deletions
from vacuum.plan import (
    CLASSIFIED_COLUMNS,
    bucket_figures,
    candidate_details,
    check_plan,
    classify_objects,
    coverage_counts,
    delta_inventory,
    dry_run_candidates,
    inventory_figures,
    inventory_slice,
    not_slice_files,
    reported_path,
    rows_under,
    table_objects,
    temporary_view,
    under_any,
    vacuum_sql,
)
from vacuum.results import (
    KEPT_DIRECTORY,
    KEPT_NESTED_TABLE,
    KEPT_NOT_SENDABLE,
    KEPT_PROTECTED_PATH,
    TableRun,
    VacuumResult,
)
from vacuum.snapshot import (
    SHUFFLE_PARTITIONS,
    SNAPSHOT_PARTITIONS,
    TableState,
    latest_commit,
    load_table_state,
    shuffle_partitions,
    snapshot_partitions,
)
from vacuum.verify import directory_object_counts, still_present

log = logging.getLogger("inventory_vacuum")

_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
# Modes whose plan is Delta's USING INVENTORY over a slice we prepared (from the inventory table,
# or from one flat listing of the table made now)
INVENTORY_MODES = ("inventory", "flat")


# A modificationTime below this (1973-03-03 in milliseconds) is a time in seconds: read as
# milliseconds, every file would look decades old and in-flight files would become eligible.
_MILLISECONDS_FLOOR = 100_000_000_000

# The ledger's deletions since this long before the inventory was taken leave the plan. An
# inventory lists objects as its scan of the bucket met them, and AWS calls the list eventually
# consistent: an object deleted shortly before the scan began may still be listed. Leaving out
# more of what the ledger shows deleted can only delete less.
_LEDGER_MARGIN = timedelta(hours=48)


@dataclass(frozen=True)
class VacuumOptions:
    """How to vacuum (the command-line flags of ``inventory-vacuum vacuum``)."""

    inventory_table: str | None = None
    mode: str = "inventory"  # inventory | flat (one flat listing as the inventory) | list | lite
    delete_with: str = "auto"  # auto (batch for S3 tables in inventory/flat mode, else delta) | delta | batch
    dry_run: bool = False
    retain_hours: float | None = None
    allow_unsafe_retention: bool = False
    max_inventory_age_hours: float = 72.0
    min_coverage: float = 0.99
    allow_versioned: bool = False
    parallel: int = 4
    history_table: str | None = None
    ledger_table: str | None = None
    # locations no vacuum may delete under (the inventory, history and ledger tables, every
    # registered table); the run adds its own inventory, history and ledger tables itself
    protected_locations: tuple[str, ...] = ()
    collect_candidates: bool = False  # keep each table's candidate list for --candidates
    # check which candidates still exist before deleting (a request per directory or file),
    # so objects someone else deleted after the inventory was taken are not counted as deleted
    verify_existence: bool = False


@dataclass(frozen=True)
class _RunContext:
    """What every table of one run shares."""

    run_id: str
    inventory_version: int | None
    protected: tuple[StorageLocation, ...]
    # per bucket of the pinned inventory: (taken at, newest modificationTime), computed once
    bucket_figures: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def figures_of_bucket(self, inventory: DataFrame, bucket: str) -> tuple[int | None, int | None]:
        """The bucket-wide figures of the pinned inventory: one scan of the bucket per run, not
        one per table (with a thousand tables in a bucket of a billion objects, that matters)."""
        with self.lock:
            if bucket not in self.bucket_figures:
                self.bucket_figures[bucket] = bucket_figures(inventory, bucket)
            return self.bucket_figures[bucket]


def read_inventory(spark: SparkSession, location: str, version: int | None = None) -> DataFrame:
    """The inventory Delta table (at ``version``, if given); an :class:`InventoryTableError` when it
    is missing or lacks a column or has one of another type."""
    try:
        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        frame = reader.load(location)
        types = {f.name: f.dataType for f in frame.schema}
    except Exception as error:
        raise InventoryTableError(
            f"inventory table {location} cannot be read: {spark_error_summary(error)}"
        ) from None
    missing = [f.name for f in INVENTORY_TABLE_SCHEMA if f.name not in types]
    if missing:
        raise InventoryTableError(f"inventory table {location} lacks column(s) {', '.join(missing)}")
    wrong = [
        f"{f.name} is {types[f.name].simpleString()}, expected {f.dataType.simpleString()}"
        for f in INVENTORY_TABLE_SCHEMA
        if types[f.name] != f.dataType
    ]
    if wrong:
        raise InventoryTableError(f"inventory table {location}: column {'; '.join(wrong)}")
    return frame


def inventory_version(spark: SparkSession, location: str) -> int:
    """The newest version of the inventory table: the run reads this one version throughout, so
    an ingest committing mid-run cannot give the gates and the plan different inventories."""
    from delta.tables import DeltaTable

    read_inventory(spark, location)
    row = DeltaTable.forPath(spark, location).history(1).select("version").first()
    assert row is not None
    return int(row["version"])


def activate(session: SparkSession) -> None:
    """Make ``session`` the active SparkSession of the calling thread, in Python and in the JVM.

    PySpark pins each Python thread to its own JVM thread; Delta reads the JVM thread's active
    session (for example while it loads a checkpoint), and a new thread has none.
    """
    jvm = session._jvm
    assert jvm is not None, "needs a classic (JVM-backed) SparkSession, not Spark Connect"
    for name in ("org.apache.spark.sql.classic.SparkSession", "org.apache.spark.sql.SparkSession"):
        try:
            getattr(jvm, name).setActiveSession(session._jsparkSession)
            break
        except Exception:  # Spark 3.5 has no classic package
            continue
    SparkSession._activeSession = session


def _to_arrow(frame: DataFrame) -> pa.Table:
    """The frame as an Arrow table: ``DataFrame.toArrow`` (Spark 4.0 on); on Spark 3.5 the same
    Arrow batches, through the call ``toPandas`` makes."""
    if hasattr(frame, "toArrow"):
        return frame.toArrow()
    from pyspark.sql.pandas.types import to_arrow_schema

    batches = frame._collect_as_arrow()  # type: ignore[operator]  # pyspark 4.2 types it as a Column
    return pa.Table.from_batches(batches, schema=to_arrow_schema(frame.schema))


def vacuum_tables(
    spark: SparkSession, tables: Sequence[RegisteredTable], options: VacuumOptions, run_id: str
) -> VacuumResult:
    """Vacuum ``tables`` concurrently, each on its own session, and record every outcome.

    Example::

        result = vacuum_tables(spark, registry.select(["events"]),
                               VacuumOptions(inventory_table="s3://inv/tables/inventory", dry_run=True),
                               run_id="manual")
    """
    version = None
    if options.mode == "inventory":
        if not options.inventory_table:
            raise InventoryTableError("--mode inventory needs --inventory-table")
        version = inventory_version(spark, options.inventory_table)
    context = _RunContext(run_id, version, _protected_locations(options))
    if options.ledger_table and not options.dry_run:
        try:
            ensure_ledger(spark, options.ledger_table)
        except Exception as error:
            raise InventoryTableError(
                f"cannot create the deletion ledger {options.ledger_table}: {spark_error_summary(error)}"
            ) from None

    sized_by_user = spark.conf.get(SNAPSHOT_PARTITIONS, None) is not None

    def session_for(location: StorageLocation) -> SparkSession:
        """A new session, active on the calling thread, with Delta's snapshot sized to ``location``."""
        session = spark.newSession()
        if not sized_by_user:
            parallelism = spark.sparkContext.defaultParallelism
            session.conf.set(SNAPSHOT_PARTITIONS, str(snapshot_partitions(location, parallelism)))
        activate(session)
        return session

    if options.inventory_table and version is not None:
        with job_group(spark, "inventory-vacuum run: inventory figures"):
            inventory_location = StorageLocation.parse(options.inventory_table, what="inventory table")
            _read_bucket_figures(
                spark, session_for(inventory_location), tables, options.inventory_table, context
            )

    def run_one(table: RegisteredTable) -> TableRun:
        session = session_for(table.location)
        if options.mode in INVENTORY_MODES and not sized_by_user:
            # a snapshot sized to the table has nothing for adaptive execution to coalesce; one
            # of the user's size (Delta's 50 partitions, say) keeps it
            _adaptive_off_until_sized(session)
        return vacuum_table(session, table, options, context)

    with ThreadPoolExecutor(max_workers=max(1, options.parallel)) as pool:
        runs = list(pool.map(run_one, tables))
    if options.history_table:
        record_vacuum_runs(spark, options.history_table, run_id, runs)
    return VacuumResult(runs)


def _read_bucket_figures(
    spark: SparkSession,
    session: SparkSession,
    tables: Sequence[RegisteredTable],
    inventory_table: str,
    context: _RunContext,
) -> None:
    """Each bucket's figures of the pinned inventory, before any table runs, on ``session``, whose
    ``snapshotPartitions`` is sized to the inventory table (``spark`` is active again after).
    Delta builds the inventory's snapshot state once, on its first query, with that query's
    session setting; every table's scan of the inventory then plans its file skipping over it. Left to the first table, the state
    took that table's setting (or Delta's default of 50 partitions: 50 tasks a table).

    A failure here is logged only: each table reads the same figures and reports the error itself.
    """
    try:
        inventory = read_inventory(session, inventory_table, context.inventory_version)
        for bucket in sorted({table.location.bucket for table in tables}):
            context.figures_of_bucket(inventory, bucket)
    except Exception as error:
        log.warning("figures of the inventory %s: %s", inventory_table, spark_error_summary(error))
    finally:
        activate(spark)


def _protected_locations(options: VacuumOptions) -> tuple[StorageLocation, ...]:
    uris = [
        *options.protected_locations,
        options.inventory_table,
        options.history_table,
        options.ledger_table,
    ]
    return tuple(StorageLocation.parse(u, what="protected location") for u in dict.fromkeys(uris) if u)


def vacuum_table(
    spark: SparkSession, table: RegisteredTable, options: VacuumOptions, context: _RunContext
) -> TableRun:
    """Plan, gate and (unless a dry run) delete for one table. Never raises."""
    started = time.monotonic()
    run = TableRun(
        name=table.name,
        path=table.path,
        status="failed",
        mode=options.mode,
        dry_run=options.dry_run,
        delete_with=_delete_path(options, table.location),
        inventory_version=context.inventory_version,
    )
    spark.sparkContext.setJobGroup(f"vacuum {table.name}", f"inventory-vacuum: {table.name}")
    try:
        _vacuum(spark, table, options, context, run)
        run.status = "ok"
    except VacuumRefused as refusal:
        run.status, run.reason = "refused", str(refusal)
    except InventoryVacuumError as error:
        run.reason = str(error)
    except Exception as error:  # Spark/Delta/JVM errors end this table only
        run.reason = spark_error_summary(error)
        log.exception("vacuum of %s failed", table.name)
    if run.status != "ok" and not run.dry_run and run.deleted_files:
        run.reason = f"{run.reason} ({run.deleted_files} file(s) deleted, {run.remaining_files} remain)"
    run.seconds = round(time.monotonic() - started, 3)
    log.info("vacuum %s: %s %s", table.name, run.status, run.reason or "")
    return run


def _delete_path(options: VacuumOptions, location: StorageLocation) -> str:
    if options.delete_with != "auto":
        return options.delete_with
    return "batch" if location.is_s3 and options.mode in INVENTORY_MODES else "delta"


def _relative_prefixes(location: StorageLocation, protected: Sequence[StorageLocation]) -> list[str]:
    """The protected locations strictly inside the table, as directories relative to its root."""
    return [
        p.key[len(location.key) + 1 :]
        for p in protected
        if location.contains(p) and not location.same_place(p)
    ]


def _vacuum(
    spark: SparkSession,
    table: RegisteredTable,
    options: VacuumOptions,
    context: _RunContext,
    run: TableRun,
) -> None:
    location = table.location
    name_jobs(spark, "snapshot")
    state, live_files = load_table_state(spark, location.uri)
    run.table_version = state.version
    requested = options.retain_hours if options.retain_hours is not None else table.retain_hours
    delta_version = jvm_delta_version(spark)
    run.retention_hours_effective = gates.effective_retention_hours(
        requested,
        state.retention_hours,
        allow_unsafe=options.allow_unsafe_retention,
        retain_honoured=gates.retain_is_honoured(
            version_tuple(delta_version), spark.conf.get(gates.RETENTION_WINDOW_IGNORE, None)
        ),
        delta_version=delta_version,
    )
    # RETAIN only when it differs from the table's own retention: Delta applies that one anyway
    retain_argument = (
        run.retention_hours_effective
        if requested is not None and run.retention_hours_effective != state.retention_hours
        else None
    )
    if retain_argument is not None and retain_argument < state.retention_hours:
        # the gate allowed it; Delta's own check is per session, and this session is this table's
        spark.conf.set(_RETENTION_CHECK, "false")
    protected_prefixes = _relative_prefixes(location, context.protected)
    if run.delete_with == "batch" and not options.dry_run and not location.is_s3:
        raise VacuumRefused("--delete-with batch uses S3 DeleteObjects; this table is not on S3")

    with ExitStack() as cleanup:
        slice_frame = None
        if options.mode in INVENTORY_MODES:
            slice_frame = _inventory_slice(
                spark, location, state, options, context, protected_prefixes, live_files, run
            )
            cleanup.callback(slice_frame.unpersist)
        if location.is_s3:
            run.warnings += gates.check_versioning(
                _bucket_versioning(location.bucket), location.bucket, allow_versioned=options.allow_versioned
            )
        view = (
            cleanup.enter_context(temporary_view(delta_inventory(slice_frame)))
            if slice_frame is not None
            else None
        )
        name_jobs(spark, "Delta dry run")
        plan_sql = vacuum_sql(
            state, mode=options.mode, retention_hours=retain_argument, dry_run=True, inventory_view=view
        )
        log.info("%s: %s", table.name, plan_sql)
        details = candidate_details(dry_run_candidates(spark, plan_sql), slice_frame, state).cache()
        cleanup.callback(details.unpersist)
        name_jobs(spark, "check candidates")
        # Delta's cut-off was taken before this clock reading: a tombstone removed since is one a
        # version inside the retention window reads, and Delta kept it too
        retention_millis = (
            int(retain_argument * 3_600_000) if retain_argument is not None else state.retention_millis
        )
        check = check_plan(details, live_files, state, int(time.time() * 1000) - retention_millis)
        if check.suspicious:
            example = check.suspicious_examples[0] if check.suspicious_examples else "(a path of null)"
            raise VacuumRefused(
                f"Delta's plan names {check.suspicious} file(s) that are live, needed by a version "
                f"inside the retention window (data files or their deletion vectors' files), younger "
                f"than the {run.retention_hours_effective:g}h retention, or outside the table, "
                f"e.g. {example}; nothing deleted"
            )
        if slice_frame is not None:
            planned = _checked_inventory_plan(details, slice_frame, check.not_in_slice, run)
            _record_partitions(check.slice_partitions, run)  # sized in the check's own job
        else:
            planned = _checked_listing_plan(spark, details, state, protected_prefixes, run)
            name_jobs(spark, "summary")
            _summarise(planned, run)
        if options.collect_candidates:
            run.candidates = _to_arrow(
                planned.select(
                    F.lit(table.name).alias("table"), reported_path().alias("path"), "length", "partition"
                )
            )
        run.deleted_files = run.deleted_bytes = run.remaining_files = 0
        if options.dry_run or run.planned_files == 0:
            return
        _unsize_shuffles(spark)
        existing = None
        if options.verify_existence:
            existing = directory_object_counts(slice_frame) if slice_frame is not None else None
        name_jobs(spark, "delete")
        if run.delete_with == "delta":
            if options.verify_existence:
                planned = _set_aside_gone(spark, planned, existing, table, context, options.ledger_table, run)
                cleanup.callback(planned.unpersist)
            real_sql = vacuum_sql(
                state, mode=options.mode, retention_hours=retain_argument, dry_run=False, inventory_view=view
            )
            try:
                spark.sql(real_sql)
            except Exception:
                # Delta failed part-way: count what it did delete, then report its error
                _measure_delta_deletes(
                    spark,
                    planned,
                    slice_frame,
                    table,
                    context,
                    options.ledger_table,
                    run,
                    fail_on_remaining=False,
                )
                raise
            _measure_delta_deletes(spark, planned, slice_frame, table, context, options.ledger_table, run)
        else:
            _delete_batch(
                spark,
                planned,
                plan_sql,
                state,
                table,
                context,
                options.ledger_table,
                run,
                options.verify_existence,
                existing,
                release_plan=cleanup.close,
            )


def _inventory_slice(
    spark: SparkSession,
    location: StorageLocation,
    state: TableState,
    options: VacuumOptions,
    context: _RunContext,
    protected_prefixes: Sequence[str],
    live_files: DataFrame,
    run: TableRun,
) -> DataFrame:
    """Gate the inventory for one table and return its slice (persisted): the objects Delta sees."""
    if state.has_characters_beyond_the_basic_plane:
        raise VacuumRefused(
            f"the table location {state.qualified_location} has a character outside Unicode's Basic "
            "Multilingual Plane, which Delta's inventory mode mis-cuts into wrong paths; "
            "vacuum this table with --mode list"
        )
    if options.mode == "flat":
        inventory = listing_inventory(spark, location)
    else:
        assert options.inventory_table is not None
        inventory = read_inventory(spark, options.inventory_table, context.inventory_version)
    name_jobs(spark, "inventory figures")
    # the inventory mode's table is one pinned version for the whole run; a flat listing is the table's own
    bucket_wide = (
        context.figures_of_bucket(inventory, location.bucket) if options.mode == "inventory" else None
    )
    # the table's rows of the pinned inventory, read once: the figures and the classification
    # both read them (each read of the Delta table would plan its file skipping anew)
    under = rows_under(inventory, location).persist()
    try:
        return _gated_slice(
            spark, location, state, options, protected_prefixes, live_files, run, under, bucket_wide
        )
    finally:
        under.unpersist()


def _gated_slice(
    spark: SparkSession,
    location: StorageLocation,
    state: TableState,
    options: VacuumOptions,
    protected_prefixes: Sequence[str],
    live_files: DataFrame,
    run: TableRun,
    under: DataFrame,
    bucket_wide: tuple[int | None, int | None] | None,
) -> DataFrame:
    figures = inventory_figures(under, location, bucket_wide)
    taken_at = figures.inventory_taken_at
    if taken_at is not None:
        run.inventory_taken_at = taken_at.isoformat()
    gates.check_freshness(
        taken_at, datetime.now(timezone.utc), options.max_inventory_age_hours, location.bucket
    )
    assert taken_at is not None
    gates.check_inventory_present(figures.objects_under_table, location.bucket, location.uri)
    _size_shuffles(spark, figures.objects_under_table)
    if (
        figures.newest_modification_millis is not None
        and figures.newest_modification_millis < _MILLISECONDS_FLOOR
    ):
        raise VacuumRefused(
            f"the inventory's modificationTime for bucket {location.bucket} looks like seconds, not "
            f"milliseconds (newest {figures.newest_modification_millis}): every file would look ancient"
        )
    name_jobs(spark, "ledger")
    deleted = (
        deleted_since(spark, options.ledger_table, location.bucket, taken_at - _LEDGER_MARGIN)
        if options.ledger_table
        else None
    )
    # a protected path with a log of its own (the inventory table, say) is reported as protected
    nested_roots = _not_protected(figures.nested_roots, protected_prefixes)
    name_jobs(spark, "classify objects")
    # cached in only the columns read again: caching costs in proportion to the bytes
    classified = (
        classify_objects(
            table_objects(under, location),
            state,
            nested_roots=nested_roots,
            protected_prefixes=protected_prefixes,
            deleted_earlier=deleted,
            check_sendable=run.delete_with == "batch",
            delete_markers=run.delete_with == "batch",
        )
        .select(*CLASSIFIED_COLUMNS)
        .persist()
    )
    try:
        kept = (
            classified.where(F.col("kept_reason").isNotNull())
            .groupBy("kept_reason", "nested_root")
            .agg(F.count(F.lit(1)).alias("objects"))
            .collect()
        )
        for row in kept:
            run.keep(row["kept_reason"], row["objects"])
        _report_nested(
            state,
            {r["nested_root"]: int(r["objects"]) for r in kept if r["kept_reason"] == KEPT_NESTED_TABLE},
            nested_roots,
            run,
        )
        _report_protected(run)
        slice_frame = inventory_slice(classified, state).persist()
        name_jobs(spark, "coverage")
        eligible, covered = coverage_counts(live_files, slice_frame, int(taken_at.timestamp() * 1000), state)
    finally:
        classified.unpersist()
    run.coverage = gates.check_coverage(eligible, covered, options.min_coverage)
    return slice_frame


# where _size_shuffles keeps the table session's own settings, for _unsize_shuffles
_CONFIGURED_SHUFFLES = "inventory-vacuum.configuredShufflePartitions"
_CONFIGURED_ADAPTIVE = "inventory-vacuum.configuredAdaptive"
_ADAPTIVE = "spark.sql.adaptive.enabled"


def _adaptive_off_until_sized(spark: SparkSession) -> None:
    """This session is this table's: its first queries (Delta's snapshot, the inventory figures)
    run without adaptive execution, which would make each of their query stages a Spark job of
    its own; :func:`_size_shuffles` turns it back on for a plan of more partitions than the
    cluster's parallelism. The session's own setting is kept for :func:`_unsize_shuffles` (once:
    a second call keeps it)."""
    if spark.conf.get(_CONFIGURED_ADAPTIVE, None) is None:
        # without a default: Spark's own when unset
        spark.conf.set(_CONFIGURED_ADAPTIVE, str(spark.conf.get(_ADAPTIVE)))
    spark.conf.set(_ADAPTIVE, "false")


def _size_shuffles(spark: SparkSession, objects: int) -> None:
    """This session is this table's: the plan's shuffles (ours and Delta's dry run) sized to its
    objects, until :func:`_unsize_shuffles`. A setting that is not a number (a platform's
    ``auto``) is left as it is.

    A plan whose shuffles fit in one wave of tasks (no more partitions than the cluster's
    parallelism) also runs without adaptive execution: AQE runs every query stage as a Spark job
    of its own, so a small table's plan took 42 jobs with it and 20 without (the same plan, and the
    same answers), and one wave has nothing for AQE to coalesce. Its skew splits and runtime
    join choices are lost with it; the plan's joins are on unique paths (no skewed key), and the
    rule was measured on 2 cores only. A bigger plan gets the session's own setting back (see
    :func:`_adaptive_off_until_sized`)."""
    try:
        configured = int(spark.conf.get(SHUFFLE_PARTITIONS, "200"))  # type: ignore[arg-type]
    except ValueError:
        partitions = None
    else:
        spark.conf.set(_CONFIGURED_SHUFFLES, str(configured))
        partitions = shuffle_partitions(objects, configured)
        spark.conf.set(SHUFFLE_PARTITIONS, str(partitions))
    if partitions is not None and partitions <= spark.sparkContext.defaultParallelism:
        _adaptive_off_until_sized(spark)
    else:
        configured_adaptive = spark.conf.get(_CONFIGURED_ADAPTIVE, None)
        if configured_adaptive is not None:
            spark.conf.set(_ADAPTIVE, configured_adaptive)


def _unsize_shuffles(spark: SparkSession) -> None:
    """Before deleting: the session's own shuffle and adaptive settings again. Delta's parallel
    delete takes its task count from it (unless
    ``spark.databricks.delta.vacuum.parallelDelete.parallelism`` is set), and so do the existence
    checks and the ledger's joins; a delete's work is the garbage's requests, which a table's
    object count does not bound (one task for a table's every delete)."""
    for setting, kept in ((SHUFFLE_PARTITIONS, _CONFIGURED_SHUFFLES), (_ADAPTIVE, _CONFIGURED_ADAPTIVE)):
        configured = spark.conf.get(kept, None)
        if configured is not None:
            spark.conf.set(setting, configured)


def _not_protected(roots: Sequence[str], protected_prefixes: Sequence[str]) -> list[str]:
    """Nested-table roots that are not a protected path (those are reported as protected)."""
    return [r for r in roots if not any(r == p or r.startswith(p + "/") for p in protected_prefixes)]


def _report_nested(
    state: TableState, kept_by_root: dict[str, int], roots: Sequence[str], run: TableRun
) -> None:
    for root in roots:
        objects = kept_by_root.get(root, 0)
        run.nested_tables.append({"path": state.base + root, "objects_kept": objects})
        run.warnings.append(
            f"nested Delta table {state.base}{root} is not this table's: kept its {objects} object(s)"
        )


def _report_protected(run: TableRun) -> None:
    if run.kept.get(KEPT_PROTECTED_PATH):
        run.warnings.append(
            f"kept {run.kept[KEPT_PROTECTED_PATH]} object(s) under paths this tool uses "
            "(inventory, history or ledger table, or another registered table)"
        )


def _checked_inventory_plan(
    details: DataFrame, slice_frame: DataFrame, not_in_slice: int, run: TableRun
) -> DataFrame:
    """Every candidate must be one of the slice's files (``not_in_slice``: how many are not, from
    :func:`check_plan`). Directories Delta derives from the paths are dropped (never candidates on
    S3); any other stranger refuses the table."""
    if not not_in_slice:
        return details
    directories, others = not_slice_files(details, slice_frame)
    if others:
        raise VacuumRefused(
            f"Delta's plan names path(s) that are not files of the inventory slice, e.g. {others[0]}: "
            "Delta and the inventory disagree on this table's paths; nothing deleted"
        )
    run.keep(KEPT_DIRECTORY, directories)
    return details.where(F.col("in_slice").isNotNull())


def _checked_listing_plan(
    spark: SparkSession,
    details: DataFrame,
    state: TableState,
    protected_prefixes: Sequence[str],
    run: TableRun,
) -> DataFrame:
    """List and lite modes: leave out candidates under nested tables and protected paths.

    Delta's listing is not ours to filter, so nested tables are found from the candidates
    themselves: every directory that holds a candidate is checked for a ``_delta_log/``, a
    request per directory with candidates, never a listing of the table.
    """
    components = F.split("relative_path", "/")
    directories = [
        r["directory"]
        for r in details.where(F.col("relative_path").contains("/"))
        .select(
            F.explode(
                F.transform(
                    F.sequence(F.lit(1), F.size(components) - 1),
                    lambda i: F.array_join(F.slice(components, 1, i), "/"),
                )
            ).alias("directory")
        )
        .distinct()
        .collect()
    ]
    roots = _not_protected(tables_among(state, directories), protected_prefixes)
    planned = details
    if roots:
        counts = {root: details.where(under_any(F.col("relative_path"), [root])).count() for root in roots}
        for root in roots:
            run.keep(KEPT_NESTED_TABLE, counts[root])
        _report_nested(state, counts, roots, run)
        planned = planned.where(~under_any(F.col("relative_path"), roots))
    if protected_prefixes:
        run.keep(
            KEPT_PROTECTED_PATH, details.where(under_any(F.col("relative_path"), protected_prefixes)).count()
        )
        _report_protected(run)
        planned = planned.where(~under_any(F.col("relative_path"), protected_prefixes))
    if (roots or protected_prefixes) and not run.dry_run and run.delete_with == "delta":
        raise VacuumRefused(
            f"Delta's {run.mode} VACUUM would delete files of a nested table or a protected path "
            f"({run.nested_tables[0]['path'] if run.nested_tables else 'see warnings'}), and its own "
            "delete cannot be told to skip them: use --mode flat (a listing made now, deleted by this tool), "
            "--mode inventory, or register or move the nested table"
        )
    return planned


def tables_among(state: TableState, directories: Sequence[str]) -> list[str]:
    """The relative ``directories`` of the table that hold a ``_delta_log/`` (outermost only)."""
    from concurrent.futures import ThreadPoolExecutor as Pool

    location = StorageLocation.parse(state.qualified_location, what="table location")

    def has_log(directory: str) -> bool:
        if not location.is_s3:
            import os

            return os.path.isdir(f"/{location.key}/{directory}/_delta_log")
        response = s3_client().list_objects_v2(
            Bucket=location.bucket, Prefix=f"{location.key}/{directory}/_delta_log/", MaxKeys=1
        )
        return bool(response.get("KeyCount"))

    ordered = sorted(directories)
    with Pool(max_workers=16) as pool:
        found = [d for d, present in zip(ordered, pool.map(has_log, ordered), strict=True) if present]
    outermost: list[str] = []
    for directory in sorted(found, key=len):
        if not any(directory.startswith(outer + "/") for outer in outermost):
            outermost.append(directory)
    return outermost


def _summarise(planned: DataFrame, run: TableRun) -> None:
    rows = sorted(  # ordered here, not by a Spark sort: a sort is two more jobs per table
        planned.groupBy("partition")
        .agg(F.count(F.lit(1)).alias("files"), F.sum("length").alias("bytes"))
        .collect(),
        key=lambda r: r["partition"],
    )
    _record_partitions(
        [{"partition": r["partition"], "files": int(r["files"]), "bytes": r["bytes"]} for r in rows], run
    )


def _record_partitions(partitions: Sequence[dict[str, Any]], run: TableRun) -> None:
    """The plan's files and bytes per top-level partition (ordered), and its totals."""
    run.partitions = [dict(p) for p in partitions]
    run.planned_files = sum(p["files"] for p in run.partitions)
    known = [p["bytes"] for p in run.partitions if p["bytes"] is not None]
    run.planned_bytes = sum(known) if len(known) == len(run.partitions) else None


def _delete_batch(
    spark: SparkSession,
    planned: DataFrame,
    plan_sql: str,
    state: TableState,
    table: RegisteredTable,
    context: _RunContext,
    ledger: str | None,
    run: TableRun,
    verify_existence: bool = False,
    directory_objects: DataFrame | None = None,
    release_plan: Callable[[], None] = lambda: None,
) -> None:
    """Re-plan against a fresh snapshot, keep only files both plans agree on, delete those, and
    record every deleted object in the ledger, also when some deletes failed.

    The fresh plan is made only when the log's newest commit is not the one the plan's snapshot
    ended with (:func:`latest_commit`): on the same snapshot and the same inventory, a later plan
    names every file the first one did (time only moves the retention's cutoffs forward), so
    keeping "both plans" would keep all.

    With ``verify_existence``, the candidates that no longer exist are set aside first
    (:func:`_set_aside_gone`): S3 answers "Deleted" for a missing key.

    ``release_plan`` drops the plan's cached frames; it is called once the deletes' outcomes are
    persisted, before the ledger is written (see :func:`_send_deletes`).
    """
    newest = latest_commit(spark, state.uri)
    if state.newest_commit is not None and newest == state.newest_commit:
        confirmed = planned
    else:
        log.info(
            "%s: the log changed since planning (%s; now %s): planning again",
            table.name,
            state.newest_commit,
            newest,
        )
        fresh = dry_run_candidates(spark, plan_sql).select("path")
        confirmed = planned.join(fresh, "path", "left_semi")
    with ExitStack() as cleanup:
        if verify_existence:
            confirmed = _set_aside_gone(spark, confirmed, directory_objects, table, context, ledger, run)
            cleanup.callback(confirmed.unpersist)

        def release() -> None:
            cleanup.close()
            release_plan()

        _send_deletes(spark, confirmed, table, context, ledger, run, release)


def _set_aside_gone(
    spark: SparkSession,
    candidates: DataFrame,
    directory_objects: DataFrame | None,
    table: RegisteredTable,
    context: _RunContext,
    ledger: str | None,
    run: TableRun,
) -> DataFrame:
    """The candidates that still exist (persisted: the caller unpersists). The others, deleted by
    someone else since the inventory was taken, are counted as ``already_gone_files`` and written
    to the ledger as ``already_gone`` (length unknown), so the next run on the same inventory
    leaves them out instead of claiming them."""
    candidates = candidates.persist()
    try:
        present = still_present(candidates, directory_objects).persist()
        gone = candidates.join(present.select("bucket", "key"), ["bucket", "key"], "left_anti").persist()
        try:
            run.already_gone_files = gone.count()
            if ledger and run.already_gone_files:
                warning = record_deletions(
                    spark, ledger, gone, run_id=context.run_id, table=table.name, deleted_with=ALREADY_GONE
                )
                if warning:
                    run.warnings.append(warning)
        finally:
            gone.unpersist()
        present.count()
        return present
    finally:
        candidates.unpersist()


def _send_deletes(
    spark: SparkSession,
    confirmed: DataFrame,
    table: RegisteredTable,
    context: _RunContext,
    ledger: str | None,
    run: TableRun,
    release_plan: Callable[[], None],
) -> None:
    """DeleteObjects for ``confirmed``; count per key what S3 deleted, ledger it, and fail the
    table with the first error when some keys could not be deleted.

    Everything after the deletes reads their persisted outcomes (each row carries its candidate's
    path and length), so the plan's cached frames are released first: they read the ledger, and
    Spark re-plans every cached frame that reads a table it writes (Delta file listings: about
    2 s at 100k files, measured from Spark's event log).
    """
    missing = {"path", "length"} - set(confirmed.columns)
    if missing:  # the ledger and the bytes come from the outcomes: never fill them with nulls
        raise InventoryVacuumError(f"the plan has no {', '.join(sorted(missing))} column; nothing deleted")
    outcomes = delete_in_batches(confirmed)
    # the requests are sent: until the outcomes are counted, what was deleted is not known (not 0)
    run.deleted_files = run.deleted_bytes = run.remaining_files = None
    try:
        try:
            release_plan()
        except Exception as error:  # the objects are gone: counting and the ledger come first
            log.warning(
                "%s: could not release the plan's cached frames: %s", table.name, spark_error_summary(error)
            )
        keys = F.col("key").isNotNull()
        deleted = outcomes.where(keys & F.col("deleted")).select(
            reported_path().alias("path"), "bucket", "key", "length"
        )
        # one job over the persisted outcomes: every figure, and the first error
        row = outcomes.agg(
            F.count(F.when(keys & F.col("deleted"), 1)).alias("deleted"),
            F.count(F.when(keys & ~F.col("deleted"), 1)).alias("failed"),
            F.count(F.when(keys & F.col("error").contains("XML body"), 1)).alias("not_sendable"),
            F.first(F.when(keys & ~F.col("deleted"), F.col("error")), ignorenulls=True).alias("first_error"),
            F.coalesce(F.sum("requests"), F.lit(0)).alias("requests"),
            F.coalesce(F.sum(F.when(keys & F.col("deleted"), F.col("length"))), F.lit(0)).alias("bytes"),
            # a deleted object of unknown length (a listing plan): the bytes are unknown, not 0
            F.count(F.when(keys & F.col("deleted") & F.col("length").isNull(), 1)).alias("unsized"),
        ).first()
        assert row is not None
        run.delete_requests = int(row["requests"])
        run.deleted_files = int(row["deleted"])
        run.remaining_files = int(row["failed"])
        run.deleted_bytes = row["bytes"] if row["unsized"] == 0 else None
        run.keep(KEPT_NOT_SENDABLE, int(row["not_sendable"]))
        dropped = run.planned_files - run.deleted_files - run.remaining_files - (run.already_gone_files or 0)
        if dropped:
            run.warnings.append(
                f"{dropped} candidate(s) dropped: not in the plan made again after a commit since "
                "planning (live again, or kept by a changed retention)"
            )
        if ledger and run.deleted_files:
            warning = record_deletions(
                spark, ledger, deleted, run_id=context.run_id, table=table.name, deleted_with="batch"
            )
            if warning:
                run.warnings.append(warning)
    finally:
        outcomes.unpersist()
    if run.remaining_files:
        raise InventoryVacuumError(
            f"{run.remaining_files} object(s) could not be deleted; first error: {row['first_error']}"
        )


def _measure_delta_deletes(
    spark: SparkSession,
    planned: DataFrame,
    slice_frame: DataFrame | None,
    table: RegisteredTable,
    context: _RunContext,
    ledger: str | None,
    run: TableRun,
    *,
    fail_on_remaining: bool = True,
) -> None:
    """After Delta's own VACUUM: count the planned files that are really gone, and ledger them.

    Delta swallows each file's delete error and still succeeds, so its plan is not a count.
    """
    counts = directory_object_counts(slice_frame) if slice_frame is not None else None
    try:
        remaining = still_present(planned, counts).select("bucket", "key").persist()
    except Exception as error:
        run.deleted_files = run.deleted_bytes = run.remaining_files = None
        run.warnings.append(
            f"Delta's VACUUM ran, but which of the {run.planned_files} planned files are gone could not be "
            f"measured: {spark_error_summary(error)}"
        )
        return
    try:
        deleted = planned.join(remaining, ["bucket", "key"], "left_anti").cache()
        row = deleted.agg(F.count(F.lit(1)).alias("files"), F.sum("length").alias("bytes")).first()
        assert row is not None
        run.deleted_files = int(row["files"])
        run.deleted_bytes = row["bytes"] if slice_frame is not None else None
        run.remaining_files = run.planned_files - (run.already_gone_files or 0) - run.deleted_files
        if ledger and run.deleted_files:
            warning = record_deletions(
                spark, ledger, deleted, run_id=context.run_id, table=table.name, deleted_with="delta"
            )
            if warning:
                run.warnings.append(warning)
        deleted.unpersist()
    finally:
        remaining.unpersist()
    if run.remaining_files and fail_on_remaining:
        raise InventoryVacuumError(
            f"Delta's VACUUM left {run.remaining_files} of the {run.planned_files} planned file(s) in place "
            "(it ignores each file's delete error: access denied, object lock, bucket policy?)"
        )


def _bucket_versioning(bucket: str) -> str | None:
    try:
        return s3_client().get_bucket_versioning(Bucket=bucket).get("Status")
    except Exception as error:
        raise VacuumRefused(
            f"cannot read the versioning state of bucket {bucket}: {describe(error)}"
        ) from None


def write_candidates(runs: Sequence[TableRun], path: str) -> int:
    """Write every table's candidate list to one local ``.parquet`` or ``.csv`` file."""
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    tables = [r.candidates for r in runs if r.candidates is not None]
    schema = pa.schema(
        [("table", pa.string()), ("path", pa.string()), ("length", pa.int64()), ("partition", pa.string())]
    )
    combined = pa.concat_tables([t.cast(schema) for t in tables]) if tables else schema.empty_table()
    if path.endswith(".csv"):
        pa_csv.write_csv(combined, path)
    else:
        pq.write_table(combined, path)
    return combined.num_rows
