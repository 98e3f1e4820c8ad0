"""Vacuum through s3a on the moto S3 server: the real S3 protocol end to end.

They run on the default Spark line. On the other lines S3A, Delta's planner and delete and its
listing VACUUM are exercised by the cross-writer matrix (its S3 tables, its listing dry run), and
one run here too (``line_sensitive``): the retention reported as the one each Delta applies,
``RETAIN`` included, which Delta honours before 4.1 and ignores from 4.1 on.
"""

from __future__ import annotations

import csv
import json
import logging
import threading
import time

import pytest

from core.paths import StorageLocation
from tests.support.helpers import (
    cli,
    cli_json,
    keys_of,
    put,
    registry_file,
    retention_deadline,
    rows_at,
    take_inventory,
    wait_until,
)
from tests.support.tables import make_table, referenced_keys

HIDDEN_AND_NEIGHBOURS = [
    "events/day=2024-01-01/_SUCCESS",
    "events/day=2024-01-01/.hidden",
    "events/_tmp/scratch",
    "events_v2/part-0.parquet",  # sibling table sharing the name prefix
    "elsewhere/file.bin",
]
JUNK = ["events/day=2024-01-01/orphan.parquet", "events/orphan-at-root.parquet"]


@pytest.fixture
def lake(spark, s3, bucket_factory, tmp_path):
    """A bucket with a vacuumable table, junk, hidden files and a neighbour; inventory loaded."""
    source, inventory_bucket = bucket_factory("lake"), bucket_factory("inv")
    uri = make_table(spark, source)
    put(s3, source, *HIDDEN_AND_NEIGHBOURS, *JUNK)
    past_retention = retention_deadline()  # the overwrite's removed files are outside the retention then
    inventory = f"s3://{inventory_bucket}/tables/inventory"
    take_inventory(s3, source, inventory_bucket, inventory)
    wait_until(past_retention)
    return {
        "bucket": source,
        "uri": uri,
        "inventory": inventory,
        "inventory_bucket": inventory_bucket,
        "tmp": tmp_path,
    }


@pytest.mark.slow
def test_s3a_table_with_s3_inventory_deletes_exactly_the_garbage(spark, s3, lake, monkeypatch):
    import vacuum.inventory_slice
    import vacuum.runner
    import vacuum.tuning

    # a small table's snapshot files are checkpointed for its gates and its check of Delta's
    # answer, and let go after that check: nothing of a run is left in Spark's cache, and every
    # checkpoint is unpersisted
    held_reads, checkpoints = [], []

    def spied(module, name):
        original = getattr(module, name)

        def read(*args, **kwargs):
            files = args[2] if name == "slice_counts" else args[1]
            # a checkpoint (vacuum.tuning.checkpointed_in_one_partition) whose rows are held
            rows = getattr(files, vacuum.tuning._CHECKPOINTED_ROWS, None)
            held_reads.append(rows is not None and rows.getStorageLevel().isValid())
            checkpoints.append(rows)
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, read)

    spied(vacuum.inventory_slice, "slice_counts")
    spied(vacuum.runner, "check_plan")
    spark.catalog.clearCache()
    cache = spark._jsparkSession.sharedState().cacheManager()
    # registered as s3:// while Spark wrote it as s3a://; the inventory holds s3:// paths
    registry = registry_file(lake["tmp"], {"events": f"s3://{lake['bucket']}/events"})
    before = keys_of(s3, lake["bucket"])
    live = referenced_keys(spark, lake["uri"])
    expected = {
        k
        for k in before
        if k.startswith("events/")
        and "/_" not in "/" + k[len("events/") :]
        and "/." not in "/" + k[len("events/") :]
    } - live
    assert set(JUNK) <= expected and len(expected) > len(JUNK)  # removed data files too
    rows_before = rows_at(spark, lake["uri"])

    code, dry = cli_json("vacuum", "--inventory-table", lake["inventory"], "--tables", registry, "--dry-run")
    assert code == 0, dry["tables"][0]["reason"]
    assert dry["tables"][0]["planned_files"] == len(expected)
    assert dry["tables"][0]["deleted_files"] == 0
    assert keys_of(s3, lake["bucket"]) == before  # a dry run deletes nothing

    code, result = cli_json("vacuum", "--inventory-table", lake["inventory"], "--tables", registry)
    assert code == 0, result["tables"][0]["reason"]
    after = keys_of(s3, lake["bucket"])
    assert before - after == expected
    assert set(HIDDEN_AND_NEIGHBOURS) <= after
    assert result["tables"][0]["delete_with"] == "batch"  # the default on S3: it counts per key
    assert result["tables"][0]["deleted_files"] == result["tables"][0]["planned_files"] == len(expected)
    assert held_reads == [True] * 4  # the counts and the check, in the dry run and the real one
    assert not any(rows.getStorageLevel().isValid() for rows in checkpoints)  # let go of
    assert cache.isEmpty()
    assert rows_at(spark, lake["uri"]) == rows_before


@pytest.mark.slow
def test_batch_and_delta_deletes_report_the_same_numbers(spark, s3, bucket_factory, tmp_path):
    source, inventory_bucket = bucket_factory("lake"), bucket_factory("inv")
    first, second = make_table(spark, source, "one"), make_table(spark, source, "two")
    put(
        s3,
        source,
        "one/junk.bin",
        "two/junk.bin",
        "one/day=2024-01-02/_SUCCESS",
        "two/day=2024-01-02/_SUCCESS",
    )
    past_retention = retention_deadline()
    inventory = f"s3://{inventory_bucket}/tables/inventory"
    take_inventory(s3, source, inventory_bucket, inventory)
    wait_until(past_retention)
    registry = registry_file(tmp_path, {"one": first, "two": second})
    before = keys_of(s3, source)
    expected_one = {
        k for k in before if k.startswith("one/") and "_" not in k.split("/")[-1][:1] and "/_" not in k
    } - referenced_keys(spark, first)

    code, batch = cli_json(
        "vacuum",
        "--inventory-table",
        inventory,
        "--tables",
        registry,
        "--table",
        "one",
        "--delete-with",
        "batch",
    )
    assert code == 0, batch["tables"][0]["reason"]
    code, delta = cli_json(
        "vacuum",
        "--inventory-table",
        inventory,
        "--tables",
        registry,
        "--table",
        "two",
        "--delete-with",
        "delta",
    )
    assert code == 0, delta["tables"][0]["reason"]

    [b], [d] = batch["tables"], delta["tables"]
    # both counts are measured: batch per key, delta by checking afterwards what is gone
    assert (b["deleted_files"], b["deleted_bytes"]) == (d["deleted_files"], d["deleted_bytes"])
    assert b["deleted_files"] == b["planned_files"] == len(expected_one) and b["deleted_bytes"] > 0
    assert b["delete_requests"] <= 2 and d["delete_requests"] == 0  # Delta's own requests are not ours
    assert (
        before - keys_of(s3, source, "one/") - {k for k in before if not k.startswith("one/")} == expected_one
    )
    assert keys_of(s3, source, "one/day=2024-01-02/_SUCCESS")
    assert rows_at(spark, first) == rows_at(spark, second) == 10


def test_batch_delete_drops_files_made_live_again_before_deleting(spark, s3, lake):
    from core.tables import read_inventory
    from tests.support.planner import slice_of
    from vacuum.context import RunContext, TableContext, VacuumOptions
    from vacuum.deletion import delete_batch
    from vacuum.plan import candidate_details, delta_inventory, dry_run_candidates, temporary_view, vacuum_sql
    from vacuum.results import TableRun
    from vacuum.runner import _summarise
    from vacuum.snapshot import load_table_state

    location = StorageLocation.parse(lake["uri"])
    state, _ = load_table_state(spark, lake["uri"])
    frame = slice_of(read_inventory(spark, lake["inventory"]), location, state)
    with temporary_view(delta_inventory(frame)) as view:
        sql = vacuum_sql(state, mode="inventory", retention_hours=None, dry_run=True, inventory_view=view)
        planned = candidate_details(dry_run_candidates(spark, sql), frame, state)
        planned_paths = {r["path"] for r in planned.collect()}
        run = TableRun("events", lake["uri"], "failed", "inventory", False, "batch")
        _summarise(planned, run)
        # between planning and deleting, RESTORE makes the overwritten files live again
        spark.sql(f"RESTORE TABLE delta.`{lake['uri']}` TO VERSION AS OF 1")
        restored_count = rows_at(spark, lake["uri"])
        context = RunContext("test", None, ())
        delete_batch(
            TableContext(spark, RegisteredTableStub("events"), VacuumOptions(), context, run, state),
            planned,
            sql,
        )
    remaining = keys_of(s3, lake["bucket"])
    assert set(JUNK).isdisjoint(remaining)  # still garbage: deleted
    assert run.deleted_files == len(JUNK) < len(planned_paths) == run.planned_files
    assert run.warnings and "live again" in run.warnings[0]
    assert rows_at(spark, lake["uri"]) == restored_count  # nothing live was lost


def _planned_in_lake(spark, lake):
    """The lake table's snapshot, its slice, Delta's dry run SQL on it (the slice's view must stay
    registered while the SQL runs: the caller's ``with``) and the checked plan's details."""
    from core.tables import read_inventory
    from tests.support.planner import slice_of
    from vacuum.plan import delta_inventory, temporary_view
    from vacuum.snapshot import load_table_state

    state, _ = load_table_state(spark, lake["uri"])
    frame = slice_of(read_inventory(spark, lake["inventory"]), StorageLocation.parse(lake["uri"]), state)
    return state, frame, temporary_view(delta_inventory(frame))


def _batch_run(planned, name: str = "events"):
    from vacuum.results import TableRun
    from vacuum.runner import _summarise

    run = TableRun(name, "", "failed", "inventory", False, "batch")
    _summarise(planned, run)
    run.deleted_files = run.deleted_bytes = run.remaining_files = 0
    return run


def _events_context(spark, run_id: str, run, state, **options):  # type: ignore[no-untyped-def]
    """The table ``events``' context in a run of its own, ``run_id``, with ``options``."""
    from vacuum.context import RunContext, TableContext, VacuumOptions

    return TableContext(
        spark,
        RegisteredTableStub("events"),
        VacuumOptions(**options),
        RunContext(run_id, None, ()),
        run,
        state,
    )


def test_setting_aside_what_is_gone_leaves_only_the_present_candidates_cached(spark, s3, lake):
    """Delta's candidates, read from their cache as the plan reads them, are checked against S3:
    those deleted by someone else since the inventory are counted as gone, and after the check
    Spark's cache holds the present candidates alone (the deletes' memory), not the candidates'
    own cache, nor the gone ones'."""
    from vacuum.deletion import set_aside_gone
    from vacuum.plan import candidate_details, dry_run_candidates, vacuum_sql
    from vacuum.tuning import is_read_from_cache, read_from_cache

    cache = spark._jsparkSession.sharedState().cacheManager()
    cache.clearCache()
    state, frame, view = _planned_in_lake(spark, lake)
    with view as name:
        sql = vacuum_sql(state, mode="inventory", retention_hours=None, dry_run=True, inventory_view=name)
        planned = candidate_details(dry_run_candidates(spark, sql), frame, state).persist()
        candidates = read_from_cache(planned)
        assert is_read_from_cache(candidates)
        keys = {r["key"] for r in candidates.select("key").collect()}
        assert set(JUNK) <= keys
        s3.delete_object(Bucket=lake["bucket"], Key=JUNK[0])  # someone else deleted it meanwhile
        run = _batch_run(candidates)
        present = set_aside_gone(_events_context(spark, "gone", run, state), candidates, None)
        try:
            assert {r["key"] for r in present.collect()} == keys - {JUNK[0]}
            assert run.already_gone_files == 1
            assert not planned.storageLevel.useMemory and not planned.storageLevel.useDisk
            assert present.storageLevel.useMemory
            cached = [str(c.plan().toString()) for c in _scala_list(cache.cachedData())]
            assert len(cached) == 1  # the present candidates' plan, nothing else
        finally:
            present.unpersist()
    assert cache.isEmpty()


def _scala_list(sequence):  # type: ignore[no-untyped-def]  # a py4j Scala Seq
    return [sequence.apply(index) for index in range(int(sequence.size()))]


def test_a_batch_delete_sends_nothing_once_its_run_stopped_and_one_cut_short_counts_what_is_gone(
    spark, s3, lake, monkeypatch
):
    """A run that stopped (an interrupt) before a table's first DeleteObjects request: the table is
    refused there and every key stays, its counts a true 0. A deletes' job that fails as a whole
    after some of its requests (cancelled by an interrupt) leaves no outcomes: the files gone after
    it are counted and ledgered (without a marker's id), the rest counted as remaining; when whether
    its tasks had ended cannot be checked, how many remain is unknown."""
    from core.errors import VacuumRefused
    from vacuum import deletion
    from vacuum.context import RunContext, TableContext, VacuumOptions
    from vacuum.deletion import delete_batch
    from vacuum.plan import candidate_details, dry_run_candidates, vacuum_sql

    ledger = f"s3://{lake['inventory_bucket']}/tables/ledger"
    before = keys_of(s3, lake["bucket"])
    state, frame, view_of_slice = _planned_in_lake(spark, lake)
    with view_of_slice as view:
        sql = vacuum_sql(state, mode="inventory", retention_hours=None, dry_run=True, inventory_view=view)
        planned = candidate_details(dry_run_candidates(spark, sql), frame, state).cache()
        stopped = _batch_run(planned)
        context = RunContext("test", None, ())
        context.stopped.set()
        table = TableContext(spark, RegisteredTableStub("events"), VacuumOptions(), context, stopped, state)
        with pytest.raises(VacuumRefused, match="before its first delete request"):
            delete_batch(table, planned, sql)
        assert keys_of(s3, lake["bucket"]) == before and stopped.planned_files >= len(JUNK)
        assert (stopped.deleted_files, stopped.delete_requests, table.delete_started_at) == (0, 0, None)

        def cancelled(_candidates, **_options):  # one request went out before the job was cancelled
            s3.delete_objects(Bucket=lake["bucket"], Delete={"Objects": [{"Key": JUNK[0]}]})
            raise RuntimeError("Job 12 cancelled part of cancel all jobs")

        monkeypatch.setattr(deletion, "delete_in_batches", cancelled)
        cut_short = _batch_run(planned)
        table = _events_context(spark, "cut-short", cut_short, state, ledger_table=ledger)
        with pytest.raises(RuntimeError, match="cancelled"):
            delete_batch(table, planned, sql)
        # when whether the job's tasks had ended cannot be checked, how many remain is not known
        # (a task may have deleted after the check), and the job's own error stays the table's

        def tracker_gone(*_args):
            raise RuntimeError("the status tracker is gone")

        monkeypatch.setattr(deletion, "_tasks_ended", tracker_gone)
        unchecked = _batch_run(planned)
        unchecked_table = _events_context(spark, "unchecked", unchecked, state)
        with pytest.raises(RuntimeError, match="cancelled"):
            delete_batch(unchecked_table, planned, sql)
        planned.unpersist()
    assert (cut_short.deleted_files, cut_short.remaining_files) == (1, cut_short.planned_files - 1)
    assert cut_short.deleted_bytes == 1  # put() writes one byte a key
    assert cut_short.delete_requests is None  # sent by the job, which did not return its count
    assert table.delete_started_at is not None
    assert "ended before its outcomes were read" in cut_short.warnings[-1]
    rows = spark.read.format("delta").load(ledger).collect()
    assert [(r["key"], r["deleted_with"], r["delete_marker_version_id"]) for r in rows] == [
        (JUNK[0], "batch", None)
    ]
    assert rows[0]["delete_started_at"] is not None and rows[0]["run_id"] == "cut-short"
    assert keys_of(s3, lake["bucket"]) == before - {JUNK[0]}
    assert (unchecked.deleted_files, unchecked.remaining_files) == (1, None)
    assert "whether all of its tasks had ended could not be checked" in unchecked.warnings[-1]


@pytest.mark.slow
def test_a_batch_delete_cancelled_while_its_requests_run_ledgers_every_file_it_deleted(
    spark, s3, s3_server, lake
):
    """The deletes' job cancelled (as an interrupt cancels it) while S3 still answers its requests:
    the table fails with its counts measured, and the ledger holds exactly the files that are gone."""
    from testing.local_s3 import Faults
    from vacuum.context import RunContext, TableContext, VacuumOptions
    from vacuum.deletion import delete_batch
    from vacuum.plan import candidate_details, dry_run_candidates, vacuum_sql

    server = s3_server
    rows_before = rows_at(spark, lake["uri"])
    ledger = f"s3://{lake['inventory_bucket']}/tables/ledger"
    before = keys_of(s3, lake["bucket"])
    state, frame, view_of_slice = _planned_in_lake(spark, lake)
    errors: list[BaseException] = []
    with view_of_slice as view:
        sql = vacuum_sql(state, mode="inventory", retention_hours=None, dry_run=True, inventory_view=view)
        planned = candidate_details(dry_run_candidates(spark, sql), frame, state).cache()
        planned_keys = {r["key"] for r in planned.select("key").collect()}
        run = _batch_run(planned)
        table = TableContext(
            spark,
            RegisteredTableStub("events"),
            VacuumOptions(ledger_table=ledger),
            RunContext("cancelled", None, ()),
            run,
            state,
        )

        def deletes() -> None:
            spark.sparkContext.setJobGroup("cancelled deletes", "a test's deletes")
            try:
                delete_batch(table, planned, sql)
            except BaseException as error:  # noqa: BLE001  # the test asserts on it
                errors.append(error)

        server.reset_counts()
        server.inject(Faults(latency_ms=1000, bucket=lake["bucket"], operations=frozenset({"DeleteObjects"})))
        try:
            thread = threading.Thread(target=deletes)
            thread.start()
            deadline = time.monotonic() + 60
            while not server.counts(lake["bucket"])["DeleteObjects"] and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server.counts(lake["bucket"])["DeleteObjects"], "no DeleteObjects request was sent"
            spark.sparkContext.cancelJobGroup("cancelled deletes")
            thread.join(120)
        finally:
            server.clear_faults()
        planned.unpersist()
    assert errors and "cancel" in str(errors[0]).lower()
    gone = before - keys_of(s3, lake["bucket"])
    assert gone and gone <= planned_keys and rows_at(spark, lake["uri"]) == rows_before
    ledgered = {r["key"] for r in spark.read.format("delta").load(ledger).collect()}
    assert ledgered == gone
    assert (run.deleted_files, run.remaining_files) == (len(gone), run.planned_files - len(gone))


@pytest.mark.slow
def test_batch_delete_plans_again_only_after_a_commit(spark, s3, lake, monkeypatch):
    """With the log as the plan's snapshot saw it, a second plan would name a superset: it is not
    made. The newest commit file rewritten by another writer (same version, without one of its
    removes) makes it, and the file that is live again is kept."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends
    from pyspark.sql import functions as F

    from tests.support.planner import slice_of
    from vacuum import deletion, runner
    from vacuum.context import RunContext, TableContext, VacuumOptions
    from vacuum.plan import candidate_details, delta_inventory, dry_run_candidates, temporary_view, vacuum_sql
    from vacuum.results import TableRun
    from vacuum.snapshot import latest_commit, load_table_state

    location = StorageLocation.parse(lake["uri"])
    state, _ = load_table_state(spark, lake["uri"])
    assert state.newest_commit is not None and latest_commit(spark, lake["uri"]) == state.newest_commit
    assert not state.newest_commit.endswith("etag=")  # S3A's listing gives the commit file's ETag
    plans: list[str] = []

    def counted(session, sql):
        plans.append(sql)
        return dry_run_candidates(session, sql)

    monkeypatch.setattr(deletion, "dry_run_candidates", counted)
    frame = slice_of(runner.read_inventory(spark, lake["inventory"]), location, state)
    context = RunContext("test", None, ())
    bucket = lake["bucket"]
    with temporary_view(delta_inventory(frame)) as view:
        sql = vacuum_sql(state, mode="inventory", retention_hours=None, dry_run=True, inventory_view=view)
        planned = candidate_details(dry_run_candidates(spark, sql), frame, state)
        one = planned.where(F.col("key") == F.lit(JUNK[1]))
        run = TableRun("events", lake["uri"], "failed", "inventory", False, "batch")
        runner._summarise(one, run)
        deletion.delete_batch(
            TableContext(spark, RegisteredTableStub("events"), VacuumOptions(), context, run, state), one, sql
        )
        assert plans == [] and run.deleted_files == run.planned_files == 1 and not run.warnings

        # another writer (no commit lock) writes the newest version again, one remove fewer, in
        # the same second as the first (S3's LastModified counts seconds): the commit time is the same
        log_key = f"events/_delta_log/{state.version:020d}.json"
        lines = s3.get_object(Bucket=bucket, Key=log_key)["Body"].read().decode().splitlines()
        revived = next(json.loads(line)["remove"]["path"] for line in lines if '"remove"' in line)
        kept = [line for line in lines if json.loads(line).get("remove", {}).get("path") != revived]
        stored = s3_backends[DEFAULT_ACCOUNT_ID]["global"].buckets[bucket].keys
        written_at = stored[log_key].last_modified
        s3.put_object(Bucket=bucket, Key=log_key, Body=("\n".join(kept) + "\n").encode())
        stored[log_key].last_modified = written_at
        s3.delete_object(Bucket=bucket, Key=f"events/_delta_log/{state.version:020d}.crc")
        newest = latest_commit(spark, lake["uri"])
        assert newest != state.newest_commit
        assert newest.split(" file=")[0] == state.newest_commit.split(" file=")[0]  # same version and time
        rest = planned.where(F.col("key") != F.lit(JUNK[1]))
        run = TableRun("events", lake["uri"], "failed", "inventory", False, "batch")
        runner._summarise(rest, run)
        assert f"events/{revived}" in {r["key"] for r in rest.collect()}
        deletion.delete_batch(
            TableContext(spark, RegisteredTableStub("events"), VacuumOptions(), context, run, state),
            rest,
            sql,
        )
        assert plans == [sql]
        assert run.deleted_files == run.planned_files - 1 and "not in the plan made again" in run.warnings[0]
    remaining = keys_of(s3, bucket)
    assert f"events/{revived}" in remaining  # live again: kept
    assert set(JUNK).isdisjoint(remaining)


class RegisteredTableStub:
    def __init__(self, name: str) -> None:
        self.name = name


def test_gates_refuse_with_reasons_and_other_tables_still_run(spark, s3, lake, bucket_factory, caplog):
    tmp = lake["tmp"]
    other = bucket_factory("later")
    late_uri = make_table(spark, lake["bucket"], "created_after_inventory")
    never_inventoried = make_table(spark, other, "t")
    put(s3, lake["bucket"], "not_delta/file.parquet")
    registry = registry_file(
        tmp,
        {
            "events": lake["uri"],
            "late": late_uri,
            "other_bucket": never_inventoried,
            "not_delta": f"s3://{lake['bucket']}/not_delta",
            "sibling": f"s3://{lake['bucket']}/events_v2",  # a file, no log, a name starting like events
        },
    )
    with caplog.at_level(logging.INFO, logger="inventory_vacuum"):
        code, result = cli_json(
            "vacuum", "--inventory-table", lake["inventory"], "--tables", registry, "--dry-run"
        )
    assert code == 1
    # events and its sibling, the tables of the run with objects in the inventory, read their rows
    # together into Spark's cache
    assert f"the rows of 2 small tables of bucket {lake['bucket']}" in caplog.text
    by_name = {t["name"]: t for t in result["tables"]}
    assert by_name["events"]["status"] == "ok"
    assert by_name["late"]["status"] == "refused" and "no objects under" in by_name["late"]["reason"]
    assert (
        by_name["other_bucket"]["status"] == "refused"
        and f"no rows for bucket {other}" in by_name["other_bucket"]["reason"]
    )
    for name in ("not_delta", "sibling"):
        assert by_name[name]["status"] == "refused" and "not a Delta table" in by_name[name]["reason"], name

    def one(*flags: str) -> dict:
        code, data = cli_json(
            "vacuum",
            "--inventory-table",
            lake["inventory"],
            "--tables",
            registry,
            "--table",
            "events",
            "--dry-run",
            *flags,
        )
        assert code == (0 if data["tables"][0]["status"] == "ok" else 1)
        return data["tables"][0]

    stale = one("--max-inventory-age-hours", "0.0001")
    assert stale["status"] == "refused" and "older than --max-inventory-age-hours" in stale["reason"]
    longer = one("--retain-hours", "100")
    assert longer["status"] == "refused" and "longer than the table's" in longer["reason"]

    # a partial delivery: the inventory misses live files of the table
    spark.sql(f"DELETE FROM delta.`{lake['inventory']}` WHERE key LIKE 'events/day=2024-01-02/%'")
    partial = one()
    assert partial["status"] == "refused" and "does not describe this table" in partial["reason"]


@pytest.mark.slow
def test_retention_shorter_than_the_table_needs_explicit_consent(spark, s3, bucket_factory, tmp_path):
    source, inventory_bucket = bucket_factory("lake"), bucket_factory("inv")
    uri = make_table(spark, source, retention="interval 7 days")
    inventory = f"s3://{inventory_bucket}/tables/inventory"
    take_inventory(s3, source, inventory_bucket, inventory)
    registry = registry_file(tmp_path, {"events": uri})
    base = ["vacuum", "--inventory-table", inventory, "--tables", registry, "--dry-run"]
    code, refused = cli_json(*base, "--retain-hours", "1")
    assert code == 1 and "pass --allow-unsafe-retention" in refused["tables"][0]["reason"]
    code, allowed = cli_json(*base, "--retain-hours", "0", "--allow-unsafe-retention")
    assert code == 0, allowed["tables"][0]["reason"]
    assert allowed["tables"][0]["retention_hours_effective"] == 0
    overwritten = (
        spark.read.format("delta").option("versionAsOf", 1).load(uri).where("day = '2024-01-01'").inputFiles()
    )
    assert (
        allowed["tables"][0]["planned_files"] == len(overwritten) > 0
    )  # removed just now, retained by default
    code, default = cli_json(*base)
    assert (
        default["tables"][0]["retention_hours_effective"] == 168
        and default["tables"][0]["planned_files"] == 0
    )
    assert spark.conf.get("spark.databricks.delta.retentionDurationCheck.enabled") == "true"  # restored


def test_versioned_bucket_is_refused_unless_allowed(spark, s3, lake):
    s3.put_bucket_versioning(Bucket=lake["bucket"], VersioningConfiguration={"Status": "Enabled"})
    registry = registry_file(lake["tmp"], {"events": lake["uri"]})
    base = ["vacuum", "--inventory-table", lake["inventory"], "--tables", registry, "--dry-run"]
    code, refused = cli_json(*base)
    assert code == 1 and "versioning Enabled" in refused["tables"][0]["reason"]
    code, allowed = cli_json(*base, "--allow-versioned")
    assert code == 0 and "delete markers" in allowed["tables"][0]["warnings"][0]


@pytest.mark.slow
def test_report_candidates_and_history(spark, s3, lake):
    registry = registry_file(lake["tmp"], {"events": lake["uri"]})
    report, candidates = lake["tmp"] / "report.json", lake["tmp"] / "candidates.csv"
    code, out = cli(
        "vacuum",
        "--inventory-table",
        lake["inventory"],
        "--tables",
        registry,
        "--dry-run",
        "--report",
        str(report),
        "--candidates",
        str(candidates),
    )
    assert code == 0
    assert "would delete" in out and "day=2024-01-01" in out  # the human summary, per partition
    data = json.loads(report.read_text())
    [run] = data["tables"]
    assert set(run) >= {
        "name",
        "path",
        "status",
        "mode",
        "dry_run",
        "retention_hours_effective",
        "inventory_taken_at",
        "planned_files",
        "planned_bytes",
        "deleted_files",
        "deleted_bytes",
        "remaining_files",
        "kept",
        "nested_tables",
        "delete_requests",
        "seconds",
        "reason",
    }
    with candidates.open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == run["planned_files"] and {r["table"] for r in rows} == {"events"}
    assert {f"events/{p}" for p in ("day=2024-01-01/orphan.parquet", "orphan-at-root.parquet")} <= {
        r["path"].split(f"{lake['bucket']}/", 1)[1] for r in rows
    }
    history = spark.read.format("delta").load(f"s3://{lake['inventory_bucket']}/tables/vacuum_runs").collect()
    assert [(h["table"], h["status"], h["dry_run"], h["planned_files"]) for h in history] == [
        ("events", "ok", True, run["planned_files"])
    ]
    assert history[0]["coverage"] == 1.0 and history[0]["inventory_taken_at"] is not None


@pytest.mark.slow
def test_writer_committing_during_the_vacuum_loses_nothing(spark, s3, lake):
    registry = registry_file(lake["tmp"], {"events": lake["uri"]})
    stop = threading.Event()
    appended: list[int] = []

    def writer() -> None:
        batch = 0
        while not stop.is_set() and batch < 3:
            spark.createDataFrame([(1000 + batch, "2024-01-03")], "id bigint, day string").write.format(
                "delta"
            ).mode("append").save(lake["uri"])
            appended.append(batch)
            batch += 1

    thread = threading.Thread(target=writer)
    thread.start()
    code, result = cli_json(
        "vacuum", "--inventory-table", lake["inventory"], "--tables", registry, "--delete-with", "batch"
    )
    stop.set()
    thread.join()
    assert code == 0, result["tables"][0]["reason"]
    assert appended
    assert rows_at(spark, lake["uri"]) == 10 + len(appended)
    missing = referenced_keys(spark, lake["uri"]) - keys_of(s3, lake["bucket"])
    assert not missing


def test_unknown_table_is_a_usage_error_before_anything_runs(tmp_path, capsys):
    registry = registry_file(tmp_path, {"events": "s3://lake/events"})
    code, out = cli(
        "vacuum", "--inventory-table", "s3://inv/inventory", "--tables", registry, "--table", "nope"
    )
    assert code == 2 and out == ""
    assert "table 'nope' is not registered" in capsys.readouterr().err


@pytest.mark.slow
def test_list_and_lite_modes_for_comparison(spark, s3, lake):
    registry = registry_file(lake["tmp"], {"events": lake["uri"]})
    base = [
        "vacuum",
        "--inventory-table",
        lake["inventory"],
        "--tables",
        registry,
        "--dry-run",
        "--candidates",
    ]

    def candidates(mode: str) -> set[str]:
        out = lake["tmp"] / f"{mode}.parquet"
        code, result = cli_json(*base, str(out), "--mode", mode)
        assert code == 0, result["tables"][0]["reason"]
        assert result["tables"][0]["mode"] == mode
        import pyarrow.parquet as pq

        return {p.split("://", 1)[1] for p in pq.read_table(out).column("path").to_pylist()}

    inventory_mode, list_mode, lite_mode = candidates("inventory"), candidates("list"), candidates("lite")
    assert inventory_mode == list_mode  # fresh, complete inventory: the same answer as listing S3
    overwritten = {
        f.split("://", 1)[1]
        for f in spark.read.format("delta")
        .option("versionAsOf", 1)
        .load(lake["uri"])
        .where("day = '2024-01-01'")
        .inputFiles()
    }
    assert lite_mode == overwritten  # LITE reads removed files from the log: it never sees junk
    assert {f"{lake['bucket']}/{k}" for k in JUNK} <= list_mode - lite_mode


def test_missing_inventory_table_is_a_one_line_error(spark, tmp_path, bucket, capsys):
    registry = registry_file(tmp_path, {"events": f"s3://{bucket}/events"})
    code, out = cli("vacuum", "--inventory-table", f"s3://{bucket}/no/such/inventory", "--tables", registry)
    assert code == 2 and out == ""
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert (
        error.startswith("inventory-vacuum vacuum: error: inventory table s3://")
        and "cannot be read" in error
    )


@pytest.mark.slow
def test_flat_mode_plans_like_inventory_mode_from_one_flat_listing(spark, s3, s3_server, lake):
    """``--mode flat``: one paginated ListObjectsV2 of the table prefix is the inventory."""
    import pyarrow.parquet as pq

    registry = registry_file(lake["tmp"], {"events": lake["uri"]})
    plans = {}
    for mode in ("inventory", "flat"):
        out = lake["tmp"] / f"{mode}.parquet"
        s3_server.reset_counts()
        code, result = cli_json(
            "vacuum",
            "--inventory-table",
            lake["inventory"],
            "--tables",
            registry,
            "--dry-run",
            "--mode",
            mode,
            "--candidates",
            str(out),
        )
        assert code == 0, result["tables"][0]["reason"]
        plans[mode] = set(pq.read_table(out).column("path").to_pylist())
        if mode == "flat":
            lists = s3_server.counts(lake["bucket"])
            listings = s3_server.listings(lake["bucket"])
    assert plans["flat"] == plans["inventory"] and plans["flat"]
    # the flat listing: ceil(objects / 1000) pages of the table's prefix, with no delimiter
    objects = len(keys_of(s3, lake["bucket"], "events/"))
    assert 1 <= listings[("events/", "")] <= -(-objects // 1000)
    # every other LIST is Delta's, of the _delta_log; none lists the data under the table
    others = {listed: n for listed, n in listings.items() if listed != ("events/", "")}
    assert all(p.startswith("events/_delta_log/") for p, _ in others), others
    assert lists["ListObjects"] == 0


@pytest.mark.slow
def test_batch_delete_of_a_listing_plan_reports_unknown_bytes_not_zero(spark, s3, lake):
    """A listing plan knows no sizes (only the Python API lets it delete with batch): the bytes
    deleted are unknown (null), never a measured-looking 0, and the files are still counted."""
    from core.registry import load_registry
    from vacuum.runner import VacuumOptions, vacuum_tables

    registry = load_registry(registry_file(lake["tmp"], {"events": lake["uri"]}))
    ledger = f"s3://{lake['inventory_bucket']}/tables/ledger"
    options = VacuumOptions(mode="list", delete_with="batch", ledger_table=ledger)
    result = vacuum_tables(spark, registry.select(["events"]), options, "r-list")
    run = result.tables[0]
    assert run.status == "ok", run.reason
    assert run.deleted_files == run.planned_files > 0
    assert run.planned_bytes is None and run.deleted_bytes is None
    assert keys_of(s3, lake["bucket"]) & set(JUNK) == set()


def _retain_is_ignored(spark) -> bool:
    """Delta 4.1 on ignores ``RETAIN n HOURS`` unless n is 0 (its internal setting's default)."""
    from core.session import jvm_delta_version, version_tuple

    return version_tuple(jvm_delta_version(spark))[:2] >= (4, 1)


@pytest.mark.parametrize(
    "table_retention, table_hours",
    # the 36-hour one on every line: RETAIN as each Delta applies it (honoured before 4.1, ignored after)
    [("interval 2 days", 48), pytest.param("interval 36 hours", 36, marks=pytest.mark.line_sensitive)],
)
@pytest.mark.slow
def test_retention_reported_is_the_one_delta_applies(
    spark, s3, bucket_factory, tmp_path, table_retention, table_hours
):
    """On every line: the table's retention (in days or hours) by default, an equal one, a longer
    (refused), a shorter (refused without consent; with it, honoured where Delta honours RETAIN,
    refused with the two ways out where Delta ignores it), and 0 hours. What Delta planned shows
    which retention it applied: two orphans backdated in the inventory, 2 and 40 hours old."""
    from vacuum.gates import RETENTION_WINDOW_IGNORE

    source, inventory_bucket = bucket_factory("lake"), bucket_factory("inv")
    uri = make_table(spark, source, retention=table_retention)
    young, old = "events/day=2024-01-01/orphan-2h.parquet", "events/day=2024-01-02/orphan-40h.parquet"
    put(s3, source, young, old)
    inventory = f"s3://{inventory_bucket}/tables/inventory"
    take_inventory(s3, source, inventory_bucket, inventory)
    now_ms = int(time.time() * 1000)
    for key, hours in ((young, 2), (old, 40)):
        spark.sql(
            f"UPDATE delta.`{inventory}` SET modificationTime = {now_ms - hours * 3_600_000} WHERE key = '{key}'"
        )
    registry = registry_file(tmp_path, {"events": uri})

    def table(*flags: str) -> tuple[int, dict]:
        code, data = cli_json(
            "vacuum", "--inventory-table", inventory, "--tables", registry, "--dry-run", *flags
        )
        return code, data["tables"][0]

    code, default = table()
    assert code == 0 and default["retention_hours_effective"] == table_hours
    assert default["planned_files"] == (1 if table_hours < 40 else 0)  # the 40-hour orphan, past 36h
    code, equal = table("--retain-hours", str(table_hours))
    assert code == 0 and equal["retention_hours_effective"] == table_hours
    assert equal["planned_files"] == default["planned_files"]
    code, longer = table("--retain-hours", str(table_hours + 1))
    assert code == 1 and "longer than the table's" in longer["reason"]
    code, shorter = table("--retain-hours", "1")
    assert code == 1 and "pass --allow-unsafe-retention" in shorter["reason"]

    code, unsafe = table("--retain-hours", "1", "--allow-unsafe-retention")
    if _retain_is_ignored(spark):
        assert code == 1 and unsafe["status"] == "refused"
        assert "ignores RETAIN 1 HOURS" in unsafe["reason"]
        assert (
            "delta.deletedFileRetentionDuration" in unsafe["reason"]
            and RETENTION_WINDOW_IGNORE in unsafe["reason"]
        )
        # with Delta's setting turned off (spark-submit --conf), RETAIN is honoured again
        conf = spark._jsc.sc().conf()
        conf.set(RETENTION_WINDOW_IGNORE, "false")
        try:
            code, unsafe = table("--retain-hours", "1", "--allow-unsafe-retention")
        finally:
            conf.remove(RETENTION_WINDOW_IGNORE)
    assert code == 0, unsafe["reason"]
    assert unsafe["retention_hours_effective"] == 1 and unsafe["planned_files"] == 2  # both orphans

    overwritten = (
        spark.read.format("delta").option("versionAsOf", 1).load(uri).where("day = '2024-01-01'").inputFiles()
    )
    code, zero = table("--retain-hours", "0", "--allow-unsafe-retention")
    assert code == 0 and zero["retention_hours_effective"] == 0
    assert zero["planned_files"] == 2 + len(overwritten)
    assert spark.conf.get("spark.databricks.delta.retentionDurationCheck.enabled") == "true"


FOLDER_MARKERS_KEPT = [
    "events/abc/",  # another object below it
    "events/abc/def/",  # the same, one level down
    "events/day=2024-01-01/",  # a partition directory of live files
    "events/_tmp/",  # hidden
    "events/young/",  # younger than the retention
    "events/named/",  # a file of its directory's name beside it: Delta's delete by path takes the file
]


@pytest.mark.parametrize("delete_with", ["batch", "delta"])
@pytest.mark.slow
def test_empty_folder_markers_past_the_retention_go_as_delta_would_delete_them(
    spark, s3, bucket_factory, tmp_path, delete_with
):
    """Delta's ``DeltaVacuumSuite`` "deleting directories", on S3: ``abc/def/`` holds files,
    ``ghi/`` is an empty directory, a zero-byte folder marker; Delta removes ``ghi``. Here the
    marker goes when it is past the retention, under the table, with nothing below it, and not a
    directory of a live file, nor a file's name; every other marker stays, and so do a ``/`` key
    with bytes and the file named like a marker's directory. Only the batch delete deletes
    markers, by key: Delta deletes by path, and S3A would take a file of the directory's name
    for it (and write a parent's marker after)."""
    source, inventory_bucket = bucket_factory("lake"), bucket_factory("inv")
    uri = make_table(spark, source, retention="interval 1 hours")
    put(s3, source, "events/ghi/", "events/deep/er/", *FOLDER_MARKERS_KEPT, body=b"")
    put(s3, source, "events/abc/def/file1.txt", "events/named", "events/not-a-marker/")
    inventory = f"s3://{inventory_bucket}/tables/inventory"
    take_inventory(s3, source, inventory_bucket, inventory)
    two_hours_ago = int(time.time() * 1000) - 2 * 3_600_000
    spark.sql(
        f"UPDATE delta.`{inventory}` SET modificationTime = {two_hours_ago} "
        "WHERE key LIKE 'events/%' AND key NOT LIKE 'events/young/%' AND key NOT LIKE 'events/day=%/part-%'"
    )
    registry = registry_file(tmp_path, {"events": uri})
    before = keys_of(s3, source)
    rows_before = rows_at(spark, uri)
    ledger = f"s3://{inventory_bucket}/tables/vacuum_deletions"
    base = ["vacuum", "--inventory-table", inventory, "--tables", registry, "--delete-with", delete_with]

    candidates = tmp_path / "candidates.csv"
    code, dry = cli_json(*base, "--dry-run", "--candidates", str(candidates))
    assert code == 0, dry["tables"][0]["reason"]
    with candidates.open() as handle:
        planned = {row["path"] for row in csv.DictReader(handle)}
    markers = {"events/ghi/", "events/deep/er/"} if delete_with == "batch" else set()
    expected = {"events/abc/def/file1.txt", *markers}
    # a marker is reported by its key's path, with its "/": never taken for a file of that name
    assert planned == {f"s3a://{source}/{key}" for key in expected}
    if delete_with == "delta":
        # the empty markers, the young one among them; the others are kept for what lies below
        assert dry["tables"][0]["kept"]["folder_marker"] == 3

    code, result = cli_json(*base, "--ledger-table", ledger)
    assert code == 0, result["tables"][0]["reason"]
    after = keys_of(s3, source)
    assert before - after == expected
    # and no marker written back (Delta's own VACUUM writes _delta_log/_last_vacuum_info)
    assert {key for key in after - before if "/_delta_log/" not in key} == set()
    assert set(FOLDER_MARKERS_KEPT) | {"events/not-a-marker/", "events/named"} <= after
    assert result["tables"][0]["deleted_files"] == len(expected)
    ledgered = {r["path"] for r in spark.read.format("delta").load(ledger).select("path").collect()}
    assert ledgered == planned
    assert rows_at(spark, uri) == rows_before


def test_an_interrupted_run_records_every_table_and_exits_130(spark, s3, lake, monkeypatch, capsys):
    """Ctrl-C while a table runs, twice: that table deletes nothing (refused before its gates), the
    tables not yet begun never begin, and every table's outcome still goes to the history, the
    report and the output, with one line saying what the run did, and exit code 130."""
    import os
    import signal

    from core.tables import ToolTables
    from vacuum import runner
    from vacuum.interrupt import NOT_BEGUN

    second = make_table(spark, lake["bucket"], "second")
    registry = registry_file(lake["tmp"], {"events": lake["uri"], "second": second})
    report = lake["tmp"] / "report.json"
    before = keys_of(s3, lake["bucket"])
    loaded = runner.load_table_state

    def interrupted_while_loading(session, uri):  # Ctrl-C reaches the main thread meanwhile
        for _ in range(2):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.5)
        return loaded(session, uri)

    monkeypatch.setattr(runner, "load_table_state", interrupted_while_loading)
    try:
        code, text = cli(
            "vacuum", "--inventory-table", lake["inventory"], "--tables", registry,
            "--delete-with", "batch", "--parallel", "1", "--report", str(report), "--json",
        )  # fmt: skip
    except KeyboardInterrupt:
        pytest.fail("the interrupt escaped the command")
    history = ToolTables.beside(lake["inventory"], vacuum_runs=None, vacuum_deletions=None).vacuum_runs
    assert code == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "inventory-vacuum vacuum: error: interrupted: 1 of the run's 2 table(s) had begun; nothing "
        f"deleted; every table's outcome is in the history {history}"
    )
    shown, written = json.loads(text), json.loads(report.read_text())
    assert shown == written
    outcomes = {t["name"]: (t["status"], t["reason"]) for t in written["tables"]}
    assert outcomes == {
        "events": ("refused", "the run stopped (interrupted or failed) before its gates: nothing deleted"),
        "second": ("refused", NOT_BEGUN),
    }
    rows = spark.read.format("delta").load(history).where(f"run_id = '{written['run_id']}'").collect()
    assert sorted((r["table"], r["status"]) for r in rows) == [("events", "refused"), ("second", "refused")]
    assert keys_of(s3, lake["bucket"]) == before


def test_an_interrupt_after_the_tables_ended_is_noted_and_the_history_still_written(spark, lake, monkeypatch):
    """Ctrl-C while the run writes its history, the main thread inside a call into the JVM: the
    interrupt is only noted, the history is written, and the run then ends as interrupted, saying
    so."""
    import os
    import signal

    from core.errors import RunInterrupted
    from core.registry import load_registry
    from vacuum import runner
    from vacuum.context import VacuumOptions

    history = f"s3://{lake['inventory_bucket']}/tables/late_runs"
    tables = load_registry(registry_file(lake["tmp"], {"events": lake["uri"]})).select([])
    record = runner.record_vacuum_runs

    def recorded_while_interrupted(session, location, run_id, runs):
        os.kill(os.getpid(), signal.SIGINT)
        session._jvm.java.lang.Thread.sleep(1000)  # the handler runs while the JVM answers this
        return record(session, location, run_id, runs)

    monkeypatch.setattr(runner, "record_vacuum_runs", recorded_while_interrupted)
    options = VacuumOptions(inventory_table=lake["inventory"], dry_run=True, history_table=history)
    try:
        with pytest.raises(RunInterrupted) as stopped:
            runner.vacuum_tables(spark, tables, options, run_id="late")
    except KeyboardInterrupt:
        pytest.fail("the interrupt escaped the run")
    assert str(stopped.value) == (
        f"interrupted: 1 of the run's 1 table(s) had begun; nothing deleted; every table's outcome is "
        f"in the history {history}"
    )
    assert [run.status for run in stopped.value.result.tables] == ["ok"]
    rows = spark.read.format("delta").load(history).where("run_id = 'late'").collect()
    assert [(r["table"], r["status"]) for r in rows] == [("events", "ok")]
