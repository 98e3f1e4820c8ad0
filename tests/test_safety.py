"""Safety, round two: nested tables, candidates Delta must never name, measured counts, a ledger,
real delete errors, bad numbers, keys Delta cannot parse, and small races.

Each test reproduces a way the vacuum could delete what is not garbage or report what is not
true, on real Delta tables and the moto S3 server. They run on the default Spark line; on the
other lines Delta's planner, delete and path reading are exercised by the cross-writer matrix, and
three run here too (``line_sensitive``): the tool's own nested-table detection (on 3.5 with Spark's
generated code), a live file recorded by absolute URI (each line's S3A and Hadoop), and concurrent
appends to one ledger (each line's log store).
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from core.errors import VacuumRefused
from tests.support.helpers import (
    cli,
    cli_json,
    deliver_inventory,
    ingest_inventory,
    keys_of,
    put,
    registry_file,
    retention_deadline,
    rows_at,
    take_inventory,
    wait_until,
    write_local_inventory,
)
from tests.support.tables import make_table, referenced_keys
from vacuum import gates


def _vacuum(inventory: str, registry: str, *extra: str) -> tuple[int, dict]:
    return cli_json("vacuum", "--inventory-table", inventory, "--tables", registry, *extra)


@pytest.fixture
def nested_lake(spark, s3, bucket_factory, tmp_path):
    """Registered ``wh/outer`` holding an unregistered Delta table ``wh/outer/inner_tbl`` (with an
    overwrite, so it has garbage of its own), and the run's own inventory table below ``outer``."""
    source, inventory_bucket = bucket_factory("lake"), bucket_factory("inv")
    outer = make_table(spark, source, "wh/outer")
    inner = f"s3a://{source}/wh/outer/inner_tbl"
    spark.range(5).write.format("delta").save(inner)
    spark.range(3).write.format("delta").mode("overwrite").save(inner)
    put(s3, source, "wh/outer/junk.parquet")
    past_retention = retention_deadline()
    # a user put this project's own inventory table below the registered table
    inventory = f"s3://{source}/wh/outer/ops/inventory"
    take_inventory(s3, source, inventory_bucket, inventory)
    take_inventory(s3, source, inventory_bucket, inventory)  # now the inventory lists its own files
    wait_until(past_retention)
    registry = registry_file(tmp_path, {"outer": f"s3://{source}/wh/outer"})
    return {"bucket": source, "outer": outer, "inner": inner, "inventory": inventory, "registry": registry}


@pytest.mark.line_sensitive  # the tool's nested-table detection, on 3.5 with generated code
@pytest.mark.slow
def test_nested_table_and_own_tables_under_a_registered_table_are_never_candidates(spark, s3, nested_lake):
    lake = nested_lake
    inner_keys = {k for k in keys_of(s3, lake["bucket"], "wh/outer/inner_tbl/")}
    own_keys = {k for k in keys_of(s3, lake["bucket"], "wh/outer/ops/")}
    inner_rows = rows_at(spark, lake["inner"])
    assert any(k.endswith(".parquet") for k in own_keys)

    code, result = _vacuum(
        lake["inventory"], lake["registry"], "--history-table", f"s3://{lake['bucket']}/x/h"
    )
    assert code == 0, result["tables"][0]["reason"]
    [run] = result["tables"]
    after = keys_of(s3, lake["bucket"])
    assert inner_keys <= after and own_keys <= after  # nothing of the nested or the own tables
    assert "wh/outer/junk.parquet" not in after  # the outer table's garbage is gone
    assert rows_at(spark, lake["inner"]) == inner_rows
    inner_data = [k for k in inner_keys if "/_delta_log/" not in k]
    [nested] = run["nested_tables"]
    assert nested["path"].endswith("/wh/outer/inner_tbl") and nested["objects_kept"] == len(inner_data)
    assert run["kept"]["nested_table"] == len(inner_data)
    assert run["kept"]["protected_path"] > 0  # the inventory table (it has a log too: protected first)
    assert any("nested Delta table" in w and "inner_tbl" in w for w in run["warnings"])


@pytest.mark.slow
def test_nested_table_in_list_and_lite_modes(spark, s3, nested_lake, capsys):
    lake = nested_lake
    before = keys_of(s3, lake["bucket"])
    for mode in ("list", "lite"):
        out = Path(lake["registry"]).parent / f"{mode}.parquet"
        code, result = _vacuum(
            lake["inventory"], lake["registry"], "--mode", mode, "--dry-run", "--candidates", str(out)
        )
        assert code == 0, result["tables"][0]["reason"]
        planned = pq.read_table(out).column("path").to_pylist()
        assert not [p for p in planned if "/inner_tbl/" in p or "/ops/" in p], mode
    # a real list run deletes what Delta plans again, unchecked: only when the user says so
    code, _ = cli(
        "vacuum", "--inventory-table", lake["inventory"], "--tables", lake["registry"], "--mode", "list"
    )
    assert code == 2 and "--mode flat" in capsys.readouterr().err
    # Delta's own VACUUM in list mode would delete the nested table's files: refused, not done
    code, real = _vacuum(lake["inventory"], lake["registry"], "--mode", "list", "--delete-with", "delta")
    assert code == 1 and real["tables"][0]["status"] == "refused"
    assert "nested table" in real["tables"][0]["reason"] and "--mode flat" in real["tables"][0]["reason"]
    assert before <= keys_of(s3, lake["bucket"])  # nothing deleted (the run's history was added)


def test_table_location_beyond_the_basic_plane_is_refused_in_inventory_mode(spark, tmp_path):
    """Delta cuts relative paths by UTF-16 length: 'part-…' would become 'art-…'."""
    root = tmp_path / "t\U0001f4e6x"
    uri = f"file://{root}"
    spark.range(4).write.format("delta").save(uri)
    spark.range(2).write.format("delta").mode("overwrite").save(uri)
    (root / "orphan.parquet").write_bytes(b"junk")
    old = time.time() - 30 * 24 * 3600
    os.utime(root / "orphan.parquet", (old, old))
    inventory = f"file://{tmp_path}/inventory"
    write_local_inventory(spark, root, inventory)
    registry = registry_file(tmp_path, {"t": uri})
    code, result = _vacuum(inventory, registry, "--dry-run")
    assert code == 1 and result["tables"][0]["status"] == "refused"
    assert "Basic Multilingual Plane" in result["tables"][0]["reason"]
    assert "--mode list" in result["tables"][0]["reason"]
    # list mode, the documented way, plans exactly the orphan (default 7-day retention)
    out = tmp_path / "list.parquet"
    code, listed = _vacuum(inventory, registry, "--dry-run", "--mode", "list", "--candidates", str(out))
    assert code == 0, listed["tables"][0]["reason"]
    assert pq.read_table(out).column("path").to_pylist() == [f"file:{root}/orphan.parquet"]


@pytest.mark.slow
def test_deep_partition_tree_plans_no_directories(spark, s3, bucket_factory, tmp_path):
    source, inventory_bucket = bucket_factory("lake"), bucket_factory("inv")
    uri = f"s3a://{source}/deep"
    spark.sql(
        f"CREATE TABLE delta.`{uri}` (id INT, a INT, b INT, c INT, d INT, e INT) USING delta "
        "PARTITIONED BY (a, b, c, d, e) TBLPROPERTIES ('delta.deletedFileRetentionDuration' = 'interval 1 seconds')"
    )
    spark.sql(f"INSERT INTO delta.`{uri}` VALUES (1, 1, 1, 1, 1, 1), (2, 2, 1, 1, 1, 1)")
    spark.sql(f"INSERT OVERWRITE delta.`{uri}` VALUES (3, 1, 1, 1, 1, 1)")
    past_retention = retention_deadline(2.0)  # past the 1-second retention
    inventory = f"s3://{inventory_bucket}/tables/inventory"
    take_inventory(s3, source, inventory_bucket, inventory)
    wait_until(past_retention)
    registry = registry_file(tmp_path, {"deep": f"s3://{source}/deep"})
    before = keys_of(s3, source)
    out = tmp_path / "deep.parquet"
    code, result = _vacuum(inventory, registry, "--dry-run", "--candidates", str(out))
    assert code == 0, result["tables"][0]["reason"]
    planned = {p.split(f"{source}/", 1)[1] for p in pq.read_table(out).column("path").to_pylist()}
    assert planned and planned <= before  # every candidate is an object, no directory
    assert planned == {k for k in before if k.startswith("deep/a=") and ".crc" not in k} - referenced_keys(
        spark, uri
    )


@pytest.mark.slow
def test_delta_delete_counts_what_is_really_gone(spark, s3, s3_server, lake_with_junk):
    """Delta swallows each file's delete error; the report must show the measured count."""
    lake = lake_with_junk
    s3_server.deny_deletes(lake["bucket"], "events/day=2024-01-01/")
    try:
        code, result = _vacuum(lake["inventory"], lake["registry"], "--delete-with", "delta")
    finally:
        s3_server.allow_all()
    [run] = result["tables"]
    still_there = {k for k in keys_of(s3, lake["bucket"], "events/day=2024-01-01/")} & lake["expected"]
    assert still_there  # the denied files really stayed
    assert code == 1 and run["status"] == "failed"
    assert run["planned_files"] == len(lake["expected"])
    assert run["remaining_files"] == len(still_there)
    assert run["deleted_files"] == len(lake["expected"]) - len(still_there)
    assert f"left {len(still_there)} of the {len(lake['expected'])}" in run["reason"]


def test_batch_delete_under_access_denied_counts_ledgers_and_reports(spark, s3, s3_server, lake_with_junk):
    lake = lake_with_junk
    s3_server.deny_deletes(lake["bucket"], "events/day=2024-01-01/")
    s3_server.reset_counts()
    try:
        code, result = _vacuum(lake["inventory"], lake["registry"], "--delete-with", "batch")
    finally:
        s3_server.allow_all()
    [run] = result["tables"]
    after = keys_of(s3, lake["bucket"])
    denied = {k for k in lake["expected"] if k.startswith("events/day=2024-01-01/")}
    assert denied and denied <= after and not (lake["expected"] - denied) & after
    assert code == 1 and run["status"] == "failed"
    assert (run["deleted_files"], run["remaining_files"]) == (len(lake["expected"] - denied), len(denied))
    assert f"{len(lake['expected'] - denied)} file(s) deleted, {len(denied)} remain" in run["reason"]
    # AccessDenied is not retried: one request per task (2 tasks here), where 6 attempts were made before
    assert s3_server.counts(lake["bucket"])["DeleteObjects"] == run["delete_requests"] <= 2
    ledger = spark.read.format("delta").load(lake["ledger"]).collect()
    assert {r["key"] for r in ledger} == lake["expected"] - denied


@pytest.mark.slow
def test_second_batch_run_on_the_same_inventory_deletes_and_reports_nothing(spark, s3, lake_with_junk):
    lake = lake_with_junk
    # a later delivery whose scan met the junk before the first run deleted it (its timestamp is
    # when the scan began, and AWS calls the list eventually consistent)
    deliver_inventory(
        s3,
        lake["bucket"],
        lake["inventory_bucket"],
        taken_at=datetime.now(timezone.utc) + timedelta(minutes=10),
    )
    code, first = _vacuum(lake["inventory"], lake["registry"])
    assert code == 0, first["tables"][0]["reason"]
    assert first["tables"][0]["deleted_files"] == len(lake["expected"])
    code, second = _vacuum(lake["inventory"], lake["registry"])
    assert code == 0, second["tables"][0]["reason"]
    [run] = second["tables"]
    assert (run["planned_files"], run["deleted_files"], run["delete_requests"]) == (0, 0, 0)
    assert run["kept"] == {"deleted_earlier": len(lake["expected"]), "unparsable_key": 1}
    ledger = spark.read.format("delta").load(lake["ledger"])
    assert ledger.count() == len(lake["expected"])  # one row per deleted object, once
    assert {r["key"] for r in ledger.collect()} == lake["expected"]

    # the later delivery still lists the deleted junk: the ledger leaves it out all the same
    ingest_inventory(lake["bucket"], lake["inventory_bucket"], lake["inventory"])
    code, third = _vacuum(lake["inventory"], lake["registry"], "--dry-run")
    assert code == 0, third["tables"][0]["reason"]
    [run] = third["tables"]
    assert run["inventory_taken_at"] > first["tables"][0]["inventory_taken_at"]
    assert (run["planned_files"], run["kept"]["deleted_earlier"]) == (0, len(lake["expected"]))


@pytest.mark.parametrize("delete_with", ["batch", "delta"])
@pytest.mark.slow
def test_verify_existence_reports_objects_deleted_by_someone_else_as_already_gone(
    spark, s3, lake_with_junk, delete_with
):
    lake = lake_with_junk
    gone = sorted(lake["expected"])[0]
    s3.delete_object(Bucket=lake["bucket"], Key=gone)  # after the inventory was taken
    code, result = _vacuum(
        lake["inventory"], lake["registry"], "--verify-existence", "--delete-with", delete_with
    )
    assert code == 0, result["tables"][0]["reason"]
    [run] = result["tables"]
    assert (run["planned_files"], run["already_gone_files"]) == (len(lake["expected"]), 1)
    assert (run["deleted_files"], run["remaining_files"]) == (len(lake["expected"]) - 1, 0)
    assert not lake["expected"] & keys_of(s3, lake["bucket"])
    ledger = spark.read.format("delta").load(lake["ledger"]).collect()
    assert {r["key"] for r in ledger if r["deleted_with"] == delete_with} == lake["expected"] - {gone}
    assert [(r["key"], r["length"]) for r in ledger if r["deleted_with"] == "already_gone"] == [(gone, None)]

    # a second run on the same inventory claims neither the deleted objects nor the one found gone
    code, second = _vacuum(
        lake["inventory"], lake["registry"], "--verify-existence", "--delete-with", delete_with
    )
    [again] = second["tables"]
    assert code == 0, again["reason"]
    assert (again["planned_files"], again["deleted_files"]) == (0, 0)
    assert again["kept"]["deleted_earlier"] == len(lake["expected"])


def test_keys_delta_cannot_parse_are_kept_and_counted(spark, s3, lake_with_junk):
    lake = lake_with_junk
    code, result = _vacuum(lake["inventory"], lake["registry"])
    assert code == 0, result["tables"][0]["reason"]
    [run] = result["tables"]
    assert run["kept"].get("unparsable_key") == 1
    after = keys_of(s3, lake["bucket"])
    assert "events/10:00.log" in after  # never deleted
    assert "events/day=2024-01-02/x:y.parquet" not in after  # a colon below the first level is fine


@pytest.mark.parametrize(
    "flags",
    [
        ["--max-inventory-age-hours", "nan"],
        ["--max-inventory-age-hours", "inf"],
        ["--retain-hours", "nan"],
        ["--retain-hours", "inf"],
        ["--retain-hours", "-1"],
        ["--min-coverage", "nan"],
    ],
)
def test_numbers_that_would_switch_a_gate_off_exit_2(tmp_path, capsys, flags):
    registry = registry_file(tmp_path, {"events": "s3://lake/events"})
    with pytest.raises(SystemExit) as exit_info:
        cli("vacuum", "--inventory-table", "s3://inv/inventory", "--tables", registry, *flags)
    assert exit_info.value.code == 2
    assert flags[0] in capsys.readouterr().err


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_registry_retention_must_be_finite(tmp_path, capsys, value):
    path = tmp_path / "tables.yaml"
    path.write_text(f"tables:\n  - {{name: t, path: 's3://lake/t', owner: o, retain_hours: {value}}}\n")
    code, out = cli("vacuum", "--inventory-table", "s3://inv/inventory", "--tables", str(path), "--dry-run")
    assert code == 2 and out == ""
    assert "retain_hours must be a finite number" in capsys.readouterr().err


def test_inventory_with_wrong_types_or_seconds_is_refused(spark, tmp_path, capsys):
    from pyspark.sql import functions as F

    root = tmp_path / "t"
    spark.range(2).write.format("delta").save(f"file://{root}")
    registry = registry_file(tmp_path, {"t": f"file://{root}"})
    good = f"file://{tmp_path}/inventory"
    write_local_inventory(spark, root, good)
    frame = spark.read.format("delta").load(good)

    as_string = f"file://{tmp_path}/inventory_strings"
    frame.withColumn("modificationTime", F.col("modificationTime").cast("string")).write.format("delta").save(
        as_string
    )
    code, out = cli("vacuum", "--inventory-table", as_string, "--tables", registry, "--dry-run")
    assert code == 2 and out == ""
    assert "modificationTime is string, expected bigint" in capsys.readouterr().err

    in_seconds = f"file://{tmp_path}/inventory_seconds"
    frame.withColumn("modificationTime", (F.col("modificationTime") / 1000).cast("long")).write.format(
        "delta"
    ).save(in_seconds)
    code, result = _vacuum(in_seconds, registry, "--dry-run")
    assert code == 1 and "looks like seconds" in result["tables"][0]["reason"]

    # a table's rows without the time they were taken: their age is unknown, whatever the bucket's
    no_time = f"file://{tmp_path}/inventory_no_time"
    frame.withColumn("inventory_taken_at", F.lit(None).cast("timestamp")).unionByName(
        frame.limit(1).withColumn("key", F.lit("elsewhere/a.parquet"))
    ).write.format("delta").save(no_time)
    code, result = _vacuum(no_time, registry, "--dry-run")
    assert code == 1 and "have no inventory_taken_at: their age is unknown" in result["tables"][0]["reason"]


@pytest.mark.slow
def test_unwritable_report_path_is_found_before_anything_is_deleted(spark, s3, lake_with_junk, capsys):
    lake = lake_with_junk
    before = keys_of(s3, lake["bucket"])
    code, out = cli(
        "vacuum",
        "--inventory-table",
        lake["inventory"],
        "--tables",
        lake["registry"],
        "--report",
        "/nonexistent-dir/report.json",
    )
    assert code == 2 and out == ""
    assert "--report /nonexistent-dir/report.json" in capsys.readouterr().err
    assert keys_of(s3, lake["bucket"]) == before


@pytest.mark.slow
def test_the_run_reads_one_pinned_inventory_version(spark, s3, lake_with_junk):
    from delta.tables import DeltaTable

    lake = lake_with_junk
    code, result = _vacuum(lake["inventory"], lake["registry"], "--dry-run")
    assert code == 0, result["tables"][0]["reason"]
    newest = DeltaTable.forPath(spark, lake["inventory"]).history(1).first()["version"]
    assert result["tables"][0]["inventory_version"] == newest


@pytest.mark.line_sensitive  # concurrent appends to one Delta table through each line's log store
@pytest.mark.slow
def test_tables_deleting_in_parallel_share_one_ledger(spark, s3, bucket_factory, tmp_path):
    """The first run creates the ledger once: parallel first appends used to race on creating it."""
    source, inventory_bucket = bucket_factory("lake"), bucket_factory("inv")
    uris = {name: make_table(spark, source, name) for name in ("one", "two", "three")}
    put(s3, source, *(f"{name}/junk.parquet" for name in uris))
    past_retention = retention_deadline()
    inventory = f"s3://{inventory_bucket}/tables/inventory"
    take_inventory(s3, source, inventory_bucket, inventory)
    wait_until(past_retention)
    registry = registry_file(tmp_path, uris)
    code, result = _vacuum(inventory, registry, "--parallel", "3")
    assert code == 0, [t["reason"] for t in result["tables"]]
    assert not [w for t in result["tables"] for w in t["warnings"]]
    ledger = spark.read.format("delta").load(f"s3://{inventory_bucket}/tables/vacuum_deletions")
    by_table = {r["table"]: r["count"] for r in ledger.groupBy("table").count().collect()}
    assert by_table == {t["name"]: t["deleted_files"] for t in result["tables"]}
    assert all(count > 0 for count in by_table.values())


def test_an_inventory_from_the_future_is_refused():
    now = datetime.now(timezone.utc)
    assert gates.check_freshness(now + timedelta(minutes=10), now, 72, "b") < 0  # clock skew is fine
    with pytest.raises(VacuumRefused, match=r"in the future"):
        gates.check_freshness(now + timedelta(hours=3), now, 72, "b")


@pytest.mark.line_sensitive  # each line's S3A and Hadoop with the plan check
def test_a_live_file_recorded_by_its_absolute_s3_uri_is_never_deleted(spark, s3, bucket_factory, tmp_path):
    """Another writer recorded a live file inside the table by its absolute ``s3://`` URI, while
    Spark reads the table as ``s3a://``. Whatever Delta makes of that path, the file is never
    planned nor deleted, and garbage beside it still goes."""
    import json

    source, inventory_bucket = bucket_factory("lake"), bucket_factory("inv")
    uri = make_table(spark, source)
    live_key = "events/day=2024-01-03/part-absolute live.parquet"
    s3.copy_object(
        Bucket=source,
        Key=live_key,
        CopySource={"Bucket": source, "Key": sorted(referenced_keys(spark, uri))[0]},
    )
    size = s3.head_object(Bucket=source, Key=live_key)["ContentLength"]
    add = {
        "path": f"s3://{source}/events/day=2024-01-03/part-absolute%20live.parquet",
        "partitionValues": {"day": "2024-01-03"},
        "size": size,
        "modificationTime": int(time.time() * 1000),
        "dataChange": True,
    }
    versions = [k for k in keys_of(s3, source, "events/_delta_log/") if k.endswith(".json")]
    s3.put_object(
        Bucket=source,
        Key=f"events/_delta_log/{len(versions):020d}.json",
        Body=(
            json.dumps({"commitInfo": {"operation": "WRITE"}}) + "\n" + json.dumps({"add": add}) + "\n"
        ).encode(),
    )
    put(s3, source, "events/day=2024-01-03/orphan.parquet")
    past_retention = retention_deadline()
    inventory = f"s3://{inventory_bucket}/tables/inventory"
    take_inventory(s3, source, inventory_bucket, inventory)
    wait_until(past_retention)
    registry = registry_file(tmp_path, {"events": f"s3://{source}/events"})
    code, result = _vacuum(inventory, registry)
    [run] = result["tables"]
    assert live_key in keys_of(s3, source)
    if code == 0:  # Delta knew the file: garbage went, the live file stayed and was counted live
        assert "events/day=2024-01-03/orphan.parquet" not in keys_of(s3, source)
        assert run["coverage"] == 1.0
    else:  # Delta named it: the cross-check refused the table before any delete
        assert "file(s) that are live" in run["reason"]
        assert "events/day=2024-01-03/orphan.parquet" in keys_of(s3, source)
