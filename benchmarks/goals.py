"""The performance goals beside today's figures: each goal's figure read from the committed result
that measures it, how far it is from the goal, its peers in the same run, and where its time goes
(as the result recorded it: Spark's event log, the process's timing, S3 request counts).

    .venv/bin/python -m benchmarks.goals                     # reads benchmarks/results/, writes its goals.md
    .venv/bin/python -m benchmarks.goals --results DIR       # reads DIR, writes DIR/goals.md

It runs nothing: it reads the ``.json`` files the benchmarks wrote, so ``goals.md`` states the
figures of the results beside it. A goal whose result is missing, incomplete, or was measured at
other sizes or settings says so ("not measured") and names the command that measures it.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.report import seconds_a_table, time_in_jobs
from benchmarks.vacuum_at_scale import java_of

RESULTS = Path(__file__).parent / "results"
NAME = "goals.md"

ONE_TABLE_SECONDS = 10.0
ONE_TABLE_FILES = 3000
FLEET_SECONDS_PER_TABLE = 1.5
FLEET_TABLES = 100
FLEET_FILES_PER_TABLE = 1000
INGEST_ROWS_PER_SECOND = 300_000
INGEST_ROWS = 10_000_000
INGEST_REGISTERED_TABLES = 1000
DELTA_RS_NO_SLOWER_FROM_FILES = 30_000
DELTA_RS_FASTER_AT_FILES = 100_000
DELTA_RS_FASTER_BY = 1.5
MODELED_LATENCY_MS = 20.0


class UnreadableResult(Exception):
    """A result file that is not JSON."""


@dataclass
class Standing:
    """One goal against its result: ``met``, and ``short_by``, the factor by which the figure must
    improve to meet the goal (its seconds over the goal's, or the goal's rate or speed-up over its
    own; 1.0 or less when met)."""

    today: str
    met: bool
    short_by: float
    peers: str
    where: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Goal:
    what: str
    goal: str
    result: str  # the result's path under the results folder
    command: str  # the command that measures the goal
    measure: Callable[[dict[str, Any]], Standing | str]  # a Standing, or why the result does not measure it


def _at_most(figure: float, goal: float) -> bool:
    """``figure`` meets a goal of at most ``goal`` (a float product's last bit does not miss it)."""
    return figure <= goal or math.isclose(figure, goal, rel_tol=1e-9)


def _seconds_goal(today: str, seconds: float, goal: float, peers: list[str], where: list[str]) -> Standing:
    """The standing of ``seconds`` against a goal of at most ``goal`` seconds."""
    return Standing(today, _at_most(seconds, goal), seconds / goal, "; ".join(peers), where)


def _times(ratio: float, faster: str, slower: str) -> str:
    """``1.99x faster`` or ``1.27x slower``: a ratio of seconds (the other's over ours) in words."""
    return f"{ratio:.2f}x {faster}" if ratio >= 1 else f"{1 / ratio:.2f}x {slower}"


def one_table(document: dict[str, Any]) -> Standing | str:
    table = document["table"]
    if "RETAIN 0 HOURS" not in document.get("retention", ""):
        return "measured at another retention than every side's RETAIN 0 HOURS"
    if table["files"] != ONE_TABLE_FILES or document.get("bucket_objects"):
        return (
            f"measured on {table['files']:,} files in a bucket of "
            f"{document.get('bucket_objects', 0):,} other objects"
        )
    sides = document["sides"]
    ours = sides["ours"]["median_seconds"]
    labels = {"delta-rs": "delta-rs `vacuum(full=True)`", "delta-sql": "Delta's listing VACUUM"}
    peers = [
        f"{label} {sides[side]['median_seconds']:.1f} s "
        f"(ours {_times(sides[side]['median_seconds'] / ours, 'faster', 'slower')})"
        for side, label in labels.items()
        if side in sides
    ]
    round_ = sides["ours"]["median_round"]
    where = [f"{item['item']}: {item['seconds']:.1f} s" for item in round_.get("breakdown", [])]
    where += [
        f"Spark jobs of the step `{step['step']}`: {step['jobs']}, {step['seconds']:.2f} s"
        for step in round_.get("steps", [])
    ]
    where += [
        f"Spark jobs outside the table's job group, `{job['step']}`: {job['jobs']}, {job['seconds']:.2f} s"
        for job in round_.get("other_jobs", [])
    ]
    return _seconds_goal(
        f"{ours:.1f} s (median of {document['rounds']})", ours, ONE_TABLE_SECONDS, peers, where
    )


def _product_runs(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The fleet runs made as the command runs (snapshots sized by the tool, no extra settings)."""
    if document.get("conf"):
        return []
    return [run for run in document["runs"] if run.get("snapshot_partitions") == "sized"]


def _to_delta_rs(document: dict[str, Any]) -> str:
    """Ours against the delta-rs loop of the same fleet run (the peers' own run of ours), in words."""
    peers = document.get("peers") or {}
    if "delta-rs" not in peers:
        return "no delta-rs loop in this run"
    if "ours" not in peers:
        return "no run of ours beside the delta-rs loop"
    ours, theirs = peers["ours"]["seconds_per_table"], peers["delta-rs"]["seconds_per_table"]
    ratio = seconds_a_table(peers["delta-rs"]) / seconds_a_table(peers["ours"])
    return f"{ours:.2f} against {theirs:.2f} s a table: ours {_times(ratio, 'faster', 'slower')}"


def fleet(document: dict[str, Any]) -> Standing | str:
    tables, files = document["tables"], document.get("files_per_table")
    if document.get("unchanged_tables"):
        return f"measured on {tables} tables, {document['unchanged_tables']} of them with nothing to delete"
    if tables != FLEET_TABLES or files != FLEET_FILES_PER_TABLE:
        return f"measured on {tables} tables of {files} files"
    runs = _product_runs(document)
    if not runs:
        return "no run with the command's own settings (snapshots sized by the tool, no --conf)"
    best = min(runs, key=lambda run: run["seconds_per_table"])
    figure = best["seconds_per_table"]
    peers = document.get("peers") or {}
    ours = peers.get("ours")
    against = [
        f"{peer['label']} {peer['seconds_per_table']:.2f} s a table on {peer['tables']} tables "
        f"(ours {_times(seconds_a_table(peer) / seconds_a_table(ours), 'faster', 'slower')})"
        for name, peer in peers.items()
        if ours and name != "ours"
    ]
    if ours:  # the peers ran beside one run of ours, which need not be the best one
        against.insert(0, f"beside {ours['label']}, {ours['seconds_per_table']:.2f} s a table")
    events = best.get("events") or {}
    where = [
        f"Spark jobs per table: {events.get('jobs_per_table_median', '–')}, "
        f"{events.get('job_seconds_per_table_median', 0):.2f} s of job time a table (the jobs of "
        "tables running at the same time overlap)"
    ]
    where += [
        f"Spark jobs of the step `{step['step']}`: {step['jobs_per_table']:g} a table, "
        f"{step['seconds_per_table']:.2f} s a table"
        for step in events.get("steps", [])
    ]
    where += _beyond_delta(peers)
    today = f"{figure:.2f} s a table at --parallel {best['parallel']}"
    return _seconds_goal(today, figure, FLEET_SECONDS_PER_TABLE, against, where)


def _beyond_delta(peers: dict[str, Any]) -> list[str]:
    """Ours beside Delta's inventory loop sized as ours (both wall seconds over their tables), and
    the difference when that loop ran every table of the run and both named the garbage as built:
    two loops' times in one process, not a breakdown of ours (see ``fleet_peers``)."""
    ours, delta = peers.get("ours"), peers.get("delta-inventory-sized")
    if not ours or not delta:
        return []
    line = (
        f"Delta's dry run alone, its session sized as ours: {delta['seconds_per_table']:.2f} s a table "
        f"of wall time on {delta['tables']} of the {ours['tables']} tables"
    )
    same = delta["tables"] == ours["tables"] and all(
        side.get("differences", {}).get("matches") for side in (ours, delta)
    )
    if same:
        line += (
            f"; ours took {ours['seconds_per_table'] - delta['seconds_per_table']:.2f} s a table more. "
            "The two loops do different work (ours gates the slice, checks Delta's answer, reports and "
            "writes its candidates for the benchmark; that loop's Delta loads the snapshot and scans "
            "the inventory itself), so this is not a breakdown of ours"
        )
    return [line]


def _command_side(result: dict[str, Any]) -> dict[str, Any] | None:
    """The side the ingest command itself takes for the result's delivery."""
    from benchmarks.ingest_rate import command_layout

    layout = command_layout(result)
    if layout is None:
        return None
    # a side whose key ranges fell back to the global sort says so in its layout
    return next((side for side in result["sides"] if side["layout"].startswith(layout)), None)


def ingest(document: dict[str, Any]) -> Standing | str:
    result = next(
        (r for r in document["results"] if r["format"] == "parquet" and r["rows"] == INGEST_ROWS), None
    )
    if result is None or document.get("registered_tables") != INGEST_REGISTERED_TABLES:
        sizes = ", ".join(f"{r['format']} {r['rows']:,} rows" for r in document["results"])
        registered = document.get("registered_tables") or 0
        return f"measured on {sizes} with {registered:,} registered tables"
    ours = _command_side(result)
    if ours is None:
        return "the result has no side the command takes"
    rate = ours["rows_per_second"]
    peers = [
        f"{side['layout']} {side['rows_per_second']:,} rows/s "
        f"(ours {_times(side['ingest_seconds'] / ours['ingest_seconds'], 'faster', 'slower')})"
        for side in result["sides"]
        if side is not ours
    ]
    steps = sorted(ours.get("spark_steps", []), key=lambda s: -s["seconds"])
    where = [
        f"Spark jobs of the step `{step['step'].split('<br/>')[0]}`: {step['jobs']}, {step['seconds']:.1f} s"
        for step in steps[:3]
    ]
    if steps[3:]:
        where.append(
            f"the other {sum(s['jobs'] for s in steps[3:])} Spark jobs: {sum(s['seconds'] for s in steps[3:]):.1f} s"
        )
    outside = ours["ingest_seconds"] - sum(s["seconds"] for s in steps)
    where.append(
        f"outside Spark's jobs (the driver's work): {outside:.1f} s of {ours['ingest_seconds']:.1f} s"
    )
    return Standing(
        today=f"{rate:,} rows/s ({ours['ingest_seconds']:.1f} s, {ours['layout']})",
        met=_at_most(INGEST_ROWS_PER_SECOND, rate),
        short_by=INGEST_ROWS_PER_SECOND / rate,
        peers="; ".join(peers),
        where=where,
    )


def _modeled_pair(document: dict[str, Any], files: int) -> tuple[dict[str, Any], dict[str, Any]] | str:
    """(inventory mode with the batch delete, delta-rs) at ``files``, from a vacuum_at_scale
    result modeled at :data:`MODELED_LATENCY_MS`; or why there is none."""
    # the latency modeled, or added to every request (then the wall time holds it)
    latency = document["model"]["latency_ms"] or document.get("latency_injected_ms", 0)
    if latency != MODELED_LATENCY_MS:
        return f"at {latency:g} ms a request, not {MODELED_LATENCY_MS:g}"
    if not str(document.get("listing", "")).startswith("indexed"):
        return f"with the S3 server's listing {document.get('listing')!r}, not its indexed one"
    for size in document["sizes"]:
        if size["files"] == files:
            runs = {run["mode"]: run for run in size["runs"]}
            if "inventory-batch" in runs and "delta-rs" in runs:
                return runs["inventory-batch"], runs["delta-rs"]
    return f"no inventory-batch and delta-rs runs at {files:,} files"


def _modeled_today(document: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any]) -> str:
    rounds = document.get("repeat", 1)
    which = f", the round of median real time of {rounds}" if rounds > 1 else ""
    return (
        f"{ours['run']['modeled_seconds']:.1f} s against delta-rs's "
        f"{theirs['run']['modeled_seconds']:.1f} s{which}"
    )


def _run_where(files: int, ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    return [
        f"at {files:,} files, ours: plan {ours['plan']['modeled_seconds']:.1f} s modeled, the whole "
        f"real run {ours['run']['modeled_seconds']:.1f} s, {ours['run']['table_requests']} requests to "
        f"the table, {ours['run'].get('data_list_requests', 0)} of them LISTs of its data; delta-rs: "
        f"plan {theirs['plan']['modeled_seconds']:.1f} s, real run {theirs['run']['modeled_seconds']:.1f} s, "
        f"{theirs['run']['table_requests']} requests, {theirs['run'].get('data_list_requests', 0)} LISTs of its data",
        *time_in_jobs(ours),
    ]


def _against_delta_rs(document: dict[str, Any], files: int, faster_by: float) -> Standing | str:
    """Ours against delta-rs at ``files``, for a goal of being ``faster_by`` times as fast."""
    pair = _modeled_pair(document, files)
    if isinstance(pair, str):
        return pair
    ours, theirs = pair
    mine, other = ours["run"]["modeled_seconds"], theirs["run"]["modeled_seconds"]
    return Standing(
        today=_modeled_today(document, ours, theirs),
        met=_at_most(faster_by * mine, other),
        short_by=faster_by * mine / other,
        peers=f"ours {_times(other / mine, 'faster', 'slower')} than delta-rs",
        where=_run_where(files, ours, theirs),
    )


def delta_rs_no_slower(document: dict[str, Any]) -> Standing | str:
    return _against_delta_rs(document, DELTA_RS_NO_SLOWER_FROM_FILES, 1.0)


def delta_rs_faster(document: dict[str, Any]) -> Standing | str:
    return _against_delta_rs(document, DELTA_RS_FASTER_AT_FILES, DELTA_RS_FASTER_BY)


_VACUUM_30K_100K = (
    "python -m benchmarks.vacuum_at_scale --files 30000 --files 100000 --modes inventory-batch,delta-rs "
    "--repeat 3 --output benchmarks/results/vacuum-30k-100k"
)
GOALS = (
    Goal(
        "one table in one fresh process: dry run of 3,000 files in 720 partitions",
        f"at most {ONE_TABLE_SECONDS:g} s end to end",
        "one_table.json",
        "python -m benchmarks.one_table",
        one_table,
    ),
    Goal(
        "a fleet of 100 tables of 1,000 files, dry runs in one job",
        f"at most {FLEET_SECONDS_PER_TABLE:g} s a table",
        "many_tables.json",
        "python -m benchmarks.many_tables --tables 100 --parallel 4 --no-compare-default --listing-tables 4",
        fleet,
    ),
    Goal(
        "ingest of a Parquet delivery of 10M rows, keys tagged from 1,000 registered tables",
        f"at least {INGEST_ROWS_PER_SECOND:,} rows/s",
        "ingest_rate.json",
        "python -m benchmarks.ingest_rate --formats parquet --rows 10000000 --registered-tables 1000",
        ingest,
    ),
    Goal(
        "one table's real run against delta-rs `vacuum(full=True)` at 30,000 files, modeled",
        "no slower than delta-rs",
        "vacuum-30k-100k/vacuum_at_scale.json",
        _VACUUM_30K_100K,
        delta_rs_no_slower,
    ),
    Goal(
        "one table's real run against delta-rs `vacuum(full=True)` at 100,000 files, modeled",
        f"at least {DELTA_RS_FASTER_BY:g}x faster than delta-rs",
        "vacuum-30k-100k/vacuum_at_scale.json",
        _VACUUM_30K_100K,
        delta_rs_faster,
    ),
)


def _read(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UnreadableResult(f"{path}: not a readable result ({error})") from None
    if not isinstance(document, dict):
        raise UnreadableResult(f"{path}: not a result (a JSON {type(document).__name__}, not an object)")
    return document


def _measured(goal: Goal, document: dict[str, Any]) -> Standing | str:
    try:
        standing = goal.measure(document)
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError, AttributeError) as error:
        return f"incomplete result ({type(error).__name__}: {error})"
    if isinstance(standing, Standing) and not math.isfinite(standing.short_by):
        return "incomplete result (a figure that is not a number)"
    return standing


def standings(results: Path) -> list[tuple[Goal, Standing | str, dict[str, Any] | None]]:
    """Each goal, with its standing (or why there is none) and the result document it read.
    Raises :class:`UnreadableResult` for a result file that is not JSON."""
    rows: list[tuple[Goal, Standing | str, dict[str, Any] | None]] = []
    for goal in GOALS:
        path = results / goal.result
        if not path.is_file():
            rows.append((goal, f"no result {goal.result}", None))
            continue
        document = _read(path)
        rows.append((goal, _measured(goal, document), document))
    return rows


def _fleet_sizes(results: Path) -> Iterable[str]:
    """The fleet against the delta-rs loop at every size measured under ``results``."""
    for path in sorted(results.rglob("many_tables.json")):
        document = _read(path)
        try:
            unchanged = document.get("unchanged_tables")
            kind = f", {unchanged} of them with nothing to delete" if unchanged else ""
            if document.get("conf"):
                kind += f", with --conf {' '.join(map(str, document['conf']))}"
            commit = f" at {document['code']}" if document.get("code") else ""
            line = (
                f"{document['tables']} tables of {document.get('files_per_table') or 0:,} files{kind} "
                f"(`{path.relative_to(results)}`{commit}{java_of(document.get('machine_before'))}): "
                f"{_to_delta_rs(document)}"
            )
        except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError) as error:
            line = f"`{path.relative_to(results)}`: incomplete result ({type(error).__name__}: {error})"
        yield f"- {line}"


def _status(standing: Standing) -> str:
    if standing.met:
        return "met"
    # a goal missed by a hair never reads 1.00x
    return f"missed by {max(round(standing.short_by, 2), 1.01):.2f}x"


HOW_FAR = (
    "*How far* is the factor by which the figure must improve to meet the goal: its seconds over "
    "the goal's, or the goal's rate or speed-up over its own"
)


def _today(standing: Standing, document: dict[str, Any] | None) -> str:
    """The goal's figure today, with the Java its result ran on where the result recorded it."""
    return standing.today + java_of((document or {}).get("machine_before"))


def summary(results: Path) -> list[str]:
    """The goals as a short Markdown table (goal, today, how far): the rows the documentation's
    Performance page shows."""
    lines = ["| goal | today | how far |", "|---|---|---|"]
    for goal, standing, document in standings(results):
        if isinstance(standing, str):
            lines.append(f"| {goal.what}: {goal.goal} | – | not measured: {standing} |")
        else:
            lines.append(f"| {goal.what}: {goal.goal} | {_today(standing, document)} | {_status(standing)} |")
    return lines


def markdown(results: Path) -> str:
    rows = standings(results)
    lines = [
        "# Performance goals and today's figures",
        "",
        "Each figure is read from the result beside this file (`python -m benchmarks.goals` writes it "
        f"from them and runs nothing). {HOW_FAR}. *Command* is the one that made the result; "
        "*measure with* is the one that measures the goal.",
        "",
        "| goal | today | how far | peers in the same run | result | command | measure with |",
        "|---|---|---|---|---|---|---|",
    ]
    for goal, standing, document in rows:
        commit = f" at {document['code']}" if document and document.get("code") else ""
        command = document.get("command") if document else None
        made_by = f"`{command.strip()}`" if isinstance(command, str) and command.strip() else "–"
        if isinstance(standing, str):
            lines.append(
                f"| {goal.what}: {goal.goal} | – | not measured: {standing} | – | `{goal.result}`{commit} | "
                f"{made_by} | `{goal.command}` |"
            )
            continue
        lines.append(
            f"| {goal.what}: {goal.goal} | {_today(standing, document)} | {_status(standing)} | {standing.peers} | "
            f"`{goal.result}`{commit} | {made_by} | `{goal.command}` |"
        )
    lines += [
        "",
        "## The fleet against the delta-rs loop, at every size measured",
        "",
        *_fleet_sizes(results),
    ]
    lines += ["", "## Where the time goes", ""]
    for goal, standing, _ in rows:
        if isinstance(standing, Standing):
            lines += [f"**{goal.what}** ({_status(standing)}):", ""]
            lines += [f"- {item}" for item in standing.where]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.goals",
        description="The performance goals beside the figures of the results in a folder, written to "
        "that folder's goals.md (and printed). Runs no benchmark.",
    )
    parser.add_argument(
        "--results", type=Path, default=RESULTS, help="the results folder (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        print(f"benchmarks.goals: no results folder {args.results}", file=sys.stderr)
        return 2
    if not any((args.results / goal.result).is_file() for goal in GOALS):
        names = ", ".join(sorted({goal.result for goal in GOALS}))
        print(f"benchmarks.goals: {args.results} holds none of the goals' results ({names})", file=sys.stderr)
        return 2
    try:
        text = markdown(args.results)
    except UnreadableResult as error:
        print(f"benchmarks.goals: {error}", file=sys.stderr)
        return 2
    (args.results / NAME).write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
