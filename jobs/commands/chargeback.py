"""``inventory-vacuum chargeback``: storage cost per table, owner, bucket, class or prefix."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from core.errors import InventoryVacuumError
from core.local_files import is_results_output, written_whole
from jobs import params
from jobs.commands.common import check_writable, protected_paths, run_id
from jobs.output import Output, output_for

NAME = "chargeback"
SUMMARY = "objects, bytes and monthly storage cost per table, owner, bucket, class or prefix"
EXAMPLE = """\
  inventory-vacuum chargeback --inventory-table s3://meta/warehouse/inventory --tables tables.yaml \\
      --by owner --format html --output chargeback.html
  inventory-vacuum chargeback --inventory-table s3://meta/warehouse/inventory --tables tables.yaml \
      --advise --restore-window-days 30 --json   # recommendations and their lifecycle rules"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    params.INVENTORY_TABLE.add(parser)
    params.TABLES.add(parser, help="tables.yaml: table names and owners")
    params.GROUP_BY.add(parser)
    params.PRICES.add(parser)
    params.REPORT_FORMAT.add(parser, dest="report_format")
    params.JSON.add(parser, help="the same as --format json")
    params.OUTPUT.add(parser)
    params.HISTORY_TABLE.add(parser)
    params.RUNS_TABLE.add(parser)
    params.USAGE_TABLE.add(parser)
    params.TREND_DAYS.add(parser)
    params.RECLAIMABLE.add(parser)
    params.ADVISE.add(parser)
    params.RESTORE_WINDOW_DAYS.add(parser)
    params.UNOWNED_AGE_DAYS.add(parser)


def run(args: argparse.Namespace, output: Output) -> int:
    from chargeback import build_report, load_prices, parse_group_by
    from core.paths import StorageLocation
    from core.registry import load_registry
    from core.session import build_spark_session
    from core.tables import ToolTables

    by = parse_group_by(args.by)
    prices = load_prices(args.prices)
    StorageLocation.parse(args.inventory_table, what="--inventory-table")
    registry = load_registry(args.tables)
    to_file = bool(args.output) and not is_results_output(args.output)
    if to_file:
        check_writable("--output", args.output)
    located = ToolTables.beside(
        args.inventory_table,
        vacuum_runs=args.history_table,
        inventory_runs=args.runs_table,
        inventory_usage=args.usage_table,
    )
    spark = build_spark_session("inventory-vacuum chargeback")
    reclaimable_now: list[Any] | None = None
    if args.reclaimable:
        reclaimable_now = _reclaimable_now(
            args, spark, registry, located.vacuum_runs, located.vacuum_deletions
        )
    report = build_report(
        spark,
        args.inventory_table,
        registry,
        by,
        prices,
        vacuum_runs_table=located.vacuum_runs,
        computed_reclaimable=reclaimable_now,
        inventory_runs_table=located.inventory_runs,
        usage_table=located.inventory_usage,
        trend_days=args.trend_days,
        advise=args.advise,
        restore_window_days=args.restore_window_days,
        unowned_age_days=args.unowned_age_days,
    )
    if not to_file:  # stdout, also as --output /dev/stdout (descriptor 1 is the log's)
        output.show(NAME, report)
        return 0
    try:
        with written_whole(args.output) as partial, open(partial, "w", encoding="utf-8") as target:
            output_for(args, target).show(NAME, report)
    except OSError as error:
        raise InventoryVacuumError(
            f"--output {args.output}: not written: {error.strerror or error}"
        ) from None
    chosen = "json" if args.json else args.report_format
    print(f"wrote the {chosen} chargeback report to {args.output}", file=sys.stderr)
    return 0


def _reclaimable_now(
    args: argparse.Namespace, spark: object, registry: object, history_table: str, ledger_table: str
) -> list[Any]:
    """A vacuum dry run of every enabled table, as ``inventory-vacuum vacuum --dry-run`` plans it
    (not recorded in vacuum_runs: a chargeback only reads)."""
    from vacuum.runner import VacuumOptions, vacuum_tables

    options = VacuumOptions(
        inventory_table=args.inventory_table,
        dry_run=True,
        ledger_table=ledger_table,
        protected_locations=protected_paths(
            args.inventory_table, history_table, ledger_table, registry, args.tables
        ),
    )
    return vacuum_tables(spark, registry.select(None), options, run_id=run_id()).tables  # type: ignore[arg-type, attr-defined]
