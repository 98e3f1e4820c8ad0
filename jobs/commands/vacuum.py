"""``inventory-vacuum vacuum``: gated VACUUM of registered tables, from the inventory."""

from __future__ import annotations

import argparse
import json
import logging
from typing import TYPE_CHECKING

from core.errors import InventoryVacuumError, RunInterrupted, UsageError
from jobs import params
from jobs.commands.common import check_writable, protected_paths, run_id
from jobs.output import Output

if TYPE_CHECKING:
    from vacuum.results import VacuumResult

log = logging.getLogger("inventory_vacuum")

NAME = "vacuum"
SUMMARY = "vacuum registered Delta tables using the inventory (dry run first)"
EXAMPLE = """\
  inventory-vacuum vacuum --inventory-table s3://meta/warehouse/inventory --tables tables.yaml \\
      --table events --dry-run"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    params.INVENTORY_TABLE.add(parser)
    params.TABLES.add(
        parser, help="tables.yaml (a local path or s3:// URI): the only tables vacuum may touch"
    )
    params.TABLE.add(parser)
    params.DRY_RUN.add(parser)
    params.RETAIN_HOURS.add(parser)
    params.ALLOW_UNSAFE_RETENTION.add(parser)
    params.MODE.add(parser)
    params.DELETE_WITH.add(parser)
    params.VERIFY_EXISTENCE.add(parser)
    params.MAX_INVENTORY_AGE_HOURS.add(parser)
    params.MIN_COVERAGE.add(parser)
    params.ALLOW_VERSIONED.add(parser)
    params.REPORT.add(parser)
    params.CANDIDATES.add(parser)
    params.HISTORY_TABLE.add(parser)
    params.LEDGER_TABLE.add(parser)
    params.PARALLEL.add(parser)
    params.DELETE_REQUESTS_PER_TASK.add(parser)
    params.JSON.add(parser)


def run(args: argparse.Namespace, output: Output) -> int:
    from core.local_files import is_results_output
    from core.paths import StorageLocation
    from core.registry import load_registry
    from core.session import build_spark_session
    from core.tables import ToolTables
    from vacuum.results import VacuumResult
    from vacuum.runner import VacuumOptions, vacuum_tables

    if args.mode in ("list", "lite") and args.delete_with == "batch":
        raise UsageError("--delete-with batch needs --mode inventory or flat")
    if args.mode == "list" and not args.dry_run and args.delete_with == "auto":
        # Delta's real listing VACUUM plans again and deletes what it finds: what it deletes cannot
        # be checked first (a nested table's file that ages past the retention in between would go)
        raise UsageError(
            "a real --mode list run deletes whatever Delta's listing VACUUM plans again, unchecked: "
            "use --mode flat (the same fresh listing, deleted from the checked plan), "
            "or add --delete-with delta to accept Delta's own re-plan"
        )
    if args.candidates and not args.candidates.endswith((".parquet", ".csv")):
        raise UsageError(f"--candidates {args.candidates!r} must end in .parquet or .csv")
    if args.candidates and is_results_output(args.candidates):
        raise UsageError(
            f"--candidates {args.candidates!r} is where the results are shown: give another file"
        )
    if args.json and args.report and is_results_output(args.report):
        # --json's one object on stdout is the report already: a second would break a reader of it
        raise UsageError(f"--report {args.report!r} is where --json writes the report already")
    StorageLocation.parse(args.inventory_table, what="--inventory-table")
    registry = load_registry(args.tables)
    tables = registry.select(args.table_names)
    if not tables:
        raise UsageError(f"{args.tables}: no enabled tables to vacuum")
    for flag, path in (("--report", args.report), ("--candidates", args.candidates)):
        if path:
            check_writable(flag, path)  # before anything is deleted, not after
    located = ToolTables.beside(
        args.inventory_table, vacuum_runs=args.history_table, vacuum_deletions=args.ledger_table
    )
    options = VacuumOptions(
        inventory_table=args.inventory_table,
        mode=args.mode,
        delete_with=args.delete_with,
        dry_run=args.dry_run,
        retain_hours=args.retain_hours,
        allow_unsafe_retention=args.allow_unsafe_retention,
        max_inventory_age_hours=args.max_inventory_age_hours,
        min_coverage=args.min_coverage,
        allow_versioned=args.allow_versioned,
        parallel=args.parallel,
        delete_requests_per_task=args.delete_requests_per_task,
        collect_candidates=bool(args.candidates),
        verify_existence=args.verify_existence,
        history_table=located.vacuum_runs,
        ledger_table=located.vacuum_deletions,
        protected_locations=protected_paths(
            args.inventory_table, located.vacuum_runs, located.vacuum_deletions, registry, args.tables
        ),
    )
    # one table's vacuum is a short-lived JVM: C1 only (core.session.QUICK_JIT_OPTION)
    spark = build_spark_session("inventory-vacuum vacuum", short_run=len(tables) == 1)
    try:
        result = vacuum_tables(spark, tables, options, run_id=run_id())
    except RunInterrupted as interrupted:
        # what the tables did until the interrupt is written and shown as after any run; the
        # interrupt's one line follows (exit 130), also when a file could not be written
        assert isinstance(interrupted.result, VacuumResult)
        for problem in _write_and_show(args, interrupted.result, output):
            log.error("%s", problem)
        raise
    problems = _write_and_show(args, result, output)
    if problems:  # the run's outcome is shown and in its history: the files' errors end the command
        raise InventoryVacuumError("; ".join(problems))
    return 0 if result.ok else 1


def _write_and_show(args: argparse.Namespace, result: VacuumResult, output: Output) -> list[str]:
    """Write --candidates and --report, then show the result; what could not be written, one line
    each (the result is shown all the same: the run has happened, deletes and all)."""
    from core.local_files import is_results_output, written_whole
    from vacuum.candidates import write_candidates

    problems = []
    # each file whole or not at all: an interrupt while it is written leaves it as it was
    if args.candidates:
        try:
            with written_whole(args.candidates) as partial:
                write_candidates(result.tables, partial)
        except OSError as error:
            problems.append(f"--candidates {args.candidates}: not written: {error.strerror or error}")
    if args.report:
        try:
            if is_results_output(args.report):
                # the results' own stream, before the result (descriptor 1 is the log's)
                json.dump(result.to_dict(), output.stream, indent=2, default=str)
                output.stream.write("\n")
                output.stream.flush()
            else:
                with written_whole(args.report) as partial, open(partial, "w", encoding="utf-8") as report:
                    json.dump(result.to_dict(), report, indent=2, default=str)
        except OSError as error:
            problems.append(f"--report {args.report}: not written: {error.strerror or error}")
    output.show(NAME, result)
    return problems
