"""Storage-cost chargeback: who owns every byte of the inventory, and what it costs a month.

Pure DataFrame transforms over the inventory table (one aggregation, so one pass over the data),
priced from a price file (``chargeback/prices/aws-us-east-1.yaml`` unless ``--prices``). Reclaimable
bytes per table come from the newest dry run in ``vacuum_runs``; noncurrent versions and the trend
from the usage table the ingest writes (``inventory_runs`` for buckets without usage rows).

Modules: :mod:`~chargeback.prices` (price files), :mod:`~chargeback.grouping` (bytes and cost by
table, owner, bucket, storage class or prefix), :mod:`~chargeback.reclaimable`,
:mod:`~chargeback.noncurrent`, :mod:`~chargeback.trend`, :mod:`~chargeback.advice` (``--advise``:
what frees bytes, each with its monthly saving) and :mod:`~chargeback.lifecycle` (its S3 lifecycle
rules as JSON and Terraform), :mod:`~chargeback.report` (the typed result),
:mod:`~chargeback.build` (all of it for one inventory table: :func:`build_report`) and
:mod:`~chargeback.sql` (the analysts' queries).
"""

from chargeback.build import build_report
from chargeback.grouping import GroupBy, parse_group_by
from chargeback.prices import PriceTable, load_prices, parse_prices
from chargeback.report import ChargebackReport

__all__ = [
    "ChargebackReport",
    "GroupBy",
    "PriceTable",
    "build_report",
    "load_prices",
    "parse_group_by",
    "parse_prices",
]
