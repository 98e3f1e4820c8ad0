"""A local S3 server for the demo, the tests and the benchmarks: moto's, behind a small WSGI layer.

moto speaks the real S3 protocol, so boto3 and Hadoop's S3A reach it unchanged. The layer in
front adds what moto lacks and the tests need:

* **counts** of requests by S3 operation and bucket (``server.counts()``), to check request
  budgets (an inventory vacuum must not LIST the table's data);
* **S3's own limit** of 1000 keys per DeleteObjects, which moto does not enforce;
* **refusals on demand**: ``deny_deletes(bucket, prefix)`` answers every delete of a key under
  ``prefix`` with 403 AccessDenied (single DeleteObject, and per key inside DeleteObjects), the
  way a bucket policy or Object Lock would;
* **faults on demand** (:class:`Faults`): a share of 503 SlowDown and 500 InternalError answers,
  dropped connections, added latency, and a request-rate limit past which S3 answers SlowDown,
  for one bucket (and key prefix) or all, and for chosen operations or all.

It listens on 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote
from xml.etree import ElementTree

MAX_DELETE_KEYS = 1000
_S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"


def operation_name(method: str, path: str, query: str) -> str:
    """The S3 API operation a path-style request stands for (``ListObjectsV2``, ``HeadObject``...)."""
    params = parse_qs(query, keep_blank_values=True)
    has_key = "/" in path.strip("/")
    if method == "POST" and "delete" in params:
        return "DeleteObjects"
    if "uploads" in params:
        return "CreateMultipartUpload" if method == "POST" else "ListMultipartUploads"
    if "uploadId" in params:
        return {
            "PUT": "UploadPart",
            "POST": "CompleteMultipartUpload",
            "DELETE": "AbortMultipartUpload",
        }.get(method, "ListParts")
    if not has_key:
        if method == "GET":
            if "versioning" in params:
                return "GetBucketVersioning"
            if "versions" in params:
                return "ListObjectVersions"
            return "ListObjectsV2" if params.get("list-type") == ["2"] else "ListObjects"
        return {"PUT": "CreateBucket", "HEAD": "HeadBucket", "DELETE": "DeleteBucket"}.get(method, method)
    return {
        "GET": "GetObject",
        "HEAD": "HeadObject",
        "PUT": "PutObject",
        "DELETE": "DeleteObject",
    }.get(method, method)


@dataclass(frozen=True)
class Answered:
    """One request the server answered: its operation and bucket, and when it began and ended."""

    operation: str
    bucket: str
    began: float
    ended: float


@dataclass(frozen=True)
class Faults:
    """What goes wrong, and for which requests.

    A request matches when its bucket is ``bucket`` (any, if None), its key (object requests) or
    its ``prefix`` parameter (listings) starts with ``prefix``, and its operation is one of
    ``operations`` (any, if empty). DeleteObjects carries its keys in the body, so only its bucket
    is matched. A matching request then waits ``latency_ms``; the first ``throttle_first``
    matching requests, and any past ``max_per_second`` matching requests in the last second, are
    answered 503 SlowDown, as S3 answers a prefix sending more than its request rate allows;
    otherwise it is answered 503 SlowDown or 500 InternalError with
    probability ``error_share`` (half each), or its connection is closed unanswered with
    probability ``drop_share``. A dropped request is never executed.
    """

    error_share: float = 0.0
    drop_share: float = 0.0
    latency_ms: float = 0.0
    max_per_second: float | None = None
    throttle_first: int = 0
    bucket: str | None = None
    prefix: str = ""
    operations: frozenset[str] = frozenset()
    seed: int | None = None

    def matches(self, operation: str, bucket: str, key: str, listed_prefix: str | None) -> bool:
        if self.bucket is not None and bucket != self.bucket:
            return False
        if self.operations and operation not in self.operations:
            return False
        if not self.prefix or operation == "DeleteObjects":
            return True
        return (listed_prefix if listed_prefix is not None else key).startswith(self.prefix)


class LocalS3Server:
    """moto's S3 on a free port of 127.0.0.1, with request counts and injected refusals.

    Example::

        server = LocalS3Server().start()
        os.environ["AWS_ENDPOINT_URL"] = server.endpoint
        ...
        server.counts()["ListObjectsV2"]
        server.stop()
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str]] = Counter()
        self._listings: Counter[tuple[str, str, str]] = Counter()  # (bucket, prefix, delimiter)
        self._denied: list[tuple[str, str]] = []
        self._faults: Faults | None = None
        self._random = random.Random()
        self._recent: deque[float] = deque()
        self._matched = 0  # matching requests since inject
        self._injected: Counter[str] = Counter()
        self._in_flight = 0
        self._running: Counter[str] = Counter()  # requests being answered, by operation
        self._peaks: Counter[str] = Counter()  # the most of them at once since reset_counts
        self._answered: list[Answered] = []  # since reset_counts
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> LocalS3Server:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        app = DomainDispatcherApplication(create_backend_app)
        self._server = make_server("127.0.0.1", 0, self._middleware(app), threaded=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def use_in_environment(self, access_key: str = "testing") -> None:
        """Point boto3, S3A and Spark's Python workers at this server (set before the JVM starts).
        What would send them elsewhere goes: the S3-only endpoint (which wins over the general
        one), the setting that makes boto3 ignore both, a profile and a session token."""
        os.environ.update(
            AWS_ENDPOINT_URL=self.endpoint,
            AWS_ACCESS_KEY_ID=access_key,
            AWS_SECRET_ACCESS_KEY=access_key,
            AWS_REGION="us-east-1",
        )
        for name in (
            "AWS_ENDPOINT_URL_S3",
            "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
            "AWS_PROFILE",
            "AWS_DEFAULT_PROFILE",
            "AWS_SESSION_TOKEN",
        ):
            os.environ.pop(name, None)

    # -- counting ---------------------------------------------------------------------------
    def counts(self, bucket: str | None = None) -> Counter[str]:
        """Requests by operation since the last :meth:`reset_counts` (of one bucket, if given)."""
        with self._lock:
            result: Counter[str] = Counter()
            for (operation, name), count in self._counts.items():
                if bucket is None or name == bucket:
                    result[operation] += count
            return result

    def listings(self, bucket: str) -> Counter[tuple[str, str]]:
        """LIST requests of ``bucket`` by (prefix, delimiter) since the last :meth:`reset_counts`."""
        with self._lock:
            return Counter({(p, d): n for (b, p, d), n in self._listings.items() if b == bucket})

    def peak_in_flight(self, operation: str) -> int:
        """The most requests of ``operation`` answered at once since the last :meth:`reset_counts`."""
        with self._lock:
            return self._peaks[operation]

    def answered(self, operation: str) -> list[Answered]:
        """Each request of ``operation`` answered since the last :meth:`reset_counts`, with when the
        server began and ended answering it (``time.monotonic()``), in the order they ended."""
        with self._lock:
            return [a for a in self._answered if a.operation == operation]

    def reset_counts(self) -> None:
        with self._lock:
            self._counts.clear()
            self._listings.clear()
            self._peaks.clear()
            self._answered.clear()

    # -- refusals ---------------------------------------------------------------------------
    def deny_deletes(self, bucket: str, prefix: str) -> None:
        """Answer deletes of keys under ``prefix`` in ``bucket`` with 403 AccessDenied."""
        with self._lock:
            self._denied.append((bucket, prefix))

    def allow_all(self) -> None:
        with self._lock:
            self._denied.clear()

    def _is_denied(self, bucket: str, key: str) -> bool:
        with self._lock:
            return any(bucket == b and key.startswith(p) for b, p in self._denied)

    def wait_idle(self, timeout: float = 120.0) -> bool:
        """Wait until no request is being answered (a client that died mid-request leaves its
        request running, as S3 would); False if ``timeout`` seconds pass first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self._in_flight == 0:
                    return True
            time.sleep(0.05)
        return False

    # -- faults -----------------------------------------------------------------------------
    def inject(self, faults: Faults) -> None:
        """Start injecting ``faults`` (replacing any earlier ones); counts start from zero."""
        with self._lock:
            self._faults = faults
            self._random = random.Random(faults.seed)
            self._recent.clear()
            self._injected.clear()
            self._matched = 0

    def clear_faults(self) -> None:
        with self._lock:
            self._faults = None

    def injected(self) -> Counter[str]:
        """How many requests got each fault (``SlowDown``, ``InternalError``, ``dropped``,
        ``throttled``) since :meth:`inject`."""
        with self._lock:
            return Counter(self._injected)

    def _fault_for(self, operation: str, bucket: str, key: str, query: str) -> tuple[float, str | None]:
        """(seconds to wait, the fault to answer with or None) for one request."""
        with self._lock:
            faults = self._faults
            if faults is None:
                return 0.0, None
            listed = parse_qs(query).get("prefix", [None])[0] if not key else None
            if not faults.matches(operation, bucket, key, listed):
                return 0.0, None
            fault = None
            self._matched += 1
            if self._matched <= faults.throttle_first:
                fault = "throttled"
            elif faults.max_per_second is not None:
                now = time.monotonic()
                while self._recent and now - self._recent[0] > 1.0:
                    self._recent.popleft()
                if len(self._recent) >= faults.max_per_second:
                    fault = "throttled"
                else:
                    self._recent.append(now)
            draw = self._random.random()
            if fault is None and draw < faults.error_share:
                fault = "SlowDown" if draw < faults.error_share / 2 else "InternalError"
            elif fault is None and draw < faults.error_share + faults.drop_share:
                fault = "dropped"
            if fault is not None:
                self._injected[fault] += 1
            return faults.latency_ms / 1000, fault

    # -- the WSGI layer ---------------------------------------------------------------------
    def _middleware(self, app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
        def handle(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            with self._lock:
                self._in_flight += 1
            try:
                return answer(environ, start_response)
            finally:
                with self._lock:
                    self._in_flight -= 1

        def answer(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            method, path = environ["REQUEST_METHOD"], unquote(environ.get("PATH_INFO", ""))
            operation = operation_name(method, path, environ.get("QUERY_STRING", ""))
            bucket, _, key = path.lstrip("/").partition("/")
            with self._lock:
                self._counts[(operation, bucket)] += 1
                if operation in ("ListObjectsV2", "ListObjects"):
                    query = parse_qs(environ.get("QUERY_STRING", ""))
                    listed = (bucket, query.get("prefix", [""])[0], query.get("delimiter", [""])[0])
                    self._listings[listed] += 1
                self._running[operation] += 1
                self._peaks[operation] = max(self._peaks[operation], self._running[operation])
            started = time.monotonic()
            try:
                return respond(environ, start_response, operation, bucket, key)
            finally:
                with self._lock:
                    self._running[operation] -= 1
                    self._answered.append(Answered(operation, bucket, started, time.monotonic()))

        def respond(
            environ: dict[str, Any], start_response: Callable[..., Any], operation: str, bucket: str, key: str
        ) -> Iterable[bytes]:
            delay, fault = self._fault_for(operation, bucket, key, environ.get("QUERY_STRING", ""))
            if delay:
                time.sleep(delay)
            if fault in ("SlowDown", "throttled"):
                return _error(start_response, "503 Slow Down", "SlowDown", "Please reduce your request rate.")
            if fault == "InternalError":
                return _error(
                    start_response,
                    "500 Internal Server Error",
                    "InternalError",
                    "We encountered an internal error.",
                )
            if fault == "dropped":
                return _drop(environ, start_response)
            if operation == "DeleteObject" and self._is_denied(bucket, key):
                return _error(start_response, "403 Forbidden", "AccessDenied", "Access Denied")
            if operation == "DeleteObjects":
                return self._delete_objects(app, environ, start_response, bucket)
            return app(environ, start_response)

        return handle

    def _delete_objects(
        self,
        app: Callable[..., Iterable[bytes]],
        environ: dict[str, Any],
        start_response: Callable[..., Any],
        bucket: str,
    ) -> Iterable[bytes]:
        import io

        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length)
        root = ElementTree.fromstring(body)
        objects = [o for o in root if o.tag.rsplit("}", 1)[-1] == "Object"]
        if len(objects) > MAX_DELETE_KEYS:
            return _error(
                start_response, "400 Bad Request", "MalformedXML", f"more than {MAX_DELETE_KEYS} keys"
            )
        denied = []
        for element in objects:
            key = "".join(child.text or "" for child in element if child.tag.rsplit("}", 1)[-1] == "Key")
            if self._is_denied(bucket, key):
                denied.append(key)
                root.remove(element)
        if not denied:
            environ["wsgi.input"] = io.BytesIO(body)
            return app(environ, start_response)
        ElementTree.register_namespace("", _S3_NS)  # else "ns0:Delete", which moto cannot read
        forwarded = ElementTree.tostring(root)
        environ["wsgi.input"] = io.BytesIO(forwarded)
        environ["CONTENT_LENGTH"] = str(len(forwarded))
        environ.pop("HTTP_CONTENT_MD5", None)
        captured: dict[str, Any] = {}

        def capture(status: str, headers: list[tuple[str, str]], *_: Any) -> None:
            captured["status"], captured["headers"] = status, headers

        forwarding = any(o.tag.rsplit("}", 1)[-1] == "Object" for o in root)
        inner = b"".join(app(environ, capture)) if forwarding else b""
        errors = "".join(
            f"<Error><Key>{_xml(k)}</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
            for k in denied
        )
        merged = re.sub(rb"</DeleteResult>\s*$", errors.encode() + b"</DeleteResult>", inner)
        if b"</DeleteResult>" not in merged:
            merged = f'<?xml version="1.0" encoding="UTF-8"?><DeleteResult xmlns="{_S3_NS}">{errors}</DeleteResult>'.encode()
        start_response("200 OK", [("Content-Type", "application/xml"), ("Content-Length", str(len(merged)))])
        return [merged]


def _drop(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """Close the connection without an answer (the request is not executed)."""
    start_response("200 OK", [("Content-Length", "1")])
    connection = environ.get("werkzeug.socket")
    if connection is not None:
        with contextlib.suppress(OSError):
            connection.shutdown(socket.SHUT_RDWR)
    return [b""]


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _error(start_response: Callable[..., Any], status: str, code: str, message: str) -> Iterable[bytes]:
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
        f"<Message>{_xml(message)}</Message></Error>"
    ).encode()
    start_response(status, [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
    return [body]
