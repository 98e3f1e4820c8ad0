"""``inventory-vacuum snapshot``: write an S3 Inventory delivery from a live listing of a bucket."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from jobs import params
from jobs.commands.common import s3_destination
from jobs.output import Output

NAME = "snapshot"
SUMMARY = "write an S3 Inventory delivery from a live listing (for a bucket with no inventory yet)"
EXAMPLE = """\
  inventory-vacuum snapshot --bucket lake --destination s3://inventory-dest/inventory --config-id daily"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bucket", required=True, metavar="BUCKET", help="the bucket to list")
    params.DESTINATION.add(parser, help="s3://BUCKET/PREFIX to deliver to")
    params.CONFIG_ID.add(parser, help="the configuration ID the delivery is written under")
    parser.add_argument(
        "--format", default="parquet", choices=["parquet", "csv", "orc"], help="the delivery's file format"
    )
    parser.add_argument(
        "--versions",
        default="current",
        choices=["current", "all"],
        help="current objects only, or every version and delete marker",
    )
    parser.add_argument(
        "--rows-per-file", type=params.positive_int, default=250_000, metavar="N", help="rows per data file"
    )
    params.JSON.add(parser)


class _Snapshot:
    def __init__(self, value: Any) -> None:
        self.value = value

    def to_dict(self) -> dict[str, Any]:
        return asdict(self.value)


def run(args: argparse.Namespace, output: Output) -> int:
    from core.s3 import s3_client
    from inventory.delivery_writer import snapshot_bucket

    destination = s3_destination(args.destination)
    result = snapshot_bucket(
        s3_client(),
        args.bucket,
        destination,
        args.config_id,
        file_format=args.format,
        versions=args.versions,
        rows_per_file=args.rows_per_file,
    )
    output.show(NAME, _Snapshot(result))
    return 0
