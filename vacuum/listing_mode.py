"""The list and lite modes' plan check: Delta lists the table itself (or reads its log's removes),
so nested tables and protected paths are found from the candidates and left out afterwards."""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from core.errors import VacuumRefused
from core.paths import StorageLocation
from core.s3 import has_objects_under
from vacuum.context import DeleteWith, TableContext
from vacuum.inventory_slice import not_protected, report_nested, report_protected
from vacuum.plan import under_any
from vacuum.results import KEPT_NESTED_TABLE, KEPT_PROTECTED_PATH
from vacuum.snapshot import TableState


def checked_listing_plan(ctx: TableContext, details: DataFrame) -> DataFrame:
    """List and lite modes: leave out candidates under nested tables and protected paths.

    Delta's listing is not ours to filter, so nested tables are found from the candidates
    themselves: every directory that holds a candidate is checked for a ``_delta_log/``, a
    request per directory with candidates, never a listing of the table.
    """
    state, run, protected_prefixes = ctx.snapshot, ctx.run, ctx.protected_prefixes
    components = F.split("relative_path", "/")
    directories = [
        r["directory"]
        for r in details.where(F.col("relative_path").contains("/"))
        .select(
            F.explode(
                F.transform(
                    F.sequence(F.lit(1), F.size(components) - 1),
                    lambda i: F.array_join(F.slice(components, 1, i), "/"),
                )
            ).alias("directory")
        )
        .distinct()
        .collect()
    ]
    roots = not_protected(tables_among(state, directories), protected_prefixes)
    planned = details
    if roots:
        counts = {root: details.where(under_any(F.col("relative_path"), [root])).count() for root in roots}
        for root in roots:
            run.keep(KEPT_NESTED_TABLE, counts[root])
        report_nested(state, counts, roots, run)
        planned = planned.where(~under_any(F.col("relative_path"), roots))
    if protected_prefixes:
        run.keep(
            KEPT_PROTECTED_PATH, details.where(under_any(F.col("relative_path"), protected_prefixes)).count()
        )
        report_protected(run)
        planned = planned.where(~under_any(F.col("relative_path"), protected_prefixes))
    if (roots or protected_prefixes) and not run.dry_run and run.delete_with == DeleteWith.DELTA:
        raise VacuumRefused(
            f"Delta's {run.mode} VACUUM would delete files of a nested table or a protected path "
            f"({run.nested_tables[0]['path'] if run.nested_tables else 'see warnings'}), and its own "
            "delete cannot be told to skip them: use --mode flat (a listing made now, deleted by this tool), "
            "--mode inventory, or register or move the nested table"
        )
    return planned


def tables_among(state: TableState, directories: Sequence[str]) -> list[str]:
    """The relative ``directories`` of the table that hold a ``_delta_log/`` (outermost only)."""
    location = StorageLocation.parse(state.qualified_location, what="table location")

    def has_log(directory: str) -> bool:
        if not location.is_s3:
            return os.path.isdir(f"/{location.key}/{directory}/_delta_log")
        return has_objects_under(location.bucket, f"{location.key}/{directory}/_delta_log/")

    ordered = sorted(directories)
    with ThreadPoolExecutor(max_workers=16) as pool:
        found = [d for d, present in zip(ordered, pool.map(has_log, ordered), strict=True) if present]
    outermost: list[str] = []
    for directory in sorted(found, key=len):
        if not any(directory.startswith(outer + "/") for outer in outermost):
            outermost.append(directory)
    return outermost
