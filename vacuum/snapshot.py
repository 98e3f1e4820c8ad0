"""What the vacuum needs to know about a Delta table, read from Delta itself.

There is no public Python API for a snapshot's file list, its retention or its qualified location,
so these few facts come from Delta's JVM classes (``DeltaLog.forTableWithSnapshot``): the same
objects Delta's own VACUUM uses, so planning and VACUUM agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from inventory.errors import VacuumRefused
from inventory.paths import StorageLocation

_SEPARATOR = "\u0001"

SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"
_DELTA_DEFAULT_SNAPSHOT_PARTITIONS = 50
_ACTIONS_PER_SNAPSHOT_PARTITION = 100_000


@dataclass(frozen=True)
class TableState:
    """One snapshot of a Delta table, as VACUUM would see it."""

    uri: str
    qualified_location: str  # what Delta prefixes inventory paths with: s3a://b/t, file:/tmp/t
    version: int
    partition_columns: tuple[str, ...]
    retention_millis: int  # delta.deletedFileRetentionDuration
    iceberg_enabled: bool  # UniForm: the metadata/ folder belongs to Iceberg

    @property
    def base(self) -> str:
        """The qualified location with a trailing slash: every path of the table starts with it."""
        return self.qualified_location.rstrip("/") + "/"

    @property
    def bucket(self) -> str:
        """The bucket of the table (``_local`` for a local table), as the inventory names it."""
        from inventory.paths import StorageLocation

        return StorageLocation.parse(self.qualified_location, what="table location").bucket

    @property
    def key_prefix(self) -> str:
        """The key of the table's root with a trailing slash, as the inventory's ``key`` starts."""
        from inventory.paths import StorageLocation

        return StorageLocation.parse(self.qualified_location, what="table location").key + "/"

    @property
    def has_characters_beyond_the_basic_plane(self) -> bool:
        """True when the location holds a character outside Unicode's Basic Multilingual Plane.

        Delta's inventory mode cuts relative paths by the location's Java (UTF-16) length while
        Spark's ``substr`` counts code points: every relative path would lose characters.
        """
        return any(ord(character) > 0xFFFF for character in self.qualified_location)

    @property
    def retention_hours(self) -> float:
        return self.retention_millis / 3_600_000


def load_table_state(spark: SparkSession, uri: str) -> tuple[TableState, DataFrame]:
    """The newest snapshot of the table at ``uri`` and a DataFrame of its live files.

    The files frame has Delta's ``AddFile`` columns: ``path`` (relative and URL-encoded, or
    absolute for files outside the table), ``size`` and ``modificationTime``.
    """
    jvm = spark._jvm
    assert jvm is not None, "needs a classic (JVM-backed) SparkSession, not Spark Connect"
    delta = jvm.org.apache.spark.sql.delta
    pair = delta.DeltaLog.forTableWithSnapshot(spark._jsparkSession, uri)  # type: ignore[attr-defined]
    delta_log, snapshot = pair._1(), pair._2()
    if snapshot.version() < 0:
        raise VacuumRefused(f"{uri} is not a Delta table (no _delta_log)")
    data_path = delta_log.dataPath()
    file_system = data_path.getFileSystem(delta_log.newDeltaHadoopConf())
    metadata = snapshot.metadata()
    partitions = metadata.partitionColumns().mkString(_SEPARATOR)
    state = TableState(
        uri=uri,
        qualified_location=file_system.makeQualified(data_path).toString(),
        version=int(snapshot.version()),
        partition_columns=tuple(p for p in partitions.split(_SEPARATOR) if p),
        retention_millis=int(delta.DeltaLog.tombstoneRetentionMillis(metadata)),
        iceberg_enabled=bool(delta.UniversalFormat.icebergEnabled(metadata)),
    )
    files = DataFrame(snapshot.allFiles().toDF(), spark).select("path", "size", "modificationTime")
    return state, files


def decoded_relative_path(column: str = "path") -> F.Column:
    """Delta's URL-encoded relative ``AddFile.path`` as the raw key suffix S3 Inventory shows.

    Delta encodes with ``java.net.URI`` (a space is ``%20``, ``+`` stays ``+``); ``url_decode``
    reads ``+`` as a space, so a literal ``+`` is protected first.
    """
    return F.url_decode(F.replace(F.col(column), F.lit("+"), F.lit("%2B")))


def snapshot_partitions(location: StorageLocation, default_parallelism: int) -> int:
    """How many partitions Delta should rebuild this table's snapshot in: sized to the table.

    Delta's default (50) suits a table of millions of files on a cluster; a small table pays
    for 50 tasks on every snapshot. The table's ``_delta_log/_last_checkpoint`` says how many
    actions its checkpoint holds (one small GET): a partition per 100k actions, at most Delta's
    default. Without a checkpoint (a young table, a few commits) the cluster's parallelism, at most
    Delta's default.
    """
    import json

    key = f"{location.key}/_delta_log/_last_checkpoint"
    try:
        if location.is_s3:
            from inventory.s3 import s3_client

            text = s3_client().get_object(Bucket=location.bucket, Key=key)["Body"].read()
        else:
            with open("/" + key, "rb") as handle:
                text = handle.read()
        actions = int(json.loads(text)["size"])
    except Exception:  # no checkpoint yet, or one without a size
        return max(1, min(_DELTA_DEFAULT_SNAPSHOT_PARTITIONS, default_parallelism))
    return max(1, min(_DELTA_DEFAULT_SNAPSHOT_PARTITIONS, -(-actions // _ACTIONS_PER_SNAPSHOT_PARTITION)))
