"""The delete of a checked plan, and the measurement of what it deleted.

Two ways: this tool's batched DeleteObjects (after re-checking the plan against a fresh snapshot
when the log moved), or Delta's own VACUUM followed by a check of which planned files are really
gone (Delta swallows each file's delete error). Either way, every deleted object goes to the
ledger, also when some deletes failed, and the counts are measured, never taken from the plan. On
a versioned bucket the batch delete ledgers the delete marker DeleteObjects made for each key, so
a restore removes exactly that marker. A deletes' job that fails or is cancelled as a whole (an
interrupt) returns no outcomes: once its tasks have ended, which of the files it was sent are gone
is checked, as after Delta's delete, and those are counted and ledgered.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from typing import TypeVar

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from core.errors import InventoryVacuumError, spark_error_summary
from vacuum.context import TableContext
from vacuum.execute import delete_in_batches
from vacuum.ledger import ALREADY_GONE, record_deletions
from vacuum.plan import dry_run_candidates, reported_path
from vacuum.results import KEPT_NOT_SENDABLE, TableRun
from vacuum.snapshot import latest_commit
from vacuum.tuning import is_read_from_cache, release
from vacuum.verify import still_present

log = logging.getLogger("inventory_vacuum")
T = TypeVar("T")

# how long a failed or cancelled deletes' job may take to end its running tasks (a killed task's
# Python worker is stopped after spark.python.task.killTimeout, 2 s by default) before what they
# deleted is measured
TASKS_END_TIMEOUT_SECONDS = 60.0


@dataclass
class DeletesJobs:
    """How a table's deletes' jobs ended (:func:`deleting`)."""

    # False when they failed or were cancelled and some of their tasks still ran after
    # TASKS_END_TIMEOUT_SECONDS, None when that could not be checked: what such tasks deleted
    # later is in no count
    tasks_ended: bool | None = True


@contextmanager
def deleting(ctx: TableContext, before: str) -> Iterator[DeletesJobs]:
    """The block's Spark jobs are the table's deletes: refused, before ``before``, once its run has
    stopped; otherwise they carry a job tag of their own, which an interrupt's cancel reaches also
    when a job starts after it (:meth:`vacuum.interrupt.Interrupts._cancel`): a table that passed
    its last check just before the interrupt would otherwise start deleting after the cancel, and
    delete to the end. The checks of what the deletes did run after the block, without that tag,
    so no such cancel reaches them. As the block begins, the table's deletes are marked begun
    (``ctx.delete_started_at``) and what they deleted unknown until measured (not 0: also when
    they fail or are cancelled part-way). When the block fails, it first waits until the table's
    jobs have ended and none of their tasks still runs (:func:`_tasks_ended`)."""
    context = ctx.spark.sparkContext
    tag = f"inventory-vacuum-deletes-{uuid.uuid4().hex}"
    ctx.run_context.begin_deletes(tag, partial(ctx.refuse_if_stopped, before))
    jobs = DeletesJobs()
    try:
        context.addJobTag(tag)
        try:
            ctx.delete_started_at = datetime.now(timezone.utc)
            ctx.run.deleted_files = ctx.run.deleted_bytes = ctx.run.remaining_files = None
            yield jobs
        except BaseException:
            try:
                jobs.tasks_ended = _tasks_ended(ctx.spark, TASKS_END_TIMEOUT_SECONDS)
            except Exception as error:  # the deletes' own error stays the table's
                jobs.tasks_ended = None
                log.warning(
                    "%s: whether the deletes' tasks had ended could not be checked: %s",
                    ctx.table.name,
                    spark_error_summary(error),
                )
            raise
        finally:
            try:
                context.removeJobTag(tag)
            except Exception as error:  # the block's own error (or outcome) stays the table's
                log.warning("%s: could not remove a job tag: %s", ctx.table.name, spark_error_summary(error))
    finally:
        ctx.run_context.end_deletes(tag)


def delete_batch(
    ctx: TableContext,
    planned: DataFrame,
    plan_sql: str,
    *,
    verify_existence: bool | None = False,
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
    (:func:`set_aside_gone`): S3 answers "Deleted" for a missing key. ``directory_objects``
    (:func:`~vacuum.verify.directory_object_counts`) lets that check, and the one after a deletes'
    job that failed as a whole, list a directory instead of asking for each file.

    ``release_plan`` drops the plan's cached frames; it is called once the deletes' outcomes are
    persisted, before the ledger is written (see :func:`_send_deletes`).
    """
    spark, state = ctx.spark, ctx.snapshot
    newest = latest_commit(spark, state.uri)
    if state.newest_commit is not None and newest == state.newest_commit:
        confirmed = planned
    else:
        log.info(
            "%s: the log changed since planning (%s; now %s): planning again",
            ctx.table.name,
            state.newest_commit,
            newest,
        )
        fresh = dry_run_candidates(spark, plan_sql).select("path")
        confirmed = planned.join(fresh, "path", "left_semi")
    with ExitStack() as cleanup:
        if verify_existence:
            confirmed = set_aside_gone(ctx, confirmed, directory_objects)
            cleanup.callback(confirmed.unpersist)

        def release() -> None:
            cleanup.close()
            release_plan()

        _send_deletes(ctx, confirmed, release, directory_objects)


def set_aside_gone(
    ctx: TableContext, candidates: DataFrame, directory_objects: DataFrame | None
) -> DataFrame:
    """The candidates that still exist (persisted: the caller unpersists). The others, deleted by
    someone else since the inventory was taken, are counted as ``already_gone_files`` and written
    to the ledger as ``already_gone`` (length unknown), so the next run on the same inventory
    leaves them out instead of claiming them."""
    run = ctx.run
    # Delta's candidates as the plan reads them from its cache (vacuum.tuning.read_from_cache) are
    # held already; they are let go of here all the same, as a frame persisted here is: the checks
    # and the deletes have the memory, and only the candidates still present are read after, from
    # their own cache, filled below before this release (should its blocks be lost, Spark computes
    # them again from the candidates' plan, as it did before)
    candidates = candidates if is_read_from_cache(candidates) else candidates.persist()
    try:
        present = still_present(candidates, directory_objects).persist()
        gone = candidates.join(present.select("bucket", "key"), ["bucket", "key"], "left_anti").persist()
        try:
            run.already_gone_files = gone.count()
            if ctx.ledger and run.already_gone_files:
                _ledger(ctx, gone, ALREADY_GONE)
        finally:
            gone.unpersist()
        present.count()
        return present
    finally:
        release(candidates)


def _ledger(
    ctx: TableContext, deleted: DataFrame, deleted_with: str, deleted_at: datetime | None = None
) -> None:
    """Append ``deleted`` to the ledger; a failure to do so becomes the table's warning."""
    assert ctx.ledger is not None
    warning = record_deletions(
        ctx.spark,
        ctx.ledger,
        deleted,
        run_id=ctx.run_context.run_id,
        table=ctx.table.name,
        deleted_with=deleted_with,
        delete_started_at=ctx.delete_started_at,
        deleted_at=deleted_at,
    )
    if warning:
        ctx.run.warnings.append(warning)


def _send_deletes(
    ctx: TableContext,
    confirmed: DataFrame,
    release_plan: Callable[[], None],
    directory_objects: DataFrame | None = None,
) -> None:
    """DeleteObjects for ``confirmed``; count per key what S3 deleted, ledger it, and fail the
    table with the first error when some keys could not be deleted.

    Everything after the deletes reads their persisted outcomes (each row carries its candidate's
    path and length), so the plan's cached frames are released first: their memory is the
    deletes' and the ledger's. A deletes' job that fails or is cancelled as a whole leaves no
    outcomes: :func:`_measure_cut_short` counts and ledgers what it deleted, then its error goes on.
    """
    run = ctx.run
    missing = {"path", "length"} - set(confirmed.columns)
    if missing:  # the ledger and the bytes come from the outcomes: never fill them with nulls
        raise InventoryVacuumError(f"the plan has no {', '.join(sorted(missing))} column; nothing deleted")
    try:
        # refused when the run stopped meanwhile: the re-plan and existence checks took a while
        with deleting(ctx, "its first delete request") as jobs:
            run.delete_requests = None  # counted with the outcomes, as what was deleted
            outcomes = delete_in_batches(confirmed, in_flight=ctx.options.delete_requests_per_task)
    except Exception:  # failed or cancelled as a whole (an interrupt cancels it), or refused
        if ctx.delete_started_at is not None:
            _measure_cut_short(ctx, confirmed, directory_objects, jobs.tasks_ended)
        raise
    try:
        try:
            release_plan()
        except Exception as error:  # the objects are gone: counting and the ledger come first
            log.warning(
                "%s: could not release the plan's cached frames: %s",
                ctx.table.name,
                spark_error_summary(error),
            )
        keys = F.col("key").isNotNull()
        deleted = outcomes.where(keys & F.col("deleted")).select(
            reported_path().alias("path"), "bucket", "key", "length", "delete_marker_version_id"
        )
        # one job over the persisted outcomes: every figure, and the first error (run once more
        # when the interrupt that stops a run cancelled it: PySpark cancels the jobs running when
        # Ctrl-C comes, and what was deleted must still be counted and ledgered)
        row = _again_if_cancelled(
            lambda: outcomes.agg(
                F.count(F.when(keys & F.col("deleted"), 1)).alias("deleted"),
                F.count(F.when(keys & ~F.col("deleted"), 1)).alias("failed"),
                F.count(F.when(keys & F.col("error").contains("XML body"), 1)).alias("not_sendable"),
                F.first(F.when(keys & ~F.col("deleted"), F.col("error")), ignorenulls=True).alias(
                    "first_error"
                ),
                F.coalesce(F.sum("requests"), F.lit(0)).alias("requests"),
                F.coalesce(F.sum(F.when(keys & F.col("deleted"), F.col("length"))), F.lit(0)).alias("bytes"),
                # a deleted object of unknown length (a listing plan): the bytes are unknown, not 0
                F.count(F.when(keys & F.col("deleted") & F.col("length").isNull(), 1)).alias("unsized"),
            ).first()
        )
        assert row is not None
        run.delete_requests = int(row["requests"])
        run.deleted_files = int(row["deleted"])
        run.remaining_files = int(row["failed"])
        run.deleted_bytes = row["bytes"] if row["unsized"] == 0 else None
        run.keep(KEPT_NOT_SENDABLE, int(row["not_sendable"]))
        _warn_of_dropped(run)
        if ctx.ledger and run.deleted_files:
            _ledger(ctx, deleted, "batch")
    finally:
        outcomes.unpersist()
    if run.remaining_files:
        raise InventoryVacuumError(
            f"{run.remaining_files} object(s) could not be deleted; first error: {row['first_error']}"
        )


def _again_if_cancelled(step: Callable[[], T]) -> T:
    """``step``, once more when its Spark job was cancelled (see :func:`_send_deletes`)."""
    try:
        return step()
    except Exception as error:
        if "cancel" not in str(error).lower():
            raise
        log.warning("a job counting what was deleted was cancelled; running it again")
        return step()


def _warn_of_dropped(run: TableRun) -> None:
    """The planned files neither deleted, remaining nor already gone: a re-plan dropped them."""
    if run.deleted_files is None or run.remaining_files is None:
        return
    dropped = run.planned_files - run.deleted_files - run.remaining_files - (run.already_gone_files or 0)
    if dropped:
        run.warnings.append(
            f"{dropped} candidate(s) dropped: not in the plan made again after a commit since "
            "planning (live again, or kept by a changed retention)"
        )


def _check_gone(
    planned: DataFrame, directory_objects: DataFrame | None, columns: list[Column], *, count_present: bool
) -> tuple[list[DataFrame], DataFrame, Row, int | None]:
    """Which files of ``planned`` are gone, from one check of which still exist (per directory, a
    HEAD per file or one LIST): (the frames to release, the gone files in ``columns``, persisted,
    their ``files``, ``bytes`` and ``unsized`` count, how many are present when ``count_present``).
    Run once more when an interrupt cancelled it (it only reads); on a failure nothing stays
    cached. The checks run in the aggregation's job, so its failure is theirs."""

    def check() -> tuple[list[DataFrame], DataFrame, Row, int | None]:
        frames: list[DataFrame] = []
        try:
            present = still_present(planned, directory_objects).select("bucket", "key").persist()
            frames.append(present)
            gone = planned.join(present, ["bucket", "key"], "left_anti").select(*columns).cache()
            frames.append(gone)
            row = gone.agg(
                F.count(F.lit(1)).alias("files"),
                F.sum("length").alias("bytes"),
                F.count(F.when(F.col("length").isNull(), 1)).alias("unsized"),
            ).first()
            assert row is not None
            return frames, gone, row, present.count() if count_present else None
        except BaseException:
            for frame in frames:
                frame.unpersist()
            raise

    return _again_if_cancelled(check)


def _measure_cut_short(
    ctx: TableContext, confirmed: DataFrame, directory_objects: DataFrame | None, ended: bool | None
) -> None:
    """After a deletes' job that ended without outcomes (``ended``: True, its tasks had ended;
    False, some still ran after :data:`TASKS_END_TIMEOUT_SECONDS`; None, that could not be
    checked; see :func:`deleting`): count the files
    of ``confirmed`` that are gone, as deleted (S3 answers "Deleted" for a key already gone, so the
    outcomes would have counted those too), and ledger them without a delete marker's version id
    (a restore takes the marker made in the delete's time window, which ends when the check had
    found them gone). When this cannot be measured, the counts stay unknown and the reason says so
    (:func:`vacuum.runner.vacuum_table`)."""
    run = ctx.run
    try:
        frames, gone, row, remaining = _check_gone(
            confirmed,
            directory_objects,
            [reported_path().alias("path"), F.col("bucket"), F.col("key"), F.col("length")],
            count_present=True,
        )
    except Exception as error:  # the job's own error is the table's reason: this one is a warning
        run.warnings.append(
            "the deletes' job ended before its outcomes were read (it failed or was cancelled), and "
            f"which files it deleted could not be checked: {spark_error_summary(error)}"
        )
        return
    checked_at = datetime.now(timezone.utc)  # every file counted gone was gone by then
    assert remaining is not None
    try:
        run.deleted_files = int(row["files"])
        run.deleted_bytes = (row["bytes"] or 0) if row["unsized"] == 0 else None
        run.remaining_files = remaining if ended else None
        run.warnings.append(
            "the deletes' job ended before its outcomes were read (it failed or was cancelled): "
            f"after it, {run.deleted_files} of the {run.deleted_files + remaining} file(s) it was "
            f"given were gone and {remaining} still there, checked per directory (a HEAD per file "
            "or one LIST); the gone ones are counted as deleted and ledgered without their delete "
            "markers' version ids (as in any batch delete, a file someone else deleted since the "
            "inventory counts too), and how many requests it sent is unknown; a request sent before "
            "the check may still delete files after it, uncounted: vacuum this table next with "
            "--verify-existence, which sets apart what is already gone"
            + ("" if ended else f"; {_tasks_may_run(ended, 'its tasks', 'it ended')}")
        )
        _warn_of_dropped(run)
        if ctx.ledger and run.deleted_files:
            _ledger(ctx, gone, "batch", deleted_at=checked_at)
    finally:
        for frame in frames:
            frame.unpersist()


def _tasks_may_run(ended: bool | None, tasks: str, end: str) -> str:
    """Why ``tasks`` of failed deletes may have deleted files the check did not see (``ended`` not
    True), and what that means for the counts: ``<why>, so <what>``."""
    if ended is None:  # nothing waited for them
        why, when = f"whether all of {tasks} had ended could not be checked", "during or after the check"
    else:
        why, when = (
            f"some of {tasks} still ran {TASKS_END_TIMEOUT_SECONDS:g} s after {end}",
            "after the check",
        )
    return (
        f"{why}, so files they may have deleted {when} are in neither the count nor the ledger, and "
        "how many remain is unknown"
    )


def _tasks_ended(spark: SparkSession, timeout: float) -> bool:
    """Wait until the calling thread's job group has no running job, then no running task (a
    cancelled job's tasks may still be sending requests); False when some still run after
    ``timeout`` seconds. Spark records a job's end after its stages' completion, which records
    their exact count of running tasks; each later task end lowers it, and its reaching 0 is
    recorded at once. Without a job group, every running stage of the application counts."""
    context = spark.sparkContext
    tracker = context.statusTracker()
    group = context.getLocalProperty("spark.jobGroup.id")
    deadline = time.monotonic() + timeout
    while True:
        if group is None:
            jobs_running, stage_ids = False, list(tracker.getActiveStageIds())
        else:
            jobs = [tracker.getJobInfo(job_id) for job_id in tracker.getJobIdsForGroup(group)]
            jobs_running = any(job is not None and job.status == "RUNNING" for job in jobs)
            stage_ids = [stage_id for job in jobs if job is not None for stage_id in job.stageIds]
        stages = [tracker.getStageInfo(stage_id) for stage_id in stage_ids]
        running = sum(stage.numActiveTasks for stage in stages if stage is not None)
        if not jobs_running and not running:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def measure_delta_deletes(
    ctx: TableContext,
    planned: DataFrame,
    directory_objects: DataFrame | None,
    *,
    sized: bool,
    fail_on_remaining: bool = True,
    ended: bool | None = True,
) -> None:
    """After Delta's own VACUUM: count the planned files that are really gone, and ledger them.

    Delta swallows each file's delete error and still succeeds, so its plan is not a count.
    ``directory_objects`` (from the inventory slice) lets the check list a directory instead of
    asking for each file; ``sized``: the plan's lengths are known (an inventory plan). Without
    ``fail_on_remaining`` Delta failed or was cancelled part-way; ``ended``: its tasks had ended
    (True), some still ran after :data:`TASKS_END_TIMEOUT_SECONDS` (False), or that could not be
    checked (None; :func:`deleting`).
    """
    run = ctx.run
    try:
        frames, deleted, row, _ = _check_gone(
            planned, directory_objects, [F.col(name) for name in planned.columns], count_present=False
        )
    except Exception as error:
        run.deleted_files = run.deleted_bytes = run.remaining_files = None
        run.warnings.append(
            f"Delta's VACUUM ran, but which of the {run.planned_files} planned files are gone could not be "
            f"measured: {spark_error_summary(error)}"
        )
        return
    try:
        run.deleted_files = int(row["files"])
        run.deleted_bytes = row["bytes"] if sized else None
        run.remaining_files = run.planned_files - (run.already_gone_files or 0) - run.deleted_files
        if not ended:
            run.remaining_files = None
            run.warnings.append(_tasks_may_run(ended, "Delta's delete tasks", "its VACUUM failed"))
        if ctx.ledger and run.deleted_files:
            _ledger(ctx, deleted, "delta")
    finally:
        for frame in frames:
            frame.unpersist()
    if run.remaining_files and fail_on_remaining:
        raise InventoryVacuumError(
            f"Delta's VACUUM left {run.remaining_files} of the {run.planned_files} planned file(s) in place "
            "(it ignores each file's delete error: access denied, object lock, bucket policy?)"
        )
