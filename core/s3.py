"""boto3 access to S3: one client factory and the few object helpers the jobs share.

boto3 itself honours ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_S3``, ``AWS_REGION`` and the
credential variables, so the same code reaches AWS and a local S3 server.
"""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from core.errors import ConfigError
from core.paths import StorageLocation

# Adaptive retries back off on 503 SlowDown and throttling, which S3 returns under load.
_CLIENT_CONFIG = Config(retries={"max_attempts": 10, "mode": "adaptive"}, max_pool_connections=32)


def s3_client() -> Any:
    """A boto3 S3 client configured from the standard AWS environment."""
    return boto3.client("s3", config=_CLIENT_CONFIG)


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def describe(error: Exception) -> str:
    """A one-line description of a boto3 error."""
    if isinstance(error, ClientError):
        detail = error.response.get("Error", {})
        return f"{detail.get('Code', 'error')}: {detail.get('Message', '')}".strip().rstrip(":")
    if isinstance(error, BotoCoreError):
        return str(error)
    return f"{type(error).__name__}: {error}"


def read_object_text(location: StorageLocation) -> str:
    """The text of one object; a :class:`ConfigError` naming it when it cannot be read."""
    try:
        body = s3_client().get_object(Bucket=location.bucket, Key=location.key)["Body"].read()
        return str(body.decode("utf-8"))
    except (ClientError, BotoCoreError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read {location.uri}: {describe(error)}") from None
