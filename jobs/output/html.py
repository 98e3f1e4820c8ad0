"""The chargeback report as one self-contained HTML page: inline SVG bar charts drawn here, the
trend as a line chart with its figures below it, no scripts, no external resources.

Amounts are written exactly (``$0.0000026``), from the figures of ``report.to_dict()``.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from chargeback.report import UNOWNED, ChargebackReport, Tally, TrendPoint, rounded_cost
from jobs.output.units import count, money, size

if TYPE_CHECKING:
    from chargeback.advice import Advice

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


def _line_chart(title: str, points: Sequence[TrendPoint], currency: str, chart_id: str) -> str:
    """Monthly cost per date: the total and each owner, one polyline each, and the figures as a
    table below (the numbers a reader checks)."""
    if not points:
        return f'<section id="{chart_id}"><h2>{html.escape(title)}</h2><p class="empty">no history yet</p></section>'
    width, height, left, bottom, top = 640, 220, 70, 30, 12
    owners = [name for name, _ in points[-1].owners][: len(_PALETTE) - 1]
    series = [("total", [p.monthly_cost for p in points])] + [
        (name, [_cost_of(dict(p.owners).get(name)) for p in points]) for name in owners
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
            f"<title>{html.escape(name)} {html.escape(points[i].date)}: {html.escape(money(v, currency))}</title></circle>"
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
        f'<text x="{left}" y="{height - 8}">{html.escape(points[0].date)}</text>'
        f'<text x="{width - 10}" y="{height - 8}" text-anchor="end">{html.escape(points[-1].date)}</text>'
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - 10}" y2="{height - bottom}" stroke="#999"/>'
    )
    svg = (
        f'<svg role="img" aria-label="{html.escape(title)}" width="{width + 200}" height="{height}" '
        f'xmlns="http://www.w3.org/2000/svg">{axis}{"".join(lines)}</svg>'
    )
    figures = _table(
        ["date", "objects", "bytes", "monthly cost"],
        [[p.date, count(p.objects), size(p.bytes), money(p.monthly_cost, currency)] for p in points],
    )
    return f'<section id="{chart_id}"><h2>{html.escape(title)}</h2>{svg}{figures}</section>'


def _cost_of(tally: Tally | None) -> float:
    """A tally's monthly cost as the JSON holds it (0 for none)."""
    return rounded_cost(tally.monthly_cost) if tally is not None else 0.0


def _short(label: str, limit: int = 38) -> str:
    return label if len(label) <= limit else "…" + label[-(limit - 1) :]


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


KIND_NAMES = {
    "noncurrent_versions": "noncurrent versions",
    "small_objects": "small objects",
    "old_unowned_objects": "old unowned objects",
}


def _recommendations(advice: Advice, currency: str) -> str:
    """The ``--advise`` section: a row per recommendation with how to do it below it, then each
    bucket's lifecycle configuration (JSON for the AWS CLI, and Terraform)."""
    by_rules = money(rounded_cost(advice.monthly_saving_by_rules), currency)
    reported = money(rounded_cost(advice.monthly_saving_reported), currency)
    rows = []
    for r in advice.recommendations:
        action = f"rule {r.rule.id}" if r.rule else "report"
        cells = [
            KIND_NAMES.get(r.kind, r.kind),
            f"{r.bucket}: {r.group}",
            count(r.objects),
            size(r.bytes),
            count(r.delete_markers),
            money(rounded_cost(r.monthly_saving), currency),
            action,
        ]
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
        rows.append(f'<tr class="how"><td colspan="{len(cells)}">{html.escape(r.how)}</td></tr>')
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "what",
            "bucket: table or prefix",
            "objects",
            "size",
            "delete markers",
            "saving a month",
            "action",
        )
    )
    table = (
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        if rows
        else '<p class="empty">nothing to recommend</p>'
    )
    buckets = "".join(
        f"<h3>Lifecycle configuration of bucket {html.escape(b.bucket)} (saves "
        f"{html.escape(money(rounded_cost(b.monthly_saving), currency))} a month, all of it at the latest "
        f"{advice.restore_window_days} days after it is applied)</h3>"
        f'<p class="meta">{html.escape(b.to_dict()["apply"])}</p>'
        f'<pre class="lifecycle-json">{html.escape(json.dumps(b.to_dict()["lifecycle_configuration"], indent=2))}</pre>'
        f'<pre class="terraform">{html.escape(b.terraform)}</pre>'
        for b in advice.buckets
    )
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in (*advice.notes, *advice.warnings))
    return (
        f'<section id="recommendations"><h2>Recommendations: {html.escape(by_rules)} a month by lifecycle '
        f"rules, {html.escape(reported)} more by reports (no rule can do it)</h2>{table}{buckets}"
        f'<ul class="notes">{notes}</ul></section>'
    )


def render_html(report: ChargebackReport, top: int = 15) -> str:
    """The page: the total, a summary table, bar charts (cost by owner, the ``top`` costliest
    tables, storage classes, unowned prefixes, reclaimable, noncurrent), the trend, the
    recommendations (with ``--advise``), and the groups."""
    currency = report.currency
    totals = report.totals
    noncurrent = report.noncurrent

    def cost_items(tallies: Sequence[tuple[str, Tally]]) -> list[tuple[str, float, str]]:
        return [(name, t.monthly_cost, money(_cost_of(t), currency)) for name, t in tallies]

    def by_cost(item: tuple[str, Tally]) -> tuple[float, str]:
        return (-item[1].monthly_cost, item[0])

    owners = sorted(report.by_owner.items(), key=by_cost)
    tables = sorted(((n, t) for n, t in report.by_table.items() if n != UNOWNED), key=by_cost)[:top]
    classes = sorted(totals.storage_classes.items(), key=by_cost)
    prefixes = sorted(report.unowned_prefixes.items(), key=by_cost)[:top]
    reclaim = [
        (r.table, float(r.bytes or 0), f"{size(r.bytes)}, {money(r.monthly_cost, currency)}/month")
        for r in report.reclaimable
    ]
    noncurrent_items = [
        (
            f"{g.bucket}: {g.group}",
            g.monthly_cost,
            f"{money(g.monthly_cost, currency)} ({size(g.bytes)})",
        )
        for g in ((noncurrent.groups or ()) if noncurrent else ())[:top]
    ]
    class_items = [
        (name, t.monthly_cost, f"{money(_cost_of(t), currency)} ({size(t.bytes)})") for name, t in classes
    ]
    summary = _table(
        ["", "objects", "bytes", "monthly cost"],
        [
            [
                "all current objects",
                count(totals.objects),
                size(totals.bytes),
                money(_cost_of(totals), currency),
            ],
            [
                "unowned",
                count(report.unowned.objects),
                size(report.unowned.bytes),
                money(_cost_of(report.unowned), currency),
            ],
            [
                "noncurrent versions",
                count(noncurrent.objects if noncurrent else 0),
                size(noncurrent.bytes if noncurrent else 0),
                money(noncurrent.monthly_cost if noncurrent else 0.0, currency),
            ],
            [
                "reclaimable by vacuum",
                "",
                size(report.reclaimable_bytes),
                money(report.reclaimable_monthly_cost, currency),
            ],
        ],
    )
    groups = _table(
        [report.by, "objects", "bytes", "monthly cost"],
        [
            [name, count(g.objects), f"{g.bytes:,}", money(_cost_of(g), currency)]
            for name, g in report.ranked_groups()
        ],
    )
    warnings = "".join(f"<li>{html.escape(w)}</li>" for w in report.warnings)
    total_cost = money(_cost_of(totals), currency)
    trend = report.trend
    trend_title = f"Trend: monthly cost, last {trend.days if trend else 0} days (at today's prices)"
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
#recommendations td {{ white-space: nowrap; }}
#recommendations tr.how td {{ text-align: left; color: #555; font-size: 0.9em; white-space: normal; }}
pre {{ background: #f6f6f6; padding: 8px; overflow-x: auto; font-size: 12px; }}
</style></head><body>
<h1>Storage chargeback</h1>
<p class="meta">{html.escape(report.inventory_table)} · {html.escape(currency)} per month · list prices as of
{html.escape(report.prices_as_of)} ({html.escape(report.price_file)})</p>
<p class="total" id="total-cost">{html.escape(total_cost)} <span class="meta">per month</span></p>
{summary}
{_bar_chart("Cost by owner", cost_items(owners), "by-owner")}
{_bar_chart(f"Top {len(tables)} tables by cost", cost_items(tables), "top-tables")}
{_bar_chart("Storage class mix (cost)", class_items, "storage-classes")}
{_bar_chart("Unowned objects by top-level prefix (cost)", cost_items(prefixes), "unowned-prefixes")}
{_bar_chart("Reclaimable by vacuum, per table (bytes)", reclaim, "reclaimable")}
{_bar_chart("Noncurrent versions by table or prefix (cost; no vacuum frees them)", noncurrent_items, "noncurrent")}
{_line_chart(trend_title, trend.points, currency, "trend") if trend else ""}
{_recommendations(report.advice, currency) if report.advice else ""}
<section id="groups"><h2>By {html.escape(report.by)}</h2>{groups}</section>
{f'<section class="warnings"><h2>Warnings</h2><ul>{warnings}</ul></section>' if warnings else ""}
</body></html>
"""
