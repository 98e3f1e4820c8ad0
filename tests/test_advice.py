"""``chargeback --advise``: exact monthly savings of a small hand-made inventory and usage table,
lifecycle documents that S3 accepts and Terraform blocks that carry the same rules, and a report
without ``--advise`` that is exactly what it was.

Every expected dollar figure is written out by hand from the packaged us-east-1 prices: STANDARD
0.023, STANDARD_IA 0.0125, ONEZONE_IA 0.01, GLACIER_IR 0.004, GLACIER 0.0036 per GB-month (GB =
2^30 bytes); 128 KB (131,072 bytes) minimum billable size in STANDARD_IA, ONEZONE_IA and
GLACIER_IR; GLACIER adds 32 KB at its price and 8 KB at STANDARD's per object.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import hcl2
import pytest

from chargeback import build_report, load_prices, parse_group_by
from chargeback.advice import (
    NONCURRENT_VERSIONS,
    OLD_UNOWNED_OBJECTS,
    SMALL_OBJECTS,
    advise,
    current_advice,
    noncurrent_advice,
)
from chargeback.lifecycle import (
    MAX_RULE_ID,
    lifecycle_configuration,
    noncurrent_rule,
    rule_id,
    terraform_block,
    terraform_name,
)
from chargeback.prices import usage_cost
from chargeback.report import ChargebackReport, Noncurrent, NoncurrentBucket, NoncurrentGroup, Tally, add
from core.registry import parse_registry
from core.tables import INVENTORY_TABLE_SCHEMA, USAGE_SCHEMA
from jobs.output.chargeback_console import render_text
from jobs.output.csv import render_csv
from jobs.output.html import render_html
from jobs.output.units import money
from tests.support.helpers import cli

GIB = 2**30
MINIMUM = 131_072
TAKEN = datetime(2026, 11, 20, 8, 0, tzinfo=timezone.utc)
DAY = TAKEN.date()

TABLES_YAML = """
tables:
  - {name: events, path: s3://lake/warehouse/events, owner: growth}
  - {name: users, path: s3://lake/warehouse/users, owner: identity}
"""
REGISTRY = parse_registry(TABLES_YAML)

# ---- noncurrent versions and delete markers, as the usage table holds them ----------------------

# state, table, prefix, storage_class, objects, bytes, small_objects, small_bytes
USAGE = [
    ("noncurrent", "events", "lake/warehouse/", "STANDARD", 3, 3_000_000, 0, 0),
    ("noncurrent", "events", "lake/warehouse/", "STANDARD_IA", 2, 100_000, 1, 10_000),
    ("delete_marker", "events", "lake/warehouse/", None, 4, 0, 0, 0),
    ("noncurrent", None, "lake/tmp/", "STANDARD", 1, 70, 1, 70),
    ("noncurrent", None, "lake/warehouse/", "STANDARD", 1, 300, 1, 300),  # beside the tables, unowned
    ("delete_marker", None, "lake/tmp/", None, 1, 0, 0, 0),
    ("noncurrent", None, "lake/", "STANDARD", 1, 5, 1, 5),  # a key at the bucket's root
    ("noncurrent", "ghost", "lake/warehouse/", "STANDARD", 1, 1_000, 1, 1_000),  # not in tables.yaml
    ("current", "events", "lake/warehouse/", "STANDARD", 1, 1_000_000, 0, 0),  # not noncurrent
]
# the saving of a noncurrent-version rule: what those versions cost a month, by their own class
SAVING_EVENTS = (3_000_000 * 0.023 + (100_000 - 10_000 + MINIMUM) * 0.0125) / GIB  # 1 IA version of 10,000 B
SAVING_TMP = 70 * 0.023 / GIB
SAVING_ROOT = 5 * 0.023 / GIB
SAVING_WAREHOUSE = 300 * 0.023 / GIB

# ---- current objects: bucket, key, length, storage class, table, age in days at TAKEN -----------
OBJECTS = [
    ("lake", "warehouse/events/a.parquet", 1_000_000, "STANDARD", "events", 400),  # nothing to do
    ("lake", "warehouse/events/s1.parquet", 10_000, "STANDARD_IA", "events", 400),  # small, costlier
    # 100,000 B at STANDARD (0.0023/GiB) cost more than 128 KB at STANDARD_IA (0.0016384): left alone
    ("lake", "warehouse/events/s2.parquet", 100_000, "STANDARD_IA", "events", 400),
    ("lake", "warehouse/users/g.parquet", 1_000, "GLACIER_IR", "users", 1),  # small, costlier
    ("lake", "warehouse/users/big.parquet", 200_000, "GLACIER_IR", "users", 1),
    ("lake", "tmp/old.bin", 5_000_000, "STANDARD", None, 200),  # old, unowned
    ("lake", "tmp/new.bin", 7_000, "STANDARD", None, 1),
    ("lake", "tmp/old-ia.bin", 2_000, "STANDARD_IA", None, 100),  # old (so not also "small")
    ("lake", "tmp/young-ia.bin", 3_000, "ONEZONE_IA", None, 10),  # small, costlier, unowned
    ("lake", "tmp/edge.bin", 4_000, "STANDARD", None, 90),  # exactly 90 days: old
    ("lake2", "root.txt", 50, "STANDARD", None, 365),  # old, at the bucket's root
    ("lake2", "arch/x", 10, "GLACIER", None, 100),  # old, archive overhead
]
SAVING_SMALL_EVENTS = (MINIMUM * 0.0125 - 10_000 * 0.023) / GIB
SAVING_SMALL_USERS = (MINIMUM * 0.004 - 1_000 * 0.023) / GIB
SAVING_SMALL_TMP = (MINIMUM * 0.01 - 3_000 * 0.023) / GIB
SAVING_OLD_TMP = (5_000_000 * 0.023 + MINIMUM * 0.0125 + 4_000 * 0.023) / GIB
SAVING_OLD_LAKE2_ROOT = 50 * 0.023 / GIB
SAVING_OLD_LAKE2_ARCH = ((10 + 32_768) * 0.0036 + 8_192 * 0.023) / GIB


def _hcl_value(value: Any) -> Any:
    """python-hcl2 keeps a string's quotes and escapes: the string HCL means."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        text = value[1:-1].replace("$${", "${").replace("%%{", "%{")
        return text.replace('\\"', '"').replace("\\\\", "\\")
    return value


def _rules_of_terraform(text: str) -> tuple[str, list[dict[str, Any]]]:
    """The bucket and rules of an ``aws_s3_bucket_lifecycle_configuration`` block, in AWS's JSON
    shape, read with python-hcl2."""
    [resource] = hcl2.loads(text)["resource"]
    [(kind, named)] = resource.items()
    assert _hcl_value(kind) == "aws_s3_bucket_lifecycle_configuration"
    [(_, body)] = named.items()
    rules = []
    for rule in body["rule"]:
        [filter_] = rule["filter"]
        [expiration] = rule["expiration"]
        [noncurrent] = rule["noncurrent_version_expiration"]
        rules.append(
            {
                "ID": _hcl_value(rule["id"]),
                "Status": _hcl_value(rule["status"]),
                "Filter": {"Prefix": _hcl_value(filter_["prefix"])},
                "NoncurrentVersionExpiration": {"NoncurrentDays": noncurrent["noncurrent_days"]},
                "Expiration": {"ExpiredObjectDeleteMarker": expiration["expired_object_delete_marker"]},
            }
        )
    return _hcl_value(body["bucket"]), rules


def _usage_rows(bucket: str = "lake") -> list[dict[str, Any]]:
    keys = ("state", "table", "prefix", "storage_class", "objects", "bytes", "small_objects", "small_bytes")
    return [
        {"bucket": bucket, "intelligent_tiering_access_tier": None, **dict(zip(keys, row, strict=True))}
        for row in USAGE
    ]


def _noncurrent_by_hand() -> Noncurrent:
    """The report's noncurrent section of :data:`USAGE`, summed as chargeback.noncurrent sums it."""
    prices = load_prices()
    groups: dict[tuple[str | None, str], dict[str, Any]] = {}
    for row in _usage_rows():
        if row["state"] == "current":
            continue
        sums = groups.setdefault(
            (row["table"], row["table"] or row["prefix"]),
            {"objects": 0, "bytes": 0, "markers": 0, "classes": {}},
        )
        if row["state"] == "delete_marker":
            sums["markers"] += row["objects"]
            continue
        sums["objects"] += row["objects"]
        sums["bytes"] += row["bytes"]
        add(
            sums["classes"],
            row["storage_class"],
            None,
            row["objects"],
            row["bytes"],
            usage_cost(row, prices, []),
        )
    owner = {"events": "growth", None: "unowned", "ghost": "unknown"}
    return Noncurrent(
        "inventory_usage",
        0,
        0,
        0,
        0.0,
        "storage class",
        (),
        tuple(
            NoncurrentGroup(
                "lake",
                group,
                table,
                owner[table],
                s["objects"],
                s["bytes"],
                s["markers"],
                round(sum(t.monthly_cost for t in s["classes"].values()), 10),
                storage_classes=s["classes"],
            )
            for (table, group), s in groups.items()
        ),
    )


def _current_rows_by_hand() -> list[dict[str, Any]]:
    """:data:`OBJECTS` summed as chargeback.advice.current_candidates sums them (unowned age 90 days)."""
    overhead = {"GLACIER": (32_768, 8_192)}
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for bucket, key, length, storage_class, table, age in OBJECTS:
        old = table is None and age >= 90
        minimum = MINIMUM if storage_class in ("STANDARD_IA", "ONEZONE_IA", "GLACIER_IR") else 0
        own, standard = overhead.get(storage_class, (0, 0))
        billable = max(length, minimum) + own
        costlier = minimum and length * 0.023 < minimum * {"STANDARD_IA": 0.0125, "ONEZONE_IA": 0.01}.get(
            storage_class, 0.004
        )
        if not (old or costlier):
            continue
        top = key.split("/")[0] + "/" if "/" in key else ""
        index = (bucket, table, None if table else f"{bucket}/{top}", storage_class, old)
        row = rows.setdefault(
            index,
            dict(zip(("bucket", "table", "unowned_prefix", "price_key", "old"), index, strict=True))
            | {
                "objects": 0,
                "bytes": 0,
                "billable_bytes": 0,
                "standard_overhead_bytes": 0,
                "monitored_objects": 0,
            },
        )
        row["objects"] += 1
        row["bytes"] += length
        row["billable_bytes"] += billable
        row["standard_overhead_bytes"] += standard
    return list(rows.values())


def _by_kind_and_group(data: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(r["kind"], r["bucket"], r["group"]): r for r in data["recommendations"]}


# ---- fast: rendering, validation and arithmetic, no Spark -----------------------------------------


@pytest.mark.spark_independent
def test_lifecycle_document_is_one_s3_accepts_and_reads_back(s3, bucket) -> None:  # type: ignore[no-untyped-def]
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    rules = [
        noncurrent_rule(bucket, "", "prefix bucket root", 30),
        noncurrent_rule(bucket, "tmp/", "prefix tmp/", 30),
        noncurrent_rule(bucket, "warehouse/events/", "table events", 30),
    ]
    document = json.loads(json.dumps(lifecycle_configuration(rules)))  # as the AWS CLI reads it
    assert document["Rules"][2] == {
        "ID": "noncurrent-table-events",
        "Status": "Enabled",
        "Filter": {"Prefix": "warehouse/events/"},
        "NoncurrentVersionExpiration": {"NoncurrentDays": 30},
        "Expiration": {"ExpiredObjectDeleteMarker": True},
    }
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration=document)
    assert s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"] == document["Rules"]
    # the server checks what AWS checks: a delete-marker flag beside Days is refused
    invalid = json.loads(json.dumps(document))
    invalid["Rules"][0]["Expiration"]["Days"] = 30
    with pytest.raises(s3.exceptions.ClientError, match="MalformedXML"):
        s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration=invalid)


@pytest.mark.spark_independent
def test_terraform_block_parses_and_carries_the_same_rules() -> None:
    awkward = 'logs/"quoted"/${not_a_variable}/%{nor_a_directive}/back\\slash/'
    rules = [
        noncurrent_rule("my.lake-1", "warehouse/events/", "table events", 7),
        noncurrent_rule("my.lake-1", awkward, "prefix logs/", 7),
        noncurrent_rule("my.lake-1", "", "prefix bucket root", 7),
    ]
    bucket, parsed = _rules_of_terraform(terraform_block("my.lake-1", rules))
    assert bucket == "my.lake-1"
    assert parsed == lifecycle_configuration(rules)["Rules"]
    assert parsed[1]["Filter"]["Prefix"] == awkward
    assert terraform_name("my.lake-1") == "my_lake-1" and terraform_name("2024.logs") == "_2024_logs"
    assert rule_id("noncurrent table events") == "noncurrent-table-events"
    long = rule_id("noncurrent prefix " + "x" * 400)
    assert len(long) == MAX_RULE_ID and long != rule_id("noncurrent prefix " + "x" * 401)
    with pytest.raises(ValueError, match="NoncurrentDays >= 1"):
        noncurrent_rule("lake", "", "prefix bucket root", 0)
    with pytest.raises(ValueError, match="one bucket"):
        lifecycle_configuration([noncurrent_rule("a", "", "x", 1), noncurrent_rule("b", "", "x", 1)])


@pytest.mark.spark_independent
def test_noncurrent_savings_per_table_and_prefix_by_hand() -> None:
    warnings: list[str] = []
    runs_only = NoncurrentBucket("lake2", 7, 7_000, 1, 0.0, None, "inventory_runs", "STANDARD")
    noncurrent = replace(_noncurrent_by_hand(), buckets=(runs_only,))
    found = {r.group: r for r in noncurrent_advice(noncurrent, REGISTRY, 30, warnings)}
    assert set(found) == {"events", "lake/tmp/", "lake/warehouse/", "lake/", "ghost"}
    events = found["events"]
    assert (events.objects, events.bytes, events.delete_markers) == (5, 3_100_000, 4)
    assert events.monthly_saving == pytest.approx(SAVING_EVENTS, rel=1e-12)
    assert events.storage_classes["STANDARD_IA"].monthly_cost == pytest.approx(
        221_072 * 0.0125 / GIB, rel=1e-12
    )
    assert events.rule is not None and events.rule.to_aws()["Filter"] == {"Prefix": "warehouse/events/"}
    assert events.rule.noncurrent_days == 30 and events.owner == "growth"
    assert found["lake/tmp/"].monthly_saving == pytest.approx(SAVING_TMP, rel=1e-12)
    assert found["lake/tmp/"].rule.prefix == "tmp/"  # type: ignore[union-attr]
    beside = found["lake/warehouse/"]  # unowned, beside the tables: the rule covers them too
    assert beside.rule is not None and beside.rule.prefix == "warehouse/"
    assert "also holds table(s) events, users" in beside.how
    assert beside.monthly_saving == pytest.approx(SAVING_WAREHOUSE, rel=1e-12)
    root = found["lake/"]  # no filter selects only the root's keys: a report, not a bucket-wide rule
    assert root.rule is None and root.prefix == "" and "no rule is written" in root.how
    assert root.monthly_saving == pytest.approx(SAVING_ROOT, rel=1e-12)
    assert (
        found["ghost"].rule is None
        and found["ghost"].prefix is None
        and "not registered" in found["ghost"].how
    )
    [warning] = warnings
    assert "bucket lake2" in warning and "only from inventory_runs" in warning

    advice = advise(found.values(), 30, 90, warnings)
    [lake] = advice.buckets
    assert [rule.prefix for rule in lake.rules] == ["tmp/", "warehouse/", "warehouse/events/"]
    assert lake.monthly_saving == pytest.approx(SAVING_EVENTS + SAVING_TMP + SAVING_WAREHOUSE, rel=1e-12)
    assert advice.monthly_saving_reported == pytest.approx(1_000 * 0.023 / GIB + SAVING_ROOT, rel=1e-12)

    assert [r.group for r in advice.recommendations] == [
        "events",
        "ghost",
        "lake/warehouse/",
        "lake/tmp/",
        "lake/",
    ]


@pytest.mark.spark_independent
def test_small_and_old_unowned_savings_by_hand() -> None:
    found = {
        (r.kind, r.bucket, r.group): r
        for r in current_advice(_current_rows_by_hand(), load_prices(), REGISTRY, unowned_age_days=90)
    }
    assert set(found) == {
        (SMALL_OBJECTS, "lake", "events"),
        (SMALL_OBJECTS, "lake", "users"),
        (SMALL_OBJECTS, "lake", "lake/tmp/"),
        (OLD_UNOWNED_OBJECTS, "lake", "lake/tmp/"),
        (OLD_UNOWNED_OBJECTS, "lake2", "lake2/"),
        (OLD_UNOWNED_OBJECTS, "lake2", "lake2/arch/"),
    }
    expected = {
        (SMALL_OBJECTS, "lake", "events"): (1, 10_000, SAVING_SMALL_EVENTS, "warehouse/events/"),
        (SMALL_OBJECTS, "lake", "users"): (1, 1_000, SAVING_SMALL_USERS, "warehouse/users/"),
        (SMALL_OBJECTS, "lake", "lake/tmp/"): (1, 3_000, SAVING_SMALL_TMP, "tmp/"),
        (OLD_UNOWNED_OBJECTS, "lake", "lake/tmp/"): (3, 5_006_000, SAVING_OLD_TMP, "tmp/"),
        (OLD_UNOWNED_OBJECTS, "lake2", "lake2/"): (1, 50, SAVING_OLD_LAKE2_ROOT, ""),
        (OLD_UNOWNED_OBJECTS, "lake2", "lake2/arch/"): (1, 10, SAVING_OLD_LAKE2_ARCH, "arch/"),
    }
    for index, (objects, size, saving, prefix) in expected.items():
        found_one = found[index]
        assert (found_one.objects, found_one.bytes, found_one.prefix) == (objects, size, prefix), index
        assert found_one.monthly_saving == pytest.approx(saving, rel=1e-12), index
        assert found_one.rule is None, (
            "a report: no lifecycle rule moves objects to STANDARD or deletes unowned"
        )
    assert "No lifecycle rule transitions objects to STANDARD" in found[SMALL_OBJECTS, "lake", "events"].how
    assert found[SMALL_OBJECTS, "lake", "users"].owner == "identity"


def _report_with(advice: Any) -> ChargebackReport:
    empty = Tally()
    return ChargebackReport(
        "owner",
        "USD",
        "2026-11-22",
        "prices.yaml",
        "s3://meta/inventory",
        {},
        {},
        {},
        empty,
        {},
        empty,
        advice=advice,
    )


@pytest.mark.spark_independent
def test_every_format_shows_the_advice_and_none_without_it() -> None:
    recommendations = noncurrent_advice(_noncurrent_by_hand(), REGISTRY, 30, [])
    recommendations += current_advice(_current_rows_by_hand(), load_prices(), REGISTRY, 90)
    advice = advise(recommendations, 30, 90, [])
    plain, advised = _report_with(None), _report_with(advice)
    assert "advice" not in plain.to_dict()
    assert {k: v for k, v in advised.to_dict().items() if k != "advice"} == plain.to_dict()
    data = advised.to_dict()["advice"]
    assert data["monthly_saving_by_rules"] == round(SAVING_EVENTS + SAVING_TMP + SAVING_WAREHOUSE, 10)
    [lake] = data["lifecycle"]
    assert lake["apply"].startswith("aws s3api put-bucket-lifecycle-configuration --bucket lake ")
    assert _rules_of_terraform(lake["terraform"]) == ("lake", lake["lifecycle_configuration"]["Rules"])
    assert any("effect on future writes is not included" in n for n in data["notes"])

    text = render_text(advised)
    assert "recommendations" not in render_text(plain) and "recommendations (USD saved" in text
    assert json.dumps(lake["lifecycle_configuration"], indent=2) in text
    assert lake["terraform"].rstrip("\n") in text
    assert "rule noncurrent-table-events" in text and "future writes is not included" in text

    rows = [r for r in csv.DictReader(io.StringIO(render_csv(advised))) if r["section"] == "advice"]
    assert not [r for r in csv.DictReader(io.StringIO(render_csv(plain))) if r["section"] == "advice"]
    totals = {r["group"]: r for r in rows if not r["storage_class"]}
    assert float(totals[f"{NONCURRENT_VERSIONS}: lake: events"]["monthly_cost"]) == round(SAVING_EVENTS, 10)
    assert totals[f"{OLD_UNOWNED_OBJECTS}: lake: lake/tmp/"]["bytes"] == "5006000"

    page = render_html(advised)
    assert 'id="recommendations"' in page and 'id="recommendations"' not in render_html(plain)
    assert money(round(SAVING_OLD_TMP, 10)) in page and "noncurrent-table-events" in page
    assert "&quot;ExpiredObjectDeleteMarker&quot;: true" in page
    assert "<script" not in page and "https://" not in page


# ---- with Spark: the hand-made inventory and usage table, through build_report and the command ----


@pytest.fixture(scope="module")
def world(spark, tmp_path_factory) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("advice")
    inventory = f"file://{root}/inventory"
    rows = []
    for bucket, key, length, storage_class, table, age in OBJECTS:
        modified = int((TAKEN - timedelta(days=age)).timestamp() * 1000)
        rows.append(
            (f"s3://{bucket}/{key}", length, False, modified, bucket, key, storage_class, None, False, None)
            + (None, None, True, False, DAY, TAKEN, table)
        )
    spark.createDataFrame(rows, INVENTORY_TABLE_SCHEMA).write.format("delta").partitionBy("bucket").save(
        inventory
    )
    usage = [
        (r["bucket"], DAY, TAKEN, r["state"], r["table"], r["prefix"], r["storage_class"], None)
        + (r["objects"], r["bytes"], r["small_objects"], r["small_bytes"])
        for r in _usage_rows()
    ]
    spark.createDataFrame(usage, USAGE_SCHEMA).write.format("delta").partitionBy("bucket").save(
        f"file://{root}/inventory_usage"
    )
    spark.createDataFrame(
        [("lake2", datetime(2026, 11, 20, tzinfo=timezone.utc), "ok", 7, 7_000, 1, TAKEN)],
        "bucket string, run_at timestamp, status string, noncurrent_objects long, noncurrent_bytes long, "
        "delete_markers long, inventory_taken_at timestamp",
    ).write.format("delta").save(f"file://{root}/inventory_runs")
    tables = root / "tables.yaml"
    tables.write_text(TABLES_YAML)
    return {"root": root, "inventory": inventory, "tables": str(tables)}


@pytest.mark.slow
def test_build_report_advises_exact_savings(spark, world) -> None:  # type: ignore[no-untyped-def]
    root = world["root"]
    report = build_report(
        spark,
        world["inventory"],
        REGISTRY,
        parse_group_by("owner"),
        load_prices(),
        inventory_runs_table=f"file://{root}/inventory_runs",
        usage_table=f"file://{root}/inventory_usage",
        trend_days=0,
        advise=True,
        restore_window_days=7,
    )
    data = report.to_dict()["advice"]
    assert (data["restore_window_days"], data["unowned_age_days"]) == (7, 90)
    found = _by_kind_and_group(data)
    expected = {
        (NONCURRENT_VERSIONS, "lake", "events"): (5, 3_100_000, 4, SAVING_EVENTS),
        (NONCURRENT_VERSIONS, "lake", "lake/tmp/"): (1, 70, 1, SAVING_TMP),
        (NONCURRENT_VERSIONS, "lake", "lake/warehouse/"): (1, 300, 0, SAVING_WAREHOUSE),
        (NONCURRENT_VERSIONS, "lake", "lake/"): (1, 5, 0, SAVING_ROOT),
        (NONCURRENT_VERSIONS, "lake", "ghost"): (1, 1_000, 0, 1_000 * 0.023 / GIB),
        (SMALL_OBJECTS, "lake", "events"): (1, 10_000, 0, SAVING_SMALL_EVENTS),
        (SMALL_OBJECTS, "lake", "users"): (1, 1_000, 0, SAVING_SMALL_USERS),
        (SMALL_OBJECTS, "lake", "lake/tmp/"): (1, 3_000, 0, SAVING_SMALL_TMP),
        (OLD_UNOWNED_OBJECTS, "lake", "lake/tmp/"): (3, 5_006_000, 0, SAVING_OLD_TMP),
        (OLD_UNOWNED_OBJECTS, "lake2", "lake2/"): (1, 50, 0, SAVING_OLD_LAKE2_ROOT),
        (OLD_UNOWNED_OBJECTS, "lake2", "lake2/arch/"): (1, 10, 0, SAVING_OLD_LAKE2_ARCH),
    }
    assert set(found) == set(expected)
    for index, (objects, size, markers, saving) in expected.items():
        got = found[index]
        assert (got["objects"], got["bytes"], got["delete_markers"]) == (objects, size, markers), index
        assert got["monthly_saving"] == pytest.approx(saving, abs=1e-10), index
    by_rules = SAVING_EVENTS + SAVING_TMP + SAVING_WAREHOUSE
    assert data["monthly_saving_by_rules"] == pytest.approx(by_rules, abs=1e-10)
    assert data["monthly_saving"] == pytest.approx(
        by_rules
        + SAVING_ROOT
        + 1_000 * 0.023 / GIB
        + SAVING_SMALL_EVENTS
        + SAVING_SMALL_USERS
        + SAVING_SMALL_TMP
        + SAVING_OLD_TMP
        + SAVING_OLD_LAKE2_ROOT
        + SAVING_OLD_LAKE2_ARCH,
        abs=1e-10,
    )
    [lake] = data["lifecycle"]
    assert [rule["Filter"]["Prefix"] for rule in lake["lifecycle_configuration"]["Rules"]] == [
        "tmp/",
        "warehouse/",
        "warehouse/events/",
    ]
    assert {
        rule["NoncurrentVersionExpiration"]["NoncurrentDays"]
        for rule in lake["lifecycle_configuration"]["Rules"]
    } == {7}
    assert any("bucket lake2" in w and "inventory_runs" in w for w in data["warnings"])
    # the noncurrent section the advice is built from is the report's own
    events = next(g for g in report.noncurrent.groups if g.group == "events")  # type: ignore[union-attr]
    assert found[NONCURRENT_VERSIONS, "lake", "events"]["monthly_saving"] == events.monthly_cost


@pytest.mark.slow
def test_command_json_is_unchanged_without_advise_and_applies_with_it(
    spark, world, s3, bucket_factory
) -> None:  # type: ignore[no-untyped-def]
    base = (
        "chargeback",
        "--inventory-table",
        world["inventory"],
        "--tables",
        world["tables"],
        "--trend-days",
        "0",
    )
    code, text = cli(*base, "--format", "json")
    assert code == 0, text
    plain = json.loads(text)
    assert "advice" not in plain
    root = world["root"]
    library = build_report(
        spark,
        world["inventory"],
        REGISTRY,
        parse_group_by("owner"),
        load_prices(),
        vacuum_runs_table=f"file://{root}/vacuum_runs",
        inventory_runs_table=f"file://{root}/inventory_runs",
        usage_table=f"file://{root}/inventory_usage",
        trend_days=0,
    )
    assert plain == json.loads(json.dumps(library.to_dict(), default=str))
    code, text = cli(*base, "--format", "json", "--advise", "--restore-window-days", "14")
    assert code == 0, text
    advised = json.loads(text)
    advice = advised.pop("advice")
    assert advised == plain
    assert advice["restore_window_days"] == 14
    [lake] = advice["lifecycle"]
    target = bucket_factory("lake")
    s3.put_bucket_versioning(Bucket=target, VersioningConfiguration={"Status": "Enabled"})
    s3.put_bucket_lifecycle_configuration(
        Bucket=target, LifecycleConfiguration=lake["lifecycle_configuration"]
    )
    assert (
        s3.get_bucket_lifecycle_configuration(Bucket=target)["Rules"]
        == lake["lifecycle_configuration"]["Rules"]
    )
    code, text = cli(*base, "--advise", "--unowned-age-days", "366")
    assert code == 0
    assert "old unowned objects" not in text and "small objects" in text
    assert "noncurrent versions kept 30 days" in text


@pytest.mark.slow
def test_a_versioned_bucket_ingested_gets_its_rule(spark, s3, bucket_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """End to end: a delivery of every version, ingested; the advice's rule and saving are those of
    the noncurrent versions S3 holds."""
    from core.paths import StorageLocation
    from inventory.delivery_writer import snapshot_bucket
    from tests.support.helpers import cli_json

    source, inventory = bucket_factory("src"), bucket_factory("inv")
    s3.put_bucket_versioning(Bucket=source, VersioningConfiguration={"Status": "Enabled"})
    tables = tmp_path / "tables.yaml"
    tables.write_text(f"tables:\n  - {{name: events, path: s3://{source}/warehouse/events, owner: growth}}\n")
    s3.put_object(Bucket=source, Key="warehouse/events/a", Body=b"a" * 3_000)
    s3.put_object(Bucket=source, Key="warehouse/events/a", Body=b"a" * 2_000)  # 3,000 B noncurrent
    s3.put_object(Bucket=source, Key="warehouse/events/b", Body=b"b" * 500)
    s3.delete_object(Bucket=source, Key="warehouse/events/b")  # 500 B noncurrent, a delete marker
    snapshot_bucket(
        s3,
        source,
        StorageLocation.parse(f"s3://{inventory}/reports"),
        "daily",
        versions="all",
        file_format="parquet",
    )
    table = f"s3://{inventory}/tables/inventory"
    ingest = ("ingest", "--destination", f"s3://{inventory}/reports", "--source-bucket", source)
    assert (
        cli_json(*ingest, "--config-id", "daily", "--inventory-table", table, "--tables", str(tables))[0] == 0
    )
    code, text = cli(
        "chargeback",
        "--inventory-table",
        table,
        "--tables",
        str(tables),
        "--trend-days",
        "0",
        "--advise",
        "--json",
    )
    assert code == 0, text
    advice = json.loads(text)["advice"]
    [rule] = [r for r in advice["recommendations"] if r["kind"] == NONCURRENT_VERSIONS]
    assert (rule["group"], rule["objects"], rule["bytes"], rule["delete_markers"]) == ("events", 2, 3_500, 1)
    assert rule["monthly_saving"] == round(3_500 * 0.023 / GIB, 10)  # the JSON holds 10 decimals
    [document] = advice["lifecycle"]
    assert document["lifecycle_configuration"]["Rules"] == [rule["lifecycle_rule"]]
    assert rule["lifecycle_rule"]["Filter"] == {"Prefix": "warehouse/events/"}
    s3.put_bucket_lifecycle_configuration(
        Bucket=source, LifecycleConfiguration=document["lifecycle_configuration"]
    )
    assert s3.get_bucket_lifecycle_configuration(Bucket=source)["Rules"] == [rule["lifecycle_rule"]]
