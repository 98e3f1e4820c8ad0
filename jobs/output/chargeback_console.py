"""The chargeback report for people at a terminal, and :func:`render`, the report in any of the
command's formats (text, CSV, JSON, HTML).

The text reads the report's JSON form (``report.to_dict()``: the figures as the JSON holds them,
and what the demo keeps). Amounts under a cent read ``< $0.01`` here; JSON, CSV and HTML keep
the exact figure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from chargeback.report import ChargebackReport
from jobs.output.csv import render_csv
from jobs.output.html import render_html
from jobs.output.units import count, money, size

FORMATS = ("text", "csv", "json", "html")


def render(report: ChargebackReport, fmt: str) -> str:
    """The report in ``fmt`` (one of :data:`FORMATS`), ending in a newline."""
    renderer = {"text": render_text, "csv": render_csv, "json": render_json, "html": render_html}[fmt]
    return renderer(report)


def render_json(report: ChargebackReport) -> str:
    return json.dumps(report.to_dict(), default=str) + "\n"


def render_text(report: ChargebackReport) -> str:
    return "\n".join(text_lines(report.to_dict())) + "\n"


def text_lines(data: Mapping[str, Any]) -> list[str]:
    """The text report of a chargeback's ``to_dict()``: one line per group, storage class, prefix,
    bucket, table and date."""
    currency = data["currency"]

    def figures(tally: Mapping[str, Any], objects: str = "objects") -> str:
        return (
            f"{tally[objects]:>12,} {count(tally['bytes']):>18} {size(tally['bytes']):>11} "
            f"{money(tally['monthly_cost'], currency, exact=False):>14}"
        )

    def line(name: str, tally: Mapping[str, Any], indent: str = "") -> str:
        return f"{indent + name:40} {figures(tally)}"

    lines = [
        f"storage cost by {data['by']} ({currency} per month, list prices as of {data['prices_as_of']}, "
        f"{data['price_file']})",
        "",
        f"{'group':40} {'objects':>12} {'bytes':>18} {'size':>11} {'monthly cost':>14}",
    ]
    for group in data["groups"]:
        lines.append(line(group["group"], group))
        lines += [line(name, tally, "    ") for name, tally in group.get("storage_classes", {}).items()]
    lines += ["", line("total", data["totals"])]
    unowned = data["unowned"]
    lines += [
        "",
        (
            f"unowned (under no registered table): {unowned['objects']:,} objects, {size(unowned['bytes'])}, "
            f"{money(unowned['monthly_cost'], currency, exact=False)}; by top-level prefix:"
        ),
    ]
    lines += [line(p["prefix"], p, "  ") for p in unowned["prefixes"]] or ["  (none)"]
    noncurrent = data["noncurrent"]
    if noncurrent:
        lines += [
            "",
            f"noncurrent versions (from {noncurrent['from']}, priced at {noncurrent['priced_as']}; no vacuum "
            "frees them):",
        ]
        lines += [
            f"  {b['bucket']:38} {figures(b)}  ({b['delete_markers']} delete markers)"
            for b in noncurrent["buckets"]
        ] or ["  (none recorded)"]
        if noncurrent.get("prefixes"):
            lines.append("  by owning table, or top-level prefix under no table:")
            lines += [
                f"    {p['bucket'] + ': ' + p['group']:36} {figures(p)}  ({p['delete_markers']} delete markers)"
                for p in noncurrent["prefixes"]
            ]
    lines += ["", "reclaimable by vacuum (newest dry run in vacuum_runs):"]
    lines += [
        f"  {r['table']:38} {figures(r, 'files')}  (dry run {r['run_at']})" for r in data["reclaimable"]
    ] or ["  (no dry run recorded)"]
    trend = data["trend"]
    if trend:
        lines += [
            "",
            f"trend, last {trend['days']} days (from {', '.join(trend['from']) or 'nothing'}, at today's prices):",
        ]
        lines += [
            f"  {p['date']:38} {figures(p)}"
            + (f"  (carried forward: {', '.join(p['carried_forward'])})" if p["carried_forward"] else "")
            for p in trend.get("points", [])
        ] or ["  (no history yet)"]
    if "advice" in data:
        lines += ["", *advice_lines(data["advice"], currency)]
    lines += [f"warning: {w}" for w in data["warnings"]]
    return lines


KIND_NAMES = {
    "noncurrent_versions": "noncurrent versions",
    "small_objects": "small objects",
    "old_unowned_objects": "old unowned objects",
}


def advice_lines(advice: Mapping[str, Any], currency: str) -> list[str]:
    """The ``--advise`` section: one line per recommendation (what, where, how much a month), how
    to do it, then each bucket's lifecycle configuration as JSON and as Terraform."""
    lines = [
        f"recommendations ({currency} saved per month at the price file's prices, on what the inventory "
        "shows today; a rule's effect on future writes is not included):",
        f"  {money(advice['monthly_saving_by_rules'], currency, exact=False)} by lifecycle rules, "
        f"{money(advice['monthly_saving_reported'], currency, exact=False)} more by the reports "
        f"(no rule can do it); noncurrent versions kept {advice['restore_window_days']} days",
        "",
        f"  {'what':20} {'bucket: table or prefix':40} {'objects':>12} {'bytes':>18} {'size':>11} "
        f"{'saving/month':>14}  action",
    ]
    for r in advice["recommendations"]:
        action = f"rule {r['lifecycle_rule']['ID']}" if r["lifecycle_rule"] else "report"
        lines.append(
            f"  {KIND_NAMES.get(r['kind'], r['kind']):20} {r['bucket'] + ': ' + r['group']:40} "
            f"{r['objects']:>12,} {count(r['bytes']):>18} {size(r['bytes']):>11} "
            f"{money(r['monthly_saving'], currency, exact=False):>14}  {action}"
        )
        classes = ", ".join(
            f"{name} {size(tally['bytes'])} {money(tally['monthly_cost'], currency)}"
            for name, tally in r["storage_classes"].items()
        )
        if classes:
            lines.append(
                f"      {classes}"
                + (f"; {r['delete_markers']:,} delete marker(s)" if r["delete_markers"] else "")
            )
        elif r["delete_markers"]:
            lines.append(f"      {r['delete_markers']:,} delete marker(s)")
        lines.append(f"      {r['how']}")
    if not advice["recommendations"]:
        lines.append("  (nothing to recommend)")
    for bucket in advice["lifecycle"]:
        lines += [
            "",
            f"lifecycle configuration of bucket {bucket['bucket']} (saves "
            f"{money(bucket['monthly_saving'], currency, exact=False)} a month, all of it at the latest "
            f"{advice['restore_window_days']} days after it is applied; save it as "
            f"lifecycle-{bucket['bucket']}.json, then: {bucket['apply']}):",
            *json.dumps(bucket["lifecycle_configuration"], indent=2).splitlines(),
            "the same as Terraform:",
            *bucket["terraform"].rstrip("\n").splitlines(),
        ]
    lines += ["", *[f"note: {note}" for note in advice["notes"]]]
    lines += [f"warning: {w}" for w in advice["warnings"]]
    return lines
