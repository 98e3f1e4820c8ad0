"""``inventory-vacuum demo``: the whole product on one machine, with nothing to configure.

Starts moto's S3 server on 127.0.0.1, writes demo Delta tables to it with real histories and real
garbage, takes an S3 Inventory-format snapshot of the bucket, ingests it, then vacuums: a dry run
first, then a real run with batched deletes, and finally reads every table back.
This is the only place outside the tests that points at a local S3 endpoint; ``fetch-jars`` runs
the same steps once to make the JVM's class-data archive (:func:`class_archive_workload`).
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.tables import ToolTables
from jobs.output import Output

log = logging.getLogger("inventory_vacuum")

LAKE, INVENTORY = "demo-lake", "demo-inventory"
RETENTION = "interval 5 seconds"  # demo tables keep 5 seconds of history, so there is garbage to see


@dataclass
class DemoResult:
    ingest: Any
    dry_run: Any
    vacuum: Any
    tables_readable: dict[str, int]
    workdir: str
    chargeback: Any = None

    @property
    def ok(self) -> bool:
        return bool(self.ingest.ok and self.dry_run.ok and self.vacuum.ok)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ingest": self.ingest.to_dict(),
            "dry_run": self.dry_run.to_dict(),
            "vacuum": self.vacuum.to_dict(),
            "tables_readable": self.tables_readable,
            "workdir": self.workdir,
            "chargeback": self.chargeback.to_dict() if self.chargeback is not None else None,
        }


def start_local_s3() -> Any:
    """The local S3 server (moto, 127.0.0.1); the AWS variables point boto3 and S3A at it."""
    from testing.local_s3 import LocalS3Server

    server = LocalS3Server().start()
    server.use_in_environment(access_key="demo")
    return server


DEMO_TABLES = ("events", "events_v2", "users")


def build_demo_tables(spark: Any, s3: Any, names: Sequence[str] = DEMO_TABLES) -> dict[str, str]:
    """Tables with histories that leave garbage (the three of :data:`DEMO_TABLES` unless
    ``names`` says which; ``events`` is always written), plus junk a crashed job would leave."""
    tables = {name: f"s3://{LAKE}/warehouse/{name}" for name in dict.fromkeys(("events", *names))}
    for name, uri in tables.items():
        partitioned = "PARTITIONED BY (day)" if name != "users" else ""
        spark.sql(
            f"CREATE TABLE delta.`{uri}` (id BIGINT, payload STRING, day STRING) USING delta {partitioned} "
            f"TBLPROPERTIES ('delta.deletedFileRetentionDuration' = '{RETENTION}')"
        )
        for day in ("2024-01-01", "2024-01-02", "2024-01-03"):
            rows = [(i, f"{name}-{i}", day) for i in range(50)]
            spark.createDataFrame(rows, "id bigint, payload string, day string").repartition(3).write.format(
                "delta"
            ).mode("append").save(uri)
        spark.sql(f"OPTIMIZE delta.`{uri}`")  # compaction: the small files become garbage
        spark.sql(f"DELETE FROM delta.`{uri}` WHERE id % 10 = 0")
    for key in (
        "warehouse/events/day=2024-01-01/part-99999-crashed-job.snappy.parquet",  # untracked: garbage
        "warehouse/events/day=2024-01-01/_SUCCESS",  # hidden: must survive
        "warehouse/events/_tmp/staging.bin",  # hidden: must survive
    ):
        s3.put_object(Bucket=LAKE, Key=key, Body=b"leftover bytes")
    return tables


def run_demo(workdir: str, output: Output) -> int:
    from core.session import build_spark_session

    folder = Path(workdir)
    folder.mkdir(parents=True, exist_ok=True)
    server = start_local_s3()
    try:
        spark = build_spark_session("inventory-vacuum demo")
        result = _demo(spark, folder, endpoint=server.endpoint, age_garbage=True)
        output.show("demo", result)
        return 0 if result.ok else 1
    finally:
        server.stop()


@contextmanager
def class_archive_workload() -> Iterator[Callable[[Any], object] | None]:
    """The demo as the JVM's class-data archive's workload (:func:`core.class_archive.create`,
    which ``fetch-jars`` gives this module): the local S3 starts before the archiving JVM, and the
    demo's steps (write tables, snapshot, ingest, dry run, chargeback, vacuum) run in it, so the
    classes of S3A, the AWS SDK and the tool's own queries are archived too. They run on one of the
    demo's tables, the partitioned ``events``: the other two take the same code paths, so they add
    time and no classes. Without the local S3's server (moto's, a development dependency) there is
    nothing to add: None."""
    try:
        server = start_local_s3()
    except ImportError:
        yield None
        return
    try:
        with tempfile.TemporaryDirectory(prefix="inventory-vacuum-classes-demo-") as folder:
            # the removed files need not age: the run's steps, not its deletions, load the classes
            yield lambda spark: _demo(
                spark, Path(folder), endpoint=server.endpoint, age_garbage=False, table_names=("events",)
            )
    finally:
        server.stop()


def _demo(
    spark: Any,
    folder: Path,
    *,
    endpoint: str,
    age_garbage: bool,
    table_names: Sequence[str] = DEMO_TABLES,
) -> DemoResult:
    """The demo's steps on ``spark``, over the demo tables ``table_names`` names (``events``
    always), with the local S3 server at ``endpoint`` (:func:`start_local_s3`) as the only S3:
    refused unless boto3, Spark's tasks and S3A all reach it."""
    from core.paths import StorageLocation
    from core.registry import load_registry
    from core.s3 import s3_client
    from inventory.delivery_writer import snapshot_bucket
    from inventory.load import IngestRequest, ingest
    from vacuum.context import DeleteWith
    from vacuum.runner import VacuumOptions, vacuum_tables

    s3 = s3_client()
    _check_local(spark, s3, endpoint)
    for bucket in (LAKE, INVENTORY):
        s3.create_bucket(Bucket=bucket)
    log.info("demo: writing Delta tables to s3://%s (local S3 at %s)", LAKE, endpoint)
    tables = build_demo_tables(spark, s3, table_names)
    registry_path = folder / "tables.yaml"
    registry_path.write_text(
        "tables:\n"
        + "".join(
            f"  - {{name: {n}, path: '{uri}', owner: team-{n.split('_')[0]}}}\n" for n, uri in tables.items()
        )
    )
    if age_garbage:
        time.sleep(6)  # let the removed files age past the demo's 5-second retention
    log.info("demo: snapshot of s3://%s in S3 Inventory format", LAKE)
    snapshot_bucket(s3, LAKE, StorageLocation.parse(f"s3://{INVENTORY}/reports"), "daily", rows_per_file=40)
    registry = load_registry(str(registry_path))
    inventory_table = f"s3://{INVENTORY}/tables/inventory"
    located = ToolTables.beside(inventory_table)
    ingested = ingest(
        spark,
        s3,
        IngestRequest(
            destination=StorageLocation.parse(f"s3://{INVENTORY}/reports"),
            source_buckets=(LAKE,),
            config_id="daily",
            inventory_table=inventory_table,
            registry=registry,
            runs_table=located.inventory_runs,
            usage_table=located.inventory_usage,
        ),
        run_id="demo",
    )
    base = VacuumOptions(
        inventory_table=inventory_table,
        history_table=located.vacuum_runs,
        ledger_table=located.vacuum_deletions,
        delete_with=DeleteWith.BATCH,
    )
    dry = vacuum_tables(spark, registry.select(None), _with(base, dry_run=True), run_id="demo-dry-run")
    cost = _chargeback(spark, located, registry, folder)
    real = vacuum_tables(spark, registry.select(None), base, run_id="demo")
    readable = {name: spark.read.format("delta").load(uri).count() for name, uri in tables.items()}
    return DemoResult(ingested, dry, real, readable, str(folder), cost)


def _check_local(spark: Any, s3: Any, endpoint: str) -> None:
    """Refuse unless every way the demo reaches S3 goes to its local server at ``endpoint``: it
    writes and vacuums (really deletes) in its buckets, which must never be another store's."""
    from core.errors import ConfigError
    from core.s3 import driver_settings

    hadoop = spark._jsparkSession.sessionState().newHadoopConf()  # what Delta's file system reads
    for bucket in (LAKE, INVENTORY):
        access_point = hadoop.get(f"fs.s3a.bucket.{bucket}.accesspoint.arn")
        if access_point:  # S3A then reaches the access point's own endpoint
            raise ConfigError(
                f"the demo runs on its local S3 at {endpoint} only, but S3A reaches {bucket} "
                f"through the access point {access_point}"
            )
    reached = {
        "boto3": s3.meta.endpoint_url,
        "Spark's tasks": driver_settings()["endpoint_url"],
        "S3A": hadoop.get("fs.s3a.endpoint"),
        **{
            f"S3A for {bucket}": hadoop.get(f"fs.s3a.bucket.{bucket}.endpoint")
            for bucket in (LAKE, INVENTORY)
        },
    }
    for what, url in reached.items():
        if url is None and what.startswith("S3A for"):
            continue  # no setting of the bucket's own: S3A's endpoint applies
        if url is None or url.rstrip("/") != endpoint:
            raise ConfigError(
                f"the demo runs on its local S3 at {endpoint} only, but {what} would reach {url}"
            )


def _chargeback(spark: Any, located: ToolTables, registry: Any, folder: Path) -> Any:
    """The demo bucket's chargeback after the dry run (so reclaimable bytes show), also written as
    ``chargeback.html`` in the work folder."""
    from chargeback import build_report, load_prices, parse_group_by
    from jobs.output.html import render_html

    report = build_report(
        spark,
        located.inventory,
        registry,
        parse_group_by("owner"),
        load_prices(),
        vacuum_runs_table=located.vacuum_runs,
        inventory_runs_table=located.inventory_runs,
        usage_table=located.inventory_usage,
    )
    (folder / "chargeback.html").write_text(render_html(report), encoding="utf-8")
    return report


def _with(options: Any, **changes: Any) -> Any:
    from dataclasses import replace

    return replace(options, **changes)
