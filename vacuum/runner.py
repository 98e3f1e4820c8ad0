"""Vacuum a set of registered tables: plan, gate, delete, record. Tables run concurrently.

For each table, in order: read the snapshot; fix the retention; with an inventory, check its
age, that it has objects under the table and that it lists the table's live files; check bucket
versioning; ask Delta for the candidates (DRY RUN); then, unless this is a dry run, delete them
with Delta's VACUUM or with batched DeleteObjects after re-checking them against a fresh snapshot.
A refusal or failure of one table never stops the others.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from inventory.errors import InventoryTableError, InventoryVacuumError, VacuumRefused, spark_error_summary
from inventory.registry import RegisteredTable
from inventory.s3 import describe, s3_client
from inventory.schema import INVENTORY_TABLE_SCHEMA
from vacuum import gates
from vacuum.execute import delete_in_batches, with_bucket_and_key
from vacuum.history import record_vacuum_runs
from vacuum.plan import (
    candidate_details,
    coverage_counts,
    delta_inventory,
    dry_run_candidates,
    inventory_figures,
    inventory_slice,
    live_candidates,
    temporary_view,
    vacuum_sql,
)
from vacuum.snapshot import load_table_state

log = logging.getLogger("inventory_vacuum")

_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"


@dataclass(frozen=True)
class VacuumOptions:
    """How to vacuum (the command-line flags of ``inventory-vacuum vacuum``)."""

    inventory_table: str | None = None
    mode: str = "inventory"  # inventory | list | lite
    delete_with: str = "delta"  # delta | batch
    dry_run: bool = False
    retain_hours: float | None = None
    allow_unsafe_retention: bool = False
    max_inventory_age_hours: float = 72.0
    min_coverage: float = 0.99
    allow_versioned: bool = False
    parallel: int = 4
    history_table: str | None = None
    collect_candidates: bool = False  # keep each table's candidate list for --candidates


@dataclass
class TableRun:
    """The outcome for one table; ``files``/``bytes`` are candidates on a dry run, else deleted."""

    name: str
    path: str
    status: str  # ok | refused | failed
    mode: str
    dry_run: bool
    delete_with: str
    retention_hours_effective: float | None = None
    inventory_taken_at: str | None = None
    coverage: float | None = None
    files: int = 0
    bytes: int | None = 0
    delete_requests: int = 0
    seconds: float = 0.0
    reason: str | None = None
    table_version: int | None = None
    warnings: list[str] = field(default_factory=list)
    partitions: list[dict[str, Any]] = field(default_factory=list)
    candidates: pa.Table | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("candidates")
        return data


@dataclass
class VacuumResult:
    tables: list[TableRun] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(t.status == "ok" for t in self.tables)

    def to_dict(self) -> dict[str, Any]:
        return {"tables": [t.to_dict() for t in self.tables]}


def read_inventory(spark: SparkSession, location: str) -> DataFrame:
    """The inventory Delta table; an :class:`InventoryTableError` when it is missing or malformed."""
    try:
        frame = spark.read.format("delta").load(location)
        names = set(frame.columns)
    except Exception as error:
        raise InventoryTableError(
            f"inventory table {location} cannot be read: {spark_error_summary(error)}"
        ) from None
    missing = [f.name for f in INVENTORY_TABLE_SCHEMA if f.name not in names]
    if missing:
        raise InventoryTableError(f"inventory table {location} lacks column(s) {', '.join(missing)}")
    return frame


def vacuum_tables(
    spark: SparkSession, tables: Sequence[RegisteredTable], options: VacuumOptions, run_id: str
) -> VacuumResult:
    """Vacuum ``tables`` concurrently on one SparkSession and record every outcome.

    Example::

        result = vacuum_tables(spark, registry.select(["events"]),
                               VacuumOptions(inventory_table="s3://inv/tables/inventory", dry_run=True),
                               run_id="manual")
    """
    inventory = None
    if options.mode == "inventory":
        if not options.inventory_table:
            raise InventoryTableError("--mode inventory needs --inventory-table")
        inventory = read_inventory(spark, options.inventory_table)
    previous_check = spark.conf.get(_RETENTION_CHECK, "true") or "true"
    if options.allow_unsafe_retention:
        # Delta's own check is session-wide; our gate already allowed this run's retention.
        spark.conf.set(_RETENTION_CHECK, "false")
    try:
        with ThreadPoolExecutor(max_workers=max(1, options.parallel)) as pool:
            runs = list(pool.map(lambda t: vacuum_table(spark, t, options, inventory), tables))
    finally:
        spark.conf.set(_RETENTION_CHECK, previous_check)
    if options.history_table:
        record_vacuum_runs(spark, options.history_table, run_id, runs)
    return VacuumResult(runs)


def vacuum_table(
    spark: SparkSession, table: RegisteredTable, options: VacuumOptions, inventory: DataFrame | None
) -> TableRun:
    """Plan, gate and (unless a dry run) delete for one table. Never raises."""
    started = time.monotonic()
    run = TableRun(
        name=table.name,
        path=table.path,
        status="failed",
        mode=options.mode,
        dry_run=options.dry_run,
        delete_with=options.delete_with,
    )
    spark.sparkContext.setJobGroup(f"vacuum {table.name}", f"inventory-vacuum: {table.name}")
    try:
        _vacuum(spark, table, options, inventory, run)
        run.status = "ok"
    except VacuumRefused as refusal:
        run.status, run.reason = "refused", str(refusal)
    except InventoryVacuumError as error:
        run.reason = str(error)
    except Exception as error:  # Spark/Delta/JVM errors end this table only
        run.reason = spark_error_summary(error)
        log.exception("vacuum of %s failed", table.name)
    run.seconds = round(time.monotonic() - started, 3)
    log.info("vacuum %s: %s %s", table.name, run.status, run.reason or "")
    return run


def _vacuum(
    spark: SparkSession,
    table: RegisteredTable,
    options: VacuumOptions,
    inventory: DataFrame | None,
    run: TableRun,
) -> None:
    location = table.location
    state, live_files = load_table_state(spark, location.uri)
    run.table_version = state.version
    requested = options.retain_hours if options.retain_hours is not None else table.retain_hours
    run.retention_hours_effective = gates.effective_retention_hours(
        requested, state.retention_hours, allow_unsafe=options.allow_unsafe_retention
    )
    retain_argument = run.retention_hours_effective if requested is not None else None

    with ExitStack() as cleanup:
        slice_frame = None
        if options.mode == "inventory":
            assert inventory is not None
            figures = inventory_figures(inventory, location)
            taken_at = figures.inventory_taken_at
            if taken_at is not None:
                run.inventory_taken_at = taken_at.isoformat()
            gates.check_freshness(
                taken_at, datetime.now(UTC), options.max_inventory_age_hours, location.bucket
            )
            assert taken_at is not None
            gates.check_inventory_present(figures.objects_under_table, location.bucket, table.path)
            # read three times (coverage, Delta's plan, sizes): cache the table's slice once
            slice_frame = inventory_slice(inventory, location, state).persist()
            cleanup.callback(slice_frame.unpersist)
            eligible, covered = coverage_counts(live_files, slice_frame, int(taken_at.timestamp() * 1000))
            run.coverage = gates.check_coverage(eligible, covered, options.min_coverage)
        if location.is_s3:
            run.warnings += gates.check_versioning(
                _bucket_versioning(location.bucket), location.bucket, allow_versioned=options.allow_versioned
            )
        if not options.dry_run and options.delete_with == "batch" and not location.is_s3:
            raise VacuumRefused("--delete-with batch uses S3 DeleteObjects; this table is not on S3")

        view = (
            cleanup.enter_context(temporary_view(delta_inventory(slice_frame)))
            if slice_frame is not None
            else None
        )
        plan_sql = vacuum_sql(
            state, mode=options.mode, retention_hours=retain_argument, dry_run=True, inventory_view=view
        )
        log.info("%s: %s", table.name, plan_sql)
        details = candidate_details(dry_run_candidates(spark, plan_sql), slice_frame, state).cache()
        cleanup.callback(details.unpersist)
        suspicious = live_candidates(details, live_files)
        if suspicious:
            raise VacuumRefused(
                f"Delta's plan names {len(suspicious)}+ file(s) that are live or outside the table, "
                f"e.g. {suspicious[0]}; nothing deleted"
            )
        _summarise(details, run)
        if options.collect_candidates:
            run.candidates = details.select(
                F.lit(table.name).alias("table"), "path", "length", "partition"
            ).toArrow()
        if options.dry_run or run.files == 0:
            return
        if options.delete_with == "delta":
            spark.sql(
                vacuum_sql(
                    state,
                    mode=options.mode,
                    retention_hours=retain_argument,
                    dry_run=False,
                    inventory_view=view,
                )
            )
            run.delete_requests = run.files  # Delta deletes one object per request
            return
        _delete_batch(spark, details, plan_sql, run)


def _summarise(details: DataFrame, run: TableRun) -> None:
    rows = (
        details.groupBy("partition")
        .agg(F.count(F.lit(1)).alias("files"), F.sum("length").alias("bytes"))
        .orderBy("partition")
        .collect()
    )
    run.partitions = [
        {"partition": r["partition"], "files": int(r["files"]), "bytes": r["bytes"]} for r in rows
    ]
    run.files = sum(p["files"] for p in run.partitions)
    known = [p["bytes"] for p in run.partitions if p["bytes"] is not None]
    run.bytes = sum(known) if len(known) == len(run.partitions) else None


def _delete_batch(spark: SparkSession, details: DataFrame, plan_sql: str, run: TableRun) -> None:
    """Re-plan against a fresh snapshot, keep only files both plans agree on, delete those."""
    fresh = dry_run_candidates(spark, plan_sql).select("path")
    confirmed = details.join(fresh, "path", "left_semi")
    outcome = delete_in_batches(with_bucket_and_key(confirmed))
    run.files = outcome.deleted
    run.bytes = confirmed.agg(F.coalesce(F.sum("length"), F.lit(0))).first()[0]  # type: ignore[index]
    dropped = sum(p["files"] for p in run.partitions) - outcome.deleted - outcome.failed
    if dropped:
        run.warnings.append(f"{dropped} candidate(s) dropped: live again in the fresh snapshot")
    run.delete_requests = outcome.requests
    if outcome.failed:
        raise InventoryVacuumError(
            f"{outcome.failed} object(s) could not be deleted; first error: {outcome.first_error}"
        )


def _bucket_versioning(bucket: str) -> str | None:
    try:
        return s3_client().get_bucket_versioning(Bucket=bucket).get("Status")
    except Exception as error:
        raise VacuumRefused(
            f"cannot read the versioning state of bucket {bucket}: {describe(error)}"
        ) from None


def write_candidates(runs: Sequence[TableRun], path: str) -> int:
    """Write every table's candidate list to one local ``.parquet`` or ``.csv`` file."""
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    tables = [r.candidates for r in runs if r.candidates is not None]
    schema = pa.schema(
        [("table", pa.string()), ("path", pa.string()), ("length", pa.int64()), ("partition", pa.string())]
    )
    combined = pa.concat_tables([t.cast(schema) for t in tables]) if tables else schema.empty_table()
    if path.endswith(".csv"):
        pa_csv.write_csv(combined, path)
    else:
        pq.write_table(combined, path)
    return combined.num_rows
