"""``inventory-vacuum iam-policy``: the S3 IAM policy of a job's role, as infra/terraform grants it."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from core.errors import UsageError
from jobs import params
from jobs.output import Output

NAME = "iam-policy"
SUMMARY = "print the S3 IAM policy of a job's role (what infra/terraform grants)"
EXAMPLE = """\
  inventory-vacuum iam-policy --role vacuum --tables tables.yaml \\
      --inventory-table s3://meta/warehouse/inventory"""
# IAM's limit on a managed policy's characters (whitespace not counted)
MANAGED_POLICY_LIMIT = 6144


def add_arguments(parser: argparse.ArgumentParser) -> None:
    params.TABLES.add(parser, help="tables.yaml: the tables the vacuum may delete in")
    params.INVENTORY_TABLE.add(parser)
    parser.add_argument(
        "--role",
        default="vacuum",
        choices=["vacuum", "ingest", "chargeback", "restore"],
        help="the job whose role",
    )
    parser.add_argument(
        "--destination",
        metavar="s3://BUCKET/PREFIX",
        help="where the deliveries are (needed by --role ingest)",
    )
    params.JSON.add(parser, help="print the policy as one compact JSON object")


class Policy:
    """An IAM policy document (the console prints it indented, ``--json`` compact)."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document

    def to_dict(self) -> dict[str, Any]:
        return self.document


def run(args: argparse.Namespace, output: Output) -> int:
    from core.registry import load_registry
    from jobs.iam_policy import role_policy

    if args.role == "ingest" and not args.destination:
        raise UsageError("--role ingest needs --destination s3://BUCKET/PREFIX")
    policy = role_policy(
        args.role,
        load_registry(args.tables),
        args.inventory_table,
        destination=args.destination,
        tables_file=args.tables,
    )
    size = len(json.dumps(policy, separators=(",", ":")))
    if size > MANAGED_POLICY_LIMIT:
        print(
            f"inventory-vacuum iam-policy: {size} characters, over IAM's {MANAGED_POLICY_LIMIT:,} for a "
            "managed policy: split the per-table statements over several policies (infra/terraform does)",
            file=sys.stderr,
        )
    output.show(NAME, Policy(policy))
    return 0
