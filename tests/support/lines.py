"""Which Spark line a test run is on."""

from __future__ import annotations

import os

DEFAULT_SPARK_LINE = "4.2"  # infra/env.sh's DEFAULT_SPARK_LINE


def on_default_spark_line() -> bool:
    """Whether this run is the default Spark line's: each line's run of the test command names its
    line in INVENTORY_VACUUM_SPARK_LINE (a run without it is a contributor's, on the default venv)."""
    return os.environ.get("INVENTORY_VACUUM_SPARK_LINE") in (None, "", DEFAULT_SPARK_LINE)
