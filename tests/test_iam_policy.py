"""The job roles' IAM policies as jobs.iam_policy renders them, and the vacuum's and the restore's
enforced by moto's IAM emulation, in a moto server of its own: real boto3 calls with the keys of a
user holding only that policy. No Spark, no AWS account.
"""

from __future__ import annotations

import io
import json
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from core.errors import ConfigError
from core.registry import load_registry, parse_registry
from jobs.iam_policy import (
    chargeback_policy,
    ingest_policy,
    restore_policy,
    role_policy,
    vacuum_policy,
)
from tests.support.iam import (
    EXAMPLE_TABLES,
    INVENTORY_TABLE,
    REGISTRY,
    TABLES_FILE,
    TERRAFORM,
    client,
    denied,
    enforce_iam,
    user_with_policy,
    versioned_bucket_expiring_noncurrent,
)

pytestmark = pytest.mark.spark_independent

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


def _actions(statement: dict[str, Any]) -> list[str]:
    return statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]


def test_restore_policy_removes_versions_inside_registered_tables_only() -> None:
    policy = restore_policy(REGISTRY, INVENTORY_TABLE, tables_file=TABLES_FILE)
    actions = {action for statement in policy["Statement"] for action in _actions(statement)}
    assert actions == {
        "s3:GetObject",
        "s3:GetObjectVersion",
        "s3:ListBucket",
        "s3:ListBucketVersions",
        "s3:PutObject",
        "s3:GetBucketVersioning",
        "s3:GetLifecycleConfiguration",
        "s3:DeleteObjectVersion",
    }
    # no plain delete: without a version id the restore deletes nothing
    assert "s3:DeleteObject" not in actions
    # the version deletes are the vacuum's deletes, resource for resource: <bucket>/<key>/*
    (versions,) = [s for s in policy["Statement"] if "s3:DeleteObjectVersion" in _actions(s)]
    (deletes,) = [
        s for s in vacuum_policy(REGISTRY, INVENTORY_TABLE)["Statement"] if s["Action"] == "s3:DeleteObject"
    ]
    assert _actions(versions) == ["s3:DeleteObjectVersion"]
    assert versions["Resource"] == deletes["Resource"]
    assert versions["Resource"] == [
        "arn:aws:s3:::lake/warehouse/events/*",
        "arn:aws:s3:::lake2/warehouse/users/*",
    ]

    s3 = "arn:aws:s3:::"
    assert _allows(policy, "s3:DeleteObjectVersion", s3 + "lake/warehouse/events/day=1/part-0.parquet")
    assert _allows(policy, "s3:DeleteObjectVersion", s3 + "lake2/warehouse/users/part-0.parquet")
    for outside in (
        "lake/warehouse/events_v2/part-0.parquet",  # a sibling sharing the name prefix
        "lake/warehouse/events",  # the table's own key
        "lake/part-0.parquet",
        "meta/warehouse/inventory/part-0.parquet",
        "meta/warehouse/vacuum_deletions/part-0.parquet",
        "meta/config/tables.yaml",
        "lake2/warehouse/events/part-0.parquet",  # the right key in the wrong bucket
    ):
        assert not _allows(policy, "s3:DeleteObjectVersion", s3 + outside), outside
        assert not _allows(policy, "s3:DeleteObject", s3 + outside), outside
    assert not _allows(policy, "s3:DeleteObject", s3 + "lake/warehouse/events/day=1/part-0.parquet")

    # listing versions: always limited by s3:prefix, to the tables' prefixes
    for statement in policy["Statement"]:
        if "s3:ListBucketVersions" in _actions(statement) or "s3:ListBucket" in _actions(statement):
            assert statement["Condition"]["StringLike"]["s3:prefix"], statement
    assert _allows(policy, "s3:ListBucketVersions", s3 + "lake", "warehouse/events/")
    assert _allows(policy, "s3:ListBucketVersions", s3 + "lake", "warehouse/events/day=1/part-0.parquet")
    assert _allows(policy, "s3:ListBucketVersions", s3 + "lake2", "warehouse/users/")
    for bucket, prefix in (
        ("lake", "warehouse/events_v2/"),
        ("lake", "warehouse/"),
        ("lake", ""),
        ("lake", None),  # no prefix: the whole bucket
        ("lake2", "warehouse/events/"),
        ("meta", "warehouse/vacuum_deletions/"),  # the ledger is read with ListBucket, not by version
    ):
        assert not _allows(policy, "s3:ListBucketVersions", s3 + bucket, prefix), (bucket, prefix)

    # reading: any version inside the tables; the buckets' versioning state and lifecycle
    for action in ("s3:GetObject", "s3:GetObjectVersion"):
        assert _allows(policy, action, s3 + "lake/warehouse/events/day=1/part-0.parquet")
        assert not _allows(policy, action, s3 + "lake/warehouse/events_v2/part-0.parquet")
    for action in ("s3:GetBucketVersioning", "s3:GetLifecycleConfiguration"):
        assert _allows(policy, action, s3 + "lake") and _allows(policy, action, s3 + "lake2")
        assert not _allows(policy, action, s3 + "meta")
    # the inventory, tables.yaml, and the vacuum's history and ledger, which it appends to
    assert _allows(policy, "s3:GetObject", s3 + "meta/warehouse/inventory/part-0.parquet")
    assert _allows(policy, "s3:GetObject", s3 + "meta/config/tables.yaml")
    assert _allows(policy, "s3:ListBucket", s3 + "meta", "warehouse/vacuum_deletions/")
    for table in ("vacuum_runs", "vacuum_deletions"):
        assert _allows(
            policy, "s3:PutObject", s3 + f"meta/warehouse/{table}/_delta_log/00000000000000000003.json"
        )
    for unwritten in (
        "meta/warehouse/inventory/part-0.parquet",
        "lake/warehouse/events/part-0.parquet",
        "lake/warehouse/events/_delta_log/00000000000000000001.json",
    ):
        assert not _allows(policy, "s3:PutObject", s3 + unwritten), unwritten
    assert role_policy("restore", REGISTRY, INVENTORY_TABLE, tables_file=TABLES_FILE) == policy


def test_a_table_outside_s3_is_refused() -> None:
    registry = parse_registry("tables:\n  - {name: t, path: 'file:///tmp/t', owner: o}\n")
    with pytest.raises(ConfigError, match="not on S3"):
        vacuum_policy(registry, INVENTORY_TABLE)
    with pytest.raises(ConfigError, match="not on S3"):
        restore_policy(registry, INVENTORY_TABLE)
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
    with pytest.raises(ConfigError, match="wildcard or variable"):
        restore_policy(registry, INVENTORY_TABLE)
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
    out = io.StringIO()
    args = ["iam-policy", "--tables", str(tables), "--inventory-table", INVENTORY_TABLE, "--role", "restore"]
    assert run(args, out) == 0
    assert json.loads(out.getvalue()) == restore_policy(load_registry(str(tables)), INVENTORY_TABLE)


def test_moto_authorizes_each_request_by_its_iam_action(moto_endpoint: str) -> None:
    """The IAM tests judge the policies only if moto authorizes a request by the action AWS does:
    a user allowed that one action on the bucket and its keys makes the request, and a user
    allowed only a neighbouring action is denied it. (moto 5.2.6 authorized ListObjectsV2 as
    s3:ListObjectsV2, which is no IAM action, and denied every correct policy: pyproject.toml
    keeps it out.)"""
    import moto

    setup = client("s3", moto_endpoint, "setup", "setup")
    versioned_bucket_expiring_noncurrent(setup, "probe", 1)
    old = setup.put_object(Bucket="probe", Key="a/old", Body=b"x")["VersionId"]
    kept = setup.put_object(Bucket="probe", Key="a/kept", Body=b"x")["VersionId"]
    setup.put_object(Bucket="probe", Key="a/b", Body=b"x")
    iam = client("iam", moto_endpoint, "setup", "setup")

    def user(name: str, action: str) -> Any:
        statement = {
            "Effect": "Allow",
            "Action": action,
            "Resource": ["arn:aws:s3:::probe", "arn:aws:s3:::probe/*"],
        }
        return client(
            "s3",
            moto_endpoint,
            *user_with_policy(iam, name, {"Version": "2012-10-17", "Statement": [statement]}),
        )

    # each S3 request the tests below make: the IAM action AWS authorizes it by (the Service
    # Authorization Reference's Amazon S3 page; an API's name is not always its action's), and the call
    requests: dict[str, tuple[str, Any]] = {
        "ListObjectsV2": ("s3:ListBucket", lambda s3: s3.list_objects_v2(Bucket="probe", Prefix="a/")),
        "ListObjectVersions": (
            "s3:ListBucketVersions",
            lambda s3: s3.list_object_versions(Bucket="probe", Prefix="a/"),
        ),
        "GetBucketLifecycleConfiguration": (
            "s3:GetLifecycleConfiguration",
            lambda s3: s3.get_bucket_lifecycle_configuration(Bucket="probe"),
        ),
        "GetBucketVersioning": (
            "s3:GetBucketVersioning",
            lambda s3: s3.get_bucket_versioning(Bucket="probe"),
        ),
        "GetObject": ("s3:GetObject", lambda s3: s3.get_object(Bucket="probe", Key="a/b")),
        "GetObject with a VersionId": (
            "s3:GetObjectVersion",
            lambda s3: s3.get_object(Bucket="probe", Key="a/kept", VersionId=kept),
        ),
        "PutObject": ("s3:PutObject", lambda s3: s3.put_object(Bucket="probe", Key="a/c", Body=b"x")),
        "DeleteObject": ("s3:DeleteObject", lambda s3: s3.delete_object(Bucket="probe", Key="a/c")),
        "DeleteObject with a VersionId": (
            "s3:DeleteObjectVersion",
            lambda s3: s3.delete_object(Bucket="probe", Key="a/old", VersionId=old),
        ),
    }
    users = {request: user(f"probe-{i}", action) for i, (request, (action, _)) in enumerate(requests.items())}
    # a neighbouring action does not stand in for the one AWS checks
    neighbours = [
        ("ListObjectsV2", "ListObjectVersions"),
        ("ListObjectVersions", "ListObjectsV2"),
        ("GetObject with a VersionId", "GetObject"),
        ("DeleteObject with a VersionId", "DeleteObject"),
    ]
    enforce_iam(moto_endpoint, True)
    try:
        with pytest.raises(ClientError):  # enforced: keys of no IAM user are refused
            setup.list_buckets()
        failed = []
        for request, (action, make) in requests.items():
            try:
                make(users[request])
            except ClientError as error:
                failed.append(f"{request} allowed {action}: {error.response['Error']['Code']}")
        over_granted = [
            f"{request} by a user allowed only {requests[other][0]}"
            for request, other in neighbours
            if not denied(requests[request][1], s3=users[other])
        ]
    finally:
        enforce_iam(moto_endpoint, False)
    assert not failed, (
        f"moto {moto.__version__} does not authorize these requests by the IAM action AWS does, so "
        f"the policy tests cannot judge a policy: {'; '.join(failed)}"
    )
    assert not over_granted, f"moto {moto.__version__} authorizes {'; '.join(over_granted)}"


def test_vacuum_policy_under_moto_iam(moto_endpoint: str) -> None:
    """DeleteObject inside a registered table succeeds; beside it, above it, in the warehouse: denied.

    Single-key DeleteObject is what moto authorizes per key. (moto authorizes a batch
    DeleteObjects against the bucket's ARN, where AWS checks s3:DeleteObject per key, so the batch
    path cannot be exercised here.) moto ignores the s3:prefix conditions of ListBucket: the
    evaluator above checks those.
    """
    setup = client("s3", moto_endpoint, "setup", "setup")
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
    iam = client("iam", moto_endpoint, "setup", "setup")
    vacuum_keys = user_with_policy(
        iam, "vacuum", vacuum_policy(REGISTRY, INVENTORY_TABLE, tables_file=TABLES_FILE)
    )
    admin_keys = user_with_policy(
        iam,
        "admin",
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]},
    )
    vacuum = client("s3", moto_endpoint, *vacuum_keys)
    admin = client("s3", moto_endpoint, *admin_keys)

    enforce_iam(moto_endpoint, True)
    try:
        with pytest.raises(ClientError):  # enforced: keys of no IAM user are refused
            setup.list_buckets()

        # delete: inside the registered tables only
        vacuum.delete_object(Bucket="lake", Key="warehouse/events/day=1/part-0.parquet")
        vacuum.delete_object(Bucket="lake2", Key="warehouse/users/part-0.parquet")
        for bucket, key in [k for k, fate in keys.items() if fate == "outside"]:
            assert denied(vacuum.delete_object, Bucket=bucket, Key=key), (bucket, key)

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
            assert denied(vacuum.put_object, Bucket=bucket, Key=key, Body=b"x"), (bucket, key)

        # read: the tables, the inventory and the vacuum's history, tables.yaml; no sibling
        for bucket, key in [
            ("lake", "warehouse/events/_delta_log/00000000000000000000.json"),
            ("meta", "warehouse/inventory/part-0.parquet"),
            ("meta", "config/tables.yaml"),
        ]:
            assert vacuum.get_object(Bucket=bucket, Key=key)["Body"].read() == b"x"
        assert denied(vacuum.get_object, Bucket="lake", Key="warehouse/events_v2/part-0.parquet")
        assert denied(vacuum.get_object, Bucket="lake", Key="part-0.parquet")
        vacuum.get_bucket_versioning(Bucket="lake")
        assert denied(vacuum.get_bucket_versioning, Bucket="meta")
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
        enforce_iam(moto_endpoint, False)


def test_restore_policy_under_moto_iam(moto_endpoint: str) -> None:
    """A user with only the restore policy lists a table's versions and removes a delete marker
    by its version id inside the table (the object is current again); beside it, in another
    bucket, without a version id: denied.

    Single-key DeleteObject with a VersionId is what moto authorizes as s3:DeleteObjectVersion per
    key (a batch DeleteObjects moto authorizes as s3:DeleteObject on the bucket). Buckets and users
    of this test's own, in the module's moto server.
    """
    registry = parse_registry(
        """
tables:
  - {name: events, path: s3://vlake/warehouse/events, owner: growth}
  - {name: users, path: s3a://vlake2/warehouse/users/, owner: identity}
"""
    )
    inventory_table = "s3://vmeta/warehouse/inventory"
    setup = client("s3", moto_endpoint, "setup", "setup")
    versioned_bucket_expiring_noncurrent(setup, "vlake", 30)
    for bucket in ("vlake2", "vmeta"):
        setup.create_bucket(Bucket=bucket)
        setup.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    # each object is written, then deleted: a delete marker over the version with the bytes
    deleted = {
        ("vlake", "warehouse/events/day=1/part-0.parquet"): "inside",
        ("vlake2", "warehouse/users/part-0.parquet"): "inside",
        ("vlake", "warehouse/events_v2/part-0.parquet"): "outside",  # a sibling sharing the name prefix
        ("vlake", "warehouse/events"): "outside",  # an object named like the table root
        ("vlake", "part-0.parquet"): "outside",
        ("vlake2", "warehouse/events/part-0.parquet"): "outside",  # events' key in the wrong bucket
        ("vmeta", "warehouse/vacuum_deletions/part-0.parquet"): "outside",
    }
    markers = {}
    data_versions = {}
    for bucket, key in deleted:
        data_versions[bucket, key] = setup.put_object(Bucket=bucket, Key=key, Body=b"bytes")["VersionId"]
        answer = setup.delete_object(Bucket=bucket, Key=key)
        assert answer["DeleteMarker"] is True
        markers[bucket, key] = answer["VersionId"]
    live = ("vlake", "warehouse/events/_delta_log/00000000000000000000.json")
    setup.put_object(Bucket=live[0], Key=live[1], Body=b"{}")
    setup.put_object(Bucket="vmeta", Key="warehouse/inventory/part-0.parquet", Body=b"x")

    iam = client("iam", moto_endpoint, "setup", "setup")
    restore = client(
        "s3", moto_endpoint, *user_with_policy(iam, "restore", restore_policy(registry, inventory_table))
    )
    admin_policy = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
    }
    admin = client("s3", moto_endpoint, *user_with_policy(iam, "restore-admin", admin_policy))

    enforce_iam(moto_endpoint, True)
    try:
        # what the restore reads first: the bucket's versioning state and lifecycle configuration
        assert restore.get_bucket_versioning(Bucket="vlake")["Status"] == "Enabled"
        rules = restore.get_bucket_lifecycle_configuration(Bucket="vlake")["Rules"]
        assert rules[0]["NoncurrentVersionExpiration"]["NoncurrentDays"] == 30
        assert denied(restore.get_bucket_versioning, Bucket="vmeta")
        assert denied(restore.get_bucket_lifecycle_configuration, Bucket="vmeta")

        # list the table's versions: the delete marker and the version behind it
        listed = restore.list_object_versions(Bucket="vlake", Prefix="warehouse/events/")
        marker_ids = {(m["Key"], m["VersionId"]) for m in listed.get("DeleteMarkers", [])}
        key = "warehouse/events/day=1/part-0.parquet"
        assert (key, markers["vlake", key]) in marker_ids
        assert data_versions["vlake", key] in {v["VersionId"] for v in listed["Versions"] if v["Key"] == key}
        assert denied(restore.list_object_versions, Bucket="vmeta", Prefix="warehouse/")

        # without a version id nothing is deleted: there is no s3:DeleteObject
        assert denied(restore.delete_object, Bucket=live[0], Key=live[1])
        # the delete markers inside the tables are removed by version id; outside: denied
        for (bucket, key), fate in deleted.items():
            if fate == "inside":
                restore.delete_object(Bucket=bucket, Key=key, VersionId=markers[bucket, key])
            else:
                assert denied(
                    restore.delete_object, Bucket=bucket, Key=key, VersionId=markers[bucket, key]
                ), (
                    bucket,
                    key,
                )
        # the restored version is checked by its version id
        for (bucket, key), fate in deleted.items():
            if fate == "inside":
                body = restore.get_object(Bucket=bucket, Key=key, VersionId=data_versions[bucket, key])[
                    "Body"
                ]
                assert body.read() == b"bytes"
        assert denied(
            restore.get_object,
            Bucket="vlake",
            Key="warehouse/events_v2/part-0.parquet",
            VersionId=data_versions["vlake", "warehouse/events_v2/part-0.parquet"],
        )
        # it writes no table
        assert denied(
            restore.put_object, Bucket="vlake", Key="warehouse/events/day=1/part-1.parquet", Body=b"x"
        )

        # afterwards, as an administrator: current again inside, still deleted outside
        for (bucket, key), fate in deleted.items():
            try:
                admin.head_object(Bucket=bucket, Key=key)
                current = True
            except ClientError as error:
                assert error.response["Error"]["Code"] in ("404", "NoSuchKey"), error
                current = False
            assert current == (fate == "inside"), (bucket, key)
        admin.head_object(Bucket=live[0], Key=live[1])
    finally:
        enforce_iam(moto_endpoint, False)
