"""A real Spark standalone cluster, not local mode: a master and a two-core worker, each its own
JVM on 127.0.0.1, started from the pyspark wheel's ``spark-class``; the ingest and a batch vacuum go
through ``spark-submit --master spark://...`` with the code shipped as ``infra/package.sh``'s zip
(``--py-files``), as a user runs them on a cluster.

What local mode hides and this catches:
- closures that do not pickle (the batch deleter's tasks run in the executors' Python processes);
- imports missing on executors: the executors' Python sees the installed libraries but not this
  project (no editable install), so the project reaches them only through the zip;
- settings that exist only on the driver: the worker starts without any AWS variable, so an
  executor reaches S3 only with what the job passes it (``spark.executorEnv.*`` here; an instance
  role on EMR).
"""

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

import pyspark
import pytest

from core.paths import StorageLocation
from inventory.delivery_writer import snapshot_bucket
from tests.support.helpers import keys_of, put, rows_at, submitted_json

pytestmark = [pytest.mark.slow, pytest.mark.cluster, pytest.mark.own_jvms]

REPO = Path(__file__).resolve().parent.parent
SPARK_HOME = Path(pyspark.__file__).parent
# One worker of two cores: each application gets one executor JVM running two tasks at once in
# two Python workers. A second worker adds another executor JVM and another copy of the jars (about
# 1 GB) to each application, and nothing this test checks.
WORKERS = 1
JUNK = ("tables/events/orphan-1.parquet", "tables/events/day=2/orphan-2.parquet", "tables/events/_tmp/x.json")


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free ports: their sockets are open together while the system picks them
    (one closed before the next is picked may be picked again, and two daemons would race for it)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def _bare_environment(tmp: Path) -> dict[str, str]:
    """What a cluster node's daemons start with: no AWS variable, no Python settings; the node's
    scratch folders (its spark-env.sh's SPARK_LOCAL_DIRS) under the test's folder, removed with it."""
    keep = ("PATH", "HOME", "JAVA_HOME", "LANG", "TMPDIR")
    environment = {k: os.environ[k] for k in keep if k in os.environ}
    environment.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOG_DIR=str(tmp / "logs"))
    environment.update(SPARK_LOCAL_DIRS=str(tmp / "local"))
    return environment


def _alive_workers(webui: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{webui}/json/", timeout=2) as response:
            return int(json.load(response).get("aliveworkers", 0))
    except (OSError, ValueError):  # not up yet, or not the master's answer yet: ask again
        return 0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A standalone master and :data:`WORKERS` two-core workers; yields the master URL and its web UI
    port."""
    tmp = tmp_path_factory.mktemp("cluster")
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port, webui, *worker_uis = _free_ports(2 + WORKERS)
    environment = _bare_environment(tmp)
    logs = open(tmp / "daemons.log", "wb")  # noqa: SIM115 - closed below, after the daemons
    daemons = [
        subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
            + ["--port", str(port), "--webui-port", str(webui)],
            env=environment,
            stdout=logs,
            stderr=subprocess.STDOUT,
        )
    ]
    master = f"spark://127.0.0.1:{port}"
    for number in range(WORKERS):
        daemons.append(
            subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1"]
                + ["--cores", "2", "--memory", "1g", "--webui-port", str(worker_uis[number])]
                + ["--work-dir", str(tmp / f"worker-{number}"), master],
                env=environment,
                stdout=logs,
                stderr=subprocess.STDOUT,
            )
        )
    try:
        deadline = time.monotonic() + 120
        while _alive_workers(webui) < WORKERS:
            if time.monotonic() > deadline or any(d.poll() is not None for d in daemons):
                pytest.fail(
                    f"the standalone cluster did not start: {(tmp / 'daemons.log').read_text()[-2000:]}"
                )
            time.sleep(1)
        yield {"master": master, "webui": webui, "tmp": tmp}
    finally:
        for daemon in daemons:
            daemon.terminate()
        for daemon in daemons:
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()
        logs.close()
        # Each executor fetched its own copy of the --packages jars into its worker's directory
        # (the AWS SDK bundle alone is 560 MB): two applications, over 1 GB, which would stay
        # until the run's end. The executors' logs stay.
        for jar in tmp.glob("worker-*/app-*/*/*.jar"):
            jar.unlink()


def _executor_python(tmp: Path) -> str:
    """A Python for the executors that has the installed libraries but not this project: ``-S``
    skips the site hooks (the editable install's finder); the venv's site-packages is on the path."""
    site = next(p for p in sys.path if p.endswith("site-packages") and Path(p, "pyspark").is_dir())
    wrapper = tmp / "executor-python"
    wrapper.write_text(
        f'#!/bin/sh\nexport PYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}"\nexec {sys.executable} -S "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper)


def test_ingest_and_batch_vacuum_on_a_standalone_cluster(
    spark, s3, bucket_factory, s3_endpoint, cluster
) -> None:  # type: ignore[no-untyped-def]
    from core.session import jvm_packages

    tmp = cluster["tmp"]
    source, inventory_bucket = bucket_factory("lake"), bucket_factory("inv")
    uri = f"s3a://{source}/tables/events"
    for day in (1, 2, 3):
        spark.createDataFrame([(day * 10 + n, day) for n in range(3)], "id long, day int").write.format(
            "delta"
        ).mode("append").partitionBy("day").save(uri)
    put(s3, source, *JUNK)
    live_before = keys_of(s3, source) - set(JUNK)
    snapshot_bucket(s3, source, StorageLocation.parse(f"s3://{inventory_bucket}/reports"), "daily")
    registry = tmp / "tables.yaml"
    registry.write_text(
        f"tables:\n  - {{name: events, path: 's3://{source}/tables/events', owner: growth}}\n"
    )
    package = subprocess.run(
        ["bash", str(REPO / "infra" / "package.sh"), str(tmp / "dist")],
        env={**os.environ, "INVENTORY_VACUUM_PYTHON": sys.executable},  # this Spark line's venv
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    executor_python = _executor_python(tmp)
    hidden = subprocess.run(
        [executor_python, "-c", "import inventory"], capture_output=True, check=False, cwd=tmp
    )
    assert hidden.returncode != 0, "the executors' Python must not see the project outside the zip"
    credentials = {k: os.environ[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")}
    credentials["AWS_ENDPOINT_URL"] = s3_endpoint
    executor_env = [f"--conf=spark.executorEnv.{k}={v}" for k, v in credentials.items()]
    environment = {**_bare_environment(tmp), **credentials, "PYSPARK_DRIVER_PYTHON": sys.executable}

    def submit(job: str, *args: str) -> dict[str, Any]:
        completed = subprocess.run(
            [str(SPARK_HOME / "bin" / "spark-submit"), "--master", cluster["master"]]
            + ["--packages", ",".join(jvm_packages()), "--py-files", package]
            + ["--conf=spark.driver.host=127.0.0.1", "--conf=spark.driver.bindAddress=127.0.0.1"]
            + [f"--conf=spark.pyspark.python={executor_python}", "--conf=spark.executor.memory=768m"]
            + executor_env
            + [str(REPO / "jobs" / job), *args, "--json"],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            cwd=tmp,
            env=environment,
        )
        assert completed.returncode == 0, completed.stderr[-4000:]
        return submitted_json(completed.stdout)

    table = f"s3://{inventory_bucket}/tables/inventory"
    ingested = submit(
        "ingest_inventory.py",
        *("--destination", f"s3://{inventory_bucket}/reports", "--source-bucket", source),
        *("--config-id", "daily", "--inventory-table", table, "--tables", str(registry)),
    )
    assert ingested["buckets"][0]["status"] == "ok"
    assert ingested["buckets"][0]["rows"] == len(live_before) + len(JUNK)
    vacuumed = submit(
        "vacuum_tables.py",
        *("--inventory-table", table, "--tables", str(registry), "--delete-with", "batch"),
        *("--retain-hours", "0", "--allow-unsafe-retention"),
    )
    [run] = vacuumed["tables"]
    assert run["status"] == "ok", run
    # the _tmp/ folder is hidden (Delta never deletes under _ or . folders): only the two orphans go
    assert (run["planned_files"], run["deleted_files"]) == (2, 2)
    remaining = keys_of(s3, source)
    assert live_before <= remaining and JUNK[2] in remaining and not remaining & set(JUNK[:2])
    assert [rows_at(spark, uri, version) for version in range(3)] == [3, 6, 9]
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster['webui']}/json/", timeout=5) as response:
        state = json.load(response)
    names = [app.get("name") for app in state.get("completedapps", []) + state.get("activeapps", [])]
    assert len(names) >= 2, state  # both jobs ran as applications of the standalone master
