"""An interrupted vacuum run (Ctrl-C): how an interrupt stops it, the outcome of a table it never
began, and the run's one line.

While a run's tables run, an interrupt does not raise: it sets the run's ``stopped`` (so no table
that has not begun deleting begins, and no table not yet begun begins) and then cancels the running
Spark jobs, as PySpark's own handler does (:class:`Interrupts`). The run waits for its running
tables (which delete nothing more, and measure what their deletes did), records every table's
outcome as after any run, and ends with :class:`~core.errors.RunInterrupted`. Another interrupt
cancels the jobs again.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pyspark.sql import SparkSession

from core.errors import spark_error_summary
from core.registry import RegisteredTable
from vacuum.context import RunContext, Status, VacuumOptions
from vacuum.results import TableRun

log = logging.getLogger("inventory_vacuum")

# how often an interrupt cancels again the deletes' jobs of the tables whose deletes had begun
DELETES_CANCEL_INTERVAL_SECONDS = 0.1
# the reason of a table an interrupted run never began
NOT_BEGUN = "the run was interrupted before this table began: nothing deleted"
# how the reason of a table whose session could not be set up begins (its vacuum never began)
SET_UP_FAILED = "its session could not be set up, so its vacuum never began: "


class Interrupts:
    """What an interrupt (SIGINT, Ctrl-C) does while a run is under :func:`interrupts_stop`.

    While the tables run, it stops the run (``context.stopped`` and ``context.interrupted``), then
    cancels the running Spark jobs from a thread of its own, and raises nothing, so the run keeps
    every table's outcome. The stop comes first, so a table that checks it after the interrupt
    begins nothing more; the deletes of a table that had begun them are cancelled until they end,
    also a job of them that starts after the interrupt. After :meth:`tables_ended`, an interrupt is
    only noted: what remains (the history's append) is the record of what the tables did, and no
    cancel sent before may reach it.

    The handler never calls into the JVM itself: Python runs it on the main thread, which may be
    waiting inside a call to the JVM (a history append, say), on that thread's own connection; the
    cancel is made from a thread, and a connection, of its own.
    """

    def __init__(self, spark: SparkSession, context: RunContext) -> None:
        self._spark, self._context = spark, context
        self._tables_running = True
        self._cancels: list[threading.Thread] = []

    def tables_ended(self, timeout: float = 30.0) -> None:
        """From now on an interrupt is only noted; the cancels sent before have reached Spark (a
        cancel acts on the jobs running when it arrives, so none reaches a later job)."""
        self._tables_running = False
        deadline = time.monotonic() + timeout
        for cancel in list(self._cancels):
            cancel.join(max(0.0, deadline - time.monotonic()))

    def __call__(self, _signal: int, _frame: Any) -> None:
        again = self._context.interrupted.is_set()
        self._context.stopped.set()
        self._context.interrupted.set()
        if not self._tables_running:
            log.warning("interrupted: the run's tables have ended; their outcomes are being recorded")
            return
        log.warning(
            "interrupted%s: no other table begins; the running tables' jobs are cancelled, and they "
            "end and are recorded",
            " again" if again else "",
        )
        cancel = threading.Thread(target=self._cancel, name="inventory-vacuum interrupt", daemon=True)
        self._cancels.append(cancel)
        cancel.start()

    def _cancel(self) -> None:
        """Cancel the running jobs, then the deletes' jobs of every table whose deletes had begun
        before the stop, until they end: a cancel acts on the jobs running when it arrives, and
        such a table may start its deletes' job just after (:func:`vacuum.deletion.deleting`). The
        stop came first, so no table's deletes begin after the first look at them."""
        context = self._spark.sparkContext
        try:
            context.cancelAllJobs()
            while tags := self._context.deletes_tags():
                for tag in tags:
                    context.cancelJobsWithTag(tag)
                time.sleep(DELETES_CANCEL_INTERVAL_SECONDS)
        except Exception as error:  # the stop is set all the same: no table begins a new step
            log.warning("could not cancel the running Spark jobs: %s", spark_error_summary(error))


@contextmanager
def interrupts_stop(spark: SparkSession, context: RunContext) -> Iterator[Interrupts]:
    """While the block runs, SIGINT is :class:`Interrupts`' (on the main thread only, where Python
    runs signal handlers; elsewhere the caller's handling stays). The previous handler is set back
    after."""
    interrupts = Interrupts(spark, context)
    if threading.current_thread() is not threading.main_thread():
        yield interrupts
        return
    previous = signal.signal(signal.SIGINT, interrupts)
    try:
        yield interrupts
    finally:
        # a handler not set from Python (None) cannot be set back: Python's own takes its place
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)


def failed_before_begun(
    table: RegisteredTable, options: VacuumOptions, context: RunContext, error: Exception
) -> TableRun:
    """A table whose set-up (its session) failed before its vacuum began: nothing deleted."""
    run = not_begun(table, options, context)
    run.status, run.reason = Status.FAILED, SET_UP_FAILED + spark_error_summary(error)
    return run


def interrupted_line(runs: Sequence[TableRun], history_table: str | None) -> str:
    """The one line of an interrupted run: how many tables began, what they deleted (as measured),
    and where their outcomes are recorded."""
    begun = sum(1 for r in runs if r.reason != NOT_BEGUN and not (r.reason or "").startswith(SET_UP_FAILED))
    line = f"interrupted: {begun} of the run's {len(runs)} table(s) had begun"
    if any(r.deleted_files is None for r in runs):
        line += "; what some of them deleted is unknown (see their reasons and warnings)"
    else:
        deleted = sum(r.deleted_files or 0 for r in runs)
        line += f"; {deleted} file(s) deleted" if deleted else "; nothing deleted"
    if history_table:
        line += f"; every table's outcome is in the history {history_table}"
    return line


def not_begun(table: RegisteredTable, options: VacuumOptions, context: RunContext) -> TableRun:
    """The refusal of a table an interrupted run never began: nothing deleted."""
    return TableRun(
        name=table.name,
        path=table.path,
        status=Status.REFUSED,
        reason=NOT_BEGUN,
        mode=options.mode,
        dry_run=options.dry_run,
        delete_with=options.delete_path(table.location),
        inventory_version=context.inventory_version,
    )
