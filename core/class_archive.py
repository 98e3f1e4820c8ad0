"""The JVM's class-data archive for local-mode starts: the classes of Spark, Delta and the other
jars mapped from one file, not found, read and verified one jar entry at a time.

A fresh driver JVM loads some 11,000 classes just to start a session. Java's application
class-data sharing (AppCDS, JDK 13 on) keeps them: a JVM started with
``-XX:ArchiveClassesAtExit=FILE`` writes the classes it loaded into FILE as it exits, and a later
JVM of the same Java and class path started with ``-XX:SharedArchiveFile=FILE`` maps them. On this
project's 2-core machine it makes a one-table dry run in a fresh process about 1.3 times as fast
(``benchmarks/one_table.py``, the median of 3 rounds).

``inventory-vacuum fetch-jars`` makes the archive once the jars are resolved (:func:`create`):
a child process starts a local session on the class path every later command uses, runs a
workload and exits. The caller may name a module whose ``class_archive_workload()`` is that
workload (the command names the demo's, which runs the product's own steps over S3A against a
local S3: the S3A and AWS SDK classes every command on S3 loads are then archived too); without
one, or when it fails, a small Delta workload on local files runs (a write, a delete, an inventory
VACUUM dry run). Its JVM writes the
archive to a temporary file, which takes the archive's name only after that JVM has exited with
status 0: a JVM that maps a truncated archive dies (SIGBUS), so a half-written file must never
carry the name. A local session whose JVM Python starts with the cached jars
(:func:`core.session.build_spark_session`) then uses it (:func:`start_options`).

The archive is kept beside the jar list (:mod:`core.jar_cache`), named by a digest of the Java
executable (its path, size and modification time), the Spark version and the jar files. The JVM
checks the class path and each jar's size and time itself: on any mismatch it runs without the
archive, with one warning line in its log. ``INVENTORY_VACUUM_CLASS_ARCHIVE=0`` turns it off.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from core.jar_cache import cache_folder
from core.local_files import flush_to_disk

log = logging.getLogger("inventory_vacuum")

SWITCH_VARIABLE = "INVENTORY_VACUUM_CLASS_ARCHIVE"
# the child's JVM writes a few hundred MB at its exit; a start on a warm machine takes seconds
_CREATE_TIMEOUT_SECONDS = 900
# the child's line that says the caller's workload failed (its archive then holds the rest)
WORKLOAD_FAILED = "inventory-vacuum class archive: the workload failed: "
# the child's line that says its own small Delta workload ran to its end
DELTA_WORKLOAD_DONE = "inventory-vacuum class archive: the Delta workload ran"


def enabled() -> bool:
    return os.environ.get(SWITCH_VARIABLE, "").strip().lower() not in ("0", "false", "no", "off")


def java_executable() -> Path | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the first on ``PATH``."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not os.path.isfile(found):
        return None
    return Path(os.path.realpath(found))


def archive_file(jars: Sequence[str], spark_version: str) -> Path | None:
    """Where the archive of this Java, Spark version and jar list is kept (None: no Java found)."""
    java = java_executable()
    if java is None:
        return None
    stat = java.stat()
    # the launcher's class path begins with its configuration folder: another one is another path
    key = "\n".join(
        [spark_version, str(java), str(stat.st_size), str(stat.st_mtime_ns), launcher_conf_folder(), *jars]
    )
    return cache_folder() / f"classes-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def launcher_conf_folder() -> str:
    """The configuration folder Spark's launcher reads, and puts first on the JVM's class path:
    ``SPARK_CONF_DIR``, else the ``conf`` of the Spark home PySpark starts the JVM from
    (``SPARK_HOME``, else the first Spark distribution PySpark finds: it looks in the current
    directory's parent before its own folder)."""
    import pyspark
    from pyspark.find_spark_home import _find_spark_home

    configured = os.environ.get("SPARK_CONF_DIR")
    if configured:
        return configured
    try:
        home = _find_spark_home()
    except SystemExit:  # none found: PySpark cannot start a JVM either
        home = os.path.dirname(pyspark.__file__)
    return os.path.join(home, "conf")


def not_usable() -> str | None:
    """Why no archive can be made or mapped here, or None.

    * The launcher's configuration folder has files: it is first on the JVM's class path, and
      Java neither writes nor maps an archive with a non-empty folder there. (So there is no
      ``spark-defaults.conf`` whose ``spark.driver.defaultJavaOptions`` the archive's option,
      given as that setting, would replace.)
    * ``PYSPARK_SUBMIT_ARGS`` names a properties file or that setting: the user's options, which
      the archive's would replace.
    * The cache folder's path holds a quote or a backslash, which Spark's launcher reads as
      quoting in an option string.
    """
    if not enabled():
        return f"{SWITCH_VARIABLE}=0"
    taken = driver_options_taken()
    if taken is not None:
        return taken
    if any(character in str(cache_folder()) for character in "'\"\\"):
        return f"the cache folder {cache_folder()} has a quote or a backslash in its path"
    return None


def driver_options_taken() -> str | None:
    """Why the tool may not give ``spark.driver.defaultJavaOptions`` here, or None: a user's
    setting of it may exist (the first two reasons of :func:`not_usable`), which the tool's would
    replace."""
    folder = Path(launcher_conf_folder())
    try:
        if folder.is_dir() and any(folder.iterdir()):
            return f"the Spark configuration folder {folder} is not empty"
    except OSError as error:
        return f"the Spark configuration folder {folder} cannot be read: {error}"
    submitted = os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    if "--properties-file" in submitted or "spark.driver.defaultJavaOptions" in submitted:
        return "PYSPARK_SUBMIT_ARGS gives the driver's default Java options"
    return None


def start_options(jars: Sequence[str], spark_version: str) -> list[str]:
    """The JVM options that map the archive of ``jars``, or none when there is no archive (or
    it cannot be used here: :func:`not_usable`)."""
    if not_usable() is not None:
        return []
    path = archive_file(jars, spark_version)
    if path is None or not path.is_file():
        return []
    return [f"-XX:SharedArchiveFile={path}"]


def create(jars: Sequence[str], spark_version: str, workload: str | None = None) -> Path | None:
    """Make the archive of ``jars`` in a child process (see the module's text); return its path,
    or None when it cannot be used here (:func:`not_usable`), there is no Java, or the child
    failed (logged: a start without an archive is only slower).

    ``workload``: a module whose ``class_archive_workload()`` is a context manager, entered
    before the archiving JVM starts and left after it exits, that yields a function to run on its
    session (or None: nothing to add) instead of the small Delta workload. When that function
    fails, the small Delta workload runs after it, and a warning says why.
    """
    reason = not_usable()
    target = archive_file(jars, spark_version) if reason is None else None
    if target is None:
        log.warning("no class-data archive (the JVM starts without one): %s", reason or "no Java found")
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(target.parent)
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=".classes-", suffix=".jsa")
    os.close(descriptor)
    os.unlink(temporary)  # the JVM creates it at its exit
    environment = {
        key: value
        for key, value in os.environ.items()
        # the child starts its own local JVM on the cached jars
        if key not in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET", "PYSPARK_SUBMIT_ARGS")
    }
    environment[SWITCH_VARIABLE] = "0"  # an archive is made on the plain class path, not on another
    try:
        # its own process group: on a timeout its JVM goes too, not only the Python child
        child = subprocess.Popen(
            [sys.executable, "-m", "core.class_archive", temporary, *([workload] if workload else [])],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        try:
            output, _ = child.communicate(timeout=_CREATE_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            output, _ = child.communicate()
            log.warning(
                "no class-data archive (the JVM starts without one): no exit in %d s", _CREATE_TIMEOUT_SECONDS
            )
            return None
        if child.returncode != 0 or not os.path.isfile(temporary) or os.path.getsize(temporary) == 0:
            log.warning(
                "no class-data archive (the JVM starts without one): status %s, %s",
                child.returncode,
                _reason(output),
            )
            return None
        lines = output.splitlines()
        for line in lines:
            if line.startswith(WORKLOAD_FAILED):
                log.warning(
                    "the class-data archive holds the classes loaded before %s's workload failed, %s: %s",
                    workload,
                    "and the small Delta workload's run after it"
                    if any(DELTA_WORKLOAD_DONE in printed for printed in lines)
                    else "without the small Delta workload's (it failed too)",
                    line[len(WORKLOAD_FAILED) :].strip(),
                )
        flush_to_disk(temporary)  # a crash after the rename must not leave half an archive under the name
        os.replace(temporary, target)
        flush_to_disk(str(target.parent))
        return target
    except (OSError, subprocess.SubprocessError) as error:
        log.warning("no class-data archive (the JVM starts without one): %s", error)
        return None
    finally:
        Path(temporary).unlink(missing_ok=True)


def _reason(output: str) -> str:
    """The line of the child's output that says why it failed: the JVM's first error, else the
    last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if "[error]" in line or line.startswith("Error")]
    return errors[0] if errors else (lines or ["no output"])[-1]


def _remove_stale_temporaries(folder: Path) -> None:
    """Temporary archives a day old: left by a child killed before its cleanup."""
    day_ago = time.time() - 86_400
    for stale in folder.glob(".classes-*.jsa"):
        with contextlib.suppress(OSError):
            if stale.stat().st_mtime < day_ago:
                stale.unlink()


def _train(temporary: str, workload: str | None = None) -> int:
    """The child of :func:`create`: a local session that writes its loaded classes to
    ``temporary`` at its JVM's exit, ``workload``'s workload (else, or after it failed, a small
    Delta workload), then that exit, waited for."""
    from core.errors import spark_error_summary
    from core.session import build_spark_session

    extra = (
        importlib.import_module(workload).class_archive_workload()
        if workload
        else contextlib.nullcontext(None)
    )
    with extra as run_extra:
        spark = build_spark_session(
            "inventory-vacuum class archive",
            {"spark.databricks.delta.retentionDurationCheck.enabled": "false"},
            # without the warnings of each class it leaves out (signed jars, old class files)
            java_options=[f"-XX:ArchiveClassesAtExit={temporary}", "-Xlog:cds=error"],
        )
        try:
            # the caller's workload (the demo's steps) writes, deletes, plans an inventory VACUUM
            # and reads Delta tables itself: the small Delta workload would load no class of its
            # own after it, so it runs only without one, or after one that failed
            completed = False
            if run_extra is not None:
                try:
                    run_extra(spark)
                    completed = True
                except Exception as error:  # the archive of what loaded so far is still good
                    print(WORKLOAD_FAILED + " ".join(spark_error_summary(error).split()), flush=True)
            if not completed:
                _delta_workload(spark)
                print(DELTA_WORKLOAD_DONE, flush=True)
        finally:
            # even after a failure: the JVM has exited (and written its file) before the caller
            # removes the temporary file
            with contextlib.suppress(Exception):
                spark.stop()
            status = _exit_jvm()
        return status


def _delta_workload(spark) -> None:  # type: ignore[no-untyped-def]  # a SparkSession
    """A write, an append, a delete, an inventory VACUUM dry run and a read, on local files."""
    with tempfile.TemporaryDirectory(prefix="inventory-vacuum-classes-") as folder:
        table = f"{folder}/table"
        frame = spark.range(200).selectExpr("id", "cast(id % 4 as string) as part")
        frame.write.format("delta").partitionBy("part").save(table)
        frame.write.format("delta").mode("append").partitionBy("part").save(table)
        spark.sql(f"DELETE FROM delta.`{table}` WHERE id < 50")
        files = [
            (f"file:{os.path.join(root, name)}", os.path.getsize(os.path.join(root, name)), False, 0)
            for root, _, names in os.walk(table)
            for name in names
        ]
        inventory = spark.createDataFrame(
            files, "path string, length long, isDir boolean, modificationTime long"
        )
        inventory.createOrReplaceTempView("class_archive_inventory")
        spark.sql(
            f"VACUUM delta.`{table}` USING INVENTORY (SELECT * FROM class_archive_inventory) RETAIN 0 HOURS DRY RUN"
        ).groupBy().count().collect()
        spark.read.format("delta").load(table).groupBy("part").count().collect()


def _exit_jvm() -> int:
    """End the session's JVM (it writes the archive as it exits) and wait for it: its status."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway  # type: ignore[attr-defined]
    assert gateway is not None
    process = gateway.proc
    gateway.shutdown()
    process.stdin.close()  # the gateway's JVM exits when its standard input closes
    try:
        return process.wait(timeout=_CREATE_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()  # its archive is not used: the caller names only what a clean exit wrote
        return 1


if __name__ == "__main__":
    sys.exit(_train(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
