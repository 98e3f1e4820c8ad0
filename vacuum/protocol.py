"""Whether the installed Delta may vacuum a table at all, decided before any plan.

A vacuum is a write: Delta's own VACUUM checks the table's write protocol first, and the
``vacuumProtocolCheck`` table feature says that anything that vacuums must do the same, since a
writer that does not understand a table's features may not know which of its files are live. The
batch delete deletes by itself after Delta's dry run, so the check is made here, for every mode,
before the plan: a table whose reader or writer features the installed Delta does not support is
refused, with the features and the Delta release that supports them. So are the tables Delta will
not vacuum by path: catalog-owned and catalog-managed tables (their catalog decides what is
live), and tables with coordinated commits (their newest commits may not be in ``_delta_log`` yet).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from core.errors import VacuumRefused

# The first open-source Delta release whose jars support each table feature (read from the
# feature list of each release's TableFeature.scala); anything not listed is in none up to 4.4.
# The features of legacy protocol versions (writer 2 to 6) are in every supported release.
FIRST_DELTA_SUPPORTING = {
    "appendOnly": "3.0",
    "invariants": "3.0",
    "checkConstraints": "3.0",
    "changeDataFeed": "3.0",
    "generatedColumns": "3.0",
    "columnMapping": "3.0",
    "deletionVectors": "3.0",
    "domainMetadata": "3.0",
    "rowTracking": "3.0",
    "timestampNtz": "3.0",
    "v2Checkpoint": "3.0",
    "icebergCompatV1": "3.0",
    "allowColumnDefaults": "3.1",
    "clustering": "3.1",
    "icebergCompatV2": "3.1",
    "identityColumns": "3.2",
    "typeWidening-preview": "3.2",
    "vacuumProtocolCheck": "3.2",
    "inCommitTimestamp-preview": "3.2",
    "inCommitTimestamp": "3.3",
    "typeWidening": "3.3",
    "variantType-preview": "3.3",
    "checkpointProtection": "3.3",
    "coordinatedCommits-preview": "3.3",
    "variantType": "4.0",
    "variantShredding-preview": "4.0",
    "catalogOwned-preview": "4.0",
    "catalogManaged": "4.1",
    "variantShredding": "4.1",
    "materializePartitionColumns": "4.1",
    "geospatial": "4.3",
    "icebergCompatV3": "4.4",
}

# Features whose tables Delta vacuums only through their catalog or commit coordinator
CATALOG_FEATURES = ("catalogOwned-preview", "catalogManaged")
COORDINATED_COMMITS_FEATURE = "coordinatedCommits-preview"
COORDINATED_COMMITS_PROPERTY = "delta.coordinatedCommits.commitCoordinator-preview"

# The newest protocol versions any supported Delta reads and writes (3 and 7: table features)
_MAX_READER_VERSION = 3
_MAX_WRITER_VERSION = 7


def protocol_features(protocol_json: str) -> tuple[int, int, frozenset[str]]:
    """(minReaderVersion, minWriterVersion, reader and writer features) of a ``protocol`` action's JSON."""
    protocol = json.loads(protocol_json)
    protocol = protocol.get("protocol", protocol)
    features = {*(protocol.get("readerFeatures") or ()), *(protocol.get("writerFeatures") or ())}
    return int(protocol["minReaderVersion"]), int(protocol["minWriterVersion"]), frozenset(features)


def check_vacuumable(
    protocol_json: str,
    properties: Mapping[str, str],
    delta_version: str,
    supported_features: frozenset[str] | None,
) -> None:
    """Refuse a table the installed Delta (``delta_version``, whose jars support
    ``supported_features``; None when it cannot tell) must not vacuum; return quietly otherwise."""
    reader, writer, features = protocol_features(protocol_json)
    named = {name.lower() for name in features}  # Delta reads feature names in any case
    if reader > _MAX_READER_VERSION or writer > _MAX_WRITER_VERSION:
        raise VacuumRefused(
            f"the table's protocol (reader version {reader}, writer version {writer}) is newer than "
            f"Delta {delta_version} supports: nothing of it is deleted"
        )
    catalog = sorted(name for name in features if name.lower() in {f.lower() for f in CATALOG_FEATURES})
    if catalog:
        raise VacuumRefused(
            f"the table is catalog-managed ({', '.join(catalog)}): only its catalog may vacuum it, "
            "and Delta refuses a vacuum by path"
        )
    if COORDINATED_COMMITS_FEATURE.lower() in named or properties.get(COORDINATED_COMMITS_PROPERTY):
        raise VacuumRefused(
            "the table has coordinated commits: its newest commits may be known only to its commit "
            "coordinator, so a plan from _delta_log could miss live files"
        )
    if supported_features is None:
        return
    supported = {name.lower() for name in supported_features}  # Delta keys its map in lower case
    unsupported = sorted(name for name in features if name.lower() not in supported)
    if unsupported:
        raise VacuumRefused(
            f"the table uses feature(s) {', '.join(_with_release(name) for name in unsupported)} that "
            f"Delta {delta_version} does not support, so it cannot tell which files are live; "
            "vacuum it with a Delta that does"
        )


def _with_release(feature: str) -> str:
    release = FIRST_DELTA_SUPPORTING.get(feature)
    return (
        f"{feature} (supported from Delta {release})"
        if release
        else f"{feature} (in no open-source Delta release up to 4.4)"
    )
