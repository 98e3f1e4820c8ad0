"""How ingest lays a bucket's rows out in files: contiguous key ranges, with no sampling pass.

Delta keeps each file's smallest and largest key, and a table's slice of the inventory (its keys
start with the table's path) reads only the files whose range meets the table's. A global sort
(``orderBy``) gives such files, but Spark's range partitioner first runs a sampling job that
reads, normalises and tags the whole delivery once more.

The checking job already counts, in its usage rows, the objects of each owning table and of each
untagged top-level prefix. That is enough to cut the key space into ranges of about
:data:`ROWS_PER_FILE` rows without sampling: a range ends where a table's keys begin, several
small tables share one, and a table too big for one range gets ranges of its own (its rows spread
over them by a hash of the key, so those files hold that table's keys only). Rows then go to
their range's partition, one file each (sorted by key inside only when it is big enough to hold
several Parquet row groups).

The ranges decide only which task writes a row, never whether it is written: a wrong count
costs balance or file skipping, not a row. When a group of untagged keys is too big for one
range (no registry, or keys outside every table), nothing says where to cut it, and the write
sorts globally as before.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from core.registry import TableRegistry
from inventory.usage import CURRENT

# About this many rows a file: about 33 MB of Parquet in the ingest benchmark's delivery, one row
# group, written in the order the rows come
ROWS_PER_FILE = 500_000
# but a smaller delivery is cut into a file per task slot, or one per started this many rows
# where that is fewer
MIN_ROWS_PER_FILE = 100_000
# The files are counted for at most this many, or ``spark.sql.shuffle.partitions`` where that is
# more (a range is a branch of the expression that sends a row to its file; a big table's range
# may add one). Not capped at the setting alone: local mode sets it to 8, and 10M rows made 8 to
# 9 files of over a million rows, sorted inside: its write stage took 13.4 s and 26.5 s in two
# rounds, against 14.3 s and 13.7 s for 20 unsorted files (docs/performance.md)
MAX_FILES = 256
# Files with more rows than this span several Parquet row groups of 128 MB (the benchmark's
# delivery writes about 67 bytes a row in snappy, 30 in zstd: 667 and 302 MB for 10M rows), and
# are sorted by key inside; with the cap, that is a bucket of more than about 512M rows
SORTED_ABOVE_ROWS = 2_000_000


@dataclass(frozen=True)
class KeyGroup:
    """Keys counted together by the checking job: a table's (every key from ``start``, its path and
    ``/``, up to ``end``) or an untagged top-level prefix's (``end`` None: its keys may lie
    anywhere after ``start``)."""

    start: str
    objects: int
    end: str | None = None


@dataclass(frozen=True)
class KeyRange:
    """The keys from ``lower`` up to the next range's ``lower``, written by ``parts`` tasks (more
    than one only for a range that holds one table's keys)."""

    lower: str
    parts: int = 1


def key_ranges(groups: Sequence[KeyGroup], partitions: int) -> list[KeyRange] | None:
    """Ranges of about equal rows, at most ``partitions`` of them (give or take one per big
    table), in key order, the first from the empty key; None when an untagged group is too big
    for one range (the caller sorts globally)."""
    total = sum(group.objects for group in groups)
    if total == 0 or partitions < 1:
        return None
    target = max(1, math.ceil(total / partitions))
    ranges = [KeyRange("")]
    open_rows = 0
    for group in sorted(groups, key=lambda group: group.start):
        if group.objects > target:
            if group.end is None:
                return None
            ranges += [KeyRange(group.start, math.ceil(group.objects / target)), KeyRange(group.end)]
            open_rows = 0
            continue
        if open_rows and open_rows + group.objects > target:
            ranges.append(KeyRange(group.start))
            open_rows = 0
        open_rows += group.objects
    kept: list[KeyRange] = []
    for key_range in ranges:  # a range with the next one's lower bound is empty
        if kept and kept[-1].lower == key_range.lower:
            kept.pop()
        kept.append(key_range)
    return kept


def key_groups(usage: DataFrame, registry: TableRegistry | None, bucket: str) -> list[KeyGroup]:
    """The current objects of each owning table and untagged top-level prefix, from the usage rows
    of one bucket's delivery (:func:`inventory.usage.usage_aggregate`): a small job over a
    cached frame."""
    starts = {
        table.name: table.location.key
        for table in (registry.tables if registry is not None else ())
        if table.location.is_s3 and table.location.bucket == bucket
    }
    rows = (
        usage.where(F.col("state") == CURRENT)
        .groupBy(F.col("table"), F.when(F.col("table").isNull(), F.col("prefix")).alias("prefix"))
        .agg(F.sum("objects").alias("objects"))
        .collect()
    )
    groups = []
    for row in rows:
        objects = int(row["objects"] or 0)
        if row["table"] is not None and row["table"] in starts:
            key = starts[row["table"]]
            # the keys below ``key/`` are exactly those from ``key/`` up to ``key0``
            groups.append(KeyGroup(f"{key}/", objects, f"{key}0"))
        else:
            prefix = row["prefix"] or ""
            groups.append(
                KeyGroup(prefix[len(bucket) + 1 :] if prefix.startswith(f"{bucket}/") else "", objects)
            )
    return groups


def partition_values(spark: SparkSession, partitions: int) -> list[int] | None:
    """For each partition p of a hash repartitioning into ``partitions``, an int that Spark sends
    to p: Spark's own ``pmod(hash(v), partitions)``, the expression its hash partitioning uses, asked
    of the running Spark (a small job on the driver's data). None if some partition got no value."""
    rows = (
        spark.range(0, 64 * partitions)
        .select(
            F.col("id").cast("int").alias("value"),
            F.pmod(F.hash(F.col("id").cast("int")), F.lit(partitions)).alias("partition"),
        )
        .groupBy("partition")
        .agg(F.min("value").alias("value"))
        .collect()
    )
    values = {int(row["partition"]): int(row["value"]) for row in rows}
    if len(values) < partitions:
        return None
    return [values[p] for p in range(partitions)]


def range_partition(ranges: Sequence[KeyRange], values: Sequence[int]) -> Column:
    """The value whose hash sends a row to its range's partition (:func:`partition_values`): a
    binary search of the ranges' lower bounds on ``key``; a range of several parts picks one by a
    hash of the key."""
    slots: list[Column] = []
    first = 0
    for key_range in ranges:
        own = values[first : first + key_range.parts]
        if key_range.parts == 1:
            slots.append(F.lit(own[0]))
        else:
            pick = F.pmod(F.xxhash64(F.col("key")), F.lit(key_range.parts)).cast("int") + 1
            slots.append(F.element_at(F.array(*[F.lit(v) for v in own]), pick))
        first += key_range.parts

    def search(low: int, high: int) -> Column:  # the ranges low..high-1
        if high - low == 1:
            return slots[low]
        middle = (low + high) // 2
        return F.when(F.col("key") < F.lit(ranges[middle].lower), search(low, middle)).otherwise(
            search(middle, high)
        )

    return search(0, len(ranges))


def laid_out(rows: DataFrame, ranges: Sequence[KeyRange] | None, rows_per_file: int) -> DataFrame:
    """``rows`` (one bucket's) in files of contiguous key ranges: by ``ranges`` when there are
    some and Spark gives a value for every partition, else by a global sort. Files of more than
    :data:`SORTED_ABOVE_ROWS` rows (``rows_per_file``) are sorted by key inside."""
    if ranges:
        partitions = sum(key_range.parts for key_range in ranges)
        values = partition_values(rows.sparkSession, partitions)
        if values is not None:
            spread = rows.repartition(partitions, range_partition(ranges, values))
            # Delta skips whole files, and a file of up to about two million rows is one Parquet
            # row group (128 MB), so a sort inside it buys no skipping (it cost a sixth of the
            # write); a bigger file has several, which a sorted key lets a reader skip
            return (
                spread.sortWithinPartitions("bucket", "key") if rows_per_file > SORTED_ABOVE_ROWS else spread
            )
    return rows.orderBy("bucket", "key")  # the bucket first: one value, the partitioned write's order


def write_partitions(spark: SparkSession, rows: int) -> int:
    """How many files to cut ``rows`` into: one per :data:`ROWS_PER_FILE`, and at least one per
    task slot (so that every core writes) or one per started :data:`MIN_ROWS_PER_FILE` rows where
    that is fewer, at most :data:`MAX_FILES` or Spark's ``spark.sql.shuffle.partitions``,
    whichever is more."""
    try:
        configured = int(spark.conf.get("spark.sql.shuffle.partitions") or 200)
    except ValueError:  # "auto" (Databricks): Spark's own default
        configured = 200
    slots = min(spark.sparkContext.defaultParallelism, math.ceil(rows / MIN_ROWS_PER_FILE))
    return max(1, min(max(configured, MAX_FILES), max(math.ceil(rows / ROWS_PER_FILE), slots)))
