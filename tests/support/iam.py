"""The IAM tests' shared parts: a registry and locations to render policies for, and a moto
server of the tests' own that enforces IAM when asked (the suite's shared server never does)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from core.registry import parse_registry

ROOT = Path(__file__).resolve().parents[2]
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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    """A moto server of this module's own. IAM is not enforced until a test asks for it."""
    port = free_port()
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


def enforce_iam(endpoint: str, enforce: bool) -> None:
    """moto checks signatures and policies once this many requests were made without: 0 or never.

    (The server reads INITIAL_NO_AUTH_ACTION_COUNT at start; /moto-api/reset-auth sets it and
    restarts the count, so the setup above can run unauthenticated.)
    """
    body = b"0" if enforce else b"inf"
    request = urllib.request.Request(
        f"{endpoint}/moto-api/reset-auth", data=body, method="POST", headers={"Content-Type": "text/plain"}
    )
    urllib.request.urlopen(request, timeout=10).close()


def client(service: str, endpoint: str, key: str, secret: str) -> Any:
    from core.s3 import wait_for_client_model

    wait_for_client_model()  # the session's own first client may be being built
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def user_with_policy(iam: Any, name: str, policy: dict[str, Any]) -> tuple[str, str]:
    iam.create_user(UserName=name)
    iam.put_user_policy(UserName=name, PolicyName=name, PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


def denied(call: Any, **kwargs: Any) -> bool:
    try:
        call(**kwargs)
    except ClientError as error:
        return error.response["Error"]["Code"] in ("AccessDenied", "403")
    return False


def versioned_bucket_expiring_noncurrent(s3: Any, bucket: str, days: int) -> None:
    """Create ``bucket`` versioned, with a lifecycle rule that expires noncurrent versions after
    ``days``: what the restore reads first."""
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    rule = {
        "ID": "expire-noncurrent-versions",
        "Status": "Enabled",
        "Filter": {},
        "NoncurrentVersionExpiration": {"NoncurrentDays": days},
    }
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [rule]})
