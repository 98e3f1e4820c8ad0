"""The safety property on local Delta tables with real histories (file:// tables)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.support.helpers import cli_json, retention_deadline, rows_at, wait_until, write_local_inventory
from tests.support.tables import all_versions_readable, create_history_table, files_under, referenced_files


def write_registry(path: Path, **tables: Path) -> str:
    lines = ["tables:"] + [
        f"  - {{name: {name}, path: 'file://{root}', owner: team}}" for name, root in tables.items()
    ]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def touch(path: Path, body: bytes = b"junk") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    return path


def age(path: Path, days: float) -> None:
    moment = time.time() - days * 86400
    os.utime(path, (moment, moment))


def vacuum(registry: str, inventory: str, *extra: str):
    return cli_json("vacuum", "--inventory-table", inventory, "--tables", registry, *extra)


def visible_files(root: Path) -> set[str]:
    """The table's files on disk outside hidden directories (``_delta_log``, ``.``-files): what
    Delta's VACUUM considers."""
    return {
        p
        for p in files_under(root)
        if not any(part.startswith((".", "_")) for part in Path(p).relative_to(root).parts)
    }


def unreferenced_files(spark, root: Path) -> set[str]:
    """The table's files no version references, outside the directories Delta's VACUUM skips
    (``_delta_log``, ``.``-files; it does consider ``_delta_index`` and ``_change_data``)."""
    return {
        p
        for p in files_under(root) - referenced_files(spark, f"file://{root}")
        if not any(
            part.startswith(("_", ".")) and not part.startswith(("_delta_index", "_change_data"))
            for part in Path(p).relative_to(root).parts
        )
    }


def dry_run_paths(spark, uri: str) -> set[str]:
    """Files Delta's listing VACUUM would delete (it also lists directories it would try)."""
    paths = {r["path"].removeprefix("file:") for r in spark.sql(f"VACUUM delta.`{uri}` DRY RUN").collect()}
    return {p for p in paths if Path(p).is_file()}


@pytest.mark.slow
def test_default_retention_deletes_only_old_untracked_files(spark, tmp_path):
    root = tmp_path / "lake" / "events"
    uri = f"file://{root}"
    counts_before = create_history_table(spark, uri)
    old_junk = [
        touch(root / "day=2024-01-01" / "city=a b" / "orphan-old.parquet"),
        touch(root / "orphan-top.parquet"),
    ]
    kept_junk = [
        touch(root / "day=2024-01-01" / "orphan-new.parquet"),  # inside retention: too young
        touch(root / "day=2024-01-01" / "_SUCCESS"),  # hidden, nested: Delta's inventory mode would delete it
        touch(root / "day=2024-01-02" / "city=c#d" / ".part.crc"),
        touch(root / "_tmp" / "scratch"),
        touch(root / ".staging" / "x"),
    ]
    sibling = touch(tmp_path / "lake" / "events_v2" / "part-0.parquet")
    for path in [*old_junk, *kept_junk[1:], sibling]:
        age(path, days=30)
    inventory = f"file://{tmp_path}/inventory"
    write_local_inventory(spark, tmp_path / "lake", inventory)
    late = touch(root / "day=2024-01-03" / "late-orphan.parquet")  # not in the inventory yet
    age(late, days=30)
    registry = write_registry(tmp_path / "tables.yaml", events=root)

    list_mode = dry_run_paths(spark, uri)
    code, dry = vacuum(registry, inventory, "--dry-run")
    assert code == 0, dry["tables"][0]["reason"]
    [run] = dry["tables"]
    assert run["status"] == "ok" and run["dry_run"] is True
    assert run["planned_files"] == len(old_junk) and run["planned_bytes"] == 4 * len(old_junk)
    assert run["coverage"] == 1.0
    assert run["retention_hours_effective"] == 168
    assert {p["partition"] for p in run["partitions"]} == {"day=2024-01-01", "(table root)"}
    # inventory mode sees what listing mode sees, except the file the inventory has not seen
    assert list_mode == {str(p) for p in old_junk} | {str(late)}

    before = files_under(tmp_path / "lake")
    code, real = vacuum(registry, inventory)
    assert code == 0, real["tables"][0]["reason"]
    assert real["tables"][0]["deleted_files"] == len(old_junk)
    deleted = before - files_under(tmp_path / "lake")
    assert deleted == {str(p) for p in old_junk}
    # every version inside retention still reads (VACUUM START/END commits add two more)
    assert all_versions_readable(spark, uri)[: len(counts_before)] == counts_before


@pytest.mark.slow
def test_short_retention_deletes_exactly_the_unreferenced_files(spark, tmp_path):
    root = tmp_path / "events"
    uri = f"file://{root}"
    create_history_table(spark, uri, retention="interval 2 seconds")
    touch(root / "day=2024-01-01" / "_SUCCESS")
    touch(root / "_delta_index" / "idx.bin")  # not hidden for Delta: an untracked index file
    past_retention = retention_deadline()  # every removed file is outside the retention then
    inventory = f"file://{tmp_path}/inventory"
    write_local_inventory(spark, root, inventory)
    wait_until(past_retention)
    registry = write_registry(tmp_path / "tables.yaml", events=root)
    current_count = rows_at(spark, uri)
    referenced = referenced_files(spark, uri)
    before = files_under(root)
    hidden = {
        p
        for p in before
        if any(
            part.startswith(("_", ".")) and not part.startswith(("_delta_index", "_change_data"))
            for part in Path(p).relative_to(root).parts
        )
    }
    expected = before - referenced - hidden
    assert any("/_change_data/" in p for p in expected) and any(p.endswith(".bin") for p in expected)
    # Delta's listing VACUUM agrees, but for the local filesystem's own .crc side files of removed
    # data files, which it lists and inventory mode keeps as hidden (S3 has none)
    assert {p for p in dry_run_paths(spark, uri) if not p.endswith(".crc")} == expected

    code, result = vacuum(registry, inventory)

    assert code == 0, result["tables"][0]["reason"]
    deleted = before - files_under(root)
    # the local filesystem deletes a data file's .crc side file with it
    assert {p for p in deleted if not p.endswith(".crc")} == expected
    assert result["tables"][0]["deleted_files"] == len(expected)
    assert rows_at(spark, uri) == current_count
    assert (root / "day=2024-01-01" / "_SUCCESS").exists()


def table_with_an_old_orphan(spark, tmp_path: Path) -> tuple[str, str]:
    """Table ``events`` (a history of versions) with one 30-day-old orphan, and an inventory of it:
    (its registry, the inventory table)."""
    root = tmp_path / "lake" / "events"
    create_history_table(spark, f"file://{root}")
    age(touch(root / "orphan.parquet"), days=30)
    inventory = f"file://{tmp_path}/inventory"
    write_local_inventory(spark, tmp_path / "lake", inventory)
    return write_registry(tmp_path / "tables.yaml", events=root), inventory


@pytest.mark.slow
def test_a_run_sizes_each_tables_shuffles_on_its_own_session_and_a_broken_inventory_fails_each_table(
    spark, tmp_path, monkeypatch
):
    from core.tables import SNAPSHOT_PARTITIONS
    from vacuum import runner, tuning

    registry, inventory = table_with_an_old_orphan(spark, tmp_path)
    adaptive = spark.conf.get("spark.sql.adaptive.enabled")
    tuned = []

    def one_job(session):  # the run's figures session, as tuning.aggregate_in_one_job leaves it
        tuning.aggregate_in_one_job(session)
        tuned.append((session, session.conf.get("spark.sql.shuffle.partitions")))

    monkeypatch.setattr(runner, "aggregate_in_one_job", one_job)
    # as a job whose configuration does not size Delta's snapshots (the tests' session does)
    sized = spark.conf.get(SNAPSHOT_PARTITIONS)
    spark.conf.unset(SNAPSHOT_PARTITIONS)
    try:
        code, dry = vacuum(registry, inventory, "--dry-run")
    finally:
        spark.conf.set(SNAPSHOT_PARTITIONS, sized)

    assert code == 0, dry["tables"][0]["reason"]
    assert dry["tables"][0]["planned_files"] == 1
    # the run's figures gathered on one shuffle partition of a session of the run's own
    [(session, partitions)] = tuned
    assert partitions == "1" and session is not spark
    # the table's session took a setting sized to its few objects (1); the job's own session kept
    # the job's local default (8, which the CLI sets on the session it gets)
    assert spark.conf.get("spark.sql.shuffle.partitions") == "8"
    assert spark.conf.get("spark.sql.adaptive.enabled") == adaptive

    # the inventory's data files gone: the run's up-front figures fail (only logged), and each
    # table meets the same error and reports it; nothing is planned
    data_files = [p for p in (tmp_path / "inventory").rglob("*.parquet") if "_delta_log" not in p.parts]
    assert data_files
    for path in data_files:
        path.unlink()
    code, broken = vacuum(registry, inventory, "--dry-run")
    [run] = broken["tables"]
    assert code != 0 and run["status"] == "failed" and run["planned_files"] == 0, run
    # one line that names the missing file, not Py4J's ": org.apache.spark.SparkException: ..."
    assert ".parquet" in run["reason"] and not run["reason"].startswith(":"), run["reason"]


@pytest.mark.slow
def test_a_small_tables_plan_runs_interpreted_and_names_what_generated_code_names(
    spark, tmp_path, monkeypatch
):
    """A table of few objects is planned on Spark's interpreted evaluation; the user's own choice
    of code generation keeps generated code. Both name exactly the unreferenced files, and so does
    the plan with the optimiser's constraint propagation on, which a small table runs without."""
    import pyarrow.parquet as pq

    from vacuum import inventory_slice, tuning

    root = tmp_path / "events"
    uri = f"file://{root}"
    create_history_table(spark, uri, retention="interval 2 seconds")
    past_retention = retention_deadline()
    inventory = f"file://{tmp_path}/inventory"
    write_local_inventory(spark, root, inventory)
    wait_until(past_retention)
    registry = write_registry(tmp_path / "tables.yaml", events=root)
    unreferenced = unreferenced_files(spark, root)
    assert any("/_change_data/" in p for p in unreferenced)

    factories = []
    constraints = []
    sized = tuning.size_shuffles

    def sizing(session, objects):  # the plan's settings, as its gates start
        sized(session, objects)
        factories.append(
            (
                session.conf.get("spark.sql.codegen.factoryMode"),
                session.conf.get("spark.sql.codegen.wholeStage"),
            )
        )
        constraints.append(session.conf.get(tuning.CONSTRAINT_PROPAGATION))

    monkeypatch.setattr(inventory_slice, "size_shuffles", sizing)

    def planned(name: str) -> set[str]:
        candidates = tmp_path / f"{name}.parquet"
        code, result = vacuum(registry, inventory, "--dry-run", "--candidates", str(candidates))
        assert code == 0, result["tables"][0]["reason"]
        return {p.removeprefix("file:") for p in pq.read_table(candidates).column("path").to_pylist()}

    factory = "spark.sql.codegen.factoryMode"
    chosen = spark.conf.get(factory, None)  # the suite's own choice, if it runs with one
    spark.conf.unset(factory)
    try:
        assert planned("interpreted") == unreferenced
        assert factories == [("NO_CODEGEN", "false")]
        spark.conf.set(factory, "FALLBACK")  # the job's own choice: kept
        assert planned("generated") == unreferenced
    finally:
        spark.conf.unset(factory) if chosen is None else spark.conf.set(factory, chosen)
    assert factories[1] == ("FALLBACK", "true")
    assert constraints == ["false", "false"]
    # the plan with constraint propagation on, as a bigger table's runs: the same files
    monkeypatch.setattr(
        tuning,
        "_ONE_WAVE",
        tuple(
            (setting, kept, "true" if setting == tuning.CONSTRAINT_PROPAGATION else value)
            for setting, kept, value in tuning._ONE_WAVE
        ),
    )
    assert planned("constraints") == unreferenced
    assert constraints[2] == "true"


@pytest.mark.slow
@pytest.mark.parametrize("tables", [1, 2])
def test_a_one_table_runs_snapshot_is_read_beside_its_figures_and_its_gates_wait_for_them(
    spark, tmp_path, monkeypatch, tables
):
    """A one-table run reads its figures on a thread of its own while the table reads its
    snapshot; the table's gates then wait for those figures (it counts none of its own), and it
    is still planned interpreted (a small table) and names exactly the unreferenced files. A run
    of two tables reads its figures before either table starts."""
    import threading

    from vacuum import inventory_slice, runner
    from vacuum.context import RunContext

    lake = tmp_path / "lake"
    names = ["events", "orders"][:tables]
    past_retention = 0.0
    for name in names:
        create_history_table(spark, f"file://{lake / name}", retention="interval 2 seconds")
        past_retention = retention_deadline()
    inventory = f"file://{tmp_path}/inventory"
    write_local_inventory(spark, lake, inventory)
    wait_until(past_retention)
    registry = write_registry(tmp_path / "tables.yaml", **{name: lake / name for name in names})
    unreferenced = set().union(*(unreferenced_files(spark, lake / name) for name in names))
    assert unreferenced

    snapshot_started = threading.Event()
    events = []
    figures_of_tables, load_table_state = RunContext.figures_of_tables, runner.load_table_state
    own_figures, sized = inventory_slice.inventory_figures, inventory_slice.size_shuffles

    def figures(self, *args):  # one table: the run's figures go on once the table reads its snapshot
        started = snapshot_started.wait(timeout=60) if tables == 1 else snapshot_started.is_set()
        events.append(("figures start", started))
        figures_of_tables(self, *args)
        events.append(("figures end", None))

    def snapshot(session, *args):  # with the code generation it is rebuilt with
        events.append(("snapshot start", session.conf.get("spark.sql.codegen.factoryMode")))
        snapshot_started.set()
        return load_table_state(session, *args)

    def counted_by_the_table(*args):
        events.append(("the table's own figures", None))
        return own_figures(*args)

    def sizing(session, objects):
        events.append(("gates", session.conf.get("spark.sql.codegen.factoryMode")))
        sized(session, objects)

    monkeypatch.setattr(RunContext, "figures_of_tables", figures)
    monkeypatch.setattr(runner, "load_table_state", snapshot)
    monkeypatch.setattr(inventory_slice, "inventory_figures", counted_by_the_table)
    monkeypatch.setattr(inventory_slice, "size_shuffles", sizing)
    factory = "spark.sql.codegen.factoryMode"
    chosen = spark.conf.get(factory, None)  # the suite's own choice, if it runs with one
    spark.conf.unset(factory)
    candidates = tmp_path / "candidates.parquet"
    try:
        code, result = vacuum(registry, inventory, "--dry-run", "--candidates", str(candidates))
    finally:
        spark.conf.unset(factory) if chosen is None else spark.conf.set(factory, chosen)
    assert code == 0, [table["reason"] for table in result["tables"]]
    if tables == 1:
        # the snapshot began while the figures were read (their wait did not time out), with
        # generated code (the table's size unknown yet), and the gates ran after the figures, with
        # the run's figures (the table counted none), interpreted
        assert events == [
            ("snapshot start", "FALLBACK"),
            ("figures start", True),
            ("figures end", None),
            ("gates", "NO_CODEGEN"),
        ]
    else:  # the figures first, then both tables, each with the run's figures, all interpreted
        assert events[:2] == [("figures start", False), ("figures end", None)]
        assert sorted(events[2:]) == [("gates", "NO_CODEGEN")] * 2 + [("snapshot start", "NO_CODEGEN")] * 2
    read = {p.removeprefix("file:") for p in pq.read_table(candidates).column("path").to_pylist()}
    assert read == unreferenced


def test_a_tables_reads_of_the_runs_figures_and_rows_wait_until_they_are_read():
    """While the run reads its figures, a table's reads of them, and its letting go of the rows
    read with them, wait; once they are read, they go on."""
    import threading

    from core.paths import StorageLocation
    from vacuum.context import RunContext

    context = RunContext("r", 0, ())
    location = StorageLocation.parse("s3://lake/t")
    assert context.figures_read.is_set() and context.figures_of_table(location) is None
    context.figures_read.clear()
    done = []
    readers = [
        threading.Thread(target=lambda: done.append(context.figures_of_table(location)), daemon=True),
        threading.Thread(target=lambda: done.append(context.release_rows(location)), daemon=True),
        threading.Thread(
            target=lambda: done.append(context.rows_source("the inventory", location)), daemon=True
        ),
    ]
    try:
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(timeout=0.5)
        assert done == [] and all(reader.is_alive() for reader in readers)
    finally:
        context.figures_read.set()
    for reader in readers:
        reader.join(timeout=10)
    assert sorted(done, key=str) == [None, None, "the inventory"]


def _one_table_with_an_orphan(spark, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A local table ``events`` of a 2-second retention, with an orphan past it, its inventory and
    its registry's tables: (the orphan, the inventory table's URI, the tables)."""
    from core.registry import load_registry

    root = tmp_path / "events"
    create_history_table(spark, f"file://{root}", retention="interval 2 seconds")
    orphan = touch(root / "day=2024-01-01" / "orphan.parquet")
    past_retention = retention_deadline()
    inventory = f"file://{tmp_path}/inventory"
    write_local_inventory(spark, root, inventory)
    wait_until(past_retention)
    return orphan, inventory, load_registry(write_registry(tmp_path / "tables.yaml", events=root)).select([])


@pytest.mark.slow
def test_an_interrupt_while_the_figures_are_read_deletes_nothing(spark, tmp_path, monkeypatch):
    """Ctrl-C while a one-table run reads its figures (its table's snapshot already read, waiting
    for them): the run stops (RunInterrupted, with the table's outcome), and the table, which goes on once the figures are in, is refused before it deletes
    anything."""
    import signal
    import threading

    from core.errors import RunInterrupted
    from vacuum import runner
    from vacuum.context import RunContext, VacuumOptions

    orphan, inventory, tables = _one_table_with_an_orphan(spark, tmp_path)
    snapshot_read = threading.Event()
    runs = []
    figures_of_tables, load_table_state, table_run = (
        RunContext.figures_of_tables,
        runner.load_table_state,
        runner.vacuum_table,
    )

    def figures(self, *args):  # the user's Ctrl-C, once the table waits for the figures
        assert snapshot_read.wait(timeout=60)
        os.kill(os.getpid(), signal.SIGINT)
        assert self.stopped.wait(timeout=30), "the interrupt did not stop the run"
        figures_of_tables(self, *args)

    def snapshot(*args):
        read = load_table_state(*args)
        snapshot_read.set()
        return read

    def recorded(*args, **kwargs):
        runs.append(table_run(*args, **kwargs))
        return runs[-1]

    monkeypatch.setattr(RunContext, "figures_of_tables", figures)
    monkeypatch.setattr(runner, "load_table_state", snapshot)
    monkeypatch.setattr(runner, "vacuum_table", recorded)
    options = VacuumOptions(inventory_table=inventory, retain_hours=0, allow_unsafe_retention=True)
    with pytest.raises(RunInterrupted) as stopped:
        runner.vacuum_tables(spark, tables, options, run_id="interrupted")
    assert orphan.exists()
    assert [(run.status, run.deleted_files) for run in runs] == [("refused", 0)]
    assert stopped.value.result.tables == runs
    assert "before its gates" in (runs[0].reason or "")
    # the same table, not interrupted: the orphan is the run's to delete
    monkeypatch.setattr(RunContext, "figures_of_tables", figures_of_tables)
    result = runner.vacuum_tables(spark, tables, options, run_id="whole")
    assert [run.status for run in result.tables] == ["ok"], result.tables[0].reason
    assert not orphan.exists()


@pytest.mark.slow
def test_an_interrupt_just_after_a_tables_last_check_cancels_the_deletes_it_starts_after(
    spark, tmp_path, monkeypatch
):
    """Ctrl-C just after a table passed its last check before Delta's delete, so that Delta's
    VACUUM starts after the interrupt's cancel of the running jobs: its jobs are cancelled too
    (not left to delete to the end), the table fails with the cancel, and what it deleted is
    measured."""
    import signal
    import threading

    from core.errors import RunInterrupted
    from vacuum import runner
    from vacuum.context import RunContext, VacuumOptions

    orphan, inventory, tables = _one_table_with_an_orphan(spark, tmp_path)
    context = spark.sparkContext
    cancel_all, begin_deletes = context.cancelAllJobs, RunContext.begin_deletes
    all_cancelled = threading.Event()

    def cancelled_all() -> None:
        cancel_all()
        all_cancelled.set()

    def begun_then_interrupted(self, tag, refuse_if_stopped):  # the user's Ctrl-C comes just after
        begin_deletes(self, tag, refuse_if_stopped)
        os.kill(os.getpid(), signal.SIGINT)
        assert all_cancelled.wait(timeout=30), "the interrupt cancelled no job"

    monkeypatch.setattr(context, "cancelAllJobs", cancelled_all)
    monkeypatch.setattr(RunContext, "begin_deletes", begun_then_interrupted)
    options = VacuumOptions(
        inventory_table=inventory, delete_with="delta", retain_hours=0, allow_unsafe_retention=True
    )
    with pytest.raises(RunInterrupted) as stopped:
        runner.vacuum_tables(spark, tables, options, run_id="late")
    [run] = stopped.value.result.tables
    assert run.status == "failed" and "cancel" in (run.reason or "").lower(), run.reason
    assert run.deleted_files == (0 if orphan.exists() else 1)


def test_a_table_whose_run_stopped_after_its_plan_deletes_nothing(spark, tmp_path, monkeypatch):
    """A run that stops while a table checks Delta's plan (an interrupt elsewhere): the table is
    refused before its deletes, here Delta's own, and its orphan stays."""
    from core.paths import StorageLocation
    from core.registry import RegisteredTable
    from vacuum import runner
    from vacuum.context import RunContext, VacuumOptions

    root = tmp_path / "events"
    uri = f"file://{root}"
    create_history_table(spark, uri, retention="interval 2 seconds")
    orphan = touch(root / "day=2024-01-01" / "orphan.parquet")
    wait_until(retention_deadline())
    table = RegisteredTable(name="events", path=uri, location=StorageLocation.parse(uri), owner="team")
    context = RunContext("stopped", None, ())
    checked = runner.check_plan

    def stopped_meanwhile(*args, **kwargs):
        context.stopped.set()
        return checked(*args, **kwargs)

    monkeypatch.setattr(runner, "check_plan", stopped_meanwhile)
    options = VacuumOptions(mode="list", delete_with="delta", retain_hours=0, allow_unsafe_retention=True)
    # a session of the table's own, as a run gives it: the retention's setting stays on it
    run = runner.vacuum_table(spark.newSession(), table, options, context)
    assert (run.status, run.deleted_files) == ("refused", 0), run.reason
    assert "before its deletes" in (run.reason or "") and run.planned_files >= 1
    assert orphan.exists()


def test_only_the_plan_runs_on_shuffles_sized_to_the_table(spark):
    """Delta's parallel delete and the existence checks take their task count from the session's
    shuffle setting: sized to a small table's objects it would be one task for all its deletes."""
    from vacuum.tuning import adaptive_off_until_sized, size_shuffles, unsize_shuffles

    broadcast = "spark.sql.autoBroadcastJoinThreshold"
    constraints = "spark.sql.constraintPropagation.enabled"
    session = spark.newSession()
    session.conf.set("spark.sql.shuffle.partitions", "200")
    session.conf.set(broadcast, "20MB")  # the user's own
    size_shuffles(session, 1_000)
    # the plan: one partition, and no adaptive execution (a Spark job per query stage), no
    # automatic broadcast (a Spark job per broadcast) and no constraint propagation (the
    # optimiser's derivation of each operator's predicates)
    assert session.conf.get("spark.sql.shuffle.partitions") == "1"
    assert session.conf.get("spark.sql.adaptive.enabled") == "false"
    assert session.conf.get(broadcast) == "-1"
    assert session.conf.get(constraints) == "false"
    unsize_shuffles(session)
    assert session.conf.get("spark.sql.shuffle.partitions") == "200"  # the delete
    assert session.conf.get("spark.sql.adaptive.enabled") == "true"
    assert session.conf.get(broadcast) == "20MB"
    assert session.conf.get(constraints) == "true"
    # a table of more than one partition gets adaptive execution and broadcasts back, which its
    # snapshot and inventory figures ran without
    big = spark.newSession()
    big.conf.set("spark.sql.shuffle.partitions", "200")
    default_broadcast = big.conf.get(broadcast)
    adaptive_off_until_sized(big)
    assert big.conf.get("spark.sql.adaptive.enabled") == "false" and big.conf.get(broadcast) == "-1"
    assert big.conf.get(constraints) == "false"
    cores = spark.sparkContext.defaultParallelism
    size_shuffles(big, 50_000 * (cores + 1))  # a partition per 50k objects: more than one wave
    assert big.conf.get("spark.sql.shuffle.partitions") == str(cores + 1)
    assert big.conf.get("spark.sql.adaptive.enabled") == "true"
    assert big.conf.get(broadcast) == default_broadcast != "-1"
    assert big.conf.get(constraints) == "true"
    # one wave of tasks (no more partitions than cores) has nothing for adaptive execution to coalesce
    wave = spark.newSession()
    wave.conf.set("spark.sql.shuffle.partitions", "200")
    size_shuffles(wave, 50_000 * cores)
    assert wave.conf.get("spark.sql.shuffle.partitions") == str(cores)
    assert wave.conf.get("spark.sql.adaptive.enabled") == "false"
    unsize_shuffles(wave)
    assert wave.conf.get("spark.sql.adaptive.enabled") == "true"
    # a small table whose snapshot ran without adaptive execution: sizing turns it off a second
    # time, and the delete still gets the session's own setting, not the "false" of the first
    small = spark.newSession()
    adaptive_off_until_sized(small)
    size_shuffles(small, 1_000)
    assert small.conf.get("spark.sql.adaptive.enabled") == "false" and small.conf.get(broadcast) == "-1"
    unsize_shuffles(small)
    assert small.conf.get("spark.sql.adaptive.enabled") == "true"
    assert small.conf.get(broadcast) == default_broadcast
    # a session never sized (a list-mode table has no inventory figures): nothing to restore
    untouched = spark.newSession()
    untouched.conf.set("spark.sql.shuffle.partitions", "64")
    unsize_shuffles(untouched)
    assert untouched.conf.get("spark.sql.shuffle.partitions") == "64"
    # interpreted evaluation for a small table only: a bigger one keeps generated code
    from vacuum.tuning import INTERPRETED_UP_TO_OBJECTS, interpret_small_plan

    bigger = spark.newSession()
    assert not interpret_small_plan(bigger, INTERPRETED_UP_TO_OBJECTS + 1)
    assert bigger.conf.get("spark.sql.codegen.wholeStage") == "true"
    assert bigger.conf.get("spark.sql.codegen.factoryMode") == "FALLBACK"


def test_a_cached_frame_is_read_from_its_cache_alone_with_the_same_rows(spark):
    """A frame the table's later queries are built on, persisted, is read through a plan of one
    node, its cache: each query built on it analyses that node, not the frame's whole plan again.
    Its rows, its columns (by name and by the frame's own references) and a join of it with
    itself are the same; release lets go of the frame's cache, and a frame without one is
    read as it is."""
    from py4j.protocol import Py4JError
    from pyspark.sql import functions as F

    from vacuum import tuning

    frame = (
        spark.range(0, 500, numPartitions=3)
        .withColumn("key", F.format_string("table/part=%d/file-%d", F.col("id") % 7, "id"))
        .where(F.col("id") % 5 != 0)
        .select("id", "key", (F.col("id") * 2).alias("twice"))
    )
    expected = sorted(frame.collect())
    persisted = frame.persist()
    read = tuning.read_from_cache(persisted)
    assert read is not persisted and read.columns == frame.columns
    assert read._jdf.queryExecution().analyzed().nodeName() == "InMemoryRelation"
    assert "InMemoryTableScan" in read._jdf.queryExecution().executedPlan().toString()
    assert sorted(read.collect()) == expected
    by_reference = read.select(frame["key"], frame["twice"]).collect()
    assert sorted(map(tuple, by_reference)) == sorted((r.key, r.twice) for r in expected)
    pairs = read.alias("a").join(read.alias("b"), F.col("a.id") == F.col("b.twice")).count()
    assert pairs == sum(1 for r in expected if r.id * 2 in {e.id for e in expected})
    tuning.release(read)
    assert not persisted.storageLevel.useMemory and not persisted.storageLevel.useDisk
    uncached = spark.range(3)
    assert tuning.read_from_cache(uncached) is uncached
    tuning.release(uncached)  # nothing to let go of

    class WithoutTheseInternals:  # a Spark build whose cache manager answers otherwise
        def sparkSession(self):
            raise Py4JError("An error occurred while calling o1.sparkSession")

    other = spark.range(3)
    own, other._jdf = other._jdf, WithoutTheseInternals()
    assert tuning.read_from_cache(other) is other  # read through its own plan, as before
    other._jdf = own


@pytest.mark.line_sensitive  # Spark's checkpoint internals (the plan's LogicalRDD, its RDD)
def test_a_small_tables_inputs_are_read_in_one_partition_and_its_joins_shuffle_nothing(spark):
    """A table whose plan shuffles into one partition reads its inputs in one: the plan's joins
    and aggregations then need no shuffle (a query stage and its tasks each), and its rows are
    the same. A bigger table's inputs keep their partitions."""
    from pyspark.sql import functions as F

    from vacuum import tuning
    from vacuum.tuning import checkpointed_in_one_partition, in_one_partition, size_shuffles, unsize_shuffles

    session = spark.newSession()
    configured = session.conf.get("spark.sql.maxSinglePartitionBytes")
    unknown_size = session.conf.get("spark.sql.defaultSizeInBytes")
    size_shuffles(session, 1_000)
    assert session.conf.get("spark.sql.defaultSizeInBytes") == tuning._UNKNOWN_SIZE_OF_ONE_PARTITION
    # rows of an RDD, as Delta's files are: of unknown size, which Spark takes for very big (and
    # from Spark 4.0 shuffles out of one partition into the session's, unless told otherwise)
    left = session.createDataFrame(
        session.sparkContext.parallelize([(number,) for number in range(300)], 3), "id long"
    ).withColumn("side", F.lit("left"))
    right = session.range(100, 400, numPartitions=2).withColumn("other", F.lit("right"))

    def joined(one: bool):
        pick = (lambda frame: in_one_partition(session, frame)) if one else (lambda frame: frame)
        return (
            pick(left)
            .join(pick(right), "id", "left")
            .groupBy((F.col("id") % 7).alias("group"))
            .agg(F.count(F.lit(1)).alias("rows"), F.count("other").alias("matched"))
        )

    single = joined(True)
    assert single.rdd.getNumPartitions() == 1
    assert "Exchange" not in single._jdf.queryExecution().executedPlan().toString()
    assert "Exchange" in joined(False)._jdf.queryExecution().executedPlan().toString()
    assert sorted(single.collect()) == sorted(joined(False).collect())
    # a frame the table reads several times: in one partition and checkpointed at its first
    # read, the same rows, read after that with no plan behind them (no lineage to ship with each
    # task), let go of by release; read after that, it fails rather than read fewer rows
    checkpointed = checkpointed_in_one_partition(session, left)
    rows = getattr(checkpointed, tuning._CHECKPOINTED_ROWS)
    assert checkpointed._jdf.queryExecution().analyzed().nodeName() == "LogicalRDD"
    assert checkpointed.rdd.getNumPartitions() == 1
    assert sorted(checkpointed.collect()) == sorted(left.collect())
    assert rows.isCheckpointed() and rows.getStorageLevel().useMemory()
    assert rows.dependencies().head().rdd().getClass().getSimpleName() == "LocalCheckpointRDD"
    assert checkpointed.where(F.col("id") > 100).count() == 199
    tuning.release(checkpointed)
    assert not rows.getStorageLevel().isValid()
    with pytest.raises(Exception, match="(?i)checkpoint"):
        checkpointed.count()
    unsize_shuffles(session)  # the delete's own settings
    assert session.conf.get("spark.sql.maxSinglePartitionBytes") == configured
    assert session.conf.get("spark.sql.defaultSizeInBytes") == unknown_size
    # the existence checks after a delete make their requests over the session's own partitions
    from vacuum.verify import by_directory

    session.conf.set("spark.sql.adaptive.enabled", "false")  # no coalescing of the partitions
    planned = (
        session.range(0, 300, numPartitions=3)
        .coalesce(1)
        .select(F.lit("bucket").alias("bucket"), F.format_string("table/part=%d/file", "id").alias("key"))
    )
    session.conf.set("spark.sql.shuffle.partitions", "8")
    assert by_directory(planned).rdd.getNumPartitions() == 8
    assert in_one_partition(session, left) is left  # the delete's: as it is
    bigger = spark.newSession()
    size_shuffles(bigger, 50_001)  # two partitions: each input as it is
    frame = bigger.range(0, 10, numPartitions=3)
    assert in_one_partition(bigger, frame) is frame
    assert checkpointed_in_one_partition(bigger, frame) is frame  # a big table's rows are not held twice
    # one shuffle partition by the job's own setting: a big table's inputs keep their partitions
    # too, and so do those of a session never sized (list and lite modes)
    own = spark.newSession()
    own.conf.set("spark.sql.shuffle.partitions", "1")
    assert in_one_partition(own, frame) is frame
    size_shuffles(own, 50_001)
    assert own.conf.get("spark.sql.shuffle.partitions") == "1"
    assert in_one_partition(own, frame) is frame


def test_a_run_lets_go_of_each_tables_jvm_objects_though_py4j_keeps_them_in_reference_cycles(
    spark, tmp_path, monkeypatch
):
    """py4j keeps each method called on a JVM object in that object, a reference cycle: a table's
    DataFrames (and their plans in the JVM) go only when Python's cyclic collector runs, which the
    run does every few tables rather than leave it to Python's own schedule."""
    import gc

    from py4j.java_gateway import JavaObject

    from vacuum import runner

    registry, inventory = table_with_an_old_orphan(spark, tmp_path)

    def java_objects() -> int:  # cyclic garbage is still among them until a collection
        return sum(isinstance(o, JavaObject) for o in gc.get_objects())

    monkeypatch.setattr(runner, "COLLECT_EVERY_TABLES", 1)
    gc.collect()
    before = java_objects()
    gc.disable()  # the run's own collection only
    try:
        code, dry = vacuum(registry, inventory, "--dry-run")
        left = java_objects() - before
    finally:
        gc.enable()

    assert code == 0 and dry["tables"][0]["planned_files"] == 1, dry
    # collected after the table: a few dozen, made after the collection (the report, the history
    # row); without the collection one table's run leaves about 1,500 (1,513 measured with
    # COLLECT_EVERY_TABLES at a million)
    assert left < 100, left


@pytest.mark.slow
def test_a_slice_of_only_needed_files_skips_deltas_dry_run_and_an_unneeded_object_brings_it_back(
    spark, tmp_path
):
    """When every object of a table's slice is a file a version inside the retention window
    needs (live files, tombstones inside it, their deletion vectors' files), Delta's answer is
    known to be empty and its dry run is not asked; a removed file past the retention, or any
    object outside the table's files, whatever its age, makes the run ask Delta as before."""
    root = tmp_path / "lake" / "events"
    uri = f"file://{root}"
    spark.sql(
        f"""CREATE TABLE delta.`{uri}` (id BIGINT, day STRING) USING delta PARTITIONED BY (day)
        TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"""
    )
    rows = spark.createDataFrame([(i, "a" if i % 2 else "b") for i in range(40)], "id bigint, day string")
    rows.write.format("delta").mode("append").save(uri)
    rows.write.format("delta").mode("append").save(uri)
    spark.sql(f"DELETE FROM delta.`{uri}` WHERE id % 3 = 0")  # deletion vectors' files
    rows.where("day = 'b'").write.format("delta").mode("overwrite").option("replaceWhere", "day = 'b'").save(
        uri
    )
    touch(root / "day=a" / "_SUCCESS")  # hidden: never in the slice
    referenced = referenced_files(spark, uri)
    removed = visible_files(root) - referenced
    assert removed and any(Path(p).name.startswith("deletion_vector_") for p in referenced)
    inventory = f"file://{tmp_path}/inventory"
    write_local_inventory(spark, tmp_path / "lake", inventory)
    registry = write_registry(tmp_path / "tables.yaml", events=root)

    # inside the 7-day retention every removed file is still needed: nothing for Delta to name
    code, result = vacuum(registry, inventory, "--dry-run")
    [run] = result["tables"]
    assert code == 0 and run["status"] == "ok", run["reason"]
    assert run["delta_plan_skipped"] and run["planned_files"] == 0 and run["partitions"] == []
    assert run["coverage"] == 1.0
    # the history keeps the reason: a planned 0 Delta was not asked for is told from one it answered
    [row] = spark.read.format("delta").load(f"file://{tmp_path}/vacuum_runs").collect()
    assert row["delta_plan_skipped"] == run["delta_plan_skipped"] and row["planned_files"] == 0
    before = files_under(root)
    code, result = vacuum(registry, inventory)
    assert code == 0 and result["tables"][0]["delta_plan_skipped"]
    assert result["tables"][0]["deleted_files"] == 0 and files_under(root) == before

    # past a retention of 0 hours the removed files are not needed: Delta is asked, and names them
    code, result = vacuum(registry, inventory, "--dry-run", "--retain-hours", "0", "--allow-unsafe-retention")
    [run] = result["tables"]
    assert code == 0 and run["status"] == "ok", run["reason"]
    assert run["delta_plan_skipped"] is None and run["planned_files"] == len(removed)

    # an object that is no file of the table's, however young, makes the run ask Delta too (which
    # names nothing inside the retention)
    touch(root / "day=a" / "fresh-orphan.parquet")
    write_local_inventory(spark, tmp_path / "lake", inventory)
    code, result = vacuum(registry, inventory, "--dry-run")
    [run] = result["tables"]
    assert code == 0 and run["status"] == "ok", run["reason"]
    assert run["delta_plan_skipped"] is None and run["planned_files"] == 0


@pytest.mark.slow
@pytest.mark.line_sensitive  # Delta's comparison of its log's paths with the inventory's
def test_partition_values_escaped_in_the_log_still_skip_deltas_dry_run_and_delta_agrees(spark, tmp_path):
    """A partition value with a space, a colon or a percent sign leaves ``%20`` and ``%25`` in
    the log's paths: Spark's ``hour=2024-01-01%2000%253A00%253A00/...``, delta-rs's
    ``hour=2024-01-01%252000%253A00%253A00/...`` (it escapes the space in the directory's name
    too). Decoded and encoded again they are the same string, so a slice of only needed files
    still skips Delta's dry run. Past the retention Delta is asked and names exactly the removed
    files, no live one: its comparison of those paths is the tool's."""
    import json

    import pyarrow as pa
    from deltalake import write_deltalake

    hours = ["2024-01-01 00:00:00", "2024-01-01 01:00:00", "50% off"]
    spark_root, rs_root = tmp_path / "lake" / "spark_written", tmp_path / "lake" / "rs_written"
    rows = spark.createDataFrame([(i, hours[i % 3]) for i in range(30)], "id bigint, hour string")
    for mode in ("error", "overwrite"):
        rows.write.format("delta").mode(mode).partitionBy("hour").save(f"file://{spark_root}")
        write_deltalake(
            str(rs_root),
            pa.table({"id": list(range(30)), "hour": [hours[i % 3] for i in range(30)]}),
            partition_by=["hour"],
            mode=mode,
        )
    removed = {}
    for root, escapes in ((spark_root, ("%20", "%253A", "%2525")), (rs_root, ("%2520", "%253A", "%2525"))):
        logged = {
            json.loads(line)["add"]["path"]
            for commit in (root / "_delta_log").glob("*.json")
            for line in commit.read_text().splitlines()
            if '"add"' in line
        }
        assert all(any(escape in p for p in logged) for escape in escapes), logged
        removed[root.name] = {
            str(Path(p).relative_to(root))
            for p in visible_files(root) - referenced_files(spark, f"file://{root}")
        }
        assert removed[root.name], root
    inventory = f"file://{tmp_path}/inventory"
    write_local_inventory(spark, tmp_path / "lake", inventory)
    registry = write_registry(tmp_path / "tables.yaml", spark_written=spark_root, rs_written=rs_root)

    code, result = vacuum(registry, inventory, "--dry-run")
    assert code == 0 and len(result["tables"]) == 2
    for run in result["tables"]:
        assert run["status"] == "ok", (run["name"], run["reason"])
        assert run["delta_plan_skipped"] and run["planned_files"] == 0 and run["coverage"] == 1.0, run

    candidates = tmp_path / "candidates.parquet"
    code, result = vacuum(
        registry,
        inventory,
        "--dry-run",
        "--retain-hours",
        "0",
        "--allow-unsafe-retention",
        "--candidates",
        str(candidates),
    )
    assert code == 0
    named = pq.read_table(candidates).to_pylist()
    for run in result["tables"]:
        assert run["status"] == "ok", (run["name"], run["reason"])
        assert run["delta_plan_skipped"] is None and run["planned_files"] == len(removed[run["name"]]), run
        assert {
            c["path"].split(f"/{run['name']}/", 1)[1] for c in named if c["table"] == run["name"]
        } == removed[run["name"]]


@pytest.mark.slow
def test_a_needed_file_logged_in_another_form_than_delta_compares_keeps_deltas_dry_run(spark, tmp_path):
    """A live file whose path in the log is escaped (``cop%79.parquet`` for ``copy.parquet``) is
    needed to the tool's decoding, but another string to Delta's comparison, which names it: the
    run must ask Delta, and its check refuses the table, whatever else the slice holds."""
    import json
    import shutil

    root = tmp_path / "lake" / "events"
    uri = f"file://{root}"
    spark.range(10).coalesce(1).write.format("delta").save(uri)
    [data] = [p for p in root.iterdir() if p.suffix == ".parquet"]
    shutil.copy(data, root / "copy.parquet")
    age(root / "copy.parquet", days=30)
    add = {
        "add": {
            "path": "cop%79.parquet",
            "partitionValues": {},
            "size": data.stat().st_size,
            "modificationTime": int(time.time() * 1000),
            "dataChange": True,
        }
    }
    (root / "_delta_log" / f"{1:020d}.json").write_text(
        "\n".join(json.dumps(a) for a in [{"commitInfo": {"operation": "WRITE"}}, add]) + "\n"
    )
    inventory = f"file://{tmp_path}/inventory"
    write_local_inventory(spark, tmp_path / "lake", inventory)
    registry = write_registry(tmp_path / "tables.yaml", events=root)

    code, result = vacuum(registry, inventory, "--dry-run")
    [run] = result["tables"]
    assert code != 0 and run["status"] == "refused" and run["delta_plan_skipped"] is None
    assert "live" in run["reason"] and "copy.parquet" in run["reason"]


@pytest.mark.slow
def test_a_deletion_vector_deltas_vacuum_fails_on_refuses_the_table(spark, tmp_path):
    """A live file's ``u`` vector whose value is shorter than its file's UUID names no file: Delta
    fails on it ("Input should be 5 character aligned"), and the run refuses the table saying why,
    rather than judge its every object needed, skip Delta's dry run and report it vacuumed."""
    import json

    root = tmp_path / "lake" / "events"
    uri = f"file://{root}"
    spark.sql(
        f"CREATE TABLE delta.`{uri}` (id BIGINT) USING delta "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    spark.range(10).coalesce(1).write.format("delta").mode("append").save(uri)
    [data] = [p for p in root.iterdir() if p.suffix == ".parquet"]
    now = int(time.time() * 1000)
    file = {"path": data.name, "partitionValues": {}, "size": data.stat().st_size, "dataChange": True}
    vector = {"storageType": "u", "pathOrInlineDv": "abc", "offset": 1, "sizeInBytes": 34, "cardinality": 1}
    actions = [
        {"commitInfo": {"operation": "DELETE"}},
        {"remove": {**file, "deletionTimestamp": now}},
        {"add": {**file, "modificationTime": now, "deletionVector": vector}},
    ]
    (root / "_delta_log" / f"{2:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    inventory = f"file://{tmp_path}/inventory"
    write_local_inventory(spark, tmp_path / "lake", inventory)
    registry = write_registry(tmp_path / "tables.yaml", events=root)

    code, result = vacuum(registry, inventory, "--dry-run")
    [run] = result["tables"]
    assert code != 0 and run["status"] == "refused" and run["delta_plan_skipped"] is None, run
    assert "1 of the files and tombstones" in run["reason"], run["reason"]
    assert "deletion vector Delta's VACUUM fails on" in run["reason"]
    assert str(root) in run["reason"]
