"""One table, one fresh process: what a per-table vacuum job costs end to end, beside its peers.

One synthetic table (``synthetic_table.py``) in the local S3, its bucket's inventory ingested once
(in no figure); then, the sides in turn, each a FRESH process timed from its start to its exit:
ours (``python -m jobs.cli vacuum ... --dry-run --json``), delta-rs (``vacuum(dry_run=True,
full=True)``), Delta's listing ``VACUUM ... DRY RUN`` (on ``core.session.build_spark_session``).
The Spark sides write Spark's event log (``PYSPARK_SUBMIT_ARGS="--conf spark.eventLog..."``), from
which ours is broken down. Every side runs at ``RETAIN 0 HOURS``; the candidate sets are compared.

    .venv/bin/python -m benchmarks.one_table                         # 3,000 files, 3 rounds
    .venv/bin/python -m benchmarks.one_table --files 500 --rounds 1  # a smoke
    .venv/bin/python -m benchmarks.one_table --bucket-objects 10000000 --rounds 1  # in a big bucket
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import suppress
from datetime import datetime, timedelta, timezone
from itertools import chain, combinations
from pathlib import Path
from typing import Any

from benchmarks.many_tables import _step_name, parse_event_log
from benchmarks.report import write_results
from benchmarks.s3_server import BenchmarkS3Server, check_indexed_listing, install_indexed_listing
from benchmarks.synthetic_table import GARBAGE, PARTITION_DAYS, Shares, TableBuilder
from benchmarks.vacuum_at_scale import _relative, machine, run_header

log = logging.getLogger("benchmarks.one_table")

BUCKET, META, ROOT, NAME = "bench-one-lake", "bench-one-meta", "warehouse/big", "big"
RESULTS = Path(__file__).parent / "results"
REPO = Path(__file__).resolve().parent.parent
SIDES = {
    "ours": "ours: `jobs.cli vacuum --dry-run` (inventory mode)",
    "ours-no-archive": "ours, without the JVM's class-data archive (`INVENTORY_VACUUM_CLASS_ARCHIVE=0`)",
    "ours-full-jit": "ours, with the JVM's optimising compiler too (`INVENTORY_VACUUM_QUICK_JIT=0`)",
    "delta-rs": "delta-rs `vacuum(dry_run=True, full=True)`",
    "delta-sql": "Delta's listing `VACUUM ... DRY RUN`",
}
REASONS = {  # why a side may name a file of this kind and another not
    "orphan": "in no commit: aged by the object's LastModified, which moto sets when it is written",
    "tombstoned_recent": "removed 1 day ago: garbage only at a retention under 24 h", "live": "a live file",
}  # fmt: skip
DELTA_RS = """
import json, sys
from deltalake import DeltaTable
uri, options, hours, out = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
files = DeltaTable(uri, storage_options=options).vacuum(
    retention_hours=hours, dry_run=True, enforce_retention_duration=False, full=True)
open(out, "w").write(json.dumps(files))
"""
DELTA_SQL = """
import json, sys
from core.session import build_spark_session
uri, hours, out = sys.argv[1], sys.argv[2], sys.argv[3]
spark = build_spark_session("VACUUM", {"spark.databricks.delta.retentionDurationCheck.enabled": "false"})
rows = spark.sql(f"VACUUM delta.`{uri}` RETAIN {hours} HOURS DRY RUN").collect()
open(out, "w").write(json.dumps([r["path"] for r in rows]))
"""
TIMES = ("seconds", "jvm_after_exit_seconds", "to_app_start_seconds")  # a side's medians
RETENTION = (
    "Every side runs at RETAIN {hours} HOURS with its retention check off, as vacuum_at_scale and many_tables "
    "do: the synthetic log is backdated, but moto sets an object's LastModified (what delta-rs and Delta's "
    "listing read, and what the inventory copies) when it is written: at Delta's 7 days every orphan would "
    "look new to every side."
)


class Failure(Exception):
    """A side's process exited non-zero."""


def _live_processes(group: int) -> int:
    """Processes of process group ``group`` still running, zombies aside (Linux's /proc)."""
    alive = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with suppress(OSError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            alive += int(fields[2]) == group and fields[0] != "Z"
    return alive


def other_objects(count: int) -> Iterator[dict[str, Any]]:
    """``count`` inventory rows of objects of the table's bucket outside the table (under
    ``data/``, 1,000 partitions), written over 2025 at times spread to the millisecond, as a
    lake's are: in the delivery only, never in S3."""
    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    for n in range(count):
        when = start + timedelta(milliseconds=(n * 7_919_333) % 31_536_000_000)
        yield {"bucket": BUCKET, "key": f"data/part={n % 1000:04d}/file-{n:09d}.parquet", "version_id": None,
               "is_latest": None, "is_delete_marker": None, "size": 1000 + n % 977, "last_modified_date": when,
               "e_tag": f"{n:032x}", "storage_class": "STANDARD", "is_multipart_uploaded": False,
               "checksum_algorithm": None}  # fmt: skip


def timed_process(command: list[str], env: dict[str, str], output: Path) -> dict[str, int]:
    """Run ``command`` in a new process group: epoch ms of its start, of its exit, and of when
    its group's last process (a JVM outlives its Python) was gone; only then does the next start."""
    with output.open("w") as out, output.with_suffix(".err").open("w") as err:
        started = time.time()
        process = subprocess.Popen(command, env=env, cwd=REPO, stdout=out, stderr=err, start_new_session=True)
        code = process.wait()
        exited = time.time()
        while Path("/proc").is_dir() and _live_processes(process.pid) and time.time() < exited + 120:
            time.sleep(0.05)
    if code != 0:
        raise Failure(f"{' '.join(command[:4])} ... exited {code}; see {output.with_suffix('.err')}")
    ms = {"start_ms": started, "exit_ms": exited, "gone_ms": time.time()}
    return {key: int(value * 1000) for key, value in ms.items()}


NO_JOB_GROUP = "(no job group)"


def without_checkout(text: str) -> str:
    """A call site in a job's name (its first stage's, ``collect at .../vacuum/plan.py:395``) relative
    to the repository (``vacuum/plan.py:395``), not to where this machine keeps it."""
    return text.replace(f"{Path(__file__).resolve().parent.parent}/", "")


def read_event_log(directory: Path) -> dict[str, Any]:
    """The application's start and end, every finished job (start, end, group, step), the jobs
    that never ended, the jars."""
    import pyspark

    result: dict[str, Any] = {
        "app_start_ms": None,
        "app_end_ms": None,
        "jobs": {},
        "jars": [],
        "class_path_jars": [],
        "packages": None,
    }
    for path in (p for p in directory.rglob("*") if p.is_file()):
        for line in path.open(encoding="utf-8"):
            event = json.loads(line)
            kind = event.get("Event")
            if kind == "SparkListenerApplicationStart":
                result["app_start_ms"] = event["Timestamp"]
            elif kind == "SparkListenerApplicationEnd":
                result["app_end_ms"] = event["Timestamp"]
            elif kind == "SparkListenerEnvironmentUpdate":
                settings = dict(event.get("Spark Properties") or {})
                result["packages"] = settings.get("spark.jars.packages")  # resolved by Ivy when set
                result["jars"] = [j.rsplit("/", 1)[-1] for j in (settings.get("spark.jars") or "").split(",") if j]  # fmt: skip
                spark_jars = str(Path(pyspark.__file__).parent / "jars")
                result["class_path_jars"] = [
                    path.rsplit("/", 1)[-1]
                    for path, source in (event.get("Classpath Entries") or {}).items()
                    if source == "System Classpath"
                    and path.endswith(".jar")
                    and not path.startswith(spark_jars)
                ]
            elif kind == "SparkListenerJobStart":
                properties, stages = event.get("Properties") or {}, event.get("Stage Infos") or [{}]
                described = properties.get("spark.job.description")
                result["jobs"][event["Job ID"]] = {
                    "start": event["Submission Time"],
                    "group": properties.get("spark.jobGroup.id") or NO_JOB_GROUP,
                    # an undescribed job by its first stage: (save at ...), (getHistory at ...)
                    "step": without_checkout(
                        _step_name(described) if described else f"({stages[0].get('Stage Name', '?')})"
                    ),
                }
            elif kind == "SparkListenerJobEnd" and event["Job ID"] in result["jobs"]:
                result["jobs"][event["Job ID"]]["end"] = event["Completion Time"]
    result["unfinished_jobs"] = [job for job in result["jobs"].values() if "end" not in job]
    result["jobs"] = [job for job in result["jobs"].values() if "end" in job]
    return result


def union_ms(intervals: list[tuple[int, int]]) -> int:
    """Milliseconds covered by at least one of the intervals."""
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total, reach = total + end - start, end
        elif end > reach:
            total, reach = total + end - reach, end
    return total


def breakdown(timing: dict[str, int], events: dict[str, Any]) -> list[dict[str, Any]]:
    """Where one process's wall time went, in items that add up to it (its start to its exit)."""
    start, exit_ms, app_start, app_end = (
        timing["start_ms"], timing["exit_ms"], events["app_start_ms"], events["app_end_ms"],
    )  # fmt: skip
    jobs = [(job["start"], job["end"]) for job in events["jobs"]]
    first, last, in_jobs = min(s for s, _ in jobs), max(e for _, e in jobs), union_ms(jobs)
    items = [
        ("process start → Spark application start (Python imports, JVM launch, jar resolution)", app_start - start),
        ("application start → first Spark job (SparkContext, session, driver work)", first - app_start),
        ("in Spark jobs (their union; by step below)", in_jobs),
        ("driver between Spark jobs", last - first - in_jobs),
    ]  # fmt: skip
    if app_end is not None and app_end <= exit_ms:
        items += [("last job → application end", app_end - last), ("application end → exit", exit_ms - app_end)]  # fmt: skip
    else:  # the JVM's shutdown hook ends the application after Python has exited
        items += [("last job → process exit (report, Python's exit)", exit_ms - last)]
    return [{"item": item, "seconds": round(ms / 1000, 3)} for item, ms in items]


def differences(sets: dict[str, set[str]], category: dict[str, str]) -> list[dict[str, Any]]:
    """For every ordered pair of sides: the files one names and the other does not, by kind."""
    found = []
    for a, b in combinations(sets, 2):
        for side, other in ((a, b), (b, a)):
            only = sets[side] - sets[other]
            if only:
                kinds = Counter(category.get(path, "not a table file") for path in only)
                found.append({"only_in": side, "not_in": other, "files": len(only), "by_kind": dict(kinds),
                              "examples": sorted(only)[:2]})  # fmt: skip
    return found


def markdown(document: dict[str, Any]) -> str:
    """The result document as Markdown: the sides, their ratio to ours, the candidates, ours broken down."""
    before, after, table, sides = (document[k] for k in ("machine_before", "machine_after", "table", "sides"))
    ours = sides["ours"]["median_seconds"]
    run = sides["ours"]["median_round"]
    lines = [
        f"# One table, one fresh process: {table['files']:,} files, dry runs",
        "",
        f"`{document['command'].strip()}` at {document['code']}, started {document['started_at'][:19]}Z. Machine: {before['cpus']} "
        f"CPUs, load average {before['load_average_1_5_15'][0]} before and {after['load_average_1_5_15'][0]} "
        f"after; {before['platform']}; " + ", ".join(f"{k} {v}" for k, v in before["versions"].items()) + ".",
        "",
        f"Table `{table['uri']}`: {table['partitions']} hourly partitions; "
        + ", ".join(f"{k} {v:,}" for k, v in sorted(table["categories"].items()))
        + f"; {table['garbage']:,} garbage files. The bucket's inventory ({document['inventory_objects']:,} "
        f"objects{_others(document.get('bucket_objects', 0))}) was ingested once beforehand by `python -m jobs.cli ingest` in a process of its own "
        f"({document['ingest_seconds']:.1f} s, in no figure). {document['retention']}",
        "",
        f"Each side is a fresh process, timed from its start to its exit; {document['rounds']} round(s), the sides "
        "in turn; the median. *JVM after exit*: how long the job's last process (Spark's JVM, ending the "
        "application) ran on after Python's exit (not in the time). S3 requests: the median round's. "
        "The Spark sides map the JVM's classes from the archive `fetch-jars` made "
        f"(`{Path(document['class_archive']).name}`), but for the side that turns it off. Ours compiles with the "
        "JVM's first compiler only (C1), as the command does for one table, but for the side that turns that "
        "off; Delta's listing side keeps the JVM's default compilers.",
        "",
        "| side | median s | ÷ ours | each round s | to Spark app start s | JVM after exit s "
        "| candidates | = the garbage | S3 requests: table / other buckets |",
        "|---|---:|---:|---|---:|---:|---:|---|---|",
    ]
    for name, side in sides.items():
        to_app, middle = side.get("median_to_app_start_seconds"), side["median_round"]
        lines.append(
            f"| {SIDES[name]} | {side['median_seconds']:.1f} | {side['median_seconds'] / ours:.2f}× | "
            + ", ".join(f"{s:.1f}" for s in side["seconds_each"])
            + f" | {'–' if to_app is None else f'{to_app:.1f}'} | {side['median_jvm_after_exit_seconds']:.1f} | "
            f"{middle['candidates']:,} | {('yes, by count' if name.startswith('ours-') else 'yes') if side['matches_garbage'] else 'no'} | "
            f"{middle['table_requests']:,} / {middle['other_requests']:,} |"
        )
    lines += ["", "Candidate sets: " + ("the same on every side." if not document["differences"] else "")]
    for diff in document["differences"]:
        kinds = "; ".join(f"{n:,} {k} ({REASONS.get(k, k)})" for k, n in diff["by_kind"].items())
        lines.append(f"- {diff['files']:,} named by {diff['only_in']}, not by {diff['not_in']}: {kinds}.")
    lines += [
        "",
        f"## Ours, where the time goes (round {run['round']}, the median: {run['seconds']:.1f} s; Spark's event log)",
        "",
        "| item | s | share |",
        "|---|---:|---:|",
        *(f"| {i['item']} | {i['seconds']:.2f} | {i['seconds'] / run['seconds']:.0%} |" for i in run["breakdown"]),
        "",
        f"Spark jobs of the table's group (`vacuum {NAME}`), by the step the tool names:",
        "",
        "| step | jobs | job s |",
        "|---|---:|---:|",
        *(f"| {s['step']} | {s['jobs']} | {s['seconds']:.2f} |" for s in run["steps"]),
    ]  # fmt: skip
    lines += ["", "Spark jobs outside it:", "", "| group: step | jobs | job s |", "|---|---:|---:|"]
    lines += [f"| {s['step']} | {s['jobs']} | {s['seconds']:.2f} |" for s in run["other_jobs"]]
    on_class_path = run.get("class_path_jars") or []
    jars = run["jars"] or on_class_path
    key = ", ".join(jar for jar in jars if "delta-spark" in jar or "hadoop-aws" in jar)
    if run["jars_packages"]:
        how = f"Ivy resolved `spark.jars.packages` ({run['jars_packages']})"
    elif run["jars"]:
        how = "no `spark.jars.packages`: given as `spark.jars`"
    else:
        how = "no `spark.jars.packages`: on the JVM's class path after Spark's own (`SPARK_DIST_CLASSPATH`)"
    lines.append(f"\nJars (the event log's settings and class path): {len(jars)} jars ({key}, ...), {how}.\n")
    return "\n".join(lines)


def _others(count: int) -> str:
    return (
        f", {count:,} of them other objects of the bucket, outside the table, in the delivery only"
        if count
        else ""
    )


def our_details(timing: dict[str, int], directory: Path) -> dict[str, Any]:
    """Ours, one round: the breakdown, the table's jobs by step (``parse_event_log``), the others."""
    events = read_event_log(directory)
    figures = parse_event_log(directory, 0, 2**62)
    other: dict[str, list[float]] = {}
    for job in events["jobs"]:
        if not job["group"].startswith("vacuum "):
            other.setdefault(f"{job['group']}: {job['step']}", []).append((job["end"] - job["start"]) / 1000)
    return {
        "breakdown": breakdown(timing, events),
        "to_app_start_seconds": round((events["app_start_ms"] - timing["start_ms"]) / 1000, 3),
        "steps": [{"step": s["step"], "jobs": int(s["jobs_per_table"]), "seconds": s["seconds_per_table"]}
                  for s in figures["steps"]],
        "other_jobs": [{"step": k, "jobs": len(v), "seconds": round(sum(v), 3)} for k, v in sorted(other.items())],
        "top_stages": figures["top_stages"], "jars": events["jars"], "class_path_jars": events.get("class_path_jars", []), "jars_packages": events["packages"],
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser("python -m benchmarks.one_table", description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=3000, help="data files of the table (default 3000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every side (default 3)")
    parser.add_argument("--retain-hours", type=int, default=0, help="every side's retention (default 0)")
    parser.add_argument(
        "--bucket-objects",
        type=int,
        default=0,
        help="rows of other objects of the table's bucket, outside the table, added to its delivery "
        "(none of them written to S3): a per-table job in a big bucket (default 0)",
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    server = BenchmarkS3Server()
    server.start()
    undo = install_indexed_listing()
    server.use_in_environment()
    try:
        document = run(args, server)
    except Failure as failure:
        print(f"one_table FAILED: {failure}", file=sys.stderr)
        return 1
    finally:
        undo()
        server.stop()
    text = markdown(document)
    write_results(args.output, "one_table", document, text)
    print(text)
    return 0


def run(args: argparse.Namespace, server: BenchmarkS3Server) -> dict[str, Any]:
    import pyarrow.parquet as pq
    import pyspark

    from core import class_archive
    from core.jar_cache import cached_jars
    from core.paths import StorageLocation
    from core.s3 import s3_client
    from core.session import QUICK_JIT_VARIABLE, jvm_packages
    from inventory.delivery_writer import inventory_rows, write_delivery

    started_at, before = datetime.now(timezone.utc), machine()
    s3 = s3_client()
    for bucket in (BUCKET, META):
        s3.create_bucket(Bucket=bucket)
    server.watch_table(BUCKET, ROOT)
    storage = {
        "AWS_ENDPOINT_URL": server.endpoint, "AWS_ALLOW_HTTP": "true", "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
        **{k: os.environ[k] for k in ("AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")},
    }  # fmt: skip
    table = TableBuilder(s3, BUCKET, ROOT, args.files, Shares(fresh=0.0), storage).build()
    check_indexed_listing(BUCKET, ["", f"{ROOT}/", f"{ROOT}/_delta_log/", ROOT])
    garbage, category = table.paths(*GARBAGE), {f.path: f.category for f in table.files}
    work = Path(tempfile.mkdtemp(prefix="one-table-"))
    registry = work / "tables.yaml"
    registry.write_text(f"tables:\n  - {{name: {NAME}, path: '{table.uri}', owner: bench}}\n")
    inventory = f"s3://{META}/tables/inventory"
    rows = chain(inventory_rows(s3, BUCKET), other_objects(args.bucket_objects))
    objects = write_delivery(s3, BUCKET, rows, StorageLocation.parse(f"s3://{META}/reports"), "daily").objects
    env, cli = dict(os.environ), [sys.executable, "-m", "jobs.cli"]
    log.info("ingesting the inventory (%d objects) in a process of its own", objects)
    ingest = timed_process(
        [*cli, "ingest", "--destination", f"s3://{META}/reports", "--source-bucket", BUCKET, "--config-id",
         "daily", "--inventory-table", inventory, "--tables", str(registry), "--json"],
        env, work / "ingest.out",
    )  # fmt: skip
    vacuum = [*cli, "vacuum", "--inventory-table", inventory, "--tables", str(registry), "--table", NAME,
              "--dry-run", "--json", "--retain-hours", str(args.retain_hours), "--allow-unsafe-retention"]  # fmt: skip
    hours = str(args.retain_hours)

    def command(side: str, tag: str) -> tuple[list[str], dict[str, str]]:
        out = str(work / f"{tag}.json")
        if side == "delta-rs":
            return [sys.executable, "-c", DELTA_RS, table.uri, json.dumps(storage), hours, out], env
        events = work / f"events-{tag}"
        events.mkdir()
        conf = {"enabled": "true", "dir": events.as_uri(), "compress": "false", "rolling.enabled": "false"}
        child = {**env, "PYSPARK_SUBMIT_ARGS": " ".join(f"--conf spark.eventLog.{k}={v}" for k, v in conf.items())
                 + " pyspark-shell"}  # fmt: skip
        child.pop(QUICK_JIT_VARIABLE, None)  # the command's own choice, but for the side that sets it
        if side == "ours":
            return vacuum, child
        if side == "ours-no-archive":
            return vacuum, {**child, class_archive.SWITCH_VARIABLE: "0"}
        if side == "ours-full-jit":
            return vacuum, {**child, QUICK_JIT_VARIABLE: "0"}
        child["INVENTORY_VACUUM_JVM_LOG"] = str(work / f"{tag}.log")  # the JVM's output, as the CLI does
        return [sys.executable, "-c", DELTA_SQL, "s3a://" + table.uri.split("://", 1)[1], hours, out], child

    jars = cached_jars(jvm_packages(), pyspark.__version__)
    archive = class_archive.start_options(jars, pyspark.__version__) if jars else []
    if not archive:
        raise Failure("no class-data archive of the cached jars: run `inventory-vacuum fetch-jars` first")
    log.info("ours once with --candidates: its candidate set (not timed; warms the file cache)")
    timed_process([*vacuum, "--candidates", str(work / "ours.parquet")], env, work / "ours-set.out")
    sets = {"ours": {_relative(p, table) for p in pq.read_table(work / "ours.parquet")["path"].to_pylist()}}
    rounds: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    for number in range(1, args.rounds + 1):
        for side in list(SIDES)[number - 1 :] + list(SIDES)[: number - 1]:  # each round starts elsewhere
            tag = f"{side}-{number}"
            server.reset_counts()
            timing = timed_process(*command(side, tag), work / f"{tag}.out")
            counts = server.area_counts()
            record: dict[str, Any] = {
                "round": number,
                "seconds": round((timing["exit_ms"] - timing["start_ms"]) / 1000, 3),
                "jvm_after_exit_seconds": round((timing["gone_ms"] - timing["exit_ms"]) / 1000, 3),
                "table_requests": sum(c for (b, _, _), c in counts.items() if b == BUCKET),
                "other_requests": sum(c for (b, _, _), c in counts.items() if b != BUCKET),
            }
            if side.startswith("ours"):
                report = json.loads((work / f"{tag}.out").read_text())
                record["candidates"] = report["tables"][0]["planned_files"]
                record["matches_garbage"] = record["candidates"] == len(garbage)  # the set: sets["ours"]
                record |= our_details(timing, work / f"events-{tag}")
            else:
                sets[side] = {_relative(p, table) for p in json.loads((work / f"{tag}.json").read_text())}
                record |= {"candidates": len(sets[side]), "matches_garbage": sets[side] == garbage}
                if side == "delta-sql":
                    app_start = read_event_log(work / f"events-{tag}")["app_start_ms"]
                    record["to_app_start_seconds"] = round((app_start - timing["start_ms"]) / 1000, 3)
            rounds[side].append(record)
            log.info(
                "round %d %s: %.1f s, %d candidates", number, side, record["seconds"], record["candidates"]
            )
    sides: dict[str, dict[str, Any]] = {}
    for side, records in rounds.items():
        middle = sorted(records, key=lambda r: r["seconds"])[(len(records) - 1) // 2]  # of 2: the faster
        sides[side] = {f"median_{key}": round(statistics.median(r[key] for r in records), 3) for key in TIMES if key in middle}  # fmt: skip
        sides[side] |= {"seconds_each": [r["seconds"] for r in records], "rounds": records, "median_round": middle,
                        "matches_garbage": sets["ours" if side.startswith("ours") else side] == garbage
                        and all(r.get("matches_garbage", 1) for r in records)}  # fmt: skip
    return {
        **run_header("one_table", started_at, before),
        "rounds": args.rounds,
        "table": {"uri": table.uri, "files": args.files, "partitions": PARTITION_DAYS * 24,
                  "categories": table.counts(), "garbage": len(garbage)},
        "inventory_objects": objects,
        "bucket_objects": args.bucket_objects,
        "ingest_seconds": round((ingest["exit_ms"] - ingest["start_ms"]) / 1000, 2),
        "retention": RETENTION.format(hours=args.retain_hours),
        "class_archive": archive[0].split("=", 1)[1],
        "differences": differences(sets, category),
        "sides": sides,
    }  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
