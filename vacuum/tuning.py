"""Each table's own session, sized to the table: its Delta snapshot's partitions, its shuffles and
whether adaptive execution runs.

Every table runs on its own ``SparkSession.newSession()`` (same SparkContext, own SQL conf and
temporary views), made the active session of the thread that runs it: Delta needs an active
session on the calling JVM thread (for example to read a checkpoint another writer made), and a
table's settings must not be seen by another table running at the same time.
"""

from __future__ import annotations

import contextlib
import logging

from py4j.protocol import Py4JError
from pyspark.sql import DataFrame, SparkSession

from core.errors import spark_error_summary
from core.paths import StorageLocation
from core.session import INTERPRETED, INTERPRETED_UP_TO_OBJECTS
from core.tables import SNAPSHOT_PARTITIONS, snapshot_partitions
from vacuum.snapshot import SHUFFLE_PARTITIONS, shuffle_partitions

log = logging.getLogger("inventory_vacuum")

# where size_shuffles keeps the table session's own settings, for unsize_shuffles
_CONFIGURED_SHUFFLES = "inventory-vacuum.configuredShufflePartitions"
_CONFIGURED_ADAPTIVE = "inventory-vacuum.configuredAdaptive"
_CONFIGURED_BROADCAST = "inventory-vacuum.configuredBroadcast"
_CONFIGURED_CONSTRAINTS = "inventory-vacuum.configuredConstraintPropagation"
_ADAPTIVE = "spark.sql.adaptive.enabled"
_BROADCAST = "spark.sql.autoBroadcastJoinThreshold"
CONSTRAINT_PROPAGATION = "spark.sql.constraintPropagation.enabled"
# what a plan of one wave of tasks runs without, and what a bigger one gets back
_ONE_WAVE = (
    (_ADAPTIVE, _CONFIGURED_ADAPTIVE, "false"),
    (_BROADCAST, _CONFIGURED_BROADCAST, "-1"),
    (CONSTRAINT_PROPAGATION, _CONFIGURED_CONSTRAINTS, "false"),
)
# how big Spark lets a join's input of one partition be before it shuffles it into the session's
# partitions anyway: an input of unknown size (rows of an RDD, as Delta's files are) counts as very
# big. A plan of one partition keeps its inputs in one (in_one_partition)
_SINGLE_PARTITION_BYTES = "spark.sql.maxSinglePartitionBytes"
_ONE_PARTITION_PLAN = "inventory-vacuum.onePartitionPlan"
_CONFIGURED_SINGLE_PARTITION_BYTES = "inventory-vacuum.configuredMaxSinglePartitionBytes"
_ANY_SIZE = str(2**63 - 1)
# What Spark takes an input of unknown size to be (rows of an RDD: Delta's files, a checkpoint's
# rows): 8 EiB by default. A plan's size estimates grow from it as its rows widen (an aggregate's
# rows wider than its input's, as the slice's counts group the snapshot's exploded paths) and
# through joins (the product of their inputs' sizes), past the largest 64-bit number, which no
# setting of _SINGLE_PARTITION_BYTES can exceed: Spark then shuffles a join's inputs of one
# partition each into one partition again, a query stage and a task per input. A plan of one
# partition counts such an input as 1 GiB instead, far enough below that a small table's joins
# stay below it. Only the planner's estimates change: a plan of one wave of tasks broadcasts
# nothing by size (_ONE_WAVE), and a shuffle moves rows, never changes them.
_DEFAULT_SIZE = "spark.sql.defaultSizeInBytes"
_CONFIGURED_DEFAULT_SIZE = "inventory-vacuum.configuredDefaultSizeInBytes"
_UNKNOWN_SIZE_OF_ONE_PARTITION = str(2**30)
# what a plan of one partition runs with, and where the session's own value is kept
_ONE_PARTITION = (
    (_SINGLE_PARTITION_BYTES, _CONFIGURED_SINGLE_PARTITION_BYTES, _ANY_SIZE),
    (_DEFAULT_SIZE, _CONFIGURED_DEFAULT_SIZE, _UNKNOWN_SIZE_OF_ONE_PARTITION),
)


def activate(session: SparkSession) -> None:
    """Make ``session`` the active SparkSession of the calling thread, in Python and in the JVM.

    PySpark pins each Python thread to its own JVM thread; Delta reads the JVM thread's active
    session (for example while it loads a checkpoint), and a new thread has none.
    """
    jvm = session._jvm
    assert jvm is not None, "needs a classic (JVM-backed) SparkSession, not Spark Connect"
    for name in ("org.apache.spark.sql.classic.SparkSession", "org.apache.spark.sql.SparkSession"):
        try:
            getattr(jvm, name).setActiveSession(session._jsparkSession)
            break
        except Exception:  # Spark 3.5 has no classic package
            continue
    SparkSession._activeSession = session


def broadcast_threshold(spark: SparkSession) -> int:
    """The session's own reading of ``spark.sql.autoBroadcastJoinThreshold`` in bytes ("10MB",
    "-1", ...): below 0, it broadcasts nothing it is not asked to by name."""
    return int(spark._jsparkSession.sessionState().conf().autoBroadcastJoinThreshold())  # type: ignore[union-attr]


def interpret_small_plan(spark: SparkSession, objects: int) -> bool:
    """This session is this table's: when the inventory holds at most
    :data:`INTERPRETED_UP_TO_OBJECTS` objects under it, its queries (Delta's snapshot and dry run,
    the gates, the check, the deletes) run on Spark's interpreted evaluation instead of generated
    code. Returns whether they do. (The table of a one-table run reads its snapshot before the
    run's figures tell its size, so its snapshot alone is rebuilt with generated code:
    ``vacuum.runner._start_run_figures``.)

    Spark generates Java source for every operator of a query, and for many of them again in every
    task (the projections of Delta's typed Datasets, of a scan of a Python RDD), before it looks
    the compiled class up in its cache: on a table of 1,000 objects in a warm JVM, two thirds of
    the tasks' CPU samples (Java Flight Recorder) were spent writing and trimming that source, for
    a few rows each. Some code is still generated (Delta's write statistics, typed Datasets'
    deserializers call the generator directly).

    Interpreted evaluation is the path Spark itself falls back to whenever generated code fails
    to compile, and Spark's expression tests check each expression both ways; the factory setting
    is marked internal (for tests) by Spark. So the tool's tests run the suite's tables
    interpreted on the 4.2 and 4.0 lines and with generated code on 3.5, and compare the two ways'
    candidates on one table. Interpretation is slower per row, which a small
    table does not feel. Measured with ``benchmarks/many_tables.py`` (30 tables of 1,000 files,
    ``--parallel 4``, two runs of each alternating): 2.36 and 2.15 s a table with generated code,
    1.86 and 1.94 s interpreted; one table of 10,000 objects took as long either way, and one of
    100,000 took 15% longer interpreted, hence the bound. The bound counts inventory objects, not
    log actions: a small table whose log holds many tombstones rebuilds its snapshot interpreted
    too, only more slowly."""
    if objects > INTERPRETED_UP_TO_OBJECTS:
        return False
    for setting, value in INTERPRETED:
        spark.conf.set(setting, value)
    return True


def session_for(spark: SparkSession, location: StorageLocation, *, sized_by_user: bool) -> SparkSession:
    """A new session, active on the calling thread, with Delta's snapshot sized to ``location``."""
    session = spark.newSession()
    if not sized_by_user:
        parallelism = spark.sparkContext.defaultParallelism
        session.conf.set(SNAPSHOT_PARTITIONS, str(snapshot_partitions(location, parallelism)))
    activate(session)
    return session


def adaptive_off_until_sized(spark: SparkSession) -> None:
    """This session is this table's: its first queries (Delta's snapshot, the inventory figures)
    run without adaptive execution, which would make each of their query stages a Spark job of
    its own, without automatic broadcast joins, each of whose broadcasts is a Spark job of its
    own too, and without the optimiser's constraint propagation; :func:`size_shuffles` turns all
    three back on for a plan of more partitions than the cluster's parallelism. The session's own
    settings are kept for :func:`unsize_shuffles` (once: a second call keeps them).

    A join's strategy changes how Spark computes it, never its rows. Measured on 30 tables of
    1,000 files at ``--parallel 4`` (``benchmarks/many_tables.py``, one run each): 2.63 s a table
    and 15 Spark jobs without automatic broadcasts, 3.09 s and 18 jobs with them.

    Constraint propagation derives, for every operator of a plan, the predicates its rows are
    known to satisfy, so that the optimiser can add filters (``isnotnull`` on a join's keys, a
    filter on one side of an equi-join copied to the other) and drop ones already implied.
    Spark's own description of the setting warns that the derivation can be expensive for plans
    with many predicates and aliases, and a table's plans have many (the classification's
    reasons, the check's and the counts' conditions, Delta's snapshot), while the rows of a plan
    of one wave are few for the filters to save work on. Without it the optimiser keeps the
    filters the query states, and the rows are the same (a test plans a small table both ways).
    Measured with ``benchmarks/many_tables.py`` on tables of 1,000 files only (``--parallel 4``,
    ``--no-peers``, runs in turn): on 24 tables, 2.31 and 2.33 s a table with it, 2.14 and 2.13 s
    without; on 100 tables, 1.70 and 1.79 s with it against 1.73 and 1.71 s without (ABBA), no
    difference past the noise. Why the gain fades over a longer run was not measured (a likely
    cause: the JVM's compiled code makes the derivation cheap once warm)."""
    _set_keeping_own(spark, _ONE_WAVE)


def _set_keeping_own(spark: SparkSession, settings: tuple[tuple[str, str, str], ...]) -> None:
    """Set each ``(setting, kept, value)``, keeping the session's own value under ``kept`` the
    first time (:func:`unsize_shuffles` restores it)."""
    for setting, kept, value in settings:
        if spark.conf.get(kept, None) is None:
            # without a default: Spark's own when unset
            spark.conf.set(kept, str(spark.conf.get(setting)))
        spark.conf.set(setting, value)


def aggregate_in_one_job(spark: SparkSession) -> None:
    """This session is the run's figures' (:func:`vacuum.runner._read_run_figures`): each of
    its queries ends in a few rows (at most :data:`~vacuum.context.TABLES_PER_FIGURES_JOB` tables'
    figures, or a count of rows read into Spark's cache), so one shuffle
    partition holds what its aggregations gather, each task having aggregated its own rows first.
    It runs without adaptive execution, which makes each query stage a Spark job of its own,
    without automatic broadcasts and without constraint propagation (see
    :func:`adaptive_off_until_sized`): a query is one Spark job,
    and one more for each broadcast asked for by name. The scans of the inventory keep their own
    parallelism, a task per split of its files. A join's or an aggregation's strategy changes how
    Spark computes it, never its rows."""
    adaptive_off_until_sized(spark)
    spark.conf.set(SHUFFLE_PARTITIONS, "1")


def size_shuffles(spark: SparkSession, objects: int) -> None:
    """This session is this table's: the plan's shuffles (ours and Delta's dry run) sized to its
    objects, until :func:`unsize_shuffles`. A setting that is not a number (a platform's
    ``auto``) is left as it is.

    A plan whose shuffles fit in one wave of tasks (no more partitions than the cluster's
    parallelism) also runs without adaptive execution: AQE runs every query stage as a Spark job
    of its own, so a small table's plan took 42 jobs with it and 20 without (the same plan, and the
    same answers), and one wave has nothing for AQE to coalesce. Its skew splits and runtime
    join choices are lost with it; the plan's joins are on unique paths (no skewed key), and the
    rule was measured on 2 cores only. Nor does it broadcast a join's side unless the planner asks
    for it by name (each broadcast is one more job), nor derive its operators' constraints. A
    bigger plan gets the session's own settings back (see :func:`adaptive_off_until_sized`). A
    plan of one partition also keeps an input read in one partition (:func:`in_one_partition`) in
    one, whatever size Spark estimates for it up to the largest 64-bit number, and counts an input
    of unknown size as 1 GiB (:data:`_UNKNOWN_SIZE_OF_ONE_PARTITION`), so that its estimates stay
    below that."""
    try:
        configured = int(spark.conf.get(SHUFFLE_PARTITIONS, "200"))  # type: ignore[arg-type]
    except ValueError:
        partitions = None
    else:
        spark.conf.set(_CONFIGURED_SHUFFLES, str(configured))
        partitions = shuffle_partitions(objects, configured)
        spark.conf.set(SHUFFLE_PARTITIONS, str(partitions))
    # one partition because the table is small, not because the job's setting is one
    one_partition = partitions == 1 and shuffle_partitions(objects, objects) == 1
    spark.conf.set(_ONE_PARTITION_PLAN, str(one_partition).lower())
    if one_partition:
        _set_keeping_own(spark, _ONE_PARTITION)
    if partitions is not None and partitions <= spark.sparkContext.defaultParallelism:
        adaptive_off_until_sized(spark)
    else:
        for setting, kept, _ in _ONE_WAVE:
            own = spark.conf.get(kept, None)
            if own is not None:
                spark.conf.set(setting, own)


def in_one_partition(spark: SparkSession, frame: DataFrame) -> DataFrame:
    """``frame`` in one partition when :func:`size_shuffles` sized this table's session
    (``spark``) to one shuffle partition for a table of at most 50,000 objects, else ``frame`` as
    it is (a bigger table, or a session never sized: list and lite modes).

    A join or an aggregation of inputs that are each one partition already needs no shuffle:
    Spark plans it in the stage that reads them. A small table's plan shuffles every input into
    one partition anyway, a query stage (and a Spark task, its plan serialised) per input and
    join; read in one partition from the start, and with inputs of unknown size counted small
    (:data:`_UNKNOWN_SIZE_OF_ONE_PARTITION`), they need none: on Spark 4.2 the check of Delta's
    candidates runs one query stage, and the classification with its counts two (one of them the
    checkpoint of the snapshot's files), where it ran five. Coalescing moves rows between
    partitions only, never changes them."""
    if spark.conf.get(_ONE_PARTITION_PLAN, None) == "true":
        return frame.coalesce(1)
    return frame


# the frame a DataFrame of read_from_cache reads, the one to unpersist (release)
_CACHED_FRAME = "_inventory_vacuum_cached_frame"


def read_from_cache(frame: DataFrame) -> DataFrame:
    """``frame``, just persisted, as a DataFrame whose plan is its cache alone (Spark's
    ``InMemoryRelation``, under ``frame``'s own columns), or ``frame`` itself when Spark's cache
    manager holds no cache of it. The caller lets go of it with :func:`release`, not
    ``unpersist``, and reads it only before.

    Every DataFrame built on a frame is analysed over the frame's whole plan again, once per
    operation (a ``select``, a ``join``, Delta's own queries over a view of it): a table's frames
    are built on a slice of the inventory read several times over, so the analyser ran its rules
    over the same big plans hundreds of times a table. Spark itself puts the cache's relation in
    place of a cached frame's plan before it runs a query (``CacheManager.useCachedData``), so a
    query reads the same rows either way: from the cache, or, should the cache's blocks be gone,
    from the frame's plan, computed again, as Spark computes a lost cache. Measured with
    ``benchmarks/many_tables.py``."""
    jdf = frame._jdf
    jvm = frame.sparkSession._jvm
    assert jvm is not None, "needs a classic (JVM-backed) SparkSession, not Spark Connect"
    try:
        session = jdf.sparkSession()
        cached = session.sharedState().cacheManager().lookupCachedData(jdf)
        if cached.isEmpty():
            return frame
        cache = cached.get().cachedRepresentation()
        # under the frame's own columns, and without the order the cached plan's rows come in: a
        # copy of the relation made for a join of it with itself (Spark's DeduplicateRelations)
        # keeps that order's columns, not the copy's, and Spark fails on it (3.5 and 4.2); without
        # it, Spark sorts where a later operator needs an order
        relation = cache.copy(
            jdf.queryExecution().analyzed().output(), cache.cacheBuilder(), cache.outputOrdering().take(0)
        )
        getattr(relation, "statsOfPlanToCache_$eq")(cache.statsOfPlanToCache())
        # Spark 4's Dataset is org.apache.spark.sql.classic.Dataset, Spark 3.5's org.apache.spark.sql.Dataset
        read = DataFrame(getattr(jvm, jdf.getClass().getName()).ofRows(session, relation), frame.sparkSession)
    except (Py4JError, TypeError) as error:  # a Spark build without these internals: the plan as it is
        log.info("a cached frame is read through its own plan: %s", spark_error_summary(error))
        return frame
    except BaseException:  # an interrupt: the caller has no frame to let go of
        with contextlib.suppress(Exception):  # the interrupt is what the run reports
            frame.unpersist()
        raise
    setattr(read, _CACHED_FRAME, frame)
    return read


def is_read_from_cache(frame: DataFrame) -> bool:
    """``frame`` is a DataFrame of :func:`read_from_cache`: its rows are held already."""
    return hasattr(frame, _CACHED_FRAME)


def release(frame: DataFrame) -> None:
    """Unpersist ``frame``; for a DataFrame of :func:`read_from_cache`, the frame it reads
    (unpersisting the DataFrame itself would find no cache of its plan, and keep the frame's); for
    one of :func:`checkpointed_in_one_partition`, the rows of its checkpoint."""
    rows = getattr(frame, _CHECKPOINTED_ROWS, None)
    if rows is not None:
        rows.unpersist(False)
        return
    getattr(frame, _CACHED_FRAME, frame).unpersist()


# the JVM RDD a DataFrame of checkpointed_in_one_partition reads, the one release unpersists
_CHECKPOINTED_ROWS = "_inventory_vacuum_checkpointed_rows"


def checkpointed_in_one_partition(spark: SparkSession, frame: DataFrame) -> DataFrame:
    """:func:`in_one_partition`'s ``frame`` as a local checkpoint when that is one partition (the
    caller lets go of it with :func:`release`), else ``frame`` as it is. The plan is one partition
    when the inventory holds few objects under the table (:func:`size_shuffles`); the frame's own
    rows may be more (a log of many tombstones, a shallow clone's files outside the table).

    A checkpoint's rows are computed by the first query that reads them and kept as a cache's are
    (Spark's block manager, in memory and spilled to disk); later queries read them as rows with no
    plan behind them. A cache (:func:`read_from_cache`) keeps the plan: every task that reads it
    carries, serialised, the whole lineage of its rows, which for the snapshot's files is Delta's
    state reconstruction and its encoders, and the driver serialises that for every stage. On a
    local table of 100 rows in 10 partitions, the RDD of a one-column query of two of the files'
    columns serialised to 324 KB over a cache of them and to 13 KB over an eager checkpoint. In
    a run of 24 small tables at ``--parallel 4`` on the cached code (``benchmarks/many_tables.py``,
    Java Flight Recorder), 15% of the driver JVM's CPU samples were in Java serialisation, 39% of
    those inside Delta's own VACUUM; the gain measured is small (docs/performance.md).

    Unlike a cache's, a checkpoint's rows are not computed again when its block is lost (an
    executor gone): a query that reads them then fails (Spark's "Checkpoint block not found"),
    never reads fewer rows, and the table fails with it, with nothing deleted on its answer.
    Any other plan's frame is left as it is, neither checkpointed nor cached: a table of many
    objects would hold its rows twice, beside what Delta and the slice already hold, and a cache
    did not pay for itself there (real runs of vacuum_at_scale's 100,000-file table, two processes
    a way, in turn, three runs in each, the first of each process left out: 11.85, 9.99, 11.86 and
    11.17 s with the snapshot's files cached, 10.92, 10.34, 10.94 and 9.90 s without)."""
    placed = in_one_partition(spark, frame)
    if placed is frame:
        return frame
    checkpointed = placed.localCheckpoint(eager=False)
    try:
        # the rows a release lets go of: the checkpoint's own RDD, its plan's one node (LogicalRDD)
        rows = checkpointed._jdf.queryExecution().logical().rdd()
    except Py4JError as error:
        # a Spark build without these internals: cached, as a frame is (the RDD marked for the
        # checkpoint, never computed, is left to Spark's cleaner)
        log.info("the snapshot's files are cached, not checkpointed: %s", spark_error_summary(error))
        return read_from_cache(placed.persist())
    setattr(checkpointed, _CHECKPOINTED_ROWS, rows)
    return checkpointed


def unsize_shuffles(spark: SparkSession) -> None:
    """Before deleting: the session's own shuffle and adaptive settings again. Delta's parallel
    delete takes its task count from it (unless
    ``spark.databricks.delta.vacuum.parallelDelete.parallelism`` is set), and so do the existence
    checks and the ledger's joins; a delete's work is the garbage's requests, which a table's
    object count does not bound (one task for a table's every delete)."""
    for setting, kept in (
        (SHUFFLE_PARTITIONS, _CONFIGURED_SHUFFLES),
        *((s, k) for s, k, _ in (*_ONE_PARTITION, *_ONE_WAVE)),
    ):
        configured = spark.conf.get(kept, None)
        if configured is not None:
            spark.conf.set(setting, configured)
    spark.conf.unset(_ONE_PARTITION_PLAN)
