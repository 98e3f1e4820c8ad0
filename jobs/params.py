"""Every command-line option, declared once: its flag, type, default and help.

Commands pick the options they take (``params.INVENTORY_TABLE.add(parser)``), overriding only
what differs for them (a help text, whether it is required). Help shows each default.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from typing import Any


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's and the example's line breaks; adds ``(default: X)`` to an
    option's help when it has a default worth saying (not None, not a flag's False)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            text != argparse.SUPPRESS
            and "%(default)" not in text
            and default not in (None, False, argparse.SUPPRESS)
            and action.option_strings
        ):
            text += " (default: %(default)s)"
        return text


# ---- value types: each names what it expected -----------------------------------------------


def a_date(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from None


def a_timestamp(text: str) -> datetime:
    """An ISO 8601 date or time; UTC when it names no offset."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a timestamp (ISO 8601, e.g. 2026-11-25T21:30:00Z)"
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


MAX_REQUESTS_IN_FLIGHT = 64


def requests_in_flight(text: str) -> int:
    value = positive_int(text)
    if value > MAX_REQUESTS_IN_FLIGHT:
        raise argparse.ArgumentTypeError(f"{text!r} must be at most {MAX_REQUESTS_IN_FLIGHT}")
    return value


def trend_days(text: str) -> int:
    if not text.isdigit() or int(text) > 3650:
        raise argparse.ArgumentTypeError(f"expected a whole number of days from 0 to 3650, got {text!r}")
    return int(text)


def hours(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of hours") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number of hours >= 0")
    return value


def share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be a number in (0, 1]")
    return value


# ---- the options ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    """One option: its flags and ``add_argument`` keywords, added to a parser with overrides."""

    flags: tuple[str, ...]
    settings: dict[str, Any] = field(default_factory=dict)

    def add(self, parser: argparse.ArgumentParser, **overrides: Any) -> None:
        parser.add_argument(*self.flags, **{**self.settings, **overrides})


def _option(*flags: str, **settings: Any) -> Option:
    return Option(flags, settings)


INVENTORY_TABLE = _option(
    "--inventory-table",
    required=True,
    metavar="URI",
    help="location of the inventory Delta table (s3://BUCKET/PATH); the tool's history tables and "
    "deletion ledger live beside it unless given",
)
TABLES = _option(
    "--tables",
    required=True,
    metavar="FILE",
    help="tables.yaml (a local path or s3:// URI): the registered tables, their owners and retention",
)
JSON = _option("--json", action="store_true", help="print one JSON object on stdout instead of text")
DESTINATION = _option(
    "--destination", required=True, metavar="s3://BUCKET/PREFIX", help="where S3 Inventory delivers"
)
CONFIG_ID = _option("--config-id", required=True, metavar="ID", help="the S3 Inventory configuration ID")
RUNS_TABLE = _option(
    "--runs-table",
    metavar="URI",
    help="the inventory_runs history table (default: beside the inventory table)",
)
USAGE_TABLE = _option(
    "--usage-table",
    metavar="URI",
    help="the inventory_usage table: bytes by table, class and version state, for the chargeback's "
    "trend (default: beside the inventory table)",
)
HISTORY_TABLE = _option(
    "--history-table",
    metavar="URI",
    help="the vacuum_runs history table (default: beside the inventory table)",
)
LEDGER_TABLE = _option(
    "--ledger-table",
    metavar="URI",
    help="the vacuum_deletions ledger, one row per deleted object (default: beside the inventory table)",
)

# ingest
SOURCE_BUCKET = _option(
    "--source-bucket",
    required=True,
    action="append",
    dest="source_buckets",
    metavar="BUCKET",
    help="an inventoried bucket to load (repeat for several)",
)
DELIVERY_DATE = _option(
    "--date", type=a_date, metavar="YYYY-MM-DD", help="the delivery's date (default: the newest complete one)"
)

# vacuum
TABLE = _option(
    "--table",
    action="append",
    dest="table_names",
    metavar="NAME",
    help="vacuum only this registered table (repeat for several; default: every enabled table)",
)
RETAIN_HOURS = _option(
    "--retain-hours",
    type=hours,
    metavar="HOURS",
    help="the retention to vacuum with (default: the table's registered retention, else its own "
    "delta.deletedFileRetentionDuration); longer than the table's is refused",
)
ALLOW_UNSAFE_RETENTION = _option(
    "--allow-unsafe-retention",
    action="store_true",
    help="allow a retention shorter than the table's own (time travel and concurrent readers "
    "within it may break)",
)
DRY_RUN = _option(
    "--dry-run", action="store_true", help="plan and report only: nothing is deleted, nothing ledgered"
)
MODE = _option(
    "--mode",
    default="inventory",
    choices=["inventory", "flat", "list", "lite"],
    help="inventory: the S3 Inventory table; flat: one flat listing of the table made now; "
    "list/lite: Delta's own listing VACUUM / VACUUM LITE",
)
DELETE_WITH = _option(
    "--delete-with",
    default="auto",
    choices=["auto", "delta", "batch"],
    help="batch: S3 DeleteObjects, counted per key (auto's choice on S3 in the inventory and flat "
    "modes); delta: Delta's own VACUUM, then a check of what is gone",
)
VERIFY_EXISTENCE = _option(
    "--verify-existence",
    action=argparse.BooleanOptionalAction,
    default=None,
    help="check which candidates still exist before deleting (a HEAD per file or a LIST per "
    "directory, whichever is fewer), so objects deleted by someone else since the inventory was "
    "taken are reported as already gone and not ledgered as deleted (default, for a table on "
    "S3: on with --delete-with delta, and with auto in list and lite modes; off with the batch "
    "delete)",
)
MAX_INVENTORY_AGE_HOURS = _option(
    "--max-inventory-age-hours",
    type=hours,
    default=72.0,
    metavar="HOURS",
    help="refuse a table whose rows in the inventory were taken longer ago than this",
)
MIN_COVERAGE = _option("--min-coverage", type=share, default=0.99, help=argparse.SUPPRESS)
ALLOW_VERSIONED = _option(
    "--allow-versioned",
    action="store_true",
    help="vacuum tables in versioned buckets, where a delete leaves a noncurrent version that is "
    "billed until a lifecycle rule expires it",
)
REPORT = _option(
    "--report",
    metavar="FILE",
    help="also write the JSON report to this file (/dev/stdout: the standard output, before the result)",
)
CANDIDATES = _option(
    "--candidates", metavar="FILE", help="write the candidate list to this .parquet or .csv file"
)
PARALLEL = _option("--parallel", type=positive_int, default=4, metavar="N", help="tables vacuumed at once")
DELETE_REQUESTS_PER_TASK = _option(
    "--delete-requests-per-task",
    type=requests_in_flight,
    default=4,  # vacuum.execute.REQUESTS_IN_FLIGHT
    metavar="N",
    help="DeleteObjects requests each Spark task of a batch delete sends at once, 1 to "
    f"{MAX_REQUESTS_IN_FLIGHT}; a task that S3 answers SlowDown (or another error worth "
    "a retry) starts no new request until those in flight, with their retries, have ended, then "
    "sends one at a time",
)

# restore
RESTORE_TABLE = _option(
    "--table",
    required=True,
    action="append",
    dest="table_names",
    metavar="NAME",
    help="restore what the ledger shows deleted from this registered table (repeat for several)",
)
RUN_ID = _option(
    "--run-id",
    metavar="RUN_ID",
    help="restore the objects this vacuum run deleted (its run_id in vacuum_runs and the ledger)",
)
SINCE = _option(
    "--since",
    type=a_timestamp,
    metavar="TIMESTAMP",
    help="restore the objects deleted at or after this time (ISO 8601, e.g. 2026-11-25T21:30:00Z; "
    "UTC when no offset is given)",
)
RESTORE_DRY_RUN = _option(
    "--dry-run", action="store_true", help="name what would be restored: nothing changes, nothing ledgered"
)

# chargeback
GROUP_BY = _option(
    "--by", default="owner", metavar="GROUPING", help="table, owner, bucket, storage_class or prefix[:DEPTH]"
)
PRICES = _option(
    "--prices", metavar="FILE", help="a price file (default: the packaged AWS us-east-1 list prices)"
)
REPORT_FORMAT = _option(
    "--format",
    default="text",
    choices=["text", "csv", "json", "html"],
    help="the report's format (--json is --format json)",
)
OUTPUT = _option("--output", metavar="FILE", help="write the report to this file instead of stdout")
TREND_DAYS = _option(
    "--trend-days",
    type=trend_days,
    default=30,
    metavar="DAYS",
    help="days of history in the trend (0: no trend)",
)
RECLAIMABLE = _option(
    "--reclaimable",
    action="store_true",
    help="compute what a vacuum would delete now (a vacuum dry run of every enabled table), "
    "instead of reading the newest dry run from vacuum_runs",
)

# chargeback --advise
ADVISE = _option(
    "--advise",
    action="store_true",
    help="add recommendations, each with its monthly saving at the price file's prices: lifecycle rules "
    "that expire noncurrent versions and delete markers on versioned buckets (as JSON for "
    "aws s3api put-bucket-lifecycle-configuration and as Terraform), small objects billed at their "
    "class's minimum size, and old objects under no registered table",
)
RESTORE_WINDOW_DAYS = _option(
    "--restore-window-days",
    type=positive_int,
    default=30,
    metavar="DAYS",
    help="with --advise: the NoncurrentDays of the recommended rules, how long a vacuum can be undone "
    "with inventory-vacuum restore",
)
UNOWNED_AGE_DAYS = _option(
    "--unowned-age-days",
    type=positive_int,
    default=90,
    metavar="DAYS",
    help="with --advise: objects under no registered table last modified at least this many days "
    "before their inventory was taken are reported as old",
)
