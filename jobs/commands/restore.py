"""``inventory-vacuum restore``: undo a vacuum on a versioned bucket, from the deletion ledger."""

from __future__ import annotations

import argparse

from core.errors import UsageError
from jobs import params
from jobs.commands.common import run_id
from jobs.output import Output

NAME = "restore"
SUMMARY = (
    "bring back what a vacuum deleted on a versioned bucket: remove the delete markers the ledger "
    "shows the tool made"
)
EXAMPLE = """\
  inventory-vacuum restore --inventory-table s3://meta/warehouse/inventory --tables tables.yaml \\
      --table events --run-id 20261125T213000Z-1a2b3c4d --dry-run"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    params.INVENTORY_TABLE.add(parser)
    params.TABLES.add(parser)
    params.RESTORE_TABLE.add(parser)
    params.RUN_ID.add(parser)
    params.SINCE.add(parser)
    params.RESTORE_DRY_RUN.add(parser)
    params.HISTORY_TABLE.add(parser)
    params.LEDGER_TABLE.add(parser)
    params.JSON.add(parser)


def run(args: argparse.Namespace, output: Output) -> int:
    from core.paths import StorageLocation
    from core.registry import load_registry
    from core.session import build_spark_session
    from core.tables import ToolTables
    from vacuum.restore import RestoreOptions, restore_tables

    if args.run_id is None and args.since is None:
        raise UsageError("name what to restore: --run-id RUN_ID, --since TIMESTAMP, or both")
    StorageLocation.parse(args.inventory_table, what="--inventory-table")
    tables = load_registry(args.tables).select(args.table_names)
    not_s3 = [t.name for t in tables if not t.location.is_s3]
    if not_s3:
        raise UsageError(f"table(s) {', '.join(not_s3)} are not on S3: only S3 versions can be restored")
    located = ToolTables.beside(
        args.inventory_table, vacuum_runs=args.history_table, vacuum_deletions=args.ledger_table
    )
    options = RestoreOptions(
        ledger_table=located.vacuum_deletions,
        history_table=located.vacuum_runs,
        run_id=args.run_id,
        since=args.since,
        dry_run=args.dry_run,
    )
    spark = build_spark_session("inventory-vacuum restore")
    result = restore_tables(spark, tables, options, run_id=run_id())
    output.show(NAME, result)
    return 0 if result.ok else 1
