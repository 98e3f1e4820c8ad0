"""What several commands do the same way: a run id, an s3:// destination, a writable path."""

from __future__ import annotations

import os
import uuid
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from core.errors import UsageError

if TYPE_CHECKING:
    from core.paths import StorageLocation


def run_id() -> str:
    """``20261125T213000Z-1a2b3c4d``: sortable by time, unique per run."""
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"


def s3_destination(uri: str) -> StorageLocation:
    from core.paths import StorageLocation

    destination = StorageLocation.parse(uri, what="--destination")
    if not destination.is_s3:
        raise UsageError(f"--destination {uri!r} must be an s3:// location")
    return destination


def check_writable(flag: str, path: str) -> None:
    """Fail now, with the flag's name, if ``path`` cannot be written (the command's standard
    output always can: it is written to the result's stream, not opened)."""
    from core.local_files import is_results_output

    if is_results_output(path):
        return
    existed = os.path.exists(path)
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as error:
        raise UsageError(f"{flag} {path}: cannot write there: {error.strerror}") from None
    if not existed:
        os.remove(os.path.realpath(path))  # the file made, not a link to it


def protected_paths(
    inventory_table: str, history_table: str, ledger_table: str, registry: object, tables_file: str
) -> tuple[str, ...]:
    """Every location no vacuum may delete under: this tool's tables and every registered table."""
    from core.tables import INVENTORY_RUNS, INVENTORY_USAGE, default_location

    protected = (
        inventory_table,
        history_table,
        ledger_table,
        default_location(inventory_table, INVENTORY_RUNS),
        default_location(inventory_table, INVENTORY_USAGE),
        *[t.path for t in registry.tables],  # type: ignore[attr-defined]
        *([tables_file] if "://" in tables_file else []),
    )
    return tuple(p for p in protected if not p.startswith("/"))
