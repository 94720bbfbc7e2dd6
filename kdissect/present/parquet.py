"""Tables written as Parquet files: as pandas writes them, a long table a slice at a
time, and every file of one table with one schema (`kdissect --export`,
`Capture.export`, `kdissect.dask.to_parquet`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

WRITE_ROWS = 1 << 20  # rows made into Arrow at once when a table is written: a row group each


def parquet_types(table: str) -> dict[str, Any]:
    """The Arrow type of each column of Python objects of `table`: what its values make
    when there are some (lists of broker ids; record keys, values and headers, as
    `analysis.exportable` gives them), also where a capture has none (no record, or none
    with headers), which Arrow alone would write as nulls. A dataset's files of one table
    then have one schema, as Polars needs to read them together."""
    import pyarrow as pa

    if table == "records":
        header = pa.struct([("key", pa.string()), ("value", pa.binary())])
        return {"key": pa.binary(), "value": pa.binary(), "headers": pa.list_(header)}
    if table == "topic_partitions":
        return dict.fromkeys(("replica_nodes", "isr_nodes", "eligible_leader_replicas", "last_known_elr",
                              "offline_replicas"), pa.list_(pa.int64()))
    return {}


def write_parquet(frame: pd.DataFrame, path: Path, types: dict[str, Any] | None = None) -> None:
    """`frame` as a Parquet file, as `DataFrame.to_parquet` writes it (no index), its
    columns `types` of those Arrow types, made into Arrow `WRITE_ROWS` rows at a time,
    each a row group: a table of millions of rows (`fields`) then needs beside it the
    memory of a slice, not of a copy of it whole (two to three times its size)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.Schema.from_pandas(frame, preserve_index=False)
    for name, kind in (types or {}).items():
        if name in schema.names:
            schema = schema.set(schema.get_field_index(name), pa.field(name, kind))
    if len(frame) <= WRITE_ROWS:
        frame.to_parquet(path, index=False, schema=schema)
        return
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, len(frame), WRITE_ROWS):
            writer.write_table(pa.Table.from_pandas(frame.iloc[start:start + WRITE_ROWS], schema=schema,
                                                    preserve_index=False))
