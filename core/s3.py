"""boto3 access to S3: one client factory and the few object helpers the jobs share.

boto3 itself honours ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_S3``, ``AWS_REGION`` and the
credential variables, so the same code reaches AWS and a local S3 server.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Mapping
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from core.errors import ConfigError
from core.paths import StorageLocation

# Adaptive retries back off on 503 SlowDown and throttling, which S3 returns under load.
_CLIENT_CONFIG = Config(retries={"max_attempts": 10, "mode": "adaptive"}, max_pool_connections=32)
# For a caller that retries itself because it must see each key's outcome (the batch delete):
# botocore adds no retry of its own. ``total_max_attempts``, not ``max_attempts``: botocore reads a
# client's ``max_attempts`` as retries after the first attempt, and a retry botocore made would be
# missing from the requests the caller counts.
_SINGLE_ATTEMPT_CONFIG = Config(
    retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=10, read_timeout=60
)


def s3_client(
    settings: Mapping[str, str | None] | None = None, *, own_retries: bool = False, connections: int = 0
) -> Any:
    """A boto3 S3 client configured from the standard AWS environment.

    In Spark tasks, ``settings`` (from :func:`driver_settings`, taken on the driver) gives the
    driver's endpoint and region: an executor's environment need not have them. With
    ``own_retries`` botocore makes one attempt per call and the caller retries. ``connections``:
    the calls the caller makes at once from threads of its own, when more than botocore's 10.
    """
    wait_for_client_model()
    settings = settings or {}
    config = _SINGLE_ATTEMPT_CONFIG if own_retries else _CLIENT_CONFIG
    if connections > (config.max_pool_connections or 10):
        config = config.merge(Config(max_pool_connections=connections))
    return boto3.client(
        "s3",
        endpoint_url=settings.get("endpoint_url"),
        region_name=settings.get("region_name"),
        config=config,
    )


def load_client_model() -> None:
    """Start building one client of the default boto3 session on a daemon thread; until it ends,
    :func:`s3_client` on any other thread waits for it (:func:`wait_for_client_model`), so no two
    clients of that session are built at once.

    A process's first client reads botocore's S3 model and endpoint rules, about 80 ms of CPU;
    later clients of the same session reuse them and take a few ms. A job starts this once its JVM
    is up (PySpark starts the JVM with a ``preexec_fn``, unsafe beside other threads; the tool
    starts no other process that way), so that it runs while the driver waits on the JVM: a
    one-table vacuum's two threads each built their first client at once, 0.17 s each on a
    2-core machine. A failure (no region, a bad variable) is left to the job's own first client to
    report."""
    global _model_loading

    def build() -> None:
        with contextlib.suppress(Exception):  # reported by the job's own first client
            s3_client()

    if _model_loading is not None:
        return
    thread = threading.Thread(target=build, name="inventory-vacuum boto3 model", daemon=True)
    thread.start()
    _model_loading = thread


def wait_for_client_model() -> None:
    """Wait until :func:`load_client_model`'s client is built (at once when none is being built,
    and on its own thread). Whoever builds a client of the default boto3 session other than with
    :func:`s3_client` calls this first: botocore does not build two of a session's first clients
    at once safely."""
    loading = _model_loading
    if loading is not None and loading is not threading.current_thread():
        loading.join()


_model_loading: threading.Thread | None = None


def driver_settings() -> dict[str, str | None]:
    """The endpoint and region this process reaches S3 with, to send to Spark tasks."""
    return {
        "endpoint_url": os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"),
        "region_name": os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
    }


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def describe(error: Exception) -> str:
    """A one-line description of a boto3 error."""
    if isinstance(error, ClientError):
        detail = error.response.get("Error", {})
        return f"{detail.get('Code', 'error')}: {detail.get('Message', '')}".strip().rstrip(":")
    if isinstance(error, BotoCoreError):
        return str(error)
    return f"{type(error).__name__}: {error}"


def read_object_text(location: StorageLocation) -> str:
    """The text of one object; a :class:`ConfigError` naming it when it cannot be read."""
    try:
        body = s3_client().get_object(Bucket=location.bucket, Key=location.key)["Body"].read()
        return str(body.decode("utf-8"))
    except (ClientError, BotoCoreError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read {location.uri}: {describe(error)}") from None


def bucket_versioning(bucket: str) -> str | None:
    """The bucket's versioning status (``Enabled``, ``Suspended``), None when never enabled."""
    return s3_client().get_bucket_versioning(Bucket=bucket).get("Status")


def has_objects_under(bucket: str, prefix: str) -> bool:
    """True when at least one key starts with ``prefix`` (one LIST request of one key)."""
    return bool(s3_client().list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1).get("KeyCount"))


def key_versions(client: Any, bucket: str, key: str) -> list[dict[str, Any]]:
    """Every version and delete marker of exactly ``key``, as ListObjectVersions gives them
    (``VersionId``, ``IsLatest``, ``LastModified``, and ``Size``/``ETag`` for object versions),
    each with ``IsDeleteMarker``. Keys that merely start with ``key`` are skipped; the listing
    stops at the first of them (S3 lists keys in order, so ``key``'s own versions come first)."""
    versions: list[dict[str, Any]] = []
    for page in client.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=key):
        found = [{**v, "IsDeleteMarker": False} for v in page.get("Versions", []) if v["Key"] == key]
        found += [{**m, "IsDeleteMarker": True} for m in page.get("DeleteMarkers", []) if m["Key"] == key]
        versions += found
        listed = [v["Key"] for v in (*page.get("Versions", []), *page.get("DeleteMarkers", []))]
        if any(k != key for k in listed):
            break
    return versions


def lifecycle_rules(client: Any, bucket: str) -> list[dict[str, Any]]:
    """The bucket's lifecycle rules; none when it has no lifecycle configuration."""
    try:
        return list(client.get_bucket_lifecycle_configuration(Bucket=bucket).get("Rules", []))
    except ClientError as error:
        if error_code(error) == "NoSuchLifecycleConfiguration":
            return []
        raise


def current_version(client: Any, bucket: str, key: str) -> dict[str, Any] | None:
    """``VersionId``, ``ContentLength`` and ``ETag`` of the key's current object (HEAD); None when
    it has none (no object, or a delete marker is its newest version)."""
    try:
        return dict(client.head_object(Bucket=bucket, Key=key))
    except ClientError as error:
        if error_code(error) in ("404", "NoSuchKey", "NotFound", "405", "MethodNotAllowed"):
            return None
        raise
