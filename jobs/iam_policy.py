"""The S3 permissions of the job roles, as IAM policy documents rendered from the registry.

These are the S3 statements ``infra/terraform`` gives the job roles, for users who do not deploy
with Terraform (``inventory-vacuum iam-policy``). Terraform builds the same statements from the
same tables.yaml (``yamldecode``), adds CloudWatch Logs, KMS and reading the code, and spreads the
per-table statements over managed policies of ``tables_per_policy`` tables each (IAM limits a
policy's size); with every table in one policy the S3 statements are exactly these.

- **vacuum** reads the inventory table, ``vacuum_runs`` and ``vacuum_deletions`` and writes the
  last two; for every registered table it may read ``<table>`` and ``<table>/*``, list them, write
  only ``<table>/_delta_log/*`` (the commits of Delta's VACUUM), and delete only ``<table>/*``:
  ``s3:DeleteObject`` has no other resource, so ``warehouse/events/*`` never reaches
  ``warehouse/events_v2/``.
- **ingest** reads the deliveries under ``--destination`` and reads and writes the inventory table,
  ``inventory_runs`` and ``inventory_usage``; it deletes nothing.
- **chargeback** reads the inventory table and its four siblings.
- **restore** (run by hand, on versioned buckets) reads the inventory table, reads and writes
  ``vacuum_runs`` and ``vacuum_deletions``; for every registered table it may read the bucket's
  versioning state and lifecycle configuration, read ``<table>`` and ``<table>/*`` in any version,
  list them and their versions, and delete a version (a delete marker) only inside ``<table>/*``.
  It has no ``s3:DeleteObject``: without a version id it cannot delete anything.

The history tables are the siblings :func:`core.tables.default_location` names (the
defaults of ``--runs-table``, ``--history-table`` and so on). Listing is limited by ``s3:prefix``.
A location's own key (``warehouse/events``) and the warehouse prefix (``warehouse``) are readable
and listable as exact names because Hadoop's S3A probes them with a HEAD and a one-key LIST
before it creates a table's directory; S3 answers a HEAD of a missing key with 404 only when the
caller may list that name.

Example::

    import json
    from jobs.iam_policy import vacuum_policy
    from core.registry import parse_registry

    registry = parse_registry(
        "tables:\\n  - {name: events, path: s3://lake/warehouse/events, owner: growth}\\n"
    )
    policy = vacuum_policy(registry, "s3://meta/warehouse/inventory")
    delete = next(s for s in policy["Statement"] if s.get("Sid") == "DeleteOnlyInsideRegisteredTables")
    delete["Resource"]  # ['arn:aws:s3:::lake/warehouse/events/*']
    print(json.dumps(policy, indent=2))
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from core.errors import ConfigError
from core.paths import StorageLocation
from core.registry import TableRegistry
from core.tables import INGEST_TABLES, VACUUM_TABLES, default_location

ROLES = ("vacuum", "ingest", "chargeback", "restore")
# the tables a restore reads and appends to beside the inventory table: the vacuum's own
RESTORE_TABLES = VACUUM_TABLES

Statement = dict[str, Any]


def vacuum_policy(
    registry: TableRegistry,
    inventory_table: str,
    *,
    tables_file: str | None = None,
    partition: str = "aws",
) -> dict[str, Any]:
    """The vacuum role's S3 policy: delete only inside the registered tables.

    ``tables_file`` is the ``--tables`` argument: read access is granted when it is an S3 object.
    Every table of the registry is included, enabled or not (a disabled table can still be
    vacuumed by name). A table outside S3 (``file://``) is a :class:`ConfigError`.

    Example::

        vacuum_policy(load_registry("tables.yaml"), "s3://meta/warehouse/inventory")
    """
    inventory = _location(inventory_table, "--inventory-table")
    history = [_sibling(inventory_table, name) for name in VACUUM_TABLES]
    statements = [
        *_read_statements("InventoryAndVacuumHistory", [inventory, *history], partition),
        _allow("WriteVacuumHistory", "s3:PutObject", [_objects(partition, h) for h in history]),
        *_tables_file_statements(tables_file, partition),
        *table_statements(registry, partition=partition),
    ]
    return _document(statements)


def table_statements(registry: TableRegistry, *, partition: str = "aws") -> list[Statement]:
    """The per-table part of :func:`vacuum_policy` (in Terraform: one managed policy per chunk).

    In order: read the buckets' versioning state, read the tables, list them (one statement per
    bucket, limited by ``s3:prefix``), write their ``_delta_log/``, delete inside them.
    """
    locations = _table_locations(registry)
    buckets = sorted({location.bucket for location in locations})
    return [
        _allow(
            "ReadTableBucketVersioning",
            "s3:GetBucketVersioning",
            [_bucket_arn(partition, b) for b in buckets],
        ),
        _allow(
            "ReadTables", "s3:GetObject", _flatten(_object_and_below(partition, loc) for loc in locations)
        ),
        *(
            _list(
                None, partition, bucket, _flatten(_prefixes(loc) for loc in locations if loc.bucket == bucket)
            )
            for bucket in buckets
        ),
        _allow(
            "WriteTableLogs", "s3:PutObject", [_objects(partition, loc, "_delta_log/*") for loc in locations]
        ),
        _allow(
            "DeleteOnlyInsideRegisteredTables",
            "s3:DeleteObject",
            [_objects(partition, loc) for loc in locations],
        ),
    ]


def restore_policy(
    registry: TableRegistry,
    inventory_table: str,
    *,
    tables_file: str | None = None,
    partition: str = "aws",
) -> dict[str, Any]:
    """The restore role's S3 policy: remove versions (the vacuum's delete markers) inside the
    registered tables, and nothing else.

    ``inventory-vacuum restore`` finds the delete markers a vacuum made with ListObjectVersions and
    removes them with DeleteObjects naming their version ids, which IAM authorizes as
    ``s3:DeleteObjectVersion`` per key. IAM cannot tell a delete marker from a data version: that
    the restore removes only the markers the ledger names is the tool's doing, and the role keeps
    it inside the registered tables. Same arguments as :func:`vacuum_policy`.

    Example::

        restore_policy(load_registry("tables.yaml"), "s3://meta/warehouse/inventory")
    """
    inventory = _location(inventory_table, "--inventory-table")
    history = [_sibling(inventory_table, name) for name in RESTORE_TABLES]
    statements = [
        *_read_statements("InventoryAndVacuumHistory", [inventory, *history], partition),
        _allow("WriteVacuumHistory", "s3:PutObject", [_objects(partition, h) for h in history]),
        *_tables_file_statements(tables_file, partition),
        *restore_table_statements(registry, partition=partition),
    ]
    return _document(statements)


def restore_table_statements(registry: TableRegistry, *, partition: str = "aws") -> list[Statement]:
    """The per-table part of :func:`restore_policy` (in Terraform: one managed policy per chunk).

    In order: read the buckets' versioning state and lifecycle configuration, read the tables'
    objects in any version (to check a restored version), list the tables and their versions (one
    statement per bucket, limited by ``s3:prefix``; ``s3:ListBucket`` too, so that S3 answers a
    HEAD of a missing key with 404 rather than 403), delete versions inside them.
    """
    locations = _table_locations(registry)
    buckets = sorted({location.bucket for location in locations})
    return [
        _allow(
            "ReadTableBucketVersioningAndLifecycle",
            ["s3:GetBucketVersioning", "s3:GetLifecycleConfiguration"],
            [_bucket_arn(partition, b) for b in buckets],
        ),
        _allow(
            "ReadTableVersions",
            ["s3:GetObject", "s3:GetObjectVersion"],
            _flatten(_object_and_below(partition, loc) for loc in locations),
        ),
        *(
            _list(
                None,
                partition,
                bucket,
                _flatten(_prefixes(loc) for loc in locations if loc.bucket == bucket),
                actions=["s3:ListBucket", "s3:ListBucketVersions"],
            )
            for bucket in buckets
        ),
        _allow(
            "DeleteVersionsOnlyInsideRegisteredTables",
            "s3:DeleteObjectVersion",
            [_objects(partition, loc) for loc in locations],
        ),
    ]


def ingest_policy(
    inventory_table: str,
    destination: str,
    *,
    tables_file: str | None = None,
    partition: str = "aws",
) -> dict[str, Any]:
    """The ingest role's S3 policy: read the deliveries, read and write the inventory tables.

    ``destination`` is ``--destination`` (``s3://DEST_BUCKET/PREFIX``). No ``s3:DeleteObject``.

    Example::

        ingest_policy("s3://meta/warehouse/inventory", "s3://dest/inventory")
    """
    delivered = _location(destination, "--destination")
    inventory = _location(inventory_table, "--inventory-table")
    written = [inventory, *(_sibling(inventory_table, name) for name in INGEST_TABLES)]
    deliveries: list[Statement] = [
        _allow("ReadInventoryDeliveries", "s3:GetObject", [_objects(partition, delivered)]),
        _list("ListInventoryDeliveries", partition, delivered.bucket, _prefixes(delivered)),
    ]
    statements = [
        *deliveries,
        *_read_statements("InventoryTables", written, partition),
        _allow(
            "WriteInventoryTables", "s3:PutObject", [_objects(partition, location) for location in written]
        ),
        *_tables_file_statements(tables_file, partition),
    ]
    return _document(statements)


def chargeback_policy(
    inventory_table: str, *, tables_file: str | None = None, partition: str = "aws"
) -> dict[str, Any]:
    """The chargeback role's S3 policy: read the inventory table and its siblings, nothing else.

    (``chargeback --reclaimable`` runs a vacuum dry run, which also reads the registered tables:
    run it with the vacuum role.)

    Example::

        chargeback_policy("s3://meta/warehouse/inventory")
    """
    inventory = _location(inventory_table, "--inventory-table")
    siblings = [_sibling(inventory_table, name) for name in (*INGEST_TABLES, *VACUUM_TABLES)]
    statements = [
        *_read_statements("InventoryAndHistory", [inventory, *siblings], partition),
        *_tables_file_statements(tables_file, partition),
    ]
    return _document(statements)


def role_policy(
    role: str,
    registry: TableRegistry,
    inventory_table: str,
    *,
    destination: str | None = None,
    tables_file: str | None = None,
    partition: str = "aws",
) -> dict[str, Any]:
    """The policy of ``role`` (one of :data:`ROLES`); ``destination`` is required for ingest."""
    if role == "vacuum":
        return vacuum_policy(registry, inventory_table, tables_file=tables_file, partition=partition)
    if role == "ingest":
        if not destination:
            raise ConfigError("the ingest policy needs --destination s3://DEST_BUCKET/PREFIX")
        return ingest_policy(inventory_table, destination, tables_file=tables_file, partition=partition)
    if role == "chargeback":
        return chargeback_policy(inventory_table, tables_file=tables_file, partition=partition)
    if role == "restore":
        return restore_policy(registry, inventory_table, tables_file=tables_file, partition=partition)
    raise ConfigError(f"unknown role {role!r}: expected one of {', '.join(ROLES)}")


def _document(statements: Sequence[Statement]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def _table_locations(registry: TableRegistry) -> list[StorageLocation]:
    """The registered tables' locations, by table name; a table IAM cannot grant is refused."""
    locations = []
    for table in sorted(registry.tables, key=lambda table: table.name):
        if not table.location.is_s3:
            raise ConfigError(
                f"table {table.name!r} ({table.path}) is not on S3: IAM cannot grant access to it"
            )
        locations.append(_literal(table.location, f"table {table.name!r} ({table.path})"))
    return locations


def _location(uri: str, what: str) -> StorageLocation:
    location = StorageLocation.parse(uri, what=what)
    if not location.is_s3:
        raise ConfigError(f"{what} {uri!r} is not on S3: IAM cannot grant access to it")
    return _literal(location, f"{what} {uri!r}")


def _literal(location: StorageLocation, what: str) -> StorageLocation:
    """``location``, refused when IAM would not read it literally: ``*`` and ``?`` in a resource
    or an ``s3:prefix`` value are wildcards, ``$`` starts a policy variable; either would widen a
    grant (a delete) beyond the location."""
    special = sorted({c for c in f"{location.bucket}/{location.key}" if c in "*?$"})
    if special:
        raise ConfigError(
            f"{what} holds {' '.join(special)}, which IAM reads as a wildcard or variable: "
            "the grant would reach beyond it; rename the location or write that grant by hand"
        )
    return location


def _sibling(inventory_table: str, name: str) -> StorageLocation:
    return StorageLocation.parse(default_location(inventory_table, name))


def _read_statements(name: str, locations: Sequence[StorageLocation], partition: str) -> list[Statement]:
    """GetObject and prefix-limited ListBucket on the locations (all in one bucket: siblings)."""
    parent = _parent(locations[0])
    objects = ([_objects(partition, parent, "")] if parent.key else []) + _flatten(
        _object_and_below(partition, location) for location in locations
    )
    prefixes = ([parent.key, f"{parent.key}/"] if parent.key else []) + _flatten(
        _prefixes(location) for location in locations
    )
    return [
        _allow(f"Read{name}", "s3:GetObject", objects),
        _list(f"List{name}", partition, locations[0].bucket, prefixes),
    ]


def _tables_file_statements(tables_file: str | None, partition: str) -> list[Statement]:
    if not tables_file or not tables_file.startswith(("s3://", "s3a://", "s3n://")):
        return []
    location = _literal(StorageLocation.parse(tables_file, what="--tables"), f"--tables {tables_file!r}")
    return [_allow("ReadTablesFile", "s3:GetObject", [_objects(partition, location, "")])]


def _parent(location: StorageLocation) -> StorageLocation:
    key = location.key.rsplit("/", 1)[0] if "/" in location.key else ""
    return StorageLocation(location.scheme, location.bucket, key)


def _bucket_arn(partition: str, bucket: str) -> str:
    return f"arn:{partition}:s3:::{bucket}"


def _objects(partition: str, location: StorageLocation, below: str = "*") -> str:
    """``arn:aws:s3:::bucket/key/<below>``; ``below=""`` names the object ``key`` itself."""
    if not location.key:
        return f"{_bucket_arn(partition, location.bucket)}/{below or '*'}"
    suffix = f"/{below}" if below else ""
    return f"{_bucket_arn(partition, location.bucket)}/{location.key}{suffix}"


def _object_and_below(partition: str, location: StorageLocation) -> list[str]:
    return [_objects(partition, location, ""), _objects(partition, location)]


def _prefixes(location: StorageLocation) -> list[str]:
    return [location.key, f"{location.key}/", f"{location.key}/*"] if location.key else []


def _allow(sid: str, action: str | list[str], resources: Iterable[str]) -> Statement:
    return {"Sid": sid, "Effect": "Allow", "Action": action, "Resource": list(resources)}


def _list(
    sid: str | None,
    partition: str,
    bucket: str,
    prefixes: Sequence[str],
    *,
    actions: str | list[str] = "s3:ListBucket",
) -> Statement:
    """ListBucket (or ``actions``) on ``bucket``, limited to ``prefixes`` (the whole bucket when
    there are none)."""
    statement: Statement = {
        "Effect": "Allow",
        "Action": actions,
        "Resource": _bucket_arn(partition, bucket),
    }
    if prefixes:
        statement["Condition"] = {"StringLike": {"s3:prefix": list(prefixes)}}
    return {"Sid": sid, **statement} if sid else statement


def _flatten(groups: Iterable[Sequence[str]]) -> list[str]:
    return [item for group in groups for item in group]
