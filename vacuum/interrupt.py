"""An interrupted vacuum run (Ctrl-C): how an interrupt stops it, the outcome of a table it never
began, and the run's one line.

While a run's tables run, an interrupt does not raise: it sets the run's ``stopped`` (so no table
that has not begun deleting begins, and no table not yet begun begins) and then cancels the running
Spark jobs, as PySpark's own handler does. The run waits for its running tables (which delete
nothing more, and measure what their deletes did), records every table's outcome as after any run,
and ends with :class:`~core.errors.RunInterrupted`. Another interrupt cancels the jobs again.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pyspark.sql import SparkSession

from core.registry import RegisteredTable
from vacuum.context import RunContext, Status, VacuumOptions
from vacuum.results import TableRun

log = logging.getLogger("inventory_vacuum")

# the reason of a table an interrupted run never began
NOT_BEGUN = "the run was interrupted before this table began: nothing deleted"


@contextmanager
def interrupts_stop(spark: SparkSession, context: RunContext) -> Iterator[None]:
    """While the block runs, SIGINT (Ctrl-C) stops the run (``context.stopped`` and
    ``context.interrupted``), then cancels the running Spark jobs, and raises nothing, so the run
    keeps every table's outcome. The stop comes first: a table between its last check and a job
    it starts after the cancellation would otherwise go on deleting. Only on the main thread (where
    Python runs signal handlers); elsewhere the caller's handling stays."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(_signal: int, _frame: Any) -> None:
        again = context.interrupted.is_set()
        context.stopped.set()
        context.interrupted.set()
        if again:
            log.warning("interrupted again: the running tables' jobs are cancelled again")
        else:
            log.warning("interrupted: no other table begins; the running ones end and are recorded")
        spark.sparkContext.cancelAllJobs()

    previous = signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        # a handler not set from Python (None) cannot be set back: Python's own takes its place
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)


def interrupted_line(runs: Sequence[TableRun], history_table: str | None) -> str:
    """The one line of an interrupted run: how many tables began, what they deleted (as measured),
    and where their outcomes are recorded."""
    begun = sum(1 for r in runs if r.reason != NOT_BEGUN)
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
