"""Two renderers of the same result objects: human text and ``--json`` (one object on stdout)."""

from __future__ import annotations

import json
from typing import Any, Protocol, TextIO


class Result(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


class Output(Protocol):
    def show(self, command: str, result: Result) -> None: ...


class JsonOutput:
    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def show(self, command: str, result: Result) -> None:
        self.stream.write(json.dumps(result.to_dict(), default=str) + "\n")
        self.stream.flush()


def _hours(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:g}h" if value >= 1 or value == 0 else f"{value * 3600:.0f}s"


def _size(value: int | None) -> str:
    amount = float(value or 0)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if amount < 1024 or unit == "TiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount} B"


class ConsoleOutput:
    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def show(self, command: str, result: Result) -> None:
        render = getattr(self, f"_{command.replace('-', '_')}", None)
        lines = render(result.to_dict()) if render else [json.dumps(result.to_dict(), indent=2, default=str)]
        self.stream.write("\n".join(lines) + "\n")
        self.stream.flush()

    def _ingest(self, data: dict[str, Any]) -> list[str]:
        lines = []
        for b in data["buckets"]:
            if b["status"] == "ok":
                extra = ""
                if b["noncurrent_objects"] or b["delete_markers"]:
                    extra = (
                        f"; plus {b['noncurrent_objects']} noncurrent versions ({_size(b['noncurrent_bytes'])})"
                        f" and {b['delete_markers']} delete markers, not loaded"
                    )
                lines.append(
                    f"ok      {b['bucket']}: {b['rows']} objects, {_size(b['bytes'])} from {b['data_files']} "
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
            from jobs.chargeback_output import text_lines

            lines += [
                "",
                "== chargeback of the demo bucket, after the dry run (list prices; nothing deleted yet)",
            ]
            lines += [
                "   (inventory-vacuum chargeback --inventory-table ... --tables tables.yaml --by owner)"
            ]
            lines += text_lines(data["chargeback"])
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
            planned = f"{t['planned_files']} files, {_size_or_unknown(t['planned_bytes'])}"
            if t["dry_run"]:
                outcome = f"would delete {planned}"
            elif t["deleted_files"] is None:
                outcome = f"planned {planned}; deleted: not measured"
            else:
                outcome = (
                    f"deleted {t['deleted_files']} of {t['planned_files']} planned files, "
                    + _size_or_unknown(t["deleted_bytes"])
                )
                if t.get("already_gone_files"):
                    outcome += f"; {t['already_gone_files']} already gone"
            details = (
                f"(mode {t['mode']}, delete with {t['delete_with']}, retention {_hours(t['retention_hours_effective'])}, "
                f"{t['delete_requests']} delete requests, {t['seconds']:.1f}s)"
            )
            if t["status"] == "ok":
                lines.append(f"ok       {t['name']}: {outcome} {details}")
                for partition in t.get("partitions") or []:
                    lines.append(
                        f"           {partition['partition']}: {partition['files']} files, {_size_or_unknown(partition['bytes'])}"
                    )
            else:
                lines.append(f"{t['status'].upper():8} {t['name']}: {t['reason']}")
            if t.get("kept"):
                kept = ", ".join(
                    f"{count} {reason.replace('_', ' ')}" for reason, count in sorted(t["kept"].items())
                )
                lines.append(f"           kept: {kept}")
            for warning in t.get("warnings") or []:
                lines.append(f"           warning: {warning}")
        return lines


def _size_or_unknown(value: int | None) -> str:
    return _size(value) if value is not None else "size unknown"
