"""``inventory-vacuum restore``: a vacuum undone on a versioned bucket, from the deletion ledger.

The planning (which marker is the tool's, what may be removed) is tested on plain values; the
flow on the local S3 server, after real vacuums of real Delta tables.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from testing.local_s3 import Faults, LocalS3Server
from tests.support.helpers import (
    cli,
    cli_json,
    keys_of,
    put,
    registry_file,
    retention_deadline,
    take_inventory,
    wait_until,
)
from tests.support.tables import all_versions_readable, make_table, referenced_keys
from vacuum.restore_plan import Deletion, Version, expiring_rule, plan_object, select_deletions

T0 = datetime(2026, 11, 25, 12, 0, 0, tzinfo=timezone.utc)


def _deletion(**given: Any) -> Deletion:
    values: dict[str, Any] = {
        "run_id": "r1",
        "table": "events",
        "path": "s3a://b/events/x.parquet",
        "bucket": "b",
        "key": "events/x.parquet",
        "length": 5,
        "deleted_with": "batch",
        "deleted_at": T0 + timedelta(seconds=2),
        "delete_marker_version_id": "ours",
    }
    return Deletion(**{**values, **given})


def _object(version_id: str, seconds: int, size: int = 5, latest: bool = False) -> Version:
    return Version(version_id, False, latest, T0 + timedelta(seconds=seconds), size, '"e"')


def _marker(version_id: str, seconds: int, latest: bool = False) -> Version:
    return Version(version_id, True, latest, T0 + timedelta(seconds=seconds))


# ---- planning -------------------------------------------------------------------------------


@pytest.mark.spark_independent
def test_the_tools_marker_on_top_of_the_deleted_object_is_removed():
    plan = plan_object(_deletion(), [_marker("ours", 1, latest=True), _object("v1", -100)])
    assert (plan.outcome, plan.marker.version_id, plan.version.version_id) == ("would_restore", "ours", "v1")


@pytest.mark.spark_independent
def test_a_later_delete_or_write_of_the_key_is_left_alone():
    later_delete = [_marker("theirs", 60, latest=True), _marker("ours", 1), _object("v1", -100)]
    assert plan_object(_deletion(), later_delete).outcome == "deleted_again"
    rewritten = [_object("v2", 60, size=9, latest=True), _marker("ours", 1), _object("v1", -100)]
    plan = plan_object(_deletion(delete_started_at=T0), rewritten)
    assert plan.outcome == "current_again" and "written since the vacuum" in plan.reason
    # the marker the ledger names is gone (removed by someone) and the key is current again: its
    # object is the one from before the delete, not one written since
    plan = plan_object(_deletion(delete_started_at=T0), [_object("v1", -100, latest=True)])
    assert plan.outcome == "current_again"
    assert "older than the vacuum's delete" in plan.reason and "written since" not in plan.reason
    # with no start of the delete known, neither is said
    plan = plan_object(_deletion(), [_object("v1", -100, latest=True)])
    assert plan.outcome == "current_again"
    assert "older than" not in plan.reason and "written since" not in plan.reason
    # the tool's marker is still there, below an object S3 dates before the delete (a clock behind
    # the driver's): the marker is not said to be gone
    skewed = [_object("v2", -60, latest=True), _marker("ours", 1), _object("v1", -100)]
    plan = plan_object(_deletion(delete_started_at=T0), skewed)
    assert plan.outcome == "current_again" and "no longer there" not in plan.reason
    # someone else's marker, never the tool's: the ledger names another
    assert plan_object(_deletion(), [_marker("theirs", 1, latest=True), _object("v1", -100)]).outcome == (
        "deleted_again"
    )


@pytest.mark.spark_independent
def test_without_a_recorded_marker_the_time_decides():
    """Delta's own delete names no marker: the newest marker between the start of the delete and
    the ledger row's time is the tool's; a marker made after it is someone else's."""
    row = _deletion(delete_marker_version_id=None, delete_started_at=T0 - timedelta(seconds=30))
    assert plan_object(row, [_marker("m", 1, latest=True), _object("v1", -100)]).outcome == "would_restore"
    after = [_marker("theirs", 120, latest=True), _marker("m", 1), _object("v1", -100)]
    assert plan_object(row, after).outcome == "deleted_again"
    before_the_run = [_marker("old", -60, latest=True), _object("v1", -100)]
    assert plan_object(row, before_the_run).outcome == "deleted_again"
    # within the clock's tolerance a later marker may be taken for the tool's: with two markers of
    # the window, which is the tool's is unknown, and nothing is removed
    close = [_marker("theirs", 3, latest=True), _marker("m", 1), _object("v1", -100)]
    plan = plan_object(row, close)
    assert plan.outcome == "two_markers" and "theirs" in plan.reason and ", m," not in plan.reason
    # no start of the delete known (no delete_started_at, no vacuum_runs row): no guess by time,
    # however the markers lie; a marker someone made before the vacuum is never taken for the tool's
    unknown = _deletion(delete_marker_version_id=None)
    for versions in (before_the_run, [_marker("m", 1, latest=True), _object("v1", -100)]):
        assert plan_object(unknown, versions).outcome == "marker_unknown"
    # an older ledger has no delete_started_at: the run's start from vacuum_runs opens the window
    older = _deletion(delete_marker_version_id=None, run_started_at=T0 - timedelta(seconds=30))
    assert plan_object(older, [_marker("m", 1, latest=True), _object("v1", -100)]).outcome == "would_restore"
    # someone wrote the key and deleted it again inside the window: which marker is the tool's is
    # unknown, though the version below the newest is an object of the right length
    rewritten = [_marker("theirs", 2, latest=True), _object("v2", 2), _marker("m", 1), _object("v1", -100)]
    assert plan_object(row, rewritten).outcome == "two_markers"


@pytest.mark.spark_independent
def test_a_retried_delete_and_a_suspended_buckets_null_marker_are_not_guessed():
    started = T0 - timedelta(seconds=5)
    # a retried DeleteObjects (the answer lost, the delete done) stacks a second marker of the window
    retried = [_marker("ours", 1, latest=True), _marker("first try", 0), _object("v1", -100)]
    assert plan_object(_deletion(delete_started_at=started), retried).outcome == "two_markers"
    # a marker from before the delete began is someone's earlier delete
    assert plan_object(_deletion(delete_started_at=started), [
        _marker("ours", 1, latest=True), _marker("earlier", -60), _object("v1", -100)
    ]).outcome == "deleted_before"  # fmt: skip
    # versioning Suspended: every marker is "null", and a later delete replaces the tool's
    null = _deletion(delete_marker_version_id="null", delete_started_at=started)
    assert (
        plan_object(null, [_marker("null", 1, latest=True), _object("v1", -100)]).outcome == "would_restore"
    )
    later = [_marker("null", 3 * 86400, latest=True), _object("v1", -100)]
    assert plan_object(null, later).outcome == "deleted_again"
    unknown = _deletion(delete_marker_version_id="null")
    assert plan_object(unknown, [_marker("null", 1, latest=True), _object("v1", -100)]).outcome == (
        "marker_unknown"
    )


@pytest.mark.spark_independent
def test_nothing_below_a_marker_below_or_another_length_is_not_restored():
    assert plan_object(_deletion(), [_marker("ours", 1, latest=True)]).outcome == "expired"
    assert plan_object(_deletion(), []).outcome == "expired"
    below_marker = [_marker("ours", 1, latest=True), _marker("earlier", -10), _object("v1", -100)]
    assert plan_object(_deletion(), below_marker).outcome == "deleted_before"
    other_length = [_marker("ours", 1, latest=True), _object("v1", -100, size=6)]
    assert plan_object(_deletion(), other_length).outcome == "length_differs"
    same_second = [_marker("ours", 1, latest=True), _object("v1", -100), _marker("m0", -100)]
    assert plan_object(_deletion(), same_second).outcome == "order_unknown"


@pytest.mark.spark_independent
def test_selection_leaves_out_what_was_restored_and_checks_the_newest_row_of_a_key():
    first = _deletion(run_id="r1", deleted_at=T0)
    second = _deletion(run_id="r2", deleted_at=T0 + timedelta(days=3))
    restored = _deletion(run_id="r0", key="events/y.parquet")
    pending, already, superseded = select_deletions(
        [first, second, restored], [("r0", "b", "events/y.parquet")]
    )
    assert (pending, already, superseded) == ([second], [restored], [(first, second)])
    # restoring run r1 alone: its key was deleted again by run r2, outside the selection
    pending, already, superseded = select_deletions([first], [], others=[second])
    assert (pending, already, superseded) == ([], [], [(first, second)])
    # a newer deletion that was itself restored decides nothing
    assert select_deletions([first], [("r2", "b", "events/x.parquet")], others=[second]) == ([first], [], [])


@pytest.mark.spark_independent
def test_the_lifecycle_rule_that_expired_a_noncurrent_version_is_named():
    rules = [
        {
            "ID": "off",
            "Status": "Disabled",
            "Filter": {},
            "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
        },
        {"ID": "current", "Status": "Enabled", "Filter": {}, "Expiration": {"Days": 1}},
        {
            "ID": "other-prefix",
            "Status": "Enabled",
            "Filter": {"Prefix": "logs/"},
            "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
        },
        {
            "ID": "big-only",
            "Status": "Enabled",
            "Filter": {"And": {"Prefix": "events/", "ObjectSizeGreaterThan": 1000}},
            "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
        },
        {
            "ID": "tagged",
            "Status": "Enabled",
            "Filter": {"Tag": {"Key": "t", "Value": "v"}},
            "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
        },
    ]
    assert expiring_rule(rules, "events/x.parquet", 5) == "'tagged' (if the object had the rule's tags)"
    assert expiring_rule(rules[:4], "events/x.parquet", 5) is None
    assert expiring_rule(rules[:4], "events/x.parquet", 5000) == "'big-only'"
    legacy = [{"ID": "old", "Status": "Enabled", "Prefix": "events/", "NoncurrentVersionExpiration": {}}]
    assert expiring_rule(legacy, "events/x.parquet", 5) == "'old'"


@pytest.mark.spark_independent
def test_delete_objects_names_its_markers_and_removing_them_by_version_brings_the_objects_back(s3, bucket):
    """The two S3 exchanges of a vacuum and its restore on a versioned bucket, without Spark."""
    from core.s3 import key_versions
    from vacuum.execute import delete_keys

    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    bodies = {"t/a": b"first", "t/ab": b"second!", "t/b": b"third"}
    for key, body in bodies.items():
        put(s3, bucket, key, body=body)
    deleted = delete_keys(s3, bucket, ["t/a", "t/b"])
    assert sorted(deleted.deleted) == ["t/a", "t/b"] and set(deleted.delete_markers) == {"t/a", "t/b"}
    versions = key_versions(s3, bucket, "t/a")  # not t/ab's
    assert {v["Key"] for v in versions} == {"t/a"} and len(versions) == 2
    plans = {
        key: plan_object(
            _deletion(key=key, length=len(bodies[key]), delete_marker_version_id=marker),
            [Version.of(v) for v in key_versions(s3, bucket, key)],
        )
        for key, marker in deleted.delete_markers.items()
    }
    assert {p.outcome for p in plans.values()} == {"would_restore"}
    markers = {key: plan.marker.version_id for key, plan in plans.items()}
    removed = delete_keys(s3, bucket, sorted(markers), version_ids=markers)
    assert (
        sorted(removed.deleted) == ["t/a", "t/b"] and removed.delete_markers == {} and removed.requests == 1
    )
    assert {k: s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in bodies} == bodies


# ---- on the local S3 server -------------------------------------------------------------------


@pytest.fixture
def versioned_lake(spark, s3, bucket_factory, tmp_path):
    """A table on a versioned bucket past its 2-second retention, junk beside it, its inventory
    ingested; ``expected`` is what a vacuum deletes, ``bodies`` their bytes."""
    return _lake(spark, s3, bucket_factory, tmp_path, versioned=True)


def _lake(spark: Any, s3: Any, bucket_factory: Any, tmp_path: Any, *, versioned: bool) -> dict[str, Any]:
    source, inventory_bucket = bucket_factory("lake"), bucket_factory("inv")
    if versioned:
        s3.put_bucket_versioning(Bucket=source, VersioningConfiguration={"Status": "Enabled"})
    uri = make_table(spark, source)
    put(s3, source, "events/day=2024-01-01/orphan-1.parquet", body=b"orphan one")
    put(s3, source, "events/orphan-2.parquet", body=b"orphan number two")
    past_retention = retention_deadline()
    inventory = f"s3://{inventory_bucket}/tables/inventory"
    take_inventory(s3, source, inventory_bucket, inventory)
    wait_until(past_retention)
    visible = {
        k for k in keys_of(s3, source, "events/") if "/_" not in "/" + k[7:] and "/." not in "/" + k[7:]
    }
    expected = visible - referenced_keys(spark, uri)
    return {
        "bucket": source,
        "uri": uri,
        "inventory": inventory,
        "ledger": f"s3://{inventory_bucket}/tables/vacuum_deletions",
        "history": f"s3://{inventory_bucket}/tables/vacuum_runs",
        "registry": registry_file(tmp_path, {"events": f"s3://{source}/events"}),
        "expected": expected,
        "bodies": {k: s3.get_object(Bucket=source, Key=k)["Body"].read() for k in visible},
        "rows_by_version": all_versions_readable(spark, uri),
    }


def _vacuum(lake: dict[str, Any], *extra: str) -> dict[str, Any]:
    code, result = cli_json(
        "vacuum",
        "--inventory-table",
        lake["inventory"],
        "--tables",
        lake["registry"],
        "--allow-versioned",
        *extra,
    )
    assert code == 0, result["tables"][0]["reason"]
    return {**result["tables"][0], "run_id": result["run_id"]}  # the run's id, printed for restore


def _restore(lake: dict[str, Any], *extra: str) -> tuple[int, dict[str, Any]]:
    return cli_json(
        "restore",
        "--inventory-table",
        lake["inventory"],
        "--tables",
        lake["registry"],
        "--table",
        "events",
        *extra,
    )


def _ledger(spark: Any, lake: dict[str, Any]) -> list[Any]:
    from core.tables import read_ledger

    return read_ledger(spark, lake["ledger"]).collect()


def _versions(s3: Any, bucket: str) -> list[tuple[str, str, bool]]:
    listed = s3.list_object_versions(Bucket=bucket)
    return sorted(
        (v["Key"], v["VersionId"], v["IsLatest"])
        for v in (*listed.get("Versions", []), *listed.get("DeleteMarkers", []))
    )


def _current_bodies(s3: Any, bucket: str, keys: set[str]) -> dict[str, bytes]:
    return {k: s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys & keys_of(s3, bucket)}


@pytest.mark.parametrize("delete_with", ["batch", "delta"])
@pytest.mark.slow
def test_a_vacuum_undone_brings_back_every_byte_and_every_version_reads(
    spark, s3, versioned_lake, delete_with
):
    lake = versioned_lake
    run = _vacuum(lake, "--delete-with", delete_with)
    assert run["deleted_files"] == len(lake["expected"]) and not lake["expected"] & keys_of(
        s3, lake["bucket"]
    )
    ledger = _ledger(spark, lake)
    run_id = run["run_id"]
    assert {r["run_id"] for r in ledger} == {run_id}
    assert all(r["delete_started_at"] <= r["deleted_at"] for r in ledger)  # the markers' time window
    markers = {  # S3A's own deletes (of directory markers, on some Hadoop lines) make markers too
        m["Key"]: m["VersionId"]
        for m in s3.list_object_versions(Bucket=lake["bucket"]).get("DeleteMarkers", [])
        if m["IsLatest"] and m["Key"] in lake["expected"]
    }
    assert set(markers) == lake["expected"]
    if delete_with == "batch":  # the marker DeleteObjects made, ledgered
        assert {r["key"]: r["delete_marker_version_id"] for r in ledger} == markers
    else:  # Delta's delete names none: the restore matches by time
        assert {r["delete_marker_version_id"] for r in ledger} == {None}

    before = _versions(s3, lake["bucket"])
    code, dry = _restore(lake, "--run-id", run_id, "--dry-run")
    assert code == 0, dry
    [table] = dry["tables"]
    assert (table["would_restore_files"], table["restored_files"]) == (len(lake["expected"]), 0)
    assert table["would_restore_bytes"] == sum(len(lake["bodies"][k]) for k in lake["expected"])
    assert {o["key"] for o in table["objects"] if o["outcome"] == "would_restore"} == lake["expected"]
    assert _versions(s3, lake["bucket"]) == before and len(_ledger(spark, lake)) == len(ledger)

    code, done = _restore(lake, "--run-id", run_id)
    assert code == 0, done
    [table] = done["tables"]
    assert (table["restored_files"], table["not_restored_files"]) == (len(lake["expected"]), 0)
    assert table["restored_bytes"] == sum(len(lake["bodies"][k]) for k in lake["expected"])
    assert table["delete_requests"] == 1
    assert _current_bodies(s3, lake["bucket"], set(lake["bodies"])) == lake["bodies"]  # byte for byte
    assert all_versions_readable(spark, lake["uri"]) == lake["rows_by_version"]
    restores = [r for r in _ledger(spark, lake) if r["restored_by"] is not None]
    assert {r["key"] for r in restores} == lake["expected"] and {r["restored_by"] for r in restores} == {
        done["run_id"]
    }
    assert {(r["key"], r["delete_marker_version_id"]) for r in restores} == set(markers.items())
    history = spark.read.format("delta").load(lake["history"]).where("mode = 'restore'").collect()
    assert [(h["run_id"], h["restored_files"], h["status"]) for h in history] == [
        (done["run_id"], len(lake["expected"]), "ok")
    ]

    # a second restore restores nothing, and says so
    code, text = cli(
        "restore", "--inventory-table", lake["inventory"], "--tables", lake["registry"], "--table", "events",
        "--run-id", run_id,
    )  # fmt: skip
    assert code == 0
    assert f"nothing to restore: all {len(lake['expected'])} object(s) were restored earlier" in text
    assert _current_bodies(s3, lake["bucket"], set(lake["bodies"])) == lake["bodies"]

    # the next vacuum sees the restored objects as there again, not as deleted earlier
    take_inventory(s3, lake["bucket"], lake["inventory"].split("/")[2], lake["inventory"])
    code, again = cli_json(
        "vacuum", "--inventory-table", lake["inventory"], "--tables", lake["registry"], "--allow-versioned",
        "--dry-run",
    )  # fmt: skip
    assert code == 0 and again["tables"][0]["planned_files"] == len(lake["expected"])
    assert "deleted_earlier" not in again["tables"][0]["kept"]


@pytest.mark.slow
def test_a_later_delete_and_a_rewrite_are_left_alone(spark, s3, versioned_lake):
    lake = versioned_lake
    since = datetime.now(timezone.utc).isoformat()
    _vacuum(lake, "--delete-with", "batch")
    deleted_again, rewritten = sorted(lake["expected"])[:2]
    s3.delete_object(Bucket=lake["bucket"], Key=deleted_again)  # a person's delete, after the vacuum
    put(s3, lake["bucket"], rewritten, body=b"written again")
    code, result = _restore(lake, "--since", since)
    assert code == 0, result
    [table] = result["tables"]
    outcomes = {o["key"]: (o["outcome"], o["reason"]) for o in table["objects"]}
    assert outcomes[deleted_again][0] == "deleted_again" and "did not make" in outcomes[deleted_again][1]
    assert outcomes[rewritten][0] == "current_again" and "not overwritten" in outcomes[rewritten][1]
    assert table["restored_files"] == len(lake["expected"]) - 2
    assert table["not_restored"] == {"current_again": 1, "deleted_again": 1}
    assert deleted_again not in keys_of(s3, lake["bucket"])
    assert s3.get_object(Bucket=lake["bucket"], Key=rewritten)["Body"].read() == b"written again"
    others = lake["expected"] - {deleted_again, rewritten}
    assert _current_bodies(s3, lake["bucket"], others) == {k: lake["bodies"][k] for k in others}


@pytest.mark.slow
def test_an_expired_noncurrent_version_is_reported_with_its_rule(spark, s3, versioned_lake):
    lake = versioned_lake
    _vacuum(lake)
    expired = sorted(lake["expected"])[0]
    [noncurrent] = [
        v["VersionId"]
        for v in s3.list_object_versions(Bucket=lake["bucket"], Prefix=expired)["Versions"]
        if v["Key"] == expired
    ]
    s3.delete_object(Bucket=lake["bucket"], Key=expired, VersionId=noncurrent)  # as the rule would
    s3.put_bucket_lifecycle_configuration(
        Bucket=lake["bucket"],
        LifecycleConfiguration={
            "Rules": [
                {
                    "ID": "expire-noncurrent-after-7-days",
                    "Status": "Enabled",
                    "Filter": {"Prefix": "events/"},
                    "NoncurrentVersionExpiration": {"NoncurrentDays": 7},
                }
            ]
        },
    )
    code, result = _restore(lake, "--since", "2000-01-01")
    assert code == 0, result
    [table] = result["tables"]
    [entry] = [o for o in table["objects"] if o["key"] == expired]
    assert entry["outcome"] == "expired" and "'expire-noncurrent-after-7-days'" in entry["reason"]
    assert "cannot be restored" in entry["reason"]
    assert table["restored_files"] == len(lake["expected"]) - 1 and table["not_restored"] == {"expired": 1}


@pytest.mark.slow
def test_an_unversioned_bucket_is_refused_in_one_line_and_nothing_changes(
    spark, s3, bucket_factory, tmp_path, capsys
):
    lake = _lake(spark, s3, bucket_factory, tmp_path, versioned=False)
    _vacuum(lake)
    before, ledger_rows = keys_of(s3, lake["bucket"]), len(_ledger(spark, lake))
    capsys.readouterr()
    code, out = cli(
        "restore", "--inventory-table", lake["inventory"], "--tables", lake["registry"], "--table", "events",
        "--since", "2000-01-01T00:00:00Z",
    )  # fmt: skip
    assert code == 1 and out == ""
    [line] = capsys.readouterr().err.strip().splitlines()
    assert f"bucket {lake['bucket']} has no versioning" in line and lake["ledger"] in line
    assert "restore from a backup" in line and "nothing changed" in line
    assert keys_of(s3, lake["bucket"]) == before and len(_ledger(spark, lake)) == ledger_rows


@pytest.mark.slow  # not `faults`: its faults are its own bucket's, cleared after; it runs with the suite
def test_a_restore_under_faults_converges_when_run_again(spark, s3, s3_server: LocalS3Server, versioned_lake):
    lake = versioned_lake
    _vacuum(lake)
    s3_server.inject(
        Faults(
            error_share=0.3,
            drop_share=0.05,
            seed=7,
            bucket=lake["bucket"],
            operations=frozenset({"DeleteObjects", "ListObjectVersions", "HeadObject"}),
        )
    )
    try:
        first_code, first = _restore(lake, "--since", "2000-01-01")
        second_code, second = _restore(lake, "--since", "2000-01-01")
    finally:
        s3_server.clear_faults()
    assert s3_server.injected()["SlowDown"] + s3_server.injected()["InternalError"] > 0
    [one], [two] = first["tables"], second["tables"]
    assert second_code == 0, two
    assert one["restored_files"] + two["restored_files"] == len(lake["expected"])
    assert two["already_restored_files"] == one["restored_files"]
    assert _current_bodies(s3, lake["bucket"], set(lake["bodies"])) == lake["bodies"]
    restores = [r["key"] for r in _ledger(spark, lake) if r["restored_by"] is not None]
    assert sorted(restores) == sorted(lake["expected"])  # each object restored once
    assert all_versions_readable(spark, lake["uri"]) == lake["rows_by_version"]
    assert first_code in (0, 1)


@pytest.mark.slow
def test_the_existence_check_is_on_by_default_for_deltas_delete(spark, s3, bucket_factory, tmp_path):
    lake = _lake(spark, s3, bucket_factory, tmp_path, versioned=False)
    gone = sorted(lake["expected"])[0]
    s3.delete_object(Bucket=lake["bucket"], Key=gone)  # by someone else, before the run
    run = _vacuum(lake, "--delete-with", "delta")
    assert (run["already_gone_files"], run["deleted_files"]) == (1, len(lake["expected"]) - 1)
    ledger = _ledger(spark, lake)
    assert [r["deleted_with"] for r in ledger if r["key"] == gone] == ["already_gone"]
    assert {r["key"] for r in ledger if r["deleted_with"] == "delta"} == lake["expected"] - {gone}


@pytest.mark.slow
def test_an_old_ledger_without_the_new_columns_keeps_working(spark, s3, versioned_lake):
    from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

    lake = versioned_lake
    old_schema = StructType(
        [StructField(n, StringType()) for n in ("run_id", "table", "path", "bucket", "key")]
        + [StructField("length", LongType()), StructField("deleted_with", StringType())]
        + [StructField("deleted_at", TimestampType())]
    )
    old_row = ("old-run", "other", "s3a://x/other/a", "x", "other/a", 1, "batch", datetime.now(timezone.utc))
    spark.createDataFrame([old_row], old_schema).write.format("delta").save(lake["ledger"])
    run = _vacuum(lake)
    assert run["deleted_files"] == len(lake["expected"])
    assert not [w for w in run["warnings"] if "ledger" in w], run["warnings"]
    ledger = _ledger(spark, lake)
    assert {c for c in spark.read.format("delta").load(lake["ledger"]).columns} >= {
        "delete_marker_version_id",
        "restored_by",
        "restored_at",
    }
    assert [r["delete_marker_version_id"] for r in ledger if r["run_id"] == "old-run"] == [None]
    assert all(r["delete_marker_version_id"] for r in ledger if r["run_id"] != "old-run")
    code, result = _restore(lake, "--since", "2000-01-01")
    assert code == 0 and result["tables"][0]["restored_files"] == len(lake["expected"])


@pytest.mark.spark_independent
def test_bad_input_is_a_one_line_usage_error(tmp_path, capsys):
    registry = registry_file(tmp_path, {"events": "s3://lake/events"})
    base = ["restore", "--inventory-table", "s3://inv/tables/inventory", "--tables", registry]
    code, out = cli(*base, "--table", "events")
    assert code == 2 and out == ""
    assert "--run-id RUN_ID, --since TIMESTAMP, or both" in capsys.readouterr().err
    code, out = cli(*base, "--table", "nope", "--run-id", "r")
    assert code == 2 and "table 'nope' is not registered" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        cli(*base, "--table", "events", "--since", "yesterday")
    assert exit_info.value.code == 2 and "'yesterday' is not a timestamp" in capsys.readouterr().err


@pytest.mark.spark_independent
def test_the_console_renders_what_was_left_and_why():
    from io import StringIO

    from jobs.output import ConsoleOutput
    from vacuum.context import Status
    from vacuum.results import ObjectRestore, RestoreResult, TableRestore

    table = TableRestore("events", "s3://b/events", Status.OK, False, selected_files=3, restored_files=2)
    table.restored_bytes = 2048
    table.not_restored = {"deleted_again": 1}
    table.objects = [
        ObjectRestore("events", "s3://b/events/x", "b", "events/x", "r1", "t", 5, "deleted_again", "a reason")
    ]
    stream = StringIO()
    ConsoleOutput(stream).show("restore", RestoreResult("r2", False, "s3://m/vacuum_deletions", [table]))
    text = stream.getvalue()
    assert "ok       events: restored 2 objects" in text and "1 not restored" in text
    assert "deleted again: 1" in text and "s3://b/events/x: a reason" in text
    assert json.loads(json.dumps(table.to_dict()))["not_restored_files"] == 1

    # a vacuum that deleted names its run, the id a restore takes; a dry run has nothing to undo
    from vacuum.context import DeleteWith, Mode
    from vacuum.results import TableRun, VacuumResult

    deleted = TableRun("events", "s3://b/events", Status.OK, Mode.INVENTORY, False, DeleteWith.BATCH)
    deleted.deleted_files, deleted.planned_files = 3, 3
    dry = TableRun("users", "s3://b/users", Status.OK, Mode.INVENTORY, True, DeleteWith.BATCH)
    for runs, shown in (([deleted, dry], True), ([dry], False)):
        stream = StringIO()
        ConsoleOutput(stream).show("vacuum", VacuumResult(runs, "20261125T213000Z-1a2b3c4d"))
        assert ("run 20261125T213000Z-1a2b3c4d: the deletion ledger lists" in stream.getvalue()) is shown
    deleted.warnings.append("could not append to the deletion ledger s3://m/vacuum_deletions: AccessDenied")
    stream = StringIO()
    ConsoleOutput(stream).show("vacuum", VacuumResult([deleted], "r9"))
    assert "run r9: the deletion ledger could not be written" in stream.getvalue()


@pytest.mark.spark_independent
def test_the_existence_check_follows_the_delete_each_table_gets():
    from core.paths import StorageLocation
    from vacuum.context import VacuumOptions

    on_s3 = StorageLocation.parse("s3://lake/events")
    local = StorageLocation.parse("file:///data/events")
    auto = VacuumOptions(inventory_table="s3://inv/inventory")
    # auto is the batch delete on S3 (DeleteObjects says what it deleted) and Delta's delete elsewhere
    assert auto.verifies_existence(auto.delete_path(on_s3)) is False
    assert auto.verifies_existence(auto.delete_path(local), on_s3=False) is False
    explicit = VacuumOptions(inventory_table="s3://inv/inventory", delete_with="delta")
    assert explicit.verifies_existence(explicit.delete_path(local), on_s3=False) is False
    listing = VacuumOptions(mode="list")
    assert listing.verifies_existence(listing.delete_path(on_s3)) is True
    delta = VacuumOptions(inventory_table="s3://inv/inventory", delete_with="delta")
    assert delta.verifies_existence(delta.delete_path(on_s3)) is True
    off = VacuumOptions(inventory_table="s3://inv/inventory", delete_with="delta", verify_existence=False)
    assert off.verifies_existence(off.delete_path(on_s3)) is False
    on = VacuumOptions(inventory_table="s3://inv/inventory", verify_existence=True)
    assert on.verifies_existence(on.delete_path(on_s3)) is True
