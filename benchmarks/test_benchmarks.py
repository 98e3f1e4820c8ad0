"""Fast checks of the benchmark's own parts (no Spark, no timing): prices, the latency model, the
indexed listing against moto's, putting a table back, and the Markdown.

They run with the suite on the default Spark line (pyproject.toml's testpaths), in seconds;
alone: ``.venv/bin/python -m pytest benchmarks/test_benchmarks.py``.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from benchmarks.costs import LatencyModel, price_per_1000, request_cost
from benchmarks.driver_profile import rule_times_of, rules_markdown
from benchmarks.report import markdown
from benchmarks.s3_server import (
    BenchmarkS3Server,
    check_indexed_listing,
    install_indexed_listing,
    object_names,
    put_objects,
)
from benchmarks.synthetic_table import GARBAGE, LIVE, PLACEHOLDER, Shares, SyntheticTable, plan_files
from core.s3 import wait_for_client_model

pytestmark = pytest.mark.spark_independent


def test_prices_follow_the_published_tiers() -> None:
    assert price_per_1000("ListObjectsV2") == 0.005
    assert price_per_1000("DeleteObjects") == 0.005  # a POST
    assert price_per_1000("HeadObject") == 0.0004
    assert price_per_1000("GetBucketVersioning") == 0.0004
    assert price_per_1000("DeleteObject") == 0.0
    assert request_cost({"ListObjectsV2": 2000, "GetObject": 1000, "DeleteObject": 5}) == pytest.approx(
        0.0104
    )


def test_latency_model_counts_round_trips_per_concurrency() -> None:
    model = LatencyModel(latency_seconds=0.02, slots=2)
    # 3 data LISTs from Spark tasks on 2 slots: 2 rounds; the flat listing: 3 rounds
    assert model.network_seconds("spark", "list", {("data", "ListObjectsV2"): 3}) == pytest.approx(0.04)
    assert model.network_seconds("spark", "flat", {("data", "ListObjectsV2"): 3}) == pytest.approx(0.06)
    # delta-rs: 21 DeleteObjects at 20 in flight: 2 rounds; its log reads one at a time
    assert model.network_seconds("delta-rs", "full", {("data", "DeleteObjects"): 21}) == pytest.approx(0.04)
    assert model.network_seconds("delta-rs", "full", {("log", "GetObject"): 5}) == pytest.approx(0.1)
    # ours: 31 DeleteObjects from 2 tasks, 4 in flight in each: 4 rounds; Delta's DeleteObject: 2 a round
    assert model.network_seconds("spark", "inventory", {("data", "DeleteObjects"): 31}) == pytest.approx(0.08)
    assert model.network_seconds("spark", "inventory", {("data", "DeleteObject"): 31}) == pytest.approx(0.32)


def test_shares_sum_to_the_table_size() -> None:
    for files in (720, 1441, 100_000):
        counts = Shares().counts(files)
        assert sum(counts.values()) == files and counts[LIVE] > 0


@pytest.fixture(scope="module")
def server() -> Iterator[BenchmarkS3Server]:
    import os

    saved = {k: os.environ.get(k) for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    server = BenchmarkS3Server()
    server.start()
    server.use_in_environment()
    undo = install_indexed_listing()
    yield server
    undo()
    server.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def test_indexed_listing_answers_as_moto_does(server: BenchmarkS3Server) -> None:
    wait_for_client_model()  # a Spark session of the same process may be building its first client
    s3 = boto3.client("s3", endpoint_url=server.endpoint)
    s3.create_bucket(Bucket="bench-index-check")
    rng = random.Random(3)
    parts = ["a", "a-b", "a/b", "b", "dt=1", "dt=1-x", "_delta_log", "x.y", "é"]
    keys = {
        "t/" + "/".join(rng.choice(parts) for _ in range(rng.randint(1, 4))) + str(i % 5) for i in range(3000)
    }
    put_objects("bench-index-check", ((k, b"x") for k in keys))
    check_indexed_listing("bench-index-check", ["", "t/", "t/a", "t/a/", "t/dt=1", "t/_delta_log/", "zz"], 50)
    s3.delete_object(Bucket="bench-index-check", Key=sorted(keys)[10])
    s3.put_object(Bucket="bench-index-check", Key="t/a/new", Body=b"y")
    check_indexed_listing("bench-index-check", ["", "t/a/"], 50)
    listed = [
        o["Key"]
        for page in s3.get_paginator("list_objects_v2").paginate(
            Bucket="bench-index-check", PaginationConfig={"PageSize": 5000}
        )
        for o in page.get("Contents", [])
    ]
    assert listed == sorted(object_names("bench-index-check"))


def test_list_pages_are_capped_and_counted_by_area(server: BenchmarkS3Server) -> None:
    wait_for_client_model()  # a Spark session of the same process may be building its first client
    s3 = boto3.client("s3", endpoint_url=server.endpoint)
    s3.create_bucket(Bucket="bench-area-check")
    server.watch_table("bench-area-check", "w/t")
    put_objects("bench-area-check", ((f"w/t/k{i:04d}", b"x") for i in range(1500)))
    server.reset_counts()
    page = s3.list_objects_v2(Bucket="bench-area-check", Prefix="w/t/", MaxKeys=5000)
    s3.list_objects_v2(Bucket="bench-area-check", Prefix="w/t/_delta_log/")
    s3.list_objects_v2(Bucket="bench-area-check", Prefix="w/t/dt=1/_delta_log/", MaxKeys=1)
    assert page["KeyCount"] == 1000 and page["IsTruncated"]
    assert server.area_counts() == Counter(
        {
            ("bench-area-check", "data", "ListObjectsV2"): 1,
            ("bench-area-check", "log", "ListObjectsV2"): 1,
            ("bench-area-check", "probe", "ListObjectsV2"): 1,
        }
    )


def test_restore_puts_the_table_back(server: BenchmarkS3Server) -> None:
    from datetime import datetime, timezone

    wait_for_client_model()  # a Spark session of the same process may be building its first client
    s3 = boto3.client("s3", endpoint_url=server.endpoint)
    s3.create_bucket(Bucket="bench-restore-check")
    table = SyntheticTable(
        "bench-restore-check", "w/t", plan_files(1440, Shares(), datetime.now(timezone.utc))
    )
    put_objects(table.bucket, ((f"w/t/{f.path}", PLACEHOLDER) for f in table.files))
    put_objects(table.bucket, [("w/t/_delta_log/00000000000000000000.json", b"{}\n")])
    # a checkpoint big enough for a multipart upload: its ETag is not its body's MD5
    checkpoint = "w/t/_delta_log/00000000000000000000.checkpoint.parquet"
    upload = s3.create_multipart_upload(Bucket=table.bucket, Key=checkpoint)["UploadId"]
    parts = [
        {
            "PartNumber": n,
            "ETag": s3.upload_part(
                Bucket=table.bucket, Key=checkpoint, UploadId=upload, PartNumber=n, Body=body
            )["ETag"],
        }
        for n, body in ((1, b"p" * (5 << 20)), (2, b"q"))
    ]
    s3.complete_multipart_upload(
        Bucket=table.bucket, Key=checkpoint, UploadId=upload, MultipartUpload={"Parts": parts}
    )
    table.remember()
    before = object_names(table.bucket, "w/t/")
    assert before[checkpoint].endswith('-2"')
    assert table.restore() == {"deleted": 0, "rewritten": 0, "examples": []}  # an unchanged table
    garbage = sorted(table.paths(*GARBAGE))
    s3.delete_objects(Bucket=table.bucket, Delete={"Objects": [{"Key": f"w/t/{p}"} for p in garbage[:300]]})
    s3.put_object(Bucket=table.bucket, Key="w/t/_delta_log/00000000000000000001.json", Body=b"{}\n")
    s3.put_object(Bucket=table.bucket, Key="w/t/_delta_log/00000000000000000000.json", Body=b"changed\n")
    changed = table.restore()
    assert (changed["deleted"], changed["rewritten"]) == (1, 301)
    assert changed["examples"][:2] == [f"w/t/_delta_log/{n:020d}.json" for n in (0, 1)]
    after = object_names(table.bucket, "w/t/")
    assert after.keys() == before.keys()
    assert {k: v for k, v in after.items() if k != checkpoint} == {
        k: v for k, v in before.items() if k != checkpoint
    }


def _document() -> dict[str, Any]:
    def phase(seconds: float, requests: int, cost: float) -> dict[str, Any]:
        return {
            "seconds": seconds,
            "modeled_seconds": seconds * 2,
            "table_requests": requests,
            "table_requests_by_operation": {"ListObjectsV2": requests},
            "data_list_requests": requests,
            "other_bucket_requests": 0,
            "cost_usd": cost,
        }

    def run(mode: str, seconds: float, requests: int) -> dict[str, Any]:
        return {
            "mode": mode,
            "label": mode,
            "plan": phase(seconds / 2, requests, requests / 1000),
            "run": phase(seconds, requests, requests / 1000),
            "delete": {"seconds": seconds / 2},
            "deleted_files": 300,
        }

    machine = {"cpus": 2, "load_average_1_5_15": [1.0, 1.0, 1.0], "platform": "x", "versions": {}}
    return {
        "command": "python -m benchmarks.vacuum_at_scale",
        "started_at": "2026-11-22T00:00:00+00:00",
        "seconds": 1.0,
        "machine_before": machine,
        "machine_after": machine,
        "layout": {"partitions": 720},
        "retention": "0",
        "listing": "indexed",
        "latency_injected_ms": 0.0,
        "model": {"latency_ms": 20.0, "spark_task_slots": 2},
        "prices": {"as_of": "2026-11-22"},
        "sizes": [
            {
                "files": 1000,
                "garbage_files": 300,
                "categories": {"live": 700},
                "build_seconds": 1.0,
                "inventory": {
                    "objects": 1,
                    "snapshot_seconds": 1.0,
                    "ingest_seconds": 1.0,
                    "requests": 1,
                    "cost_usd": 0.0,
                },
                "runs": [run("list", 40.0, 4000), run("inventory-batch", 20.0, 50), run("delta-rs", 1.0, 40)],
            }
        ],
    }


def test_markdown_shows_ratios_to_both_references() -> None:
    text = markdown(_document())
    row = next(line for line in text.splitlines() if line.startswith("| list | 20.0"))
    assert row.rstrip(" |").split(" | ")[5:9] == ["2.00×", "40×", "2.00×", "40×"]
    requests_row = next(line for line in text.splitlines() if line.startswith("| list | LIST 4,000"))
    assert "80×" in requests_row and "100×" in requests_row


def test_the_modes_run_in_turn_in_every_round_each_round_starting_at_the_next_mode() -> None:
    """A drift of the machine's speed during a size's rounds falls on the modes more evenly than on
    the ones run last: the modes in turn within a round, each round starting at the next one; each
    mode's result is made from its own rounds only, and the Markdown says the rounds ran so only
    when they did."""
    from benchmarks.vacuum_at_scale import Mode, Round, VacuumAtScale

    modes = [Mode(name, name, "spark") for name in ("a", "b", "c")]
    ran: list[str] = []
    summarised: dict[str, list[int]] = {}

    class Table:
        def counts(self) -> dict[str, int]:
            return {}

    class Fake(VacuumAtScale):
        def __init__(self) -> None:
            self.modes = modes

        def prepare(self, files: int, bucket: str) -> Any:
            return Table(), 0.0, {}

        def measure_round(self, mode: Any, table: Any) -> Any:
            ran.append(mode.name)
            return Round(None, None, None, None, len(ran), 0)  # type: ignore[arg-type]

        def measure(self, mode: Any, table: Any, rounds: list[Any]) -> dict[str, Any]:
            summarised[mode.name] = [r.candidates for r in rounds]
            return {"mode": mode.name}

    result = Fake().run_size(10, repeat=4)
    assert ran == ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]
    # each mode's rounds are its own, in the order they ran
    assert summarised == {"a": [1, 6, 8, 10], "b": [2, 4, 9, 11], "c": [3, 5, 7, 12]}
    assert [r["mode"] for r in result.runs] == ["a", "b", "c"]

    in_turn = "(every round ran each mode in turn, starting at the next mode)"
    assert in_turn not in markdown({**_document(), "repeat": 3})  # an older result: not said
    assert in_turn in markdown({**_document(), "repeat": 3, "modes_in_turn": True})


def test_a_modes_result_is_its_round_of_median_real_time_every_figure_from_that_one_round() -> None:
    """The reported round is the one whose real run took the median time (the lower middle one of
    an even count); its dry run, the delete (real - plan), the command's own figures, the counts
    and the event-log windows all come from that same round, and every round's times are kept."""
    from types import SimpleNamespace

    from benchmarks.vacuum_at_scale import EVENT_WINDOWS, Mode, Phase, Round, VacuumAtScale

    model = LatencyModel(latency_seconds=0.02, slots=2)

    def phase(seconds: float, lists: int, window: int) -> Phase:
        counts = Counter({("log", "ListObjectsV2"): lists})
        return Phase(seconds, counts, model, "spark", "inventory", (window, window + 1))

    def round_(plan: float, real: float, tag: int) -> Round:
        reported = SimpleNamespace(planned_files=tag, deleted_files=tag, delete_requests=tag, seconds=real)
        return Round(phase(plan, tag, 10 * tag), SimpleNamespace(seconds=plan), phase(real, tag + 1, 10 * tag + 5),
                     reported, tag, tag)  # fmt: skip

    mode = Mode("inventory-batch", "inventory, --delete-with batch", "spark", "inventory", "batch")
    table = SimpleNamespace(files=[None] * 3)
    rounds = [round_(4.0, 9.0, 1), round_(1.0, 6.0, 2), round_(3.0, 7.0, 3), round_(2.0, 5.0, 4)]
    result = VacuumAtScale.measure(None, mode, table, rounds)  # type: ignore[arg-type]
    # real runs 9, 6, 7, 5 s: the lower middle of 5, 6, 7, 9 is 6 s, the second round
    assert result["run"]["seconds"] == 6.0 and result["plan"]["seconds"] == 1.0
    assert result["delete"]["seconds"] == 5.0
    assert result["plan"]["table_requests"] == 2 and result["run"]["table_requests"] == 3
    assert result["candidates"] == result["deleted_files"] == 2
    assert result["reported"] == {
        "planned_files": 2, "deleted_files": 2, "delete_requests": 2, "seconds": 6.0, "plan_seconds": 1.0,
    }  # fmt: skip
    assert result[EVENT_WINDOWS] == {"plan": (20, 21), "run": (25, 26)}
    assert result["plan_seconds_each"] == [4.0, 1.0, 3.0, 2.0]
    assert result["run_seconds_each"] == [9.0, 6.0, 7.0, 5.0]
    assert result["repeat"] == 4


def test_a_run_of_ours_is_broken_down_by_step_from_the_event_log_into_both_markdowns(tmp_path: Any) -> None:
    from pathlib import Path

    from benchmarks.goals import _run_where
    from benchmarks.one_table import read_event_log
    from benchmarks.vacuum_at_scale import BenchmarkFailure, where_the_time_goes

    repository = Path(__file__).resolve().parent.parent

    def job(number: int, start: int, end: int | None, group: str | None, description: str | None,
            stage: str = "save at X.java:1") -> list[str]:  # fmt: skip
        properties = {
            k: v for k, v in (("spark.jobGroup.id", group), ("spark.job.description", description)) if v
        }
        started = {"Event": "SparkListenerJobStart", "Job ID": number, "Submission Time": start,
                   "Properties": properties, "Stage Infos": [{"Stage Name": stage}]}  # fmt: skip
        ended = {"Event": "SparkListenerJobEnd", "Job ID": number, "Completion Time": end}
        return [json.dumps(started)] + ([json.dumps(ended)] if end is not None else [])

    figures_stage = f"collect at {repository}/vacuum/plan.py:395"
    lines = [
        *job(0, 400, None, "vacuum events", "vacuum events: snapshot"),  # unfinished, before the window
        *job(1, 500, 900, "vacuum events", "vacuum events: snapshot"),  # before the window: not counted
        *job(2, 1_000, 2_000, "vacuum events", "vacuum events: classify objects and coverage"),
        *job(3, 1_500, 2_500, "inventory-vacuum run: inventory figures", None, figures_stage),
        *job(4, 3_000, 3_500, "vacuum events", "vacuum events: Delta dry run"),
        *job(5, 3_600, 4_100, "vacuum events", "vacuum events: Delta dry run"),
        *job(6, 4_800, 5_300, None, None),  # ends after the window: counted up to its end
        *job(7, 5_200, 5_600, "vacuum events", "vacuum events: delete"),  # the next window's
    ]
    (tmp_path / "app-1").write_text("\n".join(lines) + "\n", encoding="utf-8")
    plan = where_the_time_goes(read_event_log(tmp_path), (1_000, 5_000), 4.2)
    assert (plan["jobs"], plan["in_jobs_seconds"], plan["outside_jobs_seconds"]) == (5, 2.7, 1.5)
    assert [(s["step"], s["table"], s["jobs"], s["seconds"]) for s in plan["steps"]] == [
        ("classify objects and coverage", True, 1, 1.0),
        ("Delta dry run", True, 2, 1.0),
        ("inventory-vacuum run: inventory figures: (collect at vacuum/plan.py:395)", False, 1, 1.0),
        ("(no job group): (save at X.java:1)", False, 1, 0.2),
    ]
    real = where_the_time_goes(read_event_log(tmp_path), (5_100, 6_000), 1.0)
    assert (real["jobs"], real["in_jobs_seconds"], real["outside_jobs_seconds"]) == (1, 0.4, 0.6)
    assert [s["step"] for s in real["steps"]] == ["delete"]
    with pytest.raises(BenchmarkFailure, match="no job in a timed run's window"):
        where_the_time_goes(read_event_log(tmp_path), (7_000, 8_000), 1.0)
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    (unfinished / "app-2").write_text("\n".join(job(1, 1_000, None, "vacuum t", "vacuum t: snapshot") + job(
        2, 1_100, 1_200, "vacuum t", "vacuum t: snapshot")) + "\n", encoding="utf-8")  # fmt: skip
    with pytest.raises(BenchmarkFailure, match="1 job\\(s\\) that never ended"):
        where_the_time_goes(read_event_log(unfinished), (1_000, 2_000), 1.0)

    document = _document()
    ours = next(r for r in document["sizes"][0]["runs"] if r["mode"] == "inventory-batch")
    ours["events"] = {"plan": plan, "run": real}
    text = markdown(document).splitlines()
    dry = next(line for line in text if "the dry run: 10.0 s of local wall time (20.0 s modeled)" in line)
    assert "2.7 s in 5 Spark jobs (their union), 7.3 s outside any job" in dry
    assert "classify objects and coverage 1.00 s (1 job); Delta dry run 1.00 s (2 jobs)" in dry
    assert "other jobs: (no job group): (save at X.java:1) 0.20 s (1 job)" in dry
    assert "delete" not in dry and str(repository) not in dry
    wet = next(line for line in text if "the real run: 20.0 s of local wall time (40.0 s modeled)" in line)
    assert (
        "0.4 s in 1 Spark job (their union), 19.6 s outside any job" in wet and "delete 0.40 s (1 job)" in wet
    )
    rs = next(r for r in document["sizes"][0]["runs"] if r["mode"] == "delta-rs")
    where = _run_where(1000, ours, rs)
    assert len(where) == 3 and where[1] == dry[2:] and where[2] == wet[2:]
    assert not [line for line in markdown(_document()).splitlines() if "Spark's event log" in line]
    ours.pop("events")
    ours["events_unread"] = "Spark's event log holds no job in a timed run's window"
    assert f"- inventory-batch: no breakdown from Spark's event log: {ours['events_unread']}" in markdown(
        document
    )
    assert "`python -m benchmarks.vacuum_at_scale`, started" in markdown(_document())
    assert "`python -m benchmarks.vacuum_at_scale` at abc1234, started" in markdown(
        {**_document(), "code": "abc1234"}
    )


def test_one_table_breakdown_adds_up_and_the_markdown_shows_ratios_to_ours() -> None:
    from benchmarks import one_table

    assert one_table.union_ms([(0, 10), (5, 20), (30, 40)]) == 30
    events = {"app_start_ms": 2_000, "app_end_ms": None, "jobs": [{"start": 5_000, "end": 7_000},
              {"start": 6_000, "end": 8_000}, {"start": 9_000, "end": 10_000}]}  # fmt: skip
    items = one_table.breakdown({"start_ms": 0, "exit_ms": 12_000}, events)
    assert [i["seconds"] for i in items] == [
        2.0,
        3.0,
        4.0,
        1.0,
        2.0,
    ]  # to app, to 1st job, jobs, between, end
    found = one_table.differences({"a": {"x", "y"}, "b": {"x"}}, {"y": "orphan"})
    assert found == [{"only_in": "a", "not_in": "b", "files": 1, "by_kind": {"orphan": 1}, "examples": ["y"]}]

    def side(seconds: float, to_app: float | None) -> dict[str, Any]:
        middle = {"round": 1, "seconds": seconds, "candidates": 9, "table_requests": 4, "other_requests": 0,
                  "breakdown": items, "steps": [{"step": "snapshot", "jobs": 3, "seconds": 0.5}],
                  "other_jobs": [], "jars": ["io.delta_delta-spark_4.2_2.13-4.4.0.jar"], "jars_packages": None}  # fmt: skip
        times = {"median_to_app_start_seconds": to_app} if to_app is not None else {}
        return {"median_seconds": seconds, "median_jvm_after_exit_seconds": 0.5, "seconds_each": [seconds],
                "matches_garbage": True, "median_round": middle, **times}  # fmt: skip

    machine = {"cpus": 2, "load_average_1_5_15": [1.0, 1.0, 1.0], "platform": "x", "versions": {}}
    document = {
        "command": "python -m benchmarks.one_table", "code": "abc1234", "started_at": "2026-11-26T00:00:00",
        "machine_before": machine, "machine_after": machine, "rounds": 1, "inventory_objects": 12,
        "ingest_seconds": 20.0, "retention": "RETAIN 0 HOURS.", "differences": found, "class_archive": "/c/classes-1.jsa",
        "table": {"uri": "s3://b/t", "files": 12, "partitions": 720, "categories": {"live": 3}, "garbage": 9},
        "sides": {"ours": side(12.0, 2.0), "ours-no-archive": side(15.0, 2.0), "ours-full-jit": side(13.2, 2.0), "delta-rs": side(0.6, None),
                  "delta-sql": side(18.0, 2.5)},
    }  # fmt: skip
    rows = {line.split(" | ")[0]: line.split(" | ") for line in one_table.markdown(document).splitlines()}
    assert rows[f"| {one_table.SIDES['ours-no-archive']}"][1:3] == ["15.0", "1.25×"]
    assert rows[f"| {one_table.SIDES['ours-full-jit']}"][1:3] == ["13.2", "1.10×"]
    assert "(`classes-1.jsa`)" in one_table.markdown(document)
    assert rows["| delta-rs `vacuum(dry_run=True, full=True)`"][1:3] == ["0.6", "0.05×"]
    assert rows["| Delta's listing `VACUUM ... DRY RUN`"][2:5] == ["1.50×", "18.0", "2.5"]
    assert rows["| driver between Spark jobs"][1:3] == ["1.00", "8% |"]
    assert "- 1 named by a, not by b: 1 orphan" in one_table.markdown(document)


def test_fleet_peers_compare_candidates_by_kind_of_file() -> None:
    from benchmarks.fleet_peers import differences, relative
    from benchmarks.many_tables import peers_markdown

    assert relative("s3a://b/warehouse/t0/dt=1/a b.parquet", "b", "warehouse/t0") == "dt=1/a b.parquet"
    assert relative("dt=1/a%20b.parquet", "b", "warehouse/t0") == "dt=1/a b.parquet"  # delta-rs: as logged
    assert relative("s3a://other/warehouse/t0/x", "b", "warehouse/t0").startswith("OUTSIDE THE TABLE")
    assert relative("s3a://b/warehouse/t01/x", "b", "warehouse/t0").startswith("OUTSIDE THE TABLE")
    kinds = {"t0": {"a": "orphan", "b": "tombstoned_recent", "c": "live"}}
    expected = {"t0": {"a", "b"}}
    same = differences({"t0": {"a", "b"}}, expected, kinds)
    assert same["matches"] and same["tables"] == 1
    other = differences({"t0": {"a", "c"}}, expected, kinds)
    assert not other["matches"]
    assert other["planned_not_garbage"] == {"live": 1}
    assert other["garbage_not_planned"] == {"tombstoned_recent": 1}
    assert set(other["reasons"]) == {"live", "tombstoned_recent"}
    document = {
        "peers": {
            "ours": {
                "label": "ours",
                "tables": 1,
                "seconds": 2.0,
                "seconds_per_table": 2.0,
                "differences": same,
            },
            "delta-rs": {
                "label": "rs",
                "tables": 1,
                "seconds": 0.5,
                "seconds_per_table": 0.5,
                "differences": other,
            },
        }
    }
    text = "\n".join(peers_markdown(document))
    assert (
        "| rs | 1 | 0.5 | 0.50 | 0.25× |" in text and "garbage not planned {'tombstoned_recent': 1}" in text
    )


def test_ingest_rate_shows_each_side_beside_ours() -> None:
    from benchmarks import ingest_rate

    def side(
        layout: str, seconds: float, files: int, mean: float, most: int, written: int = 40_000_000
    ) -> dict[str, Any]:
        return {
            "layout": layout,
            "ingest_seconds": seconds,
            "rows_per_second": round(1_000_000 / seconds),
            "round_seconds": [seconds, seconds + 1],
            "files": files,
            "file_bytes": written,
            "slice_files_mean": mean,
            "slice_files_max": most,
            "spark_steps": [{"step": "checks", "jobs": 1, "seconds": 2.0}],
        }

    document: dict[str, Any] = {
        "command": "python -m benchmarks.ingest_rate --rows 1000000",
        "machine_before": {"cpus": 2, "load_average_1_5_15": [0.1, 0.1, 0.1]},
        "spark_start_seconds": 5.0,
        "registered_tables": 1000,
        "read_once_from_bytes": 256 * 2**20,
        "results": [
            {
                "format": "parquet",
                "rows": 1_000_000,
                "data_files": 4,
                "data_bytes": 40_000_000,
                "command_reads_once": False,  # under 256 MiB: the command checks it first
                "sides": [
                    {
                        **side(ingest_rate.OURS, 10.0, 2, 1.0, 1),
                        "round_layouts": [
                            f"{ingest_rate.OURS}, fell back to a global sort",
                            ingest_rate.OURS,
                        ],
                    },
                    side(ingest_rate.FIRST, 15.0, 2, 1.0, 1),
                    side(ingest_rate.PEER, 20.0, 8, 1.2, 2),
                    side(ingest_rate.SNAPPY, 12.0, 2, 1.0, 1, written=88_000_000),
                ],
            }
        ],
    }
    text = ingest_rate.markdown(document)
    assert "later deliveries of 256 MiB of data files or more" in text
    rows = [line for line in text.splitlines() if line.startswith("| parquet")]
    assert [row.split(" | ")[2:8] for row in rows] == [
        [
            "4 (40)",
            "key ranges, checked while written",
            "10.0",
            "10.0 (fell back to a global sort), 11.0",
            "100,000",
            "1.00",
        ],
        ["4 (40)", "key ranges, checked first ◆", "15.0", "15.0, 16.0", "66,667", "1.50"],
        ["4 (40)", "global sort, checked first", "20.0", "20.0, 21.0", "50,000", "2.00"],
        ["4 (40)", "key ranges, checked while written, in snappy", "12.0", "12.0, 13.0", "83,333", "1.20"],
    ]
    assert rows[2].endswith("| 8 | 40.0 | 1.2 / 2 |")
    assert rows[3].endswith("| 2 | 88.0 | 1 / 1 |")  # the bytes each codec wrote
    assert "with the order rotating" in text
    # one round: the sides ran once each in a fixed order, and the text says so
    for one in document["results"][0]["sides"]:
        one["round_seconds"], one["round_layouts"] = one["round_seconds"][:1], [one["layout"]]
    once = ingest_rate.markdown(document)
    assert "order rotating" not in once
    assert "once each, in the order of the table's rows" in once


def test_chargeback_rate_shows_the_snappy_peer_beside_each_grouping() -> None:
    from benchmarks import chargeback_rate

    document = {
        "rows": 1_000_000,
        "machine_before": {"cpus": 2, "load_average_1_5_15": [0.1, 0.1, 0.1]},
        "data_files": 8,
        "storage": "local disk (file://), not S3",
        "spark_start_seconds": 3.0,
        "codec": "zstd",
        "parquet_bytes": {"zstd": 30_000_000, "snappy": 66_000_000},
        "results": [
            {
                "by": "table",
                "seconds": 2.0,
                "rows_per_second": 500_000,
                "spark_jobs": 3,
                "groups": 901,
                "monthly_cost": 41.5,
                "snappy_seconds": 2.5,
            }
        ],
    }
    text = chargeback_rate.markdown(document)
    assert "in zstd, as the ingest writes them (30 MB)" in text
    assert "Spark's default codec (66 MB)" in text
    assert "| table | 2.0 | 500,000 | 3 | 901 | $41.50 | 2.5 | 1.25 |" in text


def test_driver_profile_counts_kinds_and_the_stacks_cut_short() -> None:
    from benchmarks.driver_profile import CUT, shares_of

    text = """
jdk.ExecutionSample {
  sampledThread = "Thread-3" (javaThreadId = 24)
  stackTrace = [
    org.codehaus.janino.UnitCompiler.compile(...) line: 1
    org.apache.spark.sql.catalyst.rules.RuleExecutor.execute(LogicalPlan) line: 2
  ]
}
jdk.ExecutionSample {
  sampledThread = "Executor task idle worker#60" (javaThreadId = 60)
  stackTrace = [
    java.io.ObjectOutputStream.writeObject0(Object, boolean) line: 3
    ...
  ]
}
jdk.ExecutionSample {
  sampledThread = "dag-scheduler-event-loop" (javaThreadId = 61)
  stackTrace = [
    org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext.freshName(String) line: 4
    org.apache.spark.sql.execution.DeserializeToObjectExec.$anonfun$doExecute$1(Expression, Seq) line: 5
  ]
}
jdk.ExecutionSample {
  sampledThread = "Thread-4" (javaThreadId = 25)
  stackTrace = [
    java.lang.ClassLoader.loadClass(String) line: 6
    py4j.commands.ReflectionCommand.getUnknownMember(BufferedReader) line: 7
    py4j.ClientServerConnection.run() line: 8
  ]
}
"""
    shares, top = shares_of(text.splitlines())
    assert shares["samples"] == 4
    assert shares["compiling generated code (Janino, its class loading)"] == 0.25
    assert shares["generating code (whole-stage and expression codegen)"] == 0.25
    assert shares["Catalyst rules (analysis, optimisation, planning)"] == 0.25
    assert shares["Py4J (calls from Python)"] == 0.25
    assert shares["Py4J's lookups of classes by name"] == 0.25
    assert shares["Java serialisation (closure checks, task binaries)"] == 0.25
    assert shares["typed Datasets' deserialisers (DeserializeToObjectExec)"] == 0.25
    assert shares[CUT] == 0.25
    assert shares["in the threads Python calls the JVM in (Py4J's)"] == 0.5
    assert shares["in Spark's task threads"] == 0.25
    assert shares["in Spark's scheduler (DAGScheduler)"] == 0.25
    assert {frame["frame"] for frame in top} == {
        "org.codehaus.janino.UnitCompiler.compile",
        "java.io.ObjectOutputStream.writeObject0",
        "org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext.freshName",
        "java.lang.ClassLoader.loadClass",
    }


def test_counted_jvm_calls_counts_each_round_trip_to_the_jvm_from_every_thread():
    """many_tables' count of PySpark's calls into the JVM, on a real py4j gateway (a JVM of its
    own, no Spark): one per call, from any thread, and none once the block has ended; py4j's
    releases of freed proxies (its finalizer thread's, here of the whole process) are not calls."""
    import gc
    import threading

    from py4j.java_gateway import JavaGateway

    from benchmarks.many_tables import counted_jvm_calls

    gateway = JavaGateway.launch_gateway(die_on_exit=True)
    try:
        random = gateway.jvm.java.util.Random(7)
        random.nextInt(10)  # the class looked up and the connection made before counting
        spare = gateway.jvm.java.util.Random(8)
        with counted_jvm_calls() as calls:
            threads = [
                threading.Thread(target=lambda: [random.nextInt(10) for _ in range(50)]) for _ in range(4)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            del spare  # its release, sent by py4j's finalizer, is no call
            gc.collect()
        random.nextInt(10)
        assert calls() == 200
    finally:
        gateway.shutdown()


def test_every_result_names_the_commit_it_ran_at_and_the_fleets_markdown_shows_it() -> None:
    """Every benchmark's result document (its run header) records the commit it ran at, marked
    when tracked files differed from it; the fleet's Markdown names its command and that commit."""
    import subprocess
    from datetime import datetime, timezone
    from pathlib import Path

    from benchmarks.many_tables import markdown as fleet_markdown
    from benchmarks.vacuum_at_scale import CODE_AT_START, machine, run_header

    repository = Path(__file__).resolve().parent.parent
    head = subprocess.run(
        ["git", "-C", str(repository), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    header = run_header("many_tables", datetime(2026, 12, 3, tzinfo=timezone.utc), machine())
    assert header["code"] == CODE_AT_START and header["code"].split(" ")[0] == head, header["code"]
    assert header["code"] in (head, f"{head} with uncommitted changes")
    # the fleet's committed result, as if it had run at abc1234
    document = json.loads(
        (repository / "benchmarks" / "results" / "many_tables.json").read_text(encoding="utf-8")
    )
    document["code"] = "abc1234"
    started = document["started_at"][:19]
    assert f"`{document['command'].strip()}` at abc1234, started {started}Z. Machine:" in fleet_markdown(
        document
    )


def test_a_results_command_names_the_java_tool_options_it_ran_with(monkeypatch) -> None:
    """Every JVM a run starts reads JAVA_TOOL_OPTIONS (a profile's stack depth, say): a result's
    command names it, so that the command reproduces the result."""
    from datetime import datetime, timezone

    from benchmarks.vacuum_at_scale import machine, run_header

    monkeypatch.setattr("sys.argv", ["many_tables.py", "--tables", "24", "--profile"])
    monkeypatch.delenv("JAVA_TOOL_OPTIONS", raising=False)
    plain = run_header("many_tables", datetime(2026, 12, 7, tzinfo=timezone.utc), machine())["command"]
    assert plain == "python -m benchmarks.many_tables --tables 24 --profile"
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-XX:FlightRecorderOptions:stackdepth=1024 -Xss4m")
    given = run_header("many_tables", datetime(2026, 12, 7, tzinfo=timezone.utc), machine())["command"]
    assert given == (
        "JAVA_TOOL_OPTIONS='-XX:FlightRecorderOptions:stackdepth=1024 -Xss4m' "
        "python -m benchmarks.many_tables --tables 24 --profile"
    )


def test_every_result_names_the_java_spark_runs_on_and_the_markdowns_show_it(tmp_path, monkeypatch) -> None:
    """Spark's speed differs between Java releases: a result records the version of the Java that
    Spark's launcher runs ($JAVA_HOME's, else the first on PATH), and each Markdown names it."""
    import os
    import stat
    from datetime import datetime, timezone
    from pathlib import Path

    from benchmarks.many_tables import markdown as fleet_markdown
    from benchmarks.vacuum_at_scale import java_of, machine, run_header

    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    # a stand-in that prints what a JDK prints on its standard error
    java.write_text("#!/bin/sh\necho 'openjdk version \"25.0.3\" 2026-04-21 LTS' >&2\n", encoding="utf-8")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("JAVA_HOME", str(home))
    figures = machine()
    assert figures["versions"]["java"] == "25.0.3"
    assert java_of(figures) == ", Java 25.0.3"
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "none"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert machine()["versions"]["java"] == "none found"
    assert java_of(machine()) == ""
    # Spark's launcher sources spark-env.sh from its configuration folder, which may set JAVA_HOME
    monkeypatch.setenv("JAVA_HOME", str(home))
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-env.sh").write_text("JAVA_HOME=/elsewhere\n", encoding="utf-8")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))
    assert machine()["versions"]["java"].startswith("unknown (") and java_of(machine()) == ""
    # a result from before Java was recorded, and incomplete ones
    for incomplete in ({"versions": {}}, {"versions": None}, None, {"versions": {"java": "1.2 | x"}}):
        assert java_of(incomplete) == ""

    repository = Path(__file__).resolve().parent.parent
    document = json.loads(
        (repository / "benchmarks" / "results" / "many_tables.json").read_text(encoding="utf-8")
    )
    document["machine_before"] = figures
    assert f"Machine: {os.cpu_count()} CPUs, Java 25.0.3, load before" in fleet_markdown(document)
    assert (
        run_header("many_tables", datetime(2026, 12, 5, tzinfo=timezone.utc), figures)["machine_before"]
        == figures
    )


def test_rule_times_reads_catalysts_metering_and_the_markdown_shows_it_per_table() -> None:
    text = """
=== Metrics of Analyzer/Optimizer Rules ===
Total number of runs: 8000
Total time: 7.4 seconds

Rule                                                  Effective Time / Total Time     Effective Runs / Total Runs

org.apache.spark.sql.delta.stats.PrepareDeltaScan     3000000000 / 4000000000         5 / 40
org.apache.spark.sql.catalyst.analysis.DeduplicateRelations     700000000 / 2000000000     150 / 3000
org.apache.spark.sql.catalyst.analysis.Analyzer$ResolveRelations     100000000 / 300000000     10 / 3000
org.apache.spark.sql.catalyst.optimizer.ColumnPruning     200000000 / 500000000      300 / 1000
org.apache.spark.sql.catalyst.optimizer.ConstantFolding     100000000 / 600000000      100 / 2000
"""
    rules = rule_times_of(text, top=3)
    assert rules["seconds"] == 7.4 and rules["runs"] == 8000
    assert [r["rule"] for r in rules["top"]] == [
        "PrepareDeltaScan",
        "DeduplicateRelations",
        "ConstantFolding",
    ]
    assert rules["top"][0] == {"rule": "PrepareDeltaScan", "seconds": 4.0, "runs": 40, "effective_runs": 5}
    # waiting: PrepareDeltaScan and ResolveRelations; the analyser's others: DeduplicateRelations
    assert rules["waiting_seconds"] == 4.3 and rules["analyser_seconds"] == 2.0
    (line,) = [x for x in rules_markdown([{"parallel": 4, "events": {"rules": rules | {"tables": 10}}}]) if x]
    assert "took at most 0.74 s a table, 0.43 s of it in rules that read" in line
    assert "0.20 s in the analyser's other rules" in line and "PrepareDeltaScan 0.40 s (4 runs)" in line
    assert rules_markdown([{"parallel": 4, "events": {}}]) == []
    with pytest.raises(ValueError, match="no total time"):
        rule_times_of("nothing here")
    # a rule's line the parser cannot read (here: a space in its name) is an error, not a lower sum
    with pytest.raises(ValueError, match="do not add up"):
        rule_times_of(text.replace("ConstantFolding", "Constant Folding"))


def test_goals_file_and_the_performance_page_state_the_committed_results() -> None:
    from pathlib import Path

    from benchmarks.goals import NAME, RESULTS, markdown, summary

    assert (RESULTS / NAME).read_text() == markdown(RESULTS), (
        "benchmarks/results/goals.md is not what benchmarks.goals makes of the results beside it"
    )
    page = (Path(__file__).parent.parent / "docs" / "performance.md").read_text()
    rows = summary(RESULTS)
    assert len(rows) == 2 + 5 and not any("not measured" in row for row in rows)
    missing = [row for row in rows if row not in page.splitlines()]
    assert not missing, f"docs/performance.md's goals table differs from the results: {missing}"


def test_each_goals_figure_is_the_one_its_benchmark_reported() -> None:
    """Each goal's figure against the benchmark's own Markdown of the same result."""
    from benchmarks.goals import GOALS, RESULTS, standings

    figures = {goal.result: standing for goal, standing, _ in standings(RESULTS)}
    assert all(not isinstance(standing, str) for standing in figures.values())

    def lines_of(result: str) -> list[str]:
        return (RESULTS / result).with_suffix(".md").read_text().splitlines()

    one = json.loads((RESULTS / "one_table.json").read_text())["sides"]["ours"]["median_seconds"]
    assert any(
        line.startswith("| ours: ") and f"| {one:.1f} |" in line for line in lines_of("one_table.json")
    )
    assert figures["one_table.json"].today.startswith(f"{one:.1f} s")  # type: ignore[union-attr]
    fleet = figures["many_tables.json"].today  # type: ignore[union-attr]
    per_table, parallel = fleet.split(" s a table at --parallel ")
    assert any(
        line.startswith(f"| {parallel} | sized |") and f"| {per_table} |" in line
        for line in lines_of("many_tables.json")
    )
    ingest = figures["ingest_rate.json"].today.split(" rows/s")[0]  # type: ignore[union-attr]
    assert any("◆" in line and f"| {ingest} |" in line for line in lines_of("ingest_rate.json"))
    modeled = {goal.what for goal in GOALS if goal.result.endswith("vacuum_at_scale.json")}
    assert len(modeled) == 2
    text = (RESULTS / "vacuum-30k-100k/vacuum_at_scale.md").read_text()
    for goal, standing, _ in standings(RESULTS):
        if goal.what not in modeled:
            continue
        files = "30,000" if "30,000 files" in goal.what else "100,000"
        section = text.split(f"## N = {files} files")[1].split("\n## ")[0].splitlines()
        ours, theirs = standing.today.split(" s against delta-rs's ")  # type: ignore[union-attr]
        theirs = theirs.split(" s")[0]
        # each engine's modeled real seconds, in the section of the goal's size
        batch = [line for line in section if line.startswith("| inventory, --delete-with batch | ")]
        delta_rs = [line for line in section if line.startswith("| delta-rs vacuum(full=True) | ")]
        assert any(f"| {ours} | 1.00× |" in line for line in batch), (goal.what, ours)
        assert any(f"| {theirs} | " in line for line in delta_rs), (goal.what, theirs)


def test_goals_read_each_figure_against_its_goal_and_refuse_other_sizes() -> None:
    from benchmarks.goals import _status, delta_rs_faster, delta_rs_no_slower, fleet, ingest, one_table
    from benchmarks.ingest_rate import FIRST, OURS

    def side(seconds: float) -> dict[str, Any]:
        breakdown = [{"item": "in Spark jobs", "seconds": 3.0}]
        return {"median_seconds": seconds, "median_round": {"breakdown": breakdown}}

    table = {"table": {"files": 3000}, "bucket_objects": 0, "rounds": 3, "retention": "at RETAIN 0 HOURS"}
    met = one_table({**table, "sides": {"ours": side(10.0), "delta-rs": side(1.0)}})
    hair = one_table({**table, "sides": {"ours": side(10.04), "delta-rs": side(1.0)}})
    missed = one_table({**table, "sides": {"ours": side(25.0), "delta-rs": side(50.0)}})
    assert not isinstance(met, str) and met.met and _status(met) == "met"  # the goal itself meets it
    assert not isinstance(hair, str) and not hair.met and _status(hair) == "missed by 1.01x"
    assert not isinstance(missed, str) and _status(missed) == "missed by 2.50x"
    assert "ours 2.00x faster" in missed.peers and "in Spark jobs: 3.0 s" in missed.where
    assert isinstance(one_table({**table, "table": {"files": 100000}, "sides": {}}), str)
    assert isinstance(one_table({**table, "retention": "RETAIN 168 HOURS", "sides": {}}), str)
    other_jobs = {"other_jobs": [{"step": "run: inventory figures", "jobs": 2, "seconds": 1.5}]}
    round_ = {**side(25.0), "median_round": {**side(25.0)["median_round"], **other_jobs}}
    outside = one_table({**table, "sides": {"ours": round_}})
    assert not isinstance(outside, str)
    assert "Spark jobs outside the table's job group, `run: inventory figures`: 2, 1.50 s" in outside.where
    assert isinstance(one_table({**table, "bucket_objects": 10, "sides": {}}), str)

    def run(parallel: int, per_table: float, sizing: str = "sized") -> dict[str, Any]:
        return {"parallel": parallel, "snapshot_partitions": sizing, "seconds_per_table": per_table}

    peers = {
        "ours": {"label": "ours at 1 thread", "tables": 100, "seconds_per_table": 4.0},
        "delta-rs": {"label": "delta-rs loop", "tables": 100, "seconds_per_table": 0.5},
    }
    runs = [run(1, 4.0), run(4, 3.0), run(4, 2.0, "50 (Delta's default)")]
    fleet_doc = {"tables": 100, "files_per_table": 1000, "conf": [], "runs": runs, "peers": peers}
    standing = fleet(fleet_doc)
    # the best run made as the command runs (not the one at Delta's default), its peers beside
    # the run of ours they ran with
    assert not isinstance(standing, str) and standing.short_by == pytest.approx(2.0)
    assert "--parallel 4" in standing.today and "ours 8.00x slower" in standing.peers
    assert isinstance(fleet({**fleet_doc, "tables": 16}), str)
    assert isinstance(fleet({**fleet_doc, "files_per_table": 200}), str)
    assert isinstance(fleet({**fleet_doc, "conf": ["spark.x=1"]}), str)
    assert "nothing to delete" in str(fleet({**fleet_doc, "unchanged_tables": 50}))

    def ingest_side(layout: str, rate: int, seconds: float) -> dict[str, Any]:
        return {"layout": layout, "rows_per_second": rate, "ingest_seconds": seconds, "spark_steps": []}

    result = {
        "format": "parquet",
        "rows": 10_000_000,
        "command_reads_once": True,
        "sides": [ingest_side(OURS, 200_000, 50.0), ingest_side(FIRST, 100_000, 100.0)],
    }
    read_once = ingest({"registered_tables": 1000, "results": [result]})
    assert not isinstance(read_once, str) and _status(read_once) == "missed by 1.50x"
    assert read_once.today.startswith("200,000") and "ours 2.00x faster" in read_once.peers
    checked_first = ingest({"registered_tables": 1000, "results": [{**result, "command_reads_once": False}]})
    assert not isinstance(checked_first, str) and checked_first.today.startswith("100,000")
    assert isinstance(ingest({"registered_tables": 10, "results": [result]}), str)
    steps = [{"step": f"step {n}", "jobs": 1, "seconds": float(n)} for n in range(1, 6)]
    fell_back = {**ingest_side(f"{OURS}, fell back to a global sort", 200_000, 50.0), "spark_steps": steps}
    fallen = ingest({"registered_tables": 1000, "results": [{**result, "sides": [fell_back]}]})
    assert not isinstance(fallen, str) and "fell back to a global sort" in fallen.today
    assert fallen.where[:3] == [f"Spark jobs of the step `step {n}`: 1, {n}.0 s" for n in (5, 4, 3)]
    assert fallen.where[3:] == [
        "the other 2 Spark jobs: 3.0 s",
        "outside Spark's jobs (the driver's work): 35.0 s of 50.0 s",
    ]
    assert isinstance(ingest({"registered_tables": 1000, "results": [{**result, "rows": 500_000}]}), str)

    def mode(name: str, modeled: float) -> dict[str, Any]:
        phase = {"modeled_seconds": modeled, "table_requests": 1}
        return {"mode": name, "plan": phase, "run": phase}

    def scale(
        at_30k: tuple[float, float], at_100k: tuple[float, float], latency: float = 20.0
    ) -> dict[str, Any]:
        sizes = [
            {"files": n, "runs": [mode("inventory-batch", ours), mode("delta-rs", theirs)]}
            for n, (ours, theirs) in ((30_000, at_30k), (100_000, at_100k))
        ]
        return {"repeat": 3, "model": {"latency_ms": latency}, "listing": "indexed", "sizes": sizes}

    document = scale((20.0, 10.0), (0.2, 0.3))  # each size its own figures
    slower = delta_rs_no_slower(document)
    assert (
        not isinstance(slower, str)
        and _status(slower) == "missed by 2.00x"
        and "ours 2.00x slower than delta-rs" in slower.peers
    )
    exactly = delta_rs_faster(document)  # 1.5x faster exactly meets the goal
    assert not isinstance(exactly, str) and exactly.met and "ours 1.50x faster" in exactly.peers
    assert isinstance(delta_rs_faster(scale((1, 1), (1, 1), latency=0.0)), str)
    injected = {**scale((20.0, 10.0), (0.2, 0.3), latency=0.0), "latency_injected_ms": 20.0}
    assert not isinstance(delta_rs_faster(injected), str)  # the wall time holds the latency
    assert isinstance(delta_rs_faster({**document, "listing": "moto's own"}), str)
    assert isinstance(delta_rs_faster({"model": {"latency_ms": 20.0}, "sizes": []}), str)


def test_goals_command_refuses_a_folder_without_results_and_a_corrupt_one(tmp_path: Any, capsys: Any) -> None:
    from benchmarks.goals import main

    assert main(["--results", str(tmp_path / "none")]) == 2
    assert main(["--results", str(tmp_path)]) == 2
    assert "holds none of the goals' results" in capsys.readouterr().err
    (tmp_path / "one_table.json").write_text('{"sides": ')
    assert main(["--results", str(tmp_path)]) == 2
    error = capsys.readouterr().err.strip()
    assert "one_table.json: not a readable result" in error and len(error.splitlines()) == 1
    assert not (tmp_path / "goals.md").exists()
    incomplete = {"table": {"files": 3000}, "sides": {}, "retention": "RETAIN 0 HOURS"}
    (tmp_path / "one_table.json").write_text(json.dumps(incomplete))
    assert main(["--results", str(tmp_path)]) == 0
    assert "not measured: incomplete result (KeyError: 'ours')" in (tmp_path / "goals.md").read_text()
    broken = {**incomplete, "command": ["not", "text"], "rounds": 1}
    broken["sides"] = {"ours": {"median_seconds": 5.0, "median_round": None}}
    (tmp_path / "one_table.json").write_text(json.dumps(broken))
    assert main(["--results", str(tmp_path)]) == 0
    assert "not measured: incomplete result (AttributeError" in (tmp_path / "goals.md").read_text()
    made = {**broken, "command": "python -m benchmarks.one_table --rounds 1"}
    made["sides"] = {"ours": {"median_seconds": 5.0, "median_round": {}}}
    (tmp_path / "one_table.json").write_text(json.dumps(made))
    assert main(["--results", str(tmp_path)]) == 0
    lines = (tmp_path / "goals.md").read_text().splitlines()
    row = next(line for line in lines if line.startswith("| one table"))
    # the command that made the result, then the one that measures the goal
    assert "| met | " in row
    assert row.endswith("| `python -m benchmarks.one_table --rounds 1` | `python -m benchmarks.one_table` |")
    assert "| 5.0 s (median of 1) | met |" in row  # a result from before Java was recorded
    # a result that recorded its Java names it beside the figure, in the goals file and the summary
    made["machine_before"] = {"versions": {"java": "25.0.3"}}
    (tmp_path / "one_table.json").write_text(json.dumps(made))
    assert main(["--results", str(tmp_path)]) == 0
    assert "| 5.0 s (median of 1), Java 25.0.3 | met |" in (tmp_path / "goals.md").read_text()
    from benchmarks.goals import summary

    assert any("| 5.0 s (median of 1), Java 25.0.3 | met |" in line for line in summary(tmp_path))
    made["machine_before"] = {"versions": None}  # incomplete: the figure alone
    (tmp_path / "one_table.json").write_text(json.dumps(made))
    assert any("| 5.0 s (median of 1) | met |" in line for line in summary(tmp_path))
