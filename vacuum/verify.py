"""Measure which planned files still exist after Delta's own VACUUM deleted them.

Delta's delete step swallows each file's error (AccessDenied, Object Lock, a bucket policy) and
the VACUUM still succeeds, so its plan is not a count of deleted files. This checks, with as few
requests as it can, which planned objects are still there: per directory, one HEAD per planned
file, or one delimited LIST of the directory when that is fewer requests (the inventory tells how
many objects a directory held).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from core.paths import LOCAL_BUCKET
from core.s3 import driver_settings, s3_client

_PAGE = 1000


def still_present(planned: DataFrame, directory_objects: DataFrame | None) -> DataFrame:
    """The rows of ``planned`` (``bucket, key, ...``) whose object still exists.

    ``directory_objects`` (``bucket, directory, objects``) says how many objects each directory
    held; without it, every file is checked with its own HEAD request.
    """
    settings = driver_settings()
    grouped = by_directory(planned)
    if directory_objects is not None:
        grouped = grouped.join(directory_objects, ["bucket", "directory"], "left")
    else:
        grouped = grouped.withColumn("objects", F.lit(None).cast("long"))

    def check(rows: Iterable[Any]) -> Iterator[tuple[str, str]]:
        client = None
        for row in rows:
            bucket, directory, keys, objects = row["bucket"], row["directory"], row["keys"], row["objects"]
            if bucket == LOCAL_BUCKET:
                yield from ((bucket, k) for k in keys if os.path.exists("/" + k))
                continue
            if client is None:
                client = s3_client(settings)
            pages = math.ceil((objects or 0) / _PAGE) or 1
            if objects is not None and pages < len(keys):
                listed = _list_directory(client, bucket, directory)
                yield from ((bucket, k) for k in keys if k in listed)
            else:
                yield from ((bucket, k) for k in keys if _exists(client, bucket, k))

    present = grouped.rdd.mapPartitions(check).toDF("bucket string, key string")
    return planned.join(present, ["bucket", "key"], "left_semi")


def by_directory(planned: DataFrame) -> DataFrame:
    """``bucket, directory, keys``: the planned keys of each directory, spread over the session's
    shuffle partitions (its tasks make the requests). Spread by name: a small table's plan read in
    one partition (:func:`vacuum.tuning.in_one_partition`) needs no shuffle to group, and would
    make every request of the check in one task."""
    return (
        planned.withColumn("directory", F.regexp_extract("key", r"(?s)^(.*/)?[^/]*$", 1))
        .repartition("bucket", "directory")
        .groupBy("bucket", "directory")
        .agg(F.collect_list("key").alias("keys"))
    )


def directory_object_counts(slice_frame: DataFrame) -> DataFrame:
    """``bucket, directory, objects``: how many inventory objects sit directly in each directory."""
    return (
        slice_frame.withColumn("directory", F.regexp_extract("key", r"(?s)^(.*/)?[^/]*$", 1))
        .groupBy("bucket", "directory")
        .agg(F.count(F.lit(1)).alias("objects"))
    )


def _exists(client: Any, bucket: str, key: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        client.head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as error:
        if str(error.response.get("Error", {}).get("Code")) in ("404", "NoSuchKey", "NotFound"):
            return False
        raise


def _list_directory(client: Any, bucket: str, directory: str) -> set[str]:
    keys: set[str] = set()
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=directory, Delimiter="/"
    ):
        keys.update(o["Key"] for o in page.get("Contents", []))
    return keys
