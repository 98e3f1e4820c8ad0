"""Chargeback rate: seconds and Spark jobs for a chargeback over a large inventory table.

A synthetic inventory table of R rows (default 10M: 1,000 tables of 20 owners plus 10% unowned
objects, six storage classes, Intelligent-Tiering tiers) is written by Spark in the inventory
table's schema (not timed), on the local disk: the point is the chargeback's own work, one
aggregation over the table, not S3 throughput. Then ``chargeback.build_report`` runs, as
``inventory-vacuum chargeback`` does (the trend and history tables off, so the figure is the pass
over the inventory), once unrecorded and then once per ``--by``; the Spark jobs of each are
counted from Spark's status tracker. Beside each stands the same chargeback over the same rows
written in snappy, Spark's default codec (the inventory table's is zstd), in turn with it.

    .venv/bin/python -m benchmarks.chargeback_rate                  # 10M rows
    .venv/bin/python -m benchmarks.chargeback_rate --rows 1000000
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmarks.report import jvm_output_on_stderr, spark_setting, write_results
from benchmarks.vacuum_at_scale import java_of, machine, run_header

log = logging.getLogger("benchmarks.chargeback_rate")
RESULTS = Path(__file__).parent / "results"
TABLES = 1_000
OWNERS = 20
GROUPINGS = ("owner", "table", "storage_class", "prefix:2")


def registry_yaml(tables: int = TABLES, owners: int = OWNERS) -> str:
    lines = ["tables:"]
    lines += [
        f"  - {{name: t{n:04d}, path: s3://lake/warehouse/t{n:04d}, owner: team{n % owners:02d}}}"
        for n in range(tables)
    ]
    return "\n".join(lines) + "\n"


def write_inventory(spark: Any, location: str, rows: int, codec: str) -> None:
    """``rows`` inventory rows in Parquet files of ``codec``: 90% under one of the tables, 10%
    unowned under ``tmp/``."""
    from pyspark.sql import functions as F

    from inventory.load import PARQUET_CODEC
    from inventory.schema import INVENTORY_TABLE_SCHEMA

    n = F.col("id")
    owned = (n % 10) != 0
    table = F.format_string("t%04d", (n % TABLES).cast("int"))
    key = F.when(
        owned, F.format_string("warehouse/%s/dt=%d/part-%09d.parquet", table, (n % 365).cast("int"), n)
    ).otherwise(F.format_string("tmp/job-%d/out-%09d", (n % 97).cast("int"), n))
    classes = F.array(
        *[
            F.lit(c)
            for c in ("STANDARD", "STANDARD", "STANDARD", "INTELLIGENT_TIERING", "STANDARD_IA", "GLACIER_IR")
        ]
    )
    tiers = F.array(F.lit("FREQUENT"), F.lit("INFREQUENT"), F.lit("ARCHIVE_INSTANT_ACCESS"))
    columns = {
        "path": F.concat(F.lit("s3://lake/"), key),
        "length": (F.abs(F.hash(n)) % 512_000_000).cast("long"),
        "isDir": F.lit(False),
        "modificationTime": (F.lit(1_700_000_000_000) + n).cast("long"),
        "bucket": F.lit("lake"),
        "key": key,
        "storage_class": F.element_at(classes, (n % 6 + 1).cast("int")),
        "intelligent_tiering_access_tier": F.when(n % 6 == 3, F.element_at(tiers, (n % 3 + 1).cast("int"))),
        "inventory_date": F.lit("2026-11-22").cast("date"),
        "inventory_taken_at": F.lit("2026-11-22 01:00:00").cast("timestamp"),
        "table": F.when(owned, table),
    }
    frame = spark.range(rows, numPartitions=8).select(
        *[
            (columns[f.name] if f.name in columns else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in INVENTORY_TABLE_SCHEMA
        ]
    )
    with spark_setting(spark, PARQUET_CODEC, codec):
        frame.write.format("delta").mode("overwrite").partitionBy("bucket").save(location)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="inventory rows (default %(default)s)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    log.setLevel(logging.INFO)
    with jvm_output_on_stderr(), tempfile.TemporaryDirectory(prefix="chargeback-rate-") as folder:
        document = run(args.rows, Path(folder))
        text = markdown(document)
        write_results(args.output, "chargeback_rate", document, text)
    print(text)
    return 0


def run(rows: int, folder: Path) -> dict[str, Any]:
    from chargeback import build_report, load_prices, parse_group_by
    from core.registry import parse_registry
    from core.session import build_spark_session
    from inventory.load import INVENTORY_CODEC

    started_at = datetime.now(timezone.utc)
    before = machine()
    started = time.monotonic()
    spark = build_spark_session("inventory-vacuum benchmark: chargeback rate")
    spark_start = time.monotonic() - started
    # the table as the ingest writes it, and its peer in Spark's default codec
    locations = {codec: f"file://{folder}/inventory-{codec}" for codec in (INVENTORY_CODEC, "snappy")}
    registry = parse_registry(registry_yaml())
    prices = load_prices()
    try:
        log.info("writing a %d-row inventory table in each codec (not timed)", rows)
        started = time.monotonic()
        for codec, location in locations.items():
            write_inventory(spark, location, rows, codec)
        written = time.monotonic() - started
        data_files = len(spark.read.format("delta").load(locations[INVENTORY_CODEC]).inputFiles())
        sizes = {
            codec: sum(f.stat().st_size for f in Path(location.removeprefix("file://")).rglob("*.parquet"))
            for codec, location in locations.items()
        }
        tracker = spark.sparkContext.statusTracker()

        def timed(by: str, group: str, codec: str = INVENTORY_CODEC) -> dict[str, Any]:
            spark.sparkContext.setJobGroup(group, f"chargeback --by {by}")
            started = time.monotonic()
            report = build_report(spark, locations[codec], registry, parse_group_by(by), prices, trend_days=0)
            seconds = time.monotonic() - started
            spark.sparkContext.setJobGroup("", "")
            data = report.to_dict()
            if data["totals"]["objects"] != rows:
                raise SystemExit(f"chargeback counted {data['totals']['objects']} objects, not {rows}")
            return {
                "by": by,
                "seconds": round(seconds, 2),
                "rows_per_second": round(rows / seconds),
                "spark_jobs": len(tracker.getJobIdsForGroup(group)),
                "groups": len(data["groups"]),
                "monthly_cost": data["totals"]["monthly_cost"],
            }

        log.info("warm-up chargeback (not recorded)")
        timed("owner", "warm-up")
        timed("owner", "warm-up-snappy", "snappy")
        results = []
        for index, by in enumerate(GROUPINGS):
            log.info("chargeback --by %s", by)
            order = [INVENTORY_CODEC, "snappy"][:: 1 if index % 2 == 0 else -1]  # in turn
            runs = {codec: timed(by, f"by-{by}-{codec}", codec) for codec in order}
            ours, peer = runs[INVENTORY_CODEC], runs["snappy"]
            if (peer["groups"], round(peer["monthly_cost"], 2)) != (
                ours["groups"],
                round(ours["monthly_cost"], 2),
            ):
                raise SystemExit(f"--by {by}: the snappy table's chargeback differs: {peer} against {ours}")
            results.append({**ours, "snappy_seconds": peer["seconds"]})
    finally:
        spark.stop()
    return {
        **run_header("chargeback_rate", started_at, before),
        "rows": rows,
        "data_files": data_files,
        "codec": INVENTORY_CODEC,
        "parquet_bytes": sizes,
        "inventory_write_seconds": round(written, 1),
        "spark_start_seconds": round(spark_start, 2),
        "storage": "local disk (file://), not S3",
        "results": results,
    }


def markdown(document: dict[str, Any]) -> str:
    lines = [
        f"# Chargeback over a {document['rows']:,}-row inventory table",
        "",
        f"Machine: {document['machine_before'].get('cpus')} CPUs{java_of(document['machine_before'])}, load before "
        f"{document['machine_before'].get('load_average_1_5_15')}. The table: {document['data_files']} "
        f"Parquet files on {document['storage']}, {TABLES:,} tables of {OWNERS} owners and 10% unowned "
        f"objects. Spark session start {document['spark_start_seconds']:.1f} s, not in the figures; "
        "one unrecorded chargeback over each codec's table first.",
        "",
        f"The table's Parquet files are in {document['codec']}, as the ingest writes them "
        f"({document['parquet_bytes'][document['codec']] / 1e6:,.0f} MB). Beside each run stands the "
        f"same chargeback over the same rows in snappy, Spark's default codec "
        f"({document['parquet_bytes']['snappy'] / 1e6:,.0f} MB), the two in turn; each found the same "
        "groups and cost.",
        "",
        "| --by | seconds | rows/s | Spark jobs | groups | monthly cost | in snappy s | ÷ ours |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['by']} | {r['seconds']:.1f} | {r['rows_per_second']:,} | {r['spark_jobs']} | {r['groups']:,} | "
        f"${r['monthly_cost']:,.2f} | {r['snappy_seconds']:.1f} | {r['snappy_seconds'] / r['seconds']:.2f} |"
        for r in document["results"]
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
