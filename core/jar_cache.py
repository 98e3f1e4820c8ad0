"""The jar files Ivy resolved last time, so that a warm machine starts Spark without Ivy.

``spark.jars.packages`` makes every process that starts the JVM run Ivy: about 2.5 s of a
one-table vacuum's start on this project's 2-core machine (measured: session start 9.5 s with
the packages, 7.0 s with the same jars given as ``spark.jars``), even when every jar is already in
the Ivy cache. After a resolution, the list of jar files Spark loaded (its ``spark.jars``, in
Ivy's order) is kept in a small file under the user's cache folder, keyed by the packages and the
Spark version; the next start loads those files directly (in local mode from the JVM's class
path, which saves Spark's copy of them into its temporary folder: session start 7.5 s as
``spark.jars``, 4.5 s on the class path; see ``core.session.build_spark_session``). Each file's
size and modification time are kept with it: when one is missing or changed (the Ivy cache
cleaned, a jar downloaded again), the list is not used and Ivy resolves as before, writing a new
one.

``inventory-vacuum fetch-jars`` always resolves, and ``INVENTORY_VACUUM_RESOLVE_JARS=1`` makes
every start resolve. Jars given to ``spark-submit`` (``--packages``, ``--jars``) are never
touched: the list is only for sessions whose jars the tool resolves itself.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

from core.local_files import written_whole

log = logging.getLogger("inventory_vacuum")

RESOLVE_VARIABLE = "INVENTORY_VACUUM_RESOLVE_JARS"


def cache_file(packages: Sequence[str], spark_version: str) -> Path:
    """Where the list of ``packages``' jars is kept: ``$XDG_CACHE_HOME/inventory-vacuum`` (else
    ``~/.cache/inventory-vacuum``), one file per set of packages and Spark version."""
    digest = hashlib.sha256("\n".join([spark_version, *packages]).encode()).hexdigest()[:16]
    return cache_folder() / f"jars-{digest}.json"


def cache_folder() -> Path:
    """``$XDG_CACHE_HOME/inventory-vacuum``, else ``~/.cache/inventory-vacuum``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "inventory-vacuum"


def cached_jars(packages: Sequence[str], spark_version: str) -> list[str] | None:
    """The jar files of the last resolution of ``packages``, when each is still there, of the
    size and modification time it had; else None (resolve with Ivy)."""
    if os.environ.get(RESOLVE_VARIABLE, "").strip() not in ("", "0"):
        return None
    try:
        document = json.loads(cache_file(packages, spark_version).read_text(encoding="utf-8"))
        if document.get("packages") != list(packages) or not document.get("jars"):
            return None
        for jar in document["jars"]:
            stat = os.stat(jar["path"])
            if (stat.st_size, stat.st_mtime_ns) != (jar["size"], jar["mtime_ns"]):
                return None
        return [str(jar["path"]) for jar in document["jars"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def remember_jars(packages: Sequence[str], spark_version: str, loaded: str) -> Path | None:
    """Keep the jar files of ``loaded`` (a resolved session's ``spark.jars``: comma-separated
    ``file:`` URIs) for the next start. Nothing is kept when one is not a local file; a cache
    folder that cannot be written only costs the next start its Ivy resolution."""
    paths = []
    for uri in filter(None, (part.strip() for part in loaded.split(","))):
        parsed = urlparse(uri)
        if parsed.scheme not in ("", "file"):
            return None
        paths.append(unquote(parsed.path))
    if not paths:
        return None
    target = cache_file(packages, spark_version)
    try:
        jars = [
            {"path": path, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
            for path, stat in ((path, os.stat(path)) for path in paths)
        ]
        target.parent.mkdir(parents=True, exist_ok=True)
        # another process reading it sees the old list or the new
        with written_whole(target) as partial, open(partial, "w", encoding="utf-8") as out:
            json.dump({"packages": list(packages), "jars": jars}, out, indent=1)
    except OSError as error:
        log.info("the resolved jars are not kept for the next start (%s): %s", target, error)
        return None
    return target
