"""Shared fixtures: one moto S3 server on 127.0.0.1 and one SparkSession for the whole run.

The S3 server starts first and the AWS variables are set before the JVM starts, so boto3, Spark's
S3A and the Python workers of Spark tasks all reach the same local S3.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator

import boto3
import pytest
from moto.server import ThreadedMotoServer


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    saved = {
        k: os.environ.get(k)
        for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")
    }
    os.environ.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_REGION="us-east-1",
    )
    os.environ.pop("AWS_PROFILE", None)
    yield endpoint
    server.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def spark(s3_endpoint: str):  # type: ignore[no-untyped-def]
    from inventory.session import build_spark_session

    session = build_spark_session(
        "inventory-vacuum tests",
        {
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.databricks.delta.snapshotPartitions": "2",
            "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
            "spark.databricks.delta.vacuum.parallelDelete.parallelism": "2",
        },
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def s3(s3_endpoint: str):  # type: ignore[no-untyped-def]
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
