"""Render a vacuum-at-scale result document: a Markdown table with ratios, and PNG plots; and
what every benchmark shares: its results written to ``results/``, the JVM kept off stdout, and a
Spark setting held for a side's run."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def jvm_output_on_stderr() -> Iterator[None]:
    """Point stdout at stderr while the benchmark runs: the JVM prints to fd 1, and the Markdown
    table printed afterwards should be the only thing on stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


@contextmanager
def spark_setting(spark: Any, key: str, value: str) -> Iterator[None]:
    """While the block runs, the session's ``key`` is ``value``; after, it is what it was before
    (unset, or the job's own value)."""
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def write_results(output: Path, name: str, document: dict[str, Any], text: str) -> None:
    """``output/<name>.json`` (the whole document) and ``output/<name>.md`` (``text``)."""
    output.mkdir(parents=True, exist_ok=True)
    (output / f"{name}.json").write_text(json.dumps(document, indent=2) + "\n")
    (output / f"{name}.md").write_text(text)


REFERENCES = ("inventory-batch", "delta-rs")
_SHORT = {
    "ListObjectsV2": "LIST",
    "ListObjects": "LIST",
    "GetObject": "GET",
    "HeadObject": "HEAD",
    "PutObject": "PUT",
    "DeleteObject": "DELETE",
    "DeleteObjects": "DeleteObjects",
}


def _ratio(value: float, reference: float | None) -> str:
    if reference is None:
        return "–"
    if reference == 0:
        return "–" if value == 0 else "∞"
    ratio = value / reference
    return f"{ratio:.2f}×" if ratio < 10 else f"{ratio:.0f}×"


def _requests(by_operation: dict[str, int]) -> str:
    merged: dict[str, int] = {}
    for operation, count in by_operation.items():
        name = _SHORT.get(operation, operation)
        merged[name] = merged.get(name, 0) + count
    return ", ".join(
        f"{name} {count:,}" for name, count in sorted(merged.items(), key=lambda x: -x[1]) if count
    )


def _reference_values(runs: list[dict[str, Any]], key: str, phase: str = "run") -> dict[str, float]:
    return {r["mode"]: r[phase][key] for r in runs if r["mode"] in REFERENCES}


def markdown(document: dict[str, Any]) -> str:
    """The results as Markdown: per size, times and requests of every mode, with ratios to the
    inventory batch mode and to delta-rs (a ratio above 1 means slower, or more requests)."""
    model = document["model"]
    before, after = document["machine_before"], document["machine_after"]
    lines = [
        "# Vacuum at scale",
        "",
        f"`{document['command'].strip()}`"
        + (f" at {document['code']}" if document.get("code") else "")
        + f", started {document['started_at'][:19]}Z, "
        f"{document['seconds']:.0f} s in all. Machine: {before['cpus']} CPUs, load average "
        f"{before['load_average_1_5_15'][0]} before and {after['load_average_1_5_15'][0]} after; "
        f"{before['platform']}; " + ", ".join(f"{k} {v}" for k, v in before["versions"].items()) + ".",
        "",
        f"Table: {document['layout']['partitions']} hourly partitions; retention "
        f"{document['retention']}. Local S3: moto behind a counting layer "
        f"(listing {document['listing']}). "
        + (
            f"Latency injected: the server waits {document['latency_injected_ms']:.0f} ms on every request, "
            "so modeled time = measured time. "
            if document["latency_injected_ms"]
            else f"Modeled time = local wall time + round trips at {model['latency_ms']:.0f} ms "
            f"(Spark task slots: {model['spark_task_slots']}). "
        )
        + f"Request prices: AWS us-east-1, as of {document['prices']['as_of']}.",
        "",
        "*Plan* is the dry run; *real* is the real run (it plans again, then deletes); "
        + (
            f"each from the round (of {document['repeat']}) whose real run took the median time"
            + (
                " (every round ran each mode in turn, starting at the next mode)"
                if document.get("modes_in_turn")
                else ""
            )
            + "; "
            if document.get("repeat", 1) > 1
            else ""
        )
        + "*delete* = real − plan. Ratios: this mode ÷ the reference, on the real run "
        "(above 1: slower or more requests).",
    ]
    for size in document["sizes"]:
        runs = size["runs"]
        inventory = size["inventory"]
        categories = size["categories"]
        lines += [
            "",
            f"## N = {size['files']:,} files ({size['garbage_files']:,} garbage)",
            "",
            "Files: " + ", ".join(f"{k} {v:,}" for k, v in sorted(categories.items())) + ". "
            f"Built in {size['build_seconds']:.1f} s. Inventory (not part of any vacuum): snapshot of "
            f"{inventory['objects']:,} objects {inventory['snapshot_seconds']:.1f} s, ingest "
            f"{inventory['ingest_seconds']:.1f} s, {inventory['requests']:,} requests "
            f"(${inventory['cost_usd']:.6f}).",
            "",
            "| mode | plan s | delete s | real s | modeled real s | real ÷ inventory-batch | real ÷ delta-rs "
            "| modeled ÷ inventory-batch | modeled ÷ delta-rs |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        seconds = _reference_values(runs, "seconds")
        modeled = _reference_values(runs, "modeled_seconds")
        for run in runs:
            real = run["run"]
            cells = [
                run["label"],
                f"{run['plan']['seconds']:.1f}",
                f"{run['delete']['seconds']:.1f}",
                f"{real['seconds']:.1f}",
                f"{real['modeled_seconds']:.1f}",
                _ratio(real["seconds"], seconds.get("inventory-batch")),
                _ratio(real["seconds"], seconds.get("delta-rs")),
                _ratio(real["modeled_seconds"], modeled.get("inventory-batch")),
                _ratio(real["modeled_seconds"], modeled.get("delta-rs")),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines += [
            "",
            "| mode | plan: table requests | real: table requests | data LISTs plan / real "
            "| other buckets (real) | cost $ (real) | requests ÷ inventory-batch | requests ÷ delta-rs "
            "| cost ÷ inventory-batch | cost ÷ delta-rs |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        requests = _reference_values(runs, "table_requests")
        cost = _reference_values(runs, "cost_usd")
        for run in runs:
            plan, real = run["plan"], run["run"]
            cells = [
                run["label"],
                _requests(plan["table_requests_by_operation"]),
                _requests(real["table_requests_by_operation"]),
                f"{plan['data_list_requests']:,} / {real['data_list_requests']:,}",
                f"{real['other_bucket_requests']:,}",
                f"{real['cost_usd']:.6f}",
                _ratio(real["table_requests"], requests.get("inventory-batch")),
                _ratio(real["table_requests"], requests.get("delta-rs")),
                _ratio(real["cost_usd"], cost.get("inventory-batch")),
                _ratio(real["cost_usd"], cost.get("delta-rs")),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", *targets(size)]
        lines += [f"- {line}" for run in size["runs"] for line in time_in_jobs(run)]
    lines += [
        "",
        "Every mode found exactly the expected candidates (LITE: the tombstoned files only, by design) "
        "and its real run deleted exactly those; the benchmark stops otherwise.",
        "",
    ]
    return "\n".join(lines)


def seconds_a_table(side: dict[str, Any]) -> float:
    """A fleet side's seconds a table, from its total when the result has it (not from the
    rounded figure a table: a ratio of two rounded figures can be off in its last digit)."""
    if side.get("seconds") is not None and side.get("tables"):
        return float(side["seconds"]) / int(side["tables"])
    return float(side["seconds_per_table"])


def time_in_jobs(run: dict[str, Any]) -> list[str]:
    """Where a run of ours spent its dry run's and real run's local wall time, from Spark's event
    log (a line each; none for a peer, or a result made before the benchmark read the log). The
    parts shown add up to the wall time as shown."""
    events = run.get("events")
    if not events:
        unread = run.get("events_unread")
        return [f"{run['label']}: no breakdown from Spark's event log: {unread}"] if unread else []
    lines = []
    for phase, name in (("plan", "dry run"), ("run", "real run")):
        figures = events[phase]
        wall, in_jobs = round(run[phase]["seconds"], 1), round(figures["in_jobs_seconds"], 1)
        steps = "; ".join(_step_line(step) for step in figures["steps"])
        jobs = f"{figures['jobs']} Spark job{'s' if figures['jobs'] != 1 else ''}"
        lines.append(
            f"{run['label']}, the {name}: {wall:.1f} s of local wall time "
            f"({run[phase]['modeled_seconds']:.1f} s modeled). From Spark's event log: "
            f"{in_jobs:.1f} s in {jobs} (their union), {max(0.0, wall - in_jobs):.1f} s outside any "
            "job (the driver's time between and around them, not broken down); the jobs' seconds by "
            f"step: {steps}"
        )
    return lines


def _step_line(step: dict[str, Any]) -> str:
    group = "" if step["table"] else "other jobs: "
    jobs = f"{step['jobs']} job{'s' if step['jobs'] != 1 else ''}"
    return f"{group}{step['step']} {step['seconds']:.2f} s ({jobs})"


def targets(size: dict[str, Any]) -> list[str]:
    """The targets against the peers for this size, as measured (a line each; modes not run are skipped)."""
    runs = {r["mode"]: r for r in size["runs"]}
    lines = []
    batch, rs, listing = runs.get("inventory-batch"), runs.get("delta-rs"), runs.get("list")
    if batch and listing:
        ratio = listing["run"]["modeled_seconds"] / max(batch["run"]["modeled_seconds"], 1e-9)
        lines.append(
            f"- Inventory (batch) vs Delta's listing VACUUM, modeled real run: {ratio:.1f}× faster "
            "(target: at least 20× at 100k files)."
        )
    if batch and rs:
        ratio = batch["run"]["modeled_seconds"] / max(rs["run"]["modeled_seconds"], 1e-9)
        verdict = "slower" if ratio > 1 else "faster"
        lines.append(
            f"- Inventory (batch) vs delta-rs, modeled real run: {max(ratio, 1 / ratio):.1f}× {verdict} "
            "(target: faster from 100k files up)."
        )
    for name in ("inventory-batch", "inventory-delta"):
        if name in runs:
            run = runs[name]
            lines.append(
                f"- {run['label']}: {run['plan']['data_list_requests']:,} LIST requests under the table's "
                f"data in the dry run, {run['run']['data_list_requests']:,} in the real run (target: none)."
            )
    if batch:
        deleted = batch["deleted_files"]
        requests = batch["run"]["table_requests_by_operation"].get("DeleteObjects", 0)
        lines.append(
            f"- Batch deletes: {requests} DeleteObjects for {deleted:,} files "
            f"(ceil(D/1000) = {-(-deleted // 1000)}, plus up to one per Spark task)."
        )
    return lines


def plot(document: dict[str, Any], output: Path) -> list[Path]:
    """``vacuum_at_scale_requests.png`` and ``vacuum_at_scale_time.png``: against N, log scales."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = document["sizes"]
    modes: dict[str, str] = {}
    for size in sizes:
        for run in size["runs"]:
            modes.setdefault(run["mode"], run["label"])

    def series(mode: str, phase: str, key: str) -> tuple[list[int], list[float]]:
        points = [
            (size["files"], run[phase][key]) for size in sizes for run in size["runs"] if run["mode"] == mode
        ]
        # a log axis cannot show 0: such points (none expected) are left out
        return [p[0] for p in points if p[1] > 0], [p[1] for p in points if p[1] > 0]

    written = []
    figure, axes = plt.subplots(1, 2, figsize=(13, 5))
    for mode, label in modes.items():
        axes[0].plot(*series(mode, "run", "table_requests"), marker="o", label=label)
        axes[1].plot(*series(mode, "run", "cost_usd"), marker="o", label=label)
    axes[0].set_title("S3 requests to the table's bucket (real run)")
    axes[1].set_title("request cost, all buckets (real run), USD")
    for axis in axes:
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("files in the table (N)")
        axis.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    path = output / "vacuum_at_scale_requests.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    written.append(path)

    latency = document["model"]["latency_ms"] or document["latency_injected_ms"]
    figure, axes = plt.subplots(1, 2, figsize=(13, 5))
    for mode, label in modes.items():
        axes[0].plot(*series(mode, "run", "seconds"), marker="o", label=label)
        axes[1].plot(*series(mode, "run", "modeled_seconds"), marker="o", label=label)
    axes[0].set_title("measured wall time, real run (local S3), s")
    injected = " (injected)" if document["latency_injected_ms"] else ""
    axes[1].set_title(f"modeled time with {latency:.0f} ms per S3 round trip{injected}, real run, s")
    for axis in axes:
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("files in the table (N)")
        axis.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    path = output / "vacuum_at_scale_time.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    written.append(path)
    return written
