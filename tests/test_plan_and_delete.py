"""The planner's pure transforms and the batch deleter, on small frames and the moto server."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import unquote

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from core.errors import VacuumRefused
from core.paths import LOCAL_BUCKET, StorageLocation
from core.tables import INVENTORY_TABLE_SCHEMA, VACUUM_INVENTORY_SCHEMA
from tests.support.helpers import keys_of, put
from tests.support.planner import slice_of
from vacuum.execute import MAX_KEYS_PER_REQUEST, delete_in_batches, delete_keys
from vacuum.plan import delta_inventory
from vacuum.snapshot import TableState, load_table_state


def inventory_of(spark, bucket: str, keys: list[str]):
    taken = datetime(2024, 1, 1, tzinfo=timezone.utc)
    rows = [
        (
            f"s3://{bucket}/{k}",
            1,
            k.endswith("/"),
            1000,
            bucket,
            k,
            None,
            None,
            None,
            None,
            None,
            None,
            True,
            False,
            taken.date(),
            taken,
            None,
        )
        for k in keys
    ]
    return spark.createDataFrame(rows, INVENTORY_TABLE_SCHEMA)


def state(location: str, partitions=("date",), iceberg=False) -> TableState:
    return TableState(location, location, 1, tuple(partitions), 7 * 24 * 3_600_000, iceberg)


KEYS = [
    "w/events/date=2024-01-01/part-0.parquet",
    "w/events/date=2024-01-01/_SUCCESS",
    "w/events/date=2024-01-01/.part-0.parquet.crc",
    "w/events/date=2024-01-01/_temporary/0/part-1.parquet",
    "w/events/_delta_log/00000000000000000000.json",
    "w/events/_change_data/date=2024-01-01/cdc-0.parquet",
    "w/events/_delta_index/index-0",
    "w/events/_hidden_top",
    "w/events/deletion_vector_0.bin",
    "w/events/metadata/v1.metadata.json",
    "w/events/date=2024-01-01/",
    "w/events/a//b.parquet",
    "w/events_v2/part-0.parquet",
    "w/events",
    "w/other/part-0.parquet",
]


def relative_paths(frame) -> set[str]:
    return {r["relative_path"] for r in frame.collect()}


def test_slice_takes_the_table_only_and_hides_like_listing_mode(spark):
    frame = slice_of(
        inventory_of(spark, "lake", KEYS),
        StorageLocation.parse("s3://lake/w/events"),
        state("s3a://lake/w/events"),
    )
    assert relative_paths(frame) == {
        "date=2024-01-01/part-0.parquet",
        "_change_data/date=2024-01-01/cdc-0.parquet",
        "_delta_index/index-0",
        "deletion_vector_0.bin",
        "metadata/v1.metadata.json",  # an ordinary folder when the table is not UniForm
    }
    # paths are rebuilt on the table's own scheme: Delta matches by string prefix
    assert all(r["path"].startswith("s3a://lake/w/events/") for r in frame.collect())


def test_uniform_tables_keep_their_iceberg_metadata(spark):
    frame = slice_of(
        inventory_of(spark, "lake", KEYS),
        StorageLocation.parse("s3://lake/w/events"),
        state("s3://lake/w/events", iceberg=True),
    )
    assert "metadata/v1.metadata.json" not in relative_paths(frame)


def test_partition_columns_starting_with_underscore_are_not_hidden(spark):
    keys = ["t/_year=2024/part-0.parquet", "t/_year=2024/_SUCCESS", "t/_other=1/x"]
    frame = slice_of(
        inventory_of(spark, "lake", keys),
        StorageLocation.parse("s3://lake/t"),
        state("s3://lake/t", partitions=("_year",)),
    )
    assert relative_paths(frame) == {"_year=2024/part-0.parquet"}


def test_delta_inventory_schema_is_exactly_what_delta_requires(spark):
    frame = slice_of(
        inventory_of(spark, "lake", KEYS),
        StorageLocation.parse("s3://lake/w/events"),
        state("s3://lake/w/events"),
    )
    assert delta_inventory(frame).schema == VACUUM_INVENTORY_SCHEMA


def test_delta_alone_would_delete_a_nested_success_file(spark, tmp_path):
    """Why the slice hides nested paths: Delta's inventory mode checks only the first level."""
    root = tmp_path / "t"
    uri = f"file://{root}"
    spark.createDataFrame([(1, "a")], "id int, p string").write.format("delta").partitionBy("p").save(uri)
    (root / "p=a" / "_SUCCESS").write_bytes(b"")
    location = StorageLocation.parse(uri)
    raw = spark.createDataFrame([(f"file:{root}/p=a/_SUCCESS", 0, False, 1000)], VACUUM_INVENTORY_SCHEMA)
    raw.createOrReplaceTempView("raw_inventory")
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        naive = {
            r["path"]
            for r in spark.sql(
                f"VACUUM delta.`{uri}` USING INVENTORY (SELECT * FROM raw_inventory) RETAIN 0 HOURS DRY RUN"
            ).collect()
        }
        sliced = slice_of(
            inventory_of(spark, LOCAL_BUCKET, [f"{location.key}/p=a/_SUCCESS"]),
            location,
            state(f"file:{root}", partitions=("p",)),
        )
        delta_inventory(sliced).createOrReplaceTempView("sliced_inventory")
        ours = spark.sql(
            f"VACUUM delta.`{uri}` USING INVENTORY (SELECT * FROM sliced_inventory) RETAIN 0 HOURS DRY RUN"
        ).collect()
    finally:
        spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "true")
    assert naive == {f"file:{root}/p=a/_SUCCESS"}
    assert ours == []


class FlakyS3:
    """The real (moto) client, but the first DeleteObjects reports SlowDown for some keys."""

    def __init__(self, client, failing: set[str]) -> None:
        self.client, self.failing, self.calls = client, set(failing), 0

    def delete_objects(self, Bucket, Delete):  # noqa: N803 - boto3's own argument names
        self.calls += 1
        if self.calls == 1:
            keep = [o for o in Delete["Objects"] if o["Key"] not in self.failing]
            response = self.client.delete_objects(Bucket=Bucket, Delete={**Delete, "Objects": keep})
            response["Errors"] = [
                {"Key": k, "Code": "SlowDown", "Message": "Please reduce your request rate."}
                for k in sorted(self.failing)
            ]
            return response
        return self.client.delete_objects(Bucket=Bucket, Delete=Delete)


def test_per_key_slowdown_is_retried_and_absent_keys_count_as_deleted(s3, bucket):
    put(s3, bucket, "a", "b", "c")
    flaky = FlakyS3(s3, {"b", "c"})
    outcome = delete_keys(flaky, bucket, ["a", "b", "c", "already-gone"], max_attempts=3)
    assert (sorted(outcome.deleted), outcome.failed, outcome.requests) == (
        ["a", "already-gone", "b", "c"],
        {},
        2,
    )
    assert keys_of(s3, bucket) == set()


def test_a_key_the_answer_leaves_out_is_failed_not_deleted(s3, bucket):
    """S3's verbose answer names every key it was sent. One an answer leaves out (here the
    server deleted it, but the answer does not say so) is not counted as deleted, nor sent again,
    and the outcome says why."""

    class LeavesOneOut(FlakyS3):
        def delete_objects(self, Bucket, Delete):  # noqa: N803
            self.calls += 1
            response = self.client.delete_objects(Bucket=Bucket, Delete=Delete)
            response["Deleted"] = [d for d in response["Deleted"] if d["Key"] != "b"]
            return response

    put(s3, bucket, "a", "b")
    leaves = LeavesOneOut(s3, set())
    outcome = delete_keys(leaves, bucket, ["a", "b"], max_attempts=3)
    assert (outcome.deleted, list(outcome.failed), outcome.requests, leaves.calls) == (["a"], ["b"], 1, 1)
    assert "named it neither deleted nor failed" in outcome.failed["b"]


def test_a_request_that_never_reached_s3_is_not_counted(bucket):
    """No connection (a closed port), no request: every key stays, with the reason, and the
    requests counted are the requests S3 could have answered, none."""
    import socket

    from core.s3 import s3_client

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    client = s3_client(
        {"endpoint_url": f"http://127.0.0.1:{port}", "region_name": "us-east-1"}, own_retries=True
    )
    outcome = delete_keys(client, bucket, ["x", "y"], max_attempts=2)
    assert (outcome.deleted, outcome.requests) == ([], 0)
    assert set(outcome.failed) == {"x", "y"} and "EndpointConnectionError" in outcome.failed["x"]


def test_a_key_that_keeps_failing_is_reported(s3, bucket):
    class AlwaysDenied(FlakyS3):
        def delete_objects(self, Bucket, Delete):  # noqa: N803
            self.calls += 1
            return {
                "Errors": [
                    {"Key": o["Key"], "Code": "AccessDenied", "Message": "no"} for o in Delete["Objects"]
                ]
            }

    denied = AlwaysDenied(s3, set())
    outcome = delete_keys(denied, bucket, ["x"], max_attempts=5)
    assert outcome.deleted == [] and "AccessDenied" in outcome.failed["x"]
    assert denied.calls == outcome.requests == 1  # AccessDenied cannot succeed later: not retried


def test_batches_hold_at_most_1000_keys(spark, s3, bucket):
    keys = [f"many/{i:05d}" for i in range(2 * MAX_KEYS_PER_REQUEST + 500)]
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"")
    frame = spark.createDataFrame([(bucket, k) for k in keys], "bucket string, key string")
    outcomes = delete_in_batches(frame, tasks=1)
    row = outcomes.selectExpr(
        "count_if(deleted)", "count_if(not deleted and key is not null)", "sum(requests)"
    ).first()
    assert tuple(row) == (len(keys), 0, 3)
    assert keys_of(s3, bucket) == set()
    with pytest.raises(AssertionError):
        delete_keys(s3, bucket, keys[:1001])


def test_a_task_keeps_several_delete_requests_in_flight_and_sends_none_once_access_is_denied(
    s3, s3_server, bucket_factory
):
    """delete_partition, as a Spark task runs it: one request per bucket here (its keys are
    batched by bucket), up to REQUESTS_IN_FLIGHT answered at once; once a request is refused for
    access, the batches not sent yet are not sent, and every key still gets its outcome."""
    from core.s3 import driver_settings
    from testing.local_s3 import Faults
    from vacuum.execute import REQUESTS_IN_FLIGHT, delete_partition

    def rows(buckets: list[str]) -> list[tuple[str, str, str, int]]:
        return [(b, k, f"s3://{b}/{k}", 1) for b in sorted(buckets) for k in ("x/1", "x/2")]

    buckets = [bucket_factory("fly") for _ in range(REQUESTS_IN_FLIGHT + 2)]
    for name in buckets:
        put(s3, name, "x/1", "x/2")
    s3_server.reset_counts()
    s3_server.inject(Faults(latency_ms=300, operations=frozenset({"DeleteObjects"})))
    try:
        outcomes = list(delete_partition(iter(rows(buckets)), driver_settings(), 6))
    finally:
        s3_server.clear_faults()
    assert s3_server.peak_in_flight("DeleteObjects") == REQUESTS_IN_FLIGHT
    assert sorted((o[0], o[1], o[4]) for o in outcomes if o[1]) == [
        (b, k, True) for b, k, _, _ in rows(buckets)
    ]
    assert [o[6] for o in outcomes if o[1] is None] == [len(buckets)]  # the task's request count
    assert not any(keys_of(s3, name) for name in buckets)

    denied = [bucket_factory("deny") for _ in range(2 * REQUESTS_IN_FLIGHT)]
    for name in denied:
        put(s3, name, "x/1", "x/2")
        s3_server.deny_deletes(name, "")
    s3_server.reset_counts()
    try:
        outcomes = list(delete_partition(iter(rows(denied)), driver_settings(), 6, in_flight=2))
    finally:
        s3_server.allow_all()
    assert s3_server.counts()["DeleteObjects"] == 2  # the two sent before the first refusal came back
    assert all(not o[4] and "AccessDenied" in o[5] for o in outcomes if o[1])
    assert len([o for o in outcomes if o[1]]) == 2 * len(denied)
    assert all(keys_of(s3, name) == {"x/1", "x/2"} for name in denied)


def test_a_task_that_s3_asks_to_slow_down_sends_one_request_at_a_time_from_then_on(
    s3, s3_server, bucket_factory
):
    """The first DeleteObjects is answered SlowDown: it is retried and succeeds, and from that
    answer on, no new batch is sent while another is in flight (those sent before it still overlap;
    here the throttled batch's retry, which a batch in flight may send, is the first to run alone)."""
    from core.s3 import driver_settings
    from jobs.params import DELETE_REQUESTS_PER_TASK
    from testing.local_s3 import Faults
    from vacuum.execute import REQUESTS_IN_FLIGHT, delete_partition

    assert DELETE_REQUESTS_PER_TASK.settings["default"] == REQUESTS_IN_FLIGHT  # the flag's default
    buckets = sorted(bucket_factory("slow") for _ in range(20))
    for name in buckets:
        put(s3, name, "x/1")
    s3_server.reset_counts()
    s3_server.inject(Faults(latency_ms=200, throttle_first=1, operations=frozenset({"DeleteObjects"})))
    try:
        rows = iter([(b, "x/1", f"s3://{b}/x/1", 1) for b in buckets])
        outcomes = list(delete_partition(rows, driver_settings(), 6, in_flight=3))
    finally:
        s3_server.clear_faults()
    assert sorted((o[0], o[4]) for o in outcomes if o[1]) == [(b, True) for b in buckets]
    answered = s3_server.answered("DeleteObjects")
    [slowed] = {a.bucket for a in answered if [b.bucket for b in answered].count(a.bucket) == 2}
    told = min(a.ended for a in answered if a.bucket == slowed)  # the SlowDown came back
    assert s3_server.peak_in_flight("DeleteObjects") == 3  # concurrent before
    # the requests the task counts are the requests S3 answered: botocore retries none itself
    assert [o[6] for o in outcomes if o[1] is None] == [len(answered)] == [len(buckets) + 1]
    after = sorted((a for a in answered if a.began > told + 0.1), key=lambda a: a.began)
    assert len(after) >= 4 and after[0].bucket == slowed, answered  # its retry, alone, comes first
    assert all(first.ended <= second.began for first, second in zip(after, after[1:], strict=False)), after


def test_outcomes_carry_each_candidates_path_and_length(spark, s3, bucket):
    """The runner counts bytes and writes the ledger from the outcomes alone: each row must carry
    its own candidate's path and length, the unsendable key's row too."""
    keys = ["carry/a", "carry/b c", "carry/bad\x01key"]
    for key in keys[:2]:
        s3.put_object(Bucket=bucket, Key=key, Body=b"")
    rows = [(bucket, k, f"s3a://{bucket}/{k}", 10 + i) for i, k in enumerate(keys)]
    frame = spark.createDataFrame(rows, "bucket string, key string, path string, length long")
    outcomes = delete_in_batches(frame, tasks=1)
    got = {
        (r["bucket"], r["key"], r["path"], r["length"], r["deleted"]) for r in outcomes.collect() if r["key"]
    }
    assert got == {(b, k, p, n, "\x01" not in k) for b, k, p, n in rows}
    assert keys_of(s3, bucket) & set(keys) == set()
    outcomes.unpersist()


def test_inventory_age_does_not_depend_on_the_driver_time_zone(spark, monkeypatch):
    import time

    from vacuum.plan import inventory_figures

    frame = inventory_of(spark, "lake", ["w/events/a"])
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        figures = inventory_figures(frame, StorageLocation.parse("s3://lake/w/events"))
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert figures.inventory_taken_at == datetime(2024, 1, 1, tzinfo=timezone.utc)
    assert figures.objects_under_table == 1


def test_a_plan_naming_a_live_file_is_caught(spark, tmp_path):
    """The output check: whatever Delta proposes, a live file or a path outside the table is refused."""
    from vacuum.plan import candidate_details, check_plan
    from vacuum.snapshot import load_table_state

    uri = f"file://{tmp_path}/t"
    spark.createDataFrame([(1, "a b%")], "id int, p string").write.format("delta").partitionBy("p").save(uri)
    state, live = load_table_state(spark, uri)
    [added] = live.collect()  # Delta's path is URL-encoded: p=a%20b%2525/part-...
    live_decoded = f"{state.qualified_location}/{unquote(added['path'])}"
    assert "p=a b%25/" in live_decoded
    candidates = spark.createDataFrame(
        [
            (live_decoded,),
            (f"file:{tmp_path}/elsewhere/x.parquet",),
            (f"{state.qualified_location}/junk.parquet",),
        ],
        "path string",
    )
    check = check_plan(candidate_details(candidates, None, state), live, state)
    assert check.suspicious == 2
    assert sorted(check.suspicious_examples) == sorted([live_decoded, f"file:{tmp_path}/elsewhere/x.parquet"])


def test_candidates_that_are_not_slice_files_are_told_apart_in_the_check_and_strangers_refuse(
    spark, tmp_path
):
    """Delta's inventory mode adds the directories it derives from file paths: the check counts
    those, in its own job, and drops them from the plan; any other candidate that is not a file of
    the slice refuses the table."""
    from vacuum.context import DeleteWith, Mode
    from vacuum.plan import candidate_details, check_plan
    from vacuum.results import KEPT_DIRECTORY, Status, TableRun
    from vacuum.runner import _checked_inventory_plan

    uri = f"file://{tmp_path}/t"
    spark.createDataFrame([(1, "a")], "id int, p string").write.format("delta").partitionBy("p").save(uri)
    state, live = load_table_state(spark, uri)  # its one live file lies in p=a
    slice_frame = spark.createDataFrame(
        [(f"{state.base}p=b/old.parquet", 7, 1000, "p=b/old.parquet", "t/p=b/old.parquet", LOCAL_BUCKET)],
        "path string, length long, modificationTime long, relative_path string, key string, bucket string",
    )
    garbage, directory, stranger = (
        f"{state.base}{p}" for p in ("p=b/old.parquet", "p=b", "p=b/ghost.parquet")
    )

    def checked(*paths: str):
        candidates = spark.createDataFrame([(p,) for p in paths], "path string")
        details = candidate_details(candidates, slice_frame, state)
        return details, check_plan(details, live, state, None, slice_frame)

    details, check = checked(garbage, directory, stranger)
    assert (check.suspicious, check.not_in_slice, check.not_in_slice_directories) == (0, 2, 1)
    assert (check.strangers, check.stranger_example) == (1, stranger)
    listing = check_plan(candidate_details(details.select("path"), None, state), live, state)
    assert (listing.not_in_slice, listing.strangers) == (3, 0)  # without a slice, no stranger is told
    assert check.slice_partitions == ({"partition": "p=b", "files": 1, "bytes": 7},)
    run = TableRun("t", uri, Status.OK, Mode.INVENTORY, True, DeleteWith.BATCH)
    with pytest.raises(VacuumRefused, match="not files of the inventory slice, e.g. .*ghost"):
        _checked_inventory_plan(details, check, run)

    details, check = checked(garbage, directory)
    assert (check.strangers, check.stranger_example, check.not_in_slice_directories) == (0, None, 1)
    planned = _checked_inventory_plan(details, check, run)
    assert [r["path"] for r in planned.collect()] == [garbage]
    assert run.kept == {KEPT_DIRECTORY: 1}


def test_a_plan_naming_a_file_removed_inside_the_retention_window_is_caught(spark, tmp_path):
    """A tombstone removed after the retention cut-off is a file an older version inside the
    window reads: a plan that names it is refused. Once the cut-off passes it, it is garbage
    like any other, and it never counts towards the coverage of live files."""
    from vacuum.plan import candidate_details, check_plan, coverage_counts

    uri = f"file://{tmp_path}/t"
    spark.range(3).coalesce(1).write.format("delta").save(uri)
    spark.range(5).coalesce(1).write.format("delta").mode("overwrite").save(uri)
    state, files = load_table_state(spark, uri)
    [removed] = files.where("tombstone").collect()
    assert removed["deletionTimestamp"] > 0 and removed["modificationTime"] is None
    candidates = spark.createDataFrame(
        [(f"{state.qualified_location}/{unquote(removed['path'])}",)], "path string"
    )
    details = candidate_details(candidates, None, state)
    assert check_plan(details, files, state, removed["deletionTimestamp"]).suspicious == 1
    assert check_plan(details, files, state, removed["deletionTimestamp"] + 1).suspicious == 0
    assert check_plan(details, files, state).suspicious == 0  # without a cut-off: live files only
    listed = spark.createDataFrame([(unquote(removed["path"]),)], "relative_path string")
    assert coverage_counts(files, listed, 1 << 62, state) == (1, 0)  # the one live file, not listed


@pytest.mark.line_sensitive
@pytest.mark.parametrize("random_prefixes", [False, True])
def test_a_plan_naming_a_deletion_vector_file_still_read_is_caught(spark, tmp_path, random_prefixes):
    """A deletion vector's file is read with its data file: a plan naming the vector of a live
    file, or of a tombstone inside the retention window, is refused like the data file itself.
    Two DELETEs on the same files: the second replaces the first's vectors (tombstones' vectors,
    kept for a week). The live vectors' paths are checked against the log replayed in Python
    (tests/support/writers.py), under Delta's random prefixes too."""
    from tests.support import writers
    from vacuum.plan import candidate_details, check_plan
    from vacuum.snapshot import live_relative_path

    root = tmp_path / "t"
    uri = f"file://{root}"
    properties = {
        "delta.deletedFileRetentionDuration": "interval 7 days",
        "delta.enableDeletionVectors": "true",
    }
    if random_prefixes:
        properties["delta.randomizeFilePrefixes"] = "true"
    writers._create(spark, uri, "PARTITIONED BY (day)", properties)
    writers._append(spark, uri, 0, 40, files=1)
    spark.sql(f"DELETE FROM delta.`{uri}` WHERE id % 5 = 0")
    spark.sql(f"DELETE FROM delta.`{uri}` WHERE id % 7 = 0")
    state, files = load_table_state(spark, uri)
    vector_paths = files.where(F.col("deletionVectorPath").isNotNull()).select(
        "tombstone", "deletionTimestamp", live_relative_path(state, "deletionVectorPath").alias("relative")
    )
    live_vectors = {r["relative"] for r in vector_paths.where(~F.col("tombstone")).collect()}
    # a vector file's newest removal: Delta stamps each RemoveFile of a commit with the clock as it
    # makes it, so the tombstones sharing one vector file can be a millisecond or more apart
    removed: dict[str, int] = {}
    for r in vector_paths.where("tombstone").collect():
        removed[r["relative"]] = max(removed.get(r["relative"], 0), r["deletionTimestamp"])
    expected_live = {p for p in writers.read_log(writers.LocalStore(root)).live() if "deletion_vector_" in p}
    assert live_vectors == expected_live and len(live_vectors) == 1, (live_vectors, expected_live)
    assert all("/" in p for p in live_vectors) == random_prefixes
    replaced = set(removed) - live_vectors
    assert len(replaced) == 1, removed  # the first DELETE's vectors' file
    assert all((root / p).is_file() for p in live_vectors | replaced)

    def suspicious(paths: set[str], cut_off: int | None) -> int:
        candidates = spark.createDataFrame([(f"{state.base}{p}",) for p in sorted(paths)], "path string")
        return check_plan(candidate_details(candidates, None, state), files, state, cut_off).suspicious

    assert suspicious(live_vectors, 1 << 62) == 1
    [removed_at] = {removed[p] for p in replaced}
    assert suspicious(replaced, removed_at) == 1  # still inside the window: refused
    assert suspicious(replaced, removed_at + 1) == 0  # past it: garbage like any other

    # a shallow clone records the source's vectors by absolute path (kind "p"): read as the
    # source's own files, and outside the clone
    clone = f"file://{tmp_path}/clone"
    spark.sql(f"CREATE TABLE delta.`{clone}` SHALLOW CLONE delta.`{uri}`")
    clone_state, clone_files = load_table_state(spark, clone)
    cloned = clone_files.where(~F.col("tombstone") & F.col("deletionVectorPath").isNotNull())
    assert {
        r[0] for r in cloned.select(live_relative_path(state, "deletionVectorPath")).collect()
    } == live_vectors
    assert {r[0] for r in cloned.select(live_relative_path(clone_state, "deletionVectorPath")).collect()} == {
        None
    }


def test_a_deletion_vectors_prefix_is_a_raw_name_not_url_encoded(spark):
    """A ``u`` vector's random prefix is the directory's name as it is, while ``AddFile.path`` is
    URL-encoded: a ``%`` in the prefix must stay a ``%`` in the path the checks compare, and so
    must a ``+``. Delta's own prefixes are letters and digits; another writer's need not be."""
    from vacuum.snapshot import deletion_vector_path, live_relative_path

    encoded = "vCaZ(fFdb2hEJ#&-cb0x"  # 20 Z85 characters: the UUID below
    name = "deletion_vector_61d95763-302d-6ce2-3660-b6fac476513f.bin"
    cases = {  # the prefix as the log holds it -> the object Hadoop opens, relative to the table
        "": name,
        "ab": f"ab/{name}",
        "%41b": f"%41b/{name}",
        "a+b": f"a+b/{name}",
        "%": f"%/{name}",
        "a%2Bb": f"a%2Bb/{name}",
        "a b": f"a b/{name}",
        "é€": f"é€/{name}",
        "x/../y": f"y/{name}",  # Hadoop resolves the dot segments
        "a/": f"a/{name}",  # and the doubled slash
    }
    vectors = spark.createDataFrame(
        [(("u", prefix + encoded),) for prefix in cases],
        "deletionVector struct<storageType: string, pathOrInlineDv: string>",
    )
    decoded = vectors.select(
        F.col("deletionVector.pathOrInlineDv").alias("value"),
        deletion_vector_path().alias("path"),
        # the expression is built once per JVM, and the same one may go twice into a query
        deletion_vector_path().alias("again"),
    ).select(
        "value",
        live_relative_path(state("s3a://lake/w/events")).alias("relative"),
        F.col("path") == F.col("again"),
    )
    assert deletion_vector_path() is deletion_vector_path()
    assert {r["value"][:-20]: r["relative"] for r in decoded.collect()} == cases
    assert all(r[2] for r in decoded.collect())


def test_a_deletion_vector_deltas_vacuum_fails_on_is_told_apart(spark):
    """A ``u`` vector's value ends in its file's UUID, 20 characters of Delta's Base85 alphabet;
    Delta's VACUUM fails on a shorter value or a character outside the alphabet (it cannot decode
    the UUID), on an inline vector (it matches only vectors on disk) and on a storage type it does
    not know. A ``p`` vector's path it does not read, whatever it is."""
    from vacuum.snapshot import _Z85, deletion_vector_vacuum_fails

    encoded = "vCaZ(fFdb2hEJ#&-cb0x"
    cases = {  # (storage type, value) -> Delta's VACUUM fails on it
        None: False,  # no vector
        ("u", encoded): False,
        ("u", "ab" + encoded): False,
        # the alphabet's characters that a character class treats apart: - [ ] ^ &
        ("u", _Z85[-20:]): False,
        ("u", _Z85[60:80]): False,
        ("p", "s3://lake/source/deletion_vector_x.bin"): False,
        ("p", None): False,
        ("u", "abc"): True,  # shorter than a UUID
        ("u", encoded[:-1] + "~"): True,  # not of the alphabet
        ("u", encoded[:-1] + "\\"): True,
        ("u", encoded + "\n"): True,
        ("u", None): True,
        ("i", "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"): True,  # inline
        ("x", encoded): True,  # a storage type Delta does not know
        (None, encoded): True,
    }
    vectors = spark.createDataFrame(
        [(index, vector) for index, vector in enumerate(cases)],
        "case int, deletionVector struct<storageType: string, pathOrInlineDv: string>",
    )
    found = dict(vectors.select("case", deletion_vector_vacuum_fails()).collect())
    assert [found[i] for i in range(len(cases))] == list(cases.values())
    assert deletion_vector_vacuum_fails() is deletion_vector_vacuum_fails()


def test_dot_segments_nested_up_to_the_passes_resolve_and_deeper_ones_name_no_object(spark):
    """``x/..`` pairs nested 16 deep resolve as Hadoop resolves them (one pass a level); one level
    deeper leaves a ``..``, and such a path names no object of the table (null), never another."""
    from vacuum.snapshot import live_relative_path

    def nested(depth: int) -> str:
        return "date=1/" + "d/" * depth + "../" * depth + "f.parquet"

    paths = spark.createDataFrame([(nested(16),), (nested(17),)], "path string")
    resolved = paths.select(live_relative_path(state("s3a://lake/w/events")).alias("relative"))
    assert [row["relative"] for row in resolved.collect()] == ["date=1/f.parquet", None]


def test_a_live_file_recorded_by_its_absolute_uri_is_live_to_the_checks(spark):
    """A writer may record a file inside the table by its absolute URI (another S3 scheme than
    the one Spark reads the table with, an authority S3A reads as the bucket, encoded), or with
    dot segments and doubled slashes that Hadoop resolves before it opens the file. The plan
    check refuses a candidate that is such a file, and the coverage gate counts it; a file
    outside the table (a shallow clone's source, a sibling table) is not the table's."""
    from vacuum.plan import candidate_details, check_plan, coverage_counts

    table = state("s3a://lake/w/events")
    inside = {  # as the log records it -> the object a reader opens, relative to the table
        "s3://lake/w/events/date=2024-01-01/part%20a+b.parquet": "date=2024-01-01/part a+b.parquet",
        "S3N://lake/w/events/date=2024-01-02/part-2.parquet": "date=2024-01-02/part-2.parquet",
        "date=2024-01-03/part-3.parquet": "date=2024-01-03/part-3.parquet",  # relative, as Delta writes
        "s3a://user@LAKE:443/w/events/date=2024-01-04/part-4.parquet": "date=2024-01-04/part-4.parquet",
        "s3://lake/w/events/date=2024-01-05/sub/../part-5.parquet": "date=2024-01-05/part-5.parquet",
        "date=2024-01-06//./part-6.parquet": "date=2024-01-06/part-6.parquet",
        "/w/events/date=2024-01-07/part-7.parquet": "date=2024-01-07/part-7.parquet",  # from the bucket's root
        "../events/date=2024-01-08/part-8.parquet": "date=2024-01-08/part-8.parquet",
    }
    outside = [
        "s3://source/w/events/part-9.parquet",  # a clone's source
        "s3://lake/w/events_v2/part-0.parquet",  # a sibling table
        "s3://lake/w/events/../other/part-0.parquet",
        "file://lake/w/events/part-0.parquet",  # a local file, whatever its authority says
        "date=2024-01-09/../../part-0.parquet",  # climbs out of the table
    ]
    live = spark.createDataFrame(
        [(path, 1, 10, None, False, None, False) for path in [*inside, *outside]],
        "path string, size long, modificationTime long, deletionTimestamp long, tombstone boolean, "
        "deletionVectorPath string, deletionVectorVacuumFails boolean",
    )
    candidates = spark.createDataFrame(
        [(f"s3a://lake/w/events/{relative}",) for relative in inside.values()]
        + [
            ("s3a://lake/w/events/date=2024-01-04/garbage.parquet",),
            ("s3a://lake/w/events/part-0.parquet",),
            ("s3a://lake/w/events/other/part-0.parquet",),
        ],
        "path string",
    )
    check = check_plan(candidate_details(candidates, None, table), live, table)
    assert check.suspicious == len(inside)
    assert not {p for p in check.suspicious_examples if "garbage" in p or "/part-0" in p}

    listed = spark.createDataFrame(
        [("date=2024-01-01/part a+b.parquet",), ("date=2024-01-05/part-5.parquet",)], "relative_path string"
    )
    # the files inside the table are the table's; two of them are listed
    assert coverage_counts(live, listed, 11, table) == (len(inside), 2)
    assert coverage_counts(live, listed, 10, table) == (0, 0)  # none older than the inventory


@pytest.mark.line_sensitive  # Spark's planner: when it shuffles inputs of one partition
def test_a_small_tables_classification_and_counts_shuffle_nothing_and_count_the_same(spark):
    """A table sized to one partition classifies its objects and counts its slice against the
    snapshot's files with no shuffle (each a query stage, and a task per partition): the union
    of the paths below its directories is read in one partition, and the snapshot's files and the
    ledger's deletions, rows of unknown size as Delta's are, join as the one partition they are,
    though the estimates of the counts' rows grow wider than theirs. The classification and the
    counts are those of the same queries in a session never sized."""
    from vacuum.plan import CLASSIFIED_COLUMNS, _file_counts, classify_objects, inventory_slice, table_objects
    from vacuum.tuning import checkpointed_in_one_partition, in_one_partition, release, size_shuffles

    table = state("s3a://lake/w/events")
    location = StorageLocation.parse("s3://lake/w/events")
    keys = [*KEYS, "w/events/date=2024-01-02/part-2.parquet", "w/events/date=2024-01-02/part-3.parquet"]
    ledgered = [("lake", "w/events/date=2024-01-02/part-3.parquet"), ("lake", "w/events/gone.parquet")]
    live = [
        ("date=2024-01-01/part-0.parquet", 1, 5, None, False, "deletion_vector_0.bin", False),
        ("date=2024-01-02/part-9.parquet", 1, 5, None, False, None, False),  # not listed
        ("date=2024-01-02/part-2.parquet", None, None, 100, True, None, False),  # a tombstone
    ]
    schema = (
        "path string, size long, modificationTime long, deletionTimestamp long, tombstone boolean, "
        "deletionVectorPath string, deletionVectorVacuumFails boolean"
    )

    def plan_and_counts(sized: bool):
        session = spark.newSession()
        if sized:
            size_shuffles(session, len(keys))
        objects = in_one_partition(session, table_objects(inventory_of(session, "lake", keys), location))
        # the ledger's deletions, as the run reads them: behind an RDD (vacuum.ledger.deleted_since)
        deleted = session.createDataFrame(
            session.sparkContext.parallelize(ledgered, 2), "bucket string, key string"
        )
        classified = classify_objects(
            objects,
            table,
            nested_roots=(),
            protected_prefixes=(),
            deleted_earlier=in_one_partition(session, deleted),
            check_sendable=True,
        ).select(*CLASSIFIED_COLUMNS)
        # an RDD's rows, as Delta's files are: of a size Spark does not know
        files = session.createDataFrame(session.sparkContext.parallelize(live, 2), schema)
        files = checkpointed_in_one_partition(session, files)
        counts = _file_counts(files, inventory_slice(classified, table), 10, table, 50)
        plans = [frame._jdf.queryExecution().executedPlan().toString() for frame in (classified, counts)]
        answer = (sorted(map(tuple, classified.collect()), key=repr), counts.collect())
        release(files)
        return plans, answer

    sized_plans, sized = plan_and_counts(True)
    unsized_plans, unsized = plan_and_counts(False)
    assert ["Exchange" in plan for plan in sized_plans] == [False, False], sized_plans
    assert ["Exchange" in plan for plan in unsized_plans] == [True, True]  # how the check would fail
    assert sized == unsized
    assert {row[3] for row in sized[0] if row[0] is None} == {
        "_change_data/date=2024-01-01/cdc-0.parquet",  # not hidden, as Delta's listing has it
        "_delta_index/index-0",
        "date=2024-01-01/part-0.parquet",
        "date=2024-01-02/part-2.parquet",
        "deletion_vector_0.bin",
        "metadata/v1.metadata.json",
    }
    assert ("deleted_earlier", "date=2024-01-02/part-3.parquet") in {(row[0], row[3]) for row in sized[0]}
    (row,) = sized[1]
    assert (row["eligible"], row["covered"], row["vectors_vacuum_fails_on"]) == (2, 1, 0), row


def test_the_slice_counts_count_each_live_file_once_and_each_slice_object_by_the_needed_files(spark):
    """The coverage counts live files older than the inventory, each once however often the slice
    lists its path; the unneeded objects are the slice's objects (each of them, duplicates too)
    whose path no needed file has: not a live file, a tombstone removed at or after the cut-off,
    nor the deletion vector's file of one (a vector's file that two files share is one path
    needed twice). A needed file logged in another form than the plain relative one, or with a
    vector Delta's VACUUM fails on, is counted apart."""
    from vacuum.plan import slice_counts

    table = state("s3a://lake/w/events")
    taken_at, cut_off = 10, 50
    live = spark.createDataFrame(
        [
            ("a.parquet", 1, 5, None, False, "dv-shared.bin", False),  # listed twice
            ("b.parquet", 1, 5, None, False, "dv-shared.bin", False),  # shares a's vector's file
            ("c.parquet", 1, 20, None, False, None, False),  # younger than the inventory
            ("d.parquet", 1, 5, None, False, None, False),  # older, not listed
            ("s3://source/x/e.parquet", 1, 5, None, False, None, False),  # outside the table
            ("s3a://lake/w/events/f.parquet", 1, 5, None, False, None, False),  # inside, by its URI
            ("g.parquet", 1, 5, None, False, "dv-g.bin", True),  # a vector Delta's VACUUM fails on
            ("t-new.parquet", None, None, 100, True, None, False),  # removed after the cut-off
            ("t-aged.parquet", None, 5, 100, True, None, False),  # a tombstone is never eligible
            ("s3a://lake/w/events/t-old.parquet", None, None, 10, True, None, False),  # removed before it
        ],
        "path string, size long, modificationTime long, deletionTimestamp long, tombstone boolean, "
        "deletionVectorPath string, deletionVectorVacuumFails boolean",
    )
    listed = [
        "a.parquet",
        "a.parquet",
        "b.parquet",
        "c.parquet",
        "f.parquet",
        "dv-shared.bin",
        "t-new.parquet",
    ]
    unneeded = ["t-old.parquet", "junk.parquet", "junk.parquet"]
    slice_frame = spark.createDataFrame([(path,) for path in listed + unneeded], "relative_path string")
    classified = spark.createDataFrame(
        [("x/", "folder_marker", None)], "relative_path string, kept_reason string, nested_root string"
    )
    counts = slice_counts(classified, slice_frame, live, taken_at, table, cut_off)
    assert (counts.eligible, counts.covered) == (5, 3)  # a, b, d, f and g; a, b and f listed
    assert counts.unneeded == 3 and not counts.delta_names_nothing
    assert counts.kept == {("folder_marker", None): 1}
    # e and f logged by their URIs, g's vector; t-old is no longer needed, whatever its form
    assert (counts.needed_in_other_forms, counts.vectors_vacuum_fails_on) == (3, 1)

    # every object needed, but Delta compares f's path as its log holds it: it could name f's
    # object, so its dry run still runs
    only_needed = spark.createDataFrame([(path,) for path in listed], "relative_path string")
    counts = slice_counts(classified, only_needed, live, taken_at, table, cut_off)
    assert counts.unneeded == 0 and not counts.delta_names_nothing
    # a cut-off at the old tombstone's removal: removed at the cut-off, it is needed too (>=),
    # and logged by its URI, another form
    counts = slice_counts(classified, slice_frame, live, taken_at, table, 10)
    assert (counts.unneeded, counts.needed_in_other_forms) == (2, 4)
    # an empty slice: nothing listed, nothing unneeded
    empty = spark.createDataFrame([], "relative_path string")
    counts = slice_counts(classified, empty, live, taken_at, table, cut_off)
    assert (counts.eligible, counts.covered, counts.unneeded) == (5, 0, 0)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_slice_counts_agree_with_a_count_by_hand_over_random_logs_and_slices(spark, seed):
    """The slice counts join the log's files and the slice once, on grouped paths: over random
    logs (paths named by several rows, by their URI inside and outside the table, encoded;
    tombstones on either side of the cut-off; shared and failing deletion vectors; files older and
    younger than the inventory) and slices (duplicates, garbage), every count is the one a plain
    reading of its definition gives."""
    import random

    from vacuum.plan import slice_counts

    table = state("s3a://lake/w/events")
    # each way the log may name a file -> (the relative path a reader opens, or None outside the
    # table; whether the path is in the form Delta and the tool read alike)
    forms = {}
    for n in range(12):
        forms[f"date=1/p{n}.parquet"] = (f"date=1/p{n}.parquet", True)
        forms[f"s3a://lake/w/events/date=1/p{n}.parquet"] = (f"date=1/p{n}.parquet", False)
        forms[f"date=1/p%20{n}.parquet"] = (f"date=1/p {n}.parquet", True)
        forms[f"s3://source/w/events/date=1/p{n}.parquet"] = (None, False)
    vectors = {f"deletion_vector_{n}.bin": (f"deletion_vector_{n}.bin", True) for n in range(4)}
    vectors["s3a://lake/w/events/deletion_vector_9.bin"] = ("deletion_vector_9.bin", False)
    rng = random.Random(seed)
    taken_at, cut_off = 100, 1_000
    rows = []
    for _ in range(80):
        tombstone = rng.random() < 0.4
        rows.append(
            (
                rng.choice(list(forms)),
                1,
                None if tombstone else rng.choice([50, 99, 100, 150]),
                rng.choice([900, 1_000, 1_100]) if tombstone else None,
                tombstone,
                rng.choice([None, None, *vectors]),
                rng.random() < 0.05,
            )
        )
    relatives = sorted({r for r, _ in [*forms.values(), *vectors.values()] if r})
    listed = [rng.choice([*relatives, "junk.parquet", "date=1/junk.parquet"]) for _ in range(50)]
    live = spark.createDataFrame(
        rows,
        "path string, size long, modificationTime long, deletionTimestamp long, tombstone boolean, "
        "deletionVectorPath string, deletionVectorVacuumFails boolean",
    )
    slice_frame = spark.createDataFrame([(path,) for path in listed], "relative_path string")
    classified = spark.createDataFrame([], "relative_path string, kept_reason string, nested_root string")

    named = {**forms, **vectors}

    def relative(path):
        return named[path][0]

    needed = [r for r in rows if not r[4] or r[3] >= cut_off]
    eligible = [r for r in rows if not r[4] and r[2] < taken_at and relative(r[0])]
    needed_paths = {relative(p) for r in needed for p in (r[0], r[5]) if p and relative(p)}
    other_forms = [
        r for r in needed if not (forms[r[0]][1] and not r[6] and (r[5] is None or vectors[r[5]][1]))
    ]
    counts = slice_counts(classified, slice_frame, live, taken_at, table, cut_off)
    assert (counts.eligible, counts.covered) == (
        len(eligible),
        sum(1 for r in eligible if relative(r[0]) in listed),
    )
    assert counts.unneeded == sum(1 for path in listed if path not in needed_paths)
    assert counts.needed_in_other_forms == len(other_forms)
    assert counts.vectors_vacuum_fails_on == sum(1 for r in needed if r[6])
    assert counts.unneeded > 0 and counts.covered > 0  # the draw exercises both sides


def test_a_retention_text_is_parsed_by_one_spark_job_per_process(spark):
    """A run's tables nearly all say Delta's default week: the parser's job runs for the first,
    and the others get its answer; a refused text is asked again, never remembered."""
    from core.session import job_group
    from vacuum.snapshot import PARSED_RETENTIONS, retention_millis

    PARSED_RETENTIONS.clear()
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup
    with job_group(spark, "retention-parse"):
        assert retention_millis(spark, "interval 1 week") == 7 * 86_400_000
        parsed = len(jobs("retention-parse"))
        assert parsed >= 1
        assert retention_millis(spark, " INTERVAL 1 WEEK") == 7 * 86_400_000  # the same text
        assert retention_millis(spark, "1 week") == 7 * 86_400_000
        assert len(jobs("retention-parse")) == parsed
        for _ in range(2):
            asked = len(jobs("retention-parse"))
            with pytest.raises(VacuumRefused, match="not a retention Delta can use"):
                retention_millis(spark, "interval 1 month")
            assert len(jobs("retention-parse")) > asked
    assert PARSED_RETENTIONS == {"interval 1 week": 7 * 86_400_000 * 1000}


@pytest.mark.parametrize("uniform", [False, True])
def test_table_state_from_the_snapshot_matches_detail_and_deltas_own_reading(spark, tmp_path, uniform):
    """The location, partitioning, retention and UniForm flag read from the snapshot (its
    metadata's properties through Spark's interval parser) are exactly what Delta's own reading
    says, and what the public ``detail()`` says, for every way of writing the retention; a month,
    a year or nonsense refuses the table."""
    from delta.tables import DeltaTable

    from vacuum.snapshot import PARSED_RETENTIONS, load_table_state, retention_millis

    PARSED_RETENTIONS.clear()  # every text read by the parser under this time zone, not remembered
    uri = f"{tmp_path}/t"
    spark.createDataFrame([(1, "a"), (2, "b")], "id int, p string").write.format("delta").partitionBy(
        "p"
    ).save(uri)
    delta = spark._jvm.org.apache.spark.sql.delta
    spark.conf.set("spark.sql.session.timeZone", "Australia/Lord_Howe")  # not UTC, half-hour DST
    try:
        for value in [
            "interval 1 day -1 hours",
            "interval 1 week",
            "168 hours",
            " INTERVAL 2 days 12 hours",
            "1 day 30 minutes 1.5 seconds",
            "90 seconds",
        ]:
            spark.sql(
                f"ALTER TABLE delta.`{uri}` SET TBLPROPERTIES ('delta.deletedFileRetentionDuration' = '{value}')"
            )
            snapshot = delta.DeltaLog.forTableWithSnapshot(spark._jsparkSession, uri)._2()
            expected = delta.DeltaLog.tombstoneRetentionMillis(snapshot.metadata())
            state, files = load_table_state(spark, uri)
            assert state.retention_millis == expected, value
            assert state.version == snapshot.version()
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    assert state.qualified_location == f"file:{uri}"
    assert state.partition_columns == ("p",)
    detail = DeltaTable.forPath(spark, uri).detail().first()
    assert (detail["location"], tuple(detail["partitionColumns"])) == (
        state.qualified_location,
        state.partition_columns,
    )
    assert files.count() == 2
    for value in ["interval 1 month", "1 year", "a week", "", "-1 hours"]:
        with pytest.raises(VacuumRefused, match="not a retention Delta can use"):
            retention_millis(spark, value)
    # Delta-Spark accepts these and wraps them around its 64-bit microseconds: to about 16 hours,
    # to a negative figure; the exact figure would report (and gate on) thousands of centuries
    assert retention_millis(spark, "interval 106751991 days") == 106751991 * 86_400_000  # fits
    for value in ["interval 213503983 days", "interval 999999999 days", "interval 106751992 days"]:
        with pytest.raises(VacuumRefused, match="wraps around"):
            retention_millis(spark, value)
    if uniform:  # the property UniForm sets, committed by hand: Delta-Spark checks IcebergCompat first
        _commit_property_by_hand(tmp_path / "t", "delta.universalFormat.enabledFormats", "hudi,iceberg")
    snapshot = delta.DeltaLog.forTableWithSnapshot(spark._jsparkSession, uri)._2()
    assert delta.UniversalFormat.icebergEnabled(snapshot.metadata()) is uniform  # Delta's own reading
    assert load_table_state(spark, uri)[0].iceberg_enabled is uniform
    # another writer's log may set the retention to an empty text: never read as the default week
    # (Delta's own snapshot fails on it first; the parser would refuse it)
    _commit_property_by_hand(tmp_path / "t", "delta.deletedFileRetentionDuration", "")
    with pytest.raises(Exception, match="not a retention Delta can use|Interval cannot be null or blank"):
        load_table_state(spark, uri)


def _commit_property_by_hand(table: Path, name: str, value: str) -> None:
    """A commit that sets one table property, written as another writer might, without Delta-Spark's
    checks: the newest commit's metadata action, with the property changed."""
    log = table / "_delta_log"
    newest = max(log.glob("*.json"))
    [metadata] = [json.loads(line) for line in newest.read_text().splitlines() if '"metaData"' in line]
    metadata["metaData"]["configuration"][name] = value
    (log / f"{int(newest.stem) + 1:020d}.json").write_text(json.dumps(metadata) + "\n")


def test_nested_tables_are_found_by_their_log_directory(spark):
    from vacuum.plan import inventory_figures

    keys = [
        "t/_delta_log/00000000000000000000.json",  # the table's own log
        "t/x/_delta_log",  # a file called _delta_log: not a table
        "t/y/_delta_log/00000000000000000000.json",
        "t/y/z/_delta_log/00000000000000000000.json",  # nested in the nested: the outer one counts
        "t/p=1/inner/_delta_log/00000000000000000003.checkpoint.parquet",
        "t/p=1/part-0.parquet",
        "t/w//_delta_log/00000000000000000000.json",  # no Hadoop path names it: not a table's log
        "u/_delta_log/00000000000000000000.json",  # another table's
    ]
    figures = inventory_figures(inventory_of(spark, "lake", keys), StorageLocation.parse("s3://lake/t"))
    assert sorted(figures.nested_roots) == ["p=1/inner", "y"]
    assert figures.objects_under_table == 7  # every row under t/ counts, the unnameable key too


def test_a_runs_figures_of_all_its_tables_at_once_are_each_tables_own(spark):
    """One Spark job gives every table of a run the figures its own job gives, its times those of
    its own rows: no row of another table, nor of the bucket outside the tables, enters them."""
    from vacuum.plan import InventoryFigures, bucket_figures, inventory_figures, tables_figures

    # tables at 10 depths: past the hashed depths, some are matched by a prefix join
    deep = ["/".join([f"d{depth}"] * (depth - 1) + ["t"]) for depth in range(2, 11)]
    keys = [
        "t/_delta_log/00000000000000000000.json",
        "t/x/_delta_log",  # a file called _delta_log: not a table
        "t/y/_delta_log/00000000000000000000.json",
        "t/y/z/_delta_log/00000000000000000000.json",
        "t/p=1/inner/_delta_log/00000000000000000003.checkpoint.parquet",
        "t/p=1/part-0.parquet",
        "t/w//_delta_log/00000000000000000000.json",
        "t/q/_delta_log/",  # a folder marker named like a log: not a table
        "t/",  # the table root's own marker
        "t",  # an object named like the table: not under it
        "t_v2/_delta_log/00000000000000000000.json",  # a sibling whose name starts like it
        "t_v2/n/_delta_log/00000000000000000000.json",
        "u/a.parquet",  # under no table of the run
        "u/n/_delta_log/00000000000000000000.json",
        *[f"{root}/{name}" for root in deep for name in ("part-0.parquet", "n/_delta_log/0.json", "y=é/z")],
    ]
    # a noncurrent version and a delete marker count as objects, and are no table's log
    noncurrent = inventory_of(spark, "lake", ["t/gone/_delta_log/0.json"]).withColumn(
        "is_latest", F.lit(False)
    )
    marker = inventory_of(spark, "lake", ["t/m/_delta_log/0.json"]).withColumn(
        "is_delete_marker", F.lit(True)
    )
    # newer times under the sibling t_v2, under no table of the run, and in another bucket
    newer = (
        inventory_of(spark, "lake", ["u/newer.parquet", "t_v2/newer.parquet"])
        .unionByName(inventory_of(spark, "other", ["t/n/_delta_log/0.json"]))
        .withColumn("modificationTime", F.lit(2_000_000_000_000).cast("long"))
        .withColumn("inventory_taken_at", F.lit(datetime(2024, 2, 1, tzinfo=timezone.utc)))
    )
    frame = inventory_of(spark, "lake", keys).unionByName(noncurrent).unionByName(marker).unionByName(newer)
    locations = [StorageLocation.parse(f"s3://lake/{key}") for key in ["t", "t_v2", "empty", *deep]]

    by_key = tables_figures(frame, "lake", locations)
    for location in locations:
        assert by_key[location.key] == inventory_figures(frame, location), location.key
    times = {key: (f.inventory_taken_at, f.newest_modification_millis) for key, f in by_key.items()}
    # the sibling t_v2's newer row is its own, not t's
    assert times.pop("t_v2") == (datetime(2024, 2, 1, tzinfo=timezone.utc), 2_000_000_000_000)
    assert times.pop("empty") == (None, None)
    assert set(times.values()) == {(datetime(2024, 1, 1, tzinfo=timezone.utc), 1000)}
    assert bucket_figures(frame, "lake") == (1_706_745_600_000, 2_000_000_000_000)  # the newer rows'
    assert by_key["empty"] == InventoryFigures(0, None, None, ())
    assert sorted(by_key["t"].nested_roots) == ["p=1/inner", "y"]
    assert by_key["t"].objects_under_table == 11
    assert by_key["t_v2"].nested_roots == ("n",)
    assert {by_key[root].objects_under_table for root in deep} == {3}
    assert {by_key[root].nested_roots for root in deep} == {("n",)}


def test_the_runs_figures_run_as_one_spark_job_each_and_count_what_the_defaults_count(spark):
    """The run's figures session gathers each query's few rows in one shuffle partition, without
    adaptive execution (a Spark job per query stage): the tables' figures and the bucket's (for a
    table without rows) are one job each, and they are the figures a session of Spark's defaults
    counts."""
    from core.session import job_group
    from vacuum.plan import bucket_figures, tables_figures
    from vacuum.tuning import aggregate_in_one_job

    keys = [f"t{n}/p={n % 3}/part-{n}.parquet" for n in range(40)] + [
        f"t{n}/n/_delta_log/0.json" for n in range(0, 40, 7)
    ]
    locations = [StorageLocation.parse(f"s3://lake/t{n}") for n in range(40)]
    defaults = spark.newSession()
    defaults.conf.set("spark.sql.adaptive.enabled", "true")
    defaults.conf.set("spark.sql.shuffle.partitions", "7")
    expected = tables_figures(inventory_of(defaults, "lake", keys).repartition(3), "lake", locations)

    one_job = spark.newSession()
    aggregate_in_one_job(one_job)
    assert one_job.conf.get("spark.sql.shuffle.partitions") == "1"
    assert one_job.conf.get("spark.sql.adaptive.enabled") == "false"
    frame = inventory_of(one_job, "lake", keys).repartition(3).cache()  # its tasks: 3, each a partial count
    frame.count()
    group = "figures in one job"

    def jobs() -> int:  # the status tracker hears of a job from Spark's listener bus, later
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
        return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))

    try:
        with job_group(one_job, group):
            counted = tables_figures(frame, "lake", locations)
            jobs_of_tables = jobs()
            bucket_wide = bucket_figures(frame, "lake")
            jobs_of_both = jobs()
    finally:
        frame.unpersist()
    assert counted == expected
    assert counted["t7"].nested_roots == ("n",)
    assert bucket_wide == (1_704_067_200_000, 1000)
    # the owners' keys are one broadcast (one depth of table paths), which may be a job of its own
    assert jobs_of_tables <= 2
    assert jobs_of_both - jobs_of_tables == 1


def test_a_run_counts_no_figures_for_tables_that_nest_or_when_reads_may_skip_files(spark):
    """Each table then counts its own, from the rows of its own slice."""
    from vacuum.context import RunContext
    from vacuum.plan import tables_figures

    frame = inventory_of(spark, "lake", ["t/n/_delta_log/0.json", "t/n/a.parquet", "u/a.parquet"])
    nested = [StorageLocation.parse("s3://lake/t"), StorageLocation.parse("s3a://lake/t/n")]
    run = RunContext("r", 1, ())
    run.figures_of_tables(frame, "lake", nested)
    assert run.table_figures == {}
    with pytest.raises(ValueError, match="inside another"):
        tables_figures(frame, "lake", nested)

    apart = [StorageLocation.parse("s3://lake/t"), StorageLocation.parse("s3://lake/u")]
    spark.conf.set("spark.sql.files.ignoreCorruptFiles", "true")
    try:
        run.figures_of_tables(frame, "lake", apart)
    finally:
        spark.conf.unset("spark.sql.files.ignoreCorruptFiles")
    assert run.table_figures == {}
    run.figures_of_tables(frame, "lake", apart)
    assert run.figures_of_table(apart[0]).nested_roots == ("n",)
    assert run.figures_of_table(apart[1]).objects_under_table == 1


def test_a_runs_figures_read_only_its_tables_rows_and_a_failed_query_is_only_logged(
    spark, tmp_path, monkeypatch, caplog
):
    """Before its tables run, a run counts their figures from their own rows: the inventory's file
    of the bucket's other keys is never read (it is gone from disk here, and Delta's file skipping
    leaves it out). When that query fails, it is logged, and each table counts its own."""
    from core.registry import RegisteredTable
    from vacuum import plan, runner
    from vacuum.context import RunContext
    from vacuum.plan import inventory_figures

    location = tmp_path / "inventory"
    inventory_of(spark, "lake", ["t/a.parquet", "u/b.parquet"]).coalesce(1).write.format("delta").save(
        str(location)
    )
    before = set(location.glob("*.parquet"))
    inventory_of(spark, "lake", ["v/c.parquet", "w/d.parquet"]).coalesce(1).write.format("delta").mode(
        "append"
    ).save(str(location))
    (others,) = set(location.glob("*.parquet")) - before
    inventory = spark.read.format("delta").load(str(location))
    tables = [
        RegisteredTable(name, f"s3://lake/{name}", StorageLocation.parse(f"s3://lake/{name}"), "o")
        for name in ("t", "u")
    ]
    expected = {table.name: inventory_figures(inventory, table.location) for table in tables}
    others.unlink()
    scans = []
    monkeypatch.setattr(plan, "bucket_figures", lambda *args: scans.append(args))

    counted = RunContext("r", 0, ())
    with caplog.at_level("WARNING", logger=runner.log.name):
        runner._read_run_figures(spark, spark, tables, str(location), counted)
    assert [r.getMessage() for r in caplog.records if r.name == runner.log.name] == []
    for table in tables:
        assert counted.figures_of_table(table.location) == expected[table.name]
    assert expected["t"].objects_under_table == 1
    assert expected["t"].inventory_taken_at == datetime(2024, 1, 1, tzinfo=timezone.utc)
    assert scans == [] and counted.bucket_figures == {}

    def failing(*_args, **_kwargs):
        raise RuntimeError("the tables' query failed")

    monkeypatch.setattr(RunContext, "figures_of_tables", failing)
    failed = RunContext("r", 0, ())
    with caplog.at_level("WARNING", logger=runner.log.name):
        runner._read_run_figures(spark, spark, tables, str(location), failed)
    assert "the tables' query failed" in caplog.text
    assert failed.table_figures == {} and scans == []


def test_a_table_without_rows_is_judged_by_its_buckets_delivery_and_one_with_rows_by_its_own(spark):
    """A table with no row under it takes the bucket's times, counted once for the run: the
    freshness gate judges the delivery that found nothing there; a table with rows keeps its own."""
    from vacuum.context import RunContext
    from vacuum.plan import InventoryFigures, bucket_figures, tables_figures, with_bucket_times

    frame = inventory_of(spark, "lake", ["t/a.parquet"]).unionByName(
        inventory_of(spark, "lake", ["u/b.parquet"]).withColumn("modificationTime", F.lit(5_000).cast("long"))
    )
    by_key = tables_figures(frame, "lake", [StorageLocation.parse(f"s3://lake/{k}") for k in ("t", "empty")])
    bucket_wide = bucket_figures(frame, "lake")
    assert bucket_wide == (1_704_067_200_000, 5_000)
    assert with_bucket_times(by_key["t"], bucket_wide) is by_key["t"]
    # rows without a time of their own borrow none (the gates refuse them as of unknown age)
    untimed = InventoryFigures(3, None, None, ())
    assert with_bucket_times(untimed, bucket_wide) is untimed
    assert by_key["t"].newest_modification_millis == 1000
    judged = with_bucket_times(by_key["empty"], bucket_wide)
    assert judged.inventory_taken_at == datetime(2024, 1, 1, tzinfo=timezone.utc)
    assert (judged.objects_under_table, judged.newest_modification_millis) == (0, 5_000)

    run = RunContext("r", 0, ())
    assert run.figures_of_bucket(frame, "lake") == bucket_wide
    assert run.figures_of_bucket(frame.where(F.lit(False)), "lake") == bucket_wide  # counted once


@pytest.mark.line_sensitive  # whether a cached read of one version answers a read of another is Delta's
def test_a_runs_small_tables_read_their_rows_from_one_cached_read(spark, tmp_path, monkeypatch):
    """Each small table of an inventory run reads, on its own session, exactly its own rows, from
    the cache the run filled in one query; a bigger table reads the inventory; a read of another
    version of the inventory is never answered from the cache; the cache goes when its last table
    has read it; a group needs two tables; a table whose group Spark's cache lost reads its own."""
    from pyspark import StorageLevel

    from core.tables import read_inventory
    from vacuum import context as run_context
    from vacuum.context import RunContext
    from vacuum.plan import rows_under, tables_rows
    from vacuum.tuning import aggregate_in_one_job

    monkeypatch.setattr(run_context, "SHARED_ROWS_UP_TO_OBJECTS", 3)
    keys = [
        "t/a.parquet",
        "t/p=1/b.parquet",
        "t/_delta_log/0.json",
        "t_v2/c.parquet",  # a sibling whose name starts like t
        "t-old/a.parquet",  # keys beside t's range [t/, t0): '-' and '.' sort before '/', '0' after
        "t.x",
        "t0/a.parquet",
        "u/a.parquet",
        "u/b.parquet",
        "u/c.parquet",
        "u/d.parquet",  # u has 4 objects: past the bound
        "v/a.parquet",
    ]
    location = str(tmp_path / "inventory")
    other_bucket = inventory_of(spark, "other", ["t/a.parquet", "t/z.parquet", "v/a.parquet"])
    inventory_of(spark, "lake", keys).unionByName(other_bucket).write.format("delta").save(location)
    tables = [StorageLocation.parse(f"s3://lake/{name}") for name in ("t", "t_v2", "u", "v")]
    run = RunContext("r", 0, ())
    figures = spark.newSession()  # the run's figures session, as the run tunes it
    aggregate_in_one_job(figures)
    inventory = read_inventory(figures, location, 0)
    run.figures_of_tables(inventory, "lake", tables)
    run.share_rows(inventory, "lake", tables)
    assert sorted(key for _, key in run.shared_rows) == ["t", "t_v2", "v"]

    session = spark.newSession()  # a table's own session
    for table in tables:
        own = read_inventory(session, location, 0)
        rows = rows_under(run.rows_source(own, table), table)
        cached = "InMemoryRelation" in rows._jdf.queryExecution().withCachedData().toString()
        assert cached == (table.key != "u"), table.key
        assert sorted(rows.collect()) == sorted(rows_under(own, table).collect()), table.key
    # an ingest committing mid-run: the run's pinned version 0 is cached, version 1 is not
    inventory_of(spark, "lake", ["t/new.parquet"]).write.format("delta").mode("append").save(location)
    group = run.shared_rows[("lake", "t")]
    newer = tables_rows(read_inventory(session, location, 1), "lake", group)
    assert "InMemoryRelation" not in newer._jdf.queryExecution().withCachedData().toString()
    assert "t/new.parquet" in {row["key"] for row in newer.collect()}
    (shared,) = run.shared_groups.values()

    def in_cache(frame) -> bool:  # Spark's cache manager's answer, not PySpark's own flag
        return frame.storageLevel != StorageLevel.NONE

    assert in_cache(shared.frame)
    for table in tables[:3]:
        run.release_rows(table)
    assert in_cache(shared.frame)  # v has not read its rows yet
    run.release_rows(tables[3])
    assert not in_cache(shared.frame) and not run.shared_groups

    run.share_rows(inventory, "lake", tables[2:])  # u is past the bound: v alone, no group
    assert not run.shared_rows and not run.shared_groups
    run.share_rows(inventory, "lake", tables)
    spark.catalog.clearCache()  # another caller in the JVM empties Spark's cache mid-run
    own = read_inventory(session, location, 0)
    assert run.rows_source(own, tables[0]) is own
    run.release_all_rows()

    monkeypatch.setattr(run_context, "SHARED_ROWS_LIMIT", 4)  # past the limit: no table shares
    run.share_rows(inventory, "lake", tables)
    assert not run.shared_rows
    monkeypatch.setattr(run_context, "SHARED_ROWS_LIMIT", 5)
    run.share_rows(inventory, "lake", tables)
    (shared,) = run.shared_groups.values()
    assert shared.rows == 5  # counted: t's 3, t_v2's and v's
    run.release_all_rows()
    assert not in_cache(shared.frame) and not run.shared_rows


def test_shuffle_partitions_are_sized_to_the_tables_objects():
    from vacuum.snapshot import shuffle_partitions

    assert shuffle_partitions(1_000, 8) == 1  # a small table: one partition, not eight empty ones
    assert shuffle_partitions(0, 8) == 1
    assert shuffle_partitions(120_000, 8) == 3  # a partition per 50k objects
    assert shuffle_partitions(10**9, 200) == 200  # never more than the session's setting


def test_snapshot_partitions_are_sized_to_the_table(tmp_path):
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from core.tables import snapshot_partitions

    root = tmp_path / "t"
    write_deltalake(str(root), pa.table({"x": [1, 2, 3]}))
    location = StorageLocation.parse(f"file://{root}")
    assert snapshot_partitions(location, 8) == 8  # no checkpoint yet: the cluster's parallelism
    assert snapshot_partitions(location, 400) == 50  # never more than Delta's default
    DeltaTable(str(root)).create_checkpoint()
    assert snapshot_partitions(location, 8) == 1  # a checkpoint of a few actions: one partition
    (root / "_delta_log" / "_last_checkpoint").write_text('{"version": 0, "size": 2500000}')
    assert snapshot_partitions(location, 8) == 50  # a partition per 50k actions
    (root / "_delta_log" / "_last_checkpoint").write_text('{"version": 0, "size": 120000}')
    assert snapshot_partitions(location, 8) == 3


def test_the_ledgers_deletions_are_read_once_and_an_append_does_not_reach_them(spark, tmp_path):
    """deleted_since: the bucket's deletions since the time, less those restored; its frame names
    no table, so an append to the ledger neither re-plans the frames cached from it (Spark's
    cache manager refreshes a path it writes: 31 Spark jobs an append) nor changes their rows."""
    from vacuum.ledger import deleted_since, record_deletions, record_restores

    ledger = f"file://{tmp_path}/ledger"
    since = datetime(2024, 1, 1, tzinfo=timezone.utc)

    def deleted(*keys: str, bucket: str = "lake"):
        return spark.createDataFrame(
            [(f"s3://{bucket}/{k}", bucket, k, 1) for k in keys],
            "path string, bucket string, key string, length long",
        )

    assert (
        record_deletions(spark, ledger, deleted("a", "b", "c"), run_id="r1", table="t", deleted_with="batch")
        is None
    )
    assert (
        record_deletions(
            spark, ledger, deleted("a", bucket="other"), run_id="r1", table="u", deleted_with="batch"
        )
        is None
    )
    restored = {
        "run_id": "r1", "table": "t", "path": "s3://lake/b", "bucket": "lake", "key": "b", "length": 1,
        "deleted_with": "batch", "deleted_at": datetime.now(timezone.utc), "restored_by": "undo",
        "restored_at": datetime.now(timezone.utc),
    }  # fmt: skip
    before_since = {
        **restored,
        "key": "old",
        "path": "s3://lake/old",
        "restored_by": None,
        "restored_at": None,
    }
    before_since["deleted_at"] = datetime(2023, 12, 31, tzinfo=timezone.utc)
    assert record_restores(spark, ledger, [restored, before_since]) is None

    frame = deleted_since(spark, ledger, "lake", since)
    assert frame is not None
    # small, as the ledger's own read would be: joined with a table's objects by a broadcast
    objects = inventory_of(spark, "lake", ["a", "x"]).join(frame, ["bucket", "key"], "left")
    assert "BroadcastHashJoin" in objects._jdf.queryExecution().executedPlan().toString()
    cached = frame.cache()
    assert {(r["bucket"], r["key"]) for r in cached.collect()} == {("lake", "a"), ("lake", "c")}
    leaves = cached._jdf.queryExecution().analyzed().collectLeaves()
    assert {leaves.apply(i).getClass().getSimpleName() for i in range(leaves.size())} == {"LogicalRDD"}

    assert record_deletions(spark, ledger, deleted("d"), run_id="r2", table="t", deleted_with="batch") is None
    assert {(r["bucket"], r["key"]) for r in cached.collect()} == {("lake", "a"), ("lake", "c")}
    again = deleted_since(spark, ledger, "lake", since)
    assert again is not None and {r["key"] for r in again.collect()} == {"a", "c", "d"}
    cached.unpersist()


def test_the_planner_builds_its_columns_without_recording_python_call_sites(spark):
    """The tool's session turns off PySpark's recording of each call's Python call site: with it,
    every Column call made about ten more Py4J round trips (the planner makes a few hundred such
    calls a table)."""
    from core.session import DATAFRAME_DEBUGGING

    assert spark.conf.get(DATAFRAME_DEBUGGING) == "false"
    client = spark.sparkContext._gateway._gateway_client
    sent = []
    original = client.send_command
    this_thread = threading.get_ident()

    def counting(*args, **kwargs):
        # this thread's calls only: Py4J's finalizer sends its releases of objects ("m") too
        if threading.get_ident() == this_thread and not str(args[0]).startswith("m"):
            sent.append(str(args[0])[:1])
        return original(*args, **kwargs)

    F.col("key").startswith("w/")  # once before counting: Py4J looks up the classes once
    client.send_command = counting
    try:
        F.col("key").startswith("w/")
    finally:
        del client.send_command
    # F.col and startswith: 4 round trips; 24 with the call sites recorded (PySpark 4: Spark 3.5
    # records none, and there only the setting above is checked)
    assert 0 < len(sent) <= 8, sent


def test_the_tools_older_tables_gain_the_new_columns_and_another_table_is_never_reshaped(spark, tmp_path):
    """The history and the ledger are appended to without reading them first; only when Delta
    refuses an append for its columns is the table's own checked: a history or ledger an older
    version wrote gains the newer columns, and another table at that location keeps its own
    columns and rows (the append is refused: a warning, not a failed run)."""
    from core.tables import LEDGER_CORE_COLUMNS, LEDGER_SCHEMA, VACUUM_RUNS_SCHEMA, append_run_rows
    from vacuum.ledger import record_deletions

    def older(name: str, schema, columns) -> str:  # type: ignore[no-untyped-def]
        location = f"file://{tmp_path}/{name}"
        kept = [f for f in schema if f.name in columns]
        row = tuple({"run_id": "old", "run_at": datetime(2024, 1, 1)}.get(f.name) for f in kept)
        spark.createDataFrame([row], StructType(kept)).write.format("delta").save(location)
        return location

    def columns_and_rows(location: str) -> tuple[list[str], int]:
        frame = spark.read.format("delta").load(location)
        return frame.columns, frame.count()

    history = older("history", VACUUM_RUNS_SCHEMA, ("run_id", "run_at", "table"))
    assert append_run_rows(spark, history, VACUUM_RUNS_SCHEMA, "r1", [{"table": "t", "status": "ok"}])
    assert columns_and_rows(history) == ([f.name for f in VACUUM_RUNS_SCHEMA], 2)

    deleted = spark.createDataFrame(
        [("s3://lake/a", "lake", "a", 1)], "path string, bucket string, key string, length long"
    )
    ledger = older("ledger", LEDGER_SCHEMA, LEDGER_CORE_COLUMNS)
    assert record_deletions(spark, ledger, deleted, run_id="r1", table="t", deleted_with="batch") is None
    assert columns_and_rows(ledger) == ([f.name for f in LEDGER_SCHEMA], 2)

    other = f"file://{tmp_path}/other"
    spark.createDataFrame([(1, "x")], "id int, name string").write.format("delta").save(other)
    assert not append_run_rows(spark, other, VACUUM_RUNS_SCHEMA, "r1", [{"table": "t", "status": "ok"}])
    warning = record_deletions(spark, other, deleted, run_id="r1", table="t", deleted_with="batch")
    assert warning is not None and "could not append to the deletion ledger" in warning
    assert columns_and_rows(other) == (["id", "name"], 1)


def test_the_history_s_checkpoint_commit_rebuilds_its_state_sized_to_the_table(spark, tmp_path):
    """Delta rebuilds a table's whole state at every tenth commit to write a checkpoint. An append
    to the tool's own table does so in partitions sized to that table (no checkpoint yet: the
    cluster's parallelism), not in Delta's 50 on a session of no size; the session has its own
    setting back after, and a session's own setting is kept."""
    from core.session import job_group
    from core.tables import SNAPSHOT_PARTITIONS, VACUUM_RUNS_SCHEMA, append_run_rows, snapshots_sized

    history = f"file://{tmp_path}/history"
    configured = spark.conf.get(SNAPSHOT_PARTITIONS)  # the suite's session sets it, as a job may
    parallelism = spark.sparkContext.defaultParallelism
    try:
        spark.conf.set(SNAPSHOT_PARTITIONS, "7")  # not the size snapshots_sized would choose
        with snapshots_sized(spark, [history]):
            assert spark.conf.get(SNAPSHOT_PARTITIONS) == "7"
        spark.conf.unset(SNAPSHOT_PARTITIONS)
        with snapshots_sized(spark, [history]):
            assert spark.conf.get(SNAPSHOT_PARTITIONS) == str(parallelism)
        for number in range(10):  # versions 0 to 9
            assert append_run_rows(spark, history, VACUUM_RUNS_SCHEMA, f"r{number}", [{"table": "t"}])
        with job_group(spark, "checkpoint-commit"):
            assert append_run_rows(spark, history, VACUUM_RUNS_SCHEMA, "r10", [{"table": "t"}])
        assert (tmp_path / "history" / "_delta_log" / "00000000000000000010.checkpoint.parquet").is_file()
        tracker = spark.sparkContext.statusTracker()
        tasks = [
            tracker.getStageInfo(stage).numTasks
            for job in tracker.getJobIdsForGroup("checkpoint-commit")
            for stage in tracker.getJobInfo(job).stageIds
            if tracker.getStageInfo(stage) is not None
        ]
        assert tasks and max(tasks) <= parallelism < 50
        assert spark.conf.get(SNAPSHOT_PARTITIONS, None) is None
    finally:
        spark.conf.set(SNAPSHOT_PARTITIONS, configured)


def test_the_session_builds_the_first_s3_client_once_its_jvm_is_up(spark):
    """The session that started the JVM built the process's first S3 client on a thread of its
    own; a client built anywhere else waits for it, and the thread does not wait for itself."""
    import threading

    from core import s3 as s3_module

    loading = s3_module._model_loading
    assert isinstance(loading, threading.Thread) and loading.name == "inventory-vacuum boto3 model"
    s3_module.wait_for_client_model()
    assert not loading.is_alive()
    s3_module.load_client_model()  # once a process: a second call starts nothing
    assert s3_module._model_loading is loading
