"""S3 lifecycle rules the chargeback recommends, written two ways: the ``LifecycleConfiguration``
document ``aws s3api put-bucket-lifecycle-configuration`` takes (``{"Rules": [...]}``), and a
Terraform ``aws_s3_bucket_lifecycle_configuration`` block (HCL text) carrying the same rules.

Only what an inventory can justify is written: on a versioned bucket, noncurrent versions expire
a restore window after they became noncurrent, and delete markers left with no version behind them
are removed. AWS refuses ``ExpiredObjectDeleteMarker`` beside ``Days`` or ``Date`` in one
``Expiration``, so the rule's ``Expiration`` holds the marker flag alone.

Example::

    rule = noncurrent_rule("lake", "warehouse/events/", "table events", restore_window_days=30)
    lifecycle_configuration([rule])     # {"Rules": [{"ID": "noncurrent-table-events", ...}]}
    print(terraform_block("lake", [rule]))
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MAX_RULE_ID = 255  # AWS's limit on a rule's ID
MAX_RULES = 1000  # AWS's limit on the rules of one bucket's lifecycle configuration


@dataclass(frozen=True)
class LifecycleRule:
    """One rule for the keys under ``prefix`` of ``bucket`` (``""``: the whole bucket): expire
    noncurrent versions ``noncurrent_days`` days after they became noncurrent, and remove expired
    object delete markers."""

    bucket: str
    id: str
    prefix: str
    noncurrent_days: int

    def to_aws(self) -> dict[str, Any]:
        """The rule as ``put-bucket-lifecycle-configuration`` takes it (one of ``Rules``)."""
        return {
            "ID": self.id,
            "Status": "Enabled",
            "Filter": {"Prefix": self.prefix},
            "NoncurrentVersionExpiration": {"NoncurrentDays": self.noncurrent_days},
            "Expiration": {"ExpiredObjectDeleteMarker": True},
        }

    def to_terraform(self) -> str:
        """The rule as one ``rule { ... }`` block of ``aws_s3_bucket_lifecycle_configuration``."""
        return "\n".join(
            [
                "  rule {",
                f"    id     = {hcl_string(self.id)}",
                '    status = "Enabled"',
                "",
                "    filter {",
                f"      prefix = {hcl_string(self.prefix)}",
                "    }",
                "",
                "    noncurrent_version_expiration {",
                f"      noncurrent_days = {self.noncurrent_days}",
                "    }",
                "",
                "    expiration {",
                "      expired_object_delete_marker = true",
                "    }",
                "  }",
            ]
        )


def noncurrent_rule(bucket: str, prefix: str, name: str, restore_window_days: int) -> LifecycleRule:
    """The rule for the noncurrent versions and delete markers under ``prefix`` (``name`` says
    whose: ``table events``, ``prefix tmp/``), kept ``restore_window_days`` days."""
    if restore_window_days < 1:
        raise ValueError(f"restore window of {restore_window_days} days: AWS takes NoncurrentDays >= 1")
    return LifecycleRule(bucket, rule_id(f"noncurrent {name}"), prefix, restore_window_days)


def rule_id(text: str) -> str:
    """A readable rule ID from ``text``: ``noncurrent table events`` -> ``noncurrent-table-events``;
    one longer than AWS's 255 characters is cut and ends in a hash of the whole."""
    words = re.sub(r"[^A-Za-z0-9_./=-]+", "-", text).strip("-")
    if len(words) <= MAX_RULE_ID:
        return words
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return f"{words[: MAX_RULE_ID - len(digest) - 1]}-{digest}"


def lifecycle_configuration(rules: Sequence[LifecycleRule]) -> dict[str, Any]:
    """The ``LifecycleConfiguration`` document of one bucket's rules: ``{"Rules": [...]}``."""
    buckets = {rule.bucket for rule in rules}
    if len(buckets) > 1:
        raise ValueError(f"one lifecycle configuration holds the rules of one bucket, not {sorted(buckets)}")
    return {"Rules": [rule.to_aws() for rule in rules]}


def lifecycle_json(rules: Sequence[LifecycleRule]) -> str:
    """:func:`lifecycle_configuration` as the JSON text the AWS CLI reads (``file://...``)."""
    return json.dumps(lifecycle_configuration(rules), indent=2) + "\n"


def terraform_block(bucket: str, rules: Sequence[LifecycleRule]) -> str:
    """A Terraform ``aws_s3_bucket_lifecycle_configuration`` resource holding ``rules``."""
    body = "\n\n".join(rule.to_terraform() for rule in rules)
    return (
        f'resource "aws_s3_bucket_lifecycle_configuration" {hcl_string(terraform_name(bucket))} {{\n'
        f"  bucket = {hcl_string(bucket)}\n\n{body}\n}}\n"
    )


def terraform_name(bucket: str) -> str:
    """A Terraform resource name for ``bucket``: letters, digits, ``_`` and ``-``, not starting
    with a digit (``my.logs-2024`` -> ``my_logs-2024``, ``2024-logs`` -> ``_2024-logs``)."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", bucket)
    return name if re.match(r"[A-Za-z_]", name) else f"_{name}"


def hcl_string(value: str) -> str:
    """``value`` as an HCL quoted string: quotes and backslashes escaped, and the ``${`` and
    ``%{`` that would start a template doubled."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped.replace("${", "$${").replace("%{", "%%{") + '"'


def apply_command(bucket: str, file_name: str) -> str:
    """The AWS CLI command that puts the document saved as ``file_name`` on ``bucket``."""
    return (
        f"aws s3api put-bucket-lifecycle-configuration --bucket {bucket} "
        f"--lifecycle-configuration file://{file_name}"
    )
