"""Vacuum a set of registered tables: plan, gate, delete, record. Tables run concurrently.

For each table, in order: read the snapshot; fix the retention; with an inventory, check its
age, that it has objects under the table and that it lists the table's live files; leave out
nested tables, protected paths, keys Delta cannot parse and what the ledger shows deleted; check
bucket versioning; ask Delta for the candidates (DRY RUN) and check every one; then, unless this
is a dry run, delete them (batched DeleteObjects after re-checking them against a fresh snapshot,
or Delta's own VACUUM followed by a check of what is really gone), and record every deleted object
in the ledger. A refusal or failure of one table never stops the others.

The steps live in their own modules: the inventory slice and its gates
(:mod:`vacuum.inventory_slice`), the plan and its check (:mod:`vacuum.plan`), the list and lite
modes' check (:mod:`vacuum.listing_mode`), the deletes (:mod:`vacuum.deletion`) and each table's
session (:mod:`vacuum.tuning`). This module runs them in order.
"""

from __future__ import annotations

import gc
import itertools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from functools import partial
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from core.errors import (
    InventoryTableError,
    InventoryVacuumError,
    RunInterrupted,
    VacuumRefused,
    spark_error_summary,
)
from core.paths import StorageLocation
from core.registry import RegisteredTable
from core.s3 import bucket_versioning, describe
from core.session import codegen_set_by_user, job_group, jvm_delta_version, name_jobs, version_tuple
from core.tables import read_inventory, snapshot_sized_by_user
from vacuum import gates
from vacuum.candidates import CANDIDATES_SCHEMA, to_arrow
from vacuum.context import DeleteWith, Mode, RunContext, Status, TableContext, VacuumOptions
from vacuum.deletion import delete_batch, deleting, measure_delta_deletes, set_aside_gone
from vacuum.history import record_vacuum_runs
from vacuum.interrupt import failed_before_begun, interrupted_line, interrupts_stop, not_begun
from vacuum.inventory_slice import gated_slice, inventory_version
from vacuum.ledger import ensure_ledger
from vacuum.listing_mode import checked_listing_plan
from vacuum.plan import (
    PlanCheck,
    candidate_details,
    check_plan,
    delta_inventory,
    dry_run_candidates,
    reported_path,
    temporary_view,
    vacuum_sql,
)
from vacuum.results import KEPT_DIRECTORY, TableRun, VacuumResult
from vacuum.snapshot import load_table_state
from vacuum.tuning import (
    activate,
    adaptive_off_until_sized,
    aggregate_in_one_job,
    in_one_partition,
    interpret_small_plan,
    read_from_cache,
    release,
    session_for,
    unsize_shuffles,
)
from vacuum.verify import directory_object_counts

log = logging.getLogger("inventory_vacuum")

_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"

# py4j keeps each method called on a JVM object in that object, and the method names its object:
# a reference cycle, so the JVM side of a table's DataFrames (their plans, several MB a table) is
# let go only when Python's cyclic collector runs, which it does rarely when the Python heap is
# large. In the fleet benchmark's process (its S3 server holds a large Python heap), a full
# collection after 24 small tables let go of 223 of 249 JVM Datasets and a third of the heap, and
# without one a run over 250 tables filled a 4 GB driver. A collection takes about 50 ms in the
# command's own process: one after every 8th table bounds what waits for it, whatever the heap.
COLLECT_EVERY_TABLES = 8

# what a table's report says when every object of its slice is a needed file (see _vacuum)
PLAN_SKIPPED = (
    "Delta's dry run not run: every object of the inventory slice is a file that a version inside "
    "the retention window needs, logged by a plain path, so Delta can name nothing to delete"
)

__all__ = ["VacuumOptions", "vacuum_table", "vacuum_tables"]


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
    if options.mode == Mode.INVENTORY:
        if not options.inventory_table:
            raise InventoryTableError("--mode inventory needs --inventory-table")
        version = inventory_version(spark, options.inventory_table)
    context = RunContext(run_id, version, options.protected())
    if options.ledger_table and not options.dry_run:
        try:
            ensure_ledger(spark, options.ledger_table)
        except Exception as error:
            raise InventoryTableError(
                f"cannot create the deletion ledger {options.ledger_table}: {spark_error_summary(error)}"
            ) from None

    sized_by_user = snapshot_sized_by_user(spark)
    codegen_by_user = codegen_set_by_user(spark)
    figures = None
    with interrupts_stop(spark, context) as interrupts:  # Ctrl-C stops the run, keeping its outcomes
        try:
            try:
                if options.inventory_table and version is not None:
                    figures = _start_run_figures(
                        spark, tables, options.inventory_table, context, sized_by_user
                    )
                    if len(tables) > 1:
                        figures.join()  # a run of many tables: its figures first (see _start_run_figures)
                runs = _run_tables(spark, tables, options, context, sized_by_user, codegen_by_user)
            except BaseException:
                context.stopped.set()  # the run ends early: the figures read no further bucket
                raise
            finally:
                if figures is not None:
                    figures.join()
        finally:
            context.release_all_rows()  # the small tables' rows read together, whatever stopped the run
        interrupts.tables_ended()
        recorded = None
        if options.history_table and record_vacuum_runs(spark, options.history_table, run_id, runs):
            recorded = options.history_table
    result = VacuumResult(runs, run_id)
    if context.interrupted.is_set():
        raise RunInterrupted(interrupted_line(runs, recorded), result)
    return result


def _start_run_figures(
    spark: SparkSession,
    tables: Sequence[RegisteredTable],
    inventory_table: str,
    context: RunContext,
    sized_by_user: bool,
) -> threading.Thread:
    """Read the run's figures (:func:`_read_run_figures`) on a thread of their own, which a
    one-table run's table does not wait for to read its snapshot (it does not need them);
    :attr:`RunContext.figures_read` is clear until they are read (or failed), and every read of
    them by a table waits for it, so a table gates on the same figures and rows as when it started
    after them. A one-table run's driver works on one thread at a time, and left the other core of
    a 2-core machine mostly idle while it read the figures, then the snapshot. Measured on the
    table and server of ``benchmarks/one_table.py`` (3,000 files), ``vacuum --dry-run`` in six
    fresh processes each, in turn: a median of 16.6 s against 17.3 s with the snapshot after the
    figures. A run of many tables joins the thread before its tables start: 24 tables of 1,000
    files at ``--parallel 4`` (``benchmarks/many_tables.py --no-peers``, runs in turn) took 2.41
    and 2.23 s a table with their first tables started beside the figures, against 2.17 and
    2.20 s with the figures first (docs/performance.md)."""
    inventory_location = StorageLocation.parse(inventory_table, what="inventory table")

    def read() -> None:
        try:
            with job_group(spark, "inventory-vacuum run: inventory figures"):
                _read_run_figures(
                    spark,
                    session_for(spark, inventory_location, sized_by_user=sized_by_user),
                    tables,
                    inventory_table,
                    context,
                    one_job=not sized_by_user,
                )
        except Exception as error:  # only logged, as _read_run_figures' own: tables count their own
            log.warning("figures of the inventory %s: %s", inventory_table, spark_error_summary(error))
        finally:
            context.figures_read.set()

    context.figures_read.clear()
    thread = threading.Thread(target=read, name="inventory-vacuum run figures", daemon=True)
    try:
        thread.start()
    except BaseException:
        context.figures_read.set()
        raise
    return thread


def _run_tables(
    spark: SparkSession,
    tables: Sequence[RegisteredTable],
    options: VacuumOptions,
    context: RunContext,
    sized_by_user: bool,
    codegen_by_user: bool,
) -> list[TableRun]:
    """Each table's vacuum, ``options.parallel`` at a time, in the order of ``tables``."""
    finished = itertools.count(1)

    def run_one(table: RegisteredTable) -> TableRun:
        if context.stopped.is_set():  # an interrupt stopped the run before this table began
            return not_begun(table, options, context)
        try:
            session, later = set_up(table)
        except Exception as error:  # this table fails; the run and its record go on
            log.exception("the session of %s could not be set up", table.name)
            return failed_before_begun(table, options, context, error)
        try:
            return vacuum_table(session, table, options, context, after_snapshot=later)
        finally:
            if next(finished) % COLLECT_EVERY_TABLES == 0:
                gc.collect()

    def set_up(table: RegisteredTable) -> tuple[SparkSession, Callable[[], None] | None]:
        """The table's session, and what runs once its snapshot is read (or None)."""
        session = session_for(spark, table.location, sized_by_user=sized_by_user)
        if options.mode.uses_inventory and not sized_by_user:
            # a snapshot sized to the table has nothing for adaptive execution to coalesce; one
            # of the user's size (Delta's 50 partitions, say) keeps it
            adaptive_off_until_sized(session)

        def interpret_if_small() -> None:
            # a table's size is known before its gates only from the run's figures (inventory mode)
            figures = context.figures_of_table(table.location) if options.mode == Mode.INVENTORY else None
            if (
                figures is not None
                and not codegen_by_user
                and interpret_small_plan(session, figures.objects_under_table)
            ):
                log.info("%s: planned on Spark's interpreted evaluation (a small table)", table.name)

        # with the run's figures read, its snapshot too is rebuilt interpreted; the table of a
        # one-table run, which starts while they are read, loads its snapshot meanwhile and
        # decides after
        if context.figures_read.is_set():
            interpret_if_small()
            return session, None
        return session, interpret_if_small

    with ThreadPoolExecutor(max_workers=max(1, options.parallel)) as pool:
        try:
            return list(pool.map(run_one, tables))
        except BaseException:
            context.stopped.set()  # the pool waits for its running tables; none not begun begins
            raise


def _read_run_figures(
    spark: SparkSession,
    session: SparkSession,
    tables: Sequence[RegisteredTable],
    inventory_table: str,
    context: RunContext,
    *,
    one_job: bool = False,
) -> None:
    """The figures of the run's tables in the pinned inventory, before any table's gates, on
    ``session``, whose ``snapshotPartitions`` is sized to the inventory table (``spark`` is active
    again after, on the calling thread). Delta builds the inventory's snapshot state once, on its first query, with that
    query's session setting; every table's scan of the inventory then plans its file skipping over
    it. Left to the first table, the state took that table's setting (or Delta's default of 50
    partitions: 50 tasks a table). With ``one_job``, ``session`` (the run's own) first gets
    :func:`~vacuum.tuning.aggregate_in_one_job`'s settings.

    A bucket's tables get their figures (objects under the table, nested tables, the times of
    their rows) from one query for every :data:`~vacuum.context.TABLES_PER_FIGURES_JOB` of them
    (:meth:`RunContext.figures_of_tables`), which reads only the rows under them, and the small
    ones their rows, read together into Spark's cache (:meth:`RunContext.share_rows`). A failure
    here is logged only: tables without figures count their own, and tables without cached rows
    read their own, so each table reads the same figures and rows and reports any error itself.
    """
    by_bucket: dict[str, list[StorageLocation]] = {}
    for table in tables:
        by_bucket.setdefault(table.location.bucket, []).append(table.location)
    try:
        if one_job:
            aggregate_in_one_job(session)
        inventory = read_inventory(session, inventory_table, context.inventory_version)
        for bucket, locations in sorted(by_bucket.items()):
            if context.stopped.is_set():  # the run ended: tables without figures count their own
                break
            where = f"bucket {bucket} in the inventory {inventory_table}"
            if _logged_on_failure(
                f"figures of the tables of {where}",
                partial(context.figures_of_tables, inventory, bucket, locations),
            ):
                _logged_on_failure(
                    f"rows of the small tables of {where}, read together",
                    partial(context.share_rows, inventory, bucket, locations),
                )
    except Exception as error:
        log.warning("figures of the inventory %s: %s", inventory_table, spark_error_summary(error))
    finally:
        activate(spark)


def _logged_on_failure(what: str, *steps: Callable[[], object]) -> bool:
    """Run ``steps`` in order; a failure is logged (``what: reason``), not raised, and ends them.
    Whether all ran."""
    try:
        for step in steps:
            step()
    except Exception as error:
        log.warning("%s: %s", what, spark_error_summary(error))
        return False
    return True


def vacuum_table(
    spark: SparkSession,
    table: RegisteredTable,
    options: VacuumOptions,
    context: RunContext,
    after_snapshot: Callable[[], None] | None = None,
) -> TableRun:
    """Plan, gate and (unless a dry run) delete for one table. Never raises. ``after_snapshot``
    runs once the table's snapshot is read, before anything else."""
    started = time.monotonic()
    run = TableRun(
        name=table.name,
        path=table.path,
        status=Status.FAILED,
        mode=options.mode,
        dry_run=options.dry_run,
        delete_with=options.delete_path(table.location),
        inventory_version=context.inventory_version,
    )
    spark.sparkContext.setJobGroup(f"vacuum {table.name}", f"inventory-vacuum: {table.name}")
    ctx = TableContext(spark, table, options, context, run, after_snapshot=after_snapshot)
    try:
        _vacuum(ctx)
        run.status = Status.OK
    except VacuumRefused as refusal:
        run.status, run.reason = Status.REFUSED, str(refusal)
    except InventoryVacuumError as error:
        run.reason = str(error)
    except Exception as error:  # Spark/Delta/JVM errors end this table only
        run.reason = spark_error_summary(error)
        log.exception("vacuum of %s failed", table.name)
    finally:
        if not context.figures_read.is_set():  # the releases wait for the run's figures
            waiting_since = time.monotonic()
            context.figures_read.wait()
            ctx.waited_seconds += time.monotonic() - waiting_since
        # a table that stopped before reading its rows no longer keeps its group's cache, nor its
        # held snapshot files; neither release may end the run, whose other tables go on
        _logged_on_failure(
            f"release of the cached rows of {table.name}",
            partial(context.release_rows, table.location),
        )
        _logged_on_failure(
            f"release of the held snapshot files of {table.name}", partial(_release_live_files, ctx)
        )
    if run.status != Status.OK and not run.dry_run and run.deleted_files:
        remain = "an unknown number" if run.remaining_files is None else run.remaining_files
        run.reason = f"{run.reason} ({run.deleted_files} file(s) deleted, {remain} remain)"
    elif run.status != Status.OK and run.deleted_files is None and ctx.delete_started_at is not None:
        # the deletes' job failed or was cancelled as a whole (an interrupt): nothing was counted
        run.reason = (
            f"{run.reason} (its deletes began: how many files were deleted is unknown, "
            "and none of them is in the ledger)"
        )
    run.seconds = round(time.monotonic() - started - ctx.waited_seconds, 3)
    log.info("vacuum %s: %s %s", table.name, run.status, run.reason or "")
    return run


def _release_live_files(ctx: TableContext) -> None:
    """Let go of the snapshot files the inventory slice's gates held (a small table's:
    :func:`~vacuum.tuning.checkpointed_in_one_partition`); for frames never held, a no-op."""
    if ctx.live_files is not None:
        release(ctx.live_files)


def _retention(ctx: TableContext) -> float | None:
    """Fix the run's effective retention (the gates') and return the RETAIN to send Delta: only
    when it differs from the table's own retention, which Delta applies anyway."""
    spark, options, state, run = ctx.spark, ctx.options, ctx.snapshot, ctx.run
    requested = options.retain_hours if options.retain_hours is not None else ctx.table.retain_hours
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
    retain_argument = (
        run.retention_hours_effective
        if requested is not None and run.retention_hours_effective != state.retention_hours
        else None
    )
    if retain_argument is not None and retain_argument < state.retention_hours:
        # the gate allowed it; Delta's own check is per session, and this session is this table's
        spark.conf.set(_RETENTION_CHECK, "false")
    return retain_argument


def _vacuum(ctx: TableContext) -> None:
    spark, table, options, run, location = ctx.spark, ctx.table, ctx.options, ctx.run, ctx.location
    name_jobs(spark, "snapshot")
    ctx.state, ctx.live_files = load_table_state(spark, location.uri)
    if ctx.after_snapshot is not None:
        waiting_since = time.monotonic()
        try:
            ctx.after_snapshot()
        finally:
            ctx.waited_seconds += time.monotonic() - waiting_since  # the run's, not the table's time
    ctx.refuse_if_stopped("its gates")
    state = ctx.state
    run.table_version = state.version
    retain_argument = _retention(ctx)
    if run.delete_with == DeleteWith.BATCH and not options.dry_run and not location.is_s3:
        raise VacuumRefused("--delete-with batch uses S3 DeleteObjects; this table is not on S3")

    retention_millis = (
        int(retain_argument * 3_600_000) if retain_argument is not None else state.retention_millis
    )
    with ExitStack() as cleanup:
        slice_frame = None
        if options.mode.uses_inventory:
            ctx.retained_since_millis = int(time.time() * 1000) - retention_millis
            slice_frame = gated_slice(ctx)
            cleanup.callback(release, slice_frame)
        if location.is_s3:
            run.warnings += gates.check_versioning(
                _bucket_versioning(location.bucket), location.bucket, allow_versioned=options.allow_versioned
            )
        if slice_frame is not None and ctx.delta_names_nothing:
            # Delta's inventory mode names only the slice's objects (and directory paths it derives
            # from them, which are never deleted), and never a file its log says a version inside
            # the retention window reads: when every object of the slice is such a file, by a path
            # Delta compares as the tool does, its answer holds nothing to delete, and its dry run
            # and the check of its answer are not run. Nothing is deleted on this path: a wrong
            # count could only delete less
            run.delta_plan_skipped = PLAN_SKIPPED
            log.info("%s: %s", table.name, PLAN_SKIPPED)
            if options.collect_candidates:
                run.candidates = CANDIDATES_SCHEMA.empty_table()
            return  # planned, deleted and remaining stay at TableRun's 0
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
        details = read_from_cache(
            candidate_details(
                in_one_partition(spark, dry_run_candidates(spark, plan_sql)), slice_frame, state
            ).cache()
        )
        cleanup.callback(release, details)
        name_jobs(spark, "check candidates")
        # Delta's cut-off was taken before this clock reading: a tombstone removed since is one a
        # version inside the retention window reads, and Delta kept it too
        assert ctx.live_files is not None
        check = check_plan(
            details, ctx.live_files, state, int(time.time() * 1000) - retention_millis, slice_frame
        )
        _release_live_files(ctx)  # their last read: the deletes have the memory
        if check.suspicious:
            example = check.suspicious_examples[0] if check.suspicious_examples else "(a path of null)"
            raise VacuumRefused(
                f"Delta's plan names {check.suspicious} file(s) that are live, needed by a version "
                f"inside the retention window (data files or their deletion vectors' files), younger "
                f"than the {run.retention_hours_effective:g}h retention, or outside the table, "
                f"e.g. {example}; nothing deleted"
            )
        if slice_frame is not None:
            planned = _checked_inventory_plan(details, check, run)
            _record_partitions(check.slice_partitions, run)  # sized in the check's own job
        else:
            planned = checked_listing_plan(ctx, details)
            name_jobs(spark, "summary")
            _summarise(planned, run)
        if options.collect_candidates:
            run.candidates = to_arrow(
                planned.select(
                    F.lit(table.name).alias("table"), reported_path().alias("path"), "length", "partition"
                )
            )
        run.deleted_files = run.deleted_bytes = run.remaining_files = 0
        if options.dry_run or run.planned_files == 0:
            return
        ctx.refuse_if_stopped("its deletes")
        unsize_shuffles(spark)
        verify_existence = options.verifies_existence(run.delete_with, on_s3=location.is_s3)
        # how many objects each directory held: the checks of which files exist (before the
        # deletes, with verify_existence, and after a delete that failed) list a directory when that
        # is fewer requests than asking for each file
        directories = directory_object_counts(slice_frame) if slice_frame is not None else None
        existing = directories if verify_existence else None
        name_jobs(spark, "delete")
        if run.delete_with == DeleteWith.DELTA:
            if verify_existence:
                planned = set_aside_gone(ctx, planned, existing)
                cleanup.callback(planned.unpersist)
            real_sql = vacuum_sql(
                state, mode=options.mode, retention_hours=retain_argument, dry_run=False, inventory_view=view
            )
            counts = directories
            try:
                with deleting(ctx, "Delta's delete") as jobs:
                    spark.sql(real_sql)
            except Exception:
                if ctx.delete_started_at is not None:
                    # Delta failed or was cancelled part-way: count what it did delete, then
                    # report its error
                    measure_delta_deletes(
                        ctx,
                        planned,
                        counts,
                        sized=slice_frame is not None,
                        fail_on_remaining=False,
                        ended=jobs.tasks_ended,
                    )
                raise
            measure_delta_deletes(ctx, planned, counts, sized=slice_frame is not None)
        else:
            delete_batch(
                ctx,
                planned,
                plan_sql,
                verify_existence=verify_existence,
                directory_objects=directories,
                release_plan=cleanup.close,
            )


def _checked_inventory_plan(details: DataFrame, check: PlanCheck, run: TableRun) -> DataFrame:
    """Every candidate must be one of the slice's files (the check counted those that are not, in
    its own job). Directories Delta derives from the paths are dropped (never candidates on S3);
    any other stranger refuses the table."""
    if not check.not_in_slice:
        return details
    if check.strangers:  # a stranger of null path counts too, though it has no example
        example = check.stranger_example or "(a path of null)"
        raise VacuumRefused(
            f"Delta's plan names path(s) that are not files of the inventory slice, e.g. {example}: "
            "Delta and the inventory disagree on this table's paths; nothing deleted"
        )
    run.keep(KEPT_DIRECTORY, check.not_in_slice_directories)
    return details.where(F.col("in_slice").isNotNull())


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


def _bucket_versioning(bucket: str) -> str | None:
    try:
        return bucket_versioning(bucket)
    except Exception as error:
        raise VacuumRefused(
            f"cannot read the versioning state of bucket {bucket}: {describe(error)}"
        ) from None
