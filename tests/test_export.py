"""`kdissect --export DIR --format parquet|csv` writes tables that read back as they were.

The command runs as a user runs it, in a subprocess, over the three shipped
captures at once (one sub-directory per capture); what pandas reads back from
the files must equal the tables `read_pcap` builds in memory.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import kdissect
from kdissect.present.analysis import Capture

CAPTURES = ("tansu_topic_partitions", "producers_story", "quorum_story")
TABLES = ("messages", "exchanges", "fields", "records", "batches", "topic_partitions",
          "producers", "quorum", "quorum_replicas", "quorum_nodes", "produce", "fetch", "groups",
          "errors")
# Tables whose every column reads back from Parquet exactly as it was (records' headers
# become key/value structs: see test_record_keys_values_and_headers_survive_parquet).
EXACT_TABLES = tuple(name for name in TABLES if name != "records")
ROOT = Path(__file__).resolve().parents[1]


def run_export(shipped_captures: Path, target: Path, export_format: str) -> list[str]:
    pcaps = [str(shipped_captures / f"{name}.pcap") for name in CAPTURES]
    run = subprocess.run(
        [sys.executable, "-m", "kdissect", "--export", str(target), "--format", export_format,
         *pcaps],
        capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    return run.stdout.splitlines()


@pytest.fixture(scope="module")
def in_memory(shipped_captures: Path) -> dict[str, Capture]:
    return {name: kdissect.read_pcap(shipped_captures / f"{name}.pcap") for name in CAPTURES}


@pytest.fixture(scope="module")
def parquet_dir(shipped_captures: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("parquet")
    printed = run_export(shipped_captures, target, "parquet")
    assert printed == [str(parquet_file(target, name, table)) for name in CAPTURES for table in TABLES]
    return target


def parquet_file(dataset: Path, name: str, table: str) -> Path:
    """Where `--export` writes a capture's table: Hive partitions by table and capture file."""
    return dataset / table / f"capture={name}.pcap" / f"part.{CAPTURES.index(name)}.parquet"


@pytest.fixture(scope="module")
def csv_dir(shipped_captures: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("csv")
    printed = run_export(shipped_captures, target, "csv")
    assert len(printed) == len(CAPTURES) * len(TABLES)
    return target


# -- Parquet ----------------------------------------------------------------------------

def from_parquet(path: Path, expected: pd.DataFrame) -> pd.DataFrame:
    """Read a Parquet table back, normalised only where Parquet legitimately cannot say more.

    A categorical column with no categories (a table with no rows, or a column
    whose every value is missing) has no value type: Arrow writes it as a
    null-typed column, which reads back as object or float64. Only such
    columns are cast back, after checking that they hold nothing but missing
    values. List columns come back as numpy arrays; they become lists again.
    """
    frame = pd.read_parquet(path)
    for column in expected.columns:
        dtype = expected[column].dtype
        if isinstance(dtype, pd.CategoricalDtype) and len(dtype.categories) == 0:
            assert frame[column].isna().all(), column
            frame[column] = frame[column].astype(dtype)
        elif pd.api.types.is_object_dtype(dtype):
            frame[column] = pd.Series([None if value is None else value.tolist()
                                       for value in frame[column]], dtype=object)
    return frame


@pytest.mark.parametrize("name", CAPTURES)
@pytest.mark.parametrize("table", EXACT_TABLES)
def test_parquet_export_reads_back_equal_to_the_table_in_memory(
        parquet_dir: Path, in_memory: dict[str, Capture], name: str, table: str) -> None:
    expected = in_memory[name].tables()[table]
    found = from_parquet(parquet_file(parquet_dir, name, table), expected)
    pd.testing.assert_frame_equal(found, expected, check_exact=True)


def test_parquet_keeps_real_dtypes_without_help(parquet_dir: Path) -> None:
    """The dtypes that matter survive as they are: no normalisation needed for these."""
    replicas = pd.read_parquet(parquet_file(parquet_dir, "quorum_story", "quorum_replicas"))
    assert str(replicas.last_fetch_timestamp.dtype.tz) == "UTC"
    assert isinstance(replicas.role.dtype, pd.CategoricalDtype)
    assert replicas.lag.dtype == "Int64" and replicas.last_fetch_timestamp.isna().any()
    producers = pd.read_parquet(parquet_file(parquet_dir, "producers_story", "producers"))
    assert producers.current_txn_start_offset.dtype == "Int64"
    assert isinstance(producers.error_message.dtype, pd.StringDtype)


def test_the_parquet_export_is_one_dataset_duckdb_reads_by_table_and_capture(
        parquet_dir: Path, in_memory: dict[str, Capture]) -> None:
    import duckdb

    for table in TABLES:
        rows = duckdb.sql(
            f"select capture, count(*) from read_parquet('{parquet_dir}/{table}/*/*.parquet', "
            "hive_partitioning=true, union_by_name=true) group by capture order by capture").fetchall()
        expected = sorted((f"{name}.pcap", len(in_memory[name].table(table))) for name in CAPTURES)
        assert rows == [row for row in expected if row[1]], table


# -- CSV ----------------------------------------------------------------------------------

def from_csv(path: Path, expected: pd.DataFrame) -> pd.DataFrame:
    """Read a CSV table back, giving each column the dtype of the table in memory.

    CSV carries text only, so the dtypes come from the in-memory table; times
    are parsed as UTC, lists from their printed form. CSV writes a missing
    value and an empty string the same way (an empty field), so both sides'
    string columns treat empty as missing.
    """
    frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
    for column in expected.columns:
        dtype = expected[column].dtype
        if isinstance(dtype, pd.DatetimeTZDtype):
            frame[column] = pd.to_datetime(frame[column], utc=True).astype(dtype)
        elif pd.api.types.is_object_dtype(dtype):
            frame[column] = pd.Series([None if pd.isna(value) else ast.literal_eval(value)
                                       for value in frame[column]], dtype=object)
        else:
            frame[column] = frame[column].astype(dtype)
    return frame


def empty_as_missing(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    for column in frame.columns:
        if isinstance(frame[column].dtype, pd.StringDtype):
            frame[column] = frame[column].replace("", pd.NA)
        elif isinstance(frame[column].dtype, pd.CategoricalDtype) and "" in frame[column].cat.categories:
            frame[column] = frame[column].cat.remove_categories([""])
    return frame


@pytest.mark.parametrize("name", CAPTURES)
@pytest.mark.parametrize("table", EXACT_TABLES)
def test_csv_export_reads_back_equal_to_the_table_in_memory(
        csv_dir: Path, in_memory: dict[str, Capture], name: str, table: str) -> None:
    expected = in_memory[name].tables()[table]
    found = from_csv(csv_dir / name / f"{table}.csv", expected)
    pd.testing.assert_frame_equal(empty_as_missing(found), empty_as_missing(expected),
                                  check_exact=True)


# -- from Python, and refusals -----------------------------------------------------------

def test_python_export_writes_every_table(in_memory: dict[str, Capture], tmp_path: Path) -> None:
    written = in_memory["quorum_story"].export(tmp_path / "out", "parquet")
    assert written == [tmp_path / "out" / f"{table}.parquet" for table in TABLES]
    replicas = pd.read_parquet(written[TABLES.index("quorum_replicas")])
    assert list(replicas.replica_id.unique()) == [1, 2, 3, 101, 102]


def test_unknown_export_format_is_refused(in_memory: dict[str, Capture], tmp_path: Path,
                                          shipped_captures: Path) -> None:
    with pytest.raises(ValueError, match="parquet or csv"):
        in_memory["quorum_story"].export(tmp_path, "xlsx")
    run = subprocess.run(
        [sys.executable, "-m", "kdissect", "--export", str(tmp_path), "--format", "xlsx",
         str(shipped_captures / "quorum_story.pcap")],
        capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 2 and "xlsx" in run.stderr
    assert list(tmp_path.iterdir()) == []


def test_record_keys_values_and_headers_survive_parquet(tmp_path: Path) -> None:
    capture = kdissect.read_pcap(ROOT / "captures" / "tansu_records.pcap")
    records = capture.records
    assert len(records) and records.headers.map(len).sum() > 0
    capture.export(tmp_path)
    found = pd.read_parquet(tmp_path / "records.parquet")
    assert found.key.tolist() == records.key.tolist()
    assert found.value.tolist() == records.value.tolist()
    assert [[(h["key"], h["value"]) for h in headers] for headers in found.headers] == [
        list(headers) for headers in records.headers]


def test_record_bytes_are_hex_and_headers_json_in_csv(tmp_path: Path) -> None:
    capture = kdissect.read_pcap(ROOT / "captures" / "tansu_records.pcap")
    records = capture.records
    capture.export(tmp_path, "csv")
    found = pd.read_csv(tmp_path / "records.csv", dtype=str, keep_default_na=False)
    assert found.value.tolist() == [("" if v is None else v.hex()) for v in records.value]
    assert [json.loads(h) for h in found.headers] == [
        [[key, data.hex()] for key, data in headers] for headers in records.headers]
