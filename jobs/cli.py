"""The ``inventory-vacuum`` command line: parse, build the session, call the library, render.

Exit codes: 0 success; 1 when any bucket or table failed or was refused (the others still ran);
2 on usage and configuration errors.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import uuid
from collections.abc import Sequence
from datetime import date, datetime, timezone
from typing import TYPE_CHECKING, Any, TextIO

from core.errors import InventoryVacuumError, UsageError
from jobs.output import ConsoleOutput, JsonOutput, Output

if TYPE_CHECKING:
    from core.paths import StorageLocation

log = logging.getLogger("inventory_vacuum")


def _date(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _trend_days(text: str) -> int:
    if not text.isdigit() or int(text) > 3650:
        raise argparse.ArgumentTypeError(f"expected a whole number of days from 0 to 3650, got {text!r}")
    return int(text)


def _hours(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of hours") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number of hours >= 0")
    return value


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be a number in (0, 1]")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="inventory-vacuum", description="Cheap, safe Delta Lake VACUUM on S3, driven by S3 Inventory."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    ingest = commands.add_parser("ingest", help="load S3 Inventory deliveries into the inventory Delta table")
    ingest.add_argument(
        "--destination", required=True, help="s3://BUCKET/PREFIX the inventory is delivered to"
    )
    ingest.add_argument(
        "--source-bucket", required=True, action="append", dest="source_buckets", metavar="BUCKET"
    )
    ingest.add_argument("--config-id", required=True, help="the S3 Inventory configuration ID")
    ingest.add_argument("--date", type=_date, help="delivery date YYYY-MM-DD (default: newest complete)")
    ingest.add_argument("--inventory-table", required=True, help="location of the inventory Delta table")
    ingest.add_argument("--tables", help="tables.yaml, to tag each object with its owning table")
    ingest.add_argument("--runs-table", help="inventory_runs history location (default: beside the table)")
    ingest.add_argument(
        "--usage-table",
        help="inventory_usage location: noncurrent versions and the chargeback's trend (default: beside the table)",
    )
    ingest.add_argument("--json", action="store_true", help="print one JSON object on stdout")

    snapshot = commands.add_parser("snapshot", help="write an S3 Inventory delivery from a live listing")
    snapshot.add_argument("--bucket", required=True)
    snapshot.add_argument("--destination", required=True, help="s3://BUCKET/PREFIX to deliver to")
    snapshot.add_argument("--config-id", required=True)
    snapshot.add_argument("--format", default="parquet", choices=["parquet", "csv", "orc"])
    snapshot.add_argument("--versions", default="current", choices=["current", "all"])
    snapshot.add_argument("--rows-per-file", type=_positive_int, default=250_000)
    snapshot.add_argument("--json", action="store_true")

    vacuum = commands.add_parser("vacuum", help="vacuum registered Delta tables using the inventory")
    vacuum.add_argument("--inventory-table", required=True)
    vacuum.add_argument("--tables", required=True, help="tables.yaml: the only tables vacuum may touch")
    vacuum.add_argument("--table", action="append", dest="table_names", metavar="NAME")
    vacuum.add_argument("--retain-hours", type=_hours)
    vacuum.add_argument("--allow-unsafe-retention", action="store_true")
    vacuum.add_argument("--dry-run", action="store_true")
    vacuum.add_argument(
        "--mode",
        default="inventory",
        choices=["inventory", "flat", "list", "lite"],
        help="inventory: the S3 Inventory table; flat: one flat listing of the table made now; "
        "list/lite: Delta's own listing VACUUM / VACUUM LITE",
    )
    vacuum.add_argument(
        "--delete-with",
        default="auto",
        choices=["auto", "delta", "batch"],
        help="batch: S3 DeleteObjects, counted per key (auto's choice on S3 in inventory mode); "
        "delta: Delta's own VACUUM, then a check of what is gone",
    )
    vacuum.add_argument(
        "--verify-existence",
        action="store_true",
        help="check which candidates still exist before deleting (a HEAD per file or a LIST per "
        "directory, whichever is fewer), so objects deleted by someone else since the inventory was "
        "taken are reported as already gone, not as deleted",
    )
    vacuum.add_argument("--max-inventory-age-hours", type=_hours, default=72.0)
    vacuum.add_argument("--min-coverage", type=_share, default=0.99, help=argparse.SUPPRESS)
    vacuum.add_argument("--allow-versioned", action="store_true")
    vacuum.add_argument("--report", help="also write the JSON report to this file")
    vacuum.add_argument("--candidates", help="write the candidate list to this .parquet or .csv path")
    vacuum.add_argument("--history-table", help="vacuum_runs location (default: beside the inventory table)")
    vacuum.add_argument(
        "--ledger-table", help="vacuum_deletions ledger location (default: beside the inventory table)"
    )
    vacuum.add_argument("--parallel", type=_positive_int, default=4)
    vacuum.add_argument("--json", action="store_true")

    chargeback = commands.add_parser(
        "chargeback", help="objects, bytes and monthly storage cost per table, owner, bucket, class or prefix"
    )
    chargeback.add_argument("--inventory-table", required=True)
    chargeback.add_argument("--tables", required=True, help="tables.yaml: table names and owners")
    chargeback.add_argument(
        "--by", default="owner", help="table, owner, bucket, storage_class or prefix[:DEPTH] (default: owner)"
    )
    chargeback.add_argument("--prices", help="price file (default: the packaged AWS us-east-1 list prices)")
    chargeback.add_argument("--format", default="text", choices=["text", "csv", "json", "html"])
    chargeback.add_argument("--output", help="write the report to this file instead of stdout")
    chargeback.add_argument(
        "--history-table", help="vacuum_runs location (default: beside the inventory table)"
    )
    chargeback.add_argument(
        "--runs-table", help="inventory_runs location (default: beside the inventory table)"
    )
    chargeback.add_argument(
        "--usage-table",
        help="inventory_usage location, written by ingest (default: beside the inventory table)",
    )
    chargeback.add_argument(
        "--trend-days",
        type=_trend_days,
        default=30,
        help="days of history in the trend (default %(default)s; 0: no trend)",
    )
    chargeback.add_argument(
        "--reclaimable",
        action="store_true",
        help="compute what a vacuum would delete now (a vacuum dry run of every enabled table), "
        "instead of reading the newest dry run from vacuum_runs",
    )

    demo = commands.add_parser("demo", help="run everything end to end on a local S3 server with demo data")
    demo.add_argument("--workdir", default=".demo", help="where tables.yaml and reports are written")
    demo.add_argument("--json", action="store_true")

    commands.add_parser("fetch-jars", help="download the Delta and hadoop-aws jars into the local cache")

    iam_policy = commands.add_parser(
        "iam-policy", help="print the S3 IAM policy of a job's role (what infra/terraform grants)"
    )
    iam_policy.add_argument(
        "--tables", required=True, help="tables.yaml: the tables the vacuum may delete in"
    )
    iam_policy.add_argument("--inventory-table", required=True)
    iam_policy.add_argument("--role", default="vacuum", choices=["vacuum", "ingest", "chargeback"])
    iam_policy.add_argument("--destination", help="s3://BUCKET/PREFIX of the deliveries (--role ingest)")
    return parser


def run(argv: Sequence[str] | None, out: TextIO) -> int:
    """Run one command; results go to ``out``, logs to stderr. Returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    output: Output = JsonOutput(out) if getattr(args, "json", False) else ConsoleOutput(out)
    if getattr(args, "json", False):
        # Under spark-submit the Python process's stderr is merged into stdout by Spark's
        # launcher: keep progress logs out of the way of the JSON document.
        logging.getLogger().setLevel(logging.WARNING)
    try:
        handler = {
            "ingest": _ingest,
            "snapshot": _snapshot,
            "vacuum": _vacuum,
            "chargeback": lambda parsed, _: _chargeback(parsed, out),
            "demo": _demo,
            "fetch-jars": _fetch_jars,
            "iam-policy": lambda parsed, _: _iam_policy(parsed, out),
        }[args.command]
        return handler(args, output)
    except InventoryVacuumError as error:
        print(f"inventory-vacuum {args.command}: error: {error}", file=sys.stderr)
        return error.exit_code


def _ingest(args: argparse.Namespace, output: Output) -> int:
    from core.paths import StorageLocation
    from core.registry import load_registry
    from core.s3 import s3_client
    from core.session import build_spark_session
    from core.tables import default_history_location
    from inventory.load import IngestRequest, ingest

    destination = _s3_destination(args.destination)
    StorageLocation.parse(args.inventory_table, what="--inventory-table")
    registry = load_registry(args.tables) if args.tables else None
    request = IngestRequest(
        destination=destination,
        source_buckets=tuple(dict.fromkeys(args.source_buckets)),
        config_id=args.config_id,
        inventory_table=args.inventory_table,
        inventory_date=args.date,
        registry=registry,
        runs_table=args.runs_table or default_history_location(args.inventory_table, "inventory_runs"),
        usage_table=args.usage_table or default_history_location(args.inventory_table, "inventory_usage"),
    )
    spark = build_spark_session("inventory-vacuum ingest")
    result = ingest(spark, s3_client(), request, run_id=_run_id())
    output.show("ingest", result)
    return 0 if result.ok else 1


def _s3_destination(uri: str) -> StorageLocation:
    from core.paths import StorageLocation

    destination = StorageLocation.parse(uri, what="--destination")
    if not destination.is_s3:
        raise UsageError(f"--destination {uri!r} must be an s3:// location")
    return destination


def _snapshot(args: argparse.Namespace, output: Output) -> int:
    from core.s3 import s3_client
    from inventory.delivery_writer import snapshot_bucket

    destination = _s3_destination(args.destination)
    result = snapshot_bucket(
        s3_client(),
        args.bucket,
        destination,
        args.config_id,
        file_format=args.format,
        versions=args.versions,
        rows_per_file=args.rows_per_file,
    )
    output.show("snapshot", _AsDict(result))
    return 0


def _vacuum(args: argparse.Namespace, output: Output) -> int:
    import json

    from core.paths import StorageLocation
    from core.registry import load_registry
    from core.session import build_spark_session
    from core.tables import default_history_location
    from vacuum.runner import VacuumOptions, vacuum_tables, write_candidates

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
    StorageLocation.parse(args.inventory_table, what="--inventory-table")
    registry = load_registry(args.tables)
    tables = registry.select(args.table_names)
    if not tables:
        raise UsageError(f"{args.tables}: no enabled tables to vacuum")
    for flag, path in (("--report", args.report), ("--candidates", args.candidates)):
        if path:
            _check_writable(flag, path)  # before anything is deleted, not after
    history_table = args.history_table or default_history_location(args.inventory_table, "vacuum_runs")
    ledger_table = args.ledger_table or default_history_location(args.inventory_table, "vacuum_deletions")
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
        collect_candidates=bool(args.candidates),
        verify_existence=args.verify_existence,
        history_table=history_table,
        ledger_table=ledger_table,
        protected_locations=_protected_paths(
            args.inventory_table, history_table, ledger_table, registry, args.tables
        ),
    )
    spark = build_spark_session("inventory-vacuum vacuum")
    result = vacuum_tables(spark, tables, options, run_id=_run_id())
    if args.candidates:
        write_candidates(result.tables, args.candidates)
    if args.report:
        with open(args.report, "w", encoding="utf-8") as report:
            json.dump(result.to_dict(), report, indent=2, default=str)
    output.show("vacuum", result)
    return 0 if result.ok else 1


def _protected_paths(
    inventory_table: str, history_table: str, ledger_table: str, registry: Any, tables_file: str
) -> tuple[str, ...]:
    """Every location no vacuum may delete under: this tool's tables and every registered table."""
    from core.tables import default_history_location

    protected = (
        inventory_table,
        history_table,
        ledger_table,
        default_history_location(inventory_table, "inventory_runs"),
        default_history_location(inventory_table, "inventory_usage"),
        *[t.path for t in registry.tables],
        *([tables_file] if "://" in tables_file else []),
    )
    return tuple(p for p in protected if not p.startswith("/"))


def _reclaimable_now(args: argparse.Namespace, spark: Any, registry: Any, history_table: str) -> Any:
    """A vacuum dry run of every enabled table, as ``inventory-vacuum vacuum --dry-run`` plans it
    (not recorded in vacuum_runs: a chargeback only reads)."""
    from core.tables import default_history_location
    from vacuum.runner import VacuumOptions, vacuum_tables

    ledger_table = default_history_location(args.inventory_table, "vacuum_deletions")
    options = VacuumOptions(
        inventory_table=args.inventory_table,
        dry_run=True,
        ledger_table=ledger_table,
        protected_locations=_protected_paths(
            args.inventory_table, history_table, ledger_table, registry, args.tables
        ),
    )
    return vacuum_tables(spark, registry.select(None), options, run_id=_run_id()).tables


def _chargeback(args: argparse.Namespace, out: TextIO) -> int:
    from core.paths import StorageLocation
    from core.registry import load_registry
    from core.session import build_spark_session
    from core.tables import default_history_location
    from inventory.chargeback import chargeback, load_prices, parse_group_by
    from jobs.chargeback_output import render

    by = parse_group_by(args.by)
    prices = load_prices(args.prices)
    StorageLocation.parse(args.inventory_table, what="--inventory-table")
    registry = load_registry(args.tables)
    if args.output:
        _check_writable("--output", args.output)
    spark = build_spark_session("inventory-vacuum chargeback")
    history_table = args.history_table or default_history_location(args.inventory_table, "vacuum_runs")
    report = chargeback(
        spark,
        args.inventory_table,
        registry,
        by,
        prices,
        vacuum_runs_table=history_table,
        computed_reclaimable=_reclaimable_now(args, spark, registry, history_table)
        if args.reclaimable
        else None,
        inventory_runs_table=args.runs_table
        or default_history_location(args.inventory_table, "inventory_runs"),
        usage_table=args.usage_table or default_history_location(args.inventory_table, "inventory_usage"),
        trend_days=args.trend_days,
    )
    text = render(report, args.format)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as target:
            target.write(text)
        print(f"wrote the {args.format} chargeback report to {args.output}", file=sys.stderr)
    else:
        out.write(text)
        out.flush()
    return 0


def _check_writable(flag: str, path: str) -> None:
    """Fail now, with the flag's name, if ``path`` cannot be written."""
    existed = os.path.exists(path)
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as error:
        raise UsageError(f"{flag} {path}: cannot write there: {error.strerror}") from None
    if not existed:
        os.remove(path)


def _demo(args: argparse.Namespace, output: Output) -> int:
    from jobs.demo import run_demo

    return run_demo(args.workdir, output)


def _fetch_jars(args: argparse.Namespace, output: Output) -> int:
    from core.session import build_spark_session

    spark = build_spark_session("inventory-vacuum fetch-jars")
    spark.range(1).write.format("delta").mode("overwrite").save(
        f"/tmp/inventory-vacuum-jar-check-{uuid.uuid4()}"
    )
    print("Delta and hadoop-aws jars are in the local Ivy cache", file=sys.stderr)
    return 0


def _iam_policy(args: argparse.Namespace, out: TextIO) -> int:
    import json

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
    if size > 6144:
        print(
            f"inventory-vacuum iam-policy: {size} characters, over IAM's 6,144 for a managed policy: "
            "split the per-table statements over several policies (infra/terraform does)",
            file=sys.stderr,
        )
    out.write(json.dumps(policy, indent=2) + "\n")
    out.flush()
    return 0


class _AsDict:
    def __init__(self, value: object) -> None:
        self.value = value

    def to_dict(self) -> dict[str, object]:
        from dataclasses import asdict

        return asdict(self.value)  # type: ignore[call-overload, no-any-return]


def _run_id() -> str:
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point. Only the result is printed on stdout: everything else (Spark's JVM
    included, which shares this process's stdout) is sent to stderr, so ``--json`` stays clean."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")
    for chatty in ("botocore", "boto3", "py4j", "urllib3"):  # credential lookups, gateway closes
        logging.getLogger(chatty).setLevel(logging.WARNING)
    sys.stdout.flush()
    result_stream = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    try:
        return run(argv, result_stream)
    finally:
        result_stream.flush()


if __name__ == "__main__":
    sys.exit(main())
