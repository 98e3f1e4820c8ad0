"""``chargeback --advise``: what frees bytes, each with its monthly saving at the price file's
prices, and the lifecycle rule that achieves it where a rule can.

Three kinds, disjoint (no object is counted twice, so the savings add up):

- ``noncurrent_versions``: the noncurrent versions and delete markers of a versioned bucket, per
  owning table or top-level prefix (from the usage table, as the report's noncurrent section).
  A delete there only wrote a delete marker; the bytes stay billed until a lifecycle rule expires
  them. The rule (:mod:`chargeback.lifecycle`) keeps them the restore window, then expires them.
  The saving is their monthly cost today, priced by their own storage class: all of them are gone
  at the latest a restore window after the rule is applied.
- ``small_objects``: current objects under the minimum billable size of their class (128 KB in
  STANDARD_IA, ONEZONE_IA, GLACIER_IR), where that minimum costs more than STANDARD would for the
  object's real size. The saving is the difference. A report, not a rule: lifecycle rules cannot
  transition objects to STANDARD.
- ``old_unowned_objects``: current objects under no registered table, last modified at least
  ``unowned_age_days`` days before their inventory was taken, per top-level prefix. The saving is
  their monthly cost. A report, not a rule: only their owner can say they are not needed.

Every figure is measured in the inventory (one Spark job over the inventory table's current
objects, and the noncurrent figures the report already holds); none is assumed. A rule's effect
on future writes is not included.

Example::

    advice = build_advice(inventory, report.noncurrent, registry, prices, restore_window_days=30)
    advice.to_dict()["lifecycle"][0]["lifecycle_configuration"]   # {"Rules": [...]}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from chargeback.grouping import GroupBy, owners, priced_objects, row_cost, rule_value
from chargeback.lifecycle import (
    MAX_RULES,
    LifecycleRule,
    apply_command,
    lifecycle_configuration,
    noncurrent_rule,
    terraform_block,
)
from chargeback.prices import GIB, PriceTable
from chargeback.report import UNKNOWN_OWNER, UNOWNED, Noncurrent, NoncurrentGroup, Tally, add, rounded_cost
from core.registry import RegisteredTable, TableRegistry

NONCURRENT_VERSIONS = "noncurrent_versions"
SMALL_OBJECTS = "small_objects"
OLD_UNOWNED_OBJECTS = "old_unowned_objects"
KINDS = (NONCURRENT_VERSIONS, SMALL_OBJECTS, OLD_UNOWNED_OBJECTS)
DEFAULT_RESTORE_WINDOW_DAYS = 30
DEFAULT_UNOWNED_AGE_DAYS = 90
DAY_MS = 86_400_000
FROM_RUNS = "inventory_runs"


@dataclass(frozen=True)
class Recommendation:
    """One thing to do for one table or top-level prefix of one bucket, and what it saves a month."""

    kind: str  # one of KINDS
    bucket: str
    group: str  # the table, or the top-level prefix (``bucket/first/``)
    table: str | None
    owner: str
    prefix: str | None  # the key prefix in the bucket ("": the whole bucket; None: not known)
    objects: int
    bytes: int
    delete_markers: int
    monthly_saving: float  # unrounded; the JSON rounds
    how: str
    rule: LifecycleRule | None = None  # None: a report, no rule can do it
    storage_classes: Mapping[str, Tally] = field(default_factory=dict)  # what the saving is made of

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "bucket": self.bucket,
            "group": self.group,
            "table": self.table,
            "owner": self.owner,
            "prefix": self.prefix,
            "objects": self.objects,
            "bytes": self.bytes,
            "delete_markers": self.delete_markers,
            "monthly_saving": rounded_cost(self.monthly_saving),
            "action": "lifecycle_rule" if self.rule else "report",
            "lifecycle_rule": self.rule.to_aws() if self.rule else None,
            "how": self.how,
            "storage_classes": {
                name: tally.to_dict() for name, tally in sorted(self.storage_classes.items())
            },
        }


@dataclass(frozen=True)
class BucketLifecycle:
    """The recommended rules of one bucket as one lifecycle configuration, and as Terraform."""

    bucket: str
    rules: tuple[LifecycleRule, ...]
    monthly_saving: float  # unrounded: what its rules' recommendations save

    @property
    def file_name(self) -> str:
        return f"lifecycle-{self.bucket}.json"

    @property
    def terraform(self) -> str:
        return terraform_block(self.bucket, self.rules)

    def to_dict(self) -> dict[str, Any]:
        return {
            "bucket": self.bucket,
            "monthly_saving": rounded_cost(self.monthly_saving),
            "lifecycle_configuration": lifecycle_configuration(self.rules),
            "apply": apply_command(self.bucket, self.file_name),
            "terraform": self.terraform,
        }


@dataclass(frozen=True)
class Advice:
    """The recommendations, costliest first, and each bucket's lifecycle configuration."""

    restore_window_days: int
    unowned_age_days: int
    recommendations: tuple[Recommendation, ...]
    buckets: tuple[BucketLifecycle, ...]
    notes: tuple[str, ...]
    warnings: tuple[str, ...] = ()

    @property
    def monthly_saving_by_rules(self) -> float:
        return sum(r.monthly_saving for r in self.recommendations if r.rule)

    @property
    def monthly_saving_reported(self) -> float:
        return sum(r.monthly_saving for r in self.recommendations if not r.rule)

    def to_dict(self) -> dict[str, Any]:
        return {
            "restore_window_days": self.restore_window_days,
            "unowned_age_days": self.unowned_age_days,
            "monthly_saving": rounded_cost(self.monthly_saving_by_rules + self.monthly_saving_reported),
            "monthly_saving_by_rules": rounded_cost(self.monthly_saving_by_rules),
            "monthly_saving_reported": rounded_cost(self.monthly_saving_reported),
            "recommendations": [r.to_dict() for r in self.recommendations],
            "lifecycle": [b.to_dict() for b in self.buckets],
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }


# ---- noncurrent versions: from the report's noncurrent section ----------------------------------


def noncurrent_advice(
    noncurrent: Noncurrent | None,
    registry: TableRegistry | None,
    restore_window_days: int,
    warnings: list[str],
) -> list[Recommendation]:
    """A rule per owning table or top-level prefix with noncurrent versions or delete markers.

    A bucket known only from ``inventory_runs`` (no usage rows: no prefixes, no classes) gets a
    warning, not a figure: its saving would be a guess.
    """
    if noncurrent is None:
        return []
    for bucket in noncurrent.buckets:
        if bucket.source == FROM_RUNS and (bucket.objects or bucket.delete_markers):
            warnings.append(
                f"bucket {bucket.bucket}: {bucket.objects} noncurrent version(s) ({bucket.bytes} bytes) and "
                f"{bucket.delete_markers} delete marker(s) are known only from inventory_runs, without "
                "prefixes or storage classes: no rule or saving is advised for them (an ingest that "
                "writes the usage table has them per table and prefix)"
            )
    tables = {t.name: t for t in registry.tables} if registry else {}
    advice = []
    for group in noncurrent.groups or ():
        if not (group.objects or group.delete_markers):
            continue
        saving = (
            sum(t.monthly_cost for t in group.storage_classes.values())
            if group.storage_classes
            else group.monthly_cost
        )
        prefix, rule, how = _noncurrent_action(group, tables.get(group.table or ""), restore_window_days)
        if rule is not None and group.table is None:
            inside = sorted(
                t.name
                for t in tables.values()
                if t.location.is_s3
                and t.location.bucket == group.bucket
                and f"{t.location.key}/".startswith(rule.prefix)
            )
            if inside:
                how += (
                    f"; the prefix also holds table(s) {', '.join(inside)}: the rule covers them too, with "
                    "the same restore window"
                )
        advice.append(
            Recommendation(
                NONCURRENT_VERSIONS,
                group.bucket,
                group.group,
                group.table,
                group.owner,
                prefix,
                group.objects,
                group.bytes,
                group.delete_markers,
                saving,
                how,
                rule,
                dict(group.storage_classes),
            )
        )
    return advice


def _noncurrent_action(
    group: NoncurrentGroup, registered: RegisteredTable | None, restore_window_days: int
) -> tuple[str | None, LifecycleRule | None, str]:
    """The key prefix of a noncurrent group, its rule (None: no rule can select just it) and what to do."""
    days = restore_window_days
    expire = (
        f"expire the noncurrent versions {{}} {days} days after they become noncurrent (the restore "
        "window: how long a vacuum can be undone with inventory-vacuum restore), and remove the delete "
        f"markers left with no version behind them; today's are all gone at the latest {days} days "
        "after the rule is applied"
    )
    if group.table is not None:
        location = registered.location if registered else None
        if location is None or not location.is_s3 or location.bucket != group.bucket:
            return (
                None,
                None,
                f"table {group.table!r} is not registered in tables.yaml with a path in bucket "
                f"{group.bucket}: its prefix is not known, so no rule is written; register it, or write "
                "a NoncurrentVersionExpiration rule for its path",
            )
        prefix = f"{location.key}/"  # never the whole bucket: the registry refuses such a path
        rule = noncurrent_rule(group.bucket, prefix, f"table {group.table}", days)
        return prefix, rule, expire.format(f"under {prefix}")
    prefix = group.group[len(group.bucket) + 1 :]
    if not prefix:
        return (
            "",
            None,
            "keys at the bucket's root: no lifecycle filter selects only them, and a rule with an empty "
            "prefix would expire the noncurrent versions of the whole bucket; no rule is written. Move "
            f"them under a prefix, or write a bucket-wide rule if every prefix may keep its noncurrent "
            f"versions only {days} days",
        )
    rule = noncurrent_rule(group.bucket, prefix, f"prefix {prefix}", days)
    return prefix, rule, expire.format(f"under {prefix}")


# ---- current objects: one Spark job over the inventory table -----------------------------------


def current_candidates(
    inventory: DataFrame, prices: PriceTable, registry: TableRegistry | None, unowned_age_days: int
) -> DataFrame:
    """The current objects an advice is about, summed per bucket, table, unowned top-level prefix,
    price key and ``old`` (one shuffle over the candidates only):

    - ``old``: under no table, last modified at least ``unowned_age_days`` days before the
      inventory was taken (``inventory_taken_at``, else the start of ``inventory_date``);
    - otherwise: under its class's minimum billable size, where that minimum costs more than the
      object's real size in STANDARD.

    Columns: ``bucket, table, unowned_prefix, price_key, old, objects, bytes, billable_bytes,
    standard_overhead_bytes, monitored_objects`` (the sums :func:`chargeback.grouping.row_cost`
    prices).
    """
    for name, data_type in (("modificationTime", "bigint"), ("inventory_taken_at", "timestamp")):
        if name not in inventory.columns:
            inventory = inventory.withColumn(name, F.lit(None).cast(data_type))
    taken_ms = F.unix_millis(
        F.coalesce(F.col("inventory_taken_at"), F.col("inventory_date").cast("timestamp"))
    )
    old = (
        F.col("table").isNull()
        & F.col("modificationTime").isNotNull()
        & taken_ms.isNotNull()
        & (F.col("modificationTime") <= taken_ms - F.lit(unowned_age_days * DAY_MS))
    )
    objects = priced_objects(
        inventory,
        prices,
        GroupBy("table"),
        registry,
        F.col("bucket"),
        F.coalesce(old, F.lit(False)).alias("old"),
    )
    standard = prices.standard.price_per_gb_month
    key = F.col("price_key")
    minimum = rule_value(key, prices, "minimum_billable_bytes", 0)
    price = rule_value(key, prices, "price_per_gb_month", standard)
    costlier = (
        ~F.col("old")
        & (minimum > 0)
        & (F.col("length") < minimum)
        & (
            F.col("billable_bytes") * price + F.col("standard_overhead_bytes") * F.lit(standard)
            > F.col("length") * F.lit(standard)
        )
    )
    return (
        objects.where(F.col("old") | costlier)
        .groupBy("bucket", "table", "unowned_prefix", "price_key", "old")
        .agg(
            F.count(F.lit(1)).alias("objects"),
            F.sum("length").alias("bytes"),
            F.sum("billable_bytes").alias("billable_bytes"),
            F.sum("standard_overhead_bytes").alias("standard_overhead_bytes"),
            F.sum("monitored").alias("monitored_objects"),
        )
    )


def current_advice(
    rows: Iterable[Mapping[str, Any]],
    prices: PriceTable,
    registry: TableRegistry | None,
    unowned_age_days: int,
) -> list[Recommendation]:
    """The reports of :func:`current_candidates`'s rows: per table or top-level prefix, the saving
    of STANDARD for the small objects, and the monthly cost of the old unowned ones."""
    owner_of = owners(registry)
    tables = {t.name: t for t in registry.tables} if registry else {}
    standard = prices.standard.price_per_gb_month
    sums: dict[tuple[str, str, str], dict[str, Tally]] = {}
    keys: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for row in rows:
        cost = row_cost(row, prices)
        kind = OLD_UNOWNED_OBJECTS if row["old"] else SMALL_OBJECTS
        saving = cost if row["old"] else cost - row["bytes"] * standard / GIB
        group = row["table"] or row["unowned_prefix"]
        index = (kind, row["bucket"], group)
        keys.setdefault(index, row)
        add(sums.setdefault(index, {}), row["price_key"], None, row["objects"], row["bytes"], saving)
    advice = []
    for (kind, bucket, group), classes in sums.items():
        table = keys[kind, bucket, group]["table"]
        registered = tables.get(table) if table else None
        if table is None:
            prefix: str | None = group[len(bucket) + 1 :]
        elif registered is not None and registered.location.bucket == bucket:
            prefix = f"{registered.location.key}/"
        else:
            prefix = None
        if kind == OLD_UNOWNED_OBJECTS:
            how = (
                f"objects under no registered table, last modified at least {unowned_age_days} days before "
                "the inventory was taken: find their owner, then register them in tables.yaml or delete "
                "them (the saving is what deleting all of them saves). No rule is written: only their "
                "owner can say they are not needed"
            )
        else:
            how = (
                f"objects billed at the minimum size of their class ({_minimums(classes, prices)}) cost "
                "less in STANDARD. No lifecycle rule transitions objects to STANDARD: write them in "
                "STANDARD, or copy them in place with storage class STANDARD (request, retrieval and "
                "minimum-duration charges are not included; on a versioned bucket the copy leaves the "
                "old version noncurrent, billed until it expires)"
            )
        advice.append(
            Recommendation(
                kind,
                bucket,
                group,
                table,
                UNOWNED if table is None else owner_of.get(table, UNKNOWN_OWNER),
                prefix,
                sum(t.objects for t in classes.values()),
                sum(t.bytes for t in classes.values()),
                0,
                sum(t.monthly_cost for t in classes.values()),
                how,
                None,
                classes,
            )
        )
    return advice


def _minimums(classes: Mapping[str, Tally], prices: PriceTable) -> str:
    parts = []
    for name in sorted(classes):
        rule = prices.rule(name)
        if rule is not None and rule.minimum_billable_bytes:
            parts.append(f"{name}: {rule.minimum_billable_bytes:,} bytes")
    return ", ".join(parts)


# ---- the advice --------------------------------------------------------------------------------


def advise(
    recommendations: Iterable[Recommendation],
    restore_window_days: int,
    unowned_age_days: int,
    warnings: list[str],
) -> Advice:
    """The recommendations ranked (largest saving first) and each bucket's rules gathered into
    one lifecycle configuration."""
    ranked = tuple(
        sorted(
            recommendations,
            key=lambda r: (-r.monthly_saving, -r.bytes, KINDS.index(r.kind), r.bucket, r.group),
        )
    )
    per_bucket: dict[str, list[Recommendation]] = {}
    for recommendation in ranked:
        if recommendation.rule is not None:
            per_bucket.setdefault(recommendation.bucket, []).append(recommendation)
    buckets = []
    for bucket, chosen in sorted(per_bucket.items()):
        rules = tuple(sorted((r.rule for r in chosen if r.rule), key=lambda rule: (rule.prefix, rule.id)))
        if len(rules) > MAX_RULES:
            warnings.append(
                f"bucket {bucket}: {len(rules)} rules, more than the {MAX_RULES} AWS allows in one "
                "lifecycle configuration: write one rule for a common prefix instead"
            )
        buckets.append(BucketLifecycle(bucket, rules, sum(r.monthly_saving for r in chosen)))
    notes = [
        "savings are monthly, at the price file's prices, on what the inventory shows today; a rule's "
        "effect on future writes is not included",
        "put-bucket-lifecycle-configuration replaces a bucket's whole lifecycle configuration, and a "
        "Terraform aws_s3_bucket_lifecycle_configuration owns all of a bucket's rules: merge these rules "
        "with the bucket's own (aws s3api get-bucket-lifecycle-configuration) first",
        f"a noncurrent version is kept {restore_window_days} days after it became noncurrent "
        f"(--restore-window-days): a vacuum can be undone with inventory-vacuum restore within those "
        "days, and no later",
    ]
    return Advice(
        restore_window_days, unowned_age_days, ranked, tuple(buckets), tuple(notes), tuple(warnings)
    )


def build_advice(
    inventory: DataFrame,
    noncurrent: Noncurrent | None,
    registry: TableRegistry | None,
    prices: PriceTable,
    *,
    restore_window_days: int = DEFAULT_RESTORE_WINDOW_DAYS,
    unowned_age_days: int = DEFAULT_UNOWNED_AGE_DAYS,
) -> Advice:
    """The advice for the current objects of ``inventory`` (one Spark job) and the noncurrent
    versions the report found (``noncurrent``, with its per-table or prefix groups)."""
    warnings: list[str] = []
    rows = [r.asDict() for r in current_candidates(inventory, prices, registry, unowned_age_days).collect()]
    recommendations = noncurrent_advice(noncurrent, registry, restore_window_days, warnings)
    recommendations += current_advice(rows, prices, registry, unowned_age_days)
    return advise(recommendations, restore_window_days, unowned_age_days, warnings)
