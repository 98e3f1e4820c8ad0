"""The one output layer: every command's result goes through an :class:`Output`, chosen once
by the command line.

- :class:`ConsoleOutput`: text for people, one renderer per command (``_<command>``);
- :class:`JsonOutput`: one JSON object on stdout (``--json``), the result's ``to_dict()``;
- :class:`DocumentOutput`: a rendered document (the chargeback's HTML or CSV), from the same
  typed result.

Numbers read the same everywhere (:mod:`jobs.output.units`); JSON keeps them exact.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any, Protocol, TextIO

from jobs.output.units import hours, size


class Result(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


class Output(Protocol):
    stream: TextIO  # the command's standard output (what ``--report /dev/stdout`` names)

    def show(self, command: str, result: Result) -> None: ...


class JsonOutput:
    """``--json``: one JSON object, the result's ``to_dict()``, on one line."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def show(self, command: str, result: Result) -> None:
        self.stream.write(json.dumps(result.to_dict(), default=str) + "\n")
        self.stream.flush()


class DocumentOutput:
    """A document rendered from the typed result (``render(result) -> text``)."""

    def __init__(self, stream: TextIO, render: Callable[[Any], str]) -> None:
        self.stream = stream
        self.render = render

    def show(self, command: str, result: Result) -> None:
        self.stream.write(self.render(result))
        self.stream.flush()


def output_for(args: argparse.Namespace, stream: TextIO) -> Output:
    """The output the command line asked for: ``--json``, a chargeback ``--format``, or text."""
    chosen = "json" if getattr(args, "json", False) else getattr(args, "report_format", "text")
    if chosen == "json":
        return JsonOutput(stream)
    if chosen == "html":
        from jobs.output.html import render_html

        return DocumentOutput(stream, render_html)
    if chosen == "csv":
        from jobs.output.csv import render_csv

        return DocumentOutput(stream, render_csv)
    return ConsoleOutput(stream)


def size_or_unknown(value: int | None) -> str:
    return size(value) if value is not None else "size unknown"


def chargeback_lines(data: dict[str, Any]) -> list[str]:
    """The chargeback report as console lines (from its JSON form, as the demo keeps it)."""
    from jobs.output.chargeback_console import text_lines

    return text_lines(data)


class ConsoleOutput:
    """Text for a terminal: the answer first, one line per bucket or table, then details."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def show(self, command: str, result: Result) -> None:
        render = getattr(self, f"_{command.replace('-', '_')}", None)
        lines = render(result.to_dict()) if render else [json.dumps(result.to_dict(), indent=2, default=str)]
        self.stream.write("\n".join(lines) + "\n")
        self.stream.flush()

    def _chargeback(self, data: dict[str, Any]) -> list[str]:
        return chargeback_lines(data)

    def _iam_policy(self, data: dict[str, Any]) -> list[str]:
        return [json.dumps(data, indent=2)]

    def _fetch_jars(self, data: dict[str, Any]) -> list[str]:
        archive = data.get("class_archive")
        return [
            f"in the local Ivy cache and loading: {', '.join(data['packages'])}"
            + (f"; the JVM's classes archived in {archive}" if archive else "")
        ]

    def _ingest(self, data: dict[str, Any]) -> list[str]:
        lines = []
        for b in data["buckets"]:
            if b["status"] == "ok":
                extra = ""
                if b["noncurrent_objects"] or b["delete_markers"]:
                    extra = (
                        f"; plus {b['noncurrent_objects']} noncurrent versions ({size(b['noncurrent_bytes'])})"
                        f" and {b['delete_markers']} delete markers, not loaded"
                    )
                lines.append(
                    f"ok      {b['bucket']}: {b['rows']} objects, {size(b['bytes'])} from {b['data_files']} "
                    f"data file(s), inventory taken {b['inventory_taken_at']}{extra} ({b['seconds']:.1f}s)"
                )
            else:
                lines.append(f"FAILED  {b['bucket']}: {b['error']}")
        return lines

    def _demo(self, data: dict[str, Any]) -> list[str]:
        lines = ["== ingest: S3 Inventory snapshot of the demo bucket -> inventory Delta table"]
        lines += ["   (inventory-vacuum snapshot ...; inventory-vacuum ingest ...)"]
        lines += self._ingest(data["ingest"])
        lines += ["", "== vacuum --dry-run (nothing deleted)"]
        lines += ["   (inventory-vacuum vacuum --inventory-table ... --tables tables.yaml --dry-run)"]
        lines += self._vacuum(data["dry_run"])
        lines += ["", "== vacuum --delete-with batch"]
        lines += ["   (the same command without --dry-run, with --delete-with batch)"]
        lines += self._vacuum(data["vacuum"])
        lines += ["", "== every table still reads after the vacuum"]
        lines += [f"ok       {name}: {rows} rows" for name, rows in data["tables_readable"].items()]
        if data.get("chargeback"):
            lines += [
                "",
                "== chargeback of the demo bucket, after the dry run (list prices; nothing deleted yet)",
            ]
            lines += [
                "   (inventory-vacuum chargeback --inventory-table ... --tables tables.yaml --by owner)"
            ]
            lines += chargeback_lines(data["chargeback"])
            lines += [f"   HTML report: {data['workdir']}/chargeback.html"]
        lines += ["", f"tables.yaml written to {data['workdir']}/tables.yaml"]
        return lines

    def _snapshot(self, data: dict[str, Any]) -> list[str]:
        return [
            f"wrote {data['file_format']} inventory of {data['bucket']}: {data['objects']} objects in "
            f"{data['data_files']} data file(s); manifest {data['manifest_uri']}"
        ]

    def _vacuum(self, data: dict[str, Any]) -> list[str]:
        lines = []
        for t in data["tables"]:
            planned = f"{t['planned_files']} files, {size_or_unknown(t['planned_bytes'])}"
            if t["dry_run"]:
                outcome = f"would delete {planned}"
            elif t["deleted_files"] is None:
                outcome = f"planned {planned}; deleted: not measured"
            else:
                outcome = (
                    f"deleted {t['deleted_files']} of {t['planned_files']} planned files, "
                    + size_or_unknown(t["deleted_bytes"])
                )
                if t.get("already_gone_files"):
                    outcome += f"; {t['already_gone_files']} already gone"
            details = (
                f"(mode {t['mode']}, delete with {t['delete_with']}, retention {hours(t['retention_hours_effective'])}, "
                f"{_requests(t['delete_requests'])} delete requests, {t['seconds']:.1f}s)"
            )
            if t["status"] == "ok":
                lines.append(f"ok       {t['name']}: {outcome} {details}")
                for partition in t.get("partitions") or []:
                    lines.append(
                        f"           {partition['partition']}: {partition['files']} files, {size_or_unknown(partition['bytes'])}"
                    )
                if t.get("delta_plan_skipped"):
                    lines.append(f"           {t['delta_plan_skipped']}")
            else:
                lines.append(f"{t['status'].upper():8} {t['name']}: {t['reason']}")
            if t.get("kept"):
                kept = ", ".join(
                    f"{count} {reason.replace('_', ' ')}" for reason, count in sorted(t["kept"].items())
                )
                lines.append(f"           kept: {kept}")
            for warning in t.get("warnings") or []:
                lines.append(f"           warning: {warning}")
        if data.get("run_id") and any(t.get("deleted_files") for t in data["tables"]):
            unledgered = any(
                "deletion ledger" in warning for t in data["tables"] for warning in t.get("warnings") or []
            )
            unmeasured = any(t.get("deleted_files") is None and not t.get("dry_run") for t in data["tables"])
            lines.append(
                f"run {data['run_id']}: "
                + (
                    "the deletion ledger could not be written (see the warnings)"
                    if unledgered
                    else "the deletion ledger lists what it deleted, but for the tables whose deletes "
                    "could not be measured (see their reasons and warnings)"
                    if unmeasured
                    else "the deletion ledger lists what it deleted"
                )
            )
        return lines

    def _restore(self, data: dict[str, Any]) -> list[str]:
        lines = []
        shown = 20  # objects listed per table and outcome; --json has them all
        for t in data["tables"]:
            if data["dry_run"]:
                outcome = (
                    f"would restore {t['would_restore_files']} objects, {size(t['would_restore_bytes'])}"
                )
            else:
                outcome = f"restored {t['restored_files']} objects, {size(t['restored_bytes'])} (verified)"
            if t["already_restored_files"]:
                outcome += f"; {t['already_restored_files']} restored earlier"
            if t["not_restored_files"]:
                outcome += f"; {t['not_restored_files']} not restored"
            if not (t["would_restore_files"] or t["restored_files"] or t["not_restored_files"]):
                outcome = (
                    f"nothing to restore: all {t['already_restored_files']} object(s) were restored earlier"
                )
            status = "ok" if t["status"] == "ok" else t["status"].upper()
            lines.append(
                f"{status:8} {t['name']}: {outcome} ({t['selected_files']} in the ledger's selection, "
                f"{t['delete_requests']} delete requests, {t['seconds']:.1f}s)"
            )
            if t["status"] != "ok" and t["reason"]:
                lines.append(f"           {t['reason']}")
            by_outcome: dict[str, list[dict[str, Any]]] = {}
            for o in t["objects"]:
                by_outcome.setdefault(o["outcome"], []).append(o)
            for outcome_name, objects in sorted(by_outcome.items()):
                if outcome_name == "restored":
                    continue
                lines.append(f"           {outcome_name.replace('_', ' ')}: {len(objects)}")
                for o in objects[:shown]:
                    detail = f": {o['reason']}" if o["reason"] else ""
                    lines.append(f"             {o['path']}{detail}")
                if len(objects) > shown:
                    lines.append(f"             ... and {len(objects) - shown} more (--json lists them all)")
        if not data["dry_run"]:
            lines.append(f"restore run {data['run_id']}; ledger {data['ledger']}")
        return lines


def _requests(count: int | None) -> str:
    """A table's delete requests: unknown after a deletes' job that failed as a whole."""
    return "an unknown number of" if count is None else str(count)
