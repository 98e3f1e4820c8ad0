"""The ``inventory-vacuum`` command line: parse, set up the log, run one command, render.

Exit codes: 0 success; 1 when any bucket or table failed or was refused (the others still ran);
2 on usage and configuration errors.

In a terminal a command prints its answer only. The JVM's own output (Ivy's jar resolution,
log4j) and the tool's progress log go to a log file (``--log-file``, or a new file under the
system's temporary directory), whose path is printed when the command fails. Under
``spark-submit`` the JVM is already running and the log stays on stderr, where the cluster
collects it.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TextIO

from core.errors import InventoryVacuumError, UsageError
from core.local_files import results_shown_on
from jobs import params
from jobs.commands import COMMANDS
from jobs.output import output_for

log = logging.getLogger("inventory_vacuum")

DESCRIPTION = """\
Cheap, safe Delta Lake VACUUM on S3, driven by S3 Inventory.

The daily jobs: ingest the newest inventory delivery, vacuum the registered tables (a dry run
first), and price the storage per table and team."""
EXAMPLES = """\
examples:
  inventory-vacuum ingest --destination s3://inventory-dest/inventory --source-bucket lake \\
      --config-id daily --inventory-table s3://meta/warehouse/inventory --tables tables.yaml
  inventory-vacuum vacuum --inventory-table s3://meta/warehouse/inventory --tables tables.yaml --dry-run
  inventory-vacuum chargeback --inventory-table s3://meta/warehouse/inventory --tables tables.yaml

'inventory-vacuum COMMAND --help' describes each command's options."""
# where a command's log goes when the JVM's output would otherwise reach the terminal
JVM_LOG_VARIABLE = "INVENTORY_VACUUM_JVM_LOG"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="inventory-vacuum",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=params.HelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        sub = commands.add_parser(
            command.NAME,
            help=command.SUMMARY,
            description=command.SUMMARY[0].upper() + command.SUMMARY[1:] + ".",
            epilog=f"example:\n{command.EXAMPLE}",
            formatter_class=params.HelpFormatter,
        )
        command.add_arguments(sub)
        sub.add_argument(
            "--log-file",
            metavar="FILE",
            help="where the JVM's output and the progress log go (default: a new file under "
            f"{Path(tempfile.gettempdir())}/inventory-vacuum-UID, removed when the command "
            "succeeds; named on stderr when it fails)",
        )
        sub.set_defaults(handler=command.run)
    return parser


def run(argv: Sequence[str] | None, out: TextIO) -> int:
    """Run one command; its result goes to ``out``. Returns the exit code."""
    args = build_parser().parse_args(argv)
    return _run_parsed(args, out)


def _run_parsed(args: argparse.Namespace, out: TextIO, log_path: str | None = None) -> int:
    """Run the parsed command. When it fails and ``log_path`` holds something, one more line
    says where the log is (unless the error's own line names it already)."""
    named = False
    code = 1
    try:
        code = int(args.handler(args, output_for(args, out)))
    except InventoryVacuumError as error:
        print(f"inventory-vacuum {args.command}: error: {error}", file=sys.stderr)
        named = bool(log_path) and str(log_path) in str(error)
        code = error.exit_code
    except KeyboardInterrupt:  # Ctrl-C outside a vacuum run's tables (which report theirs)
        print(f"inventory-vacuum {args.command}: interrupted", file=sys.stderr)
        code = 130
    finally:
        if code != 0 and log_path and not named and os.path.exists(log_path) and os.path.getsize(log_path):
            print(f"inventory-vacuum {args.command}: the log is in {log_path}", file=sys.stderr)
    return code


def _submitted() -> bool:
    """Started by ``spark-submit``: the JVM runs already, and its launcher gave us the gateway."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _log_file(args: argparse.Namespace) -> tuple[str, bool]:
    """The log file this command writes, and whether it is a new temporary one (removed again when
    the command succeeds): ``--log-file``, the environment's, or a new private file in a folder
    of this user's under the system's temporary directory."""
    given = args.log_file or os.environ.get(JVM_LOG_VARIABLE)
    if given:
        try:
            with open(given, "a", encoding="utf-8"):
                pass
        except OSError as error:
            raise UsageError(f"--log-file {given}: cannot write there: {error.strerror}") from None
        return str(given), False
    folder = Path(tempfile.gettempdir()) / f"inventory-vacuum-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        descriptor, path = tempfile.mkstemp(
            prefix=f"{args.command}-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-", suffix=".log", dir=folder
        )
    except OSError as error:
        raise UsageError(f"no log file under {folder}: {error.strerror}; give one with --log-file") from None
    os.close(descriptor)
    return path, True


class _OneLine(logging.Formatter):
    """Warnings on the terminal as one line each; their tracebacks stay in the log file."""

    def format(self, record: logging.LogRecord) -> str:
        return f"inventory-vacuum: {record.levelname.lower()}: {record.getMessage()}"


def _set_up_logging(args: argparse.Namespace) -> tuple[str | None, bool]:
    """Send the progress log (and, via the session, the JVM's output) to the log file; keep
    warnings on stderr. Returns the log file (None when the log stays on stderr) and whether it
    is a temporary one."""
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for chatty in ("botocore", "boto3", "py4j", "urllib3"):  # credential lookups, gateway closes
        logging.getLogger(chatty).setLevel(logging.WARNING)
    if _submitted():
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        # Spark's launcher merges this process's stderr into stdout: keep --json's document clean
        handler.setLevel(logging.WARNING if getattr(args, "json", False) else logging.INFO)
        root.addHandler(handler)
        return None, False
    path, temporary = _log_file(args)
    os.environ[JVM_LOG_VARIABLE] = path  # the session points the JVM's stdout and stderr there
    to_file = logging.FileHandler(path, encoding="utf-8")
    to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(to_file)
    to_terminal = logging.StreamHandler(sys.stderr)
    to_terminal.setLevel(logging.WARNING)
    to_terminal.setFormatter(_OneLine())
    root.addHandler(to_terminal)
    return path, temporary


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point. Only the result is printed on stdout: everything else (Spark's JVM
    included, which shares this process's stdout) is sent to stderr or the log file, so
    ``--json`` stays clean."""
    args = build_parser().parse_args(argv)
    try:
        log_path, temporary = _set_up_logging(args)
    except InventoryVacuumError as error:
        print(f"inventory-vacuum {args.command}: error: {error}", file=sys.stderr)
        return error.exit_code
    sys.stdout.flush()
    result_stream = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    code = 1
    try:
        with results_shown_on(result_stream.fileno()):  # a --report there goes on this stream
            code = _run_parsed(args, result_stream, log_path)
        return code
    finally:
        result_stream.flush()
        if temporary and log_path and (code == 0 or not os.path.getsize(log_path)):
            os.remove(log_path)  # nothing failed, or nothing written: nothing to read (a given file stays)


if __name__ == "__main__":
    sys.exit(main())
