"""Typed pandas columns from plain Python lists, each converted once.

Every table is filled as Python lists, one per column, then each list becomes a
pandas column of its dtype here (`typed`): nullable integers, UTC datetimes,
categoricals whose categories are the sorted distinct values, Arrow-backed text.
Lists of one plain kind (ints and None, str and None) go through Arrow's C
conversion; anything else (a float among ints, a non-text value among text)
takes pandas' own, slower conversion, which gives the same column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kdissect.present.records import CaptureTime

Columns = dict[str, list[Any]]

# What Arrow infers from a list of ints (and None), or of str (and None); None alone is null.
_INTEGERS = (pa.int64(), pa.null())
_TEXT = (pa.string(), pa.null())
_NOT_PLAIN = (pa.ArrowException, OverflowError, TypeError, ValueError)


def typed(columns: Mapping[str, Sequence[Any]], dtypes: Mapping[str, str]) -> pd.DataFrame:
    """A DataFrame of `columns`, each converted to its dtype in `dtypes` (see `column`)."""
    return pd.DataFrame({name: column(columns[name], dtype) for name, dtype in dtypes.items()})


def column(values: Sequence[Any], dtype: str) -> Any:
    """`values` as a pandas column of `dtype`: a pandas dtype, or "utc" for capture times
    (integer nanoseconds or `CaptureTime`), "utc_ms" for Kafka millisecond timestamps,
    "object" for values kept as they are (lists, bytes)."""
    if dtype == "object":
        return pd.Series(values, dtype=object)
    plain = _plain(values, _TEXT if dtype in ("category", "string") else _INTEGERS)
    if dtype == "utc":
        return _capture_times(values, plain)
    if dtype == "utc_ms":
        counts = pd.Series(values, dtype="Int64") if plain is None else pd.Series(_integers(plain))
        return _datetimes(counts, "ms")
    if plain is not None and dtype == "category":
        return _categorical(plain)
    if plain is not None and dtype == "string":
        return pd.arrays.ArrowStringArray(plain)
    if plain is not None and dtype == "Int64":
        return _integers(plain)
    if plain is not None and dtype == "int64" and not plain.null_count:
        return plain.to_numpy()
    if dtype == "category":  # categories are text even when every value is missing
        found = pd.Categorical(pd.array(values, dtype="str"))
        if not len(found.categories):  # (none made so hold no Arrow chunk, which Arrow writes as nulls)
            found = pd.Categorical.from_codes(found.codes, pd.Index([], dtype="str"))
        return found
    return pd.array(values, dtype=dtype)


def _plain(values: Sequence[Any], kinds: tuple[pa.DataType, ...]) -> pa.Array | None:
    """`values` as an Arrow array when they are all of one plain kind (`kinds`), else None."""
    if not len(values):
        return None
    try:
        found = pa.array(values)
    except _NOT_PLAIN:
        return None
    if found.type not in kinds:
        return None
    return found.cast(kinds[0]) if found.type != kinds[0] else found


def _integers(found: pa.Array) -> pd.arrays.IntegerArray:
    mask = found.is_null().to_numpy(zero_copy_only=False)
    return pd.arrays.IntegerArray(found.fill_null(0).to_numpy(), mask)


def _categorical(found: pa.Array) -> pd.Categorical:
    """Text as a categorical whose categories are the distinct values in sorted order, as
    `pd.Categorical` makes them; missing values code -1."""
    encoded = found.dictionary_encode()
    dictionary = encoded.dictionary
    order = pc.array_sort_indices(dictionary).to_numpy()
    rank = np.empty(len(order), dtype=np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    indices = encoded.indices
    codes = rank[indices.fill_null(0).to_numpy()] if len(order) else np.full(len(found), -1, np.int32)
    if indices.null_count and len(order):
        codes[indices.is_null().to_numpy(zero_copy_only=False)] = -1
    categories = pd.Index(pd.array(dictionary.take(order), dtype="str"))
    return pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(categories))


_YEARS_1_TO_9999_US = (-62_135_596_800_000_000, 253_402_300_799_999_999)


def _datetimes(counts: pd.Series, unit: str) -> Any:
    """Counts of `unit` since the epoch as UTC datetimes. A time outside the years 1-9999
    (a corrupt capture timestamp, a wild value from the wire) is missing: neither pandas
    nor Python's datetime can hold or show every such value."""
    scale = 1 if unit == "us" else 1000
    low, high = (bound // scale for bound in _YEARS_1_TO_9999_US)
    return pd.to_datetime(counts.where((counts >= low) & (counts <= high)).astype("Int64"),
                          unit=unit, utc=True)


_NANOSECONDS_RANGE = (pd.Timestamp.min.value, pd.Timestamp.max.value)


def _capture_times(values: Sequence[Any], plain: pa.Array | None) -> Any:
    """Capture times (integer nanoseconds, or CaptureTime) at full resolution; one pandas
    cannot hold is missing."""
    low, high = _NANOSECONDS_RANGE
    if plain is not None:
        counts = pd.Series(_integers(plain))
        return pd.to_datetime(counts.where((counts >= low) & (counts <= high)), unit="ns", utc=True)
    found = [None if v is None else v.ns if isinstance(v, CaptureTime) else int(v) for v in values]
    found = [c if c is not None and low <= c <= high else None for c in found]
    return pd.to_datetime(pd.Series(found, dtype="Int64"), unit="ns", utc=True)


__all__ = ["Columns", "column", "typed"]
