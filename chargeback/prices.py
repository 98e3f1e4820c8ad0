"""Price files: how each storage class is billed, and what an aggregated row of objects costs.

The packaged ``chargeback/prices/aws-us-east-1.yaml`` holds AWS's us-east-1 list prices; ``--prices``
names another file of the same shape. Every class of :data:`REQUIRED_CLASSES` must be priced, and
``INTELLIGENT_TIERING`` per access tier (:data:`REQUIRED_TIERS`).

Example::

    prices = load_prices()                       # the packaged list prices
    prices.rule("GLACIER").overhead_bytes        # 32768, billed at GLACIER's price
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from core.errors import ConfigError
from inventory.usage import DELETE_MARKER, SMALL_OBJECT_BYTES, USAGE_SUMS

GIB = 1 << 30  # AWS bills storage per GB-month with 1 GB = 2^30 bytes
NO_CLASS = "(none)"  # a row whose storage_class is null
INTELLIGENT_TIERING = "INTELLIGENT_TIERING"
DEFAULT_TIER = "FREQUENT"
REQUIRED_CLASSES = (
    "STANDARD",
    "REDUCED_REDUNDANCY",
    "STANDARD_IA",
    "ONEZONE_IA",
    INTELLIGENT_TIERING,
    "GLACIER_IR",
    "GLACIER",
    "DEEP_ARCHIVE",
)
REQUIRED_TIERS = ("FREQUENT", "INFREQUENT", "ARCHIVE_INSTANT_ACCESS", "ARCHIVE_ACCESS", "DEEP_ARCHIVE_ACCESS")
DEFAULT_PRICES = "aws-us-east-1.yaml"
PRICES_VIEW_SCHEMA = (
    "price_key string, price_per_gb_month double, minimum_billable_bytes bigint, overhead_bytes bigint, "
    "standard_overhead_bytes bigint, monitoring_per_object double, monitoring_minimum_bytes bigint"
)


@dataclass(frozen=True)
class PriceRule:
    """How one storage class (or Intelligent-Tiering access tier) is billed per object."""

    key: str  # STANDARD, GLACIER, INTELLIGENT_TIERING:FREQUENT, ...
    price_per_gb_month: float
    minimum_billable_bytes: int = 0
    overhead_bytes: int = 0  # billed at this class's price
    standard_overhead_bytes: int = 0  # billed at the STANDARD price
    monitoring_per_object: float = 0.0  # per object and month (Intelligent-Tiering)
    monitoring_minimum_bytes: int = 0


@dataclass(frozen=True)
class PriceTable:
    """A validated price file: every class of :data:`REQUIRED_CLASSES`, no negative number."""

    rules: tuple[PriceRule, ...]
    currency: str
    prices_as_of: str
    region: str
    source: str
    file: str

    def rule(self, key: str) -> PriceRule | None:
        return next((r for r in self.rules if r.key == key), None)

    @property
    def standard(self) -> PriceRule:
        standard = self.rule("STANDARD")
        assert standard is not None  # parse_prices requires it
        return standard

    def rows(self) -> list[tuple[str, float, int, int, int, float, int]]:
        """The ``prices`` view the shipped ``.sql`` files join against (:data:`PRICES_VIEW_SCHEMA`)."""
        return [
            (
                r.key,
                r.price_per_gb_month,
                r.minimum_billable_bytes,
                r.overhead_bytes,
                r.standard_overhead_bytes,
                r.monitoring_per_object,
                r.monitoring_minimum_bytes,
            )
            for r in self.rules
        ]


def default_prices_file() -> str:
    return str(resources.files("chargeback") / "prices" / DEFAULT_PRICES)


def load_prices(path: str | None = None) -> PriceTable:
    """Read and validate a price file (the packaged AWS us-east-1 list prices when ``path`` is None).

    A missing class, a missing or negative price, or a malformed file is a one-line
    :class:`ConfigError` (exit 2).
    """
    source = path or default_prices_file()
    try:
        if path is None:  # package data, also inside a zip shipped with --py-files (no real file)
            text = (resources.files("chargeback") / "prices" / DEFAULT_PRICES).read_text(encoding="utf-8")
        else:
            text = Path(source).read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot read price file {source}: {error.strerror}") from None
    return parse_prices(text, source)


def parse_prices(text: str, source: str = "prices.yaml") -> PriceTable:
    """A :class:`PriceTable` from a price file's text; ``source`` names it in error messages."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        raise ConfigError(f"price file {source}: not valid YAML") from None
    if not isinstance(document, dict) or not isinstance(document.get("storage_classes"), dict):
        raise ConfigError(f"price file {source}: expected a mapping with a 'storage_classes' mapping")
    classes: dict[str, Any] = document["storage_classes"]
    missing = [name for name in REQUIRED_CLASSES if name not in classes]
    if missing:
        raise ConfigError(f"price file {source}: missing storage class(es) {', '.join(missing)}")
    rules: list[PriceRule] = []
    for name, entry in classes.items():
        where = f"price file {source}: {name}"
        if name == INTELLIGENT_TIERING:
            rules.extend(_tier_rules(entry, where))
        else:
            rules.append(_rule(str(name), entry, where))
    return PriceTable(
        rules=tuple(rules),
        currency=str(document.get("currency", "USD")),
        prices_as_of=str(document.get("prices_as_of", "unknown")),
        region=str(document.get("region", "")),
        source=str(document.get("source", "")),
        file=source,
    )


def _tier_rules(entry: Any, where: str) -> list[PriceRule]:
    if not isinstance(entry, dict) or not isinstance(entry.get("access_tiers"), dict):
        raise ConfigError(f"{where}: expected an 'access_tiers' mapping")
    tiers: dict[str, Any] = entry["access_tiers"]
    missing = [tier for tier in REQUIRED_TIERS if tier not in tiers]
    if missing:
        raise ConfigError(f"{where}: missing access tier(s) {', '.join(missing)}")
    per_thousand = _number(entry, "monitoring_per_1000_objects", where, default=0.0)
    minimum = int(_number(entry, "monitoring_minimum_bytes", where, default=0))
    return [
        _rule(
            f"{INTELLIGENT_TIERING}:{tier}",
            value,
            f"{where}: {tier}",
            monitoring_per_object=per_thousand / 1000,
            monitoring_minimum_bytes=minimum,
        )
        for tier, value in tiers.items()
    ]


def _rule(key: str, entry: Any, where: str, **extra: Any) -> PriceRule:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a mapping with price_per_gb_month")
    unknown = sorted(
        set(entry)
        - {"price_per_gb_month", "minimum_billable_bytes", "overhead_bytes", "standard_overhead_bytes"}
    )
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(str, unknown))}")
    return PriceRule(
        key=key,
        price_per_gb_month=_number(entry, "price_per_gb_month", where),
        minimum_billable_bytes=int(_number(entry, "minimum_billable_bytes", where, default=0)),
        overhead_bytes=int(_number(entry, "overhead_bytes", where, default=0)),
        standard_overhead_bytes=int(_number(entry, "standard_overhead_bytes", where, default=0)),
        **extra,
    )


def _number(entry: Mapping[str, Any], name: str, where: str, default: float | None = None) -> float:
    value = entry.get(name, default)
    if value is None:
        raise ConfigError(f"{where}: '{name}' is required")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{where}: '{name}' must be a number, not {value!r}")
    if value < 0:
        raise ConfigError(f"{where}: '{name}' is negative ({value!r}); prices and sizes must be >= 0")
    return float(value)


def price_key(storage_class: str | None, access_tier: str | None) -> str:
    """STANDARD, GLACIER, ..., ``INTELLIGENT_TIERING:<access tier>`` (none given: FREQUENT), for one
    aggregated row (:func:`chargeback.grouping.price_key_column` does the same per object)."""
    if storage_class is None:
        return NO_CLASS
    if storage_class == INTELLIGENT_TIERING:
        return f"{INTELLIGENT_TIERING}:{access_tier or DEFAULT_TIER}"
    return storage_class


def usage_cost(row: Any, prices: PriceTable, warnings: list[str]) -> float:
    """The monthly cost of one usage row (:mod:`inventory.usage`), billed as
    :func:`chargeback.grouping.priced_objects` bills its objects one by one.

    Exact for AWS's minimum sizes (128 KB, the size the usage rows count small objects below);
    a price file with another minimum is applied to the objects under 128 KB, with a warning.
    Delete markers cost nothing here (AWS bills only their key names).
    """
    if row["state"] == DELETE_MARKER:
        return 0.0
    key = price_key(row["storage_class"], row["intelligent_tiering_access_tier"])
    rule = prices.rule(key) or prices.standard
    objects, size, small_objects, small_bytes = (row[name] or 0 for name in USAGE_SUMS)
    for minimum in {rule.minimum_billable_bytes, rule.monitoring_minimum_bytes} - {0, SMALL_OBJECT_BYTES}:
        message = (
            f"price file {prices.file}: {key}'s minimum of {minimum} bytes is applied to aggregated "
            f"rows (noncurrent versions, the trend) as if it were {SMALL_OBJECT_BYTES}"
        )
        if message not in warnings:
            warnings.append(message)
    billable = size + objects * rule.overhead_bytes
    if rule.minimum_billable_bytes:
        billable += small_objects * rule.minimum_billable_bytes - small_bytes
    monitored = 0
    if row["storage_class"] == INTELLIGENT_TIERING:
        monitored = objects - small_objects if rule.monitoring_minimum_bytes else objects
    return (
        billable * rule.price_per_gb_month
        + objects * rule.standard_overhead_bytes * prices.standard.price_per_gb_month
    ) / GIB + monitored * rule.monitoring_per_object
