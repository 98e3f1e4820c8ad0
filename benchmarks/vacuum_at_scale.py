"""Vacuum at scale: Delta's listing VACUUM, VACUUM LITE, our inventory and flat modes, and delta-rs,
side by side on one synthetic partitioned table per size, on the local S3 server.

Run::

    .venv/bin/python -m benchmarks.vacuum_at_scale                      # the default sizes
    .venv/bin/python -m benchmarks.vacuum_at_scale --files 2000          # one small size
    .venv/bin/python -m benchmarks.vacuum_at_scale --files 10000 --files 100000 --latency-ms 20

For each size N: build the table (:mod:`benchmarks.synthetic_table`), take an S3 Inventory
snapshot of its bucket and ingest it (timed apart from any vacuum), add the fresh files, check that
Delta-Spark and delta-rs both read the table with the expected live files, then run rounds of
a dry run and a real run of each mode, each on the table exactly as built (it is put back after
every real run), the modes in turn within each round and each round starting at the next mode.
Each run is timed and its S3 requests counted by operation; the candidate sets must be the
expected garbage, identical across modes, and a real run must delete exactly that, or the
benchmark stops with exit code 1. Results go to ``benchmarks/results/vacuum_at_scale.{json,md}``
and two PNG plots; the Markdown table is printed.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path
from typing import Any, NamedTuple

from benchmarks.costs import (
    DEFAULT_LATENCY_MS,
    LIST_OPERATIONS,
    PRICE_SOURCE,
    PRICES_AS_OF,
    TIER1_PER_1000,
    TIER2_PER_1000,
    LatencyModel,
    by_operation,
    request_cost,
)
from benchmarks.s3_server import BenchmarkS3Server, check_indexed_listing, install_indexed_listing
from benchmarks.synthetic_table import (
    ADD_BATCH,
    GARBAGE,
    LOGGED_GARBAGE,
    PARTITION_DAYS,
    Shares,
    SyntheticTable,
    TableBuilder,
)

log = logging.getLogger("benchmarks")

# Sized to finish in about 15 minutes on a quiet 2-core machine; 100k files take --files 100000
DEFAULT_SIZES = (10_000, 30_000)
WARM_UP_SIZE = 1_440  # two files per partition
META_BUCKET = "bench-meta"
TABLE_ROOT = "warehouse/events"
RESULTS = Path(__file__).resolve().parent / "results"
EVENT_WINDOWS = "_event_windows"  # a run's own key until its jobs are read from the event log
TABLE_AREAS = ("data", "log", "probe")


@dataclass(frozen=True)
class Mode:
    """One way to vacuum the table."""

    name: str
    label: str
    engine: str  # spark (our runner), delta-sql (Delta's VACUUM statement alone) or delta-rs
    mode: str = "list"  # our --mode
    delete_with: str = "delta"  # our --delete-with
    finds: tuple[str, ...] = GARBAGE  # the file categories it must find


MODES = {
    m.name: m
    for m in (
        Mode("list", "Delta listing VACUUM (--mode list)", "spark", "list", "delta"),
        Mode("lite", "VACUUM LITE (--mode lite)", "spark", "lite", "delta", LOGGED_GARBAGE),
        Mode("inventory-delta", "inventory, --delete-with delta", "spark", "inventory", "delta"),
        Mode("inventory-batch", "inventory, --delete-with batch", "spark", "inventory", "batch"),
        Mode("flat-batch", "flat listing, --delete-with batch", "spark", "flat", "batch"),
        Mode("delta-rs", "delta-rs vacuum(full=True)", "delta-rs", "full"),
        Mode("delta-sql", "Delta VACUUM statement alone (no gates)", "delta-sql", "list"),
    )
}
DEFAULT_MODES = ("list", "lite", "inventory-delta", "inventory-batch", "flat-batch", "delta-rs")


class BenchmarkFailure(Exception):
    """The benchmark cannot give a fair comparison (different candidates, a failed run, ...)."""


@dataclass
class Phase:
    """One timed run (a dry run, or a real run) of one mode."""

    seconds: float
    counts: Counter[tuple[str, str]]  # (area, operation) -> requests
    model: LatencyModel
    engine: str
    mode: str
    window_ms: tuple[int, int] = (0, 0)  # its start and end, epoch milliseconds (the event log's clock)

    @property
    def network_seconds(self) -> float:
        return self.model.network_seconds(self.engine, self.mode, self.counts)

    def to_dict(self) -> dict[str, Any]:
        table = by_operation(self.counts, TABLE_AREAS)
        every = by_operation(self.counts, (*TABLE_AREAS, "meta"))
        areas: dict[str, dict[str, int]] = {}
        for (area, operation), count in sorted(self.counts.items()):
            areas.setdefault(area, {})[operation] = count
        return {
            "seconds": round(self.seconds, 3),
            "table_requests": sum(table.values()),
            "table_requests_by_operation": dict(sorted(table.items())),
            "data_list_requests": sum(
                c for (a, op), c in self.counts.items() if a == "data" and op in LIST_OPERATIONS
            ),
            "other_bucket_requests": sum(c for (a, _), c in self.counts.items() if a == "meta"),
            "requests_by_area": areas,
            "cost_usd": round(request_cost(every), 8),
            "table_cost_usd": round(request_cost(table), 8),
            "network_seconds": round(self.network_seconds, 3),
            "modeled_seconds": round(self.seconds + self.network_seconds, 3),
        }


def _difference(real: dict[str, Any], plan: dict[str, Any]) -> dict[str, Any]:
    """The delete phase: a real run minus its mode's dry run (requests may differ by a few)."""
    operations = set(real["table_requests_by_operation"]) | set(plan["table_requests_by_operation"])
    return {
        "seconds": round(real["seconds"] - plan["seconds"], 3),
        "table_requests": real["table_requests"] - plan["table_requests"],
        "table_requests_by_operation": {
            op: real["table_requests_by_operation"].get(op, 0)
            - plan["table_requests_by_operation"].get(op, 0)
            for op in sorted(operations)
        },
        "cost_usd": round(real["cost_usd"] - plan["cost_usd"], 8),
        "modeled_seconds": round(real["modeled_seconds"] - plan["modeled_seconds"], 3),
    }


@dataclass
class SizeResult:
    files: int
    categories: dict[str, int]
    build_seconds: float
    inventory: dict[str, Any]
    runs: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "partitions": PARTITION_DAYS * 24,
            "categories": self.categories,
            "garbage_files": sum(self.categories.get(c, 0) for c in GARBAGE),
            "build_seconds": round(self.build_seconds, 3),
            "inventory": self.inventory,
            "runs": self.runs,
        }


class Round(NamedTuple):
    """One round of a mode: its dry run and real run (each with the command's own result, or
    None), how many candidates the dry run named and how many files the real run deleted."""

    plan: Phase
    plan_run: Any
    real: Phase
    real_run: Any
    candidates: int
    deleted: int


def _median_round(rounds: list[Round]) -> Round:
    """The round whose real run took the median time (of an even count, the lower middle one),
    with its own requests."""
    ordered = sorted(rounds, key=lambda r: r.real.seconds)
    return ordered[(len(ordered) - 1) // 2]


def _relative(path: str, table: SyntheticTable) -> str:
    """A candidate path (``s3://bucket/root/x``, ``s3a://...`` or ``x``) relative to the table root."""
    from urllib.parse import unquote

    match = re.match(r"^[A-Za-z0-9]+://[^/]+/(.*)$", path)
    key = match.group(1) if match else path
    prefix = table.root + "/"
    return unquote(key[len(prefix) :] if match and key.startswith(prefix) else key)


class VacuumAtScale:
    """The benchmark: one SparkSession, one S3 server, any number of sizes and modes."""

    def __init__(self, spark: Any, server: BenchmarkS3Server, s3: Any, modes: list[Mode], latency_ms: float):
        self.spark = spark
        self.server = server
        self.s3 = s3
        self.modes = modes
        self.model = LatencyModel(latency_ms / 1000, int(spark.sparkContext.defaultParallelism))
        self.inventory_table = f"s3://{META_BUCKET}/tables/inventory"
        self.history_table = f"s3://{META_BUCKET}/tables/vacuum_runs"
        self.storage_options = {
            "AWS_ENDPOINT_URL": server.endpoint,
            "AWS_ALLOW_HTTP": "true",
            # moto is not a conditional-put S3 for delta-rs's commits; one writer here, so safe
            "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
            "AWS_REGION": os.environ.get("AWS_REGION", "us-east-1"),
            "AWS_ACCESS_KEY_ID": os.environ["AWS_ACCESS_KEY_ID"],
            "AWS_SECRET_ACCESS_KEY": os.environ["AWS_SECRET_ACCESS_KEY"],
        }
        self.run_counter = 0

    # -- building ---------------------------------------------------------------------------
    def prepare(self, files: int, bucket: str) -> tuple[SyntheticTable, float, dict[str, Any]]:
        """Build the table, take and ingest its inventory, add the fresh files, and check it."""
        from core.paths import StorageLocation
        from inventory.delivery_writer import snapshot_bucket
        from inventory.load import IngestRequest, ingest

        self.s3.create_bucket(Bucket=bucket)
        self.server.watch_table(bucket, TABLE_ROOT)
        started = time.monotonic()
        builder = TableBuilder(self.s3, bucket, TABLE_ROOT, files, Shares(), self.storage_options)
        builder.build()
        build_seconds = time.monotonic() - started
        destination = StorageLocation.parse(f"s3://{META_BUCKET}/reports")
        self.server.reset_counts()
        started = time.monotonic()
        snapshot = snapshot_bucket(self.s3, bucket, destination, "daily")
        snapshot_seconds = time.monotonic() - started
        started = time.monotonic()
        ingested = ingest(
            self.spark,
            self.s3,
            IngestRequest(
                destination=destination,
                source_buckets=(bucket,),
                config_id="daily",
                inventory_table=self.inventory_table,
                registry=self._registry(bucket),
                runs_table=f"s3://{META_BUCKET}/tables/inventory_runs",
            ),
            run_id=f"benchmark-{files}",
        )
        ingest_seconds = time.monotonic() - started
        if not ingested.ok:
            raise BenchmarkFailure(f"ingest of the inventory of {bucket} failed: {ingested.to_dict()}")
        counts = self.server.area_counts()
        started = time.monotonic()
        table = builder.add_fresh_files()
        build_seconds += time.monotonic() - started
        self._check_table(table)
        inventory = {
            "objects": snapshot.objects,
            "data_files": snapshot.data_files,
            "snapshot_seconds": round(snapshot_seconds, 3),
            "ingest_seconds": round(ingest_seconds, 3),
            "requests": sum(counts.values()),
            "cost_usd": round(request_cost(Counter({op: c for (_, _, op), c in counts.items()})), 8),
        }
        return table, build_seconds, inventory

    def _registry(self, bucket: str) -> Any:
        from core.registry import parse_registry

        return parse_registry(
            f"tables:\n  - {{name: events, path: 's3://{bucket}/{TABLE_ROOT}', owner: benchmarks}}\n",
            "benchmark tables.yaml",
        )

    def _check_table(self, table: SyntheticTable) -> None:
        """Delta-Spark and delta-rs both read the table with exactly the live files; the indexed
        listing answers exactly as moto's own."""
        from deltalake import DeltaTable

        self._clear_delta_cache()
        spark_files = len(self.spark.read.format("delta").load(table.uri).inputFiles())
        rs_files = len(DeltaTable(table.uri, storage_options=self.storage_options).file_uris())
        if spark_files != table.live_files or rs_files != table.live_files:
            raise BenchmarkFailure(
                f"{table.uri}: Delta-Spark reads {spark_files} live files, delta-rs {rs_files}, "
                f"the table was built with {table.live_files}"
            )
        first = sorted(table.paths(*GARBAGE))[0].rsplit("/", 1)[0]
        try:
            check_indexed_listing(
                table.bucket,
                ["", f"{table.root}/", f"{table.root}/_delta_log/", f"{table.root}/{first}/", table.root],
            )
        except AssertionError as difference:
            raise BenchmarkFailure(f"{difference}; rerun with --moto-listing") from None

    def _clear_delta_cache(self) -> None:
        """Forget Delta-Spark's cached snapshots: every run loads the table as a new job would."""
        self.spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()

    # -- running ----------------------------------------------------------------------------
    def run_mode(self, mode: Mode, table: SyntheticTable, *, dry_run: bool) -> tuple[Phase, set[str], Any]:
        """One timed run; returns the phase, the relative candidate paths and the engine's result."""
        self.run_counter += 1
        run_id = f"bench-{table.bucket}-{mode.name}-{'dry' if dry_run else 'real'}-{self.run_counter}"
        if mode.engine == "spark":
            call = self._our_runner(mode, table, dry_run, run_id)
        elif mode.engine == "delta-sql":
            call = self._delta_statement(table, dry_run)
        else:
            call = self._delta_rs(table, dry_run)
        self._clear_delta_cache()  # after the ledger's creation (_our_runner): no warm table
        self.server.reset_counts()
        since_ms = int(time.time() * 1000)
        started = time.perf_counter()
        result = call()
        seconds = time.perf_counter() - started
        until_ms = int(time.time() * 1000)
        counts: Counter[tuple[str, str]] = Counter()
        for (bucket, area, operation), count in self.server.area_counts().items():
            if bucket == table.bucket or area == "meta":
                counts[(area, operation)] += count
        phase = Phase(seconds, counts, self.model, mode.engine, mode.mode, (since_ms, until_ms))
        if mode.engine == "spark":
            run = result.tables[0]
            if run.status != "ok":
                raise BenchmarkFailure(f"{mode.name} on {table.uri} ({run_id}): {run.status}: {run.reason}")
            candidates = {_relative(p, table) for p in run.candidates.column("path").to_pylist()}
            return phase, candidates, run
        return phase, {_relative(p, table) for p in result}, None

    def _our_runner(self, mode: Mode, table: SyntheticTable, dry_run: bool, run_id: str) -> Any:
        from vacuum.runner import VacuumOptions, vacuum_tables

        options = VacuumOptions(
            inventory_table=self.inventory_table if mode.mode == "inventory" else None,
            mode=mode.mode,
            delete_with=mode.delete_with,
            dry_run=dry_run,
            retain_hours=0,
            allow_unsafe_retention=True,
            parallel=1,
            history_table=self.history_table,
            # a ledger per run: the table is put back after each real run, and a shared ledger
            # would (rightly) keep the next run from deleting the same keys again
            ledger_table=f"s3://{META_BUCKET}/ledgers/{run_id}",
            collect_candidates=True,
        )
        if not dry_run:
            # created before the clock starts: a user's ledger is created once, by the first real
            # run, and every later one appends (its creation is a Delta commit)
            from vacuum.ledger import ensure_ledger

            assert options.ledger_table is not None
            ensure_ledger(self.spark, options.ledger_table)
        tables = self._registry(table.bucket).select(None)
        return lambda: vacuum_tables(self.spark, tables, options, run_id=run_id)

    def _delta_statement(self, table: SyntheticTable, dry_run: bool) -> Any:
        self.spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
        statement = f"VACUUM delta.`{table.uri}` RETAIN 0 HOURS" + (" DRY RUN" if dry_run else "")

        def run() -> list[str]:
            rows = self.spark.sql(statement).collect()
            return [r["path"] for r in rows] if dry_run else []

        return run

    def _delta_rs(self, table: SyntheticTable, dry_run: bool) -> Any:
        from deltalake import DeltaTable

        def run() -> list[str]:
            return DeltaTable(table.uri, storage_options=self.storage_options).vacuum(
                retention_hours=0, dry_run=dry_run, enforce_retention_duration=False, full=True
            )

        return run

    def measure_round(self, mode: Mode, table: SyntheticTable) -> Round:
        """One dry run and one real run of ``mode`` on the table as built, both checked; the table is
        restored after each."""
        expected = table.paths(*mode.finds)
        all_data = table.data_keys()
        plan, candidates, plan_run = self.run_mode(mode, table, dry_run=True)
        self._check_candidates(mode, table, "dry run", candidates, expected)
        changed = table.restore()
        if changed["deleted"] or changed["rewritten"]:
            raise BenchmarkFailure(f"the dry run of {mode.name} changed the table: {changed}")
        real, planned, real_run = self.run_mode(mode, table, dry_run=False)
        if mode.engine != "delta-sql":
            self._check_candidates(mode, table, "real run", planned, expected)
        gone = {k[len(table.root) + 1 :] for k in all_data - table.data_keys()}
        if gone != expected:
            raise BenchmarkFailure(
                f"the real run of {mode.name} on {table.uri} deleted {len(gone)} files, expected "
                f"{len(expected)}; {len(gone - expected)} not garbage (e.g. {sorted(gone - expected)[:2]}), "
                f"{len(expected - gone)} garbage left (e.g. {sorted(expected - gone)[:2]})"
            )
        table.restore()
        return Round(plan, plan_run, real, real_run, len(candidates), len(gone))

    def measure(self, mode: Mode, table: SyntheticTable, rounds: list[Round]) -> dict[str, Any]:
        """``mode``'s result from its ``rounds`` (:meth:`measure_round`): the round whose real run
        took the median time (of an even count, the lower middle one), its dry run and its real
        run, so that *delete* = real - plan is one round's (one round is mostly noise and the JIT's
        warming at 100k files: back to back, the same dry run took 10 to 21 s)."""
        repeat = len(rounds)
        plan, plan_run, real, real_run, candidates, gone = _median_round(rounds)
        plan_dict, real_dict = plan.to_dict(), real.to_dict()
        result = {
            "mode": mode.name,
            "label": mode.label,
            "engine": mode.engine,
            "candidates": candidates,
            "deleted_files": gone,
            "plan": plan_dict,
            "run": real_dict,
            "delete": _difference(real_dict, plan_dict),
            "repeat": repeat,
            "plan_seconds_each": [round(r.plan.seconds, 3) for r in rounds],
            "run_seconds_each": [round(r.real.seconds, 3) for r in rounds],
        }
        if mode.engine == "spark":  # read from Spark's event log when the session has ended
            result[EVENT_WINDOWS] = {"plan": plan.window_ms, "run": real.window_ms}
        if real_run is not None:
            result["reported"] = {
                "planned_files": real_run.planned_files,
                "deleted_files": real_run.deleted_files,
                "delete_requests": real_run.delete_requests,
                "seconds": real_run.seconds,
                "plan_seconds": plan_run.seconds,
            }
        log.info(
            "N=%d %s: plan %.1fs, real %.1fs (median of %d), %d table requests",
            len(table.files),
            mode.name,
            plan.seconds,
            real.seconds,
            repeat,
            real_dict["table_requests"],
        )
        return result

    def _check_candidates(
        self, mode: Mode, table: SyntheticTable, what: str, found: set[str], expected: set[str]
    ) -> None:
        if found != expected:
            raise BenchmarkFailure(
                f"candidate sets differ: the {what} of {mode.name} on {table.uri} found {len(found)} files, "
                f"expected {len(expected)} ({', '.join(mode.finds)}); {len(found - expected)} extra "
                f"(e.g. {sorted(found - expected)[:2]}), {len(expected - found)} missing "
                f"(e.g. {sorted(expected - found)[:2]})"
            )

    def run_size(self, files: int, repeat: int = 1) -> SizeResult:
        table, build_seconds, inventory = self.prepare(files, f"bench-lake-{files}")
        result = SizeResult(files, table.counts(), build_seconds, inventory)
        log.info("N=%d: built in %.1fs, inventory %s", files, build_seconds, inventory)
        # the modes in turn in every round, each round starting at the next mode: a drift of this
        # machine's speed during the rounds falls on the modes more evenly than on the ones run last
        rounds: dict[str, list[Round]] = {mode.name: [] for mode in self.modes}
        for number in range(repeat):
            start = number % len(self.modes)
            for mode in self.modes[start:] + self.modes[:start]:
                rounds[mode.name].append(self.measure_round(mode, table))
        for mode in self.modes:
            result.runs.append(self.measure(mode, table, rounds[mode.name]))
        return result

    def warm_up(self) -> None:
        """A dry run of every mode on a small table, not recorded: JIT, Delta's and Spark's first
        use, and the history table's creation are not charged to the first measured mode."""
        table, _, _ = self.prepare(WARM_UP_SIZE, "bench-warm-up")
        for mode in self.modes:
            self.run_mode(mode, table, dry_run=True)
            table.restore()


# -- output -----------------------------------------------------------------------------------------


def event_log_settings(directory: Path) -> dict[str, str]:
    """Spark's event log, one plain file in ``directory``: every job, its group and step."""
    return {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": directory.as_uri(),
        "spark.eventLog.rolling.enabled": "false",
        "spark.eventLog.compress": "false",
    }


def where_the_time_goes(
    event_log: dict[str, Any], window_ms: tuple[int, int], seconds: float
) -> dict[str, Any]:
    """One timed run of ours (its window, epoch ms, and its local wall ``seconds``), from the event
    log as ``benchmarks.one_table.read_event_log`` read it (once for every run): the Spark jobs
    submitted in the window, the union of their intervals (cut to the window), the rest of
    ``seconds`` (outside any job: the driver's work between and around them, which the event log
    does not break down), and the jobs' seconds by step. A job of the
    table's own group (``vacuum <table>``) is named by its step, another by its group too (the
    run's figures read beside the table's jobs; a job of no group). A window with no job, or with a
    job that never ended, is a log the breakdown cannot trust: :class:`BenchmarkFailure` (the
    benchmark's result keeps the run's other figures and says why it has no breakdown)."""
    from benchmarks.one_table import union_ms

    since, until = window_ms
    unfinished = [job for job in event_log["unfinished_jobs"] if since <= job["start"] <= until]
    jobs = [job for job in event_log["jobs"] if since <= job["start"] <= until]
    if unfinished or not jobs:
        what = f"{len(unfinished)} job(s) that never ended" if unfinished else "no job"
        raise BenchmarkFailure(f"Spark's event log holds {what} in a timed run's window")
    by_step: dict[tuple[bool, str], list[float]] = {}
    for job in jobs:
        own = job["group"].startswith("vacuum ")
        step = job["step"] if own else f"{job['group']}: {job['step']}"
        by_step.setdefault((own, step), []).append((min(job["end"], until) - job["start"]) / 1000)
    in_jobs = union_ms([(job["start"], min(job["end"], until)) for job in jobs]) / 1000
    return {
        "jobs": len(jobs),
        "in_jobs_seconds": round(in_jobs, 3),
        "outside_jobs_seconds": round(max(0.0, seconds - in_jobs), 3),
        "steps": [
            {"step": step, "table": own, "jobs": len(times), "seconds": round(sum(times), 3)}
            for (own, step), times in sorted(
                by_step.items(), key=lambda item: (not item[0][0], -sum(item[1]))
            )
        ],
    }


def machine() -> dict[str, Any]:
    """What ran the benchmark."""
    load = os.getloadavg()
    return {
        "cpus": os.cpu_count(),
        "load_average_1_5_15": [round(x, 2) for x in load],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {
            **{name: version(name) for name in ("pyspark", "delta-spark", "deltalake", "moto", "boto3")},
            "java": java_version(),
        },
    }


def java_version() -> str:
    """The version of the Java that Spark's launcher runs (``$JAVA_HOME/bin/java``, else the
    first on ``PATH``), as it prints it: Spark's speed differs between Java releases."""
    from core.class_archive import java_executable, launcher_conf_folder

    environment_file = os.path.join(launcher_conf_folder(), "spark-env.sh")
    if os.path.isfile(environment_file):  # the launcher sources it, and it may set another JAVA_HOME
        return f"unknown ({environment_file} may choose it)"
    java = java_executable()
    return "none found" if java is None else _version_printed_by(str(java))


@functools.cache
def _version_printed_by(java: str) -> str:
    """What ``java -version`` says its version is, asked once a process for each executable (a
    result's machine figures are taken before and after its run)."""
    try:
        printed = subprocess.run(
            [java, "-version"], capture_output=True, text=True, errors="replace", timeout=60
        ).stderr
    except (OSError, subprocess.SubprocessError) as error:
        return f"unknown ({error})"
    found = re.search(r'version "([0-9][^"]*)"', printed)
    return found.group(1) if found else "unknown"


def java_of(machine_figures: Any) -> str:
    """``, Java X`` for a result's header, or nothing for a result that did not record a version
    (one from before the Java was recorded, or whose Java was not known)."""
    java = recorded_java(machine_figures)
    return f", Java {java}" if java else ""


def recorded_java(machine_figures: Any) -> str | None:
    """The version of Java a result's machine figures recorded, or None (none, or not known)."""
    versions = machine_figures.get("versions") if isinstance(machine_figures, dict) else None
    java = versions.get("java") if isinstance(versions, dict) else None
    return java if isinstance(java, str) and re.fullmatch(r"[0-9][0-9A-Za-z.+_-]*", java) else None


def code_version() -> str:
    """The commit the benchmark ran, and whether tracked files outside ``benchmarks/results``
    differed from it (a result file an earlier benchmark wrote is not code)."""
    repository = Path(__file__).resolve().parent.parent
    try:
        head, dirty = (
            subprocess.run(
                ["git", "-C", str(repository), *arguments], capture_output=True, text=True
            ).stdout.strip()
            for arguments in (
                ["rev-parse", "--short", "HEAD"],
                ["status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)benchmarks/results"],
            )
        )
    except OSError:  # no git on the machine
        return "unknown"
    return (head or "unknown") + (" with uncommitted changes" if dirty else "")


# code_version() as the process started (this module is imported first): the code that ran, not
# the commit the repository is at when the result is written (a commit made while a benchmark runs
# is not its code, and the result files it writes are not uncommitted code)
CODE_AT_START = code_version()


def _java_tool_options() -> str:
    """``JAVA_TOOL_OPTIONS=...`` and a space when the variable is set (every JVM the run starts
    reads it, a profile's stack depth say), else nothing: part of the command that made a result."""
    given = os.environ.get("JAVA_TOOL_OPTIONS", "").strip()
    return f"JAVA_TOOL_OPTIONS={shlex.quote(given)} " if given else ""


def run_header(benchmark: str, started_at: datetime, before: dict[str, Any]) -> dict[str, Any]:
    """The first keys of every benchmark's result document: what ran, at which commit (as the
    process started), when, on what machine."""
    return {
        "benchmark": benchmark,
        "command": _java_tool_options() + f"python -m benchmarks.{benchmark} " + " ".join(sys.argv[1:]),
        "code": CODE_AT_START,
        "started_at": started_at.isoformat(),
        "machine_before": before,
        "machine_after": machine(),
    }


def write_results(document: dict[str, Any], output: Path) -> str:
    """Write the JSON, the Markdown and the plots; return the Markdown."""
    from benchmarks.report import markdown, plot

    output.mkdir(parents=True, exist_ok=True)
    (output / "vacuum_at_scale.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    text = markdown(document)
    (output / "vacuum_at_scale.md").write_text(text, encoding="utf-8")
    plot(document, output)
    return text


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.vacuum_at_scale",
        description="Vacuum at scale: listing VACUUM, LITE, inventory and flat modes, and delta-rs, "
        "side by side on a synthetic partitioned Delta table on the local S3 server.",
    )
    parser.add_argument(
        "--files",
        type=int,
        action="append",
        help=f"table size N, data files (repeatable; default {', '.join(map(str, DEFAULT_SIZES))})",
    )
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=DEFAULT_LATENCY_MS,
        help="modeled S3 round trip per request (default %(default)s)",
    )
    parser.add_argument(
        "--inject-latency",
        action="store_true",
        help="make the local server wait --latency-ms on every request instead of modeling it "
        "(slow; checks the model: modeled time is then the measured time)",
    )
    parser.add_argument(
        "--modes",
        default=",".join(DEFAULT_MODES),
        help=f"comma-separated, from {', '.join(MODES)} (default %(default)s)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds (a dry run, then a real run) of each mode at each size, the modes in turn; the "
        "round of median real time is reported, the lower middle one of an even count (default 1)",
    )
    parser.add_argument("--no-warm-up", action="store_true", help="skip the unrecorded warm-up round")
    parser.add_argument(
        "--moto-listing",
        action="store_true",
        help="keep moto's own ListObjectsV2 (it scans the whole bucket for every request)",
    )
    parser.add_argument("--output", type=Path, default=RESULTS, help="results folder (default %(default)s)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if any(n < 720 for n in args.files or ()):
        parser.error("--files must be at least 720 (one file per partition)")
    unknown = [m for m in args.modes.split(",") if m not in MODES]
    if unknown:
        parser.error(f"unknown mode(s) {', '.join(unknown)}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 on success, 1 when the comparison is not fair (the reason on stderr)."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s", stream=sys.stderr)
    log.setLevel(logging.INFO)
    # Delta's VACUUM prints to the JVM's stdout, and the JVM inherits fd 1 when it starts: point
    # fd 1 at stderr until the Markdown table is printed
    sys.stdout.flush()
    saved_stdout = os.dup(1)
    os.dup2(2, 1)
    server = BenchmarkS3Server(args.latency_ms / 1000 if args.inject_latency else 0.0)
    undo = None
    try:
        server.start()
        undo = None if args.moto_listing else install_indexed_listing()
        server.use_in_environment()
        document = run(args, server, argv)
        text = write_results(document, args.output)
        sys.stdout.flush()
        os.dup2(saved_stdout, 1)
        print(text)
        return 0
    except BenchmarkFailure as failure:
        print(f"vacuum_at_scale FAILED: {failure}", file=sys.stderr)
        return 1
    finally:
        sys.stdout.flush()
        os.dup2(saved_stdout, 1)
        if undo is not None:
            undo()
        server.stop()


def run(args: argparse.Namespace, server: BenchmarkS3Server, argv: list[str] | None) -> dict[str, Any]:
    """Every size and mode of one invocation, as the result document."""
    from core.s3 import s3_client
    from core.session import build_spark_session

    started_at = datetime.now(timezone.utc)
    before = machine()
    s3 = s3_client()
    s3.create_bucket(Bucket=META_BUCKET)
    events = Path(tempfile.mkdtemp(prefix="vacuum-at-scale-events-"))
    try:
        # Spark's default 1 GB heap ran out in the flat mode at 300k files (after the 100k size)
        settings = {"spark.driver.memory": "4g", **event_log_settings(events)}
        spark = build_spark_session("inventory-vacuum benchmark: vacuum at scale", settings)
        try:
            modes = [MODES[m] for m in args.modes.split(",")]
            # with the latency injected, the wall time already holds it: the model adds nothing
            benchmark = VacuumAtScale(
                spark, server, s3, modes, 0.0 if args.inject_latency else args.latency_ms
            )
            if not args.no_warm_up:
                log.info("warm-up round (not recorded)")
                benchmark.warm_up()
            results = [
                benchmark.run_size(files, args.repeat).to_dict()
                for files in sorted(set(args.files or DEFAULT_SIZES))
            ]
        finally:
            spark.stop()  # which writes the event log's last events
        from benchmarks.one_table import read_event_log

        event_log = read_event_log(events)
        for size in results:
            for result in size["runs"]:
                windows = result.pop(EVENT_WINDOWS, None)
                if windows:
                    try:
                        result["events"] = {
                            phase: where_the_time_goes(event_log, windows[phase], result[phase]["seconds"])
                            for phase in ("plan", "run")
                        }
                    except BenchmarkFailure as unread:  # the timings stand without their breakdown
                        result["events_unread"] = str(unread)
    finally:
        shutil.rmtree(events, ignore_errors=True)
    return {
        "benchmark": "vacuum_at_scale",
        "command": "python -m benchmarks.vacuum_at_scale " + " ".join(argv or sys.argv[1:]),
        "code": CODE_AT_START,
        "started_at": started_at.isoformat(),
        "seconds": round((datetime.now(timezone.utc) - started_at).total_seconds(), 1),
        "machine_before": before,
        "machine_after": machine(),
        "retention": "RETAIN 0 HOURS (retention check off) for every engine; see benchmarks/README.md",
        "latency_injected_ms": args.latency_ms if args.inject_latency else 0.0,
        "repeat": args.repeat,
        "modes_in_turn": True,  # each round ran every mode, starting at the next one
        "listing": "moto's own" if args.moto_listing else "indexed (same answers as moto's)",
        "layout": {"partitions": PARTITION_DAYS * 24, "add_actions_per_commit": ADD_BATCH},
        "shares": Shares().__dict__,
        "prices": {
            "as_of": PRICES_AS_OF,
            "source": PRICE_SOURCE,
            "put_copy_post_list_per_1000": TIER1_PER_1000,
            "get_head_other_per_1000": TIER2_PER_1000,
            "delete_per_1000": 0.0,
        },
        "model": benchmark.model.describe(),
        "sizes": results,
    }


if __name__ == "__main__":
    sys.exit(main())
