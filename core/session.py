"""The one SparkSession factory used by every job and every test.

It configures Delta (SQL extension and catalog), pulls the Delta and ``hadoop-aws`` jars the
standard way (``spark.jars.packages``: Delta's artifact built for the installed Spark minor), maps
``s3://`` and ``s3n://`` onto Hadoop's S3A filesystem, and points S3A at the endpoint, region and
credentials named by the standard AWS environment variables, so one command works against AWS and
against a local S3 server alike.

It also makes the session independent of the caller's ``PATH`` and working directory: Spark's
Python workers run the driver's own interpreter (where this package and boto3 are installed), and
on a cluster the package itself is shipped to the executors.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import logging
import os
import re
import shlex
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pyspark
from pyspark import SparkContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    BooleanType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
    _make_type_verifier,
)

from core import class_archive
from core.errors import ConfigError
from core.jar_cache import cached_jars, remember_jars

# hadoop-aws must match the Hadoop that Spark bundles (jars/hadoop-client-api-<version>.jar): 3.5.0
# for pyspark 4.2, 3.4.1 for 4.0, 3.3.4 for 3.5. It brings the AWS SDK it was built against (v2 for
# 3.4 on, v1 for 3.3) as a transitive dependency.
_HADOOP_CLIENT_JAR = re.compile(r"hadoop-client-api-(\d+\.\d+\.\d+)\.jar")
_SCALA_LIBRARY_JAR = re.compile(r"scala-library-(\d+\.\d+)\.\d+\.jar")

# The Spark lines the tool is tested on: each Spark minor with the Delta minor tested beside it
# (pyproject.toml allows exactly these; infra/constraints/spark-<line>.txt pins each). Delta 4.4 is
# also built for Spark 4.0 and 4.1, and Spark 4.1 ships no change the vacuum depends on, but neither
# pair runs in CI, so neither is accepted.
SUPPORTED_LINES = {"4.2": "4.4", "4.0": "4.0", "3.5": "3.3"}
# From Delta 4.1 on, Delta publishes its Spark-dependent jars once per Spark minor it supports
# (io.delta:delta-spark_4.2_2.13); the unsuffixed name is the release's default Spark only.
_FIRST_DELTA_WITH_SPARK_SUFFIX = (4, 1)

S3A_FILESYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"

# The JVM's first compiler only (C1), not its optimising one (C2): a JVM that lives for one table's
# vacuum (its dry run 15 to 27 s on 2 cores from 3,000 to 100,000 files) spends more CPU compiling
# with C2, and running C1's profiling code meanwhile, than the optimised code gives back before it
# exits (benchmarks/results/one_table.md and one-table-100k/: 1.30x and 1.25x slower with C2), while
# a run of many tables gets it back (docs/performance.md).
QUICK_JIT_OPTION = "-XX:TieredStopAtLevel=1"
# With C1 only, Java 17 and 25 reserve 48 MB (49,152 KB) for compiled code instead of the 240 MB
# they reserve with both compilers. On Java 17, one table's real run at 30,000 files took its code to
# 48,414 to 49,047 KB in three runs (-XX:+PrintCodeCache), and the JVM threw compiled code away near
# the end of the cache: two such runs took 34.3 and 28.6 s against 27.7 and 25.4 s with 240 MB, in
# turn (the third 27.4 s; docs/performance.md). A full cache stops the compilers and fails the next
# call that needs a new method handle adapter ("Out of space in CodeCache for method handle
# intrinsic": a table's vacuum failed so when compiling sooner filled it). So a C1-only JVM gets the
# size the JVM reserves with both compilers, unless the user's options set one (-Xmaxjitcodesize is
# the JVM's other name for it) or the sizes of its heaps (with -XX:+SegmentedCodeCache): beside the
# tool's size, the JVM refused to start with three that do not add up to it, and Java 25 with some pairs.
QUICK_JIT_CODE_CACHE_OPTION = "-XX:ReservedCodeCacheSize=240m"
# options the JVM reads from a file, which may set anything the tool would: -XX:Flags=,
# -XX:VMOptionsFile= and an @argfile of JDK_JAVA_OPTIONS
_OPTIONS_FROM_A_FILE = r"-XX:(?:Flags|VMOptionsFile)=|(?:^|\s)@\S"
_CODE_CACHE_CHOICE = re.compile(
    r"-XX:(?:ReservedCodeCacheSize|NonNMethodCodeHeapSize|ProfiledCodeHeapSize|NonProfiledCodeHeapSize)="
    rf"|-Xmaxjitcodesize|{_OPTIONS_FROM_A_FILE}"
)
# 1: every local JVM the tool starts on the cached jars gets the C1-only option; 0: none does;
# unset: the command says (only a one-table vacuum is short)
QUICK_JIT_VARIABLE = "INVENTORY_VACUUM_QUICK_JIT"

# The parallel collector, not G1 (the JVM's default on a machine of 2 CPUs and 2 GB or more), for
# a JVM that lives for many tables: a run over small tables allocates fast and keeps little, and
# G1's concurrent work and write barriers cost more of 2 cores than the parallel collector's
# pauses (benchmarks.many_tables, 20 tables at --parallel 4, 5 runs each in turn: 1.74 against
# 1.83 s a table, medians; faster in 4 of the 5 pairs). A one-table run keeps the JVM's default,
# as its figures were measured.
THROUGHPUT_GC_OPTION = "-XX:+UseParallelGC"
# where a user may already choose a collector for the JVM PySpark starts; two choices stop the JVM
_JAVA_OPTION_VARIABLES = (
    "JAVA_TOOL_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "_JAVA_OPTIONS",
    "PYSPARK_SUBMIT_ARGS",
    "SPARK_SUBMIT_OPTS",  # Spark's launcher adds it to a client-mode driver's JVM
)
# a collector chosen by name, or options the JVM reads from a file (which may choose one)
_COLLECTOR_CHOICE = re.compile(rf"-XX:[+-]Use\w*GC\b|{_OPTIONS_FROM_A_FILE}")

# PySpark's recording of each call's Python call site for DataFrame error messages (PySpark 4)
DATAFRAME_DEBUGGING = "spark.python.sql.dataFrameDebugging.enabled"

# How Delta writes a commit's checksum file (``_delta_log/<version>.crc``): a temporary file, then a
# rename, through the class this Spark setting names (Spark's default: Hadoop's FileContext API).
# On S3A from Hadoop 3.4 (Spark 4.0 on), a rename through FileContext probed the source, the target
# and the target's parent three times in all (FileContext's own checks, then S3A's): 22 requests a
# checksum, 10 through the FileSystem API, with the same check (the target must not exist) and the
# same copy and delete (one append to the history table on the local S3: 39 requests against 27).
# On Spark 3.5 (Delta 3.3, Hadoop 3.3's S3A), Delta wrote no checksum through FileContext at all
# (tests/test_line_semantics.py), and does through the FileSystem API. Delta reads the setting
# only for its checksum files; the tool runs no streaming query, the setting's other user.
CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"


def checkpoint_manager(spark_version: str, api: str = "FileSystem") -> str:
    """Spark's checkpoint file manager over Hadoop's ``api`` (``FileSystem``, the one the tool's
    sessions name, or ``FileContext``, Spark's default), whose package Spark 4.1 moved."""
    package = "org.apache.spark.sql.execution.streaming"
    if version_tuple(spark_version)[:2] >= (4, 1):
        package += ".checkpointing"
    return f"{package}.{api}BasedCheckpointFileManager"


log = logging.getLogger("inventory_vacuum")

# The packages Spark tasks import (e.g. vacuum.execute's batch delete), shipped to the executors
# as one zip under this name; a file of this name already given to spark-submit --py-files wins.
PACKAGES = ("core", "inventory", "vacuum", "chargeback", "jobs")
PACKAGE_ZIP = "inventory_vacuum.zip"

# local, local[4], local[*], local[4,2]: tasks run in the driver's process, on the driver's machine.
# local-cluster[...] and every cluster manager start separate executor processes.
_IN_PROCESS_MASTER = re.compile(r"local(\[[^\]]*\])?")


def quick_jit_options(
    short_run: bool, conf: Mapping[str, str] | None = None, own: Sequence[str] = ()
) -> list[str]:
    """The JVM options for a run that ``short_run`` says is short (:data:`QUICK_JIT_OPTION`, and
    :data:`QUICK_JIT_CODE_CACHE_OPTION` unless the caller's Java options ``own``, ``conf``'s driver
    settings or an environment variable the JVM or PySpark's launcher reads already set the code
    cache's size, or name a file of options, which may), or none; :data:`QUICK_JIT_VARIABLE`
    (``0`` or ``1``) overrides the guess either way. They count only where
    :func:`build_spark_session` starts a local JVM of its own."""
    chosen = os.environ.get(QUICK_JIT_VARIABLE, "").strip()
    if chosen not in ("", "0", "1"):
        raise ConfigError(
            f"{QUICK_JIT_VARIABLE}={chosen!r}: give 1 (C1 only), 0 (the JVM's default) or nothing"
        )
    if chosen:
        short_run = chosen == "1"
    if not short_run:
        return []
    if any(_CODE_CACHE_CHOICE.search(text) for text in _given_java_options(conf, own)):
        return [QUICK_JIT_OPTION]
    return [QUICK_JIT_OPTION, QUICK_JIT_CODE_CACHE_OPTION]


def _given_java_options(conf: Mapping[str, str] | None, own: Sequence[str]) -> list[str]:
    """The Java options a JVM the tool starts gets from elsewhere: the caller's (``own``), the
    driver settings of ``conf`` and the environment variables the JVM or Spark's launcher reads."""
    given = [*own, *(os.environ.get(name, "") for name in _JAVA_OPTION_VARIABLES)]
    return given + [value for key, value in (conf or {}).items() if key.startswith("spark.driver.")]


def collector_options(
    short_run: bool, conf: Mapping[str, str] | None = None, own: Sequence[str] = ()
) -> list[str]:
    """The collector option (:data:`THROUGHPUT_GC_OPTION`) for a run that is not short, or none:
    none where a collector is already chosen, in the caller's Java options ``own``, ``conf``'s
    driver settings or an environment variable the JVM or PySpark's launcher reads (the JVM
    refuses two choices), and where those name a file of options, which may choose one. It counts
    only where :func:`build_spark_session` starts a local JVM of
    its own."""
    if short_run:
        return []
    if any(_COLLECTOR_CHOICE.search(text) for text in _given_java_options(conf, own)):
        return []
    return [THROUGHPUT_GC_OPTION]


def jvm_packages() -> list[str]:
    """The Maven coordinates a cluster needs: ``spark-submit --packages ",".join(jvm_packages())``.

    Delta's artifact built for the installed pyspark's Spark minor and Scala (``delta-spark_4.2_2.13``
    from Delta 4.1 on, ``delta-spark_2.12`` before) at the installed delta-spark's version, and the
    hadoop-aws of pyspark's Hadoop.
    """
    import pyspark

    scala, _ = _bundled_versions()
    delta = installed_delta_version()
    spark_minor = minor(pyspark.__version__)
    suffix = f"_{spark_minor}" if version_tuple(delta)[:2] >= _FIRST_DELTA_WITH_SPARK_SUFFIX else ""
    return [f"io.delta:delta-spark{suffix}_{scala}:{delta}", hadoop_aws_package()]


def installed_delta_version() -> str:
    """The version of the installed delta-spark Python package."""
    from importlib.metadata import version

    return version("delta-spark")


def minor(version: str) -> str:
    """``4.2`` of ``4.2.0``."""
    return ".".join(version.split(".")[:2])


def version_tuple(version: str) -> tuple[int, ...]:
    """``(4, 4, 0)`` of ``4.4.0`` (a suffix such as ``rc1`` or ``-amzn-0`` is dropped)."""
    return tuple(int(re.match(r"\d*", part).group() or 0) for part in version.split(".")[:3])  # type: ignore[union-attr]


def check_supported_line(spark_version: str, delta_version: str) -> None:
    """Refuse a Spark and Delta pair that is not one of :data:`SUPPORTED_LINES`, in one line."""
    if SUPPORTED_LINES.get(minor(spark_version)) == minor(delta_version):
        return
    tested = ", ".join(f"Spark {s} with Delta {d}" for s, d in SUPPORTED_LINES.items())
    raise ConfigError(
        f"Spark {spark_version} with Delta {delta_version} is not a line inventory-vacuum is tested on "
        f"({tested}): install a tested pair (pip install 'pyspark==4.2.0' 'delta-spark==4.4.0'), "
        "or give spark-submit the Delta jars of the tested pair"
    )


def jvm_delta_version(spark: SparkSession) -> str:
    """The version of the Delta jars the session's JVM runs (``io.delta.VERSION``); the Python
    package's when the jar does not say (a vendor build)."""
    try:
        module = getattr(getattr(spark._jvm.io.delta, "package$"), "MODULE$")  # type: ignore[union-attr]
        return str(module.VERSION())
    except Exception:
        pass
    try:
        return installed_delta_version()
    except Exception:
        raise ConfigError(
            "cannot tell which Delta the session runs: its jars have no io.delta.VERSION and the "
            "delta-spark Python package is not installed"
        ) from None


def hadoop_aws_package() -> str:
    """``org.apache.hadoop:hadoop-aws:<v>`` for the Hadoop the installed pyspark bundles."""
    return f"org.apache.hadoop:hadoop-aws:{_bundled_versions()[1]}"


@functools.cache
def _bundled_versions() -> tuple[str, str]:
    """(Scala binary version, Hadoop version) of the jars the installed pyspark ships."""
    import pyspark

    names = [path.name for path in (Path(pyspark.__file__).parent / "jars").glob("*.jar")]
    scala = next((m.group(1) for m in map(_SCALA_LIBRARY_JAR.fullmatch, names) if m), None)
    hadoop = next((m.group(1) for m in map(_HADOOP_CLIENT_JAR.fullmatch, names) if m), None)
    if scala is None or hadoop is None:
        raise RuntimeError(
            f"cannot tell the Scala and Hadoop versions of pyspark {pyspark.__version__}: "
            f"no scala-library-*.jar or hadoop-client-api-*.jar in {Path(pyspark.__file__).parent / 'jars'}"
        )
    return scala, hadoop


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
        # retries, stated rather than left to the Hadoop version's defaults: the AWS SDK's own
        # attempts per request, then S3A's retries of failed and throttled (503) requests
        "fs.s3a.attempts.maximum": "5",
        "fs.s3a.retry.limit": "7",
        "fs.s3a.retry.interval": "500ms",
        "fs.s3a.retry.throttle.limit": "20",
        "fs.s3a.retry.throttle.interval": "1000ms",
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
    app_name: str = "inventory-vacuum",
    extra_conf: Mapping[str, str] | None = None,
    *,
    resolve_jars: bool = False,
    java_options: Sequence[str] = (),
    short_run: bool = False,
) -> SparkSession:
    """Return the SparkSession for a job (or the active one, reconfigured for S3).

    Settings already given to ``spark-submit`` (``--master``, ``--conf``, ``--packages``) win over
    the defaults here; ``extra_conf`` wins over both. When no jars are given, the jars Ivy resolved
    for the same packages last time are loaded directly (:mod:`core.jar_cache`); ``resolve_jars``
    makes Ivy resolve them again. Python workers run :func:`worker_python`, and
    on a cluster master the package is shipped to the executors (:func:`ship_package`).

    A local JVM that Python starts on the cached jars maps their classes from the class-data
    archive ``fetch-jars`` made (:mod:`core.class_archive`), and gets ``java_options`` too, and
    C1 only when the caller says the run is short (``short_run``; :func:`quick_jit_options`), the
    parallel collector when it is not (:func:`collector_options`), as
    ``spark.driver.defaultJavaOptions`` (only where no user setting of it can exist:
    :func:`core.class_archive.driver_options_taken`).

    When Python starts the JVM itself, the JVM logs with the package's ``log4j2.properties``
    (warnings and errors), and with ``INVENTORY_VACUUM_JVM_LOG=FILE`` everything the JVM prints
    (Ivy's resolution report, SLF4J's and log4j's lines) goes to FILE instead of the terminal.

    Example::

        spark = build_spark_session("ingest", {"spark.sql.shuffle.partitions": "8"})
    """
    quick_jit = quick_jit_options(short_run, extra_conf, java_options)  # a bad setting fails here
    collector = collector_options(short_run, extra_conf, java_options)
    builder = SparkSession.builder.appName(app_name)
    defaults = {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
        "spark.databricks.delta.vacuum.parallelDelete.enabled": "true",
        # Spark keeps the classes it generates for a query's stages and expressions in a cache of
        # 100 by default (a static setting: it counts only when this call starts the session). A
        # vacuum of one table needs about 50 (Delta's snapshot and dry run, our checks); four
        # tables at once, and every table compiled them all again: 49 compilations a table, about
        # a third of the driver's CPU in a run over many small tables (JFR; Spark's
        # CodegenMetrics). With room for 1,000 a table compiles about 6, the ones whose code holds
        # a literal of its own (a clock reading, a path's length), which the cache evicts first.
        # The cache is keyed by the whole generated source, so a class is shared only by queries
        # of the same code; string literals (paths) are passed to each instance, not compiled in.
        "spark.sql.codegen.cache.maxEntries": "1000",
        # PySpark 4 records the Python call site of every Column method and F.col on the JVM,
        # for the context of a DataFrame's error messages: about ten more Py4J round trips a call
        # (F.col took 13 where it needs 3). The tool builds its plans from a few hundred such
        # calls a table, and reports errors in its own words: 7,000 round trips a table of 1,000
        # files, 3,500 without the call sites (counted over 8 tables, one run). A static setting:
        # it counts only when this call starts the session. Spark 3.5 has no such recording.
        DATAFRAME_DEBUGGING: "false",
        CHECKPOINT_FILE_MANAGER: checkpoint_manager(pyspark.__version__),
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
    log4j = _log4j_properties()
    if log4j and not _jvm_running():
        # an environment variable, not -D in spark.driver.extraJavaOptions: that would replace the
        # user's own options (spark-defaults.conf), and a path with a space would split it; a
        # -Dlog4j2.configurationFile the user gives still wins over it
        os.environ.setdefault("LOG4J_CONFIGURATION_FILE", log4j)

    starting = not _jvm_running()
    tools_jars = "spark.jars.packages" not in submitted and "spark.jars" not in submitted
    cached = None
    if tools_jars and starting and not resolve_jars:
        cached = cached_jars(jvm_packages(), pyspark.__version__)
    resolving = tools_jars and cached is None
    appended_classpath = None
    if cached is not None and _jvm_is_local_and_ours(submitted, extra_conf):
        # Local mode runs the executor inside the driver, so the driver's class path is enough.
        # Given as spark.jars, the jars (about 750 MB, most of it the AWS SDK bundle) would be
        # copied into the session's temporary folder at each start. Spark's launcher puts
        # SPARK_DIST_CLASSPATH after Spark's own jars: a class both have loads from Spark's, as it
        # does with spark.jars (a child class loader).
        appended_classpath = os.pathsep.join(cached)
        options = local_driver_options([*java_options, *quick_jit, *collector], cached, pyspark.__version__)
        if options:
            builder = builder.config("spark.driver.defaultJavaOptions", _driver_java_options(options))
    elif cached is not None:
        builder = builder.config("spark.jars", ",".join(cached))
    elif resolving:
        builder = builder.config("spark.jars.packages", ",".join(jvm_packages()))
    try:
        with (
            _jvm_output_to(None if _jvm_running() else os.environ.get("INVENTORY_VACUUM_JVM_LOG")),
            _environment_appended("SPARK_DIST_CLASSPATH", appended_classpath),
        ):
            spark = builder.getOrCreate()
    except Exception as error:
        tail = _jvm_log_tail()
        if resolving and "unresolved dependency" in str(error) + tail:
            log_path = os.environ.get("INVENTORY_VACUUM_JVM_LOG")
            raise ConfigError(
                f"the JVM jars {', '.join(jvm_packages())} cannot be had from the Maven repositories "
                f"this machine reaches: install a delta-spark whose jars are published "
                f"(the tested pairs: {', '.join(f'pyspark {s} + delta-spark {d}' for s, d in SUPPORTED_LINES.items())})"
                + (f"; Ivy's report is in {log_path}" if log_path else "")
            ) from None
        if tail:  # the JVM's own reason is in the file, not on the terminal: show its end
            lines = tail.splitlines(keepends=True)[-15:]
            print(
                f"the JVM did not start; the end of {os.environ.get('INVENTORY_VACUUM_JVM_LOG')}:\n{''.join(lines)}",
                end="",
                file=sys.stderr,
            )
        raise
    if starting:
        from core.s3 import load_client_model

        load_client_model()  # the S3 model loads while the driver waits on the JVM
    if starting and spark._jvm is not None:
        # a few facts of the JVM's own options (not all of them: a user's may hold a secret)
        started_with = [
            str(o)
            for o in spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
        ]
        archive = next(
            (o.split("=", 1)[1] for o in started_with if o.startswith("-XX:SharedArchiveFile=")), None
        )
        code_cache = _vm_option_number(spark, "ReservedCodeCacheSize")
        log.info(
            "the JVM started %s, %s, %s and %s",
            f"with {QUICK_JIT_OPTION} (C1 only)"
            if QUICK_JIT_OPTION in started_with
            else "without the C1-only option",
            f"with a code cache of {_bytes_text(code_cache)}"
            if code_cache
            else "with an unknown code cache size",
            f"with {THROUGHPUT_GC_OPTION}"
            if THROUGHPUT_GC_OPTION in started_with
            else "without the parallel collector option",
            f"the class-data archive {archive}" if archive else "no class-data archive",
        )
    check_supported_line(spark.version, jvm_delta_version(spark))
    if resolving and starting:
        remember_jars(jvm_packages(), pyspark.__version__, spark.sparkContext.getConf().get("spark.jars", ""))
    spark.sparkContext.setLogLevel(os.environ.get("INVENTORY_VACUUM_SPARK_LOG_LEVEL", "ERROR"))
    context = spark.sparkContext
    # PySpark reads only PYSPARK_PYTHON (default: python3 from PATH) when it starts the JVM itself.
    context.pythonExec = worker_python(context.getConf().get("spark.pyspark.python"))
    ship_package(context)
    return spark


def name_jobs(spark: SparkSession, step: str) -> None:
    """Name the Spark jobs that follow (Spark UI, event log): the thread's job group, then ``step``."""
    group = spark.sparkContext.getLocalProperty("spark.jobGroup.id") or "inventory-vacuum"
    spark.sparkContext.setJobDescription(f"{group}: {step}")


@contextmanager
def job_group(spark: SparkSession, group: str) -> Iterator[None]:
    """Put the calling thread's Spark jobs in ``group`` (named steps: :func:`name_jobs`), then
    restore the thread's group and description as they were."""
    context = spark.sparkContext
    keys = ("spark.jobGroup.id", "spark.job.description")
    before = {key: context.getLocalProperty(key) for key in keys}
    context.setLocalProperty("spark.jobGroup.id", group)
    try:
        yield
    finally:
        for key, value in before.items():
            context.setLocalProperty(key, value)  # type: ignore[arg-type]  # None removes it


@contextmanager
def session_default(spark: SparkSession, key: str, value: str | None) -> Iterator[None]:
    """While the block runs, the session's ``key`` is ``value``, unless the job's configuration (or
    the session) already sets it, or ``value`` is None: a setting of the user's always wins. After,
    ``key`` is unset again if it still holds ``value`` (other threads on the session see the setting
    while the block runs, and one they set meanwhile is kept).
    """
    if value is None or spark.conf.get(key, None) is not None:
        yield
        return
    spark.conf.set(key, value)
    try:
        yield
    finally:
        try:
            if spark.conf.get(key, None) == value:
                spark.conf.unset(key)
        except Exception as error:  # a JVM already gone: the job's own error is the one to see
            log.info("could not put back %s: %s", key, error)


# Spark's code generation: whole-stage code and the expression factory's. A small plan runs without
# either (interpreted_while, vacuum.tuning.interpret_small_plan).
INTERPRETED = (("spark.sql.codegen.wholeStage", "false"), ("spark.sql.codegen.factoryMode", "NO_CODEGEN"))
# A table with at most this many objects in the inventory is planned interpreted, and a log of at
# most this many actions is small (core.tables.small_log)
INTERPRETED_UP_TO_OBJECTS = 10_000
# A delivery whose data files hold at most this many bytes is loaded interpreted: 10,000 objects
# took 0.55 to 0.95 MB as ORC, gzipped CSV or Parquet (1.3 MB with versions) in deliveries the
# tool's own writer made of random ETags and part-file names, as Spark names them; keys that
# compress better fit more objects
INTERPRETED_UP_TO_BYTES = 1024 * 1024


def codegen_set_by_user(spark: SparkSession) -> bool:
    """The job's configuration (``--conf``, ``spark-defaults.conf``, the session builder) chose how
    Spark generates code (whole-stage or its code factory): every session and query keeps the
    choice. (A setting made on a running session with ``spark.conf.set`` is that session's only:
    it turns the interpretation off, and the tables run on Spark's defaults.)"""
    return any(spark.conf.get(setting, None) is not None for setting, _ in INTERPRETED)


@contextmanager
def interpreted_while(spark: SparkSession, small: bool) -> Iterator[bool]:
    """While the block runs, ``spark``'s queries run on Spark's interpreted evaluation instead of
    generated code when ``small`` (the caller bounds the block's data by
    :data:`INTERPRETED_UP_TO_OBJECTS` or :data:`INTERPRETED_UP_TO_BYTES`) and the job's
    configuration leaves code generation to Spark; yields whether they do. ``spark`` has its own
    settings back after (:func:`session_default`).

    Spark writes, compiles and caches Java source for every query's operators, and for some
    again in every task, whatever the query's rows (:func:`vacuum.tuning.interpret_small_plan`).
    The answers are the same either way: interpreted evaluation is what Spark falls back to when
    generated code fails to compile. Measured on the ingest of a delivery of 13 objects into a
    warm test JVM (8 loads each way, twice, alternating): 8.9 and 9.0 s a load with generated code,
    8.1 and 7.7 s interpreted; of one of 10,000 objects, 10.1 s and 9.4 s (3 loads each)."""
    if not small or codegen_set_by_user(spark):
        yield False
        return
    (whole_stage, off), (factory, interpreted) = INTERPRETED
    with session_default(spark, whole_stage, off), session_default(spark, factory, interpreted):
        yield True


def _vm_option_number(spark: SparkSession, name: str) -> int | None:
    """The number the running JVM has for its option ``name`` (whichever of the JVM's sources set
    it, or its default), or None where the JVM does not say (not HotSpot) or says no number."""
    jvm = spark._jvm
    assert jvm is not None
    try:
        bean_class = jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
        bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(bean_class)
        return int(str(bean.getVMOption(name).getValue()))
    except Exception:  # py4j's error for a JVM without the bean or the option, or not a number
        return None


def _bytes_text(size: int) -> str:
    """``size`` in MB where it is whole MB (MiB, as the JVM counts them), else in KB."""
    return f"{size // 2**20:,} MB" if size % 2**20 == 0 else f"{size / 2**10:,.0f} KB"


def _jvm_log_tail() -> str:
    """The end of the JVM's log file (``INVENTORY_VACUUM_JVM_LOG``), where Ivy's report goes."""
    path = os.environ.get("INVENTORY_VACUUM_JVM_LOG")
    try:
        with open(path or "", encoding="utf-8", errors="replace") as log_file:
            return "".join(log_file.readlines()[-60:])
    except OSError:
        return ""


def local_driver_options(own: Sequence[str], jars: Sequence[str], spark_version: str) -> list[str]:
    """The Java options the tool gives a local JVM it starts on ``jars``: ``own`` (the caller's
    and :func:`quick_jit_options`') and the class-data archive's, each only where no user setting
    of ``spark.driver.defaultJavaOptions`` can exist, which they would replace
    (:func:`core.class_archive.driver_options_taken`; the archive has reasons of its own too)."""
    mine = list(own) if class_archive.driver_options_taken() is None else []
    return [*mine, *class_archive.start_options(jars, spark_version)]


def _driver_java_options(options: Sequence[str]) -> str:
    """``options`` as one option string for Spark's launcher, an option with a space quoted (the
    tool's options hold no quote or backslash: the archive's path is checked by
    :func:`core.class_archive.not_usable`, and the others are fixed texts)."""
    return " ".join(f'"{option}"' if " " in option else option for option in options)


def starts_local_jvm() -> bool:
    """Whether a session built now would start a local JVM of this process's own (not under
    spark-submit, no ``--master`` given): the JVM the class-data archive is made for."""
    return _jvm_is_local_and_ours(_submitted_conf(), None)


def _jvm_is_local_and_ours(submitted: Mapping[str, str], extra_conf: Mapping[str, str] | None) -> bool:
    """Whether this process starts the JVM itself, in local mode (no spark-submit launcher, no
    ``--master`` given, or an in-process ``local`` one in ``extra_conf``)."""
    if os.environ.get("PYSPARK_GATEWAY_PORT") or _jvm_running():
        return False
    master = (extra_conf or {}).get("spark.master")
    if master is not None:
        return _IN_PROCESS_MASTER.fullmatch(master) is not None
    return "spark.master" not in submitted


@contextmanager
def _environment_appended(name: str, value: str | None) -> Iterator[None]:
    """While the JVM starts, ``value`` is at the end of the environment variable ``name``
    (``os.pathsep``-separated); nothing changes when ``value`` is None."""
    if value is None:
        yield
        return
    before = os.environ.get(name)
    os.environ[name] = os.pathsep.join(filter(None, [before, value]))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def _jvm_running() -> bool:
    return SparkContext._jvm is not None  # type: ignore[attr-defined]


def _log4j_properties() -> str | None:
    """The package's log4j2 configuration as a ``file:`` URI (None when imported from a zip)."""
    path = Path(__file__).resolve().parent / "log4j2.properties"
    return path.as_uri() if path.is_file() else None


@contextmanager
def _jvm_output_to(path: str | None) -> Iterator[None]:
    """While the JVM starts, point this process's stdout and stderr at ``path`` (appended): the JVM
    keeps the descriptors it starts with, so all it prints goes there for its whole life. Python's
    own output is back on the terminal as soon as the JVM is up (or has failed to start: the
    caller shows the file's end)."""
    if not path:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for descriptor in (*saved, target):
            os.close(descriptor)


def worker_python(configured: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The interpreter Spark's Python workers run: the user's choice, else the driver's own.

    Spark's precedence: the ``spark.pyspark.python`` setting (``configured``; ``--conf``,
    spark-defaults or ``extra_conf``), then the ``PYSPARK_PYTHON`` variable (spark-submit also
    passes the setting this way). Without either, PySpark would start ``python3`` from ``PATH``,
    which outside an activated virtualenv is another interpreter, without this package or boto3
    (``ModuleNotFoundError: No module named 'vacuum'`` in a batch delete). The driver's
    interpreter is the one known to have both; on a cluster whose executors keep Python
    elsewhere, set ``spark.pyspark.python``.
    """
    env = os.environ if environ is None else environ
    return configured or env.get("PYSPARK_PYTHON") or sys.executable


def ship_package(context: SparkContext) -> Path | None:
    """On a cluster, send this package to the executors; return the zip sent, or None.

    Executors import ``vacuum`` etc. to run the tasks this package defines (batch deletes); a
    cluster's Python rarely has it installed. Under a local master tasks run beside the driver,
    which already imports it, so nothing is sent. Nothing is sent either when a file named
    ``inventory_vacuum.zip`` is already distributed (``spark-submit --py-files``, or an earlier
    call), or when the driver imports the package from a zip (that zip came with ``--py-files``).
    The zip is built from the code the driver runs, so driver and executors run the same version.
    """
    if _IN_PROCESS_MASTER.fullmatch(context.master or ""):
        return None
    py_files = context.getConf().get("spark.submit.pyFiles", "") or ""
    distributed = [*context.listFiles, *py_files.split(",")]
    if PACKAGE_ZIP in {name.rstrip("/").rsplit("/", 1)[-1] for name in distributed}:
        return None
    directory = Path(tempfile.mkdtemp(prefix="inventory-vacuum-"))
    atexit.register(shutil.rmtree, directory, True)  # the driver serves the zip until it exits
    archive = package_zip(directory)
    if archive is None:
        return None
    context.addPyFile(str(archive))
    return archive


def package_zip(directory: Path) -> Path | None:
    """Write ``directory/inventory_vacuum.zip`` of :data:`PACKAGES` as the driver imports them.

    Returns None when a package is not a plain directory (imported from a zip already).
    """
    roots = {name: Path(importlib.import_module(name).__path__[0]) for name in PACKAGES}
    if not all(root.is_dir() for root in roots.values()):
        return None
    archive = directory / PACKAGE_ZIP
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, root in roots.items():
            for path in sorted(root.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    bundle.write(path, str(Path(name) / path.relative_to(root)))
    return archive


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
    # the same settings given as --conf KEY=VALUE, -c KEY=VALUE or --conf=KEY=VALUE
    try:
        words = shlex.split(raw)
    except ValueError:  # unbalanced quotes: spark-submit refuses them itself
        words = []
    settings = [setting for flag, setting in zip(words, words[1:], strict=False) if flag in ("--conf", "-c")]
    settings += [word.removeprefix("--conf=") for word in words if word.startswith("--conf=")]
    for setting in settings:
        key = setting.split("=", 1)[0]
        if key in ("spark.master", "spark.jars.packages", "spark.jars"):
            conf[key] = "set"
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        # Running under spark-submit: the launcher's JVM already holds the cluster's configuration
        # (--master, --conf, spark-defaults) as system properties. A SparkConf reads them only once
        # Python is connected to that JVM; without the connection it is empty, and the local-mode
        # defaults below would silently replace spark-submit's --master.
        from pyspark import SparkConf

        SparkContext._ensure_initialized()  # type: ignore[attr-defined]
        conf.update(dict(SparkConf().getAll()))
    return conf


def local_frame(spark: SparkSession, rows: Sequence[tuple[Any, ...]], schema: StructType) -> DataFrame:
    """A DataFrame of a few rows held in Python, in ``schema``: what ``spark.createDataFrame(rows,
    schema)`` gives, with its checks of each row's values.

    From a list, PySpark pickles the rows and turns them into Spark's in a Python worker: a job
    that starts the worker (a process forked from a daemon it starts first, which imports PySpark)
    for a few rows. From an Arrow table (Spark 4.0 on) the JVM reads the rows from Arrow's stream
    itself and no Python process starts. The rows go as a list wherever the two could differ: on
    Spark 3.5, for a column of a type not in :func:`_arrow_types`, for a time without a zone (a
    list's is the process's local time, which Python's and Arrow's conversions read differently
    when clocks change) or a time in a date column, when Arrow does not take a value, and when
    Spark's Arrow batches have no limit (a limit of 0 or less, which PySpark's Arrow path does not
    take)."""
    rows = list(rows)
    verify = _make_type_verifier(schema)  # what createDataFrame checks of a list's rows
    for row in rows:
        verify(row)
    table = _arrow_table(rows, schema) if int(pyspark.__version__.split(".", 1)[0]) >= 4 else None
    if table is None or _arrow_batch_limit(spark) <= 0:
        return spark.createDataFrame(rows, schema)
    return spark.createDataFrame(table, schema)


def _arrow_table(rows: list[tuple[Any, ...]], schema: StructType) -> Any:
    """The rows as a pyarrow Table of :func:`_arrow_types`, or None where the list must go."""
    import pyarrow as pa

    types = _arrow_types(schema)
    if types is None or any(
        isinstance(value, datetime) and (value.tzinfo is None or isinstance(field.dataType, DateType))
        for row in rows
        for value, field in zip(row, schema, strict=True)
    ):
        return None
    try:
        columns = [pa.array([row[index] for row in rows], type=kind) for index, kind in enumerate(types)]
    except (pa.ArrowException, ValueError, OverflowError, UnicodeError):  # a lone surrogate, say
        return None
    fields = [pa.field(field.name, kind) for field, kind in zip(schema, types, strict=True)]
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def _arrow_types(schema: StructType) -> list[Any] | None:
    """The Arrow type of each column, in UTC for a time; None when a column is of another type."""
    import pyarrow as pa

    by_type = {
        StringType: pa.string(),
        LongType: pa.int64(),
        IntegerType: pa.int32(),
        DoubleType: pa.float64(),
        BooleanType: pa.bool_(),
        DateType: pa.date32(),
        TimestampType: pa.timestamp("us", tz="UTC"),
    }
    types = [by_type.get(type(field.dataType)) for field in schema]
    return None if None in types else types


def _arrow_batch_limit(spark: SparkSession) -> int:
    """Spark's limit of rows in an Arrow batch (Spark checks that it is a number when it is set)."""
    return int(spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch", "10000") or "10000")


def strings_schema(*names: str) -> StructType:
    """A schema of string columns of these names."""
    return StructType([StructField(name, StringType()) for name in names])
