"""infra/terraform, checked offline: no AWS account.

- The Terraform is parsed with python-hcl2: every resource the docs promise is there, the vacuum
  role's only ``s3:DeleteObject`` and the restore role's only ``s3:DeleteObjectVersion`` are built
  from the tables.yaml-derived local, ``<key>/*``, and the source buckets' lifecycle configuration
  is off unless ``noncurrent_expiration_days`` is set.
- checkov (infra/checkov.sh, its own virtualenv) finds nothing that is not skipped with a reason.
- Where terraform and a local copy of the AWS provider exist, ``terraform validate`` and a
  ``terraform plan`` against a moto server run too, the per-table statements Terraform renders
  for the vacuum and restore roles are compared with jobs.iam_policy's, and a second plan sets
  the restore window.

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
from jobs.iam_policy import restore_table_statements, table_statements
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
        "aws_iam_role": ["ingest", "vacuum", "chargeback", "restore", "states", "scheduler"],
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
        "restore_role_arn",
        "restore_entry_point",
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


def test_four_job_roles_trust_only_emr_serverless_of_this_application(tf: dict[str, Any]) -> None:
    trust = tf["data"]["aws_iam_policy_document"]["job_trust"]
    (statement,) = _statements(trust)
    assert statement["principals"][0]["identifiers"] == ["emr-serverless.amazonaws.com"]
    conditions = _conditions(statement)
    assert conditions["aws:SourceArn"]["values"] == [
        "${aws_emrserverless_application.this.arn}",
        "${aws_emrserverless_application.this.arn}/jobruns/*",
    ]
    assert conditions["aws:SourceAccount"]["values"] == ["${local.account_id}"]
    for role in ("ingest", "vacuum", "chargeback", "restore"):
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

    # no other policy document, bucket policy or key policy grants a delete, or s3:*: one
    # s3:DeleteObject (the vacuum's) and one s3:DeleteObjectVersion (the restore's), both in iam.tf
    for path in TERRAFORM.glob("*.tf"):
        text = path.read_text(encoding="utf-8")
        for action in re.findall(r'"(s3:[A-Za-z*]+)"', text):
            assert action in ("s3:DeleteObject", "s3:DeleteObjectVersion") or "Delete" not in action, (
                path.name,
                action,
            )
            assert "*" not in action, (path.name, action)
        for action in ("s3:DeleteObject", "s3:DeleteObjectVersion"):
            assert text.count(f'"{action}"') == (1 if path.name == "iam.tf" else 0), (path.name, action)
    assert tf["resource"]["aws_iam_policy"]["vacuum_tables"]["policy"] == (
        "${data.aws_iam_policy_document.vacuum_tables[count.index].json}"
    )
    assert (
        tf["resource"]["aws_iam_role_policy_attachment"]["vacuum_tables"]["role"]
        == "${aws_iam_role.vacuum.name}"
    )


def _hcl_actions(statement: dict[str, Any]) -> set[str]:
    return set(statement["actions"])


def test_restore_role_deletes_versions_only_inside_the_tables_of_tables_yaml(tf: dict[str, Any]) -> None:
    documents = tf["data"]["aws_iam_policy_document"]
    vacuum = documents["vacuum_tables"]
    restore = documents["restore_tables"]
    assert restore["count"] == vacuum["count"] == "${length(local.table_chunks)}"

    versions = _by_sid(restore, "DeleteVersionsOnlyInsideRegisteredTables")
    assert versions["actions"] == ["s3:DeleteObjectVersion"]
    # built exactly as the vacuum's delete: <bucket>/<key>/* of the tables.yaml-derived local
    assert versions["resources"] == _by_sid(vacuum, "DeleteOnlyInsideRegisteredTables")["resources"]
    # no plain delete, no write
    for statement in _statements(restore):
        assert not _hcl_actions(statement) & {"s3:DeleteObject", "s3:PutObject"}, statement

    # listing: objects and versions, one statement per bucket, always limited by s3:prefix to the
    # tables' prefixes, as the vacuum's listing is
    (listing,) = restore["dynamic"]
    (vacuum_listing,) = vacuum["dynamic"]
    content = listing["statement"]["content"][0]
    assert _hcl_actions(content) == {"s3:ListBucket", "s3:ListBucketVersions"}
    assert listing["statement"]["for_each"] == vacuum_listing["statement"]["for_each"]
    assert content["condition"] == vacuum_listing["statement"]["content"][0]["condition"]
    assert _conditions(content)["s3:prefix"]["test"] == "StringLike"

    # the same statements, by Sid and actions, as jobs.iam_policy renders (the slow test below
    # compares the policies Terraform plans, resource for resource)
    rendered = restore_table_statements(load_registry(str(EXAMPLE_TABLES)))
    expected = {
        s["Sid"]: {s["Action"]} if isinstance(s["Action"], str) else set(s["Action"])
        for s in rendered
        if "Sid" in s
    }
    assert {s["sid"]: _hcl_actions(s) for s in _statements(restore)} == expected
    (rendered_listing,) = {json.dumps(sorted(s["Action"])) for s in rendered if "Sid" not in s}
    assert json.loads(rendered_listing) == sorted(_hcl_actions(content))
    assert _by_sid(restore, "ReadTableVersions")["resources"] == _by_sid(vacuum, "ReadTables")["resources"]

    # the role: EMR Serverless of this application, the table policies attached, the same
    # preconditions on tables.yaml as the vacuum's
    resources = tf["resource"]
    assert (
        resources["aws_iam_role_policy"]["restore"]["policy"]
        == "${data.aws_iam_policy_document.restore.json}"
    )
    assert resources["aws_iam_policy"]["restore_tables"]["policy"] == (
        "${data.aws_iam_policy_document.restore_tables[count.index].json}"
    )
    attachment = resources["aws_iam_role_policy_attachment"]["restore_tables"]
    assert attachment["role"] == "${aws_iam_role.restore.name}"
    assert (
        resources["aws_iam_role"]["restore"]["lifecycle"][0]["precondition"]
        == resources["aws_iam_role"]["vacuum"]["lifecycle"][0]["precondition"]
    )
    # reads the inventory, reads and appends to the vacuum's history and ledger, as the vacuum does
    common = documents["restore"]
    assert documents["restore"]["source_policy_documents"] == [
        "${data.aws_iam_policy_document.job_common.json}"
    ]
    assert _by_sid(common, "WriteVacuumHistory") == _by_sid(documents["vacuum"], "WriteVacuumHistory")
    assert tf["locals"]["restore_meta"] == tf["locals"]["vacuum_meta"]

    # run by hand: not a state of the daily run, and the state machine cannot pass its role
    assert "Restore" not in tf["locals"]["jobs"]
    passing = _by_sid(documents["states"], "PassTheJobRolesToEmrServerless")
    assert "${aws_iam_role.restore.arn}" not in passing["resources"]
    assert tf["output"]["restore_entry_point"]["value"] == "${local.code_uri}/jobs/restore_tables.py"


def test_source_buckets_get_a_lifecycle_configuration_only_when_asked(tf: dict[str, Any]) -> None:
    variable = tf["variable"]["noncurrent_expiration_days"]
    assert variable["default"] is None  # off by default
    assert "REPLACES" in variable["description"]  # a configuration the bucket had is lost
    assert tf["variable"]["noncurrent_expiration_buckets"]["default"] is None  # null: every source bucket

    lifecycle = tf["resource"]["aws_s3_bucket_lifecycle_configuration"]["source"]
    assert lifecycle["for_each"] == "${local.noncurrent_expiration_buckets}"
    assert lifecycle["bucket"] == "${each.key}"
    # null or 0: an empty set, so no configuration is planned
    switch = tf["locals"]["noncurrent_expiration_on"]
    assert switch == "${coalesce(var.noncurrent_expiration_days, 0) > 0}"
    buckets = tf["locals"]["noncurrent_expiration_buckets"]
    assert buckets.startswith("${local.noncurrent_expiration_on ? toset(") and buckets.endswith(
        ": toset([])}"
    )
    assert "keys(var.source_buckets)" in buckets

    # the rule the docs describe: every object of the bucket; noncurrent versions expire after the
    # restore window, then the delete markers left alone; unfinished uploads are aborted
    rules = {rule["id"]: rule for rule in lifecycle["rule"]}
    assert set(rules) == {"expire-noncurrent-versions", "abort-incomplete-uploads"}
    expire = rules["expire-noncurrent-versions"]
    assert expire["status"] == "Enabled"
    assert expire["filter"] == [{}]
    assert expire["noncurrent_version_expiration"] == [
        {"noncurrent_days": "${var.noncurrent_expiration_days}"}
    ]
    assert expire["expiration"] == [{"expired_object_delete_marker": True}]
    abort = rules["abort-incomplete-uploads"]
    assert abort["filter"] == [{}] and abort["abort_incomplete_multipart_upload"] == [
        {"days_after_initiation": 7}
    ]
    assert set(abort) == {"id", "status", "filter", "abort_incomplete_multipart_upload"}
    precondition = lifecycle["lifecycle"][0]["precondition"][0]
    assert precondition["condition"] == "${contains(keys(var.source_buckets), each.key)}"


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
    registry = load_registry(str(EXAMPLE_TABLES))
    rendered = json.loads(resources["aws_iam_policy.vacuum_tables[0]"]["values"]["policy"])
    assert _normalised(rendered["Statement"]) == _normalised(table_statements(registry))
    rendered = json.loads(resources["aws_iam_policy.restore_tables[0]"]["values"]["policy"])
    assert _normalised(rendered["Statement"]) == _normalised(restore_table_statements(registry))
    assert {
        "aws_sfn_state_machine.daily",
        "aws_scheduler_schedule.daily",
        "aws_emrserverless_application.this",
        "aws_iam_role.restore",
    } <= set(resources)
    # off by default: no lifecycle configuration on a source bucket
    assert not [
        address for address in resources if address.startswith("aws_s3_bucket_lifecycle_configuration.source")
    ]

    # the restore window set: one configuration per source bucket, the rule the docs describe
    terraform_run("plan", "-input=false", "-var", "noncurrent_expiration_days=30", "-out=window.bin")
    plan = json.loads(terraform_run("show", "-json", "window.bin"))
    resources = {r["address"]: r for r in plan["planned_values"]["root_module"]["resources"]}
    configured = {
        address: r["values"]
        for address, r in resources.items()
        if address.startswith("aws_s3_bucket_lifecycle_configuration.source")
    }
    assert set(configured) == {
        'aws_s3_bucket_lifecycle_configuration.source["lake"]',
        'aws_s3_bucket_lifecycle_configuration.source["lake2"]',
    }
    for values in configured.values():
        rules = {rule["id"]: rule for rule in values["rule"]}
        expire = rules["expire-noncurrent-versions"]
        assert expire["status"] == "Enabled"
        assert [e["noncurrent_days"] for e in expire["noncurrent_version_expiration"]] == [30]
        assert [e["expired_object_delete_marker"] for e in expire["expiration"]] == [True]
        abort = rules["abort-incomplete-uploads"]["abort_incomplete_multipart_upload"]
        assert [a["days_after_initiation"] for a in abort] == [7]
