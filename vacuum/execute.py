"""Deleting with S3 DeleteObjects in batches spread over Spark tasks, and the one DeleteObjects
exchange (with its retries) that the vacuum and the restore (which deletes delete markers by
version id) share.

Only ever called by :mod:`vacuum.runner` with a list the planner produced and the gates passed.
Each request holds at most 1000 keys (S3's limit). What S3 can still accept later (503 SlowDown,
500 InternalError, a dropped or timed-out connection) is retried with exponential backoff and
jitter; what cannot succeed (AccessDenied, missing credentials, a malformed request) is not.
Every S3 error comes back as each key's own outcome (a task fails only on an error of the code
itself, none known), so whatever was deleted before an error is counted, written to the ledger and
shown, and the rest is reported as remaining.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ALL_COMPLETED, FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

from core.s3 import driver_settings, s3_client

MAX_KEYS_PER_REQUEST = 1000
# DeleteObjects requests a Spark task keeps in flight at once, by default (``--delete-requests-per-task``).
# One at a time, a task waited a round trip per 1000 keys, and the task slots bounded the requests
# in flight (2 on a 2-core machine, where delta-rs sends 20 at once). S3 limits each prefix (3,500
# DELETEs a second); a request it refuses with SlowDown (or another error worth a retry) is retried
# with backoff, and the task that met it starts no new batch until the batches in flight, with their
# retries, have ended, then one batch at a time.
REQUESTS_IN_FLIGHT = 4
RETRYABLE_CODES = frozenset(
    {"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "Throttling", "503", "500"}
)
_ALREADY_GONE = frozenset({"NoSuchKey", "NoSuchVersion", "404"})
# Characters an XML 1.0 body cannot carry as they are: C0 controls other than tab and newline, and
# the carriage return, which XML parsers turn into a newline (so "a\rb" would name "a\nb").
_NOT_SENDABLE = "[\\x{0}-\\x{8}\\x{B}-\\x{1F}\\x{FFFE}\\x{FFFF}]"

OUTCOME_SCHEMA = StructType(
    [
        StructField("bucket", StringType()),
        StructField("key", StringType()),
        StructField("path", StringType()),
        StructField("length", LongType()),
        StructField("deleted", BooleanType()),
        StructField("error", StringType()),
        StructField("requests", LongType()),
        # on a versioned bucket: the delete marker S3 says the delete created (None otherwise)
        StructField("delete_marker_version_id", StringType()),
    ]
)


# bucket, key, path, length, deleted, error, requests, delete_marker_version_id: one OUTCOME_SCHEMA row
Outcome = tuple[str | None, str | None, str | None, int | None, bool, str | None, int, str | None]


@dataclass(frozen=True)
class KeyBatchOutcome:
    """What one DeleteObjects exchange (with its retries) did to up to 1000 keys.

    ``delete_markers``: for each key whose delete made a delete marker (a versioned bucket), the
    marker's version id, as DeleteObjects answered it (``DeleteMarker: true``).
    """

    deleted: list[str]
    failed: dict[str, str]  # key -> error
    requests: int
    delete_markers: dict[str, str] = field(default_factory=dict)


def sendable_key(key: Column) -> Column:
    """True for keys that a DeleteObjects XML body carries unchanged."""
    return ~key.rlike(_NOT_SENDABLE)


def is_sendable(key: str) -> bool:
    """Python twin of :func:`sendable_key`, checked again in the task before any request."""
    return not any(
        (ord(c) < 0x20 and c not in "\t\n") or c in "\ufffe\uffff" or 0xD800 <= ord(c) <= 0xDFFF for c in key
    )


def delete_in_batches(
    candidates: DataFrame,
    *,
    max_attempts: int = 6,
    tasks: int | None = None,
    in_flight: int = REQUESTS_IN_FLIGHT,
) -> DataFrame:
    """Delete the objects of ``candidates`` (columns ``bucket``, ``key``; ``path`` and ``length``
    are carried through when present) with DeleteObjects.

    Returns one row per candidate (``bucket, key, path, length, deleted, error``) plus one row
    per task with ``requests`` (the requests it sent; its other columns null), persisted: the
    deletes run exactly once, when this returns, and what the caller counts and ledgers is read
    from these rows, not from the candidates again. The caller unpersists it.
    """
    spark = candidates.sparkSession
    settings = driver_settings()
    partitions = tasks or max(1, min(64, spark.sparkContext.defaultParallelism))
    columns = set(candidates.columns)
    carried = [
        F.col(name) if name in columns else F.lit(None).cast(kind).alias(name)
        for name, kind in (("path", "string"), ("length", "long"))
    ]
    keyed = (
        candidates.select("bucket", "key", *carried)
        # contiguous key ranges per task: full 1000-key requests, and many tasks even for one bucket
        .repartitionByRange(partitions, "bucket", "key")
        .sortWithinPartitions("bucket", "key")
    )

    def run(rows: Iterable[Any]) -> Iterator[Outcome]:
        keyed_rows = ((row[0], row[1], row[2], row[3]) for row in rows)
        return delete_partition(keyed_rows, settings, max_attempts, in_flight)

    outcomes = spark.createDataFrame(keyed.rdd.mapPartitions(run), OUTCOME_SCHEMA).persist(
        StorageLevel.MEMORY_AND_DISK
    )
    try:
        outcomes.count()
    except BaseException:
        outcomes.unpersist()
        raise
    return outcomes


def delete_partition(
    rows: Iterator[tuple[str, str, str | None, int | None]],
    settings: dict[str, str | None],
    max_attempts: int,
    in_flight: int = REQUESTS_IN_FLIGHT,
) -> Iterator[Outcome]:
    """Runs in a Spark task: delete one partition's keys (``bucket, key, path, length`` rows,
    sorted by bucket), 1000 a request, with up to ``in_flight`` batches in flight at once; from
    the first answer worth a retry (SlowDown, ...), the next batch waits until none is in flight
    (a batch in flight still retries, after its own backoff). One outcome row per input row, in
    the order the batches end."""
    requests = 0
    fatal: str | None = None
    try:
        client = s3_client(settings, own_retries=True, connections=in_flight)
    except Exception as error:  # no client, no request: every key stays, with the reason
        client, fatal = None, f"cannot create an S3 client: {_describe(error)}"

    slowed = threading.Event()  # set by the first answer worth a retry (SlowDown, ...)

    def outcomes(bucket: str, batch: _Batch, outcome: KeyBatchOutcome) -> Iterator[Outcome]:
        nonlocal requests, fatal
        requests += outcome.requests
        if outcome.failed and len(outcome.failed) == len(batch) and not outcome.deleted:
            first = next(iter(outcome.failed.values()))
            if _stops_everything(first):
                fatal = first  # the batches not sent yet are not sent
        deleted = set(outcome.deleted)
        for key, path, length in batch:
            # delete_keys gives every key it was sent an outcome; a key it did not name stays
            error = None if key in deleted else outcome.failed.get(key, "no outcome from DeleteObjects")
            marker = outcome.delete_markers.get(key) if error is None else None
            yield bucket, key, path, length, error is None, error, 0, marker

    with ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="delete-objects") as pool:
        sent: dict[Future[KeyBatchOutcome], tuple[str, _Batch]] = {}

        def ended(until: str) -> Iterator[Outcome]:
            done, _ = wait(sent, return_when=until)
            for request in done:
                bucket, batch = sent.pop(request)
                # a request that raised (none should: delete_keys answers every error per key)
                # fails the task, and the run then counts what is gone by looking
                yield from outcomes(bucket, batch, request.result())

        for bucket, batch, unsendable in _batches(rows):
            if unsendable is not None:
                yield unsendable
            elif fatal is not None:
                keys = (key for key, _, _ in batch)
                yield from outcomes(bucket, batch, KeyBatchOutcome([], dict.fromkeys(keys, fatal), 0))
            else:
                keys_sent = [key for key, _, _ in batch]
                request = pool.submit(delete_keys, client, bucket, keys_sent, max_attempts, slowed=slowed)
                sent[request] = (bucket, batch)
                # once S3 asked for a retry, the next batch waits for every one in flight to end
                while len(sent) >= (1 if slowed.is_set() else in_flight):
                    yield from ended(FIRST_COMPLETED)
        while sent:
            yield from ended(ALL_COMPLETED)
    yield None, None, None, None, False, None, requests, None  # the task's request count


_Batch = list[tuple[str, "str | None", "int | None"]]  # key, path, length: one request's keys


def _batches(
    rows: Iterable[tuple[str, str, str | None, int | None]],
) -> Iterator[tuple[str, _Batch, Outcome | None]]:
    """``(bucket, keys, None)`` for each request's keys (one bucket, at most 1000, in the order
    of ``rows``), and ``(bucket, [], outcome)`` for each key no DeleteObjects body can carry."""
    batch: _Batch = []
    current = ""
    for bucket, key, path, length in rows:
        if batch and (bucket != current or len(batch) == MAX_KEYS_PER_REQUEST):
            yield current, batch, None
            batch = []
        current = bucket
        if is_sendable(key):
            batch.append((key, path, length))
        else:
            unsendable: Outcome = (
                bucket, key, path, length, False, "key cannot be sent in a DeleteObjects XML body", 0, None
            )  # fmt: skip
            yield bucket, [], unsendable
    if batch:
        yield current, batch, None


def _stops_everything(error: str) -> bool:
    """Errors after which the next batch cannot fare better (credentials, access)."""
    return any(
        word in error for word in ("credentials", "AccessDenied", "InvalidAccessKeyId", "NoSuchBucket")
    )


def delete_keys(
    client: Any,
    bucket: str,
    keys: list[str],
    max_attempts: int = 6,
    *,
    version_ids: Mapping[str, str] | None = None,
    slowed: threading.Event | None = None,
) -> KeyBatchOutcome:
    """Delete up to 1000 keys of one bucket; retry only what S3 could still accept.

    With ``version_ids`` (key -> version id, one version per key), each key's given version is
    deleted for good, as the restore deletes its delete markers; without, each key's current
    object is deleted (on a versioned bucket S3 then makes a delete marker, whose version id is
    returned in ``delete_markers``). The request is not Quiet: S3 names each key it deleted, and
    the marker it made, only in a verbose answer. A key counts as deleted only when the answer
    names it so (or names it gone already); one it names neither way is failed, with that reason
    (whether it is gone is then unknown; S3 names every key of a verbose answer).
    ``slowed`` is set at the first answer worth a retry (SlowDown, InternalError, a dropped
    connection).
    """
    from botocore.exceptions import (
        ClientError,
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        ParamValidationError,
        ReadTimeoutError,
    )

    transient_network = (
        EndpointConnectionError,
        ConnectionClosedError,
        ReadTimeoutError,
        ConnectTimeoutError,
    )
    # raised before the request reached S3 (no connection made, not signed, not valid): not counted
    not_sent = (EndpointConnectionError, ConnectTimeoutError, NoCredentialsError, ParamValidationError)
    assert len(keys) <= MAX_KEYS_PER_REQUEST
    if version_ids is not None:  # outcomes are told per key: one version of a key per request
        assert len(set(keys)) == len(keys) and set(keys) <= set(version_ids), "one version id per key"
    pending = list(keys)
    deleted: list[str] = []
    failed: dict[str, str] = {}
    markers: dict[str, str] = {}
    requests = 0

    def entry(key: str) -> dict[str, str]:
        return {"Key": key, "VersionId": version_ids[key]} if version_ids is not None else {"Key": key}

    for attempt in range(max_attempts):
        if not pending:
            break
        if attempt:
            time.sleep(min(20.0, 0.2 * 2**attempt) * (0.5 + random.random()))
        requests += 1
        try:
            response = client.delete_objects(
                Bucket=bucket, Delete={"Objects": [entry(k) for k in pending], "Quiet": False}
            )
        except ClientError as error:
            detail = error.response.get("Error", {})
            message = f"s3://{bucket}: {detail.get('Code')}: {detail.get('Message')}"
            if str(detail.get("Code")) in RETRYABLE_CODES:
                _set(slowed)
                if attempt + 1 < max_attempts:
                    continue
            failed.update(dict.fromkeys(pending, message))
            return KeyBatchOutcome(deleted, failed, requests, markers)
        except transient_network as error:
            _set(slowed)
            if isinstance(error, not_sent):
                requests -= 1
            if attempt + 1 < max_attempts:
                continue
            failed.update(dict.fromkeys(pending, f"s3://{bucket}: {_describe(error)}"))
            return KeyBatchOutcome(deleted, failed, requests, markers)
        except Exception as error:  # credentials, parameter validation, ...: retrying cannot help
            if isinstance(error, not_sent):
                requests -= 1
            failed.update(dict.fromkeys(pending, f"s3://{bucket}: {_describe(error)}"))
            return KeyBatchOutcome(deleted, failed, requests, markers)
        named_deleted = set()
        for done in response.get("Deleted", []):
            named_deleted.add(str(done.get("Key")))
            if version_ids is None and done.get("DeleteMarker") and done.get("DeleteMarkerVersionId"):
                markers[str(done.get("Key"))] = str(done["DeleteMarkerVersionId"])
        problems = {str(p.get("Key")): p for p in response.get("Errors", [])}
        retry: list[str] = []
        for key in pending:
            problem = problems.get(key)
            code = str(problem.get("Code")) if problem else None
            if code in RETRYABLE_CODES:
                _set(slowed)
            if (problem is None and key in named_deleted) or code in _ALREADY_GONE:
                deleted.append(key)
            elif problem is None:
                # a verbose answer names every key it was sent; one it leaves out is not counted
                # as deleted (nor sent again: on a versioned bucket that makes another marker)
                failed[key] = (
                    f"s3://{bucket}/{key}: S3's answer named it neither deleted nor failed: "
                    "whether it is gone is unknown"
                )
            elif code in RETRYABLE_CODES and attempt + 1 < max_attempts:
                retry.append(key)
            else:
                failed[key] = f"s3://{bucket}/{key}: {code}: {problem.get('Message')}"
        pending = retry
    return KeyBatchOutcome(deleted, failed, requests, markers)


def _set(event: threading.Event | None) -> None:
    if event is not None:
        event.set()


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"
