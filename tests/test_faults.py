"""Fault tolerance: the jobs under S3's transient errors, throttling, and a SIGKILL mid-write.

Faults come from the test server's layer (``testing.local_s3.Faults``): 503 SlowDown and 500
InternalError answers, connections closed unanswered, latency, and a request-rate limit. Nothing
here may lose a live file, and a rerun must finish what a killed run started.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from testing.local_s3 import Faults, LocalS3Server
from tests.support.helpers import (
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
)
from tests.support.processes import bare_env, errors_in
from tests.support.tables import make_table, referenced_keys

pytestmark = [pytest.mark.slow, pytest.mark.faults, pytest.mark.own_jvms]

COMMAND = str(Path(sys.executable).parent / "inventory-vacuum")


@pytest.fixture(autouse=True)
def _no_faults_after(s3_server: LocalS3Server) -> Iterator[None]:
    """The local S3 serves the whole run's tests: a fault a test injected ends with it, even when
    the test fails before it clears its own."""
    yield
    s3_server.clear_faults()


def _put_many(s3: Any, bucket: str, keys: list[str]) -> None:
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda key: put(s3, bucket, key), keys))


def _garbage(s3: Any, spark: Any, bucket: str, uri: str) -> set[str]:
    """What a vacuum of ``events`` must delete: every visible key under it that no version needs."""
    visible = {
        k for k in keys_of(s3, bucket, "events/") if "/_" not in "/" + k[7:] and "/." not in "/" + k[7:]
    }
    return visible - referenced_keys(spark, uri)


def _vacuum(inventory: str, registry: str, *extra: str) -> tuple[int, dict]:
    return cli_json("vacuum", "--inventory-table", inventory, "--tables", registry, *extra)


def _wait_for(condition: Any, process: subprocess.Popen, what: str, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            _, stderr = process.communicate()
            pytest.fail(f"the job ended (exit {process.returncode}) before {what}:\n{errors_in(stderr)}")
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def _start(tmp_path: Path, *argv: str) -> subprocess.Popen:
    """The installed command, as a scheduler runs it (bare PATH), in a process group of its own."""
    return subprocess.Popen(
        [COMMAND, *argv],
        env=bare_env(tmp_path),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _kill(process: subprocess.Popen) -> None:
    """SIGKILL the job and everything it started (its JVM and Python workers)."""
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)


def test_transient_errors_and_dropped_connections_change_no_result(
    spark, s3, s3_server: LocalS3Server, bucket_factory, tmp_path
):
    source, inventory_bucket = bucket_factory("lake"), bucket_factory("inv")
    uri = make_table(spark, source)
    _put_many(s3, source, [f"events/day=2024-01-0{d}/junk-{i}.parquet" for d in (1, 2) for i in range(20)])
    past_retention = retention_deadline()
    expected = _garbage(s3, spark, source, uri)
    live, rows = referenced_keys(spark, uri), rows_at(spark, uri)
    deliver_inventory(s3, source, inventory_bucket)
    inventory = f"s3://{inventory_bucket}/tables/inventory"
    registry = registry_file(tmp_path, {"events": f"s3://{source}/events"})

    # 5% of every request fails with 503 or 500, 2% lose their connection: boto3, S3A, the
    # batch deleter and the existence checks all retry
    wait_until(past_retention)
    s3_server.inject(Faults(error_share=0.05, drop_share=0.02, seed=11))
    try:
        ingest_inventory(source, inventory_bucket, inventory)
        code, result = _vacuum(inventory, registry, "--verify-existence")
    finally:
        s3_server.clear_faults()
    injected = s3_server.injected()
    assert injected["SlowDown"] and injected["InternalError"] and injected["dropped"], injected
    assert code == 0, result["tables"][0]["reason"]
    [run] = result["tables"]
    after = keys_of(s3, source)
    assert live <= after and not expected & after  # the same outcome as a clean run
    assert (run["planned_files"], run["deleted_files"], run["already_gone_files"]) == (
        len(expected),
        len(expected),
        0,
    )
    assert rows_at(spark, uri) == rows
    ledger = {
        r["key"]
        for r in spark.read.format("delta").load(f"s3://{inventory_bucket}/tables/vacuum_deletions").collect()
    }
    assert ledger == expected


@pytest.fixture
def big_lake(spark, s3, bucket_factory, tmp_path):
    """A table with 2,400 old orphans over four partitions: three DeleteObjects requests at least."""
    source, inventory_bucket = bucket_factory("lake"), bucket_factory("inv")
    uri = make_table(spark, source)
    _put_many(
        s3,
        source,
        [f"events/day=2024-01-0{d}/orphan-{i:04d}.parquet" for d in (1, 2, 3, 4) for i in range(600)],
    )
    past_retention = retention_deadline()
    inventory = f"s3://{inventory_bucket}/tables/inventory"
    take_inventory(s3, source, inventory_bucket, inventory)
    wait_until(past_retention)
    return {
        "bucket": source,
        "uri": uri,
        "inventory": inventory,
        "ledger": f"s3://{inventory_bucket}/tables/vacuum_deletions",
        "history": f"s3://{inventory_bucket}/tables/vacuum_runs",
        "registry": registry_file(tmp_path, {"events": f"s3://{source}/events"}),
        "expected": _garbage(s3, spark, source, uri),
        "live": referenced_keys(spark, uri),
        "rows": rows_at(spark, uri),
    }


def test_vacuum_killed_mid_delete_then_a_rerun_under_throttling_finishes(
    spark, s3, s3_server: LocalS3Server, big_lake, tmp_path
):
    lake = big_lake
    # each DeleteObjects takes 3 s: the job is killed while its first requests are in flight, one
    # a task, so that some of the lake's three or more requests are not sent yet
    s3_server.inject(Faults(latency_ms=3000, bucket=lake["bucket"], operations=frozenset({"DeleteObjects"})))
    s3_server.reset_counts()
    process = _start(
        tmp_path,
        "vacuum",
        "--inventory-table",
        lake["inventory"],
        "--tables",
        lake["registry"],
        "--delete-requests-per-task",
        "1",
        "--json",
    )
    try:
        _wait_for(
            lambda: s3_server.counts(lake["bucket"])["DeleteObjects"] >= 1, process, "the first DeleteObjects"
        )
    finally:
        _kill(process)
    s3_server.clear_faults()
    assert s3_server.wait_idle()  # S3 finishes a request whose caller died; so does the server

    after = keys_of(s3, lake["bucket"])
    assert lake["live"] <= after and rows_at(spark, lake["uri"]) == lake["rows"]  # nothing live lost
    deleted_by_killed = lake["expected"] - after
    assert 0 < len(deleted_by_killed) < len(lake["expected"])  # killed in the middle
    # lost at a SIGKILL: the killed run's ledger rows and history row (written after the deletes)
    assert spark.read.format("delta").load(lake["ledger"]).count() == 0  # created before the deletes

    # the rerun, under sustained throttling: S3 answers SlowDown past 1 DeleteObjects a second, and
    # to the first one (two requests more than a second apart on a loaded machine met no limit)
    s3_server.inject(
        Faults(
            max_per_second=1,
            throttle_first=1,
            bucket=lake["bucket"],
            operations=frozenset({"DeleteObjects"}),
        )
    )
    s3_server.reset_counts()
    started = time.monotonic()
    try:
        code, result = _vacuum(lake["inventory"], lake["registry"], "--verify-existence")
    finally:
        s3_server.clear_faults()
    [run] = result["tables"]
    assert code == 0, run["reason"]
    sent = s3_server.counts(lake["bucket"])["DeleteObjects"]
    print(
        f"rerun under throttling: {sent} DeleteObjects sent ({s3_server.injected()['throttled']} throttled), "
        f"{sent / (time.monotonic() - started):.2f} requests/s over the whole run"
    )
    assert s3_server.injected()["throttled"] >= 1
    assert run["already_gone_files"] == len(deleted_by_killed)
    assert run["deleted_files"] == len(lake["expected"]) - len(deleted_by_killed)
    assert not lake["expected"] & keys_of(s3, lake["bucket"]) and lake["live"] <= keys_of(s3, lake["bucket"])
    ledger = spark.read.format("delta").load(lake["ledger"]).collect()
    assert {r["key"] for r in ledger if r["deleted_with"] == "batch"} == lake["expected"] - deleted_by_killed
    # what the killed run deleted, found gone: ledgered apart, so the next run does not claim it
    assert {r["key"] for r in ledger if r["deleted_with"] == "already_gone"} == deleted_by_killed
    history = spark.read.format("delta").load(lake["history"]).collect()
    assert [(h["status"], h["deleted_files"]) for h in history] == [("ok", run["deleted_files"])]


def test_ingest_killed_mid_write_leaves_the_inventory_table_as_it_was(
    spark, s3, s3_server: LocalS3Server, bucket_factory, tmp_path
):
    source, inventory_bucket = bucket_factory("lake"), bucket_factory("inv")
    put(s3, source, *[f"data/a-{i}" for i in range(5)])
    inventory = f"s3://{inventory_bucket}/tables/inventory"
    take_inventory(s3, source, inventory_bucket, inventory)
    table = spark.read.format("delta").load(inventory)
    version_before = spark.sql(f"DESCRIBE HISTORY delta.`{inventory}`").first()["version"]
    rows_before = sorted(r["key"] for r in table.collect())

    put(s3, source, *[f"data/b-{i}" for i in range(5)])
    deliver_inventory(s3, source, inventory_bucket)
    writes = frozenset({"PutObject", "CreateMultipartUpload", "UploadPart"})
    s3_server.inject(
        Faults(latency_ms=3000, bucket=inventory_bucket, prefix="tables/inventory/", operations=writes)
    )
    s3_server.reset_counts()
    process = _start(
        tmp_path, "ingest", "--destination", f"s3://{inventory_bucket}/reports", "--source-bucket", source,
        "--config-id", "daily", "--inventory-table", inventory, "--json",
    )  # fmt: skip
    try:
        _wait_for(
            lambda: sum(s3_server.counts(inventory_bucket)[w] for w in writes) >= 1,
            process,
            "a data file write",
        )
    finally:
        _kill(process)
    s3_server.clear_faults()
    assert s3_server.wait_idle()

    # the commit never happened: the same version, the same rows, readable
    assert spark.sql(f"DESCRIBE HISTORY delta.`{inventory}`").first()["version"] == version_before
    assert sorted(r["key"] for r in spark.read.format("delta").load(inventory).collect()) == rows_before
    ingest_inventory(source, inventory_bucket, inventory)  # the rerun succeeds
    keys = sorted(r["key"] for r in spark.read.format("delta").load(inventory).collect())
    assert keys == sorted([f"data/a-{i}" for i in range(5)] + [f"data/b-{i}" for i in range(5)])
