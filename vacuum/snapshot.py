"""What the vacuum needs to know about a Delta table, read from Delta itself.

One fact has no public API in any Delta release: the snapshot's live files with their
``modificationTime`` (the safety cross-checks need both, at the version the plan uses), and which
commit file the snapshot ends with. So the snapshot is read from Delta's JVM classes
(``DeltaLog.forTableWithSnapshot``, the objects Delta's own VACUUM uses), and the other facts come
from that same snapshot: its table location, its metadata's partition columns and properties (the
retention, UniForm); Spark's own interval parser reads the retention as Delta does.
:func:`load_table_state` and :func:`latest_commit` are the only places that read those classes; on a
Delta build that lacks them (a vendor fork) the table is refused with a message that says so, never
vacuumed blind.

``DeltaTable.detail()`` gives the same location, partitioning and properties through a public API,
but for a later snapshot than the files' (it updates the log again) and at the cost of a Spark job
that sums the table's sizes: about a second a table, which a nightly run over hundreds of small
tables pays hundreds of times.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from decimal import Decimal

from pyspark import SparkContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from core.errors import VacuumRefused, spark_error_summary
from core.paths import StorageLocation
from vacuum.protocol import COORDINATED_COMMITS_PROPERTY, check_vacuumable

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
# about 13 MB of inventory rows per shuffle partition: a partition per 250k objects (AQE's 64 MB
# advisory size) planned a 100k-file table (90,013 inventory objects) in one partition, its joins
# in one task on one of 2 cores, and its dry run took longer (medians of 3: 9.42 s, against 8.48 s
# at 50k, and 8.46 s with the snapshot's sizing below: benchmarks/results/plan_sizing.md). Its
# real run was no faster in one partition either (this constant at 200,000; the inputs read in one
# partition, most joins and aggregations without a shuffle, see vacuum.tuning.in_one_partition):
# vacuum_at_scale's table, two processes a setting, in turn, three runs in each, the first of each
# process left out: 11.45, 10.99, 11.62 and 11.49 s, against 12.16, 10.51, 11.95 and 10.33 s at 50k
_OBJECTS_PER_SHUFFLE_PARTITION = 50_000


@dataclass(frozen=True)
class TableState:
    """One snapshot of a Delta table, as VACUUM would see it."""

    uri: str
    qualified_location: str  # what Delta prefixes inventory paths with: s3a://b/t, file:/tmp/t
    version: int
    partition_columns: tuple[str, ...]
    retention_millis: int  # delta.deletedFileRetentionDuration
    iceberg_enabled: bool  # UniForm: the metadata/ folder belongs to Iceberg
    # the snapshot's newest commit file as Delta listed it (see latest_commit); None: unknown
    newest_commit: str | None = None

    @property
    def base(self) -> str:
        """The qualified location with a trailing slash: every path of the table starts with it."""
        return self.qualified_location.rstrip("/") + "/"

    @property
    def bucket(self) -> str:
        """The bucket of the table (``_local`` for a local table), as the inventory names it."""
        from core.paths import StorageLocation

        return StorageLocation.parse(self.qualified_location, what="table location").bucket

    @property
    def key_prefix(self) -> str:
        """The key of the table's root with a trailing slash, as the inventory's ``key`` starts."""
        from core.paths import StorageLocation

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
    """The newest snapshot of the table at ``uri`` and a DataFrame of its files.

    The files frame holds the snapshot's live files (Delta's ``AddFile``) and its tombstones
    (``RemoveFile``, which an older version inside the retention window may still read):
    ``path`` (relative and URL-encoded, or absolute), ``size``, ``modificationTime`` (null for a
    tombstone), ``deletionTimestamp`` (epoch milliseconds; null for a live file), ``tombstone``,
    ``deletionVectorPath`` (the file that holds the file's deletion vector, in ``path``'s form:
    see :func:`deletion_vector_path`; null without one) and ``deletionVectorVacuumFails`` (a
    vector Delta's VACUUM fails on: :func:`deletion_vector_vacuum_fails`). The location, the
    partition columns, the retention and the UniForm flag are the same snapshot's, so every fact
    belongs to one version (Delta's own VACUUM reads a snapshot later still, and applies its own
    retention check).
    """
    snapshot = _newest_snapshot(spark, uri)
    _check_vacuumable(spark, snapshot)
    live = DataFrame(snapshot.allFiles().toDF(), spark).select(
        "path",
        "size",
        "modificationTime",
        F.lit(None).cast("long").alias("deletionTimestamp"),
        F.lit(False).alias("tombstone"),
        deletion_vector_path().alias("deletionVectorPath"),
        deletion_vector_vacuum_fails().alias("deletionVectorVacuumFails"),
    )
    tombstones = DataFrame(snapshot.tombstones().toDF(), spark).select(
        "path",
        "size",
        F.lit(None).cast("long").alias("modificationTime"),
        F.coalesce(F.col("deletionTimestamp"), F.lit(0).cast("long")).alias("deletionTimestamp"),
        F.lit(True).alias("tombstone"),
        deletion_vector_path().alias("deletionVectorPath"),
        deletion_vector_vacuum_fails().alias("deletionVectorVacuumFails"),
    )
    files = live.unionByName(tombstones)
    metadata = snapshot.metadata()
    state = TableState(
        uri=uri,
        qualified_location=str(snapshot.deltaLog().dataPath().toString()),
        version=int(snapshot.version()),
        partition_columns=tuple(_scala_strings(metadata.partitionColumns())),
        retention_millis=retention_millis(spark, _property(metadata, RETENTION_PROPERTY, DEFAULT_RETENTION)),
        iceberg_enabled="iceberg" in _listed(_property(metadata, UNIFORM_PROPERTY, "")),
        newest_commit=_fingerprint(snapshot),
    )
    return state, files


def _check_vacuumable(spark: SparkSession, snapshot) -> None:  # type: ignore[no-untyped-def]
    """Refuse a table this Delta must not vacuum (:mod:`vacuum.protocol`), then ask Delta's own
    write-protocol check, which a vacuum makes first (``vacuumProtocolCheck``)."""
    from core.session import jvm_delta_version

    delta_version = jvm_delta_version(spark)
    protocol = snapshot.protocol()
    try:
        supported = frozenset(
            str(
                spark._jvm.org.apache.spark.sql.delta.TableFeature.allSupportedFeaturesMap()  # type: ignore[union-attr]
                .keySet()
                .mkString("\n")
            ).split("\n")
        )
    except Exception:  # a Delta build without the map: Delta's own check below still runs
        supported = None
    metadata = snapshot.metadata()
    check_vacuumable(
        str(protocol.json()),
        {COORDINATED_COMMITS_PROPERTY: _property(metadata, COORDINATED_COMMITS_PROPERTY, "")},
        delta_version,
        supported,
    )
    try:
        snapshot.deltaLog().protocolWrite(protocol)
    except Exception as error:
        raise VacuumRefused(
            f"Delta {delta_version} may not write this table: {spark_error_summary(error)}"
        ) from None


def _scala_strings(sequence) -> list[str]:  # type: ignore[no-untyped-def]  # a py4j Scala Seq[String]
    return [str(sequence.apply(index)) for index in range(int(sequence.size()))]


def _property(metadata, name: str, default: str) -> str:  # type: ignore[no-untyped-def]  # a py4j Metadata
    """A table property as the snapshot's metadata holds it (``configuration``), ``default``
    when the table does not set it. A value that is set is passed on as it is, even an empty one
    (another writer's log may hold one): the retention parser refuses it, as Delta would fail."""
    value = metadata.configuration().get(name)
    if not value.isDefined():
        return default
    text = value.get()
    return "" if text is None else str(text)


RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"
DEFAULT_RETENTION = "interval 1 week"  # Delta's default for the property
UNIFORM_PROPERTY = "delta.universalFormat.enabledFormats"
_LONG_MAX = 2**63 - 1  # Delta counts the retention in a Java long of microseconds


def _listed(value: str) -> set[str]:
    return {part.strip().lower() for part in value.split(",") if part.strip()}


def retention_millis(spark: SparkSession, value: str) -> int:
    """``delta.deletedFileRetentionDuration`` in milliseconds, parsed as Delta parses it.

    Delta prefixes ``interval `` when missing and reads the text with Spark's interval parser; a
    month or a year has no fixed length and Delta rejects it. The same parser runs here, through a
    SQL cast, and the interval's fields give Delta's figure (days of 24 hours plus the time part),
    whatever the session's time zone. A negative retention is refused too, and so is one past
    Delta's 64-bit count of microseconds: Delta's figure wraps around there (``interval 213503983
    days`` is about 16 hours to Delta), so its own VACUUM would keep far less than the text says.
    """
    text = value.strip().lower()
    if not text.startswith("interval "):
        text = "interval " + text
    micros = PARSED_RETENTIONS.get(text)
    if micros is None:
        micros = _interval_micros(spark, text)
        if micros is not None:
            PARSED_RETENTIONS[text] = micros
    if micros is None or micros < 0:
        raise VacuumRefused(
            f"{RETENTION_PROPERTY} = {value!r} is not a retention Delta can use "
            "(an interval of weeks, days, hours, minutes or seconds)"
        )
    if micros > _LONG_MAX:
        raise VacuumRefused(
            f"{RETENTION_PROPERTY} = {value!r} is past the 2^63 microseconds (about 292,000 years) "
            "Delta can count: Delta's own figure wraps around to a much shorter retention"
        )
    return micros // 1000


# Each retention text Spark's interval parser has read in this process, in microseconds. The
# parse is a Spark job (about 40 ms a table in a run of many), and nearly every table of a run says
# "interval 1 week", Delta's default: the process's one parser gives a text one answer, so a text
# is parsed once. A text it refuses is not kept (its refusal, or an error, comes again from the
# parser each time), and Delta's own VACUUM still reads the table's property itself.
PARSED_RETENTIONS: dict[str, int] = {}


def _interval_micros(spark: SparkSession, text: str) -> int | None:
    """``text`` (``interval ...``) through Spark's interval parser: its length in microseconds
    (days of 24 hours plus the time part), or None for a text the parser refuses or an interval
    of months or years."""
    fields = ("YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND")
    try:
        # a literal column, not a SQL parameter: Spark 4.2 leaves a parameter inside a subquery unbound
        row = (
            spark.range(1)
            .select(F.lit(text).cast("interval").alias("i"))
            .select(*(F.expr(f"extract({f} FROM i)").alias(f) for f in fields))
            .first()
        )
    except Exception:  # ANSI mode: an unparsable interval fails the cast instead of giving null
        row = None
    if row is None or row["DAY"] is None or row["YEAR"] or row["MONTH"]:
        return None
    seconds = row["DAY"] * 86_400 + row["HOUR"] * 3_600 + row["MINUTE"] * 60 + Decimal(row["SECOND"])
    return int(seconds * 1_000_000)


def latest_commit(spark: SparkSession, uri: str) -> str | None:
    """What identifies the table's newest commit, read from its log now (a LIST of
    ``_delta_log/``; no Spark job when nothing was committed since the last read): the version,
    the commit time, and the newest commit file's path, length, modification time and ETag as
    Delta listed them. Two equal fingerprints are the same commits: a commit file of the same
    version rewritten by another writer (two writers without a commit lock) has another length,
    ETag or modification time. None when the snapshot ends at a checkpoint with no commit file
    after it, or the listing gives no file: then nothing is claimed.
    """
    return _fingerprint(_newest_snapshot(spark, uri))


def _fingerprint(snapshot) -> str | None:  # type: ignore[no-untyped-def]  # a py4j Snapshot
    deltas = snapshot.logSegment().deltas()
    if deltas.isEmpty():
        return None
    newest = deltas.last()
    etag = ""
    for getter in ("getEtag", "getETag"):  # S3A's file status has one (Hadoop 3.4: both)
        try:
            etag = str(getattr(newest, getter)() or "")
            break
        except Exception:  # another file system: no ETag; the length and the time still count
            continue
    return (
        f"version={int(snapshot.version())} timestamp={int(snapshot.timestamp())} "
        f"file={newest.getPath().toString()} length={int(newest.getLen())} "
        f"modified={int(newest.getModificationTime())} etag={etag}"
    )


# Tables whose snapshot Delta will not load by path for a reason of the table's own: a refusal,
# named, not a failure. Matched on the JVM error's messages (its "at" frames left out) ...
_REFUSED_WHEN_UNREADABLE = (
    (
        "delta_unsupported_features",
        "this Delta cannot read the table, so it cannot tell which files are live",
    ),
    (
        "delta_invalid_protocol_version",
        "this Delta cannot read the table, so it cannot tell which files are live",
    ),
    ("catalog_managed", "the table is catalog-managed: only its catalog may vacuum it"),
    ("catalog-managed", "the table is catalog-managed: only its catalog may vacuum it"),
    ("catalog-owned", "the table is catalog-owned: only its catalog may vacuum it"),
)
# ... and on where one of its errors was thrown: in Delta's coordinated-commits code (a commit
# coordinator, such as DynamoDB's, whose client is not on this classpath or cannot be reached)
# (org.apache.spark.sql.delta.coordinatedcommits, io.delta.dynamodbcommitcoordinator)
_COORDINATED_COMMITS_CODE = ("coordinatedcommits", "commitcoordinator")
_COORDINATED_COMMITS_REASON = (
    "the table has coordinated commits and its commit coordinator cannot be reached here, so its "
    "newest commits cannot be read"
)


def _refusal_of_unreadable(text: str) -> str | None:
    """The refusal for a snapshot Delta would not load (the JVM error's ``text``), else None."""
    lines = text.splitlines()
    messages = " ".join(line for line in lines if not line.strip().startswith("at ")).lower()
    for marker, reason in _REFUSED_WHEN_UNREADABLE:
        if marker in messages:
            return reason
    # each error of the chain (the first, then every "Caused by:"): where it was thrown
    starts = [0, *(i for i, line in enumerate(lines) if line.startswith("Caused by:"))]
    for start in starts:
        thrown_at = next((line.strip() for line in lines[start + 1 :] if line.strip().startswith("at ")), "")
        where = thrown_at.split("(", 1)[0].lower()
        if any(name in where for name in _COORDINATED_COMMITS_CODE):
            return _COORDINATED_COMMITS_REASON
    return None


def newest_version(spark: SparkSession, uri: str) -> int:
    """The newest version of the Delta table at ``uri``, from its log as Delta's own snapshot has
    it (DESCRIBE HISTORY would say the same with a Spark job of its own)."""
    return int(_newest_snapshot(spark, uri).version())


def _newest_snapshot(spark: SparkSession, uri: str):  # type: ignore[no-untyped-def]  # a py4j object
    jvm = spark._jvm
    assert jvm is not None, "needs a classic (JVM-backed) SparkSession, not Spark Connect"
    try:
        pair = jvm.org.apache.spark.sql.delta.DeltaLog.forTableWithSnapshot(  # type: ignore[attr-defined]
            spark._jsparkSession, uri
        )
    except Exception as error:
        reason = _refusal_of_unreadable(str(error))
        if reason is not None:
            raise VacuumRefused(f"{reason}: {spark_error_summary(error)}") from None
        if "DeltaLog" in str(error) and "does not exist" in str(error):
            raise VacuumRefused(
                "this Delta build has no org.apache.spark.sql.delta.DeltaLog (a vendor build?): "
                "the snapshot's live files, which the safety checks need, cannot be read"
            ) from error
        raise
    snapshot = pair._2()
    if snapshot.version() < 0:
        raise VacuumRefused(f"{uri} is not a Delta table (no _delta_log)")
    return snapshot


# Delta's Base85 alphabet (Z85), which encodes a deletion vector file's UUID in 20 characters
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def deletion_vector_path(column: str = "deletionVector") -> F.Column:
    """The file holding an ``AddFile``'s or ``RemoveFile``'s deletion vector, in the form
    ``AddFile.path`` takes, so :func:`live_relative_path` reads both alike; null when the file has
    no vector or an inline one (``storageType`` ``i``).

    Delta keeps these files for every live file and every tombstone inside the retention window.
    A ``u`` vector's ``pathOrInlineDv`` is a random prefix (a directory, when not empty) followed
    by the file's UUID in 20 Base85 characters: the file is ``<prefix>/deletion_vector_<uuid>.bin``
    relative to the table; a ``p`` vector's is the file's absolute URI.

    The expression is built once per JVM (its py4j gateway, one per Python process) and column:
    it takes some 180 calls into the JVM to build, and every table's snapshot reads it twice (its
    live files and its tombstones). A Column is an immutable expression, and its lambdas'
    variables are bound where each query is analysed, so one may go into any number of queries,
    and twice into one. (On Spark 3.5 its arithmetic keeps the ANSI setting of the session that
    built it, which cannot change this expression's value: its numbers stay below 85^5.)
    """
    return _deletion_vector_path(SparkContext._gateway, column)


@functools.lru_cache(maxsize=8)
def _deletion_vector_path(gateway: object, column: str) -> F.Column:
    kind = F.col(f"{column}.storageType")
    value = F.col(f"{column}.pathOrInlineDv")
    characters = F.split(F.substring(value, -20, 20), "")

    def word(index: F.Column) -> F.Column:  # 5 characters: a 32-bit big-endian word of the UUID
        number = F.aggregate(
            F.slice(characters, index * 5 + 1, 5),
            F.lit(0).cast("long"),
            lambda total, character: total * 85 + F.position(character, F.lit(_Z85)) - 1,
        )
        # its low 32 bits, as Delta keeps them (a canonical encoding never exceeds them)
        return F.lpad(F.lower(F.hex(F.pmod(number, F.lit(1 << 32)))), 8, "0")

    hexits = F.array_join(F.transform(F.sequence(F.lit(0), F.lit(3)), word), "")
    uuid = F.regexp_replace(hexits, r"^(.{8})(.{4})(.{4})(.{4})(.{12})$", "$1-$2-$3-$4-$5")
    name = F.concat(F.lit("deletion_vector_"), uuid, F.lit(".bin"))
    # the prefix is the directory's raw name, where ``path`` is URL-encoded: a ``%`` in it is itself
    prefix = F.replace(value.substr(F.lit(1), F.length(value) - 20), F.lit("%"), F.lit("%25"))
    relative = F.when(prefix == "", name).otherwise(F.concat(prefix, F.lit("/"), name))
    return F.when((kind == "u") & (F.length(value) >= 20), relative).when(kind == "p", value)


def deletion_vector_vacuum_fails(column: str = "deletionVector") -> F.Column:
    """Whether Delta's VACUUM fails on an ``AddFile``'s or ``RemoveFile``'s deletion vector when
    the file is one a version inside the retention window reads: a ``u`` vector whose value does
    not end in 20 characters of Delta's Base85 alphabet (the file's UUID, which it cannot
    decode), an inline vector (``i``: its VACUUM matches only vectors on disk, and fails with a
    ``MatchError`` on another), a storage type it does not know. The tool cannot name such a
    vector's file either. False without a vector and for a ``p`` vector, whose absolute path
    Delta's VACUUM does not read (:func:`deletion_vector_path` does, for the checks). Built once
    per JVM, as :func:`deletion_vector_path` is."""
    return _deletion_vector_vacuum_fails(SparkContext._gateway, column)


@functools.lru_cache(maxsize=8)
def _deletion_vector_vacuum_fails(gateway: object, column: str) -> F.Column:
    kind = F.col(f"{column}.storageType")
    value = F.col(f"{column}.pathOrInlineDv")
    alphabet = "".join("\\" + c if c in "[]\\^-&" else c for c in _Z85)
    vacuumed = ((kind == "u") & value.rlike(f"[{alphabet}]{{20}}\\z")) | (kind == "p")
    return F.col(column).isNotNull() & ~F.coalesce(vacuumed, F.lit(False))


def decoded_relative_path(column: str = "path") -> F.Column:
    """Delta's URL-encoded relative ``AddFile.path`` as the raw key suffix S3 Inventory shows.

    Delta encodes with ``java.net.URI`` (a space is ``%20``, ``+`` stays ``+``); ``url_decode``
    reads ``+`` as a space, so a literal ``+`` is protected first.
    """
    return F.url_decode(F.replace(F.col(column), F.lit("+"), F.lit("%2B")))


# an absolute S3 URI: its authority (a bucket, perhaps with user@ or :port, which S3A ignores) and
# its path; and a local one in Hadoop's forms (file:/p, file:///p, file://localhost/p)
_S3_URI = r"^(?i:s3[an]?)://([^/]*)(.*)$"
_FILE_URI = r"^(?i:file):(?://(?:localhost)?(?=/))?(/.*)$"
# Hadoop's Path (and so every reader) resolves these before it opens a file: a log that records
# ``a/./b``, ``a//b`` or ``a/x/../b`` names the object ``a/b``
_DOT_DOT_PASSES = 16


def live_relative_path(state: TableState, column: str = "path") -> F.Column:
    """An ``AddFile.path`` as the decoded path, relative to the table's root, of the object a
    reader opens: the form Delta's candidates are checked in.

    Writers may record a file inside the table by its absolute URI, under any S3 scheme (``s3://b/t/f``
    for a table Spark reads as ``s3a://b/t``), with an authority S3A reads as the bucket
    (``user@b``, ``b:443``), from the root of the table's bucket (``/t/f``: Hadoop resolves a
    path with no scheme against the table's own file system), or with dot segments and doubled
    slashes that Hadoop resolves: each is the table's file all the same, and the checks must see
    it as live. A file outside the table (a shallow clone's source, a ``..`` above the root) has
    no relative path: null.

    Built once per JVM, table location and column, as :func:`deletion_vector_path` is: a table's
    plan reads it twice (the counts of the slice, the check of Delta's answer), and it takes some
    120 calls into the JVM to build.
    """
    return _live_relative_path(SparkContext._gateway, state.qualified_location, column)


@functools.lru_cache(maxsize=64)
def _live_relative_path(gateway: object, qualified_location: str, column: str) -> F.Column:
    decoded = decoded_relative_path(column)
    absolute = F.col(column).rlike(r"^[A-Za-z][A-Za-z0-9+.-]*:")
    rooted = ~absolute & decoded.startswith("/")  # Hadoop reads it on the table's own bucket
    location = StorageLocation.parse(qualified_location, what="table location")
    root = "/" + (location.key + "/" if location.key else "")
    if location.is_s3:
        host = F.lower(F.regexp_replace(F.regexp_extract(decoded, _S3_URI, 1), r"^.*@|:[0-9]*$", ""))
        uri_path = F.regexp_extract(decoded, _S3_URI, 2)
        same_place = decoded.rlike(_S3_URI) & (host == location.bucket.lower())
    else:
        uri_path = F.regexp_extract(decoded, _FILE_URI, 1)
        same_place = decoded.rlike(_FILE_URI)
    # every form as a path from the root of the table's bucket (or disk), resolved as Hadoop does
    path = _resolved(
        F.when(rooted, decoded).when(~absolute, F.concat(F.lit(root), decoded)).otherwise(uri_path)
    )
    inside = (~absolute | same_place) & path.startswith(root)
    # a ``..`` left over would climb above the bucket's root: no object of the table
    inside = inside & ~path.rlike(r"(^|/)\.\.(/|$)")
    return F.when(inside, F.substring(path, len(root) + 1, 1 << 30))


def _resolved(path: F.Column) -> F.Column:
    """``path`` with doubled slashes collapsed, ``.`` segments dropped and ``x/..`` pairs resolved
    (the regular expressions run only on the rare path that has any of them)."""
    odd = path.contains("//") | path.contains("/.") | path.startswith(".")
    return F.when(odd, _resolved_segments(path)).otherwise(path)


def _resolved_segments(path: F.Column) -> F.Column:
    path = F.regexp_replace(path, "/{2,}", "/")
    path = F.regexp_replace(path, r"(?<=^|/)\.(?:/|$)", "")
    # one pass per level of nesting, _DOT_DOT_PASSES in all: folded over a sequence of the passes,
    # the expression is built in a few calls into the JVM, not some 80 per table as a chain
    return F.aggregate(
        F.sequence(F.lit(1), F.lit(_DOT_DOT_PASSES)),
        path,
        lambda resolved, _: F.regexp_replace(resolved, r"(?<=^|/)(?!\.\.(?:/|$))[^/]+/\.\.(?:/|$)", ""),
    )


def shuffle_partitions(objects: int, configured: int) -> int:
    """Shuffle partitions for one table's plan: a partition per 50k of its inventory objects,
    never more than the session's setting (``configured``). Delta's VACUUM and the checks
    around it join the table's objects; a small table on a setting made for a big one pays a
    task per empty partition in every one of their shuffles."""
    return max(1, min(configured, -(-objects // _OBJECTS_PER_SHUFFLE_PARTITION)))
