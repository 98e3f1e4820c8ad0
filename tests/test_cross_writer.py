"""Cross-writer matrix: the vacuum on tables written by delta-rs and by Delta-Spark with table
features, each with a real history that leaves garbage (tables: ``CASES``; writers: writers.py).

For every table the expected garbage is computed without the product (tests/support/writers.py replays the
table's JSON log in Python and lists its storage): files under the table that the latest snapshot
does not reference (data files and their deletion-vector files), not hidden, older than the
table's 1-second retention. Local tables and the S3 ones share one inventory table; three runs of
the command line, each over every table, then decide:

* ``vacuum --dry-run --candidates`` must plan exactly that set and delete nothing (on the default
  Spark line; on the others the real run's plan is checked against the same set);
* ``vacuum --mode list --dry-run`` on the delta-rs tables must plan it too (the listing path);
* the real ``vacuum`` (Delta's own delete for local tables, batched DeleteObjects for S3 ones)
  must delete exactly that set, and every version whose files are all kept must still read
  (Spark time travel, and delta-rs for its own tables) with the row count its log states.

Delta's log cache is cleared before every command, as in a fresh ``inventory-vacuum`` process: a
snapshot cached by the test's own reads would hide a worker thread that cannot load one (the
``DELTA_SPARK_SESSION_NOT_SET`` failure on delta-rs checkpoints).

Junk planted in every table: old orphans at the root, in a data directory and in ``_delta_index/``
(garbage); ``_SUCCESS``, a ``.crc`` file and ``_tmp/`` (hidden: kept); and a young orphan (kept).
With a 1-second retention a file is outside retention a second after it is written, so locally the
young orphan is dated a day ahead; on S3, which sets its own times, it is put after the inventory.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from core.paths import StorageLocation
from tests.support import writers
from tests.support.helpers import cli_json, rows_at, take_inventory, write_local_inventory
from tests.support.lines import on_default_spark_line
from tests.support.writers import LocalStore, LogView, S3Store, Store

pytestmark = [pytest.mark.slow, pytest.mark.line_sensitive, pytest.mark.one_java]

DAY = 86400.0


def _installed_delta() -> tuple[int, ...]:
    from core.session import installed_delta_version, version_tuple

    return version_tuple(installed_delta_version())


@dataclass(frozen=True)
class Case:
    name: str
    writer: str  # delta-rs | delta-spark
    build: Callable[..., None]
    feature: str  # what the built table must show, checked by ``shows`` on its log
    shows: Callable[[LogView], bool]
    storage: str = "local"  # local | s3
    # the oldest Delta whose Spark writer has the feature: other lines leave the case out
    needs_delta: tuple[int, int] = (0, 0)

    @property
    def id(self) -> str:
        return f"{self.name}-{self.storage}"

    @property
    def table_name(self) -> str:
        """The name in tables.yaml and in the report."""
        return f"{self.name}_{self.storage}"


def _checkpoints(log: LogView) -> list[str]:
    return [n for n in log.log_names if ".checkpoint." in n]


def _top_directories(paths: set[str]) -> set[str]:
    return {p.split("/", 1)[0] for p in paths if "/" in p}


def _random_prefix_directories(paths: set[str]) -> bool:
    tops = _top_directories(paths)
    return bool(tops) and all(re.fullmatch(r"[A-Za-z0-9]{2}", d) for d in tops)


def _vectors(paths: set[str]) -> set[str]:
    return {p for p in paths if p.rsplit("/", 1)[-1].startswith("deletion_vector_")}


V2_CHECKPOINT = re.compile(r"^\d{20}\.checkpoint\.[0-9a-f-]{36}\.(json|parquet)$")

CASES = [
    Case(
        "rs_no_checkpoint",
        "delta-rs",
        writers.rs_without_checkpoint,
        "no checkpoint",
        lambda log: not _checkpoints(log),
    ),
    Case(
        "rs_checkpoint",
        "delta-rs",
        writers.rs_with_checkpoint,
        "a classic checkpoint written by delta-rs after an append, with tombstones in it",
        lambda log: any(n.endswith(".checkpoint.parquet") for n in log.log_names),
    ),
    Case(
        "rs_partitioned_overwrite",
        "delta-rs",
        writers.rs_partitioned_overwrite,
        "partitions with escaped values, a predicate overwrite, OPTIMIZE compact, a checkpoint",
        lambda log: (
            log.partition_columns == ["city"] and "OPTIMIZE" in log.operations and bool(_checkpoints(log))
        ),
    ),
    Case(
        "rs_column_mapping",
        "delta-rs",
        writers.rs_column_mapping,
        "column mapping (name), partitioned: data under random 2-character directories",
        lambda log: (
            log.configuration.get("delta.columnMapping.mode") == "name"
            and _random_prefix_directories(log.data_files_by_version[log.latest])
        ),
    ),
    Case(
        "spark_v2_checkpoints",
        "delta-spark",
        writers.spark_v2_checkpoints,
        "v2 checkpoints (checkpointPolicy v2, interval 2), written",
        lambda log: "v2Checkpoint" in log.features and any(V2_CHECKPOINT.match(n) for n in log.log_names),
    ),
    Case(
        "spark_column_mapping",
        "delta-spark",
        writers.spark_column_mapping,
        "column mapping (name), partitioned under col-<uuid>= directories (Delta 4) or random "
        "2-character ones (Delta 3), a rename, a DELETE",
        lambda log: (
            log.configuration.get("delta.columnMapping.mode") == "name"
            and (
                all(d.startswith("col-") for d in _top_directories(log.data_files_by_version[log.latest]))
                or _random_prefix_directories(log.data_files_by_version[log.latest])
            )
        ),
    ),
    Case(
        "spark_liquid_clustering",
        "delta-spark",
        writers.spark_liquid_clustering,
        "liquid clustering (CLUSTER BY) and OPTIMIZE",
        lambda log: "clustering" in log.features and "OPTIMIZE" in log.operations,
    ),
    Case(
        "spark_row_tracking",
        "delta-spark",
        writers.spark_row_tracking,
        "row tracking, an UPDATE rewriting files",
        lambda log: "rowTracking" in log.features and "UPDATE" in log.operations,
    ),
    Case(
        "spark_deletion_vectors",
        "delta-spark",
        writers.spark_deletion_vectors,
        "deletion vectors: live vector files and replaced ones",
        lambda log: "deletionVectors" in log.features and bool(_vectors(log.live())),
    ),
    Case(
        "spark_random_prefixes",
        "delta-spark",
        writers.spark_random_prefixes,
        "randomizeFilePrefixes: deletion vectors under random 2-character directories",
        lambda log: (
            log.configuration.get("delta.randomizeFilePrefixes") == "true"
            and _random_prefix_directories(_vectors(log.live()))
        ),
    ),
    Case(
        "rs_checkpoint",
        "delta-rs",
        writers.rs_with_checkpoint,
        "a classic checkpoint written by delta-rs after an append, on S3",
        lambda log: any(n.endswith(".checkpoint.parquet") for n in log.log_names),
        storage="s3",
    ),
    Case(
        "spark_deletion_vectors",
        "delta-spark",
        writers.spark_deletion_vectors,
        "deletion vectors on S3",
        lambda log: "deletionVectors" in log.features and bool(_vectors(log.live())),
        storage="s3",
    ),
]
CASES += [
    Case(
        "spark_type_widening",
        "delta-spark",
        writers.spark_type_widening,
        "type widening: INT to BIGINT, then a partition overwrite",
        lambda log: bool({"typeWidening", "typeWidening-preview"} & log.features),
        needs_delta=(4, 0),  # Delta 3.3 widens byte and short to int only
    ),
    Case(
        "spark_in_commit_timestamps",
        "delta-spark",
        writers.spark_in_commit_timestamps,
        "in-commit timestamps, an overwrite",
        lambda log: "inCommitTimestamp" in log.features,
    ),
    Case(
        "spark_identity_columns",
        "delta-spark",
        writers.spark_identity_columns,
        "an identity column, a DELETE rewriting files",
        lambda log: "identityColumns" in log.features and "DELETE" in log.operations,
        # Spark 4.0 with Delta 4.0 refuses an identity column in a CREATE TABLE by path
        needs_delta=(4, 4),
    ),
    Case(
        "spark_row_tracking_with_vectors",
        "delta-spark",
        writers.spark_row_tracking_with_vectors,
        "row tracking with deletion vectors: a DELETE, an UPDATE",
        lambda log: {"rowTracking", "deletionVectors"} <= log.features and bool(_vectors(log.live())),
    ),
    Case(
        "spark_variant",
        "delta-spark",
        writers.spark_variant,
        "a VARIANT column, a DELETE rewriting files",
        lambda log: "variantType" in log.features,
        needs_delta=(4, 0),
    ),
]
CASES = [c for c in CASES if _installed_delta() >= c.needs_delta]
RS_CASES = [c for c in CASES if c.writer == "delta-rs"]


@dataclass
class Table:
    """One built table, with what the test knows about it before any vacuum."""

    case: Case
    store: Store
    spark_uri: str  # what Spark reads: file:///... or s3a://...
    rs_uri: str  # what delta-rs reads: /... or s3://...
    registered: str  # the path in tables.yaml
    storage_options: dict[str, str] | None = None  # delta-rs's, for S3
    junk_garbage: set[str] = field(default_factory=set)
    junk_kept: set[str] = field(default_factory=set)
    build_error: str | None = None
    log: LogView | None = None
    expected: set[str] = field(default_factory=set)
    before: dict[str, tuple[int, float]] = field(default_factory=dict)
    after_dry_runs: dict[str, tuple[int, float]] = field(default_factory=dict)
    after: dict[str, tuple[int, float]] = field(default_factory=dict)


@dataclass
class Matrix:
    """Every table of the matrix and the three command-line runs over all of them."""

    tables: dict[str, Table]  # by table name
    dry: dict[str, Any]
    dry_planned: dict[str, set[str]]
    listed: dict[str, Any]
    listed_planned: dict[str, set[str]]
    real: dict[str, Any]
    real_planned: dict[str, set[str]]
    ledger: str


# --- building the tables ---------------------------------------------------------------------


def _data_directory(log: LogView) -> str:
    """A directory holding live data files (a partition or random-prefix one), else a new one."""
    nested = sorted(p.rsplit("/", 1)[0] for p in log.data_files_by_version[log.latest] if "/" in p)
    return nested[0] if nested else "leftover"


def _build(spark: Any, table: Table) -> None:
    try:
        if table.case.writer == "delta-rs":
            table.case.build(table.rs_uri, table.storage_options)
        else:
            table.case.build(spark, table.spark_uri)
    except Exception as error:  # recorded: this case fails with it, the others still run
        table.build_error = f"{type(error).__name__}: {str(error)[:2000]}"
        return
    table.log = writers.read_log(table.store)


def _plant_junk(table: Table, *, future: float) -> None:
    """Old orphans (garbage) and hidden files (kept); locally also an orphan dated in the future
    (S3 sets its own times: there the young orphan is put after the inventory instead)."""
    assert table.log is not None
    directory = _data_directory(table.log)
    local = isinstance(table.store, LocalStore)
    old = time.time() - 30 * DAY if local else None
    table.junk_garbage = {"orphan-old.parquet", f"{directory}/orphan-old.parquet", "_delta_index/stale.idx"}
    table.junk_kept = {f"{directory}/_SUCCESS", f"{directory}/.orphan.parquet.crc", "_tmp/scratch"}
    for relative in sorted(table.junk_garbage | table.junk_kept):
        table.store.put(relative, mtime=old)
    if local:
        fresh = f"{directory}/orphan-fresh.parquet"
        table.store.put(fresh, mtime=future)
        table.junk_kept.add(fresh)


def _wait_out_retention(tables: dict[str, Table]) -> None:
    """Sleep until every tombstone and every written file is older than the 1-second retention."""
    newest = max((t.log.last_removal_ms / 1000 for t in tables.values() if t.log), default=0.0)
    time.sleep(max(0.0, newest + writers.RETENTION_SECONDS + 1.0 - time.time()))


def _registry(path: Path, tables: dict[str, Table]) -> str:
    path.write_text(
        "tables:\n"
        + "".join(
            f"  - {{name: {name}, path: '{t.registered}', owner: team}}\n"
            for name, t in tables.items()
            if t.log is not None
        )
    )
    return str(path)


# --- running the command line ----------------------------------------------------------------


def _clear_delta_cache(spark: Any) -> None:
    """Forget every cached DeltaLog and snapshot, as a new inventory-vacuum process would start."""
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()


def _vacuum(
    spark: Any, inventory: str, registry: str, candidates: Path, tables: dict[str, Table], *extra: str
) -> tuple[dict[str, Any], dict[str, set[str]]]:
    """One ``inventory-vacuum vacuum`` run: its JSON report and each table's planned files."""
    _clear_delta_cache(spark)
    _, report = cli_json(
        "vacuum",
        "--inventory-table",
        inventory,
        "--tables",
        registry,
        "--candidates",
        str(candidates),
        *extra,
    )
    planned: dict[str, set[str]] = {name: set() for name in tables}
    if candidates.exists():
        for row in pq.read_table(candidates).to_pylist():
            planned.setdefault(row["table"], set()).add(_relative_to(tables[row["table"]], row["path"]))
    return report, planned


def _relative_to(table: Table, path: str) -> str:
    """A planned path (absolute, decoded: file:/..., s3a://bucket/key) below the table's root."""
    if isinstance(table.store, LocalStore):
        root = str(table.store.root).rstrip("/") + "/"
        plain = path.removeprefix("file://").removeprefix("file:")
        return plain[len(root) :] if plain.startswith(root) else f"OUTSIDE THE TABLE: {path}"
    location = StorageLocation.parse(path)
    if location.bucket == table.store.bucket and location.key.startswith(table.store.prefix):
        return location.key[len(table.store.prefix) :]
    return f"OUTSIDE THE TABLE: {path}"


# The dry run plans with the real run's planner: on the default line both run; on the others the
# real run's plan is what is checked, and the dry run's time (a run over every table) is saved.
DRY_PASS = on_default_spark_line()


@pytest.fixture(scope="module")
def matrix(spark, s3, s3_endpoint, tmp_path_factory) -> Matrix:  # type: ignore[no-untyped-def]
    """Build every table, plant junk, take one inventory (local files and the S3 bucket in one
    inventory table), then run the dry run, the listing dry run and the real vacuum over all."""
    workdir = tmp_path_factory.mktemp("cross_writer")
    lake = workdir / "lake"
    lake.mkdir()
    source, inventory_bucket = f"xw-lake-{uuid.uuid4().hex[:10]}", f"xw-inv-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=source)
    s3.create_bucket(Bucket=inventory_bucket)
    storage_options = {
        "AWS_ENDPOINT_URL": s3_endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",  # the S3 test server: no conditional puts for commits
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    tables: dict[str, Table] = {}
    for case in CASES:
        if case.storage == "local":
            root = lake / case.name
            table = Table(case, LocalStore(root), f"file://{root}", str(root), f"file://{root}")
        else:
            table = Table(
                case,
                S3Store(s3, source, case.name),
                f"s3a://{source}/{case.name}",
                f"s3://{source}/{case.name}",
                f"s3://{source}/{case.name}",
                storage_options,
            )
        _build(spark, table)
        tables[case.table_name] = table
    future = time.time() + DAY
    built = {name: t for name, t in tables.items() if t.log is not None}
    for table in built.values():
        _plant_junk(table, future=future)
    _wait_out_retention(built)

    inventory = f"file://{workdir}/inventory"
    write_local_inventory(spark, lake, inventory)
    take_inventory(s3, source, inventory_bucket, inventory)
    for table in built.values():
        assert table.log is not None
        table.before = table.store.listing()
        table.expected = writers.expected_garbage(table.store, table.log)
        if isinstance(table.store, S3Store):  # after the inventory: the vacuum must not see it
            fresh = f"{_data_directory(table.log)}/orphan-fresh.parquet"
            table.store.put(fresh)
            table.junk_kept.add(fresh)

    registry = _registry(workdir / "tables.yaml", tables)
    dry: dict[str, Any] = {}
    dry_planned: dict[str, set[str]] = {}
    if DRY_PASS:
        dry, dry_planned = _vacuum(spark, inventory, registry, workdir / "dry.parquet", tables, "--dry-run")
    delta_rs = [f for n, t in built.items() if t.case.writer == "delta-rs" for f in ("--table", n)]
    listed, listed_planned = _vacuum(
        spark, inventory, registry, workdir / "list.parquet", tables, "--mode", "list", "--dry-run", *delta_rs
    )
    for table in built.values():
        table.after_dry_runs = table.store.listing()
    ledger = f"file://{workdir}/ledger"
    real, real_planned = _vacuum(
        spark, inventory, registry, workdir / "real.parquet", tables, "--ledger-table", ledger
    )
    for table in built.values():
        table.after = table.store.listing()
    return Matrix(tables, dry, dry_planned, listed, listed_planned, real, real_planned, ledger)


# --- checks ----------------------------------------------------------------------------------


def _table_report(report: dict[str, Any], name: str) -> dict[str, Any]:
    runs = [t for t in report.get("tables", []) if t["name"] == name]
    assert len(runs) == 1, f"no single report entry for {name}: {json.dumps(report)[:2000]}"
    return runs[0]


def _count(run: dict[str, Any], *names: str) -> int:
    """A file count from the report, under whichever name the report uses now."""
    for name in names:
        if run.get(name) is not None:
            return int(run[name])
    raise AssertionError(f"none of {names} in the report: {sorted(run)}")


def _built(matrix: Matrix, case: Case) -> Table:
    """The case's table, built with its feature, and the expectation itself sound: the history
    left garbage beyond the junk, and the junk is classified right."""
    table = matrix.tables[case.table_name]
    assert table.build_error is None, f"{case.writer} could not build {case.id}: {table.build_error}"
    assert table.log is not None
    assert case.shows(table.log), f"{case.id}: the table does not show {case.feature}"
    assert table.junk_garbage <= table.expected, table.junk_garbage - table.expected
    assert not (table.junk_kept & table.expected)
    assert table.expected - table.junk_garbage, f"{case.id}: the history left no removed files"
    assert not (table.expected & table.log.live())
    return table


def _differences(planned: set[str], expected: set[str]) -> str:
    return (
        f"planned but not garbage: {sorted(planned - expected)}; "
        f"garbage not planned: {sorted(expected - planned)}"
    )


@pytest.mark.skipif(not DRY_PASS, reason="the dry run runs on the default Spark line")
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_dry_run_plans_exactly_the_garbage(matrix: Matrix, case: Case) -> None:
    table = _built(matrix, case)
    live = table.log.live()  # type: ignore[union-attr]
    run = _table_report(matrix.dry, case.table_name)
    assert run["status"] == "ok", f"{case.id} --dry-run: {run['status']}: {run['reason']}"
    planned = matrix.dry_planned[case.table_name]
    assert not (planned & live), f"live files planned: {sorted(planned & live)}"
    assert planned == table.expected, _differences(planned, table.expected)
    assert _count(run, "planned_files", "files") == len(table.expected)
    assert set(table.after_dry_runs) >= set(table.before), "a dry run deleted files"


@pytest.mark.parametrize("case", RS_CASES, ids=[c.id for c in RS_CASES])
def test_list_mode_dry_run_on_delta_rs_tables(matrix: Matrix, case: Case) -> None:
    table = _built(matrix, case)
    run = _table_report(matrix.listed, case.table_name)
    assert run["status"] == "ok", f"{case.id} --mode list --dry-run: {run['status']}: {run['reason']}"
    planned = matrix.listed_planned[case.table_name]
    # the listing also sees the S3 orphan put after the inventory; by now it is older than 1 second
    late = (
        {p for p in table.junk_kept if p.endswith("orphan-fresh.parquet")} if case.storage == "s3" else set()
    )
    assert planned - late == table.expected, _differences(planned - late, table.expected)


def _removed_alongside(table: Table) -> set[str]:
    """Side files the local filesystem deletes with a data file (``.name.crc``)."""
    sides = set()
    for path in table.expected:
        directory, _, name = path.rpartition("/")
        side = f"{directory}/.{name}.crc" if directory else f".{name}.crc"
        if side in table.before:
            sides.add(side)
    return sides


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_vacuum_deletes_exactly_the_garbage_and_every_needed_version_reads(
    spark, matrix: Matrix, case: Case
) -> None:  # type: ignore[no-untyped-def]
    table = _built(matrix, case)
    log = table.log
    assert log is not None
    run = _table_report(matrix.real, case.table_name)
    assert run["status"] == "ok", f"{case.id}: {run['status']}: {run['reason']}"
    assert matrix.real_planned[case.table_name] == table.expected, _differences(
        matrix.real_planned[case.table_name], table.expected
    )
    deleted = set(table.before) - set(table.after)
    sides = _removed_alongside(table)
    assert deleted - sides == table.expected, (
        f"deleted but not garbage: {sorted(deleted - sides - table.expected)}; "
        f"garbage left: {sorted(table.expected - deleted)}"
    )
    assert table.junk_kept <= set(table.after)
    assert _count(run, "deleted_files", "files") == len(table.expected)

    # every version whose files the vacuum had to keep still reads, with the rows its log states
    needed = [v for v in log.versions if not (log.live(v) & table.expected)]
    assert log.latest in needed
    for version in needed:
        if not log.data_files_by_version[version]:
            continue  # the empty table of a CREATE
        rows = log.rows_by_version[version]
        assert rows is not None, f"{case.id} version {version}: an add action without numRecords"
        read = rows_at(spark, table.spark_uri, version)
        assert read == rows, f"{case.id} version {version}: Spark reads {read} rows, the log says {rows}"
        if case.writer == "delta-rs":
            from deltalake import DeltaTable

            arrow = DeltaTable(table.rs_uri, version=version, storage_options=table.storage_options)
            assert arrow.to_pyarrow_table().num_rows == rows, f"{case.id} version {version}: delta-rs"


def test_the_real_run_is_clean_and_its_ledger_lists_every_deleted_file(spark, matrix: Matrix) -> None:  # type: ignore[no-untyped-def]
    """No table's run warns (a warning is something that went wrong), and the deletion ledger
    has one row per deleted file of every table."""
    warnings = {t["name"]: t["warnings"] for t in matrix.real.get("tables", []) if t.get("warnings")}
    assert not warnings, warnings
    ledger = spark.read.format("delta").load(matrix.ledger).select("table", "path").collect()
    recorded: dict[str, set[str]] = {}
    for row in ledger:
        table = matrix.tables[row["table"]]
        recorded.setdefault(row["table"], set()).add(_relative_to(table, row["path"]))
    ok = {t["name"] for t in matrix.real.get("tables", []) if t["status"] == "ok"}
    missing = {
        name: sorted(table.expected - recorded.get(name, set()))
        for name, table in matrix.tables.items()
        if name in ok and table.expected - recorded.get(name, set())
    }
    assert not missing, f"deleted files missing from the ledger: {missing}"
