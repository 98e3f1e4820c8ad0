"""Ingest rate: rows per second for synthetic S3 Inventory deliveries, Parquet and CSV.

A delivery of R rows (keys of a partitioned warehouse, several storage classes) is written in
AWS's format by ``inventory.delivery_writer.write_delivery`` (not timed), then loaded by
``inventory.load.ingest``, exactly what ``inventory-vacuum ingest`` runs, in one Spark session
started once (its start is reported apart). A small delivery is ingested first, unrecorded, so
the measured ingests are the steady state.

    .venv/bin/python -m benchmarks.ingest_rate                          # Parquet and CSV, 1M rows each
    .venv/bin/python -m benchmarks.ingest_rate --rows 10000000 --formats parquet
    .venv/bin/python -m benchmarks.ingest_rate --registered-tables 1000    # keys tagged with their table

With ``--registered-tables N`` the ingest tags each key with its owning table, as the daily job
does with its tables.yaml: the 100 tables the keys lie in, and N - 100 more in the same bucket at
other depths (an empty registry, the default, skips the tagging).

Each delivery is ingested ``--rounds`` times four ways (the order rotating; the median round of
each is reported), each into an inventory table and a usage table of its own:

- *key ranges, checked while written*: the command as it loads a bucket's later deliveries of
  at least ``inventory.load.READ_ONCE_FROM_BYTES`` (here whatever the size), with the bucket's
  counts in the usage table from an unrecorded ingest of the same delivery before the rounds
  (yesterday's delivery, in the daily job): the delivery is read once, and the write checks each
  row (:mod:`inventory.load`);
- *the same in snappy*: that with the Parquet files compressed by Spark's default codec, snappy,
  instead of the inventory table's zstd (as a job whose configuration sets the codec writes);
- *key ranges, checked first*: the command as it loads a bucket's first delivery, and a smaller
  one: a checking job reads the delivery, then the write reads it again, cut from the checking
  job's counts;
- *global sort, checked first*: the same with the keys sorted globally (Spark's range
  partitioner, which samples the delivery in a pass of its own), what the key ranges replace.

Beside each time stands what a table's slice of the inventory reads: for each of the 100 tables
the keys lie in, the files whose smallest and largest key (Delta's own statistics, read from the
table's log by delta-rs) meet the table's keys.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from benchmarks.many_tables import parse_event_log
from benchmarks.report import jvm_output_on_stderr, spark_setting, write_results
from benchmarks.vacuum_at_scale import java_of, machine, run_header

log = logging.getLogger("benchmarks.ingest_rate")
RESULTS = Path(__file__).parent / "results"
META = "bench-ingest-meta"
CLASSES = ("STANDARD", "STANDARD", "STANDARD", "INTELLIGENT_TIERING", "STANDARD_IA", "GLACIER_IR")


def synthetic_rows(bucket: str, rows: int, seed: int = 7) -> Iterator[dict[str, Any]]:
    """Inventory rows as ``snapshot_bucket`` lists them: 100 tables, daily partitions, parts."""
    rng = random.Random(seed)
    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    for index in range(rows):
        day = index % 365
        tag = f"{rng.getrandbits(128):032x}"
        yield {
            "bucket": bucket,
            "key": f"warehouse/t{index % 100:02d}/dt={(start + timedelta(days=day)).date()}/part-{index:09d}.snappy.parquet",
            "version_id": None,
            "is_latest": None,
            "is_delete_marker": None,
            "size": rng.randrange(1_000, 512_000_000),
            "last_modified_date": start + timedelta(days=day, seconds=index % 86_400),
            "e_tag": tag,
            "storage_class": CLASSES[index % len(CLASSES)],
            "is_multipart_uploaded": False,
            "checksum_algorithm": None,
        }


def registry_text(bucket: str, tables: int) -> str:
    """A tables.yaml: the 100 tables :func:`synthetic_rows` writes into, then ``tables - 100``
    others in the same bucket, at depths 3 to 5, that hold none of its keys."""
    paths = [f"warehouse/t{index:02d}" for index in range(min(tables, 100))]
    paths += [
        "/".join(["warehouse", f"team{index % 7}", *["x"] * (index % 3), f"t{index}"])
        for index in range(tables - len(paths))
    ]
    entries = [
        f"  - {{name: 't{n}', path: 's3://{bucket}/{p}', owner: o{n % 20}}}" for n, p in enumerate(paths)
    ]
    return "tables:\n" + "\n".join(entries) + "\n"


OURS = "key ranges, checked while written"
FIRST = "key ranges, checked first"
PEER = "global sort, checked first"
SNAPPY = "key ranges, checked while written, in snappy"
SIDES = (OURS, FIRST, PEER, SNAPPY)
READ_ONCE = (OURS, SNAPPY)  # the sides that load a later delivery, with the bucket's counts


def command_layout(result: dict[str, Any]) -> str | None:
    """The side the ingest command itself takes for a result's delivery (a bucket's later one),
    or None when the result does not say."""
    reads_once = result.get("command_reads_once")
    if reads_once is None:
        return None
    return OURS if reads_once else FIRST


@contextmanager
def _side(spark: Any, side: str, used: list[bool]) -> Iterator[None]:
    """The ingest as it is, read once whatever the delivery's size (``used`` gets whether it cut
    key ranges or fell back to the global sort), and for :data:`SNAPPY` with the job's codec set to
    snappy; or, for the peers, with the usage table's counts withheld, as for a bucket's first
    delivery (checked first), and for the global sort also the layout's ranges."""
    from inventory import load

    ranges_of, counts_of, read_once_from = load.key_ranges, load.last_key_groups, load.READ_ONCE_FROM_BYTES

    def recorded(groups: Any, partitions: int) -> Any:
        ranges = ranges_of(groups, partitions)
        used.append(ranges is not None)
        return ranges

    load.key_ranges = recorded if side != PEER else (lambda groups, partitions: None)  # type: ignore[assignment]
    if side in READ_ONCE:
        load.READ_ONCE_FROM_BYTES = 0
    else:
        load.last_key_groups = lambda *args: None  # type: ignore[assignment]
    # a job's own codec wins over the table's; after the side, the job's own is back, if it set one
    codec = spark_setting(spark, load.PARQUET_CODEC, "snappy") if side == SNAPPY else nullcontext()
    try:
        with codec:
            yield
    finally:
        load.key_ranges, load.last_key_groups, load.READ_ONCE_FROM_BYTES = (
            ranges_of,
            counts_of,
            read_once_from,
        )


def slice_files(table: str, bucket: str) -> dict[str, Any]:
    """The bucket's files in the inventory table and, over the 100 tables the keys lie in, how
    many of them a table's slice reads: those whose smallest and largest ``key`` in Delta's
    statistics (what its file skipping compares) meet the table's keys, ``warehouse/tNN/`` up to
    ``warehouse/tNN0``."""
    import pyarrow as pa
    from deltalake import DeltaTable

    from benchmarks.many_tables import storage_options

    actions = pa.table(
        DeltaTable(table, storage_options=storage_options(os.environ["AWS_ENDPOINT_URL"])).get_add_actions(
            flatten=True
        )
    ).to_pylist()
    own = [a for a in actions if a.get("partition.bucket") == bucket]
    files = [(a["min.key"], a["max.key"]) for a in own]
    records = sum(int(a["num_records"]) for a in own)
    reads = []
    for index in range(100):
        low, high = f"warehouse/t{index:02d}/", f"warehouse/t{index:02d}0"
        reads.append(sum(1 for least, most in files if least is None or (least < high and most >= low)))
    return {
        "files": len(files),
        "records": records,
        "file_bytes": sum(int(a["size_bytes"]) for a in own),
        "slice_files_mean": round(sum(reads) / len(reads), 2),
        "slice_files_max": max(reads),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rows", type=int, action="append", help="rows per delivery (repeatable); default 1M"
    )
    parser.add_argument("--formats", default="parquet,csv", help="comma-separated: parquet, csv, orc")
    parser.add_argument(
        "--registered-tables",
        type=int,
        default=0,
        help="tag keys with a registry of this many tables (at least 100: the tables the keys lie in)",
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="ingests of each layout, alternating (default 3); the median"
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    log.setLevel(logging.INFO)
    from testing.local_s3 import LocalS3Server

    with jvm_output_on_stderr():
        server = LocalS3Server().start()
        server.use_in_environment()
        try:
            document = run(args)
        finally:
            server.stop()
        text = markdown(document)
        write_results(args.output, "ingest_rate", document, text)
    print(text)
    return 0


def run(args: argparse.Namespace) -> dict[str, Any]:
    from core.paths import StorageLocation
    from core.registry import parse_registry
    from core.s3 import s3_client
    from core.session import build_spark_session
    from inventory.delivery_writer import write_delivery
    from inventory.load import READ_ONCE_FROM_BYTES, IngestRequest, ingest

    started_at = datetime.now(timezone.utc)
    before = machine()
    s3 = s3_client()
    s3.create_bucket(Bucket=META)
    destination = StorageLocation.parse(f"s3://{META}/reports")
    inventory = f"s3://{META}/tables/inventory"
    events = Path(tempfile.mkdtemp(prefix="ingest-rate-events-"))
    started = time.monotonic()
    spark = build_spark_session(
        "inventory-vacuum benchmark: ingest rate",
        {
            # where the time goes: each ingest's Spark jobs by step, from Spark's own event log
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": events.as_uri(),
            "spark.eventLog.rolling.enabled": "false",
            "spark.eventLog.compress": "false",
        },
    )
    spark_start = time.monotonic() - started

    def registry_of(bucket: str) -> Any:
        return (
            parse_registry(registry_text(bucket, args.registered_tables)) if args.registered_tables else None
        )

    def ingest_once(bucket: str, rows: int, side: str) -> dict[str, Any]:
        registry = registry_of(bucket)  # read before the clock starts, as the command reads its tables.yaml
        table = f"{inventory}_{SIDES.index(side)}"
        used: list[bool] = []
        since_ms = int(time.time() * 1000)
        started = time.monotonic()
        with _side(spark, side, used):
            result = ingest(
                spark,
                s3,
                IngestRequest(
                    destination=destination,
                    source_buckets=(bucket,),
                    config_id="daily",
                    inventory_table=table,
                    registry=registry,
                    usage_table=f"{table}_usage",
                ),
                run_id=f"benchmark-{bucket}",
            )
        seconds = time.monotonic() - started
        until_ms = int(time.time() * 1000)
        [outcome] = result.buckets
        files = slice_files(table, bucket)
        if outcome.status != "ok" or outcome.rows != rows or files["records"] != rows:
            raise SystemExit(
                f"ingest of {bucket} failed or lost rows: {outcome.to_dict()}, {files['records']} rows written"
            )
        if outcome.checked_while_writing != (side in READ_ONCE):
            raise SystemExit(f"{side}: the ingest of {bucket} took the other path: {outcome.to_dict()}")
        return {
            "layout": side if side == PEER or all(used) else f"{side}, fell back to a global sort",
            "ingest_seconds": round(seconds, 2),
            "rows_per_second": round(rows / seconds),
            **files,
            "window_ms": [since_ms, until_ms],
        }

    def sides(bucket: str, rows: int, rounds: int) -> list[dict[str, Any]]:
        """Each side ``rounds`` times, the order rotating round by round; per side its median
        round, with every round's seconds. First, unrecorded, the ingest that leaves the
        command's side the bucket's counts."""
        for reader in READ_ONCE:  # yesterday's delivery, checked first, into the side's tables
            table = f"{inventory}_{SIDES.index(reader)}"
            with _side(spark, FIRST, []):
                ingest(
                    spark,
                    s3,
                    IngestRequest(
                        destination,
                        (bucket,),
                        "daily",
                        table,
                        registry=registry_of(bucket),  # counts per table, as the daily job leaves them
                        usage_table=f"{table}_usage",
                    ),
                    run_id=f"benchmark-{bucket}-counts",
                )
        measured: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
        for index in range(rounds):
            for side in SIDES[index % len(SIDES) :] + SIDES[: index % len(SIDES)]:
                measured[side].append(ingest_once(bucket, rows, side))
        chosen = []
        for side in SIDES:
            ordered = sorted(measured[side], key=lambda one: one["ingest_seconds"])
            median = ordered[(len(ordered) - 1) // 2]
            chosen.append(
                {
                    **median,
                    "round_seconds": [one["ingest_seconds"] for one in measured[side]],
                    "round_layouts": [one["layout"] for one in measured[side]],
                }
            )
        return chosen

    def load(bucket: str, rows: int, file_format: str, rounds: int) -> dict[str, Any]:
        started = time.monotonic()
        delivery = write_delivery(
            s3, bucket, synthetic_rows(bucket, rows), destination, "daily", file_format=file_format
        )
        written = time.monotonic() - started
        data_bytes = sum(
            item["Size"]
            for page in s3.get_paginator("list_objects_v2").paginate(
                Bucket=META, Prefix=f"reports/{bucket}/daily/data/"
            )
            for item in page.get("Contents", [])
        )
        return {
            "format": file_format,
            "rows": rows,
            "data_files": delivery.data_files,
            "data_bytes": data_bytes,
            # the side the command takes for this delivery (a later one of the bucket)
            "command_reads_once": data_bytes >= READ_ONCE_FROM_BYTES,
            "delivery_write_seconds": round(written, 2),
            "bucket": bucket,
            "sides": sides(bucket, rows, rounds),
        }

    try:
        log.info("warm-up ingest (not recorded)")
        load("bench-ingest-warm-up", 10_000, "parquet", 1)
        results = []
        for file_format in args.formats.split(","):
            for rows in args.rows or [1_000_000]:
                log.info("ingest of a %s delivery of %d rows", file_format, rows)
                results.append(load(f"bench-ingest-{file_format}-{rows}", rows, file_format, args.rounds))
    finally:
        spark.stop()  # flushes the event log
    for result in results:
        for side in result["sides"]:
            since_ms, until_ms = side.pop("window_ms")
            steps = parse_event_log(events, since_ms, until_ms, group_prefix="ingest ")["steps"]
            side["spark_steps"] = [
                {"step": s["step"], "jobs": int(s["jobs_per_table"]), "seconds": s["seconds_per_table"]}
                for s in steps
            ]
    shutil.rmtree(events, ignore_errors=True)
    return {
        **run_header("ingest_rate", started_at, before),
        "spark_start_seconds": round(spark_start, 2),
        "registered_tables": args.registered_tables,
        "read_once_from_bytes": READ_ONCE_FROM_BYTES,
        "results": results,
    }


def _rounds(document: dict[str, Any]) -> int:
    """How many rounds each side ran (the most any side of the document recorded)."""
    return max(
        (len(side.get("round_seconds", [])) for result in document["results"] for side in result["sides"]),
        default=0,
    )


def markdown(document: dict[str, Any]) -> str:
    lines = [
        "# Ingest rate (steady state, after one unrecorded ingest of another bucket)",
        "",
        f"`{document['command'].strip()}`",
        "",
        f"Machine: {document['machine_before'].get('cpus')} CPUs{java_of(document['machine_before'])}, load before "
        f"{document['machine_before'].get('load_average_1_5_15')}; Spark session start "
        f"{document['spark_start_seconds']:.1f} s, paid once per job and not in the rates below. "
        + (
            f"Keys tagged with their owning table from a registry of {document['registered_tables']:,} tables."
            if document.get("registered_tables")
            else "No registry: keys not tagged with a table."
        ),
        "",
        "Each delivery is ingested four ways in the same run, each into an inventory table and a "
        "usage table of its own, "
        + (
            "round after round with the order rotating; each row is its side's median round. "
            if _rounds(document) > 1
            else "once each, in the order of the table's rows (one round: the order does not rotate, "
            "so a side's time also carries where it ran). "
        )
        + f"*{OURS}* is the command as it loads a bucket's later deliveries of "
        f"{document['read_once_from_bytes'] / 2**20:,.0f} MiB of data files or more (here whatever "
        "the size): files cut at the tables from the bucket's counts in the usage table (left by "
        "an unrecorded ingest of the same delivery into each such side's tables before the rounds, "
        "as yesterday's delivery "
        f"leaves them), the delivery read once and each row checked by the write. *{FIRST}* is the "
        "command as it loads a bucket's first delivery, and a smaller one: a checking job reads the "
        "delivery, then the write reads it again, cut from the checking job's counts. The side the "
        f"command takes for a later delivery of that size is marked ◆. *{PEER}* sorts the keys globally instead (Spark's "
        "range partitioner, which samples the delivery in a pass of its own). "
        f"*{SNAPPY}* is the command's side with the Parquet files compressed by Spark's default "
        "codec instead of the inventory table's zstd, as a job whose configuration sets the codec "
        "writes them. *Slice reads*: over "
        "the 100 tables the keys lie in, how many of the bucket's files a table's slice reads "
        "(those whose smallest and largest key in Delta's statistics meet the table's keys), mean "
        "and most.",
        "",
        "| format | rows | data files (MB) | side | ingest s (median) | each round s | rows/s | ÷ ours | files written | MB written | slice reads: mean / most |",
        "|---|---:|---:|---|---:|---|---:|---:|---:|---:|---|",
    ]
    for r in document["results"]:
        ours = next((side for side in r["sides"] if side["layout"] == OURS), None)
        for side in r["sides"]:
            ratio = f"{side['ingest_seconds'] / ours['ingest_seconds']:.2f}" if ours else "–"
            layouts = side.get("round_layouts") or [side["layout"]] * len(side.get("round_seconds", []))
            rounds = ", ".join(
                f"{x:.1f}" + (" (fell back to a global sort)" if "fell back" in layout else "")
                for x, layout in zip(side.get("round_seconds", []), layouts, strict=True)
            )
            mark = " ◆" if side["layout"] == command_layout(r) else ""
            data = f" ({r['data_bytes'] / 1e6:,.0f})" if "data_bytes" in r else ""
            lines.append(
                f"| {r['format']} | {r['rows']:,} | {r['data_files']}{data} | {side['layout']}{mark} | "
                f"{side['ingest_seconds']:.1f} | {rounds} | "
                f"{side['rows_per_second']:,} | {ratio} | {side['files']} | {side['file_bytes'] / 1e6:,.1f} | "
                f"{side['slice_files_mean']:g} / {side['slice_files_max']} |"
            )
    lines += [
        "",
        "Where the time goes: each ingest's Spark jobs by step, from Spark's event log (the jobs run "
        "one after another; the rest of the ingest time is the driver's: finding the delivery, "
        "planning, Delta's commit).",
    ]
    for r in document["results"]:
        for side in r["sides"]:
            lines += [
                "",
                f"{r['format']}, {r['rows']:,} rows, {side['layout']} ({side['ingest_seconds']:.1f} s):",
                "",
                "| step | Spark jobs | job seconds |",
                "|---|---:|---:|",
            ]
            lines += [
                f"| {s['step']} | {s['jobs']} | {s['seconds']:.2f} |" for s in side.get("spark_steps", [])
            ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
