"""The user-facing exceptions of inventory-vacuum.

Every message names what is wrong and where, in one line. ``exit_code`` is what the command line
exits with when the error ends a whole run: 2 for usage and configuration errors, 1 otherwise.
"""

from __future__ import annotations

import re


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


class RunInterrupted(InventoryVacuumError):
    """The run was interrupted (Ctrl-C) and stopped early; ``result`` is what it did until then
    (a :class:`vacuum.results.VacuumResult`), in the run history unless the message says otherwise."""

    exit_code = 130  # a shell's code for a command ended by SIGINT

    def __init__(self, message: str, result: object) -> None:
        super().__init__(message)
        self.result = result


_PY4J_CALL = re.compile(r"An error occurred while calling [\w$.:]+\.?$")  # o73.orc, z:pkg.Class.method


def spark_error_summary(error: BaseException) -> str:
    """The most telling line of a Spark/JVM error (its innermost error condition), one line."""
    text = str(getattr(error, "desc", None) or error).strip()
    lines = [
        line.strip()
        for line in _without_suppressed(text.splitlines())
        if line.strip() and not line.strip().startswith("at ")
    ]
    # Py4J's own first line names only the JVM object and method ("o73.orc"): the Java error follows
    if len(lines) > 1 and _PY4J_CALL.match(lines[0]):
        lines = lines[1:]
    first = _first_listed_failure(lines)
    return _summary(first if first else lines, type(error).__name__)[:500]


# the errors a query's several failures are wrapped in: Spark 4.2's numbered list of them
# ("[STAGE_MATERIALIZATION_MULTIPLE_FAILURES] Multiple failures (2) ...:", then "1. ...", "2. ...")
# and its earlier one, whose first failure is its cause and the others suppressed
_MULTIPLE_FAILURES = ("MULTIPLE_FAILURES]", "Multiple failures in stage materialization")
_LISTED = re.compile(r"^\d+\.\s+")
_FIRST_LISTED = re.compile(r"^1\.\s+")


def _first_listed_failure(lines: list[str]) -> list[str] | None:
    """The lines of the first failure in a wrapper's numbered list (``1. ...`` up to ``2. ...``),
    its number taken off: the one Spark met first, which the others (often the cancellations
    that follow it) must not hide. None without such a wrapper."""
    wrapper = next((i for i, line in enumerate(lines) if _MULTIPLE_FAILURES[0] in line), None)
    if wrapper is None:
        return None
    listed = [i for i in range(wrapper + 1, len(lines)) if _LISTED.match(lines[i])]
    if not listed:
        return None
    first = _LISTED.sub("", lines[listed[0]])
    following = lines[listed[0] + 1] if listed[0] + 1 < len(lines) else ""
    if _MULTIPLE_FAILURES[0] in first and _FIRST_LISTED.match(following):
        # a wrapper listed first, its own list at once below it (numbered as this one is): its
        # first failure is the one met first. Without a list of its own, the next item is this
        # wrapper's second failure, not its first's: the wrapper's line stays the summary
        return _first_listed_failure([first, *lines[listed[0] + 1 :]]) or [first]
    return [first, *lines[listed[0] + 1 : listed[1] if len(listed) > 1 else len(lines)]]


def _without_suppressed(lines: list[str]) -> list[str]:
    """A Java stack trace's text without its ``Suppressed:`` blocks (each such line and what Java
    prints below it: its stack, indented deeper, and its causes, at its own indent): the failures
    an error suppressed are not the one it reports."""
    kept: list[str] = []
    block: int | None = None  # the indent of the Suppressed: line whose block is being left out
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if block is not None and (
            indent > block or not stripped or (indent == block and stripped.startswith("Caused by:"))
        ):
            continue
        block = indent if stripped.startswith("Suppressed:") else None
        if block is None:
            kept.append(line)
    return kept


def _summary(lines: list[str], fallback: str) -> str:
    # errors that wrap others and whose own line names no cause
    generic = ("Job aborted", "awaitResult", "Task failed while", "Exception thrown in", *_MULTIPLE_FAILURES)
    conditions = [
        line
        for line in lines
        if re.search(r"\[[A-Z][A-Z_.]+\]", line) and not any(g in line for g in generic)
    ]
    causes = [line.split("Caused by:", 1)[1] for line in lines if line.startswith("Caused by:")]
    best = conditions[0] if conditions else causes[-1] if causes else lines[0] if lines else fallback
    best = _strip_exception_names(best)
    root = _strip_exception_names(causes[-1]) if causes else ""
    if root and root not in best and "FAILED_READ_FILE" in best:
        best = f"{best.split(' SQLSTATE')[0].strip()} ({root})"
    return best


def _strip_exception_names(line: str) -> str:
    # Py4J's text puts the Java error after a ": " of its own line
    line = line.strip().removeprefix("Caused by:").strip().removeprefix(": ")
    return re.sub(r"^(?:[\w.$]+(?:Exception|Error):\s*)+", "", line).strip()
