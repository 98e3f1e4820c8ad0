"""Storage locations: ``s3://``, ``s3a://``, ``s3n://`` and ``file://`` URIs.

S3A, S3N and S3 are three Hadoop names for the same object store, so two locations are the same
place when bucket and key match, whatever the scheme. Local paths count as one bucket, named
``_local``, so the inventory schema (bucket, key) covers both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from core.errors import ConfigError

T = TypeVar("T")

S3_SCHEMES = ("s3", "s3a", "s3n")
SUPPORTED_SCHEMES = (*S3_SCHEMES, "file")
# Local paths share one pseudo-bucket; "_" is not allowed in S3 bucket names, so it never clashes.
LOCAL_BUCKET = "_local"


@dataclass(frozen=True)
class StorageLocation:
    """A parsed location: ``scheme://bucket/key`` with the key free of leading/trailing slashes."""

    scheme: str
    bucket: str
    key: str

    @classmethod
    def parse(cls, uri: str, *, what: str = "location") -> StorageLocation:
        """Parse ``uri``; raise :class:`ConfigError` naming ``what`` when it is not supported.

        >>> StorageLocation.parse("s3://bucket/warehouse/events/")
        StorageLocation(scheme='s3', bucket='bucket', key='warehouse/events')
        """
        text = uri.strip()
        if text.lower().startswith("file:"):
            # file:///abs, file:/abs (Hadoop's qualified form) and file://localhost/abs
            path = text[5:]
            if path.startswith("//localhost/"):
                path = path[len("//localhost") :]
            if not path.startswith("/") or path.startswith("//") and not path.startswith("///"):
                raise ConfigError(f"{what} {uri!r}: file:// URIs take an absolute path")
            return cls("file", LOCAL_BUCKET, path.strip("/"))
        scheme, separator, rest = text.partition("://")
        scheme = scheme.lower()
        if not separator or scheme not in SUPPORTED_SCHEMES:
            raise ConfigError(f"{what} {uri!r} must start with s3://, s3a://, s3n:// or file://")
        # Split by hand: '#', '?' and '%' are legal in S3 keys and must not be read as URL syntax.
        netloc, _, key = rest.partition("/")
        if not netloc:
            raise ConfigError(f"{what} {uri!r} has no bucket name")
        return cls(scheme, netloc, key.strip("/"))

    @property
    def is_s3(self) -> bool:
        return self.scheme in S3_SCHEMES

    @property
    def uri(self) -> str:
        """The location written back as a URI (``file:///abs/path`` for local paths)."""
        if self.scheme == "file":
            return f"file:///{self.key}"
        return f"{self.scheme}://{self.bucket}/{self.key}" if self.key else f"{self.scheme}://{self.bucket}"

    def sibling(self, name: str) -> StorageLocation:
        """A location next to this one: ``s3://b/w/inventory`` -> ``s3://b/w/<name>``."""
        parent = self.key.rsplit("/", 1)[0] if "/" in self.key else ""
        return StorageLocation(self.scheme, self.bucket, f"{parent}/{name}" if parent else name)

    def same_place(self, other: StorageLocation) -> bool:
        """True when both name the same store, bucket and key (s3, s3a and s3n are one store)."""
        return (self.is_s3 == other.is_s3) and self.bucket == other.bucket and self.key == other.key

    def contains(self, other: StorageLocation) -> bool:
        """True when ``other`` is this location or lies below it on a path-component boundary."""
        if self.is_s3 != other.is_s3 or self.bucket != other.bucket:
            return False
        return not self.key or other.key == self.key or other.key.startswith(self.key + "/")


def overlapping_pair(items: Sequence[T], location: Callable[[T], StorageLocation]) -> tuple[T, T] | None:
    """Two of ``items`` one of whose ``location`` contains the other's (or is the same), or None.

    In the order of (store, bucket, key + '/'), the paths below a folder ``w/t/`` come right after
    it, one run, so when any path contains another, two neighbours do: a sort, not every pair
    (10,000 tables are 50 million pairs).
    """

    def order(item: T) -> tuple[bool, str, str]:
        place = location(item)
        return (place.is_s3, place.bucket, f"{place.key}/" if place.key else "")

    ordered = sorted(items, key=order)
    for first, second in zip(ordered, ordered[1:], strict=False):
        if location(first).contains(location(second)):
            return first, second
    return None
