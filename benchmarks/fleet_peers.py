"""The fleet's peers: the same tables vacuumed (dry runs) by the methods a team would use instead.

``many_tables`` times our job over T tables; these loops time, on the same tables, inventory and
S3 server, in the same process:

* ``delta-inventory``: Delta's own ``VACUUM ... USING INVENTORY ... DRY RUN`` per table, fed each
  table's rows of the same inventory table (paths on ``s3a://``, as Delta qualifies the table),
  with none of our gates: the method this tool grew from (on ``inventory_tables`` of the tables
  only, when given, evenly spaced: at hundreds of tables it is the slowest side);
* ``delta-inventory-sized``: the same statement per table, each on a session of its own sized as
  our job sizes a table's (Delta's snapshot partitions, the shuffles from the table's objects,
  adaptive execution and automatic broadcasts off for a plan of one wave, interpreted evaluation
  for a small table: ``vacuum.tuning``, as the job's own settings allow), on the same tables,
  run first of the peers, right after ours: about what Delta's dry run, the engine our job
  trusts, costs a table as our job sizes it, with none of our gates or checks. It is not a part of
  our run: Delta here loads the snapshot itself and scans the inventory table for the table's
  rows, where ours hands it a gated slice and a snapshot already loaded;
* ``delta-rs``: delta-rs's ``vacuum(dry_run=True, full=True)`` per table: a listing of the table
  and its log, no JVM;
* ``delta-listing``: Delta's listing ``VACUUM ... DRY RUN`` per table, on ``listing_tables`` of
  the tables only, evenly spaced (it lists every table in full).

Each loop runs its tables on ``threads`` threads, as our job runs them with ``--parallel``; every
side runs at ``RETAIN 0 HOURS``. Every side's candidates are compared with each table's garbage as
built; a difference is reported with the kinds of file it holds and why a side may see them
otherwise (``REASONS``).
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import unquote

log = logging.getLogger("benchmarks.fleet_peers")

SIDES = {
    "delta-inventory": "Delta's `VACUUM ... USING INVENTORY` loop",
    "delta-inventory-sized": "Delta's `VACUUM ... USING INVENTORY` loop, each table's session sized as ours",
    "delta-rs": "delta-rs `vacuum(full=True)` loop",
    "delta-listing": "Delta's listing `VACUUM` loop",
}
REASONS = {  # why a side may name a file of this kind and another not
    "orphan": "in no commit: aged by the object's LastModified (the inventory's copy of it for Delta's "
    "inventory mode and ours, S3's own for the listing sides)",
    "tombstoned_recent": "removed 1 day ago: garbage only at a retention under 24 h",
    "tombstoned_old": "removed 10 days ago",
    "live": "a live file: no side may name it",
}


def relative(path: str, bucket: str, root: str) -> str:
    """A candidate relative to the table's root: an absolute one (``s3a://bucket/root/x``, as
    Delta names it, decoded) only when it lies under the root in ``bucket``; a relative one (as
    delta-rs names it, URL-encoded as in the log) decoded. Anything else is returned marked, so
    that it can never match a file of the table."""
    match = re.match(r"^[A-Za-z0-9]+://([^/]+)/(.*)$", path)
    if not match:
        return unquote(path)
    prefix = root.rstrip("/") + "/"
    if match.group(1) != bucket or not match.group(2).startswith(prefix):
        return f"OUTSIDE THE TABLE: {path}"
    return match.group(2)[len(prefix) :]


def spread(names: list[str], count: int) -> list[str]:
    """``count`` of ``names`` evenly spaced from the first (all of them when ``count`` is as many
    or more): a loop that runs some of the tables runs each kind the fleet has in its share."""
    if count >= len(names):
        return list(names)
    return [names[index * len(names) // count] for index in range(max(0, count))]


def run_peers(
    spark: Any,
    *,
    inventory: str,
    bucket: str,
    roots: dict[str, str],
    storage_options: dict[str, str],
    threads: int,
    listing_tables: int,
    inventory_tables: int | None = None,
) -> dict[str, dict[str, Any]]:
    """Each peer's loop over the tables (``roots``: name -> key of its root in ``bucket``):
    seconds, seconds a table and each table's candidates (relative paths)."""
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    from core.paths import StorageLocation
    from core.session import codegen_set_by_user
    from core.tables import snapshot_sized_by_user
    from vacuum.tuning import adaptive_off_until_sized, interpret_small_plan, session_for, size_shuffles

    # what the job's own settings leave to the tool, as vacuum.runner reads them
    sized_by_user, codegen_by_user = snapshot_sized_by_user(spark), codegen_set_by_user(spark)

    # a global view: a table's own session (the sized loop's) sees it too
    spark.read.format("delta").load(inventory).createOrReplaceGlobalTempView("bench_inventory")
    names = sorted(roots)
    # each table's objects in the inventory, as our run's figures count them (not timed)
    objects: dict[str, int] = {}
    for depth in sorted({root.count("/") + 1 for root in roots.values()}):
        objects |= {
            row["root"]: int(row["objects"])
            for row in spark.sql(
                f"SELECT array_join(slice(split(key, '/'), 1, {depth}), '/') AS root, count(*) AS objects "
                f"FROM global_temp.bench_inventory WHERE bucket = '{bucket}' "
                f"AND size(split(key, '/')) > {depth} GROUP BY 1"
            ).collect()
        }

    def inventory_statement(root: str) -> str:
        return (
            f"VACUUM delta.`s3a://{bucket}/{root}` USING INVENTORY ("
            f"SELECT concat('s3a://', bucket, '/', key) AS path, length, isDir, modificationTime "
            f"FROM global_temp.bench_inventory WHERE bucket = '{bucket}' AND startswith(key, '{root}/')"
            ") RETAIN 0 HOURS DRY RUN"
        )

    def delta_inventory(name: str) -> list[str]:
        return [r["path"] for r in spark.sql(inventory_statement(roots[name])).collect()]

    def delta_inventory_sized(name: str) -> list[str]:
        # as our job's run_one and its gates size a table's session, before Delta's dry run
        root = roots[name]
        location = StorageLocation.parse(f"s3://{bucket}/{root}")
        session = session_for(spark, location, sized_by_user=sized_by_user)
        session.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
        if not sized_by_user:
            adaptive_off_until_sized(session)
        if not codegen_by_user:
            interpret_small_plan(session, objects[root])
        size_shuffles(session, objects[root])
        return [r["path"] for r in session.sql(inventory_statement(root)).collect()]

    def delta_listing(name: str) -> list[str]:
        statement = f"VACUUM delta.`s3a://{bucket}/{roots[name]}` RETAIN 0 HOURS DRY RUN"
        return [r["path"] for r in spark.sql(statement).collect()]

    def delta_rs(name: str) -> list[str]:
        from deltalake import DeltaTable

        files = DeltaTable(f"s3://{bucket}/{roots[name]}", storage_options=storage_options).vacuum(
            retention_hours=0, dry_run=True, enforce_retention_duration=False, full=True
        )
        return list(files)

    inventory_names = names if inventory_tables is None else spread(names, inventory_tables)
    loops: dict[str, tuple[Callable[[str], list[str]], list[str]]] = {
        # first: right after ours, on the JVM as ours left it
        "delta-inventory-sized": (delta_inventory_sized, inventory_names),
        "delta-inventory": (delta_inventory, inventory_names),
        "delta-rs": (delta_rs, names),
        "delta-listing": (delta_listing, spread(names, listing_tables)),
    }
    results: dict[str, dict[str, Any]] = {}
    for side, (one, tables) in loops.items():
        if not tables:
            continue
        # as a job of its own would start: no Delta log state left from an earlier run
        spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
        log.info("%s over %d tables, %d threads", side, len(tables), threads)
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
            found = dict(zip(tables, pool.map(one, tables), strict=True))
        seconds = time.monotonic() - started
        results[side] = {
            "label": SIDES[side],
            "tables": len(tables),
            "seconds": round(seconds, 2),
            "seconds_per_table": round(seconds / len(tables), 3),
            "candidates": {
                n: sorted(relative(p, bucket, roots[n]) for p in paths) for n, paths in found.items()
            },
        }
        log.info("%s: %.1f s, %.3f s a table", side, seconds, seconds / len(tables))
    return results


def differences(
    planned: dict[str, set[str]], expected: dict[str, set[str]], categories: dict[str, dict[str, str]]
) -> dict[str, Any]:
    """How one side's candidates differ from the garbage as built, over the tables it ran: the
    files each way, by kind of file, with the reason a side may see that kind otherwise."""
    extra: Counter[str] = Counter()
    missing: Counter[str] = Counter()
    for name, paths in planned.items():
        kinds = categories[name]
        extra.update(kinds.get(p, "not a file of the table") for p in paths - expected[name])
        missing.update(kinds.get(p, "?") for p in expected[name] - paths)
    return {
        "tables": len(planned),
        "matches": not extra and not missing,
        "planned_not_garbage": dict(extra),
        "garbage_not_planned": dict(missing),
        "reasons": {k: REASONS.get(k, "") for k in sorted(set(extra) | set(missing))},
    }
