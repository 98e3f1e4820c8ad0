"""A class-data archive workload whose step fails (tests/test_cli.py): the archive of the classes
loaded until then must still be made, and the failure said."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

ERROR = "the workload's own error"


@contextmanager
def class_archive_workload() -> Iterator[Callable[[Any], object]]:
    def fail(spark: Any) -> object:
        spark.range(3).count()
        raise RuntimeError(ERROR)

    yield fail
