"""The planner's slice of an inventory for one table, as the tests build it."""

from __future__ import annotations

from typing import Any

from core.paths import StorageLocation
from vacuum.plan import classify_objects, inventory_slice, table_objects
from vacuum.snapshot import TableState


def slice_of(inventory: Any, location: StorageLocation, table_state: TableState, **kwargs: Any) -> Any:
    """The planner's slice with nothing nested, protected or ledgered unless given."""
    options = {"nested_roots": (), "protected_prefixes": (), "deleted_earlier": None, "check_sendable": False}
    classified = classify_objects(table_objects(inventory, location), table_state, **{**options, **kwargs})
    return inventory_slice(classified, table_state)
