"""Shared fixtures: one moto S3 server on 127.0.0.1 and one SparkSession for the whole run.

The S3 server starts first and the AWS variables are set before the JVM starts, so boto3, Spark's
S3A and the Python workers of Spark tasks all reach the same local S3.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import boto3
import pytest

from testing.local_s3 import LocalS3Server
from tests.support.iam import moto_endpoint  # noqa: F401  (the IAM-enforcing moto server of the IAM and Terraform tests)
from tests.support.lines import DEFAULT_SPARK_LINE, on_default_spark_line


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects on the marks
def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    """Tests marked ``spark_independent`` (Terraform, checkov, IAM) run once, on the default Spark
    line: each Spark line's run names its line in INVENTORY_VACUUM_SPARK_LINE, and on another line
    they are skipped."""
    if on_default_spark_line():
        return
    skip = pytest.mark.skip(reason=f"no Spark in it: runs once, on the Spark {DEFAULT_SPARK_LINE} line")
    for item in items:
        if item.get_closest_marker("spark_independent"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[LocalS3Server]:
    """moto's S3 on 127.0.0.1 behind the counting, limit-enforcing layer of testing.local_s3."""
    server = LocalS3Server().start()
    saved = {
        k: os.environ.get(k)
        for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")
    }
    server.use_in_environment()
    yield server
    server.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def s3_endpoint(s3_server: LocalS3Server) -> str:
    return s3_server.endpoint


@pytest.fixture(scope="session")
def spark(s3_endpoint: str):  # type: ignore[no-untyped-def]
    from core.session import build_spark_session

    session = build_spark_session(
        "inventory-vacuum tests",
        {
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.databricks.delta.snapshotPartitions": "2",
            "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
            "spark.databricks.delta.vacuum.parallelDelete.parallelism": "2",
            # one JVM for the whole suite: hundreds of tables' Delta logs and snapshots stay cached
            # (1g ran out of heap near the end of 176 tests); the SQL UI keeps few plans
            "spark.driver.memory": "2g",
            "spark.sql.ui.retainedExecutions": "20",
            # as Spark's own test suites: a query whose generated code does not compile (a method
            # past Java's 64 KB) fails its test, instead of running interpreted with only an ERROR
            # in the log (every table of a nightly run paid for the failed compile)
            "spark.sql.codegen.fallback": "false",
            # the tests read back old versions of tables with retentions of seconds, to show that
            # a vacuum kept their files; Delta 4.1 on refuses time travel past a table's retention
            # by default (the product itself never time-travels a registered table)
            "spark.databricks.delta.vacuum.enforceTimeTravelWithinDeletedFileRetentionDuration": "false",
            # INVENTORY_VACUUM_TEST_CODEGEN=generated: the job's own choice of generated code, so
            # the suite's small tables run as a table of more than 10,000 objects does (else
            # interpreted); the Makefile runs one Spark line's tests that way
            **(
                {"spark.sql.codegen.factoryMode": "FALLBACK"}
                if os.environ.get("INVENTORY_VACUUM_TEST_CODEGEN") == "generated"
                else {}
            ),
        },
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def s3(s3_endpoint: str):  # type: ignore[no-untyped-def]
    from core.s3 import wait_for_client_model

    wait_for_client_model()  # the session's own first client may be being built
    return boto3.client("s3")


@pytest.fixture
def bucket(s3) -> str:  # type: ignore[no-untyped-def]
    """A new, empty bucket for one test."""
    name = f"lake-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


@pytest.fixture
def bucket_factory(s3):  # type: ignore[no-untyped-def]
    def make(prefix: str = "b") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        s3.create_bucket(Bucket=name)
        return name

    return make


@pytest.fixture
def lake_with_junk(spark, s3, bucket_factory, tmp_path):  # type: ignore[no-untyped-def]
    """A table on S3 past its 2-second retention with orphans beside its files, two of them keys
    Hadoop may reject, and its inventory ingested; ``expected`` is what a vacuum must delete."""
    from tests.support.helpers import (
        keys_of,
        put,
        registry_file,
        retention_deadline,
        take_inventory,
        wait_until,
    )
    from tests.support.tables import make_table, referenced_keys

    source, inventory_bucket = bucket_factory("lake"), bucket_factory("inv")
    uri = make_table(spark, source)
    put(s3, source, "events/day=2024-01-01/orphan-1.parquet", "events/day=2024-01-02/orphan-2.parquet")
    put(s3, source, "events/10:00.log", "events/day=2024-01-02/x:y.parquet")  # keys Hadoop may reject
    past_retention = retention_deadline()
    inventory = f"s3://{inventory_bucket}/tables/inventory"
    take_inventory(s3, source, inventory_bucket, inventory)
    wait_until(past_retention)
    live = referenced_keys(spark, uri)
    expected = (
        {
            k
            for k in keys_of(s3, source, "events/")
            if "/_" not in "/" + k[len("events/") :] and "/." not in "/" + k[len("events/") :]
        }
        - live
        - {"events/10:00.log"}
    )
    return {
        "bucket": source,
        "uri": uri,
        "inventory": inventory,
        "inventory_bucket": inventory_bucket,
        "ledger": f"s3://{inventory_bucket}/tables/vacuum_deletions",
        "registry": registry_file(tmp_path, {"events": f"s3://{source}/events"}),
        "expected": expected,
    }
