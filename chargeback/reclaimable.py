"""What a vacuum could reclaim per table: the newest dry run recorded in ``vacuum_runs``, or dry
runs made now (``--reclaimable``), priced at the table's own average cost per byte."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from chargeback.prices import GIB, PriceTable
from chargeback.read import read_history
from chargeback.report import Reclaimable, Tally, rounded_cost


def reclaimable(
    spark: SparkSession,
    location: str,
    by_table: Mapping[str, Tally],
    prices: PriceTable,
    warnings: list[str],
) -> list[Reclaimable]:
    """Per table, what the newest successful vacuum dry run planned to delete.

    A dry run followed by a successful real vacuum is left out: those files are gone. A restore's
    rows (mode ``restore``) are not vacuums: what a restore dry run would bring back is not
    reclaimable, and a restore does not make an older dry run's plan stale or current.
    """
    runs = read_history(spark, location, "vacuum_runs history", warnings)
    if runs is None:
        return []
    ok = runs.where(F.col("status") == "ok")
    if "mode" in runs.columns:
        ok = ok.where(F.col("mode").isNull() | (F.col("mode") != "restore"))
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
    return _largest_first(
        _entry(
            row["table"],
            row["planned_files"],
            row["planned_bytes"],
            "vacuum_runs",
            row["run_at"].isoformat() if row["run_at"] else None,
            by_table,
            prices,
        )
        for row in rows
    )


def reclaimable_computed(
    runs: Sequence[Any], by_table: Mapping[str, Tally], prices: PriceTable, warnings: list[str]
) -> list[Reclaimable]:
    """Per table, what a vacuum dry run made now (``vacuum.results.TableRun``) plans to delete; a
    table the vacuum refused or failed on is left out with a warning that says why."""
    now = datetime.now(timezone.utc).isoformat()
    result = []
    for run in runs:
        if run.status != "ok":
            warnings.append(f"reclaimable bytes of table {run.name} not computed: {run.status}: {run.reason}")
            continue
        result.append(
            _entry(run.name, run.planned_files, run.planned_bytes, "computed", now, by_table, prices)
        )
    return _largest_first(result)


def _largest_first(entries: Any) -> list[Reclaimable]:
    return sorted(entries, key=lambda r: (-(r.bytes or 0), r.table))


def _entry(
    table: str,
    files: int,
    size: int | None,
    source: str,
    run_at: str | None,
    by_table: Mapping[str, Tally],
    prices: PriceTable,
) -> Reclaimable:
    """One table's reclaimable files, priced at its own average cost per byte (STANDARD when the
    inventory shows none of its bytes)."""
    tally = by_table.get(table)
    per_byte = (
        tally.monthly_cost / tally.bytes
        if tally is not None and tally.bytes
        else prices.standard.price_per_gb_month / GIB
    )
    return Reclaimable(
        table=table,
        files=files,
        bytes=size,
        monthly_cost=rounded_cost(size * per_byte) if size is not None else None,
        source=source,
        run_at=run_at,
    )
