"""The chargeback of one inventory table: grouped and priced, with what vacuums could reclaim,
what noncurrent versions cost, and the trend.

Example::

    report = build_report(spark, "s3://meta/warehouse/inventory", load_registry("tables.yaml"),
                        parse_group_by("owner"), load_prices())
    report.to_dict()["groups"][0]   # {"group": "growth", "objects": ..., "monthly_cost": ...}
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pyspark.sql import SparkSession

from chargeback.advice import DEFAULT_RESTORE_WINDOW_DAYS, DEFAULT_UNOWNED_AGE_DAYS, build_advice
from chargeback.grouping import GroupBy, grouped_rows, price_rows
from chargeback.noncurrent import noncurrent_from_runs, noncurrent_from_usage, with_runs_of
from chargeback.prices import PriceTable
from chargeback.read import read_inventory_for_chargeback
from chargeback.reclaimable import reclaimable, reclaimable_computed
from chargeback.report import ChargebackReport, Noncurrent
from chargeback.trend import DEFAULT_TREND_DAYS, trend
from core.registry import TableRegistry
from core.tables import snapshots_sized
from inventory.usage import read_usage

log = logging.getLogger("inventory_vacuum")


def build_report(
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
    advise: bool = False,
    restore_window_days: int = DEFAULT_RESTORE_WINDOW_DAYS,
    unowned_age_days: int = DEFAULT_UNOWNED_AGE_DAYS,
) -> ChargebackReport:
    """Group, count and price the inventory table (one Spark job over it), and add what the
    newest vacuum dry runs could reclaim and what noncurrent versions cost.

    ``vacuum_runs_table`` / ``inventory_runs_table``: the history tables (None: not read).
    ``usage_table``: the usage aggregate the ingest writes (:mod:`inventory.usage`): noncurrent
    versions per storage class and prefix, and the trend over the last ``trend_days`` days (0: no
    trend); days before it have rows come from older versions of the inventory table.
    ``computed_reclaimable``: vacuum dry runs made now (``vacuum.results.TableRun``), used
    instead of the newest ones in ``vacuum_runs``.
    ``advise``: add the recommendations (:mod:`chargeback.advice`; one more Spark job over the
    inventory table): noncurrent versions kept ``restore_window_days`` days, small objects in
    classes with a minimum billable size, and unowned objects ``unowned_age_days`` days old.
    """
    # the tool's tables are small: Delta's snapshots of them sized to them, not to its default
    with snapshots_sized(spark, (inventory_table, vacuum_runs_table, inventory_runs_table, usage_table)):
        warnings: list[str] = []
        inventory = read_inventory_for_chargeback(spark, inventory_table)
        rows = grouped_rows(inventory, prices, by, registry)
        current, bucket_dates = price_rows(
            [r.asDict() for r in rows], prices, registry, by, inventory_table, warnings
        )
        reclaim = []
        if computed_reclaimable is not None:
            reclaim = reclaimable_computed(computed_reclaimable, current.by_table, prices, warnings)
        elif vacuum_runs_table:
            reclaim = reclaimable(spark, vacuum_runs_table, current.by_table, prices, warnings)
        usage = read_usage(spark, usage_table) if usage_table else None
        noncurrent: Noncurrent | None = None
        if usage is not None:
            noncurrent = noncurrent_from_usage(usage, prices, registry, bucket_dates, warnings)
            missing = sorted(set(bucket_dates) - {b.bucket for b in noncurrent.buckets})
            if missing:
                warnings.append(
                    f"bucket(s) {', '.join(missing)} have no rows in the usage table {usage_table} for their "
                    "delivery (ingested by an older version, or its usage write failed): their noncurrent "
                    "versions come from inventory_runs, and the trend leaves them out"
                )
                if inventory_runs_table:
                    runs = noncurrent_from_runs(spark, inventory_runs_table, prices, warnings)
                    noncurrent = with_runs_of(noncurrent, runs, missing)
        elif inventory_runs_table:
            noncurrent = noncurrent_from_runs(spark, inventory_runs_table, prices, warnings)
        history = None
        if trend_days > 0:
            history = trend(
                spark, usage, inventory_table, prices, registry, current.by_table, trend_days, warnings
            )
        advice = None
        if advise:
            advice = build_advice(
                inventory,
                noncurrent,
                registry,
                prices,
                restore_window_days=restore_window_days,
                unowned_age_days=unowned_age_days,
            )
        for warning in warnings + list(advice.warnings if advice else ()):
            log.warning("chargeback: %s", warning)
        return replace(
            current,
            noncurrent=noncurrent,
            trend=history,
            reclaimable=tuple(reclaim),
            warnings=tuple(warnings),
            advice=advice,
        )
