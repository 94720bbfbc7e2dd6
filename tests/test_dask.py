"""Dask tables over many captures equal the pandas tables, locally and on a cluster."""

from __future__ import annotations

from pathlib import Path

import dask
import duckdb
import pandas as pd
import pytest
from distributed import Client, LocalCluster

import kdissect
import kdissect.dask
from tests.conftest import CAPTURES
from tools.split_capture import packet_count, random_cuts, split

SHIPPED = sorted(CAPTURES.glob("*.pcap"))
SOME_TABLES = ("messages", "exchanges", "quorum_replicas", "producers", "topic_partitions", "produce",
               "fetch", "groups", "errors")


def comparable(frame: pd.DataFrame) -> pd.DataFrame:
    """Categorical columns as text: categories legitimately differ between partitions, and
    pandas turns categoricals of differing categories into strings when it concatenates."""
    frame = frame.reset_index(drop=True)
    for column in frame.columns:
        dtype = frame[column].dtype
        if isinstance(dtype, pd.CategoricalDtype | pd.StringDtype):
            frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    return frame


def pandas_tables(groups: list[list[Path]], name: str) -> pd.DataFrame:
    return pd.concat([kdissect.read_pcap(group).table(name) for group in groups],
                     ignore_index=True)


def assert_equal_tables(tables: dict, groups: list[list[Path]],
                        names: tuple[str, ...] = SOME_TABLES) -> None:
    computed = dask.compute(*(tables[name] for name in names))
    for name, frame in zip(names, computed, strict=True):
        expected = pandas_tables(groups, name)
        assert len(frame) == len(expected) > 0, name
        pd.testing.assert_frame_equal(comparable(frame), comparable(expected), obj=name)


def test_one_partition_per_file_on_the_local_scheduler() -> None:
    tables = kdissect.dask.read_pcaps([str(p) for p in SHIPPED])
    assert set(SOME_TABLES) <= set(tables)
    assert all(frame.npartitions == len(SHIPPED) for frame in tables.values())
    assert_equal_tables(tables, [[p] for p in SHIPPED])


def test_a_glob_is_one_partition_per_matching_file() -> None:
    tables = kdissect.dask.read_pcaps(str(CAPTURES / "*_story.pcap"), tables="messages")  # one name
    stories = sorted(CAPTURES.glob("*_story.pcap"))
    assert list(tables) == ["messages"] and tables["messages"].npartitions == len(stories)
    assert len(tables["messages"].compute()) == sum(len(kdissect.read_pcap(p)) for p in stories)


def test_a_rotated_set_is_one_partition_read_as_one_capture(tmp_path: Path) -> None:
    capture = CAPTURES / "quorum_story.pcap"
    data = capture.read_bytes()
    parts = []
    for index, part in enumerate(split(data, random_cuts(packet_count(data), 3, 2))):
        parts.append(tmp_path / f"rot-{index}.pcap")
        parts[-1].write_bytes(part)
    other = CAPTURES / "producers_story.pcap"
    tables = kdissect.dask.read_pcaps([[str(p) for p in parts], str(other)])
    assert_equal_tables(tables, [parts, [other]], ("messages", "exchanges", "quorum_replicas",
                                                  "producers"))


def test_the_same_tables_on_a_distributed_cluster() -> None:
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        tables = kdissect.dask.read_pcaps([str(p) for p in SHIPPED])
        assert_equal_tables(tables, [[p] for p in SHIPPED])
        assert len(client.scheduler_info()["workers"]) == 2


def test_parquet_dataset_read_by_duckdb(tmp_path: Path) -> None:
    tables = kdissect.dask.read_pcaps([str(p) for p in SHIPPED], tables=["messages", "producers"])
    kdissect.dask.to_parquet(tables, tmp_path / "dataset")
    rows = duckdb.sql(
        f"select capture, count(*) from read_parquet('{tmp_path}/dataset/messages/*/*.parquet', "
        "hive_partitioning=true) group by capture order by capture").fetchall()
    assert rows == sorted((p.name, len(kdissect.read_pcap(p))) for p in SHIPPED)
    producers = duckdb.sql(
        f"select count(*) from read_parquet('{tmp_path}/dataset/producers/*/*.parquet', "
        "hive_partitioning=true)").fetchall()
    assert producers == [(sum(len(kdissect.read_pcap(p).producers) for p in SHIPPED),)]


def test_a_table_computed_alone_is_the_only_one_made(monkeypatch) -> None:
    """Computing `messages` makes no other table: not `fields`, the costliest, nor the
    per-API ones (one pass that decodes bodies)."""
    from kdissect.present import analysis

    def refused(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a table not computed was made")

    tables = kdissect.dask.read_pcaps([str(p) for p in SHIPPED])
    monkeypatch.setattr(analysis, "_fields_frame", refused)
    monkeypatch.setattr(analysis, "_api_frames", refused)
    with dask.config.set(scheduler="sync"):
        assert len(tables["messages"].compute()) == sum(len(kdissect.read_pcap(p)) for p in SHIPPED)
        with pytest.raises(AssertionError, match="not computed"):
            tables["fields"].compute()


def test_tables_computed_together_read_each_capture_once(monkeypatch) -> None:
    reads: list[object] = []
    real = kdissect.dask.read_pcap

    def counted(group: object, **options: object) -> object:
        reads.append(group)
        return real(group, **options)

    monkeypatch.setattr(kdissect.dask, "read_pcap", counted)
    tables = kdissect.dask.read_pcaps([str(p) for p in SHIPPED])
    computed = dask.compute(tables["messages"], tables["fields"], tables["producers"], tables["errors"])
    assert sorted(map(str, reads)) == sorted(str([str(p)]) for p in SHIPPED)
    assert [len(frame) for frame in computed] == [
        sum(len(kdissect.read_pcap(p).table(name)) for p in SHIPPED)
        for name in ("messages", "fields", "producers", "errors")]


def test_a_capture_moved_to_another_worker_is_read_again_there() -> None:
    """Pickled (Dask moving or spilling it), a read capture keeps only what to read; the
    tables it makes after are the same."""
    import pickle

    path = str(CAPTURES / "quorum_story.pcap")
    read = kdissect.dask.ReadCapture([path], {"ports": (), "detect": True})
    moved = pickle.loads(pickle.dumps(read))
    assert len(pickle.dumps(read)) < 1024 and moved._capture is None
    assert read.__sizeof__() > (CAPTURES / "quorum_story.pcap").stat().st_size // 2
    for name in ("messages", "quorum_replicas"):
        pd.testing.assert_frame_equal(moved.tables([name])[name], read.tables([name])[name])
