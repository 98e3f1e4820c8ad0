"""The analysts' queries shipped with the package (``chargeback/sql/<name>.sql``): the same rules
as the chargeback command, in Spark SQL, over three temporary views (:func:`register_views`).

The pricing they share is written once, in ``chargeback/sql/_pricing.sql``; a query file names it
with a ``--@include _pricing.sql`` line, and :func:`sql_text` returns the query with it included,
ready to run. Lines starting with ``--@`` are notes for whoever edits the files, left out.

Example::

    register_views(spark, read_inventory_for_chargeback(spark, table), load_prices(), registry)
    spark.sql(sql_text("cost_by_owner")).show()

``python -m chargeback.sql cost_by_owner`` prints the runnable query.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib import resources
from typing import TYPE_CHECKING

from chargeback.prices import PRICES_VIEW_SCHEMA, PriceTable
from core.errors import UsageError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from core.registry import TableRegistry

SQL_QUERIES = ("cost_by_table", "cost_by_owner", "cost_by_storage_class")
INCLUDE = "--@include "
NOTE = "--@"


def sql_text(name: str) -> str:
    """The runnable query ``name`` (one of :data:`SQL_QUERIES`), shared parts included."""
    if name not in SQL_QUERIES:
        raise UsageError(f"no shipped query {name!r}; expected one of {', '.join(SQL_QUERIES)}")
    return _assembled(f"{name}.sql")


def _assembled(file: str) -> str:
    lines = []
    for line in _read(file).splitlines(keepends=True):
        if line.startswith(INCLUDE):
            lines.append(_assembled(line[len(INCLUDE) :].strip()))
        elif not line.startswith(NOTE):
            lines.append(line)
    return "".join(lines)


def _read(file: str) -> str:
    return (resources.files("chargeback") / "sql" / file).read_text(encoding="utf-8")


def register_views(
    spark: SparkSession, inventory: DataFrame, prices: PriceTable, registry: TableRegistry | None
) -> None:
    """Create the temporary views the shipped queries read: ``inventory``, ``prices``
    (:data:`~chargeback.prices.PRICES_VIEW_SCHEMA`) and ``owners`` (``table, owner``)."""
    inventory.createOrReplaceTempView("inventory")
    spark.createDataFrame(prices.rows(), PRICES_VIEW_SCHEMA).createOrReplaceTempView("prices")
    owners: Sequence[tuple[str, str]] = [(t.name, t.owner) for t in registry.tables] if registry else []
    spark.createDataFrame(list(owners), "table string, owner string").createOrReplaceTempView("owners")


def main(argv: Sequence[str]) -> int:
    """``python -m chargeback.sql NAME``: print the runnable query NAME."""
    if len(argv) != 1 or argv[0] not in SQL_QUERIES:
        print(f"usage: python -m chargeback.sql {{{','.join(SQL_QUERIES)}}}", file=sys.stderr)
        return 2
    sys.stdout.write(sql_text(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
