"""The user-facing exceptions of inventory-vacuum.

Every message names what is wrong and where, in one line. ``exit_code`` is what the command line
exits with when the error ends a whole run: 2 for usage and configuration errors, 1 otherwise.
"""

from __future__ import annotations


class InventoryVacuumError(Exception):
    """Base class of every error the command line reports as a one-line message."""

    exit_code = 1


class UsageError(InventoryVacuumError):
    """A flag, argument or name the user gave is wrong (unknown table, bad date, ...)."""

    exit_code = 2


class ConfigError(UsageError):
    """A configuration file (tables.yaml) or setting is invalid."""


class DeliveryError(InventoryVacuumError):
    """An S3 Inventory delivery is missing, incomplete or corrupt."""


class InventoryDataError(InventoryVacuumError):
    """The inventory data files of a delivery cannot be read or contradict the manifest."""


class InventoryTableError(InventoryVacuumError):
    """The inventory Delta table is missing or does not have the expected shape."""

    exit_code = 2


class VacuumRefused(InventoryVacuumError):
    """A safety gate refused to vacuum a table; the message is the reason."""


class DeleteError(InventoryVacuumError):
    """Some objects could not be deleted even after retries."""
