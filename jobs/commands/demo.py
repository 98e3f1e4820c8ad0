"""``inventory-vacuum demo``: everything end to end on a local S3 server with generated tables."""

from __future__ import annotations

import argparse

from jobs import params
from jobs.output import Output

NAME = "demo"
SUMMARY = "run ingest, vacuum and chargeback end to end on a local S3 server with demo data"
EXAMPLE = "  inventory-vacuum demo --workdir .demo"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workdir", default=".demo", metavar="DIR", help="where tables.yaml and the reports are written"
    )
    params.JSON.add(parser)


def run(args: argparse.Namespace, output: Output) -> int:
    from jobs.demo import run_demo

    return run_demo(args.workdir, output)
