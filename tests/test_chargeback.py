"""Chargeback: exact objects, bytes and dollars of a small hand-made inventory, by every --by;
minimum billable sizes, archive overhead, Intelligent-Tiering tiers; unowned prefixes;
reclaimable from vacuum_runs; noncurrent from inventory_runs; bad input; text/JSON/CSV/HTML/SQL
agreement.

Every expected dollar figure below is written out by hand from the packaged us-east-1 prices:
STANDARD 0.023, STANDARD_IA 0.0125, ONEZONE_IA 0.01, GLACIER_IR 0.004, GLACIER 0.0036,
DEEP_ARCHIVE 0.00099, Intelligent-Tiering INFREQUENT 0.0125 and FREQUENT 0.023 per GB-month
(GB = 2^30 bytes), Intelligent-Tiering monitoring 0.0025 per 1,000 objects of >= 128 KB.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from chargeback import build_report, load_prices, parse_group_by
from chargeback.grouping import owner_column
from chargeback.read import read_inventory_for_chargeback
from chargeback.sql import SQL_QUERIES, register_views, sql_text
from core.errors import ConfigError, UsageError
from core.paths import StorageLocation
from core.registry import parse_registry
from core.tables import INVENTORY_TABLE_SCHEMA
from inventory.delivery_writer import snapshot_bucket
from jobs.output.chargeback_console import render_text
from jobs.output.html import render_html
from jobs.output.units import money
from tests.support.helpers import cli, cli_json

# an ingested world of its own, priced several ways: minutes
pytestmark = pytest.mark.slow

GIB = 2**30
TAKEN = datetime(2026, 11, 20, 8, 0, tzinfo=timezone.utc)

TABLES_YAML = """
tables:
  - {name: events, path: s3://lake/warehouse/events, owner: growth}
  - {name: users, path: s3://lake/warehouse/users, owner: identity}
  - {name: clicks, path: s3://lake2/clicks, owner: growth}
"""

# bucket, key, length, storage_class, intelligent-tiering access tier, table, is_latest
OBJECTS = [
    ("lake", "warehouse/events/a.parquet", 1_000_000, "STANDARD", None, "events", True),
    ("lake", "warehouse/events/b.parquet", 2_000, "STANDARD_IA", None, "events", True),
    ("lake", "warehouse/events/c.parquet", 500_000, "GLACIER", None, "events", True),
    ("lake", "warehouse/events/a.parquet", 999, "STANDARD", None, "events", False),  # noncurrent: not counted
    ("lake", "warehouse/users/u.parquet", 10_000_000, "INTELLIGENT_TIERING", "INFREQUENT", "users", True),
    ("lake", "warehouse/users/v.parquet", 100, "INTELLIGENT_TIERING", None, "users", True),
    ("lake", "warehouse/ghost/g.parquet", 4_000, "GLACIER_IR", None, "ghost", True),  # not in tables.yaml
    ("lake", "tmp/junk.bin", 3_000_000, "STANDARD", None, None, True),
    ("lake", "root.txt", 10, "EXPRESS_ONEZONE", None, None, True),  # a class the price table lacks
    ("lake2", "clicks/x.parquet", 200_000, "DEEP_ARCHIVE", None, "clicks", True),
    ("lake2", "old/y.csv", 50_000, "ONEZONE_IA", None, None, True),
]

# Hand-computed monthly cost of each current object.
COST = {
    "events/a": 1_000_000 * 0.023 / GIB,
    "events/b": 131_072 * 0.0125 / GIB,  # 2,000 bytes billed as 128 KB
    "events/c": ((500_000 + 32_768) * 0.0036 + 8_192 * 0.023) / GIB,  # 32 KB at GLACIER + 8 KB at STANDARD
    "users/u": 10_000_000 * 0.0125 / GIB + 0.0025 / 1000,  # INFREQUENT tier + monitoring
    "users/v": 100 * 0.023 / GIB,  # no tier: FREQUENT; under 128 KB: not monitored
    "ghost/g": 131_072 * 0.004 / GIB,
    "tmp/junk": 3_000_000 * 0.023 / GIB,
    "root": 10 * 0.023 / GIB,  # EXPRESS_ONEZONE priced at STANDARD
    "clicks/x": ((200_000 + 32_768) * 0.00099 + 8_192 * 0.023) / GIB,
    "old/y": 131_072 * 0.01 / GIB,
}
EVENTS = COST["events/a"] + COST["events/b"] + COST["events/c"]
USERS = COST["users/u"] + COST["users/v"]
UNOWNED = COST["tmp/junk"] + COST["root"] + COST["old/y"]
TOTAL = sum(COST.values())


def _inventory_rows(objects: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    rows = []
    for bucket, key, length, storage_class, tier, table, latest in objects:
        rows.append(
            (
                f"s3://{bucket}/{key}",
                length,
                False,
                1_700_000_000_000,
                bucket,
                key,
                storage_class,
                None,
                False,
                None,
                tier,
                None,
                latest,
                False,
                TAKEN.date(),
                TAKEN,
                table,
            )
        )
    return rows


@pytest.fixture(scope="module")
def world(spark, tmp_path_factory) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("chargeback")
    inventory = f"file://{root}/inventory"
    spark.createDataFrame(_inventory_rows(OBJECTS), INVENTORY_TABLE_SCHEMA).write.format("delta").partitionBy(
        "bucket"
    ).save(inventory)
    day = lambda d: datetime(2026, 11, d, tzinfo=timezone.utc)  # noqa: E731
    runs = [
        ("events", day(1), True, "ok", 99, 9_999, "inventory"),  # older dry run
        ("events", day(21), True, "ok", 10, 300_000, "inventory"),  # newest dry run
        ("events", day(22), True, "ok", 7, 7_000, "restore"),  # a restore's dry run: not a vacuum's
        ("events", day(23), False, "ok", 7, 7_000, "restore"),  # a restore: the dry run still stands
        ("users", day(20), True, "ok", 5, 50_000, "inventory"),
        ("users", day(21), False, "ok", 5, 50_000, "inventory"),  # real vacuum since: gone
        ("clicks", day(21), True, "refused", 0, 0, "inventory"),
    ]
    spark.createDataFrame(
        runs,
        "table string, run_at timestamp, dry_run boolean, status string, planned_files long, planned_bytes long,"
        " mode string",
    ).write.format("delta").save(f"file://{root}/vacuum_runs")
    ingests = [
        ("lake", datetime(2026, 11, 19, tzinfo=timezone.utc), "ok", 5, 5_000, 1, TAKEN),
        ("lake", datetime(2026, 11, 20, tzinfo=timezone.utc), "ok", 3, 3_000, 2, TAKEN),
        ("lake2", datetime(2026, 11, 20, tzinfo=timezone.utc), "failed", 7, 7_000, 0, TAKEN),
    ]
    spark.createDataFrame(
        ingests,
        "bucket string, run_at timestamp, status string, noncurrent_objects long, noncurrent_bytes long, "
        "delete_markers long, inventory_taken_at timestamp",
    ).write.format("delta").save(f"file://{root}/inventory_runs")
    tables = root / "tables.yaml"
    tables.write_text(TABLES_YAML)
    return {
        "root": root,
        "inventory": inventory,
        "tables": str(tables),
        "registry": parse_registry(TABLES_YAML),
    }


_REPORTS: dict[tuple[str, bool], Any] = {}


def _report(spark, world: dict[str, Any], by: str = "owner", history: bool = True):  # type: ignore[no-untyped-def]
    """The chargeback of the test inventory, computed once per --by for the whole module."""
    if (by, history) not in _REPORTS:
        root = world["root"]
        _REPORTS[by, history] = build_report(
            spark,
            world["inventory"],
            world["registry"],
            parse_group_by(by),
            load_prices(),
            vacuum_runs_table=f"file://{root}/vacuum_runs" if history else None,
            inventory_runs_table=f"file://{root}/inventory_runs" if history else None,
        )
    return _REPORTS[by, history]


def _groups(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["group"]: g for g in data["groups"]}


def test_by_owner_exact_objects_bytes_and_dollars(spark, world) -> None:  # type: ignore[no-untyped-def]
    data = _report(spark, world, "owner").to_dict()
    assert data["by"] == "owner" and data["currency"] == "USD" and data["prices_as_of"] == "2026-11-22"
    groups = _groups(data)
    assert set(groups) == {"growth", "identity", "unowned", "unknown"}
    growth = groups["growth"]
    assert (growth["objects"], growth["bytes"]) == (4, 1_000_000 + 2_000 + 500_000 + 200_000)
    assert growth["monthly_cost"] == pytest.approx(EVENTS + COST["clicks/x"], abs=1e-9)
    assert (groups["identity"]["objects"], groups["identity"]["bytes"]) == (2, 10_000_100)
    assert groups["identity"]["monthly_cost"] == pytest.approx(USERS, abs=1e-9)
    assert groups["unknown"]["monthly_cost"] == pytest.approx(COST["ghost/g"], abs=1e-9)
    assert (groups["unowned"]["objects"], groups["unowned"]["bytes"]) == (3, 3_050_010)
    assert groups["unowned"]["monthly_cost"] == pytest.approx(UNOWNED, abs=1e-9)
    # ranked by cost, most expensive first
    assert [g["group"] for g in data["groups"]] == ["identity", "unowned", "growth", "unknown"]
    totals = data["totals"]
    assert (totals["objects"], totals["bytes"]) == (10, 14_756_110)
    assert totals["monthly_cost"] == pytest.approx(TOTAL, abs=1e-9)
    assert totals["monthly_cost"] == pytest.approx(sum(g["monthly_cost"] for g in data["groups"]), abs=1e-5)

    unowned = data["unowned"]
    assert (unowned["objects"], unowned["bytes"]) == (3, 3_050_010)
    prefixes = {p["prefix"]: p for p in unowned["prefixes"]}
    assert set(prefixes) == {"lake/tmp/", "lake/", "lake2/old/"}
    assert prefixes["lake/tmp/"]["bytes"] == 3_000_000
    assert prefixes["lake2/old/"]["monthly_cost"] == pytest.approx(COST["old/y"], abs=1e-9)

    warnings = " | ".join(data["warnings"])
    assert "storage class EXPRESS_ONEZONE is not in the price table" in warnings
    assert "priced at STANDARD" in warnings
    assert "1 INTELLIGENT_TIERING object(s) have no access tier" in warnings
    assert "table 'ghost'" in warnings


def test_minimum_size_overhead_and_tiers_per_storage_class(spark, world) -> None:  # type: ignore[no-untyped-def]
    classes = _report(spark, world, "table").to_dict()["totals"]["storage_classes"]
    assert set(classes) == {
        "STANDARD",
        "STANDARD_IA",
        "ONEZONE_IA",
        "GLACIER_IR",
        "GLACIER",
        "DEEP_ARCHIVE",
        "INTELLIGENT_TIERING:INFREQUENT",
        "INTELLIGENT_TIERING:FREQUENT",
        "EXPRESS_ONEZONE",
    }
    # bytes stay the real bytes; the minimum size and the overhead only change the price
    assert classes["STANDARD_IA"]["bytes"] == 2_000
    assert classes["STANDARD_IA"]["monthly_cost"] == pytest.approx(131_072 * 0.0125 / GIB, abs=1e-10)
    assert classes["GLACIER_IR"]["monthly_cost"] == pytest.approx(131_072 * 0.004 / GIB, abs=1e-10)
    assert classes["ONEZONE_IA"]["monthly_cost"] == pytest.approx(131_072 * 0.01 / GIB, abs=1e-10)
    assert classes["GLACIER"]["monthly_cost"] == pytest.approx(
        (532_768 * 0.0036 + 8_192 * 0.023) / GIB, abs=1e-10
    )
    assert classes["DEEP_ARCHIVE"]["monthly_cost"] == pytest.approx(
        (232_768 * 0.00099 + 8_192 * 0.023) / GIB, abs=1e-10
    )
    assert classes["INTELLIGENT_TIERING:INFREQUENT"]["monthly_cost"] == pytest.approx(
        10_000_000 * 0.0125 / GIB + 0.0000025, abs=1e-10
    )
    assert classes["INTELLIGENT_TIERING:FREQUENT"]["monthly_cost"] == pytest.approx(
        100 * 0.023 / GIB, abs=1e-10
    )
    assert classes["EXPRESS_ONEZONE"]["monthly_cost"] == pytest.approx(10 * 0.023 / GIB, abs=1e-10)
    assert classes["EXPRESS_ONEZONE"]["monthly_cost"] > 0


def test_by_table_bucket_storage_class_and_prefix(spark, world) -> None:  # type: ignore[no-untyped-def]
    by_table = _groups(_report(spark, world, "table").to_dict())
    assert set(by_table) == {"events", "users", "clicks", "ghost", "unowned"}
    assert by_table["events"]["monthly_cost"] == pytest.approx(EVENTS, abs=1e-9)
    assert set(by_table["events"]["storage_classes"]) == {"STANDARD", "STANDARD_IA", "GLACIER"}
    assert by_table["events"]["objects"] == 3  # the noncurrent row is not counted

    by_bucket = _groups(_report(spark, world, "bucket", history=False).to_dict())
    assert {name: g["bytes"] for name, g in by_bucket.items()} == {"lake": 14_506_110, "lake2": 250_000}
    assert by_bucket["lake2"]["monthly_cost"] == pytest.approx(COST["clicks/x"] + COST["old/y"], abs=1e-9)

    by_class = _groups(_report(spark, world, "storage_class", history=False).to_dict())
    assert by_class["INTELLIGENT_TIERING"]["objects"] == 2
    assert by_class["INTELLIGENT_TIERING"]["monthly_cost"] == pytest.approx(USERS, abs=1e-9)

    report = _report(spark, world, "prefix:2", history=False).to_dict()
    assert report["by"] == "prefix:2"
    by_prefix = _groups(report)
    assert {name: g["objects"] for name, g in by_prefix.items()} == {
        "lake/warehouse/events/": 3,
        "lake/warehouse/users/": 2,
        "lake/warehouse/ghost/": 1,
        "lake/tmp/": 1,
        "lake/": 1,
        "lake2/clicks/": 1,
        "lake2/old/": 1,
    }


def test_reclaimable_from_newest_dry_run_and_noncurrent_from_ingest_runs(spark, world) -> None:  # type: ignore[no-untyped-def]
    data = _report(spark, world).to_dict()
    # users: a real vacuum ran after its dry run; clicks: its dry run was refused
    assert [(r["table"], r["files"], r["bytes"], r["from"]) for r in data["reclaimable"]] == [
        ("events", 10, 300_000, "vacuum_runs")
    ]
    events_bytes = 1_000_000 + 2_000 + 500_000
    assert data["reclaimable"][0]["monthly_cost"] == pytest.approx(300_000 * EVENTS / events_bytes, abs=1e-9)
    assert data["totals"]["reclaimable_bytes"] == 300_000
    noncurrent = data["noncurrent"]
    assert noncurrent["from"] == "inventory_runs"
    assert (noncurrent["objects"], noncurrent["bytes"], noncurrent["delete_markers"]) == (3, 3_000, 2)
    assert noncurrent["monthly_cost"] == pytest.approx(3_000 * 0.023 / GIB, abs=1e-10)
    assert [b["bucket"] for b in noncurrent["buckets"]] == ["lake"]


def test_text_json_csv_and_html_agree(spark, world) -> None:  # type: ignore[no-untyped-def]
    base = (
        "chargeback",
        "--inventory-table",
        world["inventory"],
        "--tables",
        world["tables"],
        "--by",
        "table",
    )
    code, text_json = cli(*base, "--format", "json")
    assert code == 0
    data = json.loads(text_json)
    csv_file = world["root"] / "report.csv"
    code, nothing = cli(*base, "--format", "csv", "--output", str(csv_file))
    assert code == 0 and nothing == ""
    text_csv = csv_file.read_text()
    report = _report(spark, world, "table")
    assert data == json.loads(json.dumps(report.to_dict(), default=str))  # the command = the library
    text, page = render_text(report), render_html(report)

    groups = _groups(data)
    assert groups["events"]["monthly_cost"] == pytest.approx(EVENTS, abs=1e-9)
    assert data["reclaimable"][0]["table"] == "events"  # the default history table beside the inventory
    assert data["noncurrent"]["bytes"] == 3_000
    rows = list(csv.DictReader(io.StringIO(text_csv)))
    csv_groups = {r["group"]: r for r in rows if r["section"] == "group" and not r["storage_class"]}
    lines = text.splitlines()

    def text_line(name: str, objects: int) -> str:
        return next(line for line in lines if line.split()[:2] == [name, f"{objects:,}"])

    for name, group in groups.items():
        assert int(csv_groups[name]["objects"]) == group["objects"]
        assert int(csv_groups[name]["bytes"]) == group["bytes"]
        assert float(csv_groups[name]["monthly_cost"]) == group["monthly_cost"]
        line = text_line(name, group["objects"])
        assert f"{group['bytes']:,}" in line and money(group["monthly_cost"], exact=False) in line
    totals = data["totals"]
    total = next(r for r in rows if r["section"] == "total" and not r["storage_class"])
    assert float(total["monthly_cost"]) == totals["monthly_cost"]
    assert money(totals["monthly_cost"], exact=False) in text_line("total", totals["objects"])
    assert {r["group"] for r in rows if r["section"] == "unowned"} == {"lake/tmp/", "lake/", "lake2/old/"}
    assert [(r["group"], r["objects"], r["bytes"]) for r in rows if r["section"] == "reclaimable"] == [
        ("events", "10", "300000")
    ]
    # HTML: self-contained, the same numbers
    assert "<svg" in page and "<script" not in page and "https://" not in page
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert money(totals["monthly_cost"]) in page
    for group in data["groups"]:
        assert money(group["monthly_cost"]) in page


def test_shipped_sql_matches_the_command(spark, world) -> None:  # type: ignore[no-untyped-def]
    prices = load_prices()
    register_views(spark, read_inventory_for_chargeback(spark, world["inventory"]), prices, world["registry"])
    expected = {
        "cost_by_table": _groups(_report(spark, world, "table").to_dict()),
        "cost_by_owner": _groups(_report(spark, world, "owner").to_dict()),
        "cost_by_storage_class": _report(spark, world, "table").to_dict()["totals"]["storage_classes"],
    }
    assert set(expected) == set(SQL_QUERIES)
    for name in SQL_QUERIES:
        rows = spark.sql(sql_text(name)).collect()
        got = {row[0]: row for row in rows}
        assert set(got) == set(expected[name]), name
        for group, figures in expected[name].items():
            assert got[group]["objects"] == figures["objects"], (name, group)
            assert got[group]["bytes"] == figures["bytes"], (name, group)
            assert got[group]["monthly_cost"] == pytest.approx(figures["monthly_cost"], abs=1e-9), (
                name,
                group,
            )


def test_bad_input_exits_2_with_one_line(spark, world, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    base = ("chargeback", "--inventory-table", world["inventory"], "--tables", world["tables"])

    def error_of(*argv: str) -> str:
        capsys.readouterr()
        code, out = cli(*base, *argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and out == ""
        assert len(err) == 1, err
        return err[0]

    assert "--by 'team'" in error_of("--by", "team")
    assert "--by 'prefix:0'" in error_of("--by", "prefix:0")
    default = Path(load_prices().file).read_text()
    missing = tmp_path / "missing.yaml"
    missing.write_text(default.replace("  GLACIER_IR:\n    price_per_gb_month: 0.004\n", ""))
    assert "missing storage class(es) GLACIER_IR" in error_of("--prices", str(missing))
    negative = tmp_path / "negative.yaml"
    negative.write_text(default.replace("price_per_gb_month: 0.0125", "price_per_gb_month: -0.0125", 1))
    assert "negative" in error_of("--prices", str(negative))
    no_tier = tmp_path / "no_tier.yaml"
    no_tier.write_text(default.replace("      INFREQUENT:\n", "      INFREQUENTLY:\n"))
    assert "missing access tier(s) INFREQUENT" in error_of("--prices", str(no_tier))

    foreign = f"file://{tmp_path}/foreign"
    spark.createDataFrame(
        [("s3://lake/a", 1, "lake", "a")], "path string, length long, bucket string, key string"
    ).write.format("delta").save(foreign)
    capsys.readouterr()
    code, _ = cli("chargeback", "--inventory-table", foreign, "--tables", world["tables"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "lacks column(s) storage_class" in err[0]


def test_packaged_price_file_and_group_by_parsing() -> None:
    prices = load_prices()
    assert prices.currency == "USD" and prices.region == "us-east-1" and prices.prices_as_of == "2026-11-22"
    assert prices.source == "https://aws.amazon.com/s3/pricing/"
    assert prices.standard.price_per_gb_month == 0.023
    assert prices.rule("STANDARD_IA").minimum_billable_bytes == 131_072  # type: ignore[union-attr]
    glacier = prices.rule("GLACIER")
    assert glacier is not None and (glacier.overhead_bytes, glacier.standard_overhead_bytes) == (
        32_768,
        8_192,
    )
    assert parse_group_by("prefix").depth == 1 and parse_group_by("prefix:3").name == "prefix:3"
    for bad in ("", "teams", "prefix:x", "owner:2"):
        with pytest.raises(UsageError):
            parse_group_by(bad)
    with pytest.raises(ConfigError, match="not valid YAML|expected a mapping"):
        from chargeback.prices import parse_prices

        parse_prices("storage_classes: [1, 2")


@pytest.mark.skipif(
    not Path("/usr/bin/chromium").exists(), reason="needs Debian's chromium at /usr/bin/chromium"
)
def test_html_report_renders_in_headless_chromium(spark, world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    report = _report(spark, world, "owner")
    page = tmp_path / "chargeback.html"
    page.write_text(render_html(report))
    screenshot = tmp_path / "chargeback.png"
    common = ["/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu"]
    subprocess.run(
        [*common, f"--screenshot={screenshot}", "--window-size=1100,1800", page.as_uri()],
        check=True,
        timeout=120,
    )
    assert screenshot.stat().st_size > 10_000
    dom = subprocess.run(
        [*common, "--dump-dom", page.as_uri()], check=True, timeout=120, capture_output=True, text=True
    ).stdout
    data = report.to_dict()
    assert money(data["totals"]["monthly_cost"]) in dom
    for group in data["groups"]:
        assert money(group["monthly_cost"]) in dom
    assert data["trend"]["points"], "the trend (from the inventory table's versions) is on the page"
    for point in data["trend"]["points"]:
        assert f"<td>{point['date']}</td>" in dom and money(point["monthly_cost"]) in dom
    assert money(data["noncurrent"]["monthly_cost"]) in dom


def test_reclaimable_computed_now_is_what_a_vacuum_dry_run_plans(spark, lake_with_junk) -> None:  # type: ignore[no-untyped-def]
    lake = lake_with_junk
    code, text = cli(
        "chargeback", "--inventory-table", lake["inventory"], "--tables", lake["registry"],
        "--by", "table", "--format", "json", "--reclaimable",
    )  # fmt: skip
    assert code == 0
    [entry] = json.loads(text)["reclaimable"]
    code, dry = cli_json(
        "vacuum", "--inventory-table", lake["inventory"], "--tables", lake["registry"], "--dry-run"
    )
    [run] = dry["tables"]
    assert code == 0 and run["planned_files"] == len(lake["expected"])
    assert (entry["table"], entry["files"], entry["bytes"], entry["from"]) == (
        "events",
        run["planned_files"],
        run["planned_bytes"],
        "computed",
    )
    assert entry["bytes"] > 0 and entry["monthly_cost"] > 0


def test_ingest_keeps_noncurrent_per_prefix_and_the_trend(spark, s3, bucket_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The usage rows written at ingest: noncurrent versions per table or prefix, priced by their
    class; one trend point per inventory date, not doubled by a second ingest on the same day; the
    newest point is the chargeback's own total; without the usage table, time travel."""
    source, inventory = bucket_factory("src"), bucket_factory("inv")
    gone, stale = bucket_factory("gone"), bucket_factory("stale")  # emptied; no delivery since day 1
    s3.put_object(Bucket=gone, Key="x", Body=b"g" * 100)
    s3.put_object(Bucket=stale, Key="y", Body=b"s" * 500)
    s3.put_bucket_versioning(Bucket=source, VersioningConfiguration={"Status": "Enabled"})
    tables = tmp_path / "tables.yaml"
    tables.write_text(f"tables:\n  - {{name: events, path: s3://{source}/warehouse/events, owner: growth}}\n")
    table = f"s3://{inventory}/tables/inventory"
    s3.put_object(Bucket=source, Key="warehouse/events/a", Body=b"a" * 3_000)
    s3.put_object(Bucket=source, Key="warehouse/events/a", Body=b"a" * 2_000)  # 3,000 noncurrent
    s3.put_object(Bucket=source, Key="tmp/x", Body=b"x" * 70)
    s3.put_object(Bucket=source, Key="tmp/y", Body=b"y" * 5, StorageClass="STANDARD_IA")
    s3.delete_object(Bucket=source, Key="tmp/x")  # 70 noncurrent, 1 delete marker
    s3.delete_object(Bucket=source, Key="tmp/y")  # 5 noncurrent in STANDARD_IA: billed as 128 KB
    now = datetime.now(timezone.utc).replace(microsecond=0)
    ingest = ("ingest", "--destination", f"s3://{inventory}/reports", "--source-bucket", source)
    ingest += ("--source-bucket", gone, "--config-id", "daily", "--inventory-table", table)
    ingest += ("--tables", str(tables))
    snapshot = {"versions": "all", "file_format": "parquet"}
    destination = StorageLocation.parse(f"s3://{inventory}/reports")
    for bucket in (source, gone, stale):
        snapshot_bucket(s3, bucket, destination, "daily", taken_at=now - timedelta(days=2), **snapshot)
    assert cli_json(*ingest, "--source-bucket", stale)[0] == 0
    s3.put_object(Bucket=source, Key="warehouse/events/b", Body=b"b" * 1_000)
    s3.delete_object(Bucket=gone, Key="x")
    for bucket in (source, gone):
        snapshot_bucket(s3, bucket, destination, "daily", taken_at=now - timedelta(hours=1), **snapshot)
    for _ in range(2):  # a second ingest of the same delivery replaces its usage rows
        assert cli_json(*ingest)[0] == 0

    report = ("chargeback", "--inventory-table", table, "--tables", str(tables), "--format", "json")
    code, text = cli(*report, "--by", "table")
    assert code == 0, text
    data = json.loads(text)
    noncurrent = data["noncurrent"]
    assert noncurrent["from"] == "inventory_usage" and noncurrent["priced_as"] == "storage class"
    by_group = {p["group"]: p for p in noncurrent["prefixes"]}
    assert set(by_group) == {"events", f"{source}/tmp/"}
    assert (by_group["events"]["objects"], by_group["events"]["bytes"], by_group["events"]["owner"]) == (
        1,
        3_000,
        "growth",
    )
    assert (by_group[f"{source}/tmp/"]["objects"], by_group[f"{source}/tmp/"]["delete_markers"]) == (2, 2)
    assert by_group[f"{source}/tmp/"]["monthly_cost"] == pytest.approx(
        (70 * 0.023 + 128 * 1024 * 0.0125) / GIB, abs=1e-10
    )
    assert (noncurrent["objects"], noncurrent["bytes"], noncurrent["delete_markers"]) == (3, 3_075, 2)

    trend = data["trend"]
    assert trend["from"] == ["inventory_usage"]
    points = {p["date"]: p for p in trend["points"]}
    assert list(points) == [
        (now - timedelta(days=2)).date().isoformat(),
        (now - timedelta(hours=1)).date().isoformat(),
    ]
    older, newer = trend["points"]
    assert (older["objects"], older["bytes"]) == (3, 2_600)
    # the emptied bucket counts as empty (not carried forward); the stale one with its last delivery
    assert (
        (newer["objects"], newer["bytes"])
        == (data["totals"]["objects"], data["totals"]["bytes"])
        == (3, 3_500)
    )
    assert newer["monthly_cost"] == pytest.approx(data["totals"]["monthly_cost"], abs=1e-12)
    assert newer["carried_forward"] == [stale]
    code, text = cli(*report, "--by", "table", "--trend-days", "1")
    [only] = json.loads(text)["trend"]["points"]  # a window of one day still counts the stale bucket
    assert (only["date"], only["bytes"], only["carried_forward"]) == (newer["date"], 3_500, [stale])
    assert newer["owners"]["growth"]["bytes"] == 3_000 and newer["tables"]["events"]["bytes"] == 3_000

    code, text = cli(*report, "--usage-table", f"s3://{inventory}/tables/none_here")
    assert code == 0, text
    travelled = json.loads(text)
    assert travelled["noncurrent"]["from"] == "inventory_runs"
    assert travelled["trend"]["from"] == ["time_travel"]
    # every ingest was committed today: the newest version of today holds each bucket's newest
    # delivery (the stale bucket's is two days old; the emptied bucket has no rows in it)
    assert [(p["date"], p["bytes"]) for p in travelled["trend"]["points"]] == [
        (older["date"], 500),
        (newer["date"], 3_500),
    ]


def test_owners_of_thousands_of_tables(spark) -> None:  # type: ignore[no-untyped-def]
    """A registry of 5,000 tables: one map lookup per row, not a CASE nested 5,000 deep (which
    overflowed Spark's analyzer at 1,000 tables)."""
    registry = parse_registry(
        "tables:\n"
        + "".join(f"  - {{name: t{n}, path: s3://lake/w/t{n}, owner: team{n % 7}}}\n" for n in range(5_000))
    )
    frame = spark.createDataFrame([("t4999",), ("t12",), ("gone",), (None,)], "table string").select(
        owner_column(registry).alias("owner")
    )
    assert [r["owner"] for r in frame.collect()] == ["team1", "team5", "unknown", "unowned"]
