"""``inventory-vacuum fetch-jars``: resolve the Delta and hadoop-aws jars into the local Ivy cache."""

from __future__ import annotations

import argparse
import tempfile
from typing import Any

from jobs import params
from jobs.output import Output

NAME = "fetch-jars"
SUMMARY = (
    "download the Delta and hadoop-aws jars into the local Ivy cache; later commands load them "
    "without running Ivy"
)
EXAMPLE = "  inventory-vacuum fetch-jars"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    params.JSON.add(parser)


class _Fetched:
    def __init__(self, packages: list[str]) -> None:
        self.packages = packages

    def to_dict(self) -> dict[str, Any]:
        return {"packages": self.packages, "cached": True}


def run(args: argparse.Namespace, output: Output) -> int:
    from core.session import build_spark_session, jvm_packages

    spark = build_spark_session("inventory-vacuum fetch-jars", resolve_jars=True)
    # a Delta write proves the jars load, not only that they were downloaded
    with tempfile.TemporaryDirectory(prefix="inventory-vacuum-jar-check-") as folder:
        spark.range(1).write.format("delta").save(f"{folder}/table")
    output.show(NAME, _Fetched(jvm_packages()))
    return 0
