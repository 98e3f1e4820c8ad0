"""What a run's S3 requests cost in dollars, and how long they would take on S3 (a latency model).

**Prices.** AWS's published request prices for S3 Standard in US East (N. Virginia), from
https://aws.amazon.com/s3/pricing/ as of :data:`PRICES_AS_OF` (read from a stored copy of the page
and summaries of it, not from the live page that day):

* PUT, COPY, POST, LIST requests: $0.005 per 1,000. A DeleteObjects request is a POST
  (``POST /?delete``) and is billed as one;
* GET, SELECT and all other requests (HEAD, GetBucketVersioning, ...): $0.0004 per 1,000;
* DELETE (and CANCEL) requests: free.

**Latency model.** Locally, moto answers in about a millisecond; S3 does not. The modeled time
of a run is its measured local wall time plus, for every group of requests that one engine sends
the same way, ``ceil(requests / concurrency) * latency``: the round trips the engine waits for,
given how many requests it really has in flight at once. :data:`DEFAULT_LATENCY_MS` = 20 ms is
a typical in-region round trip for a small S3 request (a HEAD, a GET of a commit file, a LIST page
of 1000 keys), the benchmarks' default; AWS's performance guidelines plan for 100-200 ms
small-object latency, so pass ``--latency-ms 100`` for a pessimistic view (the network part scales
linearly). Every request counts as one round trip of the same latency; a DeleteObjects of 1000
keys takes longer than a HEAD on S3, which this understates for the engines that batch deletes.

Concurrency, from each engine's code and this run's settings (``slots``: Spark's task slots,
``defaultParallelism``, 2 on a 2-core machine in local mode):

========================  ====================================================================  ===========
engine                    requests                                                              in flight
========================  ====================================================================  ===========
Spark (every mode)        the table's ``_delta_log/`` (snapshot: list, ``_last_checkpoint``,     1
                          checkpoint, commits), read from the driver
Spark, list and lite      data LIST/HEAD of Delta's listing (Spark tasks, one directory after    slots
                          another in each task)
Spark, flat               the one flat listing of the table (a paginated ListObjectsV2 on the    1
                          driver: each page needs the previous page's token)
Spark, every mode         our DeleteObjects batches (Spark tasks, each with                      slots x 4
                          ``vacuum.execute.REQUESTS_IN_FLIGHT`` = 4 requests in flight)
Spark, every mode         other data requests: Delta's parallel delete, the post-delete check    slots
                          (all in Spark tasks)
Spark, list and lite      our nested-table probes (``<dir>/_delta_log/``, a pool of 16 threads)  16
Spark, every mode         other buckets (inventory, history, ledger tables): GET/HEAD from       slots / 1
                          Spark tasks; LIST/PUT of their logs from the driver
delta-rs                  data LISTs: one delimited LIST of the root, then a flat paginated       10
                          listing of each first-level partition prefix (``dt=.../``), 10 at
                          once (``DELTARS_VACUUM_LIST_CONCURRENCY``, default 10)
delta-rs                  DeleteObjects (object_store's ``delete_stream``: 1000 keys a request,  20
                          ``buffered(20)``)
delta-rs                  everything else: the log                                              1
========================  ====================================================================  ===========
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from vacuum.execute import REQUESTS_IN_FLIGHT

PRICES_AS_OF = "2026-11-22"
PRICE_SOURCE = "https://aws.amazon.com/s3/pricing/ (S3 Standard, US East (N. Virginia))"
TIER1_PER_1000 = 0.005  # PUT, COPY, POST, LIST
TIER2_PER_1000 = 0.0004  # GET, SELECT and all other requests
FREE_OPERATIONS = frozenset({"DeleteObject", "AbortMultipartUpload"})
TIER1_OPERATIONS = frozenset(
    {
        "ListObjectsV2",
        "ListObjects",
        "ListObjectVersions",
        "ListMultipartUploads",
        "ListParts",
        "PutObject",  # also CopyObject (a PUT with x-amz-copy-source)
        "DeleteObjects",  # POST /?delete
        "CreateMultipartUpload",
        "UploadPart",
        "CompleteMultipartUpload",
        "CreateBucket",
    }
)
LIST_OPERATIONS = frozenset({"ListObjectsV2", "ListObjects", "ListObjectVersions"})
DEFAULT_LATENCY_MS = 20.0
PROBE_THREADS = 16  # vacuum.runner.tables_among
DELTA_RS_DELETE_CONCURRENCY = 20  # object_store's delete_stream: buffered(20)
DELTA_RS_LIST_CONCURRENCY = 10  # delta-rs 1.6 vacuum: DELTARS_VACUUM_LIST_CONCURRENCY, default 10


def price_per_1000(operation: str) -> float:
    """The us-east-1 price of 1000 requests of ``operation`` (an S3 API name)."""
    if operation in FREE_OPERATIONS:
        return 0.0
    return TIER1_PER_1000 if operation in TIER1_OPERATIONS else TIER2_PER_1000


def request_cost(requests_by_operation: Mapping[str, int]) -> float:
    """Dollars for these requests at :func:`price_per_1000`."""
    return sum(count * price_per_1000(op) / 1000 for op, count in requests_by_operation.items())


@dataclass(frozen=True)
class LatencyModel:
    """``latency_seconds`` per round trip; ``slots`` Spark tasks run at once."""

    latency_seconds: float
    slots: int

    def concurrency(self, engine: str, mode: str, area: str, operation: str) -> int:
        """How many requests of this kind the engine has in flight at once (see the module table)."""
        if engine == "delta-rs":
            if operation == "DeleteObjects":
                return DELTA_RS_DELETE_CONCURRENCY
            return DELTA_RS_LIST_CONCURRENCY if area == "data" and operation in LIST_OPERATIONS else 1
        if area == "log":
            return 1
        if area == "probe":
            return PROBE_THREADS
        if area == "meta":
            return self.slots if operation in ("GetObject", "HeadObject") else 1
        if mode == "flat" and operation in LIST_OPERATIONS:
            return 1
        if operation == "DeleteObjects":
            return self.slots * REQUESTS_IN_FLIGHT
        return self.slots

    def network_seconds(self, engine: str, mode: str, counts: Mapping[tuple[str, str], int]) -> float:
        """Round trips times latency, for ``(area, operation) -> requests`` of one run."""
        rounds = 0
        for (area, operation), count in counts.items():
            if count > 0:
                rounds += math.ceil(count / self.concurrency(engine, mode, area, operation))
        return rounds * self.latency_seconds

    def describe(self) -> dict[str, object]:
        return {
            "latency_ms": self.latency_seconds * 1000,
            "spark_task_slots": self.slots,
            "formula": "modeled = local wall time + sum over request groups of "
            "ceil(requests / concurrency) * latency",
            "concurrency": {
                "spark: table _delta_log (driver)": 1,
                "spark: our DeleteObjects (Spark tasks)": f"slots x {REQUESTS_IN_FLIGHT}",
                "spark: other data requests from Spark tasks (Delta listing, Delta's deletes, checks)": "slots",
                "spark flat: the flat listing's pages (driver, sequential)": 1,
                "spark list/lite: nested-table probes": PROBE_THREADS,
                "spark: other buckets GET/HEAD (tasks) / other (driver)": "slots / 1",
                "delta-rs: data LISTs (per partition prefix)": DELTA_RS_LIST_CONCURRENCY,
                "delta-rs: DeleteObjects": DELTA_RS_DELETE_CONCURRENCY,
                "delta-rs: everything else (the log)": 1,
            },
        }


def by_operation(counts: Mapping[tuple[str, str], int], areas: tuple[str, ...]) -> Counter[str]:
    """Requests by operation over ``areas`` of ``(area, operation) -> requests``."""
    result: Counter[str] = Counter()
    for (area, operation), count in counts.items():
        if area in areas:
            result[operation] += count
    return result
