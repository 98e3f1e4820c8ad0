"""The typed chargeback report: frozen values, and ``to_dict()``, the ``--format json`` document.

Money is summed unrounded and rounded to 10 decimals where the JSON shows it
(:func:`rounded_cost`); the renderers format the rounded figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chargeback.advice import Advice

UNOWNED = "unowned"  # the group of objects under no registered table
UNKNOWN_OWNER = "unknown"  # a table named in the inventory that tables.yaml no longer registers


def rounded_cost(value: float) -> float:
    """A monthly cost as the JSON holds it: rounded to 10 decimals."""
    return round(value, 10)


@dataclass(frozen=True)
class Tally:
    """Objects, bytes and monthly cost of one group, optionally split by storage class."""

    objects: int = 0
    bytes: int = 0
    monthly_cost: float = 0.0
    storage_classes: Mapping[str, Tally] = field(default_factory=dict)

    def plus(self, price_key: str | None, objects: int, size: int, cost: float) -> Tally:
        """This tally with one more row added (and to ``price_key``'s split when not None)."""
        classes = self.storage_classes
        if price_key is not None:
            classes = {**classes, price_key: classes.get(price_key, Tally()).plus(None, objects, size, cost)}
        return Tally(self.objects + objects, self.bytes + size, self.monthly_cost + cost, classes)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "objects": self.objects,
            "bytes": self.bytes,
            "monthly_cost": rounded_cost(self.monthly_cost),
        }
        if self.storage_classes:
            data["storage_classes"] = {
                name: tally.to_dict() for name, tally in sorted(self.storage_classes.items())
            }
        return data


def add(
    tallies: dict[str, Tally], name: str, price_key: str | None, objects: int, size: int, cost: float
) -> None:
    """Add one row to ``tallies[name]`` (a new tally when absent)."""
    tallies[name] = tallies.get(name, Tally()).plus(price_key, objects, size, cost)


def ranked(tallies: Mapping[str, Tally]) -> list[tuple[str, Tally]]:
    """Costliest first; ties by bytes, then name."""
    return sorted(tallies.items(), key=lambda item: (-item[1].monthly_cost, -item[1].bytes, item[0]))


@dataclass(frozen=True)
class Reclaimable:
    """What a vacuum dry run of one table plans to delete, priced at the table's cost per byte."""

    table: str
    files: int
    bytes: int | None
    monthly_cost: float | None  # rounded; None when the dry run did not measure bytes
    source: str  # vacuum_runs (the newest dry run recorded) or computed (a dry run made now)
    run_at: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "files": self.files,
            "bytes": self.bytes,
            "monthly_cost": self.monthly_cost,
            "from": self.source,
            "run_at": self.run_at,
        }


@dataclass(frozen=True)
class NoncurrentBucket:
    """Noncurrent versions and delete markers of one bucket's newest delivery."""

    bucket: str
    objects: int
    bytes: int
    delete_markers: int
    monthly_cost: float  # rounded
    inventory_taken_at: str | None
    source: str  # inventory_usage or inventory_runs
    priced_as: str  # "storage class", or STANDARD (inventory_runs does not record classes)
    # False for a delivery without noncurrent rows in the usage table: no time is known, and the
    # key is left out of the JSON
    taken_at_known: bool = True

    def to_dict(self, section_source: str) -> dict[str, Any]:
        """The bucket's entry in a section read from ``section_source``; a bucket whose figures
        come from elsewhere says so (``from``, ``priced_as``)."""
        figures = {
            "objects": self.objects,
            "bytes": self.bytes,
            "delete_markers": self.delete_markers,
            "monthly_cost": self.monthly_cost,
        }
        if self.source == "inventory_usage":
            taken = {"inventory_taken_at": self.inventory_taken_at} if self.taken_at_known else {}
            return {"bucket": self.bucket, **taken, **figures}
        data = {"bucket": self.bucket, **figures, "inventory_taken_at": self.inventory_taken_at}
        if self.source != section_source:
            data.update({"from": self.source, "priced_as": self.priced_as})
        return data


@dataclass(frozen=True)
class NoncurrentGroup:
    """Noncurrent versions of one owning table (or top-level prefix under no table) in a bucket."""

    bucket: str
    group: str  # the table, or the top-level prefix
    table: str | None
    owner: str
    objects: int
    bytes: int
    delete_markers: int
    monthly_cost: float  # rounded
    # what the cost is made of, per price key (unrounded; for --advise, not in the JSON)
    storage_classes: Mapping[str, Tally] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "bucket": self.bucket,
            "group": self.group,
            "table": self.table,
            "owner": self.owner,
            "objects": self.objects,
            "bytes": self.bytes,
            "delete_markers": self.delete_markers,
            "monthly_cost": self.monthly_cost,
        }


@dataclass(frozen=True)
class Noncurrent:
    """Noncurrent versions and delete markers (no vacuum frees them), per bucket and, from the
    usage table, per owning table or prefix (``groups`` None: not known)."""

    source: str  # inventory_usage or inventory_runs
    objects: int
    bytes: int
    delete_markers: int
    monthly_cost: float  # rounded
    priced_as: str
    buckets: tuple[NoncurrentBucket, ...]
    groups: tuple[NoncurrentGroup, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "from": self.source,
            "objects": self.objects,
            "bytes": self.bytes,
            "delete_markers": self.delete_markers,
            "monthly_cost": self.monthly_cost,
            "priced_as": self.priced_as,
            "buckets": [bucket.to_dict(self.source) for bucket in self.buckets],
        }
        if self.groups is not None:
            data["prefixes"] = [group.to_dict() for group in self.groups]
        return data


@dataclass(frozen=True)
class TrendPoint:
    """Current objects on one inventory date, in all, per owner and per costliest table."""

    date: str
    objects: int
    bytes: int
    monthly_cost: float  # rounded
    owners: tuple[tuple[str, Tally], ...]  # ranked
    tables: tuple[tuple[str, Tally], ...]  # ranked
    carried_forward: tuple[str, ...]  # buckets counted with an earlier delivery

    def to_dict(self) -> dict[str, Any]:
        return {
            "date": self.date,
            "objects": self.objects,
            "bytes": self.bytes,
            "monthly_cost": self.monthly_cost,
            "owners": {name: tally.to_dict() for name, tally in self.owners},
            "tables": {name: tally.to_dict() for name, tally in self.tables},
            "carried_forward": list(self.carried_forward),
        }


@dataclass(frozen=True)
class Trend:
    """Points over the last ``days`` days, priced at today's prices (``priced_at``)."""

    sources: tuple[str, ...]  # inventory_usage, time_travel
    days: int
    priced_at: str
    points: tuple[TrendPoint, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "from": list(self.sources),
            "days": self.days,
            "priced_at": self.priced_at,
            "points": [point.to_dict() for point in self.points],
        }


@dataclass(frozen=True)
class ChargebackReport:
    """The chargeback of one inventory: ``to_dict()`` is the ``--format json`` document."""

    by: str
    currency: str
    prices_as_of: str
    price_file: str
    inventory_table: str
    groups: Mapping[str, Tally]
    by_owner: Mapping[str, Tally]
    by_table: Mapping[str, Tally]
    unowned: Tally
    unowned_prefixes: Mapping[str, Tally]
    totals: Tally
    noncurrent: Noncurrent | None = None  # None: no history table read
    trend: Trend | None = None  # None: not asked for
    reclaimable: tuple[Reclaimable, ...] = ()
    warnings: tuple[str, ...] = ()
    advice: Advice | None = None  # None: not asked for (--advise), and no "advice" key in the JSON

    def ranked_groups(self) -> list[tuple[str, Tally]]:
        return ranked(self.groups)

    @property
    def reclaimable_bytes(self) -> int:
        return sum(r.bytes or 0 for r in self.reclaimable)

    @property
    def reclaimable_monthly_cost(self) -> float:
        return rounded_cost(sum(r.monthly_cost or 0.0 for r in self.reclaimable))

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "by": self.by,
            "currency": self.currency,
            "prices_as_of": self.prices_as_of,
            "price_file": self.price_file,
            "inventory_table": self.inventory_table,
            "groups": [{"group": name, **tally.to_dict()} for name, tally in self.ranked_groups()],
            "unowned": {
                **self.unowned.to_dict(),
                "prefixes": [
                    {"prefix": name, **tally.to_dict()} for name, tally in ranked(self.unowned_prefixes)
                ],
            },
            "noncurrent": self.noncurrent.to_dict() if self.noncurrent else {},
            "reclaimable": [entry.to_dict() for entry in self.reclaimable],
            "trend": self.trend.to_dict() if self.trend else {},
            "totals": {
                **self.totals.to_dict(),
                "reclaimable_bytes": self.reclaimable_bytes,
                "reclaimable_monthly_cost": self.reclaimable_monthly_cost,
                "noncurrent_monthly_cost": self.noncurrent.monthly_cost if self.noncurrent else 0.0,
            },
            "warnings": list(self.warnings),
        }
        if self.advice is not None:
            data["advice"] = self.advice.to_dict()
        return data
