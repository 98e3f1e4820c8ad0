"""What differs between Delta releases and must mean the same to the tool on every Spark line:
which retention RETAIN gets, and which tables the installed Delta may vacuum at all."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from core.errors import ConfigError, VacuumRefused
from core.paths import StorageLocation
from tests.support.helpers import keys_of
from vacuum.gates import RETENTION_WINDOW_IGNORE, effective_retention_hours, retain_is_honoured

pytestmark = pytest.mark.line_sensitive


@pytest.mark.spark_independent
def test_retain_is_honoured_before_delta_4_1_and_where_delta_is_told_to():
    assert retain_is_honoured((3, 3, 3), None) and retain_is_honoured((4, 0, 1), "true")
    assert not retain_is_honoured((4, 1, 0), None) and not retain_is_honoured((4, 4, 0), "true")
    assert retain_is_honoured((4, 4, 0), "false") and retain_is_honoured((4, 4, 0), " FALSE ")


@pytest.mark.spark_independent
def test_a_shorter_retention_delta_would_ignore_is_refused_with_the_ways_out():
    ignored = {"allow_unsafe": True, "retain_honoured": False, "delta_version": "4.4.0"}
    with pytest.raises(VacuumRefused) as refusal:
        effective_retention_hours(24, 168, **ignored)
    reason = str(refusal.value)
    assert "Delta 4.4.0 ignores RETAIN 24 HOURS" in reason and "table's 168h" in reason
    assert "'interval 24 hours'" in reason and f"--conf {RETENTION_WINDOW_IGNORE}=false" in reason
    assert effective_retention_hours(0, 168, **ignored) == 0  # 0 is honoured on every line
    assert effective_retention_hours(168, 168, **ignored) == 168  # the table's own: nothing to ignore
    assert effective_retention_hours(None, 36, **ignored) == 36
    assert effective_retention_hours(23.2, 168, allow_unsafe=True, retain_honoured=True) == 24  # rounded up
    # a table retention of 90 minutes: the same asked for, or a shorter one that rounds up past it,
    # is the table's own (no RETAIN), never "longer than the table's"
    assert effective_retention_hours(1.5, 1.5, **ignored) == 1.5
    assert effective_retention_hours(1.2, 1.5, **ignored) == 1.5
    with pytest.raises(VacuumRefused, match="longer than the table's"):
        effective_retention_hours(169, 168, **ignored)
    with pytest.raises(VacuumRefused, match="pass --allow-unsafe-retention"):
        effective_retention_hours(24, 168, allow_unsafe=False, retain_honoured=False, delta_version="4.4.0")


@pytest.mark.spark_independent
def test_only_a_failure_inside_delta_s_coordinated_commits_code_reads_as_coordinated_commits():
    from vacuum.snapshot import _refusal_of_unreadable

    coordinator = (
        "An error occurred while calling z:org.apache.spark.sql.delta.DeltaLog.forTableWithSnapshot.\n"
        ": com.google.common.util.concurrent.ExecutionError: java.lang.NoClassDefFoundError: x/Dynamo\n"
        "\tat com.google.common.cache.LocalCache.get(LocalCache.java:1)\n"
        "Caused by: java.lang.NoClassDefFoundError: x/Dynamo\n"
        "\tat org.apache.spark.sql.delta.coordinatedcommits.CommitCoordinatorProvider$.<clinit>(C.scala:1)\n"
    )
    assert "coordinated commits" in (_refusal_of_unreadable(coordinator) or "")
    # Delta 3.3: DynamoDB's coordinator builder, without the table's coordinator configuration
    builder = (
        ": java.lang.RuntimeException: dynamoDBTableName not found\n"
        "\tat io.delta.dynamodbcommitcoordinator.DynamoDBCommitCoordinatorClientBuilder.build(D.java:54)\n"
    )
    assert "coordinated commits" in (_refusal_of_unreadable(builder) or "")
    s3_error = (
        "An error occurred while calling z:org.apache.spark.sql.delta.DeltaLog.forTableWithSnapshot.\n"
        ": java.io.IOException: connection reset\n"
        "\tat org.apache.hadoop.fs.s3a.S3AFileSystem.open(S3AFileSystem.java:1)\n"
        "\tat org.apache.spark.sql.delta.SnapshotManagement.populateCommitCoordinator(S.scala:1)\n"
    )
    assert _refusal_of_unreadable(s3_error) is None  # a failure, not a refusal
    owned = ": java.lang.IllegalStateException: Path based access is not supported for Catalog-Owned table: t"
    assert "catalog" in (_refusal_of_unreadable(owned) or "")


@pytest.mark.spark_independent
def test_only_the_tested_spark_and_delta_pairs_are_accepted():
    from core.session import SUPPORTED_LINES, check_supported_line

    for spark_minor, delta_minor in SUPPORTED_LINES.items():
        check_supported_line(f"{spark_minor}.1", f"{delta_minor}.0")
    with pytest.raises(ConfigError, match=r"Spark 4\.0\.1 with Delta 4\.4\.0 is not a line"):
        check_supported_line("4.0.1", "4.4.0")
    with pytest.raises(ConfigError, match=r"Spark 4\.1\.0 with Delta 4\.4\.0"):
        check_supported_line("4.1.0", "4.4.0")


def test_the_jars_are_the_ones_built_for_the_installed_spark_minor(spark):
    import pyspark

    from core.session import jvm_delta_version, jvm_packages, minor, version_tuple

    delta_jar, hadoop_aws = jvm_packages()
    delta = jvm_delta_version(spark)  # what the session's JVM runs
    assert delta_jar.endswith(f":{delta}")
    scala = "2.12" if pyspark.__version__.startswith("3.") else "2.13"
    if version_tuple(delta)[:2] >= (4, 1):
        assert delta_jar == f"io.delta:delta-spark_{minor(pyspark.__version__)}_{scala}:{delta}"
    else:
        assert delta_jar == f"io.delta:delta-spark_{scala}:{delta}"
    assert hadoop_aws.startswith("org.apache.hadoop:hadoop-aws:")


def _table_by_hand(root: Path, protocol: dict, configuration: dict | None = None) -> str:
    """A one-file table whose log another writer made: its protocol as given."""
    (root / "_delta_log").mkdir(parents=True)
    (root / "part-0.parquet").write_bytes(b"not read")
    actions = [
        {"protocol": protocol},
        {
            "metaData": {
                "id": "00000000-0000-0000-0000-000000000001",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(
                    {
                        "type": "struct",
                        "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}],
                    }
                ),
                "partitionColumns": [],
                "configuration": configuration or {},
                "createdTime": 1_700_000_000_000,
            }
        },
        {
            "add": {
                "path": "part-0.parquet",
                "partitionValues": {},
                "size": 8,
                "modificationTime": 1_700_000_000_000,
                "dataChange": True,
            }
        },
    ]
    (root / "_delta_log" / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    return f"file://{root}"


# Written by hand: a writer feature no open-source Delta has (seen on a Databricks table), and the
# catalog and commit-coordinator features, whose tables need a catalog or a commit coordinator
# that cannot run here. Each is refused before any plan, naming its cause.
REFUSED_PROTOCOLS = [
    (
        {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["appendOnly", "liquid"]},
        {},
        r"liquid \(in no open-source Delta release up to 4\.4\)",
    ),
    (
        {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["catalogManaged", "vacuumProtocolCheck"],
            "writerFeatures": ["catalogManaged", "inCommitTimestamp", "vacuumProtocolCheck"],
        },
        {"delta.enableInCommitTimestamps": "true"},
        "catalog",
    ),
    (
        {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["coordinatedCommits-preview"]},
        {"delta.coordinatedCommits.commitCoordinator-preview": "dynamodb"},
        "coordinated commits|coordinatedCommits-preview",
    ),
    (
        {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["futureReaderFeature"],
            "writerFeatures": ["futureReaderFeature"],
        },
        {},
        "futureReaderFeature",
    ),
]


@pytest.mark.parametrize("protocol, configuration, cause", REFUSED_PROTOCOLS)
def test_a_table_this_delta_must_not_vacuum_is_refused_before_any_plan(
    spark, tmp_path, protocol, configuration, cause
):
    from core.registry import RegisteredTable
    from vacuum.context import RunContext, VacuumOptions
    from vacuum.runner import vacuum_table

    uri = _table_by_hand(tmp_path / "t", protocol, configuration)
    orphan = tmp_path / "t" / "orphan.parquet"
    orphan.write_bytes(b"garbage")
    table = RegisteredTable(name="t", path=uri, location=StorageLocation.parse(uri), owner="team")
    options = VacuumOptions(mode="list", delete_with="delta", retain_hours=0, allow_unsafe_retention=True)
    run = vacuum_table(spark, table, options, RunContext("test", None, ()))
    assert run.status == "refused", run.reason
    assert run.reason and re.search(cause, run.reason), run.reason
    assert orphan.exists() and (tmp_path / "t" / "part-0.parquet").exists()  # nothing deleted


def test_a_table_with_only_features_this_delta_supports_is_vacuumed(spark, tmp_path):
    """The same hand-made log with a supported writer feature: the check lets it through."""
    from core.registry import RegisteredTable
    from vacuum.context import RunContext, VacuumOptions
    from vacuum.runner import vacuum_table

    uri = _table_by_hand(
        tmp_path / "t", {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["appendOnly"]}
    )
    table = RegisteredTable(name="t", path=uri, location=StorageLocation.parse(uri), owner="team")
    options = VacuumOptions(mode="list", dry_run=True)
    run = vacuum_table(spark, table, options, RunContext("test", None, ()))
    assert run.status == "ok", run.reason


def test_a_delta_spark_whose_jars_cannot_be_had_is_refused_in_one_line(tmp_path):
    """A delta-spark Python package whose jars the Maven registry does not serve (delta-spark
    4.4.1 was one) stops the command with one line naming the jars, exit 2; Ivy's report goes
    to the JVM's log file."""
    import subprocess
    import sys

    script = (
        "import sys, core.session as s\n"
        "s.installed_delta_version = lambda: '0.0.1'\n"
        "from jobs.cli import main\n"
        "sys.exit(main(['fetch-jars']))\n"
    )
    log = tmp_path / "jvm.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK")}
    env["INVENTORY_VACUUM_JVM_LOG"] = str(log)
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600, check=False
    )
    assert completed.returncode == 2, completed.stderr[-2000:]
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1, completed.stderr[-2000:]
    assert "delta-spark" in lines[0] and ":0.0.1" in lines[0] and "cannot be had" in lines[0]
    assert f"Ivy's report is in {log}" in lines[0] and "unresolved dependency" in log.read_text()


def test_a_local_frame_holds_what_a_list_of_its_rows_gives_spark(spark, monkeypatch):
    """The history's, the ledger's and the owner lookups' rows go to Spark as an Arrow table on
    Spark 4 (no Python worker) and as a list on 3.5: the same values either way, in any session
    time zone; a time without a zone (the process's local time, read differently when clocks
    change) goes as a list; the same checks of the values; and Arrow batches of no limit."""
    import time
    from datetime import datetime, timezone

    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType, TimestampType

    from core.session import _arrow_table, local_frame, strings_schema

    schema = StructType(
        [
            StructField("name", StringType()),
            StructField("n", LongType()),
            StructField("x", DoubleType()),
            StructField("at", TimestampType()),
        ]
    )
    aware = [
        ("a/ü key", 2**40, 0.5, datetime(2026, 3, 29, 1, 30, tzinfo=timezone.utc)),
        (None, None, None, None),
    ]
    # the callers' rows, times in UTC, can go as Arrow; a local time goes as a list, at a change of
    # clocks too (02:30 twice on that night in Berlin)
    assert _arrow_table(aware, schema) is not None  # local_frame takes it on Spark 4 only
    local = [("b", 1, 1.0, datetime(2026, 10, 25, 2, 30, fold=1))]
    assert _arrow_table(local, schema) is None
    micros = "name, n, x, unix_micros(at) AS at"
    zone, limit = spark.conf.get("spark.sql.session.timeZone"), "spark.sql.execution.arrow.maxRecordsPerBatch"
    monkeypatch.setenv("TZ", "Europe/Berlin")  # the process's local time, which a naive time is in
    time.tzset()
    try:
        for session_zone in ("UTC", "Australia/Lord_Howe"):
            spark.conf.set("spark.sql.session.timeZone", session_zone)
            for rows in (aware, local):
                frame = local_frame(spark, rows, schema)
                assert frame.schema == schema
                expected = spark.createDataFrame(rows, schema).selectExpr(*micros.split(", ")).collect()
                assert frame.selectExpr(*micros.split(", ")).collect() == expected
        assert local_frame(spark, [], strings_schema("x", "y")).count() == 0
        with pytest.raises(TypeError):  # as createDataFrame refuses it
            local_frame(spark, [("a", 1.5, None, None)], schema)
        spark.conf.set(limit, "0")  # no limit, which PySpark's Arrow path does not take
        only = local_frame(spark, [("p", "q")], strings_schema("x", "y")).collect()
        assert [row.asDict() for row in only] == [{"x": "p", "y": "q"}]
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
        spark.conf.unset(limit)
        monkeypatch.undo()
        time.tzset()


def test_delta_writes_each_commits_checksum_through_the_file_system_api(spark, s3, s3_server, bucket):
    """The session names Spark's FileSystem-based checkpoint file manager, with which Delta writes
    a commit's checksum file: the class loads on this line, every commit through it gets its
    checksum, and no temporary file is left. Through Spark's default (FileContext) the same append
    to the history table made more requests on Spark 4.0 and 4.2 (34 against 22 on 4.2, the first
    append after the table's creation), and on 3.5 wrote no checksum at all."""
    from core.session import CHECKPOINT_FILE_MANAGER, checkpoint_manager
    from core.tables import VACUUM_RUNS_SCHEMA, append_run_rows

    ours = spark.conf.get(CHECKPOINT_FILE_MANAGER)
    assert ours == checkpoint_manager(spark.version)
    history = f"s3://{bucket}/history"

    def append(run_id: str) -> tuple[int, bool]:
        """The requests of one append, and whether its commit got a checksum."""
        s3_server.reset_counts()
        assert append_run_rows(spark, history, VACUUM_RUNS_SCHEMA, run_id, [{"table": "t", "status": "ok"}])
        requests = sum(s3_server.counts(bucket).values())
        version = max(int(k.rsplit("/", 1)[1][:20]) for k in keys_of(s3, bucket, "history/_delta_log/0"))
        return requests, f"history/_delta_log/{version:020d}.crc" in keys_of(
            s3, bucket, "history/_delta_log/"
        )

    assert append("r0")[1]  # the table's creation
    with_file_system, written = append("r1")
    assert written
    default = checkpoint_manager(spark.version, "FileContext")
    spark._jvm.java.lang.Class.forName(default)  # the names hold on this line: this one loads too
    spark.conf.set(CHECKPOINT_FILE_MANAGER, default)
    try:
        with_file_context, written_by_default = append("r2")
    finally:
        spark.conf.set(CHECKPOINT_FILE_MANAGER, ours)
    assert with_file_system < with_file_context or not written_by_default, (
        with_file_system,
        with_file_context,
    )
    assert append("r3")[1]
    assert not [key for key in keys_of(s3, bucket, "history/_delta_log/") if key.endswith(".tmp")]
