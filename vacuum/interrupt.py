"""An interrupted vacuum run (Ctrl-C): the outcome of each of its tables, and its one line.

On an interrupt PySpark cancels the running Spark jobs and raises KeyboardInterrupt in the main
thread. The run (:mod:`vacuum.runner`) then begins no other table, waits for the running ones
(which delete nothing more, and measure what their deletes did) and records every table's outcome
as after any run, before it ends with :class:`~core.errors.RunInterrupted`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import Future, wait

from core.errors import spark_error_summary
from core.registry import RegisteredTable
from vacuum.context import RunContext, Status, VacuumOptions
from vacuum.results import TableRun

log = logging.getLogger("inventory_vacuum")

# the reason of a table an interrupted run never began
NOT_BEGUN = "the run was interrupted before this table began: nothing deleted"


class Interrupted(Exception):
    """:func:`vacuum.runner._run_tables` was interrupted: ``runs`` holds every table's outcome (those never begun
    refused with :data:`NOT_BEGUN`)."""

    def __init__(self, runs: list[TableRun]) -> None:
        super().__init__("interrupted")
        self.runs = runs


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


def wait_for_running(futures: Sequence[Future[TableRun]]) -> None:
    """Wait for the tables still running after an interrupt. Another interrupt does not end the
    wait (their outcomes are the run's record): PySpark cancels the running jobs again, so those
    tables end sooner, a measurement of their deletes included (their counts then unknown)."""
    while True:
        try:
            wait(futures)
            return
        except KeyboardInterrupt:
            log.warning("interrupted again: the running tables' jobs are cancelled; waiting for them to end")


def outcome(
    future: Future[TableRun], table: RegisteredTable, options: VacuumOptions, context: RunContext
) -> TableRun:
    """The table's run, or for a table an interrupted run never began, a refusal that says so."""
    if future.cancelled():
        return not_begun(table, options, context)
    error = future.exception()
    if error is None:
        return future.result()
    # vacuum_table never raises: the table's session or its set-up failed before it
    run = not_begun(table, options, context)
    run.status, run.reason = Status.FAILED, spark_error_summary(error)
    return run


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
