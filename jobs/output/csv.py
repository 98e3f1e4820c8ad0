"""The chargeback report as CSV: one row per figure, for spreadsheets.

Numbers are the JSON's (``report.to_dict()``): objects and bytes as integers, the monthly cost
as a plain decimal (``0.00000026``, never ``2.6e-07``), the exact figure.
"""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from typing import Any

from chargeback.report import ChargebackReport

CSV_COLUMNS = ("section", "group", "storage_class", "objects", "bytes", "monthly_cost")


def csv_rows(report: ChargebackReport) -> list[dict[str, Any]]:
    """One row per group, per group and storage class, per unowned prefix, per reclaimable
    table, per noncurrent bucket and table or prefix, per trend date, and the totals (``section``
    says which); with ``--advise``, per recommendation (``advice``: ``kind: bucket: group``, its
    monthly saving, and a row per storage class)."""
    data = report.to_dict()
    rows: list[dict[str, Any]] = []

    def add(section: str, group: str, tally: dict[str, Any], storage_class: str = "") -> None:
        rows.append(
            {
                "section": section,
                "group": group,
                "storage_class": storage_class,
                "objects": tally["objects"],
                "bytes": tally["bytes"],
                "monthly_cost": plain_decimal(tally["monthly_cost"]),
            }
        )

    for group in data["groups"]:
        add("group", group["group"], group)
        for name, tally in group.get("storage_classes", {}).items():
            add("group", group["group"], tally, name)
    for prefix in data["unowned"]["prefixes"]:
        add("unowned", prefix["prefix"], prefix)
    for bucket in data["noncurrent"].get("buckets", []):
        add("noncurrent", bucket["bucket"], bucket)
    for prefix in data["noncurrent"].get("prefixes", []):
        add("noncurrent_prefix", f"{prefix['bucket']}: {prefix['group']}", prefix)
    for point in data["trend"].get("points", []):
        add("trend", point["date"], point)
    for entry in data["reclaimable"]:
        add("reclaimable", entry["table"], {**entry, "objects": entry["files"]})
    add("total", "", data["totals"])
    for name, tally in data["totals"].get("storage_classes", {}).items():
        add("total", "", tally, name)
    for entry in data.get("advice", {}).get("recommendations", []):
        # with --advise: the monthly saving in monthly_cost, then what it is made of per class
        group = f"{entry['kind']}: {entry['bucket']}: {entry['group']}"
        add("advice", group, {**entry, "monthly_cost": entry["monthly_saving"]})
        for name, tally in entry["storage_classes"].items():
            add("advice", group, tally, name)
    return rows


def plain_decimal(value: float | None) -> str | None:
    """``2.6e-07`` -> ``0.00000026``: the same number, without an exponent (None stays empty)."""
    if value is None:
        return None
    return format(Decimal(repr(value)), "f")


def render_csv(report: ChargebackReport) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv_rows(report))
    return buffer.getvalue()
