"""Many tables: the nightly per-table vacuum over T small tables, at several --parallel settings.

Builds T synthetic tables (``benchmarks/synthetic_table.py``: hourly partitions, a hand-written
log with a checkpoint, tombstoned files and orphans) of F files each in one bucket of the local
S3, delivers and ingests one inventory of the bucket, then runs the vacuum job over all T tables
exactly as ``inventory-vacuum vacuum`` does (the CLI's own entry point, in this process, so the
JVM start is paid once and reported apart), once per parallelism, as dry runs. Every run must
plan the same candidates for every table, or the benchmark fails.

Where the time goes is read from Spark's own event log: per table, how many Spark jobs ran and
how long they took, and the stages that took the most time over all tables. A run at Delta's
default ``spark.databricks.delta.snapshotPartitions`` (50) shows what sizing it to the table
(``core.tables.snapshot_partitions``) saves.

    .venv/bin/python -m benchmarks.many_tables                       # 100 tables of 1,000 files
    .venv/bin/python -m benchmarks.many_tables --tables 20 --parallel 1,4
    .venv/bin/python -m benchmarks.many_tables --tables 20 --parallel 4 --profile  # + the driver's profile
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmarks.driver_profile import reset_rule_times, rule_times, rules_markdown
from benchmarks.report import seconds_a_table
from benchmarks.s3_server import check_indexed_listing, install_indexed_listing
from benchmarks.synthetic_table import GARBAGE, Shares, TableBuilder
from benchmarks.vacuum_at_scale import java_of, machine, run_header

log = logging.getLogger("benchmarks.many_tables")

BUCKET = "bench-many-lake"
META = "bench-many-meta"
RESULTS = Path(__file__).parent / "results"


class Failure(Exception):
    """The comparison is not fair (different plans across runs) or a run failed."""


def storage_options(endpoint: str) -> dict[str, str]:
    """delta-rs's options for the local S3."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
        "AWS_REGION": os.environ.get("AWS_REGION", "us-east-1"),
        "AWS_ACCESS_KEY_ID": os.environ["AWS_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": os.environ["AWS_SECRET_ACCESS_KEY"],
    }


def build_tables(
    s3: Any, endpoint: str, tables: int, files: int, unchanged: int = 0
) -> tuple[dict[str, set[str]], dict[str, dict[str, str]]]:
    """T tables of F files, the last ``unchanged`` of them only live files (a table nobody wrote
    to since its last vacuum); returns each table's expected garbage (relative paths) and the kind
    of each of its files (``synthetic_table``'s categories)."""
    storage = storage_options(endpoint)
    garbage, kinds = {}, {}
    for index in range(tables):
        name = f"t{index:03d}"
        shares = (
            Shares(tombstoned_old=0.0, tombstoned_recent=0.0, orphan=0.0, fresh=0.0)
            if index >= tables - unchanged
            else Shares(fresh=0.0)
        )
        builder = TableBuilder(s3, BUCKET, f"warehouse/{name}", files, shares, storage)
        table = builder.build()
        garbage[name] = table.paths(*GARBAGE)
        kinds[name] = {f.path: f.category for f in table.files}
    return garbage, kinds


def parse_event_log(
    directory: Path, since_ms: int, until_ms: int, group_prefix: str = "vacuum "
) -> dict[str, Any]:
    """Per job group (a table's vacuum, a bucket's ingest: groups named ``group_prefix`` + name):
    Spark jobs and their seconds, by step; over all: the costliest stages. Only jobs and stages
    submitted between ``since_ms`` and ``until_ms`` (epoch milliseconds)."""
    jobs: dict[int, dict[str, Any]] = {}
    stage_names: dict[int, str] = {}
    stage_seconds: Counter[str] = Counter()
    stage_tasks: Counter[str] = Counter()
    for path in (p for p in directory.rglob("*") if p.is_file()):
        with path.open(encoding="utf-8") as events:
            for line in events:
                event = json.loads(line)
                kind = event.get("Event")
                if kind == "SparkListenerJobStart" and since_ms <= event["Submission Time"] <= until_ms:
                    properties = event.get("Properties") or {}
                    group = properties.get("spark.jobGroup.id") or "(no table)"
                    step = _step_name(properties.get("spark.job.description") or "(no description)")
                    jobs[event["Job ID"]] = {"group": group, "step": step, "start": event["Submission Time"]}
                elif kind == "SparkListenerJobEnd" and event["Job ID"] in jobs:
                    jobs[event["Job ID"]]["end"] = event["Completion Time"]
                elif kind == "SparkListenerStageCompleted":
                    info = event["Stage Info"]
                    name = info["Stage Name"].split(" at ")[0] + " at " + _short_site(info.get("Details", ""))
                    stage_names[info["Stage ID"]] = name
                    if "Completion Time" in info and since_ms <= info.get("Submission Time", 0) <= until_ms:
                        stage_seconds[name] += (info["Completion Time"] - info["Submission Time"]) / 1000
                        stage_tasks[name] += info["Number of Tasks"]
    per_group: dict[str, list[float]] = defaultdict(list)
    per_step: dict[str, list[float]] = defaultdict(list)
    for job in jobs.values():
        if "end" in job:
            per_group[job["group"]].append((job["end"] - job["start"]) / 1000)
            if job["group"].startswith(group_prefix):
                per_step[job["step"]].append((job["end"] - job["start"]) / 1000)
    tables = {g: v for g, v in per_group.items() if g.startswith(group_prefix)}
    count = max(1, len(tables))
    job_counts = sorted(len(v) for v in tables.values())
    return {
        "tables_seen": len(tables),
        "jobs_per_table_median": job_counts[len(job_counts) // 2] if job_counts else 0,
        "job_seconds_per_table_median": round(sorted(sum(v) for v in tables.values())[len(tables) // 2], 3)
        if tables
        else 0.0,
        "steps": [
            {
                "step": step,
                "jobs_per_table": round(len(v) / count, 1),
                "seconds_per_table": round(sum(v) / count, 3),
            }
            for step, v in sorted(per_step.items(), key=lambda item: -sum(item[1]))
        ],
        "top_stages": [
            {"stage": name, "seconds": round(seconds, 2), "tasks": stage_tasks[name]}
            for name, seconds in stage_seconds.most_common(8)
        ],
    }


def _step_name(description: str) -> str:
    """``vacuum t001: coverage`` -> ``coverage``; Delta's own descriptions keep their words."""
    import re

    text = re.sub(r"(vacuum|ingest) [^:]+: ", "", description.replace("Delta: ", ""))
    return re.sub(r"version: \d+", "version: N", text)


def _short_site(details: str) -> str:
    """The first frame of a stage's call site that is ours (file:line), else Spark's first."""
    frames = [line.strip() for line in details.splitlines() if line.strip()]
    for frame in frames:
        if "/vacuum/" in frame or "/inventory/" in frame:
            return frame.rsplit("/", 1)[-1]
    return frames[0].rsplit("(", 1)[-1].rstrip(")") if frames else "?"


def vacuum_run(
    spark: Any, inventory: str, registry: str, parallel: int, event_dir: Path
) -> tuple[float, dict[str, Any], dict[str, Any]]:
    """One CLI vacuum dry run over every table; (seconds, the report, the event-log figures)."""
    import io

    from jobs.cli import run

    out = io.StringIO()
    # as a vacuum job of its own would start: no Delta log state left from the ingest or the last run
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    since_ms = int(time.time() * 1000)
    compilations = _compilations(spark)
    reset_rule_times(spark)
    started = time.monotonic()
    with counted_jvm_calls() as calls:
        code = run(
            [
                "vacuum", "--inventory-table", inventory, "--tables", registry, "--dry-run", "--json",
                "--retain-hours", "0", "--allow-unsafe-retention", "--parallel", str(parallel),
                "--candidates", str(event_dir.parent / f"candidates-{parallel}.parquet"),
            ],
            out,
        )  # fmt: skip
    seconds = time.monotonic() - started
    report = json.loads(out.getvalue())
    if code != 0:
        bad = [t for t in report["tables"] if t["status"] != "ok"]
        raise Failure(
            f"--parallel {parallel}: {len(bad)} table(s) not ok, e.g. {bad[0]['name']}: {bad[0]['reason']}"
        )
    compiled = _compilations(spark) - compilations
    try:
        rules: dict[str, Any] | None = rule_times(spark)
    except Exception as error:  # a metering this Spark prints otherwise: the run's other figures stand
        log.warning("Catalyst's rule metering not read: %s", str(error)[:200])
        rules = None
    time.sleep(1)  # the event log is flushed at each job's and stage's end
    figures = parse_event_log(event_dir, since_ms, int(time.time() * 1000))
    figures["classes_compiled_per_table"] = round(compiled / max(1, len(report["tables"])), 1)
    figures["jvm_calls_per_table"] = round(calls() / max(1, len(report["tables"])))
    if rules is not None:
        figures["rules"] = rules | {"tables": len(report["tables"])}
    return seconds, report, figures


@contextmanager
def counted_jvm_calls() -> Iterator[Callable[[], int]]:
    """Count PySpark's round trips to the JVM (py4j commands, from every thread) while the block
    runs; the block gets a function that reads the count. Each Column function, literal and
    DataFrame method is one or more of them. py4j's releases of Java objects whose Python proxies
    were freed are not counted: its finalizer thread sends them whenever Python's garbage
    collector frees proxies, also those of code that ran before the block."""
    from py4j.clientserver import ClientServerConnection
    from py4j.java_gateway import GatewayConnection
    from py4j.protocol import MEMORY_COMMAND_NAME

    sent = itertools.count()  # next() on it is atomic in CPython: no count is lost between threads
    originals = {kind: kind.send_command for kind in (ClientServerConnection, GatewayConnection)}

    def counting(original: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
        def send_command(connection: Any, command: str) -> Any:
            if not command.startswith(MEMORY_COMMAND_NAME):
                next(sent)
            return original(connection, command)

        return send_command

    for kind, original in originals.items():
        kind.send_command = counting(original)  # type: ignore[method-assign]
    stopped: list[int] = []
    try:
        yield lambda: stopped[0] if stopped else 0
    finally:
        for kind, original in originals.items():
            kind.send_command = original  # type: ignore[method-assign]
        stopped.append(next(sent))


def _compilations(spark: Any) -> int:
    """How many classes Spark's code generation has compiled in this JVM (its CodegenMetrics):
    a query whose generated code is not in Spark's cache compiles it again."""
    return int(spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount())


def planned_files(candidates: Path) -> dict[str, set[str]]:
    """Each table's planned files (relative to its root) from a run's ``--candidates`` file."""
    import pyarrow.parquet as pq

    planned: dict[str, set[str]] = defaultdict(set)
    for row in pq.read_table(candidates).to_pylist():
        planned[row["table"]].add(row["path"].split(f"/warehouse/{row['table']}/", 1)[1])
    return planned


def check_plans(report: dict[str, Any], candidates: Path, garbage: dict[str, set[str]]) -> None:
    planned = planned_files(candidates)
    for name, expected in garbage.items():
        if planned.get(name, set()) != expected:
            raise Failure(
                f"table {name}: planned {len(planned.get(name, ()))} files, expected {len(expected)}"
            )


def markdown(document: dict[str, Any]) -> str:
    runs = document["runs"]
    best = min(r["seconds_per_table"] for r in runs)
    lines = [
        f"# Many tables: {document['tables']} tables of {document['files_per_table']:,} files, dry runs"
        + (
            f" ({document['unchanged_tables']} of them only live files: nothing to delete)"
            if document.get("unchanged_tables")
            else ""
        ),
        "",
        f"`{document['command'].strip()}` at {document.get('code', 'an unrecorded commit')}, started "
        f"{document['started_at'][:19]}Z. "
        f"Machine: {document['machine_before'].get('cpus')} CPUs{java_of(document['machine_before'])}, load before "
        f"{document['machine_before'].get('load_average_1_5_15')}; Spark session start "
        f"{document['spark_start_seconds']:.1f} s (once, not in the figures below); ingest of the "
        f"{document['inventory']['objects']:,}-object inventory {document['inventory']['ingest_seconds']:.1f} s."
        + " The local S3 answers LISTs from a sorted index (the same answers as moto's own, checked first)."
        + (f" Settings given: {', '.join(document['conf'])}." if document.get("conf") else ""),
        "",
        "| --parallel | snapshotPartitions | wall s | s per table | vs best | Spark jobs per table (median) "
        "| job s per table (median) | classes compiled per table | calls into the JVM per table |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        calls = r["events"].get("jvm_calls_per_table")
        lines.append(
            f"| {r['parallel']} | {r['snapshot_partitions']} | {r['seconds']:.1f} | {r['seconds_per_table']:.2f} | "
            f"{r['seconds_per_table'] / best:.2f}× | {r['events']['jobs_per_table_median']} | "
            f"{r['events']['job_seconds_per_table_median']:.2f} | "
            f"{r['events'].get('classes_compiled_per_table', '–')} | {'–' if calls is None else f'{calls:,}'} |"
        )
    if document.get("unchanged_tables"):
        skipped = ", ".join(f"{r.get('delta_plan_skipped', 0)} at --parallel {r['parallel']}" for r in runs)
        lines += [
            "",
            f"Tables whose plan was known to be empty without Delta's dry run (every object of the slice "
            f"a file the table needs): {skipped}, of the {document['unchanged_tables']} with only live files.",
        ]
    if document.get("warm_up_classes_compiled") is not None:
        lines += [
            "",
            "Classes compiled: Spark's CodegenMetrics over each run, per table. The JVM's code cache is "
            "shared by the runs: the warm-up table (a fresh JVM's first, "
            f"{document['warm_up_classes_compiled']:.0f} classes) and each earlier row filled it, so a "
            "row shows a running job's steady state.",
        ]
    lines += rules_markdown(runs)
    lines += [
        "",
        f"Spark jobs by step at --parallel {runs[0]['parallel']} (per table; a job's seconds overlap other tables' when tables run in parallel):",
        "",
    ]
    lines += ["| step | jobs | job seconds |", "|---|---|---|"]
    lines += [
        f"| {s['step']} | {s['jobs_per_table']} | {s['seconds_per_table']:.2f} |"
        for s in runs[0]["events"]["steps"]
    ]
    profile = document.get("driver_profile")
    if profile:
        shares = profile["shares"]
        lines += [
            "",
            f"Where the driver JVM's CPU went, one more run at --parallel {profile['parallel']} under Java "
            f"Flight Recorder ({shares['samples']:,} execution samples; that run took "
            f"{profile['seconds_per_table']:.2f} s a table, and is none of the timed runs above, as a "
            "recording costs time of its own). A share is the part of the samples whose stack "
            "holds such a frame, or that ran in such a thread; the kinds overlap (compiling happens inside "
            "planning), the threads do not:",
            "",
            "| kind of work | share of samples |",
            "|---|---|",
        ]
        lines += [f"| {kind} | {share:.1%} |" for kind, share in shares.items() if kind != "samples"]
        lines += ["", "| frame the CPU was in | share |", "|---|---|"]
        lines += [f"| `{f['frame']}` | {f['share']:.1%} |" for f in profile["top_frames"]]
    lines += peers_markdown(document)
    slowest = runs[0]["events"]["top_stages"]
    lines += ["", f"Costliest stages at --parallel {runs[0]['parallel']} (summed over all tables):", ""]
    lines += ["| stage | seconds | tasks |", "|---|---|---|"]
    lines += [f"| `{s['stage']}` | {s['seconds']:.1f} | {s['tasks']:,} |" for s in slowest]
    return "\n".join(lines) + "\n"


def peers_markdown(document: dict[str, Any]) -> list[str]:
    """The peers' table: seconds a table, each side's ratio to ours, and how its candidates differ."""
    peers = document.get("peers")
    if not peers:
        return []
    ours = seconds_a_table(peers["ours"])
    lines = [
        "",
        "The same tables, dry runs at `RETAIN 0 HOURS`, by the peers' loops in the same process and on "
        "the same S3 server (a loop runs its tables on as many threads as our `--parallel`):",
        "",
        "| side | tables | wall s | s per table | ratio to ours (>1: ours faster) | candidates |",
        "|---|---|---|---|---|---|",
    ]
    for side in peers.values():
        diff = side["differences"]
        if diff["matches"]:
            found = "the garbage as built, every table"
        else:
            found = (
                f"differs: planned but not garbage {diff['planned_not_garbage']}, "
                f"garbage not planned {diff['garbage_not_planned']} ("
                + "; ".join(f"{k}: {v}" for k, v in diff["reasons"].items())
                + ")"
            )
        lines.append(
            f"| {side['label']} | {side['tables']} | {side['seconds']:.1f} | {side['seconds_per_table']:.2f} | "
            f"{seconds_a_table(side) / ours:.2f}× | {found} |"
        )
    return lines


def plot(document: dict[str, Any], output: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    sized = [r for r in document["runs"] if r["snapshot_partitions"] == "sized"]
    figure, axes = plt.subplots(figsize=(6, 4))
    axes.plot([r["parallel"] for r in sized], [r["seconds_per_table"] for r in sized], marker="o")
    axes.set_xlabel("--parallel")
    axes.set_ylabel("seconds per table (amortized)")
    axes.set_title(f"{document['tables']} tables of {document['files_per_table']:,} files, dry runs")
    axes.set_ylim(bottom=0)
    axes.grid(True, alpha=0.3)
    path = output / "many_tables.png"
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--files", type=int, default=1000, help="files per table")
    parser.add_argument(
        "--unchanged-tables",
        type=int,
        default=0,
        help="how many of the tables hold only live files, as a table nobody wrote to since its "
        "last vacuum does (the last ones)",
    )
    parser.add_argument("--parallel", default="1,4,8", help="comma-separated --parallel values")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for the benchmark's session, as spark-submit --conf (repeatable): "
        "an A/B of one setting, e.g. spark.sql.codegen.cache.maxEntries=100",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="one more run, at the first --parallel, under Java Flight Recorder: where the driver "
        "JVM's CPU goes (not one of the timed runs)",
    )
    parser.add_argument(
        "--peers",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time the same tables by Delta's inventory VACUUM loop (on the job's session, and "
        "with each table's session sized as ours), a delta-rs loop and Delta's listing VACUUM loop "
        "(fleet_peers), on --parallel's first value of threads",
    )
    parser.add_argument(
        "--listing-tables",
        type=int,
        default=20,
        help="how many of the tables Delta's listing VACUUM loop runs (it lists each table in full)",
    )
    parser.add_argument(
        "--inventory-loop-tables",
        type=int,
        default=None,
        help="how many of the tables Delta's inventory VACUUM loops run (default: all of them)",
    )
    parser.add_argument(
        "--compare-default",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run at Delta's default snapshotPartitions (50), at the middle --parallel",
    )
    args = parser.parse_args(argv)
    if any("=" not in setting for setting in args.conf):
        parser.error("--conf takes KEY=VALUE")
    if not 0 <= args.unchanged_tables <= args.tables:
        parser.error("--unchanged-tables takes 0 to --tables")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    log.setLevel(logging.INFO)
    logging.getLogger("benchmarks.fleet_peers").setLevel(logging.INFO)
    sys.stdout.flush()
    saved_stdout = os.dup(1)
    os.dup2(2, 1)  # the JVM prints to fd 1; the table goes to stdout at the end
    from testing.local_s3 import LocalS3Server

    server = LocalS3Server().start()
    # every side lists: moto would scan the whole bucket (100k keys at 100 tables) for each LIST
    undo = install_indexed_listing()
    server.use_in_environment()
    try:
        document = run(args, server)
    except Failure as failure:
        os.dup2(saved_stdout, 1)
        print(f"many_tables FAILED: {failure}", file=sys.stderr)
        return 1
    finally:
        undo()
        server.stop()
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "many_tables.json").write_text(json.dumps(document, indent=2) + "\n")
    text = markdown(document)
    (args.output / "many_tables.md").write_text(text)
    plot(document, args.output)
    sys.stdout.flush()
    os.dup2(saved_stdout, 1)
    print(text)
    return 0


def run(args: argparse.Namespace, server: Any) -> dict[str, Any]:
    from core.s3 import s3_client
    from core.session import build_spark_session
    from core.tables import SNAPSHOT_PARTITIONS
    from tests.support.helpers import deliver_inventory, ingest_inventory  # as the tests deliver and ingest

    started_at = datetime.now(timezone.utc)
    before = machine()
    s3 = s3_client()
    for bucket in (BUCKET, META):
        s3.create_bucket(Bucket=bucket)
    log.info("building %d tables of %d files", args.tables, args.files)
    garbage, kinds = build_tables(s3, server.endpoint, args.tables, args.files, args.unchanged_tables)
    check_indexed_listing(BUCKET, ["", "warehouse/", "warehouse/t000/", "warehouse/t000/_delta_log/"])
    work = Path(tempfile.mkdtemp(prefix="many-tables-"))
    events = work / "events"
    events.mkdir()
    registry = work / "tables.yaml"
    registry.write_text(
        "tables:\n"
        + "".join(
            f"  - {{name: {n}, path: 's3://{BUCKET}/warehouse/{n}', owner: team-{i % 7}}}\n"
            for i, n in enumerate(garbage)
        )
    )
    started = time.monotonic()
    spark = build_spark_session(
        "inventory-vacuum benchmark: many tables",
        {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": events.as_uri(),
            "spark.eventLog.rolling.enabled": "false",
            "spark.eventLog.compress": "false",
            # the event log's listener keeps up with hundreds of jobs a minute only with room
            "spark.driver.memory": "4g",
            **dict(setting.split("=", 1) for setting in args.conf),
        },
    )
    spark_start = time.monotonic() - started
    inventory = f"s3://{META}/tables/inventory"
    deliver_inventory(s3, BUCKET, META)
    started = time.monotonic()
    ingest_inventory(BUCKET, META, inventory)
    ingest_seconds = time.monotonic() - started
    objects = spark.read.format("delta").load(inventory).count()
    runs = []
    profile = None
    peers = None
    # the local S3 server runs in this process: the objects it stores (millions at 500 tables) are
    # the harness's, frozen out of Python's cyclic collector, so that the collections a vacuum run
    # makes cost what they cost in a process of its own (collected first: nothing of the set-up's
    # garbage, its JVM objects with it, is kept frozen)
    gc.collect()
    gc.freeze()
    try:
        log.info("warm-up: one table, not recorded")
        first = next(iter(garbage))
        warm_registry = work / "warm.yaml"
        warm_registry.write_text(
            f"tables:\n  - {{name: {first}, path: 's3://{BUCKET}/warehouse/{first}', owner: bench}}\n"
        )
        _, _, warm_up = vacuum_run(spark, inventory, str(warm_registry), 1, events)
        settings = [(p, "sized") for p in (int(x) for x in args.parallel.split(","))]
        if args.compare_default:
            settings.append((settings[len(settings) // 2][0], "50 (Delta's default)"))
        for parallel, partitions in settings:
            if partitions != "sized":
                spark.conf.set(SNAPSHOT_PARTITIONS, "50")  # set by the user: the job leaves it alone
            log.info(
                "vacuum dry run over %d tables, --parallel %d, snapshotPartitions %s",
                args.tables,
                parallel,
                partitions,
            )
            seconds, report, figures = vacuum_run(spark, inventory, str(registry), parallel, events)
            spark.conf.unset(SNAPSHOT_PARTITIONS)
            check_plans(report, work / f"candidates-{parallel}.parquet", garbage)
            runs.append(
                {
                    "parallel": parallel,
                    "snapshot_partitions": partitions,
                    "seconds": round(seconds, 2),
                    "seconds_per_table": round(seconds / args.tables, 3),
                    "table_seconds_median": sorted(t["seconds"] for t in report["tables"])[args.tables // 2],
                    # tables whose plan was known empty without Delta's dry run
                    "delta_plan_skipped": sum(1 for t in report["tables"] if t.get("delta_plan_skipped")),
                    "events": figures,
                }
            )
            log.info(
                "%s",
                json.dumps(runs[-1] | {"events": {k: v for k, v in figures.items() if k != "top_stages"}}),
            )
        if args.profile:
            profile = profiled_run(spark, inventory, str(registry), runs[0]["parallel"], events, args.tables)
        if args.peers:
            peers = peer_comparison(args, spark, inventory, server.endpoint, runs[0], work, garbage, kinds)
    finally:
        gc.unfreeze()
        spark.stop()
    return {
        **run_header("many_tables", started_at, before),
        "tables": args.tables,
        "unchanged_tables": args.unchanged_tables,
        "files_per_table": args.files,
        "spark_start_seconds": round(spark_start, 2),
        "inventory": {"objects": objects, "ingest_seconds": round(ingest_seconds, 2)},
        "conf": args.conf,
        # a fresh JVM's first table: every class it needs is compiled
        "warm_up_classes_compiled": warm_up["classes_compiled_per_table"],
        "runs": runs,
        "driver_profile": profile,
        "peers": peers,
    }


def peer_comparison(
    args: argparse.Namespace,
    spark: Any,
    inventory: str,
    endpoint: str,
    ours: dict[str, Any],
    work: Path,
    garbage: dict[str, set[str]],
    kinds: dict[str, dict[str, str]],
) -> dict[str, Any]:
    """The same tables by each peer's loop (``fleet_peers``), on as many threads as our first
    run's --parallel, each side's candidates compared with the garbage as built."""
    from benchmarks.fleet_peers import differences, run_peers

    ours_planned = planned_files(work / f"candidates-{ours['parallel']}.parquet")
    sides = run_peers(
        spark,
        inventory=inventory,
        bucket=BUCKET,
        roots={name: f"warehouse/{name}" for name in garbage},
        storage_options=storage_options(endpoint),
        threads=ours["parallel"],
        listing_tables=args.listing_tables,
        inventory_tables=args.inventory_loop_tables,
    )
    result: dict[str, Any] = {
        "ours": {
            "label": f"ours: `vacuum --dry-run --parallel {ours['parallel']}`",
            "tables": args.tables,
            "seconds": ours["seconds"],
            "seconds_per_table": ours["seconds_per_table"],
            "differences": differences({n: ours_planned.get(n, set()) for n in garbage}, garbage, kinds),
        }
    }
    for side, figures in sides.items():
        planned = {n: set(paths) for n, paths in figures.pop("candidates").items()}
        result[side] = figures | {"differences": differences(planned, garbage, kinds)}
    return result


def profiled_run(
    spark: Any, inventory: str, registry: str, parallel: int, events: Path, tables: int
) -> dict[str, Any]:
    """One more run under Java Flight Recorder: where the driver JVM's CPU went, as shares."""
    from benchmarks.driver_profile import profile_shares, record

    log.info("one more run at --parallel %d under Java Flight Recorder", parallel)
    (seconds, _, _), recording = record(
        spark, lambda: vacuum_run(spark, inventory, registry, parallel, events)
    )
    shares, top = profile_shares(recording)
    shutil.rmtree(recording.parent, ignore_errors=True)
    return {
        "parallel": parallel,
        "seconds_per_table": round(seconds / tables, 3),
        "shares": shares,
        "top_frames": top,
    }


if __name__ == "__main__":
    sys.exit(main())
