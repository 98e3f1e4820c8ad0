"""infra/terraform, checked offline: no AWS account.

- The Terraform is parsed with python-hcl2: every resource the docs promise is there, and the
  vacuum role's only ``s3:DeleteObject`` is built from the tables.yaml-derived local, ``<key>/*``.
- checkov (infra/checkov.sh, its own virtualenv) finds nothing that is not skipped with a reason.
- Where terraform and a local copy of the AWS provider exist, ``terraform validate`` and a
  ``terraform plan`` against a moto server run too, and the per-table statements Terraform
  renders are compared with jobs.iam_policy's.

What none of this proves: that AWS accepts the configuration (no apply against AWS), or that the
jobs run on EMR Serverless with these roles.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from core.paths import StorageLocation
from core.registry import load_registry
from jobs.iam_policy import table_statements
from tests.support.iam import (
    EXAMPLE_TABLES,
    ROOT,
    TERRAFORM,
)

pytestmark = pytest.mark.spark_independent

# ---- The Terraform, parsed -----------------------------------------------------------------------


def _load_hcl(path: Path) -> dict[str, Any]:
    import hcl2

    options = hcl2.SerializationOptions(with_comments=False, explicit_blocks=False, strip_string_quotes=True)
    with path.open(encoding="utf-8") as handle:
        return dict(hcl2.load(handle, serialization_options=options))


@pytest.fixture(scope="module")
def tf() -> dict[str, Any]:
    """All .tf files merged: resource/data as {type: {name: body}}, locals, variables, outputs."""
    merged: dict[str, Any] = {"resource": {}, "data": {}, "locals": {}, "variable": {}, "output": {}}
    for path in sorted(TERRAFORM.glob("*.tf")):
        document = _load_hcl(path)
        for kind in ("resource", "data"):
            for block in document.get(kind, []):
                for type_name, named in block.items():
                    merged[kind].setdefault(type_name, {}).update(named)
        for block in document.get("locals", []):
            merged["locals"].update(block)
        for kind in ("variable", "output"):
            for block in document.get(kind, []):
                merged[kind].update(block)
    return merged


def _statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    return list(document.get("statement", []))


def _by_sid(document: dict[str, Any], sid: str) -> dict[str, Any]:
    return next(statement for statement in _statements(document) if statement.get("sid") == sid)


def _conditions(statement: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {condition["variable"]: condition for condition in statement.get("condition", [])}


def test_every_promised_resource_is_there(tf: dict[str, Any]) -> None:
    resources = tf["resource"]
    promised = {
        "aws_s3_bucket_inventory": ["source"],
        "aws_s3_bucket": ["destination"],
        "aws_s3_bucket_policy": ["destination"],
        "aws_s3_bucket_server_side_encryption_configuration": ["destination"],
        "aws_s3_bucket_public_access_block": ["destination"],
        "aws_s3_bucket_lifecycle_configuration": ["destination"],
        "aws_iam_role": ["ingest", "vacuum", "chargeback", "states", "scheduler"],
        "aws_emrserverless_application": ["this"],
        "aws_sfn_state_machine": ["daily"],
        "aws_scheduler_schedule": ["daily"],
        "aws_sns_topic": ["alerts"],
        "aws_sns_topic_subscription": ["email"],
        "aws_cloudwatch_log_group": ["jobs", "states"],
        "aws_kms_key": ["this"],
    }
    missing = [
        f"{kind}.{name}"
        for kind, names in promised.items()
        for name in names
        if name not in resources.get(kind, {})
    ]
    assert not missing
    assert set(tf["output"]) >= {
        "ingest_role_arn",
        "vacuum_role_arn",
        "chargeback_role_arn",
        "application_id",
        "state_machine_arn",
        "alerts_topic_arn",
        "destination_bucket",
    }
    access = resources["aws_s3_bucket_public_access_block"]["destination"]
    assert all(
        access[flag] is True
        for flag in (
            "block_public_acls",
            "block_public_policy",
            "ignore_public_acls",
            "restrict_public_buckets",
        )
    )


def test_inventory_configuration_is_daily_parquet_with_the_fields_the_jobs_read(tf: dict[str, Any]) -> None:
    inventory = tf["resource"]["aws_s3_bucket_inventory"]["source"]
    assert inventory["for_each"] == "${var.source_buckets}"
    assert inventory["included_object_versions"] == "${each.value.versions}"
    assert inventory["schedule"][0]["frequency"] == "Daily"
    destination = inventory["destination"][0]["bucket"][0]
    assert destination["format"] == "Parquet"
    assert destination["bucket_arn"] == "${aws_s3_bucket.destination.arn}"
    assert destination["prefix"] == "${var.inventory_prefix}"
    assert set(inventory["optional_fields"]) == {
        "Size",
        "LastModifiedDate",
        "StorageClass",
        "ETag",
        "IsMultipartUploaded",
        "EncryptionStatus",
        "IntelligentTieringAccessTier",
    }
    versions = tf["variable"]["source_buckets"]["validation"][0]["condition"]
    assert '"Current"' in versions and '"All"' in versions


def test_destination_bucket_policy_lets_only_s3_inventory_of_the_source_buckets_write(
    tf: dict[str, Any],
) -> None:
    policy = tf["data"]["aws_iam_policy_document"]["destination"]
    (statement,) = _statements(policy)
    assert statement["actions"] == ["s3:PutObject"]
    assert statement["principals"][0]["identifiers"] == ["s3.amazonaws.com"]
    assert statement["resources"] == ["${aws_s3_bucket.destination.arn}/${var.inventory_prefix}/*"]
    conditions = _conditions(statement)
    assert conditions["aws:SourceAccount"]["test"] == "StringEquals"
    assert conditions["aws:SourceAccount"]["values"] == ["${local.account_id}"]
    assert conditions["aws:SourceArn"]["test"] == "ArnLike"
    assert "keys(var.source_buckets)" in conditions["aws:SourceArn"]["values"]
    assert conditions["s3:x-amz-acl"]["values"] == ["bucket-owner-full-control"]
    bucket_policy = tf["resource"]["aws_s3_bucket_policy"]["destination"]
    assert bucket_policy["policy"] == "${data.aws_iam_policy_document.destination.json}"


def test_destination_is_encrypted_and_old_deliveries_expire(tf: dict[str, Any]) -> None:
    encryption = tf["resource"]["aws_s3_bucket_server_side_encryption_configuration"]["destination"]
    default = encryption["rule"][0]["apply_server_side_encryption_by_default"][0]
    assert default["sse_algorithm"] == "aws:kms"
    assert tf["resource"]["aws_kms_key"]["this"]["enable_key_rotation"] is True

    lifecycle = tf["resource"]["aws_s3_bucket_lifecycle_configuration"]["destination"]
    expire = next(rule for rule in lifecycle["rule"] if rule["id"] == "expire-inventory-deliveries")
    assert expire["filter"][0]["prefix"] == "${var.inventory_prefix}/"
    assert expire["expiration"][0]["days"] == "${var.inventory_expiration_days}"
    assert tf["variable"]["inventory_expiration_days"]["default"] == 14
    # nothing but the deliveries expires: the only other rule aborts unfinished uploads
    others = [rule for rule in lifecycle["rule"] if rule is not expire]
    assert all("expiration" not in rule and "abort_incomplete_multipart_upload" in rule for rule in others)
    # and a precondition keeps every Delta table out of the expiring prefix
    assert "delta_keys_in_destination" in lifecycle["lifecycle"][0]["precondition"][0]["condition"]


def test_three_job_roles_trust_only_emr_serverless_of_this_application(tf: dict[str, Any]) -> None:
    trust = tf["data"]["aws_iam_policy_document"]["job_trust"]
    (statement,) = _statements(trust)
    assert statement["principals"][0]["identifiers"] == ["emr-serverless.amazonaws.com"]
    conditions = _conditions(statement)
    assert conditions["aws:SourceArn"]["values"] == [
        "${aws_emrserverless_application.this.arn}",
        "${aws_emrserverless_application.this.arn}/jobruns/*",
    ]
    assert conditions["aws:SourceAccount"]["values"] == ["${local.account_id}"]
    for role in ("ingest", "vacuum", "chargeback"):
        assert (
            tf["resource"]["aws_iam_role"][role]["assume_role_policy"]
            == "${data.aws_iam_policy_document.job_trust.json}"
        )
        assert (
            tf["resource"]["aws_iam_role_policy"][role]["policy"]
            == f"${{data.aws_iam_policy_document.{role}.json}}"
        )
    common = tf["data"]["aws_iam_policy_document"]["job_common"]
    logs = _by_sid(common, "WriteJobLogs")
    assert set(logs["actions"]) == {"logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"}
    assert "aws_cloudwatch_log_group.jobs.arn" in json.dumps(logs["resources"])


def test_vacuum_deletes_only_inside_the_tables_of_tables_yaml(tf: dict[str, Any]) -> None:
    # the table list comes from the file the jobs read, parsed in locals
    assert tf["locals"]["registry"] == "${yamldecode(file(var.tables_yaml))}"
    assert "local.registry.tables" in tf["locals"]["tables"]
    assert "local.s3_path_pattern" in tf["locals"]["tables"]
    assert "sort(keys(local.tables))" in tf["locals"]["table_chunks"]

    tables = tf["data"]["aws_iam_policy_document"]["vacuum_tables"]
    delete = _by_sid(tables, "DeleteOnlyInsideRegisteredTables")
    assert delete["actions"] == ["s3:DeleteObject"]
    resources = delete["resources"]
    assert "for name in local.table_chunks[count.index]" in resources
    # <bucket>/<key>/* : the slash keeps events/* from reaching events_v2/
    assert (
        '"arn:${local.partition}:s3:::${local.tables[name].bucket}/${local.tables[name].key}/*"' in resources
    )
    logs = _by_sid(tables, "WriteTableLogs")
    assert logs["actions"] == ["s3:PutObject"]
    assert "${local.tables[name].key}/_delta_log/*" in logs["resources"]

    # no other policy document, bucket policy or key policy grants a delete, or s3:*
    for path in TERRAFORM.glob("*.tf"):
        text = path.read_text(encoding="utf-8")
        for action in re.findall(r'"(s3:[A-Za-z*]+)"', text):
            assert action == "s3:DeleteObject" or "Delete" not in action, (path.name, action)
            assert "*" not in action, (path.name, action)
        deletes = text.count('"s3:DeleteObject"')
        assert deletes == (1 if path.name == "iam.tf" else 0), path.name
    assert tf["resource"]["aws_iam_policy"]["vacuum_tables"]["policy"] == (
        "${data.aws_iam_policy_document.vacuum_tables[count.index].json}"
    )
    assert (
        tf["resource"]["aws_iam_role_policy_attachment"]["vacuum_tables"]["role"]
        == "${aws_iam_role.vacuum.name}"
    )


def test_terraform_parses_tables_yaml_as_the_registry_does(tf: dict[str, Any]) -> None:
    """The Terraform path pattern, applied with Python's re, gives StorageLocation's bucket and key."""
    pattern = tf["locals"]["s3_path_pattern"]
    registry = load_registry(str(EXAMPLE_TABLES))
    assert [t.name for t in registry.tables] == ["events", "events_v2", "users"]
    for table in registry.tables:
        match = re.match(pattern, table.path.strip())
        assert match, table.path
        assert (match[1], match[2]) == (table.location.bucket, table.location.key)
    for path in ("file:///tmp/t", "s3://lake", "s3://lake/", "gs://lake/t"):
        assert not re.match(pattern, path), path
    for path in ("S3://lake/a/b//", "s3n://lake/a"):
        location = StorageLocation.parse(path)
        match = re.match(pattern, path)
        assert match and (match[1], match[2]) == (location.bucket, location.key)


def test_the_daily_run_chains_the_three_jobs_and_alerts_on_failure(tf: dict[str, Any]) -> None:
    locals_ = tf["locals"]
    states = locals_["job_states"]
    assert "emr-serverless:startJobRun.sync" in states
    assert "Catch" in states and '"States.ALL"' in states and "Notify${name}Failed" in states
    assert "aws_cloudwatch_log_group.jobs.name" in states  # the job runs' monitoringConfiguration
    notify = locals_["notify_states"]
    assert "states:::sns:publish" in notify and "aws_sns_topic.alerts.arn" in notify and '"Failed"' in notify
    assert locals_["jobs"]["Ingest"]["entry_point"] == "${local.code_uri}/jobs/ingest_inventory.py"
    assert locals_["jobs"]["Vacuum"]["entry_point"] == "${local.code_uri}/jobs/vacuum_tables.py"
    assert locals_["jobs"]["Chargeback"]["entry_point"] == "${local.code_uri}/jobs/chargeback_report.py"
    assert locals_["jobs"]["Ingest"]["next"] == "Vacuum"
    for script in ("ingest_inventory.py", "vacuum_tables.py", "chargeback_report.py"):
        assert (ROOT / "jobs" / script).is_file()

    schedule = tf["resource"]["aws_scheduler_schedule"]["daily"]
    assert schedule["target"][0]["arn"] == "${aws_sfn_state_machine.daily.arn}"
    assert tf["variable"]["schedule_expression"]["default"] == "cron(0 6 * * ? *)"
    assert tf["variable"]["schedule_timezone"]["default"] == "UTC"
    assert tf["variable"]["vacuum_dry_run"]["default"] is True
    assert tf["variable"]["release_label"]["default"] == "emr-spark-8.0.0"

    role = tf["data"]["aws_iam_policy_document"]["states"]
    passing = _by_sid(role, "PassTheJobRolesToEmrServerless")
    assert passing["actions"] == ["iam:PassRole"]
    assert passing["resources"] == [
        "${aws_iam_role.ingest.arn}",
        "${aws_iam_role.vacuum.arn}",
        "${aws_iam_role.chargeback.arn}",
    ]
    assert _conditions(passing)["iam:PassedToService"]["values"] == ["emr-serverless.amazonaws.com"]
    scheduler = tf["data"]["aws_iam_policy_document"]["scheduler"]
    assert _by_sid(scheduler, "StartTheDailyRun")["resources"] == ["${aws_sfn_state_machine.daily.arn}"]


def test_every_variable_is_described_and_the_example_sets_the_required_ones(tf: dict[str, Any]) -> None:
    variables = tf["variable"]
    assert all(body.get("description") for body in variables.values())
    required = {name for name, body in variables.items() if "default" not in body}
    example = _load_hcl(TERRAFORM / "terraform.tfvars.example")
    assert required <= set(example), required - set(example)
    assert example["tables_yaml"] == "tables.yaml.example"


def test_every_checkov_skip_says_why() -> None:
    skips = []
    for path in TERRAFORM.glob("*.tf"):
        skips += re.findall(r"#checkov:skip=(CKV\w+)(.*)", path.read_text(encoding="utf-8"))
    assert skips
    for check, reason in skips:
        assert re.match(r":\s*\S.{20,}", reason), (check, reason)


@pytest.mark.slow
def test_checkov_finds_nothing_unexplained() -> None:
    started = time.monotonic()
    result = subprocess.run(
        ["bash", str(ROOT / "infra" / "checkov.sh")], capture_output=True, text=True, timeout=900, check=False
    )
    if result.returncode == 75:
        pytest.skip(f"checkov's virtualenv could not be created: {result.stderr.strip()[-300:]}")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert re.search(r"Failed checks: 0\b", output), output[-4000:]
    print(f"checkov: {time.monotonic() - started:.1f}s; {re.search(r'Passed checks.*', output)}")


# ---- Terraform itself, where it and the AWS provider are installed ----------------------------------


def _provider_mirror() -> Path | None:
    candidates = [
        os.environ.get("INVENTORY_VACUUM_TF_PLUGIN_DIR"),
        "/opt/tf-plugins",
        "~/.terraform.d/plugins",
    ]
    for candidate in candidates:
        if candidate and (Path(candidate).expanduser() / "registry.terraform.io/hashicorp/aws").is_dir():
            return Path(candidate).expanduser()
    return None


MOTO_PROVIDER = """
provider "aws" {{
  region                      = var.region
  access_key                  = "test"
  secret_key                  = "test"
  skip_credentials_validation = true
  skip_metadata_api_check     = true
  s3_use_path_style           = true
  endpoints {{
    s3            = "{endpoint}"
    sts           = "{endpoint}"
    iam           = "{endpoint}"
    kms           = "{endpoint}"
    logs          = "{endpoint}"
    sns           = "{endpoint}"
    sfn           = "{endpoint}"
    scheduler     = "{endpoint}"
    emrserverless = "{endpoint}"
  }}
}}
"""


def _normalised(statements: list[dict[str, Any]]) -> list[str]:
    """Statements as sorted JSON, lists sorted: Terraform renders one-item lists as strings."""

    def listed(value: Any) -> list[Any]:
        return sorted([value] if isinstance(value, str) else value)

    out = []
    for statement in statements:
        copy = dict(statement)
        copy["Action"], copy["Resource"] = listed(copy["Action"]), listed(copy["Resource"])
        if "Condition" in copy:
            copy["Condition"] = {
                test: {key: listed(values) for key, values in keys.items()}
                for test, keys in copy["Condition"].items()
            }
        out.append(json.dumps(copy, sort_keys=True))
    return sorted(out)


@pytest.mark.slow
def test_terraform_validates_and_plans_the_policy_inventory_iam_renders(
    tmp_path: Path, moto_endpoint: str
) -> None:
    terraform = shutil.which("terraform")
    mirror = _provider_mirror()
    if not terraform or not mirror:
        pytest.skip(
            "terraform or a local copy of the AWS provider (INVENTORY_VACUUM_TF_PLUGIN_DIR) is not installed"
        )
    work = tmp_path / "terraform"
    shutil.copytree(
        TERRAFORM, work, ignore=shutil.ignore_patterns(".terraform*", "*.tfstate*", "terraform.tfvars")
    )
    (work / "terraform.tfvars").write_text(
        (TERRAFORM / "terraform.tfvars.example").read_text(encoding="utf-8")
    )
    (work / "moto_override.tf").write_text(MOTO_PROVIDER.format(endpoint=moto_endpoint))
    env = {key: value for key, value in os.environ.items() if not key.startswith(("AWS_", "TF_"))}
    env.update(TF_IN_AUTOMATION="1", TF_CLI_CONFIG_FILE=os.devnull, CHECKPOINT_DISABLE="1")

    def terraform_run(command: str, *args: str) -> str:
        result = subprocess.run(
            [terraform, f"-chdir={work}", command, "-no-color", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )
        assert result.returncode == 0, f"terraform {command}: {result.stdout[-3000:]}{result.stderr[-3000:]}"
        return result.stdout

    terraform_run("fmt", "-check", "-recursive", "-diff")
    terraform_run("init", "-backend=false", "-input=false", f"-plugin-dir={mirror}")
    terraform_run("validate")
    terraform_run("plan", "-input=false", "-out=plan.bin")
    plan = json.loads(terraform_run("show", "-json", "plan.bin"))
    resources = {r["address"]: r for r in plan["planned_values"]["root_module"]["resources"]}

    # the per-table statements are known at plan time: Terraform's rendering is jobs.iam_policy's
    rendered = json.loads(resources["aws_iam_policy.vacuum_tables[0]"]["values"]["policy"])
    expected = table_statements(load_registry(str(EXAMPLE_TABLES)))
    assert _normalised(rendered["Statement"]) == _normalised(expected)
    assert {
        "aws_sfn_state_machine.daily",
        "aws_scheduler_schedule.daily",
        "aws_emrserverless_application.this",
    } <= set(resources)
