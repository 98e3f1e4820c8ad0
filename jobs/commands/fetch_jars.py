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
    def __init__(self, packages: list[str], class_archive: str | None) -> None:
        self.packages = packages
        self.class_archive = class_archive

    def to_dict(self) -> dict[str, Any]:
        return {"packages": self.packages, "cached": True, "class_archive": self.class_archive}


def run(args: argparse.Namespace, output: Output) -> int:
    import pyspark

    from core import class_archive
    from core.jar_cache import cached_jars
    from core.session import build_spark_session, jvm_packages, starts_local_jvm

    local = starts_local_jvm()
    spark = build_spark_session("inventory-vacuum fetch-jars", resolve_jars=True)
    # a Delta write proves the jars load, not only that they were downloaded
    with tempfile.TemporaryDirectory(prefix="inventory-vacuum-jar-check-") as folder:
        spark.range(1).write.format("delta").save(f"{folder}/table")
    archive = None
    jars = cached_jars(jvm_packages(), pyspark.__version__)
    if local and jars is not None:
        # for the local JVMs of later commands (a cluster's driver is started by spark-submit)
        archive = class_archive.create(jars, pyspark.__version__, workload="jobs.demo")
    output.show(NAME, _Fetched(jvm_packages(), str(archive) if archive else None))
    return 0
