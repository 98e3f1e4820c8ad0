"""Deleting: Delta's own VACUUM, or S3 DeleteObjects in batches spread over Spark tasks.

Both are only ever called by :mod:`vacuum.runner` with a list the planner produced and the gates
passed. The batch path deletes at most 1000 keys a request (S3's limit), retries per-key errors
and 503 SlowDown with exponential backoff, and counts a key that is already gone as deleted.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

MAX_KEYS_PER_REQUEST = 1000
_RETRYABLE = {"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "503", "500"}
_ALREADY_GONE = {"NoSuchKey", "404"}


@dataclass(frozen=True)
class DeleteOutcome:
    deleted: int
    failed: int
    requests: int
    first_error: str | None


def with_bucket_and_key(frame: DataFrame) -> DataFrame:
    """Add ``bucket`` and ``key`` columns split from an ``s3a://bucket/key`` ``path`` column."""
    pattern = r"(?s)^[A-Za-z0-9]+://([^/]+)/(.*)$"
    return frame.withColumn("bucket", F.regexp_extract("path", pattern, 1)).withColumn(
        "key", F.regexp_extract("path", pattern, 2)
    )


def delete_in_batches(
    candidates: DataFrame, *, max_attempts: int = 8, tasks: int | None = None
) -> DeleteOutcome:
    """Delete the objects of ``candidates`` (columns ``bucket``, ``key``) with DeleteObjects."""
    spark = candidates.sparkSession
    settings = {
        "endpoint_url": os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"),
        "region_name": os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
    }
    partitions = tasks or max(1, min(64, spark.sparkContext.defaultParallelism))
    keyed = (
        candidates.select("bucket", "key")
        # contiguous key ranges per task: full 1000-key requests, and many tasks even for one bucket
        .repartitionByRange(partitions, "bucket", "key")
        .sortWithinPartitions("bucket", "key")
    )

    def run(rows: Iterable[Any]) -> Iterator[tuple[int, int, int, str | None]]:
        yield _delete_partition(((row[0], row[1]) for row in rows), settings, max_attempts)

    results = keyed.rdd.mapPartitions(run).collect()
    errors = [r[3] for r in results if r[3]]
    return DeleteOutcome(
        deleted=sum(r[0] for r in results),
        failed=sum(r[1] for r in results),
        requests=sum(r[2] for r in results),
        first_error=errors[0] if errors else None,
    )


def _delete_partition(
    rows: Iterator[tuple[str, str]], settings: dict[str, str | None], max_attempts: int
) -> tuple[int, int, int, str | None]:
    """Runs in a Spark task: delete one partition's keys, 1000 a request, with retries."""
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3",
        endpoint_url=settings["endpoint_url"],
        region_name=settings["region_name"],
        config=Config(retries={"max_attempts": 10, "mode": "adaptive"}),
    )
    deleted = failed = requests = 0
    first_error: str | None = None
    batch: list[str] = []
    current_bucket: str | None = None

    def flush() -> None:
        nonlocal deleted, failed, requests, first_error
        if not batch or current_bucket is None:
            return
        outcome = delete_keys(client, current_bucket, list(batch), max_attempts)
        deleted += outcome.deleted
        failed += outcome.failed
        requests += outcome.requests
        first_error = first_error or outcome.first_error
        batch.clear()

    for bucket, key in rows:
        if bucket != current_bucket or len(batch) == MAX_KEYS_PER_REQUEST:
            flush()
            current_bucket = bucket
        batch.append(key)
    flush()
    return deleted, failed, requests, first_error


def delete_keys(client: Any, bucket: str, keys: list[str], max_attempts: int = 8) -> DeleteOutcome:
    """Delete up to 1000 keys of one bucket; retry what S3 reports as failed or throttled."""
    from botocore.exceptions import ClientError

    assert len(keys) <= MAX_KEYS_PER_REQUEST
    pending = list(keys)
    deleted = requests = 0
    last_error: str | None = None
    for attempt in range(max_attempts):
        if not pending:
            break
        if attempt:
            time.sleep(min(20.0, 0.2 * 2**attempt) * (0.5 + random.random()))
        requests += 1
        try:
            response = client.delete_objects(
                Bucket=bucket, Delete={"Objects": [{"Key": k} for k in pending], "Quiet": True}
            )
        except ClientError as error:
            detail = error.response.get("Error", {})
            last_error = f"s3://{bucket}: {detail.get('Code')}: {detail.get('Message')}"
            if str(detail.get("Code")) in _RETRYABLE:
                continue
            break
        retry: list[str] = []
        for problem in response.get("Errors", []):
            code = str(problem.get("Code"))
            if code in _ALREADY_GONE:
                continue
            last_error = f"s3://{bucket}/{problem.get('Key')}: {code}: {problem.get('Message')}"
            retry.append(problem["Key"])
        deleted += len(pending) - len(retry)
        pending = retry
    return DeleteOutcome(
        deleted=deleted, failed=len(pending), requests=requests, first_error=last_error if pending else None
    )
