"""Ingestion end to end: deliveries on the moto S3 server, real Spark, a real Delta table."""

from __future__ import annotations

import bisect
import json
import os
import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pyspark
import pytest
from delta.tables import DeltaTable
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from core.paths import StorageLocation
from core.registry import parse_registry
from core.session import job_group
from core.tables import (
    INVENTORY_STATS_COLUMNS,
    INVENTORY_TABLE_SCHEMA,
    SNAPSHOT_PARTITIONS,
    VACUUM_INVENTORY_SCHEMA,
    snapshots_sized,
)
from inventory import layout, load
from inventory.delivery_writer import snapshot_bucket, write_delivery
from inventory.layout import KeyGroup, KeyRange, key_ranges
from inventory.schema import tag_owning_table
from inventory.usage import usage_aggregate
from tests.support.deliveries import PARQUET_SCHEMA, aws_parquet, csv_gz, put_delivery
from tests.support.helpers import cli, cli_json, keys_of, put, submitted_json

SPECIAL_KEYS = [
    "warehouse/events/date=2024-01-01/part-0.parquet",
    "warehouse/events/city=São Paulo/a b+c%41=#.parquet",
    "warehouse/events/日本/ключ/file.parquet",
    "warehouse/events/empty-marker",  # zero bytes, still a file
    "warehouse/events/folder/",  # a "directory" placeholder
    "warehouse/events_v2/part-0.parquet",  # sibling sharing a name prefix
    "other/x.txt",
]


def write_tables(tmp_path, bucket: str) -> str:
    path = tmp_path / "tables.yaml"
    path.write_text(
        "tables:\n"
        f"  - {{name: events, path: 's3a://{bucket}/warehouse/events', owner: growth}}\n"
        f"  - {{name: events_v2, path: 's3://{bucket}/warehouse/events_v2', owner: ads}}\n"
    )
    return str(path)


def ingest_args(inventory_bucket: str, table: str, *buckets: str, config: str = "daily", extra=()):
    args = ["ingest", "--destination", f"s3://{inventory_bucket}/reports", "--config-id", config]
    for b in buckets:
        args += ["--source-bucket", b]
    return [*args, "--inventory-table", table, *extra]


def table_rows(spark, table: str, bucket: str | None = None):
    frame = spark.read.format("delta").load(table)
    if bucket:
        frame = frame.where(frame.bucket == bucket)
    return {r["key"]: r.asDict() for r in frame.collect()}


@pytest.mark.parametrize("file_format", ["parquet", "csv", "orc"])
@pytest.mark.slow
def test_snapshot_then_ingest_each_format(spark, s3, bucket_factory, tmp_path, file_format):
    source, inventory = bucket_factory("src"), bucket_factory("inv")
    for key in SPECIAL_KEYS:
        put(s3, source, key, body=b"" if key.endswith(("marker", "/")) else b"12345")
    written = snapshot_bucket(
        s3,
        source,
        StorageLocation.parse(f"s3://{inventory}/reports"),
        "daily",
        file_format=file_format,
        rows_per_file=3,
    )
    manifest_key = written.manifest_uri.split(f"s3://{inventory}/", 1)[1]
    manifest = json.loads(s3.get_object(Bucket=inventory, Key=manifest_key)["Body"].read())
    assert manifest["sourceBucket"] == source and manifest["destinationBucket"] == f"arn:aws:s3:::{inventory}"
    assert manifest["fileFormat"] == {"parquet": "Parquet", "csv": "CSV", "orc": "ORC"}[file_format]
    assert int(manifest["creationTimestamp"]) > 0 and manifest["version"] == "2016-11-30"
    [symlink] = [
        k for k in keys_of(s3, inventory, f"reports/{source}/daily/hive/") if k.endswith("/symlink.txt")
    ]
    listed_files = s3.get_object(Bucket=inventory, Key=symlink)["Body"].read().decode().split()
    assert listed_files == [f"s3://{inventory}/{f['key']}" for f in manifest["files"]]
    table = f"s3://{inventory}/tables/inventory"
    code, result = cli_json(
        *ingest_args(inventory, table, source, extra=["--tables", write_tables(tmp_path, source)])
    )
    assert code == 0, result
    [summary] = result["buckets"]
    assert summary["status"] == "ok" and summary["rows"] == len(SPECIAL_KEYS)
    assert summary["data_files"] == 3  # 7 objects, 3 rows per file
    assert summary["bytes"] == 5 * 5
    rows = table_rows(spark, table)
    assert set(rows) == set(SPECIAL_KEYS)  # keys decoded exactly once, whatever the format
    listed = {o["Key"]: o for o in s3.list_objects_v2(Bucket=source)["Contents"]}
    for key, row in rows.items():
        assert row["path"] == f"s3://{source}/{key}"
        assert row["isDir"] is key.endswith("/")
        assert row["length"] == listed[key]["Size"]
        assert row["modificationTime"] == int(listed[key]["LastModified"].timestamp() * 1000)
        assert row["storage_class"] == "STANDARD"
        assert row["encryption_status"] is None  # not in this delivery: null, not an error
        assert row["inventory_taken_at"] is not None
    assert rows["warehouse/events/empty-marker"]["isDir"] is False
    assert rows["warehouse/events/date=2024-01-01/part-0.parquet"]["table"] == "events"
    assert rows["warehouse/events_v2/part-0.parquet"]["table"] == "events_v2"
    assert rows["other/x.txt"]["table"] is None
    schema = spark.read.format("delta").load(table).schema
    assert schema.fields[:4] == VACUUM_INVENTORY_SCHEMA.fields  # exactly what USING INVENTORY accepts
    assert all(not f.metadata for f in schema.fields[:4])
    assert DeltaTable.forPath(spark, table).detail().first()["partitionColumns"] == ["bucket"]


def test_each_key_is_tagged_with_the_table_whose_folder_holds_it(spark):
    """The owning table is looked up by the key's leading components, one hash join per depth:
    checked against the registry's own rule (a key under ``path + '/'``), over tables at four
    depths, siblings sharing a name prefix and keys on every edge; then with tables at twelve
    depths, of which the four with the fewest tables share one join."""
    tables = (
        "tables:\n"
        "  - {name: events, path: 's3a://lake/warehouse/events', owner: a}\n"
        "  - {name: events_v2, path: 's3://lake/warehouse/events_v2', owner: a}\n"
        "  - {name: deep, path: 's3://lake/warehouse/team/x/deep', owner: b}\n"
        "  - {name: top, path: 's3n://lake/top', owner: b}\n"
        "  - {name: doubled, path: 's3://lake/odd//folder', owner: b}\n"
        "  - {name: local, path: 'file:///tmp/warehouse/events', owner: c}\n"
    )
    keys = [
        ("lake", "warehouse/events/date=2024-01-01/part-0.parquet"),
        ("lake", "warehouse/events/"),  # its folder marker: inside
        ("lake", "warehouse/events//x.parquet"),
        ("lake", "warehouse/events"),  # an object named like the folder: not inside
        ("lake", "warehouse/events_v2/part-0.parquet"),
        ("lake", "warehouse/events_v"),
        ("lake", "warehouse/eventsX/part-0.parquet"),
        ("lake", "warehouse/team/x/deep/_delta_log/00000000000000000000.json"),
        ("lake", "warehouse/team/x/deeper/part-0.parquet"),
        ("lake", "warehouse/team/x/part-0.parquet"),
        ("lake", "top/a/b/c/d/e.parquet"),
        ("lake", "top"),
        ("lake", "odd//folder/part-0.parquet"),
        ("lake", "odd/folder/part-0.parquet"),
        ("lake", "/warehouse/events/leading-slash.parquet"),
        ("lake", "日本/ключ/file.parquet"),
        ("lake", "tmp/warehouse/events/part-0.parquet"),  # the local table's path, in S3: not it
        ("other", "warehouse/events/part-0.parquet"),  # the same key in another bucket
        ("lake", None),
    ]
    levels = [f"level{depth}/" + "/".join(f"p{n}" for n in range(depth - 1)) for depth in range(5, 13)]
    for path in levels:
        tables += f"  - {{name: '{path}', path: 's3://lake/{path}', owner: d}}\n"
        keys += [("lake", f"{path}/part-0.parquet"), ("lake", path), ("lake", f"{path}X/part-0.parquet")]
    frame = spark.createDataFrame(
        [(f"s3://{b}/{k}" if k is not None else None, b, k) for b, k in keys],
        "path string, bucket string, key string",
    )
    frame = frame.select(
        *[
            (F.col(f.name) if f.name in frame.columns else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in INVENTORY_TABLE_SCHEMA
        ]
    )

    def owner(registry, bucket: str, key: str | None) -> str | None:  # type: ignore[no-untyped-def]
        owners = [
            t.name
            for t in registry.tables
            if t.location.is_s3
            and key is not None
            and t.location.bucket == bucket
            and key.startswith(t.location.key + "/")
        ]
        assert len(owners) <= 1
        return owners[0] if owners else None

    few = parse_registry(tables.split("  - {name: 'level5")[0])
    many = parse_registry(tables)
    for registry, hashed, shared in (
        (few, {"1", "2", "3", "4"}, False),
        (many, set(map(str, range(1, 9))), True),
    ):
        tagged = tag_owning_table(frame, registry)
        assert tagged.schema == frame.schema
        got = sorted(((r["bucket"], r["key"] or ""), r["table"]) for r in tagged.collect())
        # one row per key, each with its owner: left joins lose and double no key
        assert got == sorted(((b, k or ""), owner(registry, b, k)) for b, k in keys)
        assert {name for _, name in got} >= {"events", "events_v2", "deep", "top", "doubled", None}
        # a hash join per depth on the key's leading components (the old plan joined on the
        # bucket alone and compared each row with every table of it: StartsWith), at most eight
        plan = tagged._jdf.queryExecution().executedPlan().toString()
        joined_on = re.findall(
            r"BroadcastHashJoin \[bucket#\d+, (?:CASE WHEN [^\]]*?)?substring_index\(key#\d+, /, (\d+)\)",
            plan,
        )
        assert set(joined_on) == hashed and ("StartsWith" in plan) is shared, plan
        # the shallowest depth's join looks every key up; each after it only the keys still untagged
        looked_up_untagged = re.findall(
            r"BroadcastHashJoin \[bucket#\d+, CASE WHEN isnull\([^\]]*?substring_index\(key#\d+, /, (\d+)\)",
            plan,
        )
        assert set(looked_up_untagged) == hashed - {"1"}, plan
    assert {name for _, name in got} >= set(levels)


def test_the_delivery_checks_sum_with_the_usage_in_a_hash_aggregation(spark):
    """The checks are counts: an aggregate of a string (an example of a foreign bucket) would make
    Spark sort the whole delivery by the usage keys instead of hashing them. The example is looked
    up only for the error (the bad-delivery tests check its message)."""
    rows = spark.createDataFrame([], INVENTORY_TABLE_SCHEMA)
    plan = (
        usage_aggregate(rows, *load.delivery_checks("lake"))._jdf.queryExecution().executedPlan().toString()
    )
    assert "HashAggregate" in plan and "SortAggregate" not in plan, plan


def test_a_written_partition_sums_to_the_usage_rows_of_its_delivery(spark):
    """The usage rows summed from a partition just written (its tagged rows summed by table before
    their prefix is known) are the delivery's: every state, storage class and tier, nulls among
    them, untagged and odd keys, a table one component deep, tables of another bucket and local
    ones in the registry. A row tagged with a table the registry does not name fails the job."""
    bucket = "lake"
    registry = parse_registry(
        "tables:\n"
        f"  - {{name: ev, path: 's3://{bucket}/warehouse/events', owner: a}}\n"
        f"  - {{name: top, path: 's3://{bucket}/top', owner: a}}\n"
        f"  - {{name: uni, path: 's3a://{bucket}/ünï cödé/t b', owner: a}}\n"
        "  - {name: elsewhere, path: 's3://elsewhere/warehouse/events', owner: a}\n"
        "  - {name: local, path: 'file:///tmp/t', owner: a}\n"
    )
    keys = [
        *("warehouse/events/d=1/p.parquet", "warehouse/events/x", "top/a b.parquet", "top/x/y"),
        *("ünï cödé/t b/z", "other/x.txt", "rootfile", "warehouse/events_v2/d=1/p", "top", "/lead/x"),
        *("a//b", "trail/", "ünï cödé/free"),
    ]
    taken = datetime(2024, 3, 2, 1, tzinfo=timezone.utc)
    versions = [  # is_latest, is_delete_marker, tier, storage class, taken at, size
        (None, None, None, "STANDARD", taken, 10),
        (True, False, "FREQUENT", None, None, 200_000),
        (False, False, None, "GLACIER", taken, None),
        (False, True, "ARCHIVE", "STANDARD", taken, 0),
        (True, None, "", "", taken, 131_072),
    ]
    rows = [
        (f"s3://{bucket}/{key}", size, False, 1_700_000_000_000, bucket, key, storage_class)
        + (None, None, None, tier, None, latest, marker, datetime(2024, 3, 2).date(), taken_at, None)
        for key in keys
        for latest, marker, tier, storage_class, taken_at, size in versions
    ]
    tagged = tag_owning_table(spark.createDataFrame(rows, INVENTORY_TABLE_SCHEMA), registry)
    assert {row["table"] for row in tagged.select("table").distinct().collect()} == {"ev", "top", "uni", None}

    def usage(frame):
        return sorted((tuple(row) for row in frame.select(*sorted(frame.columns)).collect()), key=repr)

    delivery = usage(usage_aggregate(tagged, *load.delivery_checks(bucket)))
    assert usage(load.written_usage(tagged, registry, bucket)) == delivery
    assert usage(load.written_usage(tagged, None, bucket)) == delivery
    assert len(delivery) > len(keys)
    unknown = tagged.withColumn("table", F.when(F.col("table") == "ev", "ghost").otherwise(F.col("table")))
    with pytest.raises(Exception, match="not registered in its bucket"):
        load.written_usage(unknown, registry, bucket).collect()


def test_the_ingest_and_chargeback_size_delta_s_snapshots_to_the_tables_unless_the_job_sets_it(
    spark, tmp_path
):
    """Delta's snapshots of the tool's tables are rebuilt in as many partitions as the biggest of
    them needs (its checkpoint's actions, else the cluster's parallelism), not Delta's 50, unless
    the job's configuration sets the number; either way the session's own setting is back after."""
    tables = [f"file://{tmp_path}/{name}" for name in ("inventory", "inventory_usage", "inventory_runs")]
    configured = spark.conf.get(SNAPSHOT_PARTITIONS)  # the suite's session sets it, as a job may
    assert configured is not None
    with snapshots_sized(spark, tables):
        assert spark.conf.get(SNAPSHOT_PARTITIONS) == configured
    spark.conf.unset(SNAPSHOT_PARTITIONS)
    try:
        with snapshots_sized(spark, tables):  # no checkpoint yet: the cluster's parallelism
            assert spark.conf.get(SNAPSHOT_PARTITIONS) == str(min(50, spark.sparkContext.defaultParallelism))
        assert spark.conf.get(SNAPSHOT_PARTITIONS, None) is None
        log = tmp_path / "inventory_usage" / "_delta_log"
        log.mkdir(parents=True)
        (log / "_last_checkpoint").write_text('{"version": 10, "size": 120000}')
        with snapshots_sized(spark, tables):  # the biggest table's: a partition per 50k actions
            assert spark.conf.get(SNAPSHOT_PARTITIONS) == "3"
        assert spark.conf.get(SNAPSHOT_PARTITIONS, None) is None
        with snapshots_sized(spark, tables):  # set meanwhile (by another thread, say): kept
            spark.conf.set(SNAPSHOT_PARTITIONS, "5")
        assert spark.conf.get(SNAPSHOT_PARTITIONS) == "5"
    finally:
        spark.conf.set(SNAPSHOT_PARTITIONS, configured)


def _inventory_rows(spark, keys):  # type: ignore[no-untyped-def]
    """Inventory rows of bucket ``lake``, one per key."""
    return spark.createDataFrame(
        [
            {
                "path": f"s3://lake/{k}",
                "length": 7,
                "isDir": False,
                "modificationTime": 1,
                "bucket": "lake",
                "key": k,
            }
            for k in keys
        ],
        INVENTORY_TABLE_SCHEMA,
    )


def test_the_inventory_write_does_not_sort_its_rows_by_the_bucket(spark, tmp_path):
    """A partitioned write sorts each task's rows by the partition column unless it may keep files
    open for several values, and then only once it has as many open as it may: the inventory
    write (one bucket) may keep two, so it never sorts, and runs with the job's own setting when
    it has one. Spark records the settings each SQL execution ran with; the session's own is back
    after."""
    key = load.UNSORTED_PARTITION_WRITE
    keys = [f"w/t/part-{n}.parquet" for n in (3, 1, 2)]
    rows = _inventory_rows(spark, keys)
    store = spark._jsparkSession.sharedState().statusStore()

    def executions():  # type: ignore[no-untyped-def]  # the newest (Spark keeps 1,000 by default)
        listed = store.executionsList()
        return [listed.apply(i) for i in range(max(0, listed.size() - 50), listed.size())]

    def written_with(table: str) -> str | None:
        before = max((e.executionId() for e in executions()), default=-1)
        with job_group(spark, "test"):
            load.write_inventory(rows, [KeyRange("")], len(keys), 1, table, "lake")
        [save] = [
            e
            for e in executions()
            if e.executionId() > before and "SaveIntoDataSourceCommand" in e.physicalPlanDescription()
        ]
        assert sorted(r.key for r in spark.read.format("delta").load(table).collect()) == sorted(keys)
        setting = save.modifiedConfigs().get(key)
        return str(setting.get()) if setting.isDefined() else None

    assert spark.conf.get(key, None) is None
    assert written_with(f"{tmp_path}/ours") == "2"  # at 1, the writer sorts from its first file on
    assert spark.conf.get(key, None) is None
    spark.conf.set(key, "0")  # the job's configuration turns it off: kept
    try:
        assert written_with(f"{tmp_path}/theirs") == "0"
        assert spark.conf.get(key) == "0"
    finally:
        spark.conf.unset(key)


def test_the_inventory_table_is_written_in_zstd_unless_the_job_sets_a_codec(spark, tmp_path):
    """The inventory write compresses its Parquet files with zstd (half snappy's bytes), and so
    the checkpoints Delta writes within it, readable by Spark and by delta-rs (from the checkpoint
    alone); a codec the job's configuration sets wins, and the session's own setting is back after
    either write."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable as RustTable

    keys = [f"w/t/part-{n}.parquet" for n in range(3)]
    rows = _inventory_rows(spark, keys)
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    log = ours / "_delta_log"

    def codecs_of(files: list[Path]) -> set[str]:
        assert files
        return {
            meta.row_group(g).column(c).compression
            for meta in (pq.ParquetFile(f).metadata for f in files)
            for g in range(meta.num_row_groups)
            for c in range(meta.num_columns)
        }

    def write(table: Path) -> None:
        with job_group(spark, "test"):  # the write names its jobs: the group puts the names back
            load.write_inventory(rows, [KeyRange("")], len(keys), 1, str(table), "lake")

    def read_by_spark_and_delta_rs(table: Path) -> None:
        assert sorted(r.key for r in spark.read.format("delta").load(str(table)).collect()) == keys
        assert sorted(RustTable(str(table)).to_pyarrow_table().column("key").to_pylist()) == keys

    key = load.PARQUET_CODEC
    assert spark.conf.get(key, None) is None
    write(ours)
    assert codecs_of(list(ours.glob("bucket=lake/*.parquet"))) == {"ZSTD"}
    assert spark.conf.get(key, None) is None
    read_by_spark_and_delta_rs(ours)
    # a checkpoint at the next commit, written within the next write; then the commits before it
    # and every checksum file (Delta may read a version's protocol and metadata from its .crc)
    # are removed, so that both readers read the table from the zstd checkpoint alone
    spark.sql(f"ALTER TABLE delta.`{ours}` SET TBLPROPERTIES ('delta.checkpointInterval' = '2')")
    write(ours)
    assert codecs_of(sorted(log.glob(f"{2:020d}.checkpoint*.parquet"))) == {"ZSTD"}
    for version in (0, 1):
        (log / f"{version:020d}.json").unlink()
    for checksum in log.glob("[0-9]*.crc"):  # Delta's, not Hadoop's hidden .*.crc
        checksum.unlink()
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # Spark reads the log afresh
    read_by_spark_and_delta_rs(ours)
    spark.conf.set(key, "snappy")  # the job's configuration chooses its own: kept
    try:
        write(theirs)
        assert codecs_of(list(theirs.glob("bucket=lake/*.parquet"))) == {"SNAPPY"}
        assert spark.conf.get(key) == "snappy"
    finally:
        spark.conf.unset(key)


def test_hand_written_csv_keys_are_decoded_once(spark, s3, bucket_factory):
    source, inventory = bucket_factory("src"), bucket_factory("inv")
    rows = [
        [source, "dir/a+b.txt", "3", "2024-01-15T10:20:30.123Z", "e1", "STANDARD", "false", "SSE-S3"],
        [source, "dir/plus%2Bsign.txt", "4", "2024-01-15T10:20:30.000Z", "e2", "GLACIER", "true", "SSE-KMS"],
        [
            source,
            "dir/pct%2541.txt",
            "5",
            "2024-01-15T10:20:30.000Z",
            "e3",
            "STANDARD_IA",
            "false",
            "NOT-SSE",
        ],
        [
            source,
            "dir/%E6%97%A5%20%3D%23.txt",
            "0",
            "2024-01-15T10:20:30.000Z",
            "e4",
            "STANDARD",
            "false",
            "SSE-S3",
        ],
        [source, "dir/sub/", "0", "2024-01-15T10:20:30.000Z", "e5", "STANDARD", "false", "SSE-S3"],
    ]
    put_delivery(
        s3,
        inventory,
        source,
        "daily",
        "2024-01-16T01-00Z",
        {"a.csv.gz": csv_gz(rows[:3]), "b.csv.gz": csv_gz(rows[3:])},
        prefix="reports",
    )
    table = f"s3://{inventory}/tables/inventory"
    code, result = cli_json(*ingest_args(inventory, table, source))
    assert code == 0, result
    loaded = table_rows(spark, table)
    assert set(loaded) == {"dir/a b.txt", "dir/plus+sign.txt", "dir/pct%41.txt", "dir/日 =#.txt", "dir/sub/"}
    assert loaded["dir/a b.txt"]["modificationTime"] == int(
        datetime(2024, 1, 15, 10, 20, 30, 123000, tzinfo=timezone.utc).timestamp() * 1000
    )
    assert loaded["dir/plus+sign.txt"]["storage_class"] == "GLACIER"
    assert loaded["dir/plus+sign.txt"]["is_multipart_uploaded"] is True
    assert loaded["dir/pct%41.txt"]["encryption_status"] == "NOT-SSE"
    assert loaded["dir/sub/"]["isDir"] is True and loaded["dir/日 =#.txt"]["isDir"] is False
    assert str(loaded["dir/a b.txt"]["inventory_date"]) == "2024-01-16"
    assert result["buckets"][0]["inventory_taken_at"].startswith("2024-01-16T01:00:00")


@pytest.mark.slow
def test_hand_written_versioned_parquet_keeps_current_versions_and_counts_the_rest(spark, s3, bucket_factory):
    source, inventory = bucket_factory("src"), bucket_factory("inv")
    moment = datetime(2024, 1, 15, tzinfo=timezone.utc)
    rows = [
        {
            "bucket": source,
            "key": "t/a",
            "version_id": "v2",
            "is_latest": True,
            "is_delete_marker": False,
            "size": 10,
            "last_modified_date": moment,
        },
        {
            "bucket": source,
            "key": "t/a",
            "version_id": "v1",
            "is_latest": False,
            "is_delete_marker": False,
            "size": 7,
            "last_modified_date": moment,
        },
        {
            "bucket": source,
            "key": "t/b",
            "version_id": "v3",
            "is_latest": True,
            "is_delete_marker": True,
            "size": None,
            "last_modified_date": moment,
        },
        {
            "bucket": source,
            "key": "t/b",
            "version_id": "v0",
            "is_latest": False,
            "is_delete_marker": False,
            "size": 5,
            "last_modified_date": moment,
        },
        {
            "bucket": source,
            "key": "t/c",
            "version_id": "v4",
            "is_latest": True,
            "is_delete_marker": False,
            "size": 1,
            "last_modified_date": moment,
            "intelligent_tiering_access_tier": "ARCHIVE_ACCESS",
        },
    ]
    put_delivery(
        s3,
        inventory,
        source,
        "daily",
        "2024-01-16T01-00Z",
        {"a.parquet": aws_parquet(rows)},
        prefix="reports",
        file_format="Parquet",
        file_schema=PARQUET_SCHEMA,
    )
    table = f"s3://{inventory}/tables/inventory"
    code, result = cli_json(*ingest_args(inventory, table, source))
    assert code == 0, result
    summary = result["buckets"][0]
    assert (summary["rows"], summary["bytes"]) == (2, 11)
    assert (summary["noncurrent_objects"], summary["noncurrent_bytes"], summary["delete_markers"]) == (
        2,
        12,
        1,
    )
    loaded = table_rows(spark, table)
    assert set(loaded) == {"t/a", "t/c"}
    assert loaded["t/a"]["version_id"] == "v2"
    assert loaded["t/c"]["intelligent_tiering_access_tier"] == "ARCHIVE_ACCESS"


@pytest.mark.slow
def test_versioned_bucket_snapshot_with_all_versions(spark, s3, bucket_factory):
    source, inventory = bucket_factory("src"), bucket_factory("inv")
    s3.put_bucket_versioning(Bucket=source, VersioningConfiguration={"Status": "Enabled"})
    put(s3, source, "t/a", body=b"old")
    put(s3, source, "t/a", body=b"newer")
    put(s3, source, "t/b", body=b"gone")
    s3.delete_object(Bucket=source, Key="t/b")
    snapshot_bucket(
        s3,
        source,
        StorageLocation.parse(f"s3://{inventory}/reports"),
        "daily",
        file_format="orc",
        versions="all",
    )
    table = f"s3://{inventory}/tables/inventory"
    code, result = cli_json(*ingest_args(inventory, table, source))
    assert code == 0, result
    summary = result["buckets"][0]
    assert (summary["rows"], summary["bytes"]) == (1, 5)
    assert (summary["noncurrent_objects"], summary["noncurrent_bytes"], summary["delete_markers"]) == (
        2,
        7,
        1,
    )
    assert set(table_rows(spark, table)) == {"t/a"}


@pytest.mark.slow
def test_rerun_is_idempotent_and_other_buckets_are_untouched(spark, s3, bucket_factory):
    first, second, inventory = bucket_factory("one"), bucket_factory("two"), bucket_factory("inv")
    put(s3, first, "a/1", "a/2")
    put(s3, second, "b/1")
    destination = StorageLocation.parse(f"s3://{inventory}/reports")
    for b in (first, second):
        snapshot_bucket(s3, b, destination, "daily")
    table = f"s3://{inventory}/tables/inventory"
    context = spark.sparkContext
    context.setLocalProperty("spark.jobGroup.id", "the caller's group")
    try:
        assert cli_json(*ingest_args(inventory, table, first, second))[0] == 0
        # each bucket's jobs ran in a group of their own; the caller's thread is left as it was
        assert context.getLocalProperty("spark.jobGroup.id") == "the caller's group"
        assert context.getLocalProperty("spark.job.description") is None
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    second_files = {
        f for f in spark.read.format("delta").load(table).where(f"bucket = '{second}'").inputFiles()
    }
    code, result = cli_json(*ingest_args(inventory, table, first))
    assert code == 0 and result["buckets"][0]["rows"] == 2
    assert set(table_rows(spark, table, first)) == {"a/1", "a/2"}  # replaced, not appended
    assert (
        set(spark.read.format("delta").load(table).where(f"bucket = '{second}'").inputFiles()) == second_files
    )
    # a newer delivery replaces the bucket's partition, including objects that disappeared
    s3.delete_object(Bucket=first, Key="a/2")
    snapshot_bucket(
        s3,
        first,
        destination,
        "daily",
        taken_at=datetime.now(timezone.utc).replace(second=0, microsecond=0).replace(year=2030),
    )
    assert cli_json(*ingest_args(inventory, table, first))[0] == 0
    assert set(table_rows(spark, table, first)) == {"a/1"}
    runs = spark.read.format("delta").load(f"s3://{inventory}/tables/inventory_runs").collect()
    assert sorted(r["bucket"] for r in runs) == sorted([first, second, first, first])
    assert all(r["status"] == "ok" and r["inventory_taken_at"] is not None for r in runs)


@pytest.mark.slow
def test_an_emptied_bucket_empties_its_partition(spark, s3, bucket_factory, tmp_path):
    source, inventory = bucket_factory("src"), bucket_factory("inv")
    put(s3, source, "a/1")
    destination = StorageLocation.parse(f"s3://{inventory}/reports")
    snapshot_bucket(s3, source, destination, "daily", taken_at=datetime(2024, 1, 1, tzinfo=timezone.utc))
    table = f"file://{tmp_path}/inventory"  # the inventory table may live outside S3 too
    assert cli_json(*ingest_args(inventory, table, source))[0] == 0
    s3.delete_object(Bucket=source, Key="a/1")
    snapshot_bucket(s3, source, destination, "daily", taken_at=datetime(2024, 1, 2, tzinfo=timezone.utc))
    code, result = cli_json(*ingest_args(inventory, table, source))
    assert code == 0 and result["buckets"][0]["rows"] == 0
    assert table_rows(spark, table, source) == {}


def _object_rows(bucket: str, keys, taken_at, **changes):
    """Inventory rows of an unversioned bucket, as ``write_delivery`` takes them."""
    for index, key in enumerate(keys):
        yield {
            **dict.fromkeys(("version_id", "is_latest", "is_delete_marker", "checksum_algorithm")),
            "bucket": bucket,
            "key": key,
            "size": 1_000 + index,
            "last_modified_date": taken_at,
            "e_tag": f"e{index}",
            "storage_class": ("STANDARD", "GLACIER_IR", "STANDARD_IA")[index % 3],
            "is_multipart_uploaded": False,
            **changes.get(key, {}),
        }


@pytest.mark.slow
def test_a_later_delivery_is_checked_while_written_and_loads_what_checking_first_loads(
    spark, s3, bucket_factory, tmp_path, monkeypatch
):
    """With the bucket's counts from an earlier delivery in the usage table, an unversioned
    delivery of at least ``READ_ONCE_FROM_BYTES`` is read once: the write checks each row. It
    loads the same rows and usage rows as the checked-first path (the first delivery's, here into
    a second inventory table), and a bad row still fails the write with the checks' own message,
    committing nothing. Once committed, the bucket is loaded even if the partition cannot be
    read back for its figures."""
    source, inventory = bucket_factory("src"), bucket_factory("inv")
    destination = StorageLocation.parse(f"s3://{inventory}/reports")
    tables = write_tables(tmp_path, source)
    with open(tables, "a") as registry:  # a table one component deep: its own usage prefix
        registry.write(f"  - {{name: top, path: 's3://{source}/top', owner: growth}}\n")
    day = datetime(2024, 3, 1, tzinfo=timezone.utc)
    first = [f"warehouse/events/d={n}/part-{n}.parquet" for n in range(12)] + [
        "other/x.txt",
        "top/a b.parquet",
    ]
    write_delivery(s3, source, _object_rows(source, first, day), destination, "daily", taken_at=day)
    table, usage = f"s3://{inventory}/tables/inventory", f"s3://{inventory}/tables/inventory_usage"
    code, result = cli_json(*ingest_args(inventory, table, source, extra=["--tables", tables]))
    assert code == 0 and result["buckets"][0]["checked_while_writing"] is False  # no counts yet

    later = day.replace(day=2)
    second = list(
        dict.fromkeys([*first[3:], *SPECIAL_KEYS, "warehouse/events_v2/d=1/part-9.parquet", "top/x/y"])
    )
    write_delivery(s3, source, _object_rows(source, second, later), destination, "daily", taken_at=later)
    code, result = cli_json(*ingest_args(inventory, table, source, extra=["--tables", tables]))
    assert code == 0 and result["buckets"][0]["checked_while_writing"] is False  # a small delivery
    # the same delivery again, as if it were big enough to be read once
    monkeypatch.setattr(load, "READ_ONCE_FROM_BYTES", 0)
    warnings = []
    monkeypatch.setattr(load.log, "warning", lambda *args: warnings.append(args))
    code, result = cli_json(*ingest_args(inventory, table, source, extra=["--tables", tables]))
    [loaded] = result["buckets"]
    assert code == 0 and loaded["checked_while_writing"] is True and loaded["rows"] == len(second)
    assert warnings == []  # its figures summed from the partition written, not from the delivery
    # the same delivery, checked first: an inventory table and usage table of its own, no counts
    peer, peer_usage = f"{table}_peer", f"{usage}_peer"
    extra = ["--tables", tables, "--usage-table", peer_usage, "--runs-table", f"{table}_peer_runs"]
    code, result = cli_json(*ingest_args(inventory, peer, source, extra=extra))
    [checked] = result["buckets"]
    assert code == 0 and checked["checked_while_writing"] is False
    for name in ("rows", "bytes", "noncurrent_objects", "noncurrent_bytes", "delete_markers"):
        assert loaded[name] == checked[name], name
    assert table_rows(spark, table, source) == table_rows(spark, peer, source)
    assert set(table_rows(spark, table, source)) == set(second)

    def usage_rows(location):
        frame = spark.read.format("delta").load(location).where(F.col("inventory_date") == "2024-03-02")
        return sorted(tuple(r) for r in frame.select(*sorted(frame.columns)).collect())

    assert usage_rows(usage) == usage_rows(peer_usage) and len(usage_rows(usage)) > 3

    versions = {
        location: DeltaTable.forPath(spark, location).history(1).first()["version"]
        for location in (table, usage)
    }
    bad_days = {
        # each checked by this path's write itself (Delta's replaceWhere would refuse a row of
        # another bucket too, with a message of its own)
        "row(s) have no key": {"warehouse/events/d=5/part-5.parquet": {"key": ""}},
        "object row(s) lack Size or LastModifiedDate": {
            "other/x.txt": {"size": None},
            "warehouse/events/d=6/part-6.parquet": {"last_modified_date": None},
        },
        "row(s) name bucket 'someone-else'": {"other/x.txt": {"bucket": "someone-else"}},
    }
    for index, (message, changes) in enumerate(bad_days.items()):
        taken = day.replace(day=3 + index)
        rows = _object_rows(source, second, taken, **changes)
        write_delivery(s3, source, rows, destination, "daily", taken_at=taken)
        code, result = cli_json(*ingest_args(inventory, table, source, extra=["--tables", tables]))
        [failed] = result["buckets"]
        assert code == 1 and f"manifest.json: {len(changes)} {message}" in failed["error"], failed["error"]
        assert "\n" not in failed["error"]
        for location, version in versions.items():  # nothing committed, to either table
            assert DeltaTable.forPath(spark, location).history(1).first()["version"] == version
        assert set(table_rows(spark, table, source)) == set(second)

    def unreadable(*args):
        raise RuntimeError("the read-back failed")

    monkeypatch.setattr(load, "own_commit", unreadable)
    taken = day.replace(day=9)
    write_delivery(s3, source, _object_rows(source, first, taken), destination, "daily", taken_at=taken)
    code, result = cli_json(*ingest_args(inventory, table, source, extra=["--tables", tables]))
    [loaded] = result["buckets"]  # counted from the delivery instead
    assert code == 0 and loaded["checked_while_writing"] is True and loaded["rows"] == len(first)
    assert loaded["bytes"] == sum(1_000 + index for index in range(len(first)))
    assert set(table_rows(spark, table, source)) == set(first)


@pytest.mark.spark_independent
def test_a_log_is_small_by_its_checkpoint_and_one_that_cannot_be_read_is_not(tmp_path):
    """The ingest loads interpreted only while the tool's tables have a small log: no checkpoint
    (or no table), or one of at most ``INTERPRETED_UP_TO_OBJECTS`` actions. A checkpoint file
    that cannot be read or names no size, or a location that does not parse, is not small."""
    from core.session import INTERPRETED_UP_TO_OBJECTS
    from core.tables import small_log

    log_folder = tmp_path / "table" / "_delta_log"
    table = f"file://{tmp_path}/table"
    assert small_log(table)  # no table yet
    log_folder.mkdir(parents=True)
    assert small_log(table)  # a table of a few commits
    last = log_folder / "_last_checkpoint"
    for text, small in (
        (json.dumps({"version": 10, "size": INTERPRETED_UP_TO_OBJECTS}), True),
        (json.dumps({"version": 10, "size": INTERPRETED_UP_TO_OBJECTS + 1}), False),
        (json.dumps({"version": 10}), False),
        ("not json", False),
    ):
        last.write_text(text)
        assert small_log(table) is small, text
    assert not small_log("hdfs://namenode/table")


@pytest.mark.slow
def test_a_small_delivery_loads_interpreted_and_writes_what_generated_code_writes(
    spark, s3, bucket_factory, tmp_path, monkeypatch
):
    """A delivery of at most ``INTERPRETED_UP_TO_BYTES`` loads on Spark's interpreted evaluation;
    a bigger one, and any delivery of a job that chose its own code generation, keep generated
    code. Each way loads the same rows and usage rows and reports the same figures, and the job's
    session has its own settings back after."""
    from core.session import codegen_set_by_user

    whole_stage, factory = "spark.sql.codegen.wholeStage", "spark.sql.codegen.factoryMode"
    own, chosen_by_suite = (spark.conf.get(whole_stage), spark.conf.get(factory)), codegen_set_by_user(spark)
    own_whole_stage = spark.conf.get(whole_stage, None)
    source, inventory = bucket_factory("src"), bucket_factory("inv")
    tables = write_tables(tmp_path, source)
    day = datetime(2024, 3, 1, tzinfo=timezone.utc)
    keys = [f"warehouse/events/d={n}/part-{n}.parquet" for n in range(20)] + SPECIAL_KEYS + ["other/x.txt"]
    destination = StorageLocation.parse(f"s3://{inventory}/reports")
    write_delivery(s3, source, _object_rows(source, keys, day), destination, "daily", taken_at=day)
    loaded_with = []
    load_delivery = load.load_delivery

    def recording(session, *args, **kwargs):
        loaded_with.append(session.conf.get(factory))
        return load_delivery(session, *args, **kwargs)

    monkeypatch.setattr(load, "load_delivery", recording)

    def ingest(name: str) -> tuple[dict, dict, list]:
        table, usage = f"s3://{inventory}/tables/{name}", f"s3://{inventory}/tables/{name}_usage"
        extra = ["--tables", tables, "--usage-table", usage]
        code, result = cli_json(*ingest_args(inventory, table, source, extra=extra))
        assert code == 0, result
        used = spark.read.format("delta").load(usage)
        return result["buckets"][0], table_rows(spark, table), sorted(map(repr, used.collect()))

    small = ingest("small")
    bound = load.INTERPRETED_UP_TO_BYTES
    monkeypatch.setattr(load, "INTERPRETED_UP_TO_BYTES", 0)
    big = ingest("big")
    monkeypatch.setattr(load, "INTERPRETED_UP_TO_BYTES", bound)
    spark.conf.set(whole_stage, "true")  # the job's own choice, as a --conf would make it
    try:
        chosen = ingest("chosen")
    finally:
        if own_whole_stage is None:
            spark.conf.unset(whole_stage)
        else:
            spark.conf.set(whole_stage, own_whole_stage)
    if chosen_by_suite:  # the suite runs with generated code chosen for every job
        assert loaded_with == [own[1]] * 3
    else:
        assert loaded_with == ["NO_CODEGEN", own[1], own[1]]
    assert (spark.conf.get(whole_stage), spark.conf.get(factory)) == own
    for name in ("rows", "bytes", "noncurrent_objects", "noncurrent_bytes", "delete_markers"):
        assert small[0][name] == big[0][name] == chosen[0][name], name
    assert small[0]["rows"] == len(keys)
    assert small[1] == big[1] == chosen[1] and set(small[1]) == set(keys)
    assert small[2] == big[2] == chosen[2] and len(small[2]) > 2


GOOD_ROW = ["{b}", "k/1", "3", "2024-01-15T00:00:00.000Z", "e", "STANDARD", "false", "SSE-S3"]


def _bad_deliveries(source: str):
    good = [[v.format(b=source) for v in GOOD_ROW]]
    foreign = [["someone-else", "k/2", "3", "2024-01-15T00:00:00.000Z", "e", "STANDARD", "false", "SSE-S3"]]
    return {
        "corrupt-gzip": ({"a.csv.gz": b"not gzip at all"}, {}, "a.csv.gz|gzip|Not in GZIP|incorrect header"),
        "corrupt-parquet": (
            {"a.parquet": b"PAR1 garbage PAR1"},
            {"file_format": "Parquet", "file_schema": PARQUET_SCHEMA},
            "a.parquet|parquet|Parquet",
        ),
        "corrupt-orc": (
            {"a.orc": b"ORC garbage"},
            {"file_format": "ORC", "file_schema": "struct<bucket:string,key:string,size:bigint>"},
            "Protocol message|Malformed|a.orc",  # Spark 4.0 and 3.5: protobuf's own message
        ),
        "foreign-rows": ({"a.csv.gz": csv_gz(good + foreign)}, {}, "name bucket 'someone-else'"),
        "too-many-columns": ({"a.csv.gz": csv_gz([good[0] + ["extra"]])}, {}, "Malformed|malformed|FAILFAST"),
        "too-few-columns": (
            {"a.csv.gz": csv_gz([good[0][:2]])},
            {},
            "lack Size or LastModifiedDate|Malformed",
        ),
        "checksum": ({"a.csv.gz": csv_gz(good)}, {"checksum": "f" * 32}, "does not match manifest.checksum"),
        "no-key-field": (
            {"a.csv.gz": csv_gz(good)},
            {"file_schema": "Bucket, Size"},
            "fileSchema has no Key",
        ),
        "unknown-format": ({"a.csv.gz": csv_gz(good)}, {"file_format": "JSON"}, "unknown fileFormat 'JSON'"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "corrupt-gzip",
        "corrupt-parquet",
        "corrupt-orc",
        "foreign-rows",
        "too-many-columns",
        "too-few-columns",
        "checksum",
        "no-key-field",
        "unknown-format",
    ],
)
@pytest.mark.slow
def test_bad_delivery_fails_its_bucket_and_leaves_the_table_as_it_was(spark, s3, bucket_factory, case):
    source, healthy, inventory = bucket_factory("src"), bucket_factory("ok"), bucket_factory("inv")
    table = f"s3://{inventory}/tables/inventory"
    good = [[v.format(b=source) for v in GOOD_ROW]]
    put_delivery(
        s3, inventory, source, "daily", "2024-01-15T01-00Z", {"good.csv.gz": csv_gz(good)}, prefix="reports"
    )
    assert cli_json(*ingest_args(inventory, table, source))[0] == 0
    version_before = DeltaTable.forPath(spark, table).history(1).first()["version"]
    put(s3, healthy, "h/1")
    snapshot_bucket(s3, healthy, StorageLocation.parse(f"s3://{inventory}/reports"), "daily")
    files, options, message = _bad_deliveries(source)[case]
    put_delivery(s3, inventory, source, "daily", "2024-01-16T01-00Z", files, prefix="reports", **options)

    code, result = cli_json(*ingest_args(inventory, table, source, healthy))

    assert code == 1
    failed, ok = result["buckets"]
    assert failed["status"] == "failed" and ok["status"] == "ok"
    assert "2024-01-16T01-00Z/manifest.json" in failed["error"]
    assert "\n" not in failed["error"]
    assert any(part in failed["error"] for part in message.split("|")), failed["error"]
    if case.startswith("corrupt-"):  # a reader's own error may name no format: the prefix does
        assert f": 1 {options.get('file_format', 'CSV')} data file): " in failed["error"], failed["error"]
    # the failed bucket's partition is exactly as before; the healthy bucket was still loaded
    assert set(table_rows(spark, table, source)) == {"k/1"}
    assert set(table_rows(spark, table, healthy)) == {"h/1"}
    history = DeltaTable.forPath(spark, table).history().collect()
    assert [h["version"] for h in history if h["version"] > version_before] == [
        version_before + 1
    ]  # only the healthy bucket


def test_no_delivery_for_date_fails_without_writing(spark, s3, bucket_factory):
    source, inventory = bucket_factory("src"), bucket_factory("inv")
    table = f"s3://{inventory}/tables/inventory"
    code, result = cli_json(*ingest_args(inventory, table, source, extra=["--date", "2024-03-01"]))
    assert code == 1
    assert "no complete S3 Inventory delivery for 2024-03-01" in result["buckets"][0]["error"]
    assert not DeltaTable.isDeltaTable(spark, table)


def test_usage_and_config_errors_exit_2(tmp_path, capsys):
    bad = tmp_path / "tables.yaml"
    bad.write_text("tables: [{name: a, path: ftp://x/y, owner: o}]")
    code, out = cli(*ingest_args("inv", "s3://inv/t", "src", extra=["--tables", str(bad)]))
    assert code == 2 and out == ""
    assert "tables.yaml: table 'a': path 'ftp://x/y' must start with s3://" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        cli(*ingest_args("inv", "s3://inv/t", "src", extra=["--date", "15/01/2024"]))
    assert exit_info.value.code == 2
    code, _ = cli(*ingest_args("inv", "hdfs://nn/t", "src"))
    assert code == 2


@pytest.mark.slow
@pytest.mark.own_jvms
def test_command_line_prints_only_json_on_stdout(s3, bucket_factory, s3_endpoint, tmp_path):
    """The installed command, as a user runs it, in its own process and JVM; a report sent to
    ``/dev/stdout`` is on its standard output too, not in its log."""
    source, inventory = bucket_factory("src"), bucket_factory("inv")
    put(s3, source, "x/1")
    snapshot = subprocess.run(
        [
            sys.executable,
            "-m",
            "jobs.cli",
            "snapshot",
            "--bucket",
            source,
            "--destination",
            f"s3://{inventory}/r",
            "--config-id",
            "c",
            "--format",
            "csv",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert snapshot.returncode == 0, snapshot.stderr
    assert json.loads(snapshot.stdout)["objects"] == 1

    def installed(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                str(Path(sys.executable).parent / "inventory-vacuum"),
                *argv,
            ],  # installed, not looked up on PATH
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    completed = installed(
        "ingest", "--destination", f"s3://{inventory}/r", "--source-bucket", source,
        "--source-bucket", "missing-bucket", "--config-id", "c",
        "--inventory-table", f"s3a://{inventory}/inventory", "--json",
    )  # fmt: skip
    assert completed.returncode == 1, completed.stderr[-2000:]
    result = json.loads(completed.stdout)  # nothing but the JSON object on stdout
    assert [b["status"] for b in result["buckets"]] == ["ok", "failed"]
    assert set(result["buckets"][0]) >= {
        "bucket",
        "status",
        "rows",
        "bytes",
        "data_files",
        "manifest_key",
        "inventory_taken_at",
        "seconds",
        "error",
    }
    registry = tmp_path / "tables.yaml"
    registry.write_text(f"tables:\n  - {{name: x, path: 's3://{source}/x', owner: team}}\n")
    chargeback = installed(
        "chargeback", "--inventory-table", f"s3a://{inventory}/inventory", "--tables", str(registry),
        "--json", "--output", "/dev/stdout",
    )  # fmt: skip
    assert chargeback.returncode == 0, chargeback.stderr[-2000:]
    [group] = json.loads(chargeback.stdout)["groups"]  # the report, and nothing else, on stdout
    # the one object, not tagged (the ingest was given no tables); its log's lines only on stderr
    assert (group["group"], group["objects"]) == ("unowned", 1) and '"groups"' not in chargeback.stderr


@pytest.mark.slow
@pytest.mark.own_jvms
def test_spark_submit_runs_the_same_jobs(spark, s3, bucket_factory, tmp_path):
    """``spark-submit jobs/*.py``: the cluster entry points, in local mode, as a user runs them."""
    from core.session import jvm_packages

    source, inventory = bucket_factory("src"), bucket_factory("inv")
    spark.range(3).write.format("delta").save(f"s3a://{source}/tables/t")
    put(s3, source, "tables/t/orphan.parquet")
    snapshot_bucket(s3, source, StorageLocation.parse(f"s3://{inventory}/r"), "c")
    registry = tmp_path / "tables.yaml"
    registry.write_text(f"tables:\n  - {{name: t, path: 's3://{source}/tables/t', owner: o}}\n")
    repo = Path(__file__).resolve().parent.parent
    # As the README says: the venv's interpreter runs spark-submit's SPARK_HOME lookup, the driver
    # and the workers, whatever python3 is on PATH; SPARK_HOME is the venv's pyspark, not the caller's.
    environment = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
    }
    environment.pop("PYSPARK_DRIVER_PYTHON", None)

    def run(job: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                str(Path(sys.executable).parent / "spark-submit"),
                "--master",
                "local[2]",
                "--packages",
                ",".join(jvm_packages()),
                "--conf",
                "spark.driver.host=127.0.0.1",
                str(repo / "jobs" / job),
                *args,
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            cwd=tmp_path,
            env=environment,
        )

    def submit(job: str, *args: str) -> dict:
        completed = run(job, *args)
        assert completed.returncode == 0, completed.stderr[-3000:]
        return submitted_json(completed.stdout)

    table = f"s3://{inventory}/inventory"
    ingested = submit(
        "ingest_inventory.py",
        "--destination",
        f"s3://{inventory}/r",
        "--source-bucket",
        source,
        "--config-id",
        "c",
        "--inventory-table",
        table,
        "--tables",
        str(registry),
    )
    assert (
        ingested["buckets"][0]["rows"]
        == 1 + len([k for k in s3.list_objects_v2(Bucket=source)["Contents"]]) - 1
    )
    vacuumed = submit("vacuum_tables.py", "--inventory-table", table, "--tables", str(registry), "--dry-run")
    assert vacuumed["tables"][0]["status"] == "ok"
    assert vacuumed["tables"][0]["retention_hours_effective"] == 168  # the orphan is too young
    # the restore's entry point: a dry run deletes nothing, so there is nothing to restore
    restore = run(
        "restore_tables.py",
        "--inventory-table",
        table,
        "--tables",
        str(registry),
        "--table",
        "t",
        "--run-id",
        vacuumed["run_id"],
        "--dry-run",
    )
    assert restore.returncode != 0  # Spark's launcher merges the Python process's stderr into stdout
    assert f"restore: error: no deletion ledger at s3://{inventory}/vacuum_deletions" in restore.stdout


def test_key_ranges_cut_at_tables_and_give_a_big_table_ranges_of_its_own():
    """The layout's ranges, from the checking job's counts: small groups share a range, a table
    bigger than one range gets parts of its own bounded by its keys (``key/`` up to ``key0``), and
    an untagged group too big for one range leaves the cutting to a global sort."""
    groups = [
        KeyGroup("w/c/", 10, "w/c0"),
        KeyGroup("w/", 5),
        KeyGroup("w/b/", 100, "w/b0"),
        KeyGroup("w/a/", 10, "w/a0"),
        KeyGroup("x/", 29),
    ]
    # 154 rows in 4 partitions: 39 a range
    assert key_ranges(groups, 4) == [
        KeyRange(""),  # w/ and w/a/
        KeyRange("w/b/", 3),
        KeyRange("w/b0"),  # w/c/ and x/
    ]
    assert key_ranges(groups, 1) == [KeyRange("")]
    assert key_ranges([KeyGroup("w/", 100), KeyGroup("w/a/", 10, "w/a0")], 4) is None
    assert key_ranges([KeyGroup("w/a/", 10, "w/a0"), KeyGroup("x/", 100)], 4) is None  # after the tables
    assert key_ranges([], 4) is None
    # a big table first, then last
    assert key_ranges([KeyGroup("a/", 90, "a0"), KeyGroup("b/", 10, "b0")], 2) == [
        KeyRange(""),
        KeyRange("a/", 2),
        KeyRange("a0"),
    ]
    assert key_ranges([KeyGroup("a/", 10, "a0"), KeyGroup("b/", 90, "b0")], 2) == [
        KeyRange(""),
        KeyRange("b/", 2),
        KeyRange("b0"),
    ]


def test_files_hold_about_rows_per_file_up_to_a_cap_not_the_shuffle_partitions(spark):
    """A delivery is cut into files of about ``ROWS_PER_FILE`` rows (one Parquet row group each,
    written unsorted), not into at most ``spark.sql.shuffle.partitions`` (8 in local mode) files
    of over a million rows; a small one into a file per task slot, or one per started
    ``MIN_ROWS_PER_FILE`` rows where that is fewer; a huge one into ``MAX_FILES``, or the setting
    where it is more."""
    assert spark.sparkContext.defaultParallelism == 2
    before = spark.conf.get("spark.sql.shuffle.partitions", None)
    try:
        spark.conf.set("spark.sql.shuffle.partitions", "8")
        assert layout.write_partitions(spark, 10_000_000) == 20
        assert layout.write_partitions(spark, 10_000_001) == 21
        assert layout.write_partitions(spark, 150_000) == 2  # both task slots write
        assert layout.write_partitions(spark, 90_000) == 1
        assert layout.write_partitions(spark, 0) == 1
        assert layout.write_partitions(spark, 1_000_000_000) == layout.MAX_FILES == 256
        spark.conf.set("spark.sql.shuffle.partitions", "400")
        assert layout.write_partitions(spark, 1_000_000_000) == 400
    finally:
        spark.conf.unset("spark.sql.shuffle.partitions") if before is None else spark.conf.set(
            "spark.sql.shuffle.partitions", before
        )


@pytest.mark.parametrize("registered", [True, False], ids=["tables", "no-registry"])
@pytest.mark.slow
def test_ingest_writes_files_of_contiguous_key_ranges(
    spark, s3, bucket_factory, tmp_path, monkeypatch, registered
):
    """What a table's slice reads: with the tables registered, the files are cut at the tables
    from the checking job's counts (no sampling pass), a big table's files hold its keys only and
    a small table's keys sit in one file; without a registry, a global sort cuts them. Either way
    no two files' key ranges overlap, except a big table's own, and Delta's statistics, what its
    file skipping compares, hold each file's key range (of the filtered columns only)."""
    source, inventory = bucket_factory("src"), bucket_factory("inv")
    monkeypatch.setattr(layout, "ROWS_PER_FILE", 40)
    monkeypatch.setattr(layout, "SORTED_ABOVE_ROWS", 30)  # files of 40 rows: sorted inside
    keys = [f"warehouse/t0/dt={n % 7}/part-{n:04d}.parquet" for n in range(120)]
    keys += [f"warehouse/t{t}/part-{n}.parquet" for t in (1, 2, 3) for n in range(10)]
    keys += [f"warehouse/readme-{n}" for n in range(5)] + [f"other/{n}" for n in range(3)]
    taken_at = datetime.now(timezone.utc)
    empty = dict.fromkeys(
        (
            "version_id",
            "is_latest",
            "is_delete_marker",
            "e_tag",
            "is_multipart_uploaded",
            "checksum_algorithm",
        )
    )
    rows = (
        {
            **empty,
            "bucket": source,
            "key": key,
            "size": 10,
            "last_modified_date": taken_at,
            "storage_class": "STANDARD",
        }
        for key in keys
    )
    destination = StorageLocation.parse(f"s3://{inventory}/reports")
    write_delivery(s3, source, rows, destination, "daily", taken_at=taken_at)
    registry = tmp_path / "tables.yaml"
    registry.write_text(
        "tables:\n"
        + "".join(f"  - {{name: t{t}, path: 's3://{source}/warehouse/t{t}', owner: o}}\n" for t in range(4))
    )
    table = f"s3://{inventory}/tables/inventory"
    extra = ["--tables", str(registry)] if registered else []
    settings = {
        "spark.sql.adaptive.coalescePartitions.enabled": "false",  # the global sort's files: its partitions
        "spark.sql.shuffle.partitions": "8",  # the global sort's 8 ranges; 158 rows at 40 a file make 4
    }
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        code, result = cli_json(*ingest_args(inventory, table, source, extra=extra))
    finally:
        for key, value in before.items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)
    assert code == 0 and result["buckets"][0]["rows"] == len(keys)
    frame = spark.read.format("delta").load(table).withColumn("file", F.input_file_name())
    assert sorted(r["key"] for r in frame.select("key").collect()) == sorted(keys)
    files = frame.groupBy("file").agg(
        F.min("key").alias("low"),
        F.max("key").alias("high"),
        F.collect_set(F.regexp_extract("key", r"^warehouse/(t\d)/", 1)).alias("tables"),
    )
    collected = files.collect()
    files = [(r["low"], r["high"], set(r["tables"]) - {""}) for r in collected]
    for row in collected:  # one file read in its own order
        in_file = [r["key"] for r in spark.read.parquet(row["file"]).select("key").collect()]
        assert in_file == sorted(in_file)
    assert len(files) > 1
    for index, (low, high, tables) in enumerate(files):
        for other_low, other_high, other_tables in files[index + 1 :]:
            if low <= other_high and other_low <= high:
                assert tables == other_tables == {"t0"}, (low, high, other_low, other_high)
    # the table the ingest created keeps statistics of the filtered columns only, and of every file
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{table}`").first()
    assert detail["properties"]["delta.dataSkippingStatsColumns"] == ",".join(INVENTORY_STATS_COLUMNS)
    log = spark.read.json(f"{table}/_delta_log/*.json").where("add IS NOT NULL").select("add.*").collect()
    stats = {add["path"]: json.loads(add["stats"]) for add in log}
    assert len(stats) == len(files)
    for one in stats.values():
        assert set(one["nullCount"]) == set(INVENTORY_STATS_COLUMNS)
        assert set(one["minValues"]) <= set(INVENTORY_STATS_COLUMNS) and "key" in one["minValues"]
    for row in collected:  # Delta truncates a long string's bounds, outwards
        one = stats[next(path for path in stats if row["file"].endswith("/" + path.rsplit("/", 1)[-1]))]
        assert one["minValues"]["key"] <= row["low"] and row["high"] <= one["maxValues"]["key"]
    if registered:
        # 4 ranges of 40 rows: other/ and warehouse/readme-* (8 rows) up to t0's keys; t0's 120
        # in 3 parts of its own; then t1, t2 and t3 (30 rows) together
        bounds = ["", "warehouse/t0/", "warehouse/t00", "\U0010ffff"]
        in_range = [
            sum(1 for low, high, _ in files if bounds[i] <= low and high < bounds[i + 1]) for i in range(3)
        ]
        assert in_range == [1, 3, 1] and len(files) == 5
        assert all(tables == {"t0"} for low, _, tables in files if low.startswith("warehouse/t0/"))
        for t in (1, 2, 3):  # the files a slice of table t reads: one
            prefix = f"warehouse/t{t}/"
            assert sum(1 for low, high, _ in files if low < f"warehouse/t{t}0" and high >= prefix) == 1
            bounds_met = [
                one
                for one in stats.values()
                if one["minValues"]["key"] < f"warehouse/t{t}0" and one["maxValues"]["key"] >= prefix
            ]
            assert len(bounds_met) == 1  # by Delta's statistics too


_COMPONENTS = st.sampled_from(["a", "b", "t", "t0", "é", "\U0001f600", "x y", "%2B", "=", "\uffff"])
_KEYS = st.lists(st.lists(_COMPONENTS, min_size=1, max_size=4).map("/".join), min_size=1, max_size=60)


@settings(max_examples=300, deadline=None, derandomize=True)
@example(keys=["t/a", "t/b", "t0/a", "t0"], table_picks=[0], partitions=4)  # keys just past a split table
@given(keys=_KEYS, table_picks=st.lists(st.integers(0, 59), max_size=6), partitions=st.integers(1, 8))
def test_every_table_s_keys_fall_in_one_range_and_a_split_range_holds_one_table(
    keys, table_picks, partitions
):
    """Ranges from groups counted as the checking job counts them (a key belongs to the table whose
    path and ``/`` start it; the others to their top-level prefix), looked up as the write does
    (the last lower bound at or below the key): a table's keys share one range, and a range of
    several parts holds that one table's keys only."""
    tables: list[str] = []
    for pick in table_picks:  # registered paths: folders of the keys, none inside another
        parts = keys[pick % len(keys)].split("/")[:-1]
        path = "/".join(parts[: 1 + pick % max(1, len(parts))]) if parts else ""
        if path and not any(
            path == t or path.startswith(t + "/") or t.startswith(path + "/") for t in tables
        ):
            tables.append(path)
    owner = {key: next((t for t in tables if key.startswith(t + "/")), None) for key in keys}
    counts: dict[tuple[str, str | None], int] = {}
    for key, table in owner.items():
        group = (
            (f"{table}/", f"{table}0") if table else ((key.split("/")[0] + "/") if "/" in key else "", None)
        )
        counts[group] = counts.get(group, 0) + 1
    ranges = key_ranges([KeyGroup(start, n, end) for (start, end), n in counts.items()], partitions)
    if ranges is None:  # only for an untagged group too big for a range
        target = -(-len(owner) // partitions)
        assert any(end is None and n > target for (_, end), n in counts.items())
        return
    lowers = [r.lower for r in ranges]
    assert lowers[0] == "" and lowers == sorted(set(lowers))
    index = {key: bisect.bisect_right(lowers, key) - 1 for key in owner}
    for table in tables:
        assert len({index[key] for key in owner if owner[key] == table}) <= 1
    for i, key_range in enumerate(ranges):
        if key_range.parts > 1:
            assert len({owner[key] for key in owner if index[key] == i}) == 1
            assert None not in {owner[key] for key in owner if index[key] == i}
