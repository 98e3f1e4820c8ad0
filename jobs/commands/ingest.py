"""``inventory-vacuum ingest``: load S3 Inventory deliveries into the inventory Delta table."""

from __future__ import annotations

import argparse

from jobs import params
from jobs.commands.common import run_id, s3_destination
from jobs.output import Output

NAME = "ingest"
SUMMARY = "load S3 Inventory deliveries into the inventory Delta table"
EXAMPLE = """\
  inventory-vacuum ingest --destination s3://inventory-dest/inventory --source-bucket lake \\
      --config-id daily --inventory-table s3://meta/warehouse/inventory --tables tables.yaml"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    params.DESTINATION.add(parser)
    params.SOURCE_BUCKET.add(parser)
    params.CONFIG_ID.add(parser)
    params.DELIVERY_DATE.add(parser)
    params.INVENTORY_TABLE.add(parser)
    params.TABLES.add(
        parser, required=False, help="tables.yaml, to tag each object with its owning table (optional)"
    )
    params.RUNS_TABLE.add(parser)
    params.USAGE_TABLE.add(parser)
    params.JSON.add(parser)


def run(args: argparse.Namespace, output: Output) -> int:
    from core.paths import StorageLocation
    from core.registry import load_registry
    from core.s3 import s3_client
    from core.session import build_spark_session
    from core.tables import ToolTables
    from inventory.load import IngestRequest, ingest

    destination = s3_destination(args.destination)
    StorageLocation.parse(args.inventory_table, what="--inventory-table")
    registry = load_registry(args.tables) if args.tables else None
    tables = ToolTables.beside(
        args.inventory_table, inventory_runs=args.runs_table, inventory_usage=args.usage_table
    )
    request = IngestRequest(
        destination=destination,
        source_buckets=tuple(dict.fromkeys(args.source_buckets)),
        config_id=args.config_id,
        inventory_table=args.inventory_table,
        inventory_date=args.date,
        registry=registry,
        runs_table=tables.inventory_runs,
        usage_table=tables.inventory_usage,
    )
    spark = build_spark_session("inventory-vacuum ingest")
    result = ingest(spark, s3_client(), request, run_id=run_id())
    output.show(NAME, result)
    return 0 if result.ok else 1
