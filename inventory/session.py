"""The one SparkSession factory used by every job and every test.

It configures Delta (SQL extension and catalog), pulls the Delta and ``hadoop-aws`` jars the
standard way (``spark.jars.packages`` via :func:`delta.configure_spark_with_delta_pip`), maps
``s3://`` and ``s3n://`` onto Hadoop's S3A filesystem, and points S3A at the endpoint, region and
credentials named by the standard AWS environment variables, so one command works against AWS and
against a local S3 server alike.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pyspark.sql import SparkSession

# hadoop-aws must match the Hadoop that the pyspark wheel bundles (pyspark/jars/hadoop-client-*);
# it brings the AWS SDK v2 bundle it was built against as a transitive dependency.
HADOOP_AWS_PACKAGE = "org.apache.hadoop:hadoop-aws:3.4.1"

S3A_FILESYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"


def jvm_packages() -> list[str]:
    """The Maven coordinates a cluster needs: ``spark-submit --packages ",".join(jvm_packages())``."""
    from importlib.metadata import version

    return [f"io.delta:delta-spark_2.13:{version('delta-spark')}", HADOOP_AWS_PACKAGE]


def s3a_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Hadoop S3A settings derived from the standard AWS environment variables.

    ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL`` select a non-AWS endpoint (path-style access,
    TLS per the URL's scheme); ``AWS_REGION`` / ``AWS_DEFAULT_REGION`` the signing region.
    Credentials need no setting: S3A's default provider chain reads ``AWS_ACCESS_KEY_ID`` and
    ``AWS_SECRET_ACCESS_KEY`` itself, and falls back to instance and container roles on clusters.
    """
    env = os.environ if environ is None else environ
    settings = {
        "fs.s3.impl": S3A_FILESYSTEM,
        "fs.s3n.impl": S3A_FILESYSTEM,
        "fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A",
    }
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint:
        settings["fs.s3a.endpoint"] = endpoint
        settings["fs.s3a.path.style.access"] = "true"
        settings["fs.s3a.connection.ssl.enabled"] = str(endpoint.startswith("https")).lower()
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        settings["fs.s3a.endpoint.region"] = region
    return settings


def build_spark_session(
    app_name: str = "inventory-vacuum", extra_conf: Mapping[str, str] | None = None
) -> SparkSession:
    """Return the SparkSession for a job (or the active one, reconfigured for S3).

    Settings already given to ``spark-submit`` (``--master``, ``--conf``, ``--packages``) win over
    the defaults here; ``extra_conf`` wins over both.

    Example::

        spark = build_spark_session("ingest", {"spark.sql.shuffle.partitions": "8"})
    """
    from delta import configure_spark_with_delta_pip

    builder = SparkSession.builder.appName(app_name)
    defaults = {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
        "spark.databricks.delta.vacuum.parallelDelete.enabled": "true",
    }
    for key, value in s3a_settings().items():
        defaults[f"spark.hadoop.{key}"] = value
    submitted = _submitted_conf()
    if "spark.master" not in submitted:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # Local mode: a small machine, one process, servers on the loopback interface only.
        defaults.update(
            {
                "spark.master": "local[*]",
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
                "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "8",
                # Delta's listing VACUUM plans one task per this many; 10000 by default.
                "spark.sql.sources.parallelPartitionDiscovery.parallelism": "8",
                "spark.databricks.delta.vacuum.parallelDelete.parallelism": "8",
            }
        )
    for key, value in defaults.items():
        if key not in submitted:
            builder = builder.config(key, value)
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    if "spark.jars.packages" not in submitted and "spark.jars" not in submitted:
        builder = configure_spark_with_delta_pip(builder, extra_packages=[HADOOP_AWS_PACKAGE])
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("INVENTORY_VACUUM_SPARK_LOG_LEVEL", "ERROR"))
    return spark


def _submitted_conf() -> dict[str, str]:
    """Spark settings passed by spark-submit (empty when Python starts the JVM itself)."""
    raw = os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    conf: dict[str, str] = {}
    if "--master" in raw:
        conf["spark.master"] = "set"
    if "--packages" in raw:
        conf["spark.jars.packages"] = "set"
    if "--jars" in raw:
        conf["spark.jars"] = "set"
    if os.environ.get("SPARK_ENV_LOADED") or os.environ.get("PYSPARK_GATEWAY_PORT"):
        # Running under spark-submit: the launcher already holds the cluster's configuration.
        from pyspark import SparkConf

        conf.update(dict(SparkConf().getAll()))
    return conf
