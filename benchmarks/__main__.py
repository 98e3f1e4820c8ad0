"""Every benchmark in one command, at quick sizes (about a quarter of an hour on a 2-core machine).

    .venv/bin/python -m benchmarks                 # all five, the quick sizes below
    .venv/bin/python -m benchmarks --full          # each benchmark's own default sizes (about an hour)

Either ends by writing the goals' standing from results/ (``benchmarks.goals``).

Each benchmark runs in its own process (its own JVM and local S3 server), one after the other, and
writes its results to ``benchmarks/results/quick/`` (``--full``: ``benchmarks/results/``); the exit
code is the first non-zero one. Larger sizes are each script's flags
(``python -m benchmarks.vacuum_at_scale --files 100000``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

QUICK = (
    ("vacuum_at_scale", ["--files", "5000", "--modes", "list,inventory-batch,delta-rs"]),
    (
        "many_tables",
        [
            "--tables",
            "16",
            "--parallel",
            "4",
            "--no-compare-default",
            "--listing-tables",
            "2",
            "--inventory-loop-tables",
            "8",
        ],
    ),
    ("one_table", ["--rounds", "1"]),
    (
        "ingest_rate",
        ["--rows", "500000", "--formats", "parquet,csv", "--registered-tables", "1000", "--rounds", "1"],
    ),
    ("chargeback_rate", ["--rows", "1000000"]),
)
QUICK_RESULTS = Path(__file__).parent / "results" / "quick"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="each benchmark's own default sizes")
    args = parser.parse_args(argv)
    status = 0
    for name, quick in QUICK:
        sizes = [] if args.full else [*quick, "--output", str(QUICK_RESULTS)]
        command = [sys.executable, "-m", f"benchmarks.{name}", *sizes]
        print(f"== {' '.join(command[1:])}", file=sys.stderr, flush=True)
        started = time.monotonic()
        code = subprocess.run(command, check=False).returncode
        print(f"== {name}: exit {code} after {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
        status = status or code
    # the goals' standing, from results/ (their fleet rows read results/quick/ too)
    code = subprocess.run([sys.executable, "-m", "benchmarks.goals"], check=False).returncode
    return status or code


if __name__ == "__main__":
    sys.exit(main())
