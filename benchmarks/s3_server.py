"""The benchmarks' S3 server: :class:`testing.local_s3.LocalS3Server` plus what a benchmark needs.

* **Counts by area.** Every request to a benchmarked table's bucket is counted by S3 operation
  and by *area*: ``log`` (the table's ``_delta_log/``), ``data`` (everything else of the table,
  including listings of the table root), ``probe`` (a LIST of some ``<dir>/_delta_log/`` below the
  root: our list mode's nested-table check). Requests to any other bucket (the inventory, history
  and ledger tables) count as area ``meta``. The latency model needs the area, because who sends
  a request (the driver, alone, or Spark tasks, in parallel) depends on it.
* **S3's page limit.** A LIST asking for more than 1000 keys gets 1000, as on S3 (moto would
  return up to ``max-keys``, and S3A asks for 5000).
* **Injected latency** (optional): every request waits ``latency_seconds`` before moto serves it.
* **An indexed listing** (:func:`install_indexed_listing`): moto scans and sorts every key of the
  bucket for each ListObjectsV2 request, so one LIST of a 100k-object bucket costs moto about
  0.2 s of Python on a busy 2-core machine, and Delta's ~3,000 directory LISTs would be timed as
  moto's cost rather than the engines'. The index answers the same request from a sorted key list with a binary search; results,
  order, pagination tokens and truncation are identical (:func:`check_indexed_listing` compares
  both on the benchmark's own tables before anything is timed).
* **Fast loading** (:func:`put_objects`, :func:`delete_objects`, :func:`object_names`): the
  placeholder files are written into moto's in-process backend directly, dozens of times faster
  than through boto3 and HTTP on a 2-core machine. The objects are the same ones a PUT makes;
  loading is never part of a measurement.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode

from testing.local_s3 import LocalS3Server, operation_name

MAX_LIST_KEYS = 1000
_LOG = "_delta_log/"


class BenchmarkS3Server(LocalS3Server):
    """A :class:`LocalS3Server` that counts requests by table area and caps LIST pages at 1000 keys."""

    def __init__(self, latency_seconds: float = 0.0) -> None:
        super().__init__()
        self.latency_seconds = latency_seconds
        self._roots: dict[str, str] = {}  # bucket -> table root key (no trailing slash)
        self._area_counts: Counter[tuple[str, str, str]] = Counter()  # (bucket, area, operation)
        self._area_lock = threading.Lock()

    def watch_table(self, bucket: str, root: str) -> None:
        """Count requests to ``bucket`` by area of the table at ``root`` (a key prefix)."""
        self._roots[bucket] = root.strip("/")

    def area_counts(self) -> Counter[tuple[str, str, str]]:
        """``(bucket, area, operation) -> requests`` since the last :meth:`reset_counts`."""
        with self._area_lock:
            return Counter(self._area_counts)

    def reset_counts(self) -> None:
        super().reset_counts()
        with self._area_lock:
            self._area_counts.clear()

    def area_of(self, bucket: str, key: str, prefix: str | None) -> str:
        """The area a request belongs to (``key`` for object requests, ``prefix`` for LIST)."""
        root = self._roots.get(bucket)
        if root is None:
            return "meta"
        log = f"{root}/{_LOG}"
        if prefix is not None:
            if prefix.startswith(log) or prefix == log[:-1]:
                return "log"
            if prefix.endswith((_LOG, _LOG[:-1])):
                return "probe"
            return "data"
        return "log" if key.startswith(log) else "data"

    def _middleware(self, app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
        inner = super()._middleware(app)

        def handle(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            method, path = environ["REQUEST_METHOD"], unquote(environ.get("PATH_INFO", ""))
            query = environ.get("QUERY_STRING", "")
            operation = operation_name(method, path, query)
            bucket, _, key = path.lstrip("/").partition("/")
            prefix = None
            if operation in ("ListObjectsV2", "ListObjects", "ListObjectVersions"):
                params = parse_qs(query, keep_blank_values=True)
                prefix = params.get("prefix", [""])[0]
                if int(params.get("max-keys", [MAX_LIST_KEYS])[0]) > MAX_LIST_KEYS:
                    params["max-keys"] = [str(MAX_LIST_KEYS)]
                    environ["QUERY_STRING"] = urlencode(params, doseq=True)
            area = self.area_of(bucket, key, prefix)
            with self._area_lock:
                self._area_counts[(bucket, area, operation)] += 1
            if self.latency_seconds:
                time.sleep(self.latency_seconds)
            return inner(environ, start_response)

        return handle


# -- moto's backend: fast loading and an indexed listing ------------------------------------------


def _backend() -> Any:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    return s3_backends[DEFAULT_ACCOUNT_ID]["aws"]


def put_objects(bucket: str, objects: Iterable[tuple[str, bytes]]) -> int:
    """Write ``(key, body)`` objects straight into moto's backend (not counted, not timed)."""
    backend = _backend()
    written = 0
    for key, body in objects:
        backend.put_object(bucket, key, body, disable_notification=True)
        written += 1
    return written


def delete_objects(bucket: str, keys: Iterable[str]) -> int:
    """Delete keys straight from moto's backend (not counted)."""
    backend = _backend()
    deleted = 0
    for key in keys:
        backend.delete_object(bucket, key)
        deleted += 1
    return deleted


def object_names(bucket: str, prefix: str = "") -> dict[str, str]:
    """``key -> ETag`` of every object under ``prefix``, read from moto's backend (not counted)."""
    store = _backend().get_bucket(bucket).keys
    return {name: store[name].etag for name in list(dict.keys(store)) if name.startswith(prefix)}


_GENERATION = "_benchmark_generation"
_SORTED = "_benchmark_sorted_names"


def _sorted_names(store: Any) -> list[str]:
    """The store's key names, sorted; rebuilt after any write (read the generation first)."""
    generation = store.__dict__.get(_GENERATION, 0)
    cached = store.__dict__.get(_SORTED)
    if cached is not None and cached[0] == generation:
        return cached[1]
    names = sorted(dict.keys(store))
    store.__dict__[_SORTED] = (generation, names)
    return names


def _after_folder(folder: str) -> str:
    """The smallest string above every string that starts with ``folder``."""
    return folder[:-1] + chr(ord(folder[-1]) + 1)


def indexed_list_objects_v2(
    backend: Any,
    bucket: Any,
    prefix: str | None,
    delimiter: str | None,
    continuation_token: str | None,
    start_after: str | None,
    max_keys: int,
) -> tuple[list[Any], bool, str | None]:
    """moto's ``S3Backend.list_objects_v2``, answered from a sorted index of the bucket's keys."""
    from moto.s3.models import FakeDeleteMarker
    from moto.utilities.utils import md5_hash

    prefix = prefix or ""
    after = backend._pagination_tokens.get(continuation_token) if continuation_token else start_after
    store = bucket.keys
    names = _sorted_names(store)
    index = bisect_left(names, prefix)
    if after:
        index = max(index, bisect_right(names, after))
    entries: list[Any] = []
    while index < len(names) and names[index].startswith(prefix) and len(entries) <= max_keys:
        name = names[index]
        rest = name[len(prefix) :]
        if delimiter and delimiter in rest:
            folder = prefix + rest.split(delimiter)[0] + delimiter
            if not after or folder > after:
                entries.append(folder)
            index = bisect_left(names, _after_folder(folder), index + 1)
            continue
        key = store.get(name)
        if key is not None and not isinstance(key, FakeDeleteMarker):
            entries.append(key)
        index += 1
    if max_keys == 0:
        return [], False, None
    if len(entries) <= max_keys:
        return entries, False, None
    entries = entries[:max_keys]
    last = entries[-1] if isinstance(entries[-1], str) else entries[-1].name
    token = md5_hash(last.encode("utf-8")).hexdigest()
    backend._pagination_tokens[token] = last
    return entries, True, token


_MOTO_LIST_OBJECTS_V2: list[Callable[..., Any]] = []  # moto's own, kept while the index is installed


def install_indexed_listing() -> Callable[[], None]:
    """Answer ListObjectsV2 from a sorted index (see the module docstring); returns an undo."""
    from moto.s3.models import FakeTableStorageBucket, S3Backend
    from moto.s3.utils import _VersionedKeyStore

    originals = {name: getattr(_VersionedKeyStore, name) for name in ("__setitem__", "setlist", "pop")}
    original_list = S3Backend.list_objects_v2
    _MOTO_LIST_OBJECTS_V2[:] = [original_list]

    def bumping(method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            finally:
                self.__dict__[_GENERATION] = self.__dict__.get(_GENERATION, 0) + 1

        return wrapper

    def list_objects_v2(self: Any, bucket: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(bucket, FakeTableStorageBucket):
            return original_list(self, bucket, *args, **kwargs)
        return indexed_list_objects_v2(self, bucket, *args, **kwargs)

    for name, method in originals.items():
        setattr(_VersionedKeyStore, name, bumping(method))
    S3Backend.list_objects_v2 = list_objects_v2  # type: ignore[method-assign]

    def undo() -> None:
        for name, method in originals.items():
            setattr(_VersionedKeyStore, name, method)
        S3Backend.list_objects_v2 = original_list  # type: ignore[method-assign]
        _MOTO_LIST_OBJECTS_V2.clear()

    return undo


def check_indexed_listing(bucket_name: str, prefixes: Iterable[str], pages: int = 2) -> None:
    """Compare the indexed listing with moto's own on ``prefixes`` (flat and delimited, the first
    ``pages`` pages of 1000 keys and of 7); raise ``AssertionError`` on any difference."""
    from moto.s3.models import S3Backend

    backend = _backend()
    bucket = backend.get_bucket(bucket_name)
    original = _MOTO_LIST_OBJECTS_V2[0] if _MOTO_LIST_OBJECTS_V2 else S3Backend.list_objects_v2

    def names(entries: Iterable[Any]) -> list[str]:
        return [e if isinstance(e, str) else e.name for e in entries]

    for prefix in prefixes:
        for delimiter in (None, "/"):
            for page_size in (MAX_LIST_KEYS, 7):
                token_a = token_b = None
                for _ in range(pages):
                    a = original(backend, bucket, prefix, delimiter, token_a, None, page_size)
                    b = indexed_list_objects_v2(backend, bucket, prefix, delimiter, token_b, None, page_size)
                    if names(a[0]) != names(b[0]) or a[1:] != b[1:]:
                        raise AssertionError(
                            f"the indexed listing differs from moto's for prefix {prefix!r}, "
                            f"delimiter {delimiter!r}, page size {page_size}"
                        )
                    if not a[1]:
                        break
                    token_a, token_b = a[2], b[2]
