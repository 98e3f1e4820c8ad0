"""How a table's plan is sized, A/B: the inventory dry run of one synthetic table (the vacuum at
scale benchmark's, 100k files by default) under each sizing, alternated round by round in one JVM,
in the same order each round, so the machine's day weighs on every variant alike; the first round
also carries the JIT's warming, most for the variants that run first, so read the medians of
three rounds or more, not one round.

    .venv/bin/python -m benchmarks.plan_sizing                       # 100k files, 3 rounds
    .venv/bin/python -m benchmarks.plan_sizing --files 30000 --rounds 5 \\
        --variants 250000/100000,50000/50000

A variant is ``OBJECTS/ACTIONS``: inventory objects per shuffle partition of the plan
(``vacuum.snapshot._OBJECTS_PER_SHUFFLE_PARTITION``) and checkpoint actions per partition of
Delta's snapshot (``core.tables._ACTIONS_PER_SNAPSHOT_PARTITION``). The script sets those two module constants
between runs; everything else is the command's own code path (``vacuum_tables``). Every run must
find exactly the table's garbage, or the script stops. Results: ``results/plan_sizing.{json,md}``.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmarks.report import jvm_output_on_stderr, write_results
from benchmarks.s3_server import BenchmarkS3Server, install_indexed_listing
from benchmarks.vacuum_at_scale import (
    DEFAULT_LATENCY_MS,
    META_BUCKET,
    MODES,
    RESULTS,
    BenchmarkFailure,
    VacuumAtScale,
    java_of,
    machine,
)

log = logging.getLogger("benchmarks.plan_sizing")
DEFAULT_VARIANTS = "250000/100000,50000/100000,50000/50000"


def _sizing(variant: str) -> tuple[int, int]:
    objects, actions = (int(part) for part in variant.split("/"))
    if objects < 1 or actions < 1:
        raise ValueError(variant)
    return objects, actions


def run(server: BenchmarkS3Server, files: int, rounds: int, variants: list[str]) -> dict[str, Any]:
    import core.tables as tables
    import vacuum.snapshot as snapshot
    from core.s3 import s3_client
    from core.session import build_spark_session

    mode = MODES["inventory-batch"]
    s3 = s3_client()
    s3.create_bucket(Bucket=META_BUCKET)
    spark = build_spark_session("inventory-vacuum benchmark: plan sizing", {"spark.driver.memory": "4g"})
    seconds: dict[str, list[float]] = {v: [] for v in variants}
    try:
        benchmark = VacuumAtScale(spark, server, s3, [mode], DEFAULT_LATENCY_MS)
        benchmark.warm_up()
        table, _, _ = benchmark.prepare(files, f"plan-sizing-{files}")
        expected = table.paths(*mode.finds)
        for number in range(rounds):
            for variant in variants:
                snapshot._OBJECTS_PER_SHUFFLE_PARTITION, tables._ACTIONS_PER_SNAPSHOT_PARTITION = _sizing(
                    variant
                )
                phase, candidates, _ = benchmark.run_mode(mode, table, dry_run=True)
                if candidates != expected:
                    raise BenchmarkFailure(
                        f"{variant}: the dry run found {len(candidates)} candidates, expected {len(expected)}"
                    )
                seconds[variant].append(round(phase.seconds, 3))
                log.info("round %d, %s: %.2f s", number + 1, variant, phase.seconds)
    finally:
        spark.stop()
    return {
        "benchmark": "plan_sizing",
        "files": files,
        "rounds": rounds,
        "variants": {
            v: {"seconds_each": s, "median": statistics.median(s), "min": min(s)} for v, s in seconds.items()
        },
    }


def markdown(document: dict[str, Any]) -> str:
    before = document["machine_before"]
    lines = [
        "# Plan sizing",
        "",
        f"`{document['command']}`, started {document['started_at'][:19]}Z, {document['seconds']:.0f} s "
        f"in all. Machine: {before['cpus']} CPUs{java_of(before)}, load average {before['load_average_1_5_15'][0]} "
        "before. The inventory dry run of one table of "
        f"{document['files']:,} files, {document['rounds']} rounds, the variants alternated in each.",
        "",
        "| objects per shuffle partition / actions per snapshot partition | median s | fastest s | each "
        "round, s | median ÷ first variant's |",
        "|---|---:|---:|---|---:|",
    ]
    first = next(iter(document["variants"].values()))["median"]
    for variant, result in document["variants"].items():
        each = ", ".join(f"{s:.2f}" for s in result["seconds_each"])
        lines.append(
            f"| {variant} | {result['median']:.2f} | {result['min']:.2f} | {each} | "
            f"{result['median'] / first:.2f}× |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.plan_sizing", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--files", type=int, default=100_000, help="table size (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every variant (default %(default)s)")
    parser.add_argument("--variants", default=DEFAULT_VARIANTS, help="OBJECTS/ACTIONS, comma-separated")
    parser.add_argument("--output", type=Path, default=RESULTS, help="results folder (default %(default)s)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.files < 720:
        parser.error("--files must be at least 720 (one file per partition)")
    variants = args.variants.split(",")
    try:
        for variant in variants:
            _sizing(variant)
    except ValueError:
        parser.error(
            f"--variants: {args.variants!r} is not OBJECTS/ACTIONS[,OBJECTS/ACTIONS...] of positive numbers"
        )
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s", stream=sys.stderr)
    log.setLevel(logging.INFO)
    started_at = datetime.now(timezone.utc)
    before = machine()
    server = BenchmarkS3Server(0.0)
    undo = None
    try:
        with jvm_output_on_stderr():
            server.start()
            undo = install_indexed_listing()
            server.use_in_environment()
            document = run(server, args.files, args.rounds, variants)
    except BenchmarkFailure as failure:
        print(f"plan_sizing FAILED: {failure}", file=sys.stderr)
        return 1
    finally:
        if undo is not None:
            undo()
        server.stop()
    document.update(
        command=" ".join(["python -m benchmarks.plan_sizing", *(argv if argv is not None else sys.argv[1:])]),
        started_at=started_at.isoformat(),
        seconds=round(time.time() - started_at.timestamp(), 1),
        machine_before=before,
    )
    text = markdown(document)
    write_results(args.output, "plan_sizing", document, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
