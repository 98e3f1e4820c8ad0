"""The candidate list ``vacuum --candidates`` writes: every table's planned files, one row each,
in one local Parquet or CSV file."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import DataFrame

if TYPE_CHECKING:
    from vacuum.results import TableRun

# one row per planned file
CANDIDATES_SCHEMA = pa.schema(
    [("table", pa.string()), ("path", pa.string()), ("length", pa.int64()), ("partition", pa.string())]
)


def to_arrow(frame: DataFrame) -> pa.Table:
    """The frame as an Arrow table: ``DataFrame.toArrow`` (Spark 4.0 on); on Spark 3.5 the same
    Arrow batches, through the call ``toPandas`` makes."""
    if hasattr(frame, "toArrow"):
        return frame.toArrow()
    from pyspark.sql.pandas.types import to_arrow_schema

    batches = frame._collect_as_arrow()  # type: ignore[operator]  # pyspark 4.2 types it as a Column
    return pa.Table.from_batches(batches, schema=to_arrow_schema(frame.schema))


def write_candidates(runs: Sequence[TableRun], path: str) -> int:
    """Write every table's candidate list to one local ``.parquet`` or ``.csv`` file."""
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    tables = [r.candidates for r in runs if r.candidates is not None]
    combined = (
        pa.concat_tables([t.cast(CANDIDATES_SCHEMA) for t in tables])
        if tables
        else CANDIDATES_SCHEMA.empty_table()
    )
    if path.endswith(".csv"):
        pa_csv.write_csv(combined, path)
    else:
        pq.write_table(combined, path)
    return combined.num_rows
