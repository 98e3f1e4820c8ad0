"""Bytes and cost by table, owner, bucket, storage class or prefix: one aggregation over the
current objects of the inventory table, priced row by row.

- each object is priced by its storage class; ``INTELLIGENT_TIERING`` by its access tier
  (``intelligent_tiering_access_tier``; none given: the Frequent Access tier, with a warning);
- an object smaller than its class's ``minimum_billable_bytes`` (128 KB for STANDARD_IA,
  ONEZONE_IA, GLACIER_IR) is billed as that size;
- archive classes add ``overhead_bytes`` per object at their own price and
  ``standard_overhead_bytes`` at the STANDARD price (GLACIER, DEEP_ARCHIVE: 32 KB + 8 KB);
- Intelligent-Tiering's monitoring fee is charged per object of at least ``monitoring_minimum_bytes``;
- a storage class the price table does not know is priced at STANDARD, with a warning, never at 0.

Objects under no registered table form the group ``unowned``, broken down by top-level prefix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from chargeback.prices import DEFAULT_TIER, GIB, INTELLIGENT_TIERING, NO_CLASS, PriceTable
from chargeback.report import UNKNOWN_OWNER, UNOWNED, ChargebackReport, Tally, add
from core.errors import UsageError
from core.registry import TableRegistry
from inventory.schema import prefix_column

GROUP_KINDS = ("table", "owner", "bucket", "storage_class", "prefix")


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


def owners(registry: TableRegistry | None) -> dict[str, str]:
    """Each registered table's owner."""
    return {t.name: t.owner for t in registry.tables} if registry else {}


def owner_column(registry: TableRegistry | None) -> Column:
    """The owner of each object's table from tables.yaml; ``unowned`` for objects of no table.

    One map lookup, not a CASE per table: thousands of tables would nest thousands of
    expressions deep (a StackOverflowError in Spark's analyzer at about a thousand).
    """
    pairs = sorted(owners(registry).items())
    owner: Column = F.lit(UNKNOWN_OWNER)
    if pairs:
        mapping = F.create_map(*[F.lit(value) for pair in pairs for value in pair])
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


def rule_value(key: Column, prices: PriceTable, attribute: str, default: Any) -> Column:
    """The price rule's ``attribute`` for each row's price ``key`` (``default`` for an unpriced key)."""
    value: Column = F.lit(default)
    for rule in prices.rules[::-1]:
        value = F.when(key == rule.key, F.lit(getattr(rule, attribute))).otherwise(value)
    return value


def priced_objects(
    inventory: DataFrame,
    prices: PriceTable,
    by: GroupBy,
    registry: TableRegistry | None,
    *extra: Column,
) -> DataFrame:
    """One row per current object with what it is billed for (no prices multiplied in yet).

    Columns: ``group, table, unowned_prefix, price_key, length, billable_bytes`` (at the class's
    price: minimum size and archive overhead applied), ``standard_overhead_bytes`` (at the STANDARD
    price), ``monitored`` (1 when Intelligent-Tiering monitors it), ``untiered`` (1 for an
    Intelligent-Tiering object without an access tier).
    """
    key = price_key_column()
    length = F.coalesce(F.col("length"), F.lit(0)).cast("long")
    minimum = rule_value(key, prices, "minimum_billable_bytes", 0).cast("long")
    return inventory.select(
        group_column(by, registry).alias("group"),
        F.struct("bucket", "inventory_date").alias("bucket_date"),
        F.col("table"),
        F.when(F.col("table").isNull(), prefix_column(1)).alias("unowned_prefix"),
        key.alias("price_key"),
        length.alias("length"),
        (F.greatest(length, minimum) + rule_value(key, prices, "overhead_bytes", 0).cast("long")).alias(
            "billable_bytes"
        ),
        rule_value(key, prices, "standard_overhead_bytes", 0).cast("long").alias("standard_overhead_bytes"),
        F.when(
            (F.col("storage_class") == INTELLIGENT_TIERING)
            & (length >= rule_value(key, prices, "monitoring_minimum_bytes", 0)),
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
        *extra,
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


def grouped_rows(
    inventory: DataFrame, prices: PriceTable, by: GroupBy, registry: TableRegistry | None
) -> list[Any]:
    """The aggregated rows of ``inventory`` (one Spark job)."""
    if by.kind == "owner":
        # an owner is its table's: summed by table, then looked up once per table, not per object
        summed = aggregate(priced_objects(inventory, prices, GroupBy("table"), registry))
        return summed.withColumn("group", owner_column(registry)).collect()
    return aggregate(priced_objects(inventory, prices, by, registry)).collect()


def row_cost(row: Mapping[str, Any], prices: PriceTable) -> float:
    """The monthly cost of one aggregated row (sums of :func:`priced_objects`)."""
    rule = prices.rule(row["price_key"]) or prices.standard
    return (
        row["billable_bytes"] * rule.price_per_gb_month
        + row["standard_overhead_bytes"] * prices.standard.price_per_gb_month
    ) / GIB + row["monitored_objects"] * rule.monitoring_per_object


def price_rows(
    rows: Iterable[Mapping[str, Any]],
    prices: PriceTable,
    registry: TableRegistry | None,
    by: GroupBy,
    inventory_table: str,
    warnings: list[str],
) -> tuple[ChargebackReport, dict[str, date | None]]:
    """The report of the current objects: the aggregated rows priced and summed per group, owner
    and table; and the inventory date of each bucket's delivery in the inventory table. What
    could not be priced exactly (a class not in the price file, no access tier, a table not in
    tables.yaml) is a warning."""
    owner_of = owners(registry)
    groups: dict[str, Tally] = {}
    by_owner: dict[str, Tally] = {}
    by_table: dict[str, Tally] = {}
    unowned_prefixes: dict[str, Tally] = {}
    totals = unowned = Tally()
    bucket_dates: dict[str, date | None] = {}
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
        if table is not None and table not in owner_of:
            unregistered.add(table)
        owner = UNOWNED if table is None else owner_of.get(table, UNKNOWN_OWNER)
        add(groups, row["group"], key, objects, size, cost)
        add(by_owner, owner, key, objects, size, cost)
        add(by_table, table or UNOWNED, key, objects, size, cost)
        totals = totals.plus(key, objects, size, cost)
        if table is None:
            unowned = unowned.plus(key, objects, size, cost)
            add(unowned_prefixes, row["unowned_prefix"], key, objects, size, cost)
        for pair in row["bucket_dates"] or ():
            known = bucket_dates.get(pair["bucket"])
            if known is None or (pair["inventory_date"] is not None and pair["inventory_date"] > known):
                bucket_dates[pair["bucket"]] = pair["inventory_date"]
    for key, objects in sorted(unpriced.items()):
        warnings.append(
            f"storage class {key} is not in the price table {prices.file}: "
            f"its {objects} object(s) are priced at STANDARD"
        )
    if untiered:
        warnings.append(
            f"{untiered} INTELLIGENT_TIERING object(s) have no access tier in the inventory: "
            "priced at the Frequent Access tier"
        )
    for table in sorted(unregistered):
        warnings.append(
            f"table {table!r} of the inventory is not in tables.yaml: its owner is reported as {UNKNOWN_OWNER!r}"
        )
    report = ChargebackReport(
        by=by.name,
        currency=prices.currency,
        prices_as_of=prices.prices_as_of,
        price_file=prices.file,
        inventory_table=inventory_table,
        groups=groups,
        by_owner=by_owner,
        by_table=by_table,
        unowned=unowned,
        unowned_prefixes=unowned_prefixes,
        totals=totals,
    )
    return report, bucket_dates
