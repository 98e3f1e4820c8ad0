"""A table's slice of the inventory, and the gates it must pass before Delta sees it.

The slice is the objects under the table that Delta's ``VACUUM ... USING INVENTORY`` may judge:
the pinned inventory version's rows under the table's root (or one flat listing of the table made
now), less nested tables, protected paths, keys Delta cannot parse and what the ledger shows
deleted. On the way, the inventory must be fresh, hold objects under the table, use milliseconds
and list the table's live files (coverage).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

from pyspark.sql import DataFrame, SparkSession

from core.errors import VacuumRefused
from core.session import name_jobs
from core.tables import read_inventory
from inventory.listing import listing_inventory
from vacuum import gates
from vacuum.context import DeleteWith, Mode, TableContext
from vacuum.ledger import deleted_since
from vacuum.plan import (
    CLASSIFIED_COLUMNS,
    InventoryFigures,
    SliceCounts,
    classify_objects,
    inventory_figures,
    inventory_slice,
    rows_under,
    slice_counts,
    table_objects,
    with_bucket_times,
)
from vacuum.results import KEPT_NESTED_TABLE, KEPT_PROTECTED_PATH, TableRun
from vacuum.snapshot import TableState, newest_version
from vacuum.tuning import (
    checkpointed_in_one_partition,
    in_one_partition,
    read_from_cache,
    release,
    size_shuffles,
)

# A modificationTime below this (1973-03-03 in milliseconds) is a time in seconds: read as
# milliseconds, every file would look decades old and in-flight files would become eligible.
MILLISECONDS_FLOOR = 100_000_000_000

# The ledger's deletions since this long before the inventory was taken leave the plan. An
# inventory lists objects as its scan of the bucket met them, and AWS calls the list eventually
# consistent: an object deleted shortly before the scan began may still be listed. Leaving out
# more of what the ledger shows deleted can only delete less.
LEDGER_MARGIN = timedelta(hours=48)


def inventory_version(spark: SparkSession, location: str) -> int:
    """The newest version of the inventory table: the run reads this one version throughout, so
    an ingest committing mid-run cannot give the gates and the plan different inventories."""
    read_inventory(spark, location)
    return newest_version(spark, location)


def gated_slice(ctx: TableContext) -> DataFrame:
    """Gate the inventory for one table and return its slice (persisted, read from the cache: let
    go of it with :func:`~vacuum.tuning.release`): the objects Delta sees."""
    spark, location, state, options = ctx.spark, ctx.location, ctx.snapshot, ctx.options
    if state.has_characters_beyond_the_basic_plane:
        raise VacuumRefused(
            f"the table location {state.qualified_location} has a character outside Unicode's Basic "
            "Multilingual Plane, which Delta's inventory mode mis-cuts into wrong paths; "
            "vacuum this table with --mode list"
        )
    if options.mode == Mode.FLAT:
        inventory = listing_inventory(spark, location)
    else:
        assert options.inventory_table is not None
        inventory = read_inventory(spark, options.inventory_table, ctx.run_context.inventory_version)
    # the inventory mode's table is one pinned version for the whole run, whose figures the run
    # may have counted for all its tables at once; a flat listing is the table's own
    figures = ctx.run_context.figures_of_table(location) if options.mode == Mode.INVENTORY else None
    name_jobs(spark, "inventory figures" if figures is None else "inventory slice")
    # the table's rows of the pinned inventory, read once: the classification reads them several
    # times, and so do the figures when counted here (each read of the Delta table would plan its
    # file skipping anew). A small table of an inventory run reads them from the rows the run
    # read for many tables at once, in Spark's cache
    source = ctx.run_context.rows_source(inventory, location) if options.mode == Mode.INVENTORY else inventory
    under = read_from_cache(rows_under(source, location).persist())
    try:
        if figures is None:
            figures = inventory_figures(under, location)
        if options.mode == Mode.INVENTORY and not figures.objects_under_table:
            # no rows under the table: the bucket's delivery is the one to judge (a flat listing
            # of nothing has no time either, and is refused as such)
            figures = with_bucket_times(
                figures, ctx.run_context.figures_of_bucket(inventory, location.bucket)
            )
        return _classified_slice(ctx, under, figures)
    finally:
        release(under)
        ctx.run_context.release_rows(location)


def _classified_slice(ctx: TableContext, under: DataFrame, figures: InventoryFigures) -> DataFrame:
    spark, location, state, options, run = ctx.spark, ctx.location, ctx.snapshot, ctx.options, ctx.run
    taken_at = figures.inventory_taken_at
    if taken_at is not None:
        run.inventory_taken_at = taken_at.isoformat()
    elif figures.objects_under_table:
        raise VacuumRefused(
            f"the inventory's {figures.objects_under_table} row(s) under {location.uri} have no "
            "inventory_taken_at: their age is unknown"
        )
    gates.check_freshness(
        taken_at, datetime.now(timezone.utc), options.max_inventory_age_hours, location.bucket
    )
    assert taken_at is not None
    gates.check_inventory_present(figures.objects_under_table, location.bucket, location.uri)
    size_shuffles(spark, figures.objects_under_table)
    if (
        figures.newest_modification_millis is not None
        and figures.newest_modification_millis < MILLISECONDS_FLOOR
    ):
        raise VacuumRefused(
            f"the inventory's modificationTime under {location.uri} (bucket {location.bucket}) looks "
            f"like seconds, not milliseconds (newest {figures.newest_modification_millis}): every file "
            "would look ancient"
        )
    name_jobs(spark, "ledger")
    deleted = (
        deleted_since(spark, ctx.ledger, location.bucket, taken_at - LEDGER_MARGIN) if ctx.ledger else None
    )
    protected_prefixes = ctx.protected_prefixes
    # a protected path with a log of its own (the inventory table, say) is reported as protected
    nested_roots = not_protected(figures.nested_roots, protected_prefixes)
    name_jobs(spark, "classify objects and coverage")
    # cached in only the columns read again: caching costs in proportion to the bytes
    classified = read_from_cache(
        classify_objects(
            in_one_partition(spark, table_objects(under, location)),
            state,
            nested_roots=nested_roots,
            protected_prefixes=protected_prefixes,
            deleted_earlier=in_one_partition(spark, deleted) if deleted is not None else None,
            check_sendable=run.delete_with == DeleteWith.BATCH,
            delete_markers=run.delete_with == DeleteWith.BATCH,
        )
        .select(*CLASSIFIED_COLUMNS)
        .persist()
    )
    try:
        slice_frame = read_from_cache(inventory_slice(classified, state).persist())
        try:
            assert ctx.live_files is not None
            # the snapshot's files, read by the counts below and again by the check of Delta's
            # answer: a small table's are checkpointed at their first read, so the check reads
            # rows with no plan behind them, and its tasks ship no lineage of Delta's state
            # (released after that check, or with a table that stops before it: see
            # vacuum.runner). A fixed version's files: the same rows either way. Measured with
            # benchmarks/many_tables.py (24 tables of 1,000 files, --parallel 4, --no-peers, Java
            # 25): held against not, 2.22, 2.13 and 2.10 s a table cached against 2.38, 2.16 and
            # 2.21 uncached (separate processes, in turn); a checkpoint against a cache, a small
            # gain not clear of the noise (docs/performance.md)
            ctx.live_files = checkpointed_in_one_partition(spark, ctx.live_files)
            assert ctx.retained_since_millis is not None, "the retention is fixed first"
            counts = slice_counts(
                classified,
                slice_frame,
                ctx.live_files,
                int(taken_at.timestamp() * 1000),
                state,
                ctx.retained_since_millis,
            )
            _judge_slice(ctx, counts, nested_roots)
        except BaseException:
            release(slice_frame)  # a refused or failed table keeps nothing cached
            raise
    finally:
        release(classified)
    return slice_frame


def _judge_slice(ctx: TableContext, counts: SliceCounts, nested_roots: Sequence[str]) -> None:
    """Report what the classification kept, then gate the slice on ``counts``: a log with a
    deletion vector Delta's VACUUM fails on refuses the table, and so does too little coverage."""
    state, run = ctx.snapshot, ctx.run
    for (reason, _), objects in counts.kept.items():
        run.keep(reason, objects)
    report_nested(
        state,
        {
            root: objects
            for (reason, root), objects in counts.kept.items()
            if reason == KEPT_NESTED_TABLE and root
        },
        nested_roots,
        run,
    )
    report_protected(run)
    if counts.vectors_vacuum_fails_on:
        raise VacuumRefused(
            f"{counts.vectors_vacuum_fails_on} of the files and tombstones in the log of "
            f"{state.qualified_location} that a version inside the retention window reads have a "
            "deletion vector Delta's VACUUM fails on (an inline vector, a 'u' vector not ending in a "
            "20-character Base85 UUID, or a storage type Delta does not know): nothing deleted"
        )
    run.coverage = gates.check_coverage(counts.eligible, counts.covered, ctx.options.min_coverage)
    ctx.delta_names_nothing = counts.delta_names_nothing


def not_protected(roots: Sequence[str], protected_prefixes: Sequence[str]) -> list[str]:
    """Nested-table roots that are not a protected path (those are reported as protected)."""
    return [r for r in roots if not any(r == p or r.startswith(p + "/") for p in protected_prefixes)]


def report_nested(
    state: TableState, kept_by_root: dict[str, int], roots: Sequence[str], run: TableRun
) -> None:
    """One entry and one warning per nested table kept."""
    for root in roots:
        objects = kept_by_root.get(root, 0)
        run.nested_tables.append({"path": state.base + root, "objects_kept": objects})
        run.warnings.append(
            f"nested Delta table {state.base}{root} is not this table's: kept its {objects} object(s)"
        )


def report_protected(run: TableRun) -> None:
    """One warning when objects under the tool's own paths were kept."""
    if run.kept.get(KEPT_PROTECTED_PATH):
        run.warnings.append(
            f"kept {run.kept[KEPT_PROTECTED_PATH]} object(s) under paths this tool uses "
            "(inventory, history or ledger table, or another registered table)"
        )
