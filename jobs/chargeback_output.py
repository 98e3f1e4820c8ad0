"""Renderers of a chargeback report: text, JSON, CSV and a self-contained HTML page.

All four read the same :class:`~inventory.chargeback.ChargebackReport`; the numbers (objects,
bytes, monthly cost rounded to 10 decimals) are those of ``report.to_dict()``.
"""

from __future__ import annotations

import csv
import html
import io
import json
from collections.abc import Sequence
from typing import Any

from inventory.chargeback import ChargebackReport

FORMATS = ("text", "csv", "json", "html")
CSV_COLUMNS = ("section", "group", "storage_class", "objects", "bytes", "monthly_cost")


def render(report: ChargebackReport, fmt: str) -> str:
    """The report in ``fmt`` (one of :data:`FORMATS`), ending in a newline."""
    renderer = {"text": render_text, "csv": render_csv, "json": render_json, "html": render_html}[fmt]
    return renderer(report)


def money(value: float | None, currency: str = "USD") -> str:
    """``$1,234.56``; an amount under a cent keeps three significant digits (``$0.00252``,
    ``$2.6e-07``) so that it never reads as zero."""
    if value is None:
        return "?"
    symbol = "$" if currency == "USD" else f"{currency} "
    if value == 0 or abs(value) >= 0.01:
        return f"{symbol}{value:,.2f}"
    return f"{symbol}{value:.3g}"


def size(value: int | None) -> str:
    amount = float(value or 0)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if amount < 1024 or unit == "PiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount} B"


def _count(value: int | None) -> str:
    return f"{value:,}" if value is not None else "?"


def render_json(report: ChargebackReport) -> str:
    return json.dumps(report.to_dict(), default=str) + "\n"


def render_text(report: ChargebackReport) -> str:
    return "\n".join(text_lines(report.to_dict())) + "\n"


def text_lines(data: dict[str, Any]) -> list[str]:
    """The text report of a chargeback's ``to_dict()`` (also used by the demo's output)."""
    currency = data["currency"]
    lines = [
        f"storage cost by {data['by']} ({currency} per month, list prices as of {data['prices_as_of']}, "
        f"{data['price_file']})",
        "",
        f"{'group':40} {'objects':>12} {'bytes':>18} {'size':>11} {'monthly cost':>14}",
    ]

    def line(name: str, tally: dict[str, Any], indent: str = "") -> str:
        return (
            f"{indent + name:40} {tally['objects']:>12,} {tally['bytes']:>18,} {size(tally['bytes']):>11} "
            f"{money(tally['monthly_cost'], currency):>14}"
        )

    for group in data["groups"]:
        lines.append(line(group["group"], group))
        for name, tally in group.get("storage_classes", {}).items():
            lines.append(line(name, tally, "    "))
    lines += ["", line("total", data["totals"])]
    unowned = data["unowned"]
    lines += [
        "",
        (
            f"unowned (under no registered table): {unowned['objects']:,} objects, {size(unowned['bytes'])}, "
            f"{money(unowned['monthly_cost'], currency)}; by top-level prefix:"
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
            f"  {b['bucket']:38} {b['objects']:>12,} {b['bytes']:>18,} {size(b['bytes']):>11} "
            f"{money(b['monthly_cost'], currency):>14}  ({b['delete_markers']} delete markers)"
            for b in noncurrent["buckets"]
        ] or ["  (none recorded)"]
        if noncurrent.get("prefixes"):
            lines.append("  by owning table, or top-level prefix under no table:")
            lines += [
                f"    {p['bucket'] + ': ' + p['group']:36} {p['objects']:>12,} {p['bytes']:>18,} "
                f"{size(p['bytes']):>11} {money(p['monthly_cost'], currency):>14}  ({p['delete_markers']} delete markers)"
                for p in noncurrent["prefixes"]
            ]
    lines += ["", "reclaimable by vacuum (newest dry run in vacuum_runs):"]
    lines += [
        f"  {r['table']:38} {r['files']:>12,} {_count(r['bytes']):>18} "
        f"{size(r['bytes']):>11} {money(r['monthly_cost'], currency):>14}  (dry run {r['run_at']})"
        for r in data["reclaimable"]
    ] or ["  (no dry run recorded)"]
    points = data["trend"].get("points", [])
    if data["trend"]:
        lines += [
            "",
            f"trend, last {data['trend']['days']} days (from {', '.join(data['trend']['from']) or 'nothing'}, "
            "at today's prices):",
        ]
        lines += [
            f"  {p['date']:38} {p['objects']:>12,} {p['bytes']:>18,} {size(p['bytes']):>11} "
            f"{money(p['monthly_cost'], currency):>14}"
            + (f"  (carried forward: {', '.join(p['carried_forward'])})" if p["carried_forward"] else "")
            for p in points
        ] or ["  (no history yet)"]
    lines += [f"warning: {w}" for w in data["warnings"]]
    return lines


def csv_rows(report: ChargebackReport) -> list[dict[str, Any]]:
    """One row per group, per group and storage class, per unowned prefix, per reclaimable
    table, per noncurrent bucket and table or prefix, per trend date, and the totals (``section``
    says which)."""
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
                "monthly_cost": tally["monthly_cost"],
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
    return rows


def render_csv(report: ChargebackReport) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv_rows(report))
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------------
# HTML: one file, inline SVG bar charts drawn here, no scripts, no external resources.

_PALETTE = ("#2f6fb0", "#e07b39", "#3a9d5d", "#c44e52", "#8172b2", "#937860", "#da8bc3", "#8c8c8c")


def _bar_chart(title: str, items: Sequence[tuple[str, float, str]], chart_id: str) -> str:
    """A horizontal bar chart: one (label, value, value text) per bar, widest bar = the largest."""
    if not items:
        return f'<section id="{chart_id}"><h2>{html.escape(title)}</h2><p class="empty">none</p></section>'
    bar_height, gap, label_width, bar_width = 22, 6, 260, 420
    height = len(items) * (bar_height + gap) + gap
    largest = max((value for _, value, _ in items), default=0) or 1
    bars = []
    for index, (label, value, text) in enumerate(items):
        y = gap + index * (bar_height + gap)
        width = max(1.0, bar_width * value / largest) if value > 0 else 0
        bars.append(
            f'<text x="{label_width - 8}" y="{y + 15}" text-anchor="end">{html.escape(_short(label))}</text>'
            f'<rect x="{label_width}" y="{y}" width="{width:.1f}" height="{bar_height}" '
            f'fill="{_PALETTE[index % len(_PALETTE)]}"><title>{html.escape(label)}: {html.escape(text)}</title></rect>'
            f'<text x="{label_width + width + 6:.1f}" y="{y + 15}" class="value" '
            f'data-label="{html.escape(label)}">{html.escape(text)}</text>'
        )
    svg = (
        f'<svg role="img" aria-label="{html.escape(title)}" width="{label_width + bar_width + 240}" '
        f'height="{height}" xmlns="http://www.w3.org/2000/svg">{"".join(bars)}</svg>'
    )
    return f'<section id="{chart_id}"><h2>{html.escape(title)}</h2>{svg}</section>'


def _line_chart(title: str, points: Sequence[dict[str, Any]], currency: str, chart_id: str) -> str:
    """Monthly cost per date: the total and each owner, one polyline each, and the figures as a
    table below (the numbers a reader checks)."""
    if not points:
        return f'<section id="{chart_id}"><h2>{html.escape(title)}</h2><p class="empty">no history yet</p></section>'
    width, height, left, bottom, top = 640, 220, 70, 30, 12
    owners = list(points[-1]["owners"])[: len(_PALETTE) - 1]
    series = [("total", [p["monthly_cost"] for p in points])] + [
        (name, [p["owners"].get(name, {}).get("monthly_cost", 0.0) for p in points]) for name in owners
    ]
    largest = max((v for _, values in series for v in values), default=0) or 1
    step = (width - left - 10) / max(1, len(points) - 1)

    def xy(index: int, value: float) -> str:
        return f"{left + index * step:.1f},{top + (height - top - bottom) * (1 - value / largest):.1f}"

    lines = []
    for number, (name, values) in enumerate(series):
        color = "#222" if name == "total" else _PALETTE[(number - 1) % len(_PALETTE)]
        dots = "".join(
            f'<circle cx="{xy(i, v).split(",")[0]}" cy="{xy(i, v).split(",")[1]}" r="3" fill="{color}">'
            f"<title>{html.escape(name)} {html.escape(points[i]['date'])}: {html.escape(money(v, currency))}</title></circle>"
            for i, v in enumerate(values)
        )
        lines.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="{3 if name == "total" else 2}" '
            f'points="{" ".join(xy(i, v) for i, v in enumerate(values))}"/>{dots}'
            f'<text x="{width + 6}" y="{14 + 16 * number}" fill="{color}">{html.escape(_short(name, 24))}</text>'
        )
    axis = (
        f'<text x="{left - 6}" y="{top + 4}" text-anchor="end">{html.escape(money(largest, currency))}</text>'
        f'<text x="{left - 6}" y="{height - bottom}" text-anchor="end">0</text>'
        f'<text x="{left}" y="{height - 8}">{html.escape(points[0]["date"])}</text>'
        f'<text x="{width - 10}" y="{height - 8}" text-anchor="end">{html.escape(points[-1]["date"])}</text>'
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - 10}" y2="{height - bottom}" stroke="#999"/>'
    )
    svg = (
        f'<svg role="img" aria-label="{html.escape(title)}" width="{width + 200}" height="{height}" '
        f'xmlns="http://www.w3.org/2000/svg">{axis}{"".join(lines)}</svg>'
    )
    figures = _table(
        ["date", "objects", "bytes", "monthly cost"],
        [
            [p["date"], f"{p['objects']:,}", size(p["bytes"]), money(p["monthly_cost"], currency)]
            for p in points
        ],
    )
    return f'<section id="{chart_id}"><h2>{html.escape(title)}</h2>{svg}{figures}</section>'


def _short(label: str, limit: int = 38) -> str:
    return label if len(label) <= limit else "…" + label[-(limit - 1) :]


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(report: ChargebackReport, top: int = 15) -> str:
    data = report.to_dict()
    currency = data["currency"]
    totals = data["totals"]

    def cost_items(tallies: Sequence[tuple[str, Any]]) -> list[tuple[str, float, str]]:
        return [(name, t.monthly_cost, money(round(t.monthly_cost, 10), currency)) for name, t in tallies]

    owners = sorted(report.by_owner.items(), key=lambda i: (-i[1].monthly_cost, i[0]))
    tables = sorted(
        ((n, t) for n, t in report.by_table.items() if n != "unowned"),
        key=lambda i: (-i[1].monthly_cost, i[0]),
    )[:top]
    classes = sorted(report.totals.storage_classes.items(), key=lambda i: (-i[1].monthly_cost, i[0]))
    prefixes = sorted(report.unowned_prefixes.items(), key=lambda i: (-i[1].monthly_cost, i[0]))[:top]
    reclaim = [
        (
            r["table"],
            float(r["bytes"] or 0),
            f"{size(r['bytes'])}, {money(r['monthly_cost'], currency)}/month",
        )
        for r in data["reclaimable"]
    ]
    noncurrent_items = [
        (
            f"{p['bucket']}: {p['group']}",
            p["monthly_cost"],
            f"{money(p['monthly_cost'], currency)} ({size(p['bytes'])})",
        )
        for p in data["noncurrent"].get("prefixes", [])[:top]
    ]
    class_items = [
        (name, t.monthly_cost, f"{money(round(t.monthly_cost, 10), currency)} ({size(t.bytes)})")
        for name, t in classes
    ]
    summary = _table(
        ["", "objects", "bytes", "monthly cost"],
        [
            [
                "all current objects",
                f"{totals['objects']:,}",
                size(totals["bytes"]),
                money(totals["monthly_cost"], currency),
            ],
            [
                "unowned",
                f"{data['unowned']['objects']:,}",
                size(data["unowned"]["bytes"]),
                money(data["unowned"]["monthly_cost"], currency),
            ],
            [
                "noncurrent versions",
                f"{data['noncurrent'].get('objects', 0):,}",
                size(data["noncurrent"].get("bytes", 0)),
                money(data["noncurrent"].get("monthly_cost", 0.0), currency),
            ],
            [
                "reclaimable by vacuum",
                "",
                size(totals["reclaimable_bytes"]),
                money(totals["reclaimable_monthly_cost"], currency),
            ],
        ],
    )
    groups = _table(
        [data["by"], "objects", "bytes", "monthly cost"],
        [
            [g["group"], f"{g['objects']:,}", f"{g['bytes']:,}", money(g["monthly_cost"], currency)]
            for g in data["groups"]
        ],
    )
    warnings = "".join(f"<li>{html.escape(w)}</li>" for w in data["warnings"])
    total_cost = money(totals["monthly_cost"], currency)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Storage chargeback: {html.escape(total_cost)} per month</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 980px; }}
h1 {{ font-size: 1.5em; margin-bottom: 0.2em; }} h2 {{ font-size: 1.1em; margin-top: 1.6em; }}
.meta {{ color: #666; }} .total {{ font-size: 2em; font-weight: bold; }}
table {{ border-collapse: collapse; }} td, th {{ padding: 3px 10px; border-bottom: 1px solid #ddd; }}
td:not(:first-child), th:not(:first-child) {{ text-align: right; font-variant-numeric: tabular-nums; }}
svg text {{ font-size: 12px; }} svg text.value {{ fill: #333; }} .empty {{ color: #888; }}
.warnings li {{ color: #a33; }}
</style></head><body>
<h1>Storage chargeback</h1>
<p class="meta">{html.escape(data["inventory_table"])} · {html.escape(currency)} per month · list prices as of
{html.escape(data["prices_as_of"])} ({html.escape(data["price_file"])})</p>
<p class="total" id="total-cost">{html.escape(total_cost)} <span class="meta">per month</span></p>
{summary}
{_bar_chart("Cost by owner", cost_items(owners), "by-owner")}
{_bar_chart(f"Top {len(tables)} tables by cost", cost_items(tables), "top-tables")}
{_bar_chart("Storage class mix (cost)", class_items, "storage-classes")}
{_bar_chart("Unowned objects by top-level prefix (cost)", cost_items(prefixes), "unowned-prefixes")}
{_bar_chart("Reclaimable by vacuum, per table (bytes)", reclaim, "reclaimable")}
{_bar_chart("Noncurrent versions by table or prefix (cost; no vacuum frees them)", noncurrent_items, "noncurrent")}
{_line_chart(f"Trend: monthly cost, last {data['trend'].get('days', 0)} days (at today's prices)", data["trend"].get("points", []), currency, "trend") if data["trend"] else ""}
<section id="groups"><h2>By {html.escape(data["by"])}</h2>{groups}</section>
{f'<section class="warnings"><h2>Warnings</h2><ul>{warnings}</ul></section>' if warnings else ""}
</body></html>
"""
