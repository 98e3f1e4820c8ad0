"""The table registry, ``tables.yaml``: which Delta tables exist, where, and who owns them.

::

    tables:
      - name: events
        path: s3://lake/warehouse/events
        owner: growth
        retain_hours: 168     # optional; default: the table's delta.deletedFileRetentionDuration
        enabled: true         # optional; disabled tables are skipped by a vacuum of "all tables"

The registry is the only way a path becomes vacuumable: the vacuum job never touches a location
that is not registered here. No registered path may contain another, so every object belongs to at
most one table, and "longest prefix" and "only prefix" are the same thing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from core.errors import ConfigError, UsageError
from core.paths import StorageLocation, overlapping_pair

_REQUIRED_KEYS = ("name", "path", "owner")
_OPTIONAL_KEYS = ("retain_hours", "enabled")


@dataclass(frozen=True)
class RegisteredTable:
    """One entry of tables.yaml."""

    name: str
    path: str
    location: StorageLocation
    owner: str
    retain_hours: float | None = None
    enabled: bool = True


@dataclass(frozen=True)
class TableRegistry:
    """All registered tables, validated: unique names, supported schemes, no nested paths."""

    tables: tuple[RegisteredTable, ...]
    source: str = "tables.yaml"

    def __post_init__(self) -> None:
        seen: dict[str, RegisteredTable] = {}
        for table in self.tables:
            if table.name in seen:
                raise ConfigError(f"{self.source}: table name {table.name!r} appears twice")
            seen[table.name] = table
        overlap = overlapping_pair(self.tables, lambda table: table.location)
        if overlap:
            first, second = overlap
            raise ConfigError(
                f"{self.source}: table {first.name!r} ({first.path}) and table "
                f"{second.name!r} ({second.path}) overlap: one path contains the other"
            )

    def get(self, name: str) -> RegisteredTable:
        """The table called ``name``; a :class:`UsageError` when it is not registered."""
        for table in self.tables:
            if table.name == name:
                return table
        raise UsageError(f"table {name!r} is not registered in {self.source}")

    def select(self, names: Sequence[str] | None) -> list[RegisteredTable]:
        """The named tables (all must be registered), or every enabled table when none are named."""
        if names:
            return [self.get(name) for name in dict.fromkeys(names)]
        return [table for table in self.tables if table.enabled]


def load_registry(source: str) -> TableRegistry:
    """Read and validate a tables.yaml from a local path or an ``s3://`` URI.

    Example::

        registry = load_registry("tables.yaml")
        registry.get("events").location.bucket
    """
    if source.startswith(("s3://", "s3a://", "s3n://")):
        from core.s3 import read_object_text

        text = read_object_text(StorageLocation.parse(source, what="tables file"))
    else:
        try:
            text = Path(source).read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"cannot read tables file {source}: {error.strerror}") from None
    return parse_registry(text, source)


def parse_registry(text: str, source: str = "tables.yaml") -> TableRegistry:
    """Validate the YAML text of a registry; every problem is a one-line :class:`ConfigError`."""
    try:
        # libyaml's parser (in PyYAML's wheels) where present: the pure-Python one took 7.6 s of
        # the 7.9 s that a registry of 10,000 tables took to load
        document = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{source}: not valid YAML{where}") from None
    if not isinstance(document, dict) or "tables" not in document:
        raise ConfigError(f"{source}: expected a mapping with a 'tables' list")
    unknown = sorted(set(document) - {"tables"})
    if unknown:
        raise ConfigError(f"{source}: unknown top-level key(s) {', '.join(unknown)}")
    entries = document["tables"]
    if not isinstance(entries, list):
        raise ConfigError(f"{source}: 'tables' must be a list")
    return TableRegistry(
        tuple(_parse_entry(entry, index, source) for index, entry in enumerate(entries)), source
    )


def _parse_entry(entry: Any, index: int, source: str) -> RegisteredTable:
    where = f"{source}: tables[{index}]"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} must be a mapping with name, path and owner")
    unknown = sorted(set(entry) - set(_REQUIRED_KEYS) - set(_OPTIONAL_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(str, unknown))}")
    for key in _REQUIRED_KEYS:
        value = entry.get(key)
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{where}: '{key}' is required and must be a non-empty string")
    name = entry["name"].strip()
    where = f"{source}: table {name!r}"
    location = StorageLocation.parse(entry["path"], what=f"{where}: path")
    if not location.key:
        raise ConfigError(f"{where}: path {entry['path']!r} is a whole bucket, not a table")
    retain_hours = entry.get("retain_hours")
    if retain_hours is not None and (
        isinstance(retain_hours, bool)
        or not isinstance(retain_hours, int | float)
        or not math.isfinite(retain_hours)
        or retain_hours < 0
    ):
        raise ConfigError(
            f"{where}: retain_hours must be a finite number of hours >= 0, not {retain_hours!r}"
        )
    enabled = entry.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError(f"{where}: enabled must be true or false")
    return RegisteredTable(
        name=name,
        path=entry["path"].strip(),
        location=location,
        owner=entry["owner"].strip(),
        retain_hours=float(retain_hours) if retain_hours is not None else None,
        enabled=enabled,
    )
