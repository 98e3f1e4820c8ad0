"""Storage-cost chargeback: who owns every byte of the inventory, and what it costs a month.

Pure DataFrame transforms over the inventory table (one aggregation, so one pass over the data),
priced from a price table (``inventory/prices/aws-us-east-1.yaml`` unless ``--prices``):

- each object is priced by its storage class; ``INTELLIGENT_TIERING`` by its access tier
  (``intelligent_tiering_access_tier``; none given: the Frequent Access tier, with a warning);
- an object smaller than its class's ``minimum_billable_bytes`` (128 KB for STANDARD_IA,
  ONEZONE_IA, GLACIER_IR) is billed as that size;
- archive classes add ``overhead_bytes`` per object at their own price and
  ``standard_overhead_bytes`` at the STANDARD price (GLACIER, DEEP_ARCHIVE: 32 KB + 8 KB);
- Intelligent-Tiering's monitoring fee is charged per object of at least ``monitoring_minimum_bytes``;
- a storage class the price table does not know is priced at STANDARD, with a warning, never at 0.

Objects under no registered table form the group ``unowned``, broken down by top-level prefix.
Reclaimable bytes per table come from the newest dry run in ``vacuum_runs``; noncurrent versions
from the newest ``inventory_runs`` row per bucket (the inventory table holds current versions only).

Example::

    prices = load_prices()                      # the packaged AWS us-east-1 list prices
    report = chargeback(spark, "s3://meta/warehouse/inventory", load_registry("tables.yaml"),
                        parse_group_by("owner"), prices)
    report.to_dict()["groups"][0]   # {"group": "growth", "objects": ..., "monthly_cost": ...}
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from core.errors import ConfigError, InventoryTableError, UsageError, spark_error_summary
from core.registry import TableRegistry
from inventory.schema import prefix_column, with_optional_columns
from inventory.usage import (
    CURRENT,
    DELETE_MARKER,
    OPTIONAL_COLUMNS,
    SMALL_OBJECT_BYTES,
    USAGE_SCHEMA,
    USAGE_SUMS,
    read_usage,
    usage_from_inventory_versions,
)

log = logging.getLogger("inventory_vacuum")

GIB = 1 << 30  # AWS bills storage per GB-month with 1 GB = 2^30 bytes
UNOWNED = "unowned"
UNKNOWN_OWNER = "unknown"  # a table named in the inventory that tables.yaml no longer registers
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
GROUP_KINDS = ("table", "owner", "bucket", "storage_class", "prefix")
DEFAULT_PRICES = "aws-us-east-1.yaml"
REQUIRED_COLUMNS = ("bucket", "key", "length", "storage_class")
SQL_QUERIES = ("cost_by_table", "cost_by_owner", "cost_by_storage_class")
DEFAULT_TREND_DAYS = 30
TREND_TOP_TABLES = 10


# ---------------------------------------------------------------------------------------------
# Prices


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
        assert standard is not None  # load_prices requires it
        return standard

    def rows(self) -> list[tuple[str, float, int, int, int, float, int]]:
        """The ``prices`` view the shipped ``.sql`` files join against, one row per rule."""
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


PRICES_VIEW_SCHEMA = (
    "price_key string, price_per_gb_month double, minimum_billable_bytes bigint, overhead_bytes bigint, "
    "standard_overhead_bytes bigint, monitoring_per_object double, monitoring_minimum_bytes bigint"
)


def default_prices_file() -> str:
    return str(resources.files("inventory") / "prices" / DEFAULT_PRICES)


def load_prices(path: str | None = None) -> PriceTable:
    """Read and validate a price file (the packaged AWS us-east-1 list prices when ``path`` is None).

    A missing class, a missing or negative price, or a malformed file is a one-line
    :class:`ConfigError` (exit 2).
    """
    source = path or default_prices_file()
    try:
        if path is None:  # package data, also inside a zip shipped with --py-files (no real file)
            text = (resources.files("inventory") / "prices" / DEFAULT_PRICES).read_text(encoding="utf-8")
        else:
            text = Path(source).read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot read price file {source}: {error.strerror}") from None
    return parse_prices(text, source)


def parse_prices(text: str, source: str = "prices.yaml") -> PriceTable:
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


# ---------------------------------------------------------------------------------------------
# Grouping


@dataclass(frozen=True)
class GroupBy:
    """What ``--by`` asks for: ``table``, ``owner``, ``bucket``, ``storage_class`` or ``prefix:DEPTH``."""

    kind: str
    depth: int = 1

    @property
    def name(self) -> str:
        return f"prefix:{self.depth}" if self.kind == "prefix" else self.kind


def parse_group_by(text: str) -> GroupBy:
    """``"owner"`` -> GroupBy("owner"); ``"prefix:2"`` -> GroupBy("prefix", 2); else a UsageError."""
    kind, _, depth = text.strip().partition(":")
    if kind in GROUP_KINDS and not depth and kind != "prefix":
        return GroupBy(kind)
    if kind == "prefix" and (not depth or (depth.isdigit() and int(depth) >= 1)):
        return GroupBy("prefix", int(depth) if depth else 1)
    raise UsageError(
        f"--by {text!r}: expected table, owner, bucket, storage_class or prefix[:DEPTH] (DEPTH >= 1)"
    )


def owner_column(registry: TableRegistry | None) -> Column:
    """The owner of each object's table from tables.yaml; ``unowned`` for objects of no table.

    One map lookup, not a CASE per table: thousands of tables would nest thousands of
    expressions deep (a StackOverflowError in Spark's analyzer at about a thousand).
    """
    owners = sorted({t.name: t.owner for t in registry.tables}.items()) if registry else []
    owner: Column = F.lit(UNKNOWN_OWNER)
    if owners:
        mapping = F.create_map(*[F.lit(value) for pair in owners for value in pair])
        owner = F.coalesce(F.try_element_at(mapping, F.col("table")), owner)
    return F.when(F.col("table").isNull(), F.lit(UNOWNED)).otherwise(owner)


def group_column(by: GroupBy, registry: TableRegistry | None) -> Column:
    if by.kind == "table":
        return F.coalesce(F.col("table"), F.lit(UNOWNED))
    if by.kind == "owner":
        return owner_column(registry)
    if by.kind == "bucket":
        return F.col("bucket")
    if by.kind == "storage_class":
        return F.coalesce(F.col("storage_class"), F.lit(NO_CLASS))
    return prefix_column(by.depth)


def price_key_column() -> Column:
    """STANDARD, GLACIER, ..., ``INTELLIGENT_TIERING:<access tier>`` (none given: FREQUENT)."""
    storage_class = F.col("storage_class")
    return (
        F.when(storage_class.isNull(), F.lit(NO_CLASS))
        .when(
            storage_class == INTELLIGENT_TIERING,
            F.concat(
                F.lit(f"{INTELLIGENT_TIERING}:"),
                F.coalesce(F.col("intelligent_tiering_access_tier"), F.lit(DEFAULT_TIER)),
            ),
        )
        .otherwise(storage_class)
    )


def _by_rule(key: Column, prices: PriceTable, attribute: str, default: Any) -> Column:
    value: Column = F.lit(default)
    for rule in prices.rules[::-1]:
        value = F.when(key == rule.key, F.lit(getattr(rule, attribute))).otherwise(value)
    return value


def priced_objects(
    inventory: DataFrame, prices: PriceTable, by: GroupBy, registry: TableRegistry | None
) -> DataFrame:
    """One row per current object with what it is billed for (no prices multiplied in yet).

    Columns: ``group, table, unowned_prefix, price_key, length, billable_bytes`` (at the class's
    price: minimum size and archive overhead applied), ``standard_overhead_bytes`` (at the STANDARD
    price), ``monitored`` (1 when Intelligent-Tiering monitors it), ``untiered`` (1 for an
    Intelligent-Tiering object without an access tier).
    """
    key = price_key_column()
    length = F.coalesce(F.col("length"), F.lit(0)).cast("long")
    minimum = _by_rule(key, prices, "minimum_billable_bytes", 0).cast("long")
    return inventory.select(
        group_column(by, registry).alias("group"),
        F.struct("bucket", "inventory_date").alias("bucket_date"),
        F.col("table"),
        F.when(F.col("table").isNull(), prefix_column(1)).alias("unowned_prefix"),
        key.alias("price_key"),
        length.alias("length"),
        (F.greatest(length, minimum) + _by_rule(key, prices, "overhead_bytes", 0).cast("long")).alias(
            "billable_bytes"
        ),
        _by_rule(key, prices, "standard_overhead_bytes", 0).cast("long").alias("standard_overhead_bytes"),
        F.when(
            (F.col("storage_class") == INTELLIGENT_TIERING)
            & (length >= _by_rule(key, prices, "monitoring_minimum_bytes", 0)),
            1,
        )
        .otherwise(0)
        .alias("monitored"),
        F.when(
            (F.col("storage_class") == INTELLIGENT_TIERING)
            & F.col("intelligent_tiering_access_tier").isNull(),
            1,
        )
        .otherwise(0)
        .alias("untiered"),
    )


def aggregate(objects: DataFrame) -> DataFrame:
    """Sum :func:`priced_objects` by group, table, unowned prefix and price key (the one shuffle)."""
    return objects.groupBy("group", "table", "unowned_prefix", "price_key").agg(
        F.count(F.lit(1)).alias("objects"),
        F.sum("length").alias("bytes"),
        F.sum("billable_bytes").alias("billable_bytes"),
        F.sum("standard_overhead_bytes").alias("standard_overhead_bytes"),
        F.sum("monitored").alias("monitored_objects"),
        F.sum("untiered").alias("untiered_objects"),
        F.collect_set("bucket_date").alias("bucket_dates"),
    )


# ---------------------------------------------------------------------------------------------
# Reading


def read_inventory_for_chargeback(spark: SparkSession, location: str) -> DataFrame:
    """The current objects of the inventory table; an :class:`InventoryTableError` (exit 2) when it
    cannot be read or lacks a column the chargeback needs (``storage_class`` above all)."""
    try:
        frame = spark.read.format("delta").load(location)
        columns = set(frame.columns)
    except Exception as error:
        raise InventoryTableError(
            f"inventory table {location} cannot be read: {spark_error_summary(error)}"
        ) from None
    missing = [name for name in REQUIRED_COLUMNS if name not in columns]
    if missing:
        raise InventoryTableError(
            f"inventory table {location} lacks column(s) {', '.join(missing)}: "
            "not an inventory-vacuum inventory table, nothing to price"
        )
    frame = with_optional_columns(frame, OPTIONAL_COLUMNS)
    current = F.coalesce(F.col("is_latest"), F.lit(True)) & ~F.coalesce(
        F.col("is_delete_marker"), F.lit(False)
    )
    return frame.where(current)


def _read_history(spark: SparkSession, location: str, what: str, warnings: list[str]) -> DataFrame | None:
    try:
        frame = spark.read.format("delta").load(location)
        frame.columns  # noqa: B018 - resolves the table now, inside the try
    except Exception as error:
        warnings.append(f"no {what} at {location} ({spark_error_summary(error)[:120]})")
        return None
    return frame


# ---------------------------------------------------------------------------------------------
# Results


@dataclass
class Tally:
    """Objects, bytes and monthly cost of one group, optionally split by storage class."""

    objects: int = 0
    bytes: int = 0
    monthly_cost: float = 0.0
    storage_classes: dict[str, Tally] = field(default_factory=dict)

    def add(self, price_key: str | None, objects: int, size: int, cost: float) -> None:
        self.objects += objects
        self.bytes += size
        self.monthly_cost += cost
        if price_key is not None:
            self.storage_classes.setdefault(price_key, Tally()).add(None, objects, size, cost)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "objects": self.objects,
            "bytes": self.bytes,
            "monthly_cost": _money(self.monthly_cost),
        }
        if self.storage_classes:
            data["storage_classes"] = {
                name: tally.to_dict() for name, tally in sorted(self.storage_classes.items())
            }
        return data


def _money(value: float) -> float:
    return round(value, 10)


def _ranked(tallies: Mapping[str, Tally]) -> list[tuple[str, Tally]]:
    return sorted(tallies.items(), key=lambda item: (-item[1].monthly_cost, -item[1].bytes, item[0]))


@dataclass
class ChargebackReport:
    """The chargeback of one inventory: ``to_dict()`` is the ``--format json`` document."""

    by: str
    currency: str
    prices_as_of: str
    price_file: str
    inventory_table: str
    groups: dict[str, Tally] = field(default_factory=dict)
    by_owner: dict[str, Tally] = field(default_factory=dict)
    by_table: dict[str, Tally] = field(default_factory=dict)
    unowned: Tally = field(default_factory=Tally)
    unowned_prefixes: dict[str, Tally] = field(default_factory=dict)
    noncurrent: dict[str, Any] = field(default_factory=dict)
    trend: dict[str, Any] = field(default_factory=dict)
    reclaimable: list[dict[str, Any]] = field(default_factory=list)
    # the inventory date of each bucket's delivery in the inventory table (from the aggregation)
    bucket_dates: dict[str, Any] = field(default_factory=dict)
    totals: Tally = field(default_factory=Tally)
    warnings: list[str] = field(default_factory=list)

    def ranked_groups(self) -> list[tuple[str, Tally]]:
        return _ranked(self.groups)

    def to_dict(self) -> dict[str, Any]:
        reclaimable_bytes = sum(r["bytes"] or 0 for r in self.reclaimable)
        reclaimable_cost = sum(r["monthly_cost"] or 0.0 for r in self.reclaimable)
        return {
            "by": self.by,
            "currency": self.currency,
            "prices_as_of": self.prices_as_of,
            "price_file": self.price_file,
            "inventory_table": self.inventory_table,
            "groups": [{"group": name, **tally.to_dict()} for name, tally in self.ranked_groups()],
            "unowned": {
                **self.unowned.to_dict(),
                "prefixes": [
                    {"prefix": name, **tally.to_dict()} for name, tally in _ranked(self.unowned_prefixes)
                ],
            },
            "noncurrent": self.noncurrent,
            "reclaimable": self.reclaimable,
            "trend": self.trend,
            "totals": {
                **self.totals.to_dict(),
                "reclaimable_bytes": reclaimable_bytes,
                "reclaimable_monthly_cost": _money(reclaimable_cost),
                "noncurrent_monthly_cost": self.noncurrent.get("monthly_cost", 0.0),
            },
            "warnings": self.warnings,
        }


# ---------------------------------------------------------------------------------------------
# The chargeback


def chargeback(
    spark: SparkSession,
    inventory_table: str,
    registry: TableRegistry | None,
    by: GroupBy,
    prices: PriceTable,
    *,
    vacuum_runs_table: str | None = None,
    inventory_runs_table: str | None = None,
    usage_table: str | None = None,
    trend_days: int = DEFAULT_TREND_DAYS,
    computed_reclaimable: Sequence[Any] | None = None,
) -> ChargebackReport:
    """Group, count and price the inventory table (one Spark job over it), and add what the
    newest vacuum dry runs could reclaim and what noncurrent versions cost.

    ``vacuum_runs_table`` / ``inventory_runs_table``: the history tables (None: not read).
    ``usage_table``: the usage aggregate the ingest writes (:mod:`inventory.usage`): noncurrent
    versions per storage class and prefix, and the trend over the last ``trend_days`` days (0: no
    trend); days before it have rows come from older versions of the inventory table.
    ``computed_reclaimable``: vacuum dry runs made now (``vacuum.results.TableRun``), used
    instead of the newest ones in ``vacuum_runs``.
    """
    inventory = read_inventory_for_chargeback(spark, inventory_table)
    if by.kind == "owner":
        # an owner is its table's: summed by table, then looked up once per table, not per object
        summed = aggregate(priced_objects(inventory, prices, GroupBy("table"), registry))
        rows = summed.withColumn("group", owner_column(registry)).collect()
    else:
        rows = aggregate(priced_objects(inventory, prices, by, registry)).collect()
    report = ChargebackReport(
        by=by.name,
        currency=prices.currency,
        prices_as_of=prices.prices_as_of,
        price_file=prices.file,
        inventory_table=inventory_table,
    )
    _price_rows([r.asDict() for r in rows], prices, registry, report)
    for row in rows:
        for pair in row["bucket_dates"] or ():
            known = report.bucket_dates.get(pair["bucket"])
            if known is None or (pair["inventory_date"] is not None and pair["inventory_date"] > known):
                report.bucket_dates[pair["bucket"]] = pair["inventory_date"]
    if computed_reclaimable is not None:
        report.reclaimable = reclaimable_computed(computed_reclaimable, report, prices, report.warnings)
    elif vacuum_runs_table:
        report.reclaimable = reclaimable(spark, vacuum_runs_table, report, prices, report.warnings)
    usage = read_usage(spark, usage_table) if usage_table else None
    if usage is not None:
        report.noncurrent = noncurrent_from_usage(usage, prices, registry, report)
        missing = sorted(set(report.bucket_dates) - {b["bucket"] for b in report.noncurrent["buckets"]})
        if missing:
            report.warnings.append(
                f"bucket(s) {', '.join(missing)} have no rows in the usage table {usage_table} for their "
                "delivery (ingested by an older version, or its usage write failed): their noncurrent "
                "versions come from inventory_runs, and the trend leaves them out"
            )
            if inventory_runs_table:
                _merge_noncurrent(
                    report.noncurrent,
                    noncurrent(spark, inventory_runs_table, prices, report.warnings),
                    missing,
                )
    elif inventory_runs_table:
        report.noncurrent = noncurrent(spark, inventory_runs_table, prices, report.warnings)
    if trend_days > 0:
        report.trend = trend(spark, usage, inventory_table, prices, registry, report, trend_days)
    for warning in report.warnings:
        log.warning("chargeback: %s", warning)
    return report


def row_cost(row: Mapping[str, Any], prices: PriceTable) -> float:
    """The monthly cost of one aggregated row (sums of :func:`priced_objects`)."""
    rule = prices.rule(row["price_key"]) or prices.standard
    return (
        row["billable_bytes"] * rule.price_per_gb_month
        + row["standard_overhead_bytes"] * prices.standard.price_per_gb_month
    ) / GIB + row["monitored_objects"] * rule.monitoring_per_object


def _price_rows(
    rows: Iterable[Mapping[str, Any]],
    prices: PriceTable,
    registry: TableRegistry | None,
    report: ChargebackReport,
) -> None:
    owners = {t.name: t.owner for t in registry.tables} if registry else {}
    unpriced: dict[str, int] = {}
    untiered = 0
    unregistered: set[str] = set()
    for row in rows:
        key, objects, size = row["price_key"], row["objects"], row["bytes"]
        cost = row_cost(row, prices)
        if prices.rule(key) is None:
            unpriced[key] = unpriced.get(key, 0) + objects
        untiered += row["untiered_objects"]
        table = row["table"]
        if table is not None and table not in owners:
            unregistered.add(table)
        owner = UNOWNED if table is None else owners.get(table, UNKNOWN_OWNER)
        report.groups.setdefault(row["group"], Tally()).add(key, objects, size, cost)
        report.by_owner.setdefault(owner, Tally()).add(key, objects, size, cost)
        report.by_table.setdefault(table or UNOWNED, Tally()).add(key, objects, size, cost)
        report.totals.add(key, objects, size, cost)
        if table is None:
            report.unowned.add(key, objects, size, cost)
            report.unowned_prefixes.setdefault(row["unowned_prefix"], Tally()).add(key, objects, size, cost)
    for key, objects in sorted(unpriced.items()):
        report.warnings.append(
            f"storage class {key} is not in the price table {prices.file}: "
            f"its {objects} object(s) are priced at STANDARD"
        )
    if untiered:
        report.warnings.append(
            f"{untiered} INTELLIGENT_TIERING object(s) have no access tier in the inventory: "
            "priced at the Frequent Access tier"
        )
    for table in sorted(unregistered):
        report.warnings.append(
            f"table {table!r} of the inventory is not in tables.yaml: its owner is reported as {UNKNOWN_OWNER!r}"
        )


def reclaimable(
    spark: SparkSession, location: str, report: ChargebackReport, prices: PriceTable, warnings: list[str]
) -> list[dict[str, Any]]:
    """Per table, what the newest successful vacuum dry run planned to delete, priced at the
    table's own average cost per byte (STANDARD when the inventory shows none of its bytes).

    A dry run followed by a successful real vacuum is left out: those files are gone.
    """
    runs = _read_history(spark, location, "vacuum_runs history", warnings)
    if runs is None:
        return []
    ok = runs.where(F.col("status") == "ok")
    newest_dry = (
        ok.where(F.col("dry_run"))
        .groupBy("table")
        .agg(F.max_by(F.struct("run_at", "planned_files", "planned_bytes"), "run_at").alias("dry"))
    )
    newest_real = ok.where(~F.col("dry_run")).groupBy("table").agg(F.max("run_at").alias("real_at"))
    rows = (
        newest_dry.join(newest_real, "table", "left")
        .where(F.col("real_at").isNull() | (F.col("real_at") < F.col("dry.run_at")))
        .select("table", "dry.run_at", "dry.planned_files", "dry.planned_bytes")
        .orderBy("table")
        .collect()
    )
    result = [
        _reclaimable_entry(
            row["table"],
            row["planned_files"],
            row["planned_bytes"],
            "vacuum_runs",
            row["run_at"].isoformat() if row["run_at"] else None,
            report,
            prices,
        )
        for row in rows
    ]
    return sorted(result, key=lambda r: (-(r["bytes"] or 0), r["table"]))


def reclaimable_computed(
    runs: Sequence[Any], report: ChargebackReport, prices: PriceTable, warnings: list[str]
) -> list[dict[str, Any]]:
    """Per table, what a vacuum dry run made now plans to delete (``--reclaimable``); a table the
    vacuum refused or failed on is left out with a warning that says why."""
    now = datetime.now(timezone.utc).isoformat()
    result = []
    for run in runs:
        if run.status != "ok":
            warnings.append(f"reclaimable bytes of table {run.name} not computed: {run.status}: {run.reason}")
            continue
        result.append(
            _reclaimable_entry(
                run.name, run.planned_files, run.planned_bytes, "computed", now, report, prices
            )
        )
    return sorted(result, key=lambda r: (-(r["bytes"] or 0), r["table"]))


def _reclaimable_entry(
    table: str,
    files: int,
    size: int | None,
    source: str,
    run_at: str | None,
    report: ChargebackReport,
    prices: PriceTable,
) -> dict[str, Any]:
    """One reclaimable row, priced at the table's own average cost per byte (STANDARD when the
    inventory shows none of its bytes)."""
    tally = report.by_table.get(table)
    per_byte = (
        tally.monthly_cost / tally.bytes
        if tally is not None and tally.bytes
        else prices.standard.price_per_gb_month / GIB
    )
    return {
        "table": table,
        "files": files,
        "bytes": size,
        "monthly_cost": _money(size * per_byte) if size is not None else None,
        "from": source,
        "run_at": run_at,
    }


def noncurrent(spark: SparkSession, location: str, prices: PriceTable, warnings: list[str]) -> dict[str, Any]:
    """Noncurrent versions and delete markers per bucket, from the newest successful ingest of
    each bucket in ``inventory_runs``. Their storage class is not recorded: priced at STANDARD."""
    result: dict[str, Any] = {
        "from": "inventory_runs",
        "objects": 0,
        "bytes": 0,
        "delete_markers": 0,
        "monthly_cost": 0.0,
        "priced_as": "STANDARD",
        "buckets": [],
    }
    runs = _read_history(spark, location, "inventory_runs history", warnings)
    if runs is None:
        return result
    newest = (
        runs.where(F.col("status") == "ok")
        .groupBy("bucket")
        .agg(
            F.max_by(
                F.struct("noncurrent_objects", "noncurrent_bytes", "delete_markers", "inventory_taken_at"),
                "run_at",
            ).alias("n")
        )
        .select("bucket", "n.*")
        .orderBy("bucket")
        .collect()
    )
    price = prices.standard.price_per_gb_month / GIB
    for row in newest:
        objects, size, markers = (
            row[name] or 0 for name in ("noncurrent_objects", "noncurrent_bytes", "delete_markers")
        )
        result["buckets"].append(
            {
                "bucket": row["bucket"],
                "objects": objects,
                "bytes": size,
                "delete_markers": markers,
                "monthly_cost": _money(size * price),
                "inventory_taken_at": row["inventory_taken_at"].isoformat()
                if row["inventory_taken_at"]
                else None,
            }
        )
        result["objects"] += objects
        result["bytes"] += size
        result["delete_markers"] += markers
    result["monthly_cost"] = _money(result["bytes"] * price)
    return result


def price_key(storage_class: str | None, access_tier: str | None) -> str:
    """:func:`price_key_column` for one aggregated row."""
    if storage_class is None:
        return NO_CLASS
    if storage_class == INTELLIGENT_TIERING:
        return f"{INTELLIGENT_TIERING}:{access_tier or DEFAULT_TIER}"
    return storage_class


def usage_cost(row: Any, prices: PriceTable, warnings: list[str]) -> float:
    """The monthly cost of one usage row (:mod:`inventory.usage`), billed as :func:`priced_objects`
    bills its objects one by one.

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


def _owners(registry: TableRegistry | None) -> dict[str, str]:
    return {t.name: t.owner for t in registry.tables} if registry else {}


def noncurrent_from_usage(
    usage: DataFrame, prices: PriceTable, registry: TableRegistry | None, report: ChargebackReport
) -> dict[str, Any]:
    """Noncurrent versions and delete markers of the delivery each bucket has in the inventory
    table (its newest in the usage table for a bucket the inventory table no longer holds), per
    bucket and per owning table (or top-level prefix when under no table), priced by their own
    storage class."""
    warnings = report.warnings
    newest = usage.groupBy("bucket").agg(F.max("inventory_date").alias("newest_date"))
    chosen = usage.join(newest, "bucket")
    held = [(bucket, day) for bucket, day in report.bucket_dates.items() if day is not None]
    if held:
        dates = usage.sparkSession.createDataFrame(held, "bucket string, held_date date")
        chosen = chosen.join(F.broadcast(dates), "bucket", "left").withColumn(
            "newest_date", F.coalesce("held_date", "newest_date")
        )
    delivered = chosen.where(F.col("inventory_date") == F.col("newest_date")).select(
        *[f.name for f in USAGE_SCHEMA]
    )
    # one job: the noncurrent rows, and a row per bucket (state null) saying its delivery is there
    presence = [F.col("bucket")] + [
        F.lit(None).cast(f.dataType).alias(f.name) for f in USAGE_SCHEMA.fields[1:]
    ]
    collected = (
        delivered.where(F.col("state") != CURRENT)
        .unionByName(delivered.select("bucket").distinct().select(*presence))
        .collect()
    )
    present = {r["bucket"] for r in collected}
    rows = [r for r in collected if r["state"] is not None]
    owners = _owners(registry)
    buckets: dict[str, dict[str, Any]] = {}
    prefixes: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        cost = usage_cost(row, prices, warnings)
        markers = row["objects"] if row["state"] == DELETE_MARKER else 0
        objects = 0 if markers else row["objects"]
        entries = (
            buckets.setdefault(
                row["bucket"],
                {
                    "bucket": row["bucket"],
                    "inventory_taken_at": row["inventory_taken_at"].isoformat()
                    if row["inventory_taken_at"]
                    else None,
                },
            ),
            prefixes.setdefault(
                (row["bucket"], row["table"] or row["prefix"]),
                {
                    "bucket": row["bucket"],
                    "group": row["table"] or row["prefix"],
                    "table": row["table"],
                    "owner": owners.get(row["table"], UNKNOWN_OWNER) if row["table"] else UNOWNED,
                },
            ),
        )
        for entry in entries:
            entry["objects"] = entry.get("objects", 0) + objects
            entry["bytes"] = entry.get("bytes", 0) + (row["bytes"] or 0)
            entry["delete_markers"] = entry.get("delete_markers", 0) + markers
            entry["monthly_cost"] = entry.get("monthly_cost", 0.0) + cost
    for bucket in present - set(buckets):  # a delivery without noncurrent versions
        buckets[bucket] = {
            "bucket": bucket,
            "objects": 0,
            "bytes": 0,
            "delete_markers": 0,
            "monthly_cost": 0.0,
        }
    for entry in (*buckets.values(), *prefixes.values()):
        entry["monthly_cost"] = _money(entry["monthly_cost"])
    ranked = sorted(
        prefixes.values(), key=lambda e: (-e["monthly_cost"], -e["bytes"], e["bucket"], e["group"])
    )
    return {
        "from": "inventory_usage",
        "objects": sum(b["objects"] for b in buckets.values()),
        "bytes": sum(b["bytes"] for b in buckets.values()),
        "delete_markers": sum(b["delete_markers"] for b in buckets.values()),
        "monthly_cost": _money(sum(b["monthly_cost"] for b in buckets.values())),
        "priced_as": "storage class",
        "buckets": [buckets[name] for name in sorted(buckets)],
        "prefixes": ranked,
    }


def _merge_noncurrent(into: dict[str, Any], runs: dict[str, Any], buckets: Sequence[str]) -> None:
    """Add the ``inventory_runs`` figures of ``buckets`` (priced at STANDARD) to ``into``."""
    for entry in runs.get("buckets", []):
        if entry["bucket"] in buckets:
            into["buckets"].append({**entry, "from": "inventory_runs", "priced_as": "STANDARD"})
            for name in ("objects", "bytes", "delete_markers"):
                into[name] += entry[name]
            into["monthly_cost"] = _money(into["monthly_cost"] + entry["monthly_cost"])
    into["buckets"].sort(key=lambda entry: entry["bucket"])


def trend(
    spark: SparkSession,
    usage: DataFrame | None,
    inventory_table: str,
    prices: PriceTable,
    registry: TableRegistry | None,
    report: ChargebackReport,
    days: int,
) -> dict[str, Any]:
    """Bytes and monthly cost per inventory date over the last ``days`` days: in all, per owner and
    for the costliest tables, priced at today's prices.

    Dates come from the usage table; days before its first row from older versions of the
    inventory table (Delta time travel, the newest version of each commit day), while they are
    kept. A bucket without a delivery on some date counts with its newest earlier one
    (``carried_forward`` names it).
    """
    since = (datetime.now(timezone.utc) - timedelta(days=days)).date()
    sources: list[str] = []
    frames: list[DataFrame] = []
    first_usage_date = None
    if usage is not None:
        # every date, also before the window: a bucket counts with its newest earlier delivery
        first = usage.agg(F.min("inventory_date")).first()
        first_usage_date = first[0] if first else None
        if first_usage_date is not None:
            columns = [f.name for f in USAGE_SCHEMA]
            frames.append(usage.select(*columns).withColumn("version", F.lit(_USAGE_RANK)))
            sources.append("inventory_usage")
    versions = _versions_to_backfill(spark, inventory_table, since, first_usage_date, report.warnings)
    backfill = usage_from_inventory_versions(spark, inventory_table, versions) if versions else None
    if backfill is not None:
        frames.append(backfill)
        sources.append("time_travel")
    top = [name for name, _ in _ranked({k: v for k, v in report.by_table.items() if k != UNOWNED})][
        :TREND_TOP_TABLES
    ]
    try:
        collected = _trend_rows(frames, registry, top)
    except Exception as error:  # an old version's files removed by a VACUUM of the inventory table
        if backfill is None:
            raise
        report.warnings.append(
            f"trend: older inventory-table versions not readable, left out: {spark_error_summary(error)[:160]}"
        )
        frames, sources = frames[:-1], sources[:-1]
        collected = _trend_rows(frames, registry, top)
    return _trend_points(collected, prices, report.warnings, days, sources, since)


_USAGE_RANK = 1 << 62  # the usage table's rows win over any time-travelled version of the same date


def _trend_rows(frames: Sequence[DataFrame], registry: TableRegistry | None, top: Sequence[str]) -> list[Any]:
    """Current usage per bucket, date, class, owner and top table: of each bucket and date, only
    the rows of its best source (the usage table, else the newest inventory-table version)."""
    if not frames:
        return []
    rows = frames[0]
    for frame in frames[1:]:
        rows = rows.unionByName(frame)
    chosen = rows.join(
        rows.groupBy("bucket", "inventory_date").agg(F.max("version").alias("version")),
        ["bucket", "inventory_date", "version"],
    )
    return (
        chosen.select(
            "bucket",
            "inventory_date",
            "state",
            "storage_class",
            "intelligent_tiering_access_tier",
            owner_column(registry).alias("owner"),
            F.when(F.col("table").isin(top), F.col("table")).alias("table"),
            *USAGE_SUMS,
        )
        .groupBy(
            "bucket",
            "inventory_date",
            "state",
            "storage_class",
            "intelligent_tiering_access_tier",
            "owner",
            "table",
        )
        .agg(*[F.sum(name).alias(name) for name in USAGE_SUMS])
        .collect()
    )


def _versions_to_backfill(
    spark: SparkSession, inventory_table: str, since: Any, before: Any, warnings: list[str]
) -> list[int]:
    """The newest inventory-table version of each commit day from ``since`` up to (not including)
    ``before`` (None: up to today)."""
    try:
        history = spark.sql(f"DESCRIBE HISTORY delta.`{inventory_table}`").select(
            "version", F.to_date("timestamp").alias("day")
        )
        window = history.where(F.col("day") >= F.lit(since))
        if before is not None:
            window = window.where(F.col("day") < F.lit(before))
        return sorted(
            r["version"] for r in window.groupBy("day").agg(F.max("version").alias("version")).collect()
        )
    except Exception as error:
        warnings.append(f"no inventory table history for the trend: {spark_error_summary(error)[:120]}")
        return []


def _trend_points(
    rows: Sequence[Any], prices: PriceTable, warnings: list[str], days: int, sources: list[str], since: Any
) -> dict[str, Any]:
    """One point per delivery date from ``since`` on; a date a bucket has no delivery on counts
    its newest earlier one. Any row (also of noncurrent versions, or the zero marker) marks a
    delivery; only current objects are summed."""
    by_bucket: dict[str, dict[Any, list[Any]]] = {}
    for row in rows:
        by_bucket.setdefault(row["bucket"], {}).setdefault(row["inventory_date"], []).append(row)
    dates = sorted({d for dated in by_bucket.values() for d in dated if d >= since})
    points = []
    for day in dates:
        point: dict[str, Any] = {"date": day.isoformat(), "objects": 0, "bytes": 0, "monthly_cost": 0.0}
        owners: dict[str, Tally] = {}
        tables: dict[str, Tally] = {}
        carried = []
        for bucket, dated in sorted(by_bucket.items()):
            known = [d for d in dated if d <= day]
            if not known:
                continue
            if max(known) != day:
                carried.append(bucket)
            for row in dated[max(known)]:
                if row["state"] != CURRENT:
                    continue
                cost = usage_cost(row, prices, warnings)
                owners.setdefault(row["owner"], Tally()).add(None, row["objects"], row["bytes"] or 0, cost)
                if row["table"] is not None:
                    tables.setdefault(row["table"], Tally()).add(
                        None, row["objects"], row["bytes"] or 0, cost
                    )
                point["objects"] += row["objects"]
                point["bytes"] += row["bytes"] or 0
                point["monthly_cost"] += cost
        point["monthly_cost"] = _money(point["monthly_cost"])
        point["owners"] = {name: tally.to_dict() for name, tally in _ranked(owners)}
        point["tables"] = {name: tally.to_dict() for name, tally in _ranked(tables)}
        point["carried_forward"] = carried
        points.append(point)
    return {"from": sources, "days": days, "priced_at": prices.prices_as_of, "points": points}


# ---------------------------------------------------------------------------------------------
# Analysts' SQL


def sql_text(name: str) -> str:
    """The shipped query ``inventory/sql/<name>.sql`` (see :data:`SQL_QUERIES`)."""
    return (resources.files("inventory") / "sql" / f"{name}.sql").read_text(encoding="utf-8")


def register_views(
    spark: SparkSession, inventory: DataFrame, prices: PriceTable, registry: TableRegistry | None
) -> None:
    """Create the temporary views the shipped ``.sql`` files read: ``inventory``, ``prices``
    (:data:`PRICES_VIEW_SCHEMA`) and ``owners`` (``table, owner``)."""
    inventory.createOrReplaceTempView("inventory")
    spark.createDataFrame(prices.rows(), PRICES_VIEW_SCHEMA).createOrReplaceTempView("prices")
    owners: Sequence[tuple[str, str]] = [(t.name, t.owner) for t in registry.tables] if registry else []
    spark.createDataFrame(list(owners), "table string, owner string").createOrReplaceTempView("owners")
