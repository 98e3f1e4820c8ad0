"""Real Delta tables with real histories, for the vacuum tests, and what their snapshots reference."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

CITIES = ["São Paulo", "a b", "100%", "x=y", "c#d", "日本"]


def create_history_table(
    spark: SparkSession, uri: str, *, retention: str = "interval 7 days", extra_properties: str = ""
) -> list[int]:
    """A partitioned table (day/city, with awkward values) through a realistic history:
    appends, a DELETE and an UPDATE with deletion vectors and change data feed, OPTIMIZE,
    a partition overwrite, and checkpoints. Returns the row count of every version."""
    spark.sql(
        f"""CREATE TABLE delta.`{uri}` (id BIGINT, value STRING, day STRING, city STRING)
        USING delta PARTITIONED BY (day, city)
        TBLPROPERTIES (
          'delta.enableDeletionVectors' = 'true',
          'delta.enableChangeDataFeed' = 'true',
          'delta.checkpointInterval' = '3',
          'delta.deletedFileRetentionDuration' = '{retention}'
          {extra_properties}
        )"""
    )

    def batch(start: int, count: int, day: str) -> Any:
        rows = [(i, f"v{i}", day, CITIES[i % len(CITIES)]) for i in range(start, start + count)]
        return spark.createDataFrame(rows, "id bigint, value string, day string, city string")

    batch(0, 24, "2024-01-01").write.format("delta").mode("append").save(uri)
    batch(100, 24, "2024-01-02").write.format("delta").mode("append").save(uri)
    batch(200, 12, "2024-01-01").write.format("delta").mode("append").save(uri)
    spark.sql(f"DELETE FROM delta.`{uri}` WHERE id % 5 = 0")
    spark.sql(f"UPDATE delta.`{uri}` SET value = 'updated' WHERE id % 7 = 0")
    spark.sql(f"OPTIMIZE delta.`{uri}`")
    batch(300, 6, "2024-01-02").write.format("delta").mode("overwrite").option(
        "replaceWhere", "day = '2024-01-02'"
    ).save(uri)
    batch(400, 6, "2024-01-03").write.format("delta").mode("append").save(uri)
    versions = spark.sql(f"DESCRIBE HISTORY delta.`{uri}`").select("version").collect()
    return [
        len(spark.read.format("delta").option("versionAsOf", v["version"]).load(uri).collect())
        for v in sorted(versions)
    ]


def make_table(
    spark: SparkSession, bucket: str, name: str = "events", retention: str = "interval 2 seconds"
) -> str:
    """A partitioned table on S3 whose overwrite leaves removed files behind."""
    uri = f"s3a://{bucket}/{name}"
    spark.sql(
        f"CREATE TABLE delta.`{uri}` (id BIGINT, day STRING) USING delta PARTITIONED BY (day) "
        f"TBLPROPERTIES ('delta.deletedFileRetentionDuration' = '{retention}')"
    )
    frame = spark.createDataFrame([(i, f"2024-01-0{i % 2 + 1}") for i in range(10)], "id bigint, day string")
    frame.write.format("delta").mode("append").save(uri)
    frame.where("day = '2024-01-01'").write.format("delta").mode("overwrite").option(
        "replaceWhere", "day = '2024-01-01'"
    ).save(uri)
    return uri


def all_versions_readable(spark: SparkSession, uri: str) -> list[int]:
    """Read every version (time travel), data and deletion vectors; returns row counts."""
    versions = sorted(
        r["version"] for r in spark.sql(f"DESCRIBE HISTORY delta.`{uri}`").select("version").collect()
    )
    return [len(spark.read.format("delta").option("versionAsOf", v).load(uri).collect()) for v in versions]


def referenced_files(spark: SparkSession, uri: str) -> set[str]:
    """Absolute paths of the current snapshot's data files and deletion-vector files."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    pair = jvm.org.apache.spark.sql.delta.DeltaLog.forTableWithSnapshot(spark._jsparkSession, uri)  # type: ignore[attr-defined]
    delta_log, snapshot = pair._1(), pair._2()
    data_path = delta_log.dataPath()
    files = set()
    for add in snapshot.allFiles().collectAsList():
        files.add(
            jvm.org.apache.hadoop.fs.Path(
                data_path, jvm.org.apache.hadoop.fs.Path(jvm.java.net.URI(add.path()))
            )
            .toUri()
            .getPath()
        )
        dv = add.deletionVector()
        if dv is not None and dv.isOnDisk():
            files.add(dv.absolutePath(data_path).toUri().getPath())
    return files


def referenced_keys(spark: SparkSession, uri: str) -> set[str]:
    """The current snapshot's files as S3 keys (bucket-relative)."""
    return {p.lstrip("/") for p in referenced_files(spark, uri)}


def files_under(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*") if p.is_file()}
