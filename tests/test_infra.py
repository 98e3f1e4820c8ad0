"""infra/terraform and the job roles' IAM policies, checked offline: no Spark, no AWS account.

- The Terraform is parsed with python-hcl2: every resource the README promises is there, and the
  vacuum role's only ``s3:DeleteObject`` is built from the tables.yaml-derived local, ``<key>/*``.
- checkov (infra/checkov.sh, its own virtualenv) finds nothing that is not skipped with a reason.
- The vacuum policy ``jobs.iam_policy`` renders is enforced by moto's IAM emulation, in a moto
  server of its own (the suite's shared server never enforces IAM): real boto3 calls with the
  keys of a user holding only that policy.
- Where terraform and a local copy of the AWS provider exist, ``terraform validate`` and a
  ``terraform plan`` against that moto server run too, and the per-table statements Terraform
  renders are compared with jobs.iam_policy's.

What none of this proves: that AWS accepts the configuration (no apply against AWS), or that the
jobs run on EMR Serverless with these roles.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from core.errors import ConfigError
from core.paths import StorageLocation
from core.registry import load_registry, parse_registry
from jobs.iam_policy import chargeback_policy, ingest_policy, role_policy, table_statements, vacuum_policy

pytestmark = pytest.mark.spark_independent

ROOT = Path(__file__).resolve().parents[1]
TERRAFORM = ROOT / "infra" / "terraform"
EXAMPLE_TABLES = TERRAFORM / "tables.yaml.example"

REGISTRY = parse_registry(
    """
tables:
  - name: events
    path: s3://lake/warehouse/events
    owner: growth
  - name: users
    path: s3a://lake2/warehouse/users/
    owner: identity
"""
)
INVENTORY_TABLE = "s3://meta/warehouse/inventory"
TABLES_FILE = "s3://meta/config/tables.yaml"


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


# ---- jobs.iam_policy, the renderer -----------------------------------------------------------------


def _allows(policy: dict[str, Any], action: str, resource: str, prefix: str | None = None) -> bool:
    """A small IAM evaluator for these policies: Allow statements, wildcards, StringLike s3:prefix."""
    for statement in policy["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resources = (
            statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        )
        if statement["Effect"] != "Allow" or action not in actions:
            continue
        if not any(fnmatchcase(resource, pattern) for pattern in resources):
            continue
        allowed_prefixes = statement.get("Condition", {}).get("StringLike", {}).get("s3:prefix")
        if allowed_prefixes is None or (
            prefix is not None and any(fnmatchcase(prefix, p) for p in allowed_prefixes)
        ):
            return True
    return False


def test_vacuum_policy_deletes_inside_registered_tables_only() -> None:
    policy = vacuum_policy(REGISTRY, INVENTORY_TABLE, tables_file=TABLES_FILE)
    deletes = [s for s in policy["Statement"] if s["Action"] == "s3:DeleteObject"]
    assert [s["Resource"] for s in deletes] == [
        ["arn:aws:s3:::lake/warehouse/events/*", "arn:aws:s3:::lake2/warehouse/users/*"]
    ]
    s3 = "arn:aws:s3:::"
    assert _allows(policy, "s3:DeleteObject", s3 + "lake/warehouse/events/day=1/part-0.parquet")
    assert _allows(policy, "s3:DeleteObject", s3 + "lake2/warehouse/users/part-0.parquet")
    for outside in (
        "lake/warehouse/events_v2/part-0.parquet",  # a sibling sharing the name prefix
        "lake/warehouse/events",  # the table's own key
        "lake/part-0.parquet",
        "meta/warehouse/inventory/part-0.parquet",
        "meta/warehouse/vacuum_deletions/part-0.parquet",
        "meta/config/tables.yaml",
        "lake2/warehouse/events/part-0.parquet",  # the right key in the wrong bucket
    ):
        assert not _allows(policy, "s3:DeleteObject", s3 + outside), outside
    assert _allows(policy, "s3:PutObject", s3 + "lake/warehouse/events/_delta_log/00000000000000000007.json")
    assert not _allows(policy, "s3:PutObject", s3 + "lake/warehouse/events/part-0.parquet")
    assert _allows(policy, "s3:PutObject", s3 + "meta/warehouse/vacuum_runs/part-0.parquet")
    assert not _allows(policy, "s3:PutObject", s3 + "meta/warehouse/inventory/part-0.parquet")
    assert _allows(policy, "s3:GetObject", s3 + "meta/config/tables.yaml")
    assert _allows(policy, "s3:GetBucketVersioning", s3 + "lake2")
    assert not _allows(policy, "s3:GetBucketVersioning", s3 + "meta")
    # listing: the tables' prefixes (S3A probes the table's own key too), never a sibling's
    assert _allows(policy, "s3:ListBucket", s3 + "lake", "warehouse/events/")
    assert _allows(policy, "s3:ListBucket", s3 + "lake", "warehouse/events/_delta_log/")
    assert _allows(policy, "s3:ListBucket", s3 + "lake", "warehouse/events")
    assert not _allows(policy, "s3:ListBucket", s3 + "lake", "warehouse/events_v2/")
    assert not _allows(policy, "s3:ListBucket", s3 + "lake", "")
    assert not _allows(policy, "s3:ListBucket", s3 + "lake")
    assert _allows(policy, "s3:ListBucket", s3 + "meta", "warehouse/vacuum_deletions/")
    assert not _allows(policy, "s3:ListBucket", s3 + "meta", "warehouse/inventory_usage/")


def test_ingest_and_chargeback_policies_delete_nothing() -> None:
    ingest = ingest_policy(INVENTORY_TABLE, "s3://dest/inventory", tables_file=TABLES_FILE)
    chargeback = chargeback_policy(INVENTORY_TABLE)
    for policy in (ingest, chargeback):
        actions = {s["Action"] for s in policy["Statement"]}
        assert actions <= {"s3:GetObject", "s3:ListBucket", "s3:PutObject"}
    s3 = "arn:aws:s3:::"
    assert _allows(ingest, "s3:GetObject", s3 + "dest/inventory/lake/daily/2026-11-22T01-00Z/manifest.json")
    assert _allows(ingest, "s3:ListBucket", s3 + "dest", "inventory/lake/daily/")
    assert not _allows(ingest, "s3:ListBucket", s3 + "dest", "other/")
    for table in ("inventory", "inventory_runs", "inventory_usage"):
        assert _allows(
            ingest, "s3:PutObject", s3 + f"meta/warehouse/{table}/_delta_log/00000000000000000000.json"
        )
    assert not _allows(ingest, "s3:PutObject", s3 + "meta/warehouse/vacuum_runs/part-0.parquet")
    assert not _allows(chargeback, "s3:PutObject", s3 + "meta/warehouse/inventory/part-0.parquet")
    for table in ("inventory", "inventory_runs", "inventory_usage", "vacuum_runs", "vacuum_deletions"):
        assert _allows(chargeback, "s3:GetObject", s3 + f"meta/warehouse/{table}/part-0.parquet")
    assert not _allows(chargeback, "s3:GetObject", s3 + "lake/warehouse/events/part-0.parquet")


def test_a_table_outside_s3_is_refused() -> None:
    registry = parse_registry("tables:\n  - {name: t, path: 'file:///tmp/t', owner: o}\n")
    with pytest.raises(ConfigError, match="not on S3"):
        vacuum_policy(registry, INVENTORY_TABLE)
    with pytest.raises(ConfigError, match="--destination"):
        role_policy("ingest", REGISTRY, INVENTORY_TABLE)


@pytest.mark.parametrize(
    "path", ["s3://lake/warehouse/ev*", "s3://lake/*", "s3://lake/day?/t", "s3://lake/${aws:username}/t"]
)
def test_a_table_path_iam_would_read_as_a_wildcard_is_refused(path: str) -> None:
    """``*`` and ``?`` are wildcards in an IAM resource, ``$`` starts a variable: the vacuum role
    would delete beyond the table. The renderer refuses them; Terraform's plan stops on them."""
    registry = parse_registry(f"tables:\n  - {{name: t, path: '{path}', owner: o}}\n")
    with pytest.raises(ConfigError, match="wildcard or variable"):
        vacuum_policy(registry, INVENTORY_TABLE)
    iam_tf = (TERRAFORM / "iam.tf").read_text(encoding="utf-8")
    assert (
        'can(regex("[*?$]", table.path))' in iam_tf and "length(local.tables_with_wildcards) == 0" in iam_tf
    )


def test_cli_prints_the_policy(tmp_path: Path) -> None:
    from jobs.cli import run

    tables = tmp_path / "tables.yaml"
    tables.write_text(EXAMPLE_TABLES.read_text(encoding="utf-8"), encoding="utf-8")
    out = io.StringIO()
    assert run(["iam-policy", "--tables", str(tables), "--inventory-table", INVENTORY_TABLE], out) == 0
    assert json.loads(out.getvalue()) == vacuum_policy(load_registry(str(tables)), INVENTORY_TABLE)
    out = io.StringIO()
    args = ["iam-policy", "--tables", str(tables), "--inventory-table", INVENTORY_TABLE, "--role", "ingest"]
    assert run([*args, "--destination", "s3://dest/inventory"], out) == 0
    assert json.loads(out.getvalue()) == ingest_policy(INVENTORY_TABLE, "s3://dest/inventory")
    assert run(args, io.StringIO()) == 2  # ingest without --destination


# ---- The vacuum policy under moto's IAM enforcement ----------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    """A moto server of this module's own. IAM is not enforced until a test asks for it."""
    port = _free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"moto server did not start on {endpoint}")
            time.sleep(0.2)
    yield endpoint
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()


def _enforce_iam(endpoint: str, enforce: bool) -> None:
    """moto checks signatures and policies once this many requests were made without: 0 or never.

    (The server reads INITIAL_NO_AUTH_ACTION_COUNT at start; /moto-api/reset-auth sets it and
    restarts the count, so the setup above can run unauthenticated.)
    """
    body = b"0" if enforce else b"inf"
    request = urllib.request.Request(
        f"{endpoint}/moto-api/reset-auth", data=body, method="POST", headers={"Content-Type": "text/plain"}
    )
    urllib.request.urlopen(request, timeout=10).close()


def _client(service: str, endpoint: str, key: str, secret: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def _user_with_policy(iam: Any, name: str, policy: dict[str, Any]) -> tuple[str, str]:
    iam.create_user(UserName=name)
    iam.put_user_policy(UserName=name, PolicyName=name, PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


def _denied(call: Any, **kwargs: Any) -> bool:
    try:
        call(**kwargs)
    except ClientError as error:
        return error.response["Error"]["Code"] in ("AccessDenied", "403")
    return False


def test_vacuum_policy_under_moto_iam(moto_endpoint: str) -> None:
    """DeleteObject inside a registered table succeeds; beside it, above it, in the warehouse: denied.

    Single-key DeleteObject is what moto authorizes per key. (moto authorizes a batch
    DeleteObjects against the bucket's ARN, where AWS checks s3:DeleteObject per key, so the batch
    path cannot be exercised here.) moto ignores the s3:prefix conditions of ListBucket: the
    evaluator above checks those.
    """
    setup = _client("s3", moto_endpoint, "setup", "setup")
    # delete: the test deletes it (inside a table); inside: deletable, left alone; outside: denied
    keys = {
        ("lake", "warehouse/events/day=1/part-0.parquet"): "delete",
        ("lake", "warehouse/events/_delta_log/00000000000000000000.json"): "inside",
        ("lake", "warehouse/events"): "outside",  # an object named like the table root
        ("lake", "warehouse/events_v2/part-0.parquet"): "outside",  # a sibling sharing the name prefix
        ("lake", "part-0.parquet"): "outside",
        ("lake2", "warehouse/users/part-0.parquet"): "delete",
        ("lake2", "warehouse/events/part-0.parquet"): "outside",  # events' key in the wrong bucket
        ("meta", "warehouse/inventory/part-0.parquet"): "outside",
        ("meta", "warehouse/vacuum_deletions/part-0.parquet"): "outside",
        ("meta", "config/tables.yaml"): "outside",
    }
    for bucket in ("lake", "lake2", "meta"):
        setup.create_bucket(Bucket=bucket)
    for bucket, key in keys:
        setup.put_object(Bucket=bucket, Key=key, Body=b"x")
    iam = _client("iam", moto_endpoint, "setup", "setup")
    vacuum_keys = _user_with_policy(
        iam, "vacuum", vacuum_policy(REGISTRY, INVENTORY_TABLE, tables_file=TABLES_FILE)
    )
    admin_keys = _user_with_policy(
        iam,
        "admin",
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]},
    )
    vacuum = _client("s3", moto_endpoint, *vacuum_keys)
    admin = _client("s3", moto_endpoint, *admin_keys)

    _enforce_iam(moto_endpoint, True)
    try:
        with pytest.raises(ClientError):  # enforced: keys of no IAM user are refused
            setup.list_buckets()

        # delete: inside the registered tables only
        vacuum.delete_object(Bucket="lake", Key="warehouse/events/day=1/part-0.parquet")
        vacuum.delete_object(Bucket="lake2", Key="warehouse/users/part-0.parquet")
        for bucket, key in [k for k, fate in keys.items() if fate == "outside"]:
            assert _denied(vacuum.delete_object, Bucket=bucket, Key=key), (bucket, key)

        # write: the tables' _delta_log/ and the vacuum history, nothing else
        vacuum.put_object(
            Bucket="lake", Key="warehouse/events/_delta_log/00000000000000000001.json", Body=b"{}"
        )
        vacuum.put_object(Bucket="meta", Key="warehouse/vacuum_runs/part-1.parquet", Body=b"x")
        for bucket, key in [
            ("lake", "warehouse/events/day=1/part-1.parquet"),
            ("lake", "warehouse/events_v2/_delta_log/00000000000000000001.json"),
            ("meta", "warehouse/inventory/part-1.parquet"),
            ("meta", "config/tables.yaml"),
        ]:
            assert _denied(vacuum.put_object, Bucket=bucket, Key=key, Body=b"x"), (bucket, key)

        # read: the tables, the inventory and the vacuum's history, tables.yaml; no sibling
        for bucket, key in [
            ("lake", "warehouse/events/_delta_log/00000000000000000000.json"),
            ("meta", "warehouse/inventory/part-0.parquet"),
            ("meta", "config/tables.yaml"),
        ]:
            assert vacuum.get_object(Bucket=bucket, Key=key)["Body"].read() == b"x"
        assert _denied(vacuum.get_object, Bucket="lake", Key="warehouse/events_v2/part-0.parquet")
        assert _denied(vacuum.get_object, Bucket="lake", Key="part-0.parquet")
        vacuum.get_bucket_versioning(Bucket="lake")
        assert _denied(vacuum.get_bucket_versioning, Bucket="meta")
        listed = vacuum.list_objects_v2(Bucket="lake", Prefix="warehouse/events/")
        assert [o["Key"] for o in listed["Contents"]] == [
            "warehouse/events/_delta_log/00000000000000000000.json",
            "warehouse/events/_delta_log/00000000000000000001.json",
        ]

        # afterwards, as an administrator: what had to survive did
        for (bucket, key), fate in keys.items():
            try:
                admin.head_object(Bucket=bucket, Key=key)
                exists = True
            except ClientError as error:
                assert error.response["Error"]["Code"] in ("404", "NoSuchKey"), error
                exists = False
            assert exists == (fate != "delete"), (bucket, key)
    finally:
        _enforce_iam(moto_endpoint, False)


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
