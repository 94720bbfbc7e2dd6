"""`kdissect --export DIR --format parquet|csv` writes tables that read back as they were.

The command runs as a user runs it, in a subprocess, over the three shipped
captures at once, read as captures of their own (`--separate`: one partition, or
one CSV sub-directory, per capture); what pandas reads back from the files must
equal the tables `read_pcap` builds in memory. Files given without `--separate`
are one capture, as the listing reads them: a rotated set exports as the capture
it was cut from.
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
    return exported(target, "--format", export_format, "--separate", *pcaps)


def exported(target: Path, *arguments: str, stdin: bytes | None = None, status: int = 0) -> list[str]:
    """`kdissect --export target ARGUMENTS`: the files it says it wrote (exit `status`)."""
    run = subprocess.run([sys.executable, "-m", "kdissect", "--export", str(target), *arguments],
                         capture_output=True, input=stdin, timeout=120, check=False, cwd=ROOT)
    assert run.returncode == status, run.stderr
    if status == 0:
        assert run.stderr == b""
    return run.stdout.decode().splitlines()


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
    whose every value is missing) reads back with categories of no values, typed
    as Parquet has them: only such columns are cast back, after checking that
    they hold nothing but missing values. List columns come back as numpy
    arrays; they become lists again.
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


def test_every_file_of_a_table_in_the_dataset_has_one_schema(parquet_dir: Path) -> None:
    """Captures without records, or whose lists of broker ids are all empty, write those
    columns as the others do (not as nulls), so that Polars, which wants one schema,
    reads a table's files together. Only a categorical's code width may differ (the
    number of its categories says it), which every reader widens."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def shape(field: pa.Field) -> tuple[str, pa.DataType]:
        return field.name, field.type.value_type if pa.types.is_dictionary(field.type) else field.type

    for table in TABLES:
        schemas = {path.parent.name: [shape(field) for field in pq.read_schema(path)]
                   for path in sorted((parquet_dir / table).glob("*/*.parquet"))}
        assert len(schemas) == len(CAPTURES), table
        first = next(iter(schemas.values()))
        assert all(schema == first for schema in schemas.values()), (table, schemas)
        assert not any(pa.types.is_null(kind) or (pa.types.is_list(kind) and pa.types.is_null(kind.value_type))
                       for _name, kind in first), (table, first)


def test_polars_reads_every_table_of_the_dataset(parquet_dir: Path, in_memory: dict[str, Capture]) -> None:
    import polars as pl

    for table in TABLES:
        frame = pl.scan_parquet(parquet_dir / table / "*" / "*.parquet", hive_partitioning=True).collect()
        assert len(frame) == sum(len(capture.table(table)) for capture in in_memory.values()), table
        assert sorted(frame["capture"].unique().to_list()) == sorted(
            f"{name}.pcap" for name, capture in in_memory.items() if len(capture.table(table))), table


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


# -- several files ----------------------------------------------------------------------

def test_a_rotated_set_exports_as_the_capture_it_was_cut_from(shipped_captures: Path, tmp_path: Path) -> None:
    """Files given together are one capture, as the listing reads them: the messages and
    exchanges of a split capture equal the unsplit one's, `file` apart (numbering runs on,
    a request in one file stays paired with its response in the next)."""
    from tools.split_capture import split

    data = (shipped_captures / "quorum_story.pcap").read_bytes()
    parts = []
    for index, part in enumerate(split(data, [21])):
        parts.append(tmp_path / f"quorum-{index}.pcap")
        parts[-1].write_bytes(part)
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    exported(whole, str(shipped_captures / "quorum_story.pcap"))
    printed = exported(cut, *map(str, parts))
    assert str(cut / "messages" / "capture=quorum-1.pcap" / "part.0.parquet") in printed
    for table, order in (("messages", "number"), ("exchanges", "request"), ("quorum", "number")):
        expected = pd.read_parquet(whole / table).drop(columns=["file", "capture"])
        found = pd.read_parquet(cut / table)
        if table == "messages":  # (a table of some APIs may lie in one file only)
            assert set(found["capture"].astype(str)) == {"quorum-0.pcap", "quorum-1.pcap"}
        found = found.drop(columns=["file", "capture"]).sort_values(order, kind="stable")
        pd.testing.assert_frame_equal(found.reset_index(drop=True), expected, check_exact=True)


def test_separate_csv_exports_of_files_named_alike_keep_both(shipped_captures: Path, tmp_path: Path) -> None:
    """Two folders' `cap.pcap` with --separate: two CSV folders, nothing overwritten."""
    first, second = tmp_path / "a" / "cap.pcap", tmp_path / "b" / "cap.pcap"
    for path, name in ((first, "quorum_story"), (second, "producers_story")):
        path.parent.mkdir()
        path.write_bytes((shipped_captures / f"{name}.pcap").read_bytes())
    target = tmp_path / "out"
    printed = exported(target, "--format", "csv", "--separate", str(first), str(second))
    assert len(printed) == len(set(printed)) == 2 * len(TABLES)
    for folder, name in (("cap", "quorum_story"), ("cap-2", "producers_story")):
        rows = pd.read_csv(target / folder / "messages.csv")
        assert len(rows) == len(kdissect.read_pcap(shipped_captures / f"{name}.pcap").messages)


def test_an_export_from_standard_input_is_one_partition(shipped_captures: Path, tmp_path: Path) -> None:
    data = (shipped_captures / "quorum_story.pcap").read_bytes()
    printed = exported(tmp_path / "out", "-", stdin=data)
    assert str(tmp_path / "out" / "messages" / "capture=standard input" / "part.0.parquet") in printed
    assert sorted(p.name for p in (tmp_path / "out" / "messages").iterdir()) == ["capture=standard input"]
    assert set(pd.read_parquet(tmp_path / "out" / "messages")["file"].astype(str)) == {"standard input"}


def test_an_unreadable_file_in_an_export_is_named_and_the_rest_written(shipped_captures: Path,
                                                                       tmp_path: Path) -> None:
    not_a_capture = tmp_path / "notes.txt"
    not_a_capture.write_text("not a capture")
    printed = exported(tmp_path / "out", str(not_a_capture), str(shipped_captures / "quorum_story.pcap"),
                       status=2)
    assert printed and all("capture=quorum_story.pcap" in line for line in printed)


def test_the_export_reads_and_writes_without_the_cycle_collector(
        shipped_captures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Every message is kept until its tables are written, none in a cycle: the collector
    is kept out meanwhile, and given back after."""
    import gc

    from kdissect.cli import main
    from kdissect.present import export

    seen: list[bool] = []
    write = export._write

    def writing(*args: object, **kwargs: object) -> bool:
        seen.append(gc.isenabled())
        return write(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(export, "_write", writing)
    assert main(["--export", str(tmp_path / "out"), str(shipped_captures / "quorum_story.pcap")]) == 0
    assert capsys.readouterr().out.count("part.0.parquet") == len(TABLES)
    assert seen == [False] and gc.isenabled()


def test_a_long_table_is_written_a_slice_at_a_time_as_pandas_writes_it(shipped_captures: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A table longer than `WRITE_ROWS` is made into Arrow a slice at a time, each a row
    group: the file is byte for byte what pandas writes with row groups of that size, and
    reads back equal (records included: bytes, and headers as key/value structs)."""
    from kdissect.present import parquet
    from kdissect.present.analysis import exportable

    capture = kdissect.read_pcap(shipped_captures / "tansu_records.pcap")
    monkeypatch.setattr(parquet, "WRITE_ROWS", 25)
    for name in ("fields", "records"):
        frame = exportable(capture.table(name), text=False)
        assert len(frame) > 2 * parquet.WRITE_ROWS
        parquet.write_parquet(frame, tmp_path / f"{name}.parquet")
        frame.to_parquet(tmp_path / f"{name}-pandas.parquet", index=False, row_group_size=parquet.WRITE_ROWS)
        assert (tmp_path / f"{name}.parquet").read_bytes() == (tmp_path / f"{name}-pandas.parquet").read_bytes()
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / f"{name}.parquet"),
                                      pd.read_parquet(tmp_path / f"{name}-pandas.parquet"))


def test_tables_made_on_workers_are_written_byte_for_byte_as_one_process_writes_them(
        shipped_captures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same Parquet files whether one process or table workers made the tables: down
    to a categorical column where every value is missing, or a table without rows (text
    categories, not a column of nulls)."""
    from kdissect.present import parallel_tables
    from kdissect.present.export import written_dataset

    monkeypatch.setattr(parallel_tables, "PARALLEL_MESSAGES", 1)  # every table on the workers
    for name in ("incident", "tansu_records", "quorum_story"):
        path = str(shipped_captures / f"{name}.pcap")
        messages = kdissect.read_pcap(path, jobs=1).message_list
        written = {}
        for jobs in (1, 2):
            capture = Capture(messages, source=path, files=[path], jobs=jobs)
            written[jobs] = written_dataset(capture, tmp_path / f"{name}-{jobs}", [path], 0)
            if capture._workers is not None:
                capture._workers.stop()
        assert [p.relative_to(tmp_path / f"{name}-1") for p in written[1]] == \
            [p.relative_to(tmp_path / f"{name}-2") for p in written[2]]
        for one, two in zip(written[1], written[2], strict=True):
            assert one.read_bytes() == two.read_bytes(), one
