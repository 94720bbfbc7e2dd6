"""`--jobs` workers that read only their share of a file: the index of a classic pcap
file's records, the plan that places each record's connection in a share, and a worker
that reads by the plan sending exactly what it sends when it reads every record.
"""

from __future__ import annotations

import gzip
import mmap
import multiprocessing
import os
import struct
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from craft import Conversation, ethernet, metadata_request, metadata_response, records, write_pcap
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.make_capture import build
from kdissect import parallel
from kdissect.ingest import capture
from kdissect.ingest.capture import NotIndexable, PcapIndex, read_records
from kdissect.ingest.framing import DEFAULT_PORTS, MAX_FRAME_SIZE
from kdissect.ingest.reassembly import CLOSED_BUCKETS, MAX_HELD_BYTES
from tests.conftest import CAPTURES
from tests.test_jobs import drop_packets, same_output

SHIPPED = sorted(CAPTURES.glob("*.pcap"))


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real exchanges over 64 interleaved connections, and a copy with every 29th packet
    lost (holes; connections without SYN or FIN that close on capture time)."""
    folder = tmp_path_factory.mktemp("index")
    whole = folder / "many.pcap"
    build(whole, 0.3, "mixed", sources=SHIPPED)
    (folder / "lossy.pcap").write_bytes(drop_packets(whole.read_bytes(), every=29))
    return whole


@pytest.fixture(scope="module")
def closing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight connections exchange Metadata for three seconds, 1 ms a packet; meanwhile twelve
    others each send a request with a hole in it, then both FINs: each closes once half a
    second of capture time has passed, at a packet of whichever connection comes then."""
    steady = [Conversation.between((f"10.0.1.{i}", 41000 + i), ("10.0.0.9", 9092)) for i in range(8)]
    timeline = [packet for conversation in steady for packet in conversation.handshake()]
    correlation = 0
    while len(timeline) < 3000:
        conversation = steady[correlation % len(steady)]
        correlation += 1
        timeline += conversation.send(True, metadata_request(correlation))
        timeline += conversation.send(False, metadata_response(correlation))
    for k in range(12):
        holed = Conversation.between((f"10.0.2.{k}", 42000 + k), ("10.0.0.9", 9092))
        parts = holed.handshake() + holed.send(True, metadata_request(7), chunk=10)
        del parts[4]  # the request's second segment is never captured
        at = 100 + 200 * k
        timeline[at:at] = parts + holed.close()
    path = tmp_path_factory.mktemp("index") / "closing.pcap"
    return write_pcap(path, records(timeline, wrap=ethernet))


def indexed_records(path: Path, size: int) -> list[tuple[int, int, int, bytes, int]]:
    index = PcapIndex(path)
    try:
        return [(chunk.first + at + 1, int(chunk.timestamps[at]), index.linktype,
                 index.data[start:start + length], int(chunk.original[at]))
                for chunk in index.chunks(size)
                for at, (start, length) in enumerate(zip(chunk.starts.tolist(), chunk.captured.tolist(),
                                                         strict=True))]
    finally:
        index.close()


@pytest.mark.parametrize("size", [1, 7, 4096])
def test_the_index_gives_every_record_as_reading_in_order_does(many: Path, size: int) -> None:
    for path in (*SHIPPED, many, many.with_name("lossy.pcap")):
        assert indexed_records(path, size) == list(read_records(path)), path


def test_a_file_that_is_not_plainly_indexable_is_read_in_order(tmp_path: Path) -> None:
    whole = SHIPPED[0].read_bytes()
    cases = {
        "compressed.pcap.gz": gzip.compress(whole),
        "cut.pcap": whole[:-5],  # the last record cut short
        "header.pcap": whole + b"\x00" * 9,  # a record header cut short
        "long.pcap": _with_snaplen(whole, 60),  # captured lengths beyond the snap length
        "short.pcap": whole[:20],
    }
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(NotIndexable):
            list(PcapIndex(path).chunks())
        assert parallel._SharePlan.of([str(path)], 2) is None


def _with_snaplen(data: bytes, snaplen: int) -> bytes:
    return data[:16] + struct.pack("<I", snaplen) + data[20:]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 10**9), min_size=CLOSED_BUCKETS, max_size=CLOSED_BUCKETS),
       st.integers(2, 8))
def test_buckets_are_shared_so_no_worker_carries_more_than_one_bucket_beyond_another(
        weights: list[int], jobs: int) -> None:
    owner = parallel.balanced([float(w) for w in weights], jobs)
    loads = [sum(w for w, o in zip(weights, owner, strict=True) if o == worker) for worker in range(jobs)]
    assert set(owner) <= set(range(jobs))
    assert max(loads) - min(loads) <= max(weights)
    assert owner == parallel.balanced([float(w) for w in weights], jobs)  # alike in every worker


def test_every_connection_of_the_capture_is_in_one_share(many: Path) -> None:
    plan = parallel._SharePlan.of([str(many)], 3)
    assert plan is not None
    placed = sum(int((buckets >= 0).sum()) for buckets in plan.buckets)
    assert placed == sum(1 for _ in read_records(many))  # every packet is plain Ethernet IPv4 TCP
    assert sorted(set(plan.owner)) == [0, 1, 2]


def worker_output(path: Path, index: int, jobs: int, owner: list[int] | None) -> list[Any]:
    """What worker `index` of `jobs` sends, run here: its events and its summary (without
    the CPU seconds and bytes read), reading by the plan, or (given `owner`) every record."""
    receiver, sender = multiprocessing.Pipe(duplex=False)
    received: list[Any] = []

    def drain() -> None:
        try:
            while True:
                received.append(receiver.recv())
        except EOFError:
            pass

    reader = threading.Thread(target=drain)
    reader.start()
    options = {"ports": frozenset(DEFAULT_PORTS), "detect": True, "max_frame_size": MAX_FRAME_SIZE,
               "max_held": MAX_HELD_BYTES, "show_secrets": False, "names": [str(path)], "definitions": None}
    worker = parallel._Worker(sender, index, jobs, options, None)
    if owner is not None:
        worker.owner = owner
        plan, parallel._SharePlan.of = parallel._SharePlan.of, lambda *_: None  # type: ignore[method-assign]
    try:
        worker.run([str(path)])
    finally:
        if owner is not None:
            parallel._SharePlan.of = plan  # type: ignore[method-assign]
        sender.close()
        reader.join()
    events = [event for kind, payload in received if kind == "events" for event in payload[0]]
    summary = next(payload for kind, payload in received if kind == "end")
    return [*events, {k: v for k, v in summary.items() if k not in ("cpu", "read")}]


@pytest.mark.parametrize(("jobs", "chunk"), [(2, 50), (3, 400)])
def test_a_worker_reading_by_the_index_sends_what_it_sends_reading_every_record(
        many: Path, closing: Path, monkeypatch: pytest.MonkeyPatch, jobs: int, chunk: int) -> None:
    """Small chunks: connections, closings on capture time and the ticks of other shares'
    packets all cross chunk boundaries; chunks of 50 records are too many to keep from the
    first walk of the file, chunks of 400 are kept."""
    monkeypatch.setattr(capture, "INDEX_CHUNK", chunk)
    for path in (many, many.with_name("lossy.pcap"), closing):
        plan = parallel._SharePlan.of([str(path)], jobs)
        assert plan is not None
        for index in range(jobs):
            indexed = worker_output(path, index, jobs, None)
            assert any(event[1] == "frame" for event in indexed[:-1])
            assert indexed == worker_output(path, index, jobs, plan.owner)
    timed = [event for index in range(jobs) for event in worker_output(closing, index, jobs, None)[:-1]
             if event[0][1] == 1]  # closed when capture time ran past the grace
    assert len({event[0][:2] for event in timed}) == 12


def test_connections_closed_on_capture_time_read_the_same_with_two_jobs(
        capsys: pytest.CaptureFixture[str], closing: Path) -> None:
    out = same_output(capsys, "-V", str(closing))
    assert out.count("segments lost") >= 12


def test_a_file_shorter_than_the_bytes_a_plan_reads_of_a_record(tmp_path: Path) -> None:
    """A record too short to be placed, in a file shorter than the 48 bytes read of each one."""
    path = write_pcap(tmp_path / "short.pcap", records([b"\x45" * 3]))
    plan = parallel._SharePlan.of([str(path)], 2)
    assert plan is not None
    assert [buckets.tolist() for buckets in plan.buckets] == [[-1]]


def plans_equal(made: Any, expected: Any) -> bool:
    """Two `_SharePlan`s of one file hold the same owners, buckets and kept chunks."""
    def arrays(plan: Any) -> list[list[Any]]:
        kept = [[chunk.first, *(getattr(chunk, name).tolist() for name in ("starts", "captured", "original",
                                                                             "timestamps"))]
                for chunk in plan.kept or ()]
        return [plan.owner, [buckets.tolist() for buckets in plan.buckets], kept, plan.kept is None]
    return arrays(made) == arrays(expected) and bytes(made.index.data) == bytes(expected.index.data)


@pytest.mark.parametrize(("jobs", "chunk"), [(2, 50), (3, 400)])
def test_the_plan_made_beside_the_warm_up_is_the_plan_made_here(
        many: Path, monkeypatch: pytest.MonkeyPatch, jobs: int, chunk: int) -> None:
    """`_PlanBeside`: the plan a forked child made while this process did something else
    equals the plan made here, with the index's chunks kept (chunks of 400 records) or not."""
    monkeypatch.setattr(capture, "INDEX_CHUNK", chunk)
    here, made, calls = os.getpid(), parallel._SharePlan.of, []

    def counted(paths: list[str], jobs: int) -> Any:
        calls.extend([os.getpid()] if os.getpid() == here else [])
        return made(paths, jobs)

    monkeypatch.setattr(parallel._SharePlan, "of", staticmethod(counted))
    for path in (many, many.with_name("lossy.pcap")):
        with parallel._PlanBeside([str(path)], jobs) as planned:
            box = planned.result()
        assert not calls  # made in the child only
        expected = made([str(path)], jobs)
        assert planned.pid == 0 and len(box) == 1 and box[0] is not None
        assert plans_equal(box[0], expected)
        assert (box[0].kept is None) == (chunk == 50)


def mapped(array: Any) -> bool:
    """Whether numpy array `array` is a view of a mapping (an mmap), not memory of its own."""
    while isinstance(array, np.ndarray):
        array = array.base
    return isinstance(array, memoryview) and isinstance(array.obj, mmap.mmap)


@pytest.mark.parametrize("memfd", [True, False])
def test_the_plan_made_beside_comes_through_shared_memory(
        many: Path, monkeypatch: pytest.MonkeyPatch, memfd: bool) -> None:
    """The child's arrays are taken where it wrote them, in a memfd both map, not copied
    down the pipe (only the pickle's frame is); without memfds they come down the pipe,
    and the plan is the same either way."""
    if not memfd:
        monkeypatch.delattr(os, "memfd_create")
    sent: list[int] = []
    loads = parallel.pickle.loads
    monkeypatch.setattr(parallel.pickle, "loads", lambda data, **kw: sent.append(len(data)) or loads(data, **kw))
    with parallel._PlanBeside([str(many)], 2) as planned:
        box = planned.result()
    plan = box[0]
    assert plan is not None and plans_equal(plan, parallel._SharePlan.of([str(many)], 2))
    arrays = [*plan.buckets, *(chunk.starts for chunk in plan.kept or [])]
    assert all(mapped(array) == memfd for array in arrays)
    carried = sum(array.nbytes for array in arrays)
    assert (sent[0] < carried / 10) == memfd  # the pipe carried the frame only, or everything


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="no memfd on this system")
@pytest.mark.parametrize("sizes", [[0, 0], [0, 3, 0, 1000], [5]])
def test_arrays_written_to_shared_memory_come_back_as_they_were(sizes: list[int]) -> None:
    """`_shared` then `_mapped`: a pickle's out-of-band arrays, empty ones too (nothing to
    map then), each back with its values."""
    arrays = [np.arange(size, dtype=np.int64) * 7 for size in sizes]
    buffers: list[Any] = []
    frame = parallel.pickle.dumps(arrays, protocol=5, buffer_callback=buffers.append)
    memory = os.memfd_create("test")
    try:
        places = parallel._shared(memory, buffers)
        back = parallel.pickle.loads(frame, buffers=parallel._mapped(memory, places))
    finally:
        os.close(memory)
    assert all(start % 64 == 0 for start, _length in places)
    assert [array.tolist() for array in back] == [array.tolist() for array in arrays]


def test_a_plan_that_cannot_be_mapped_is_made_here(many: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No room to map what the child wrote: the plan is made here, as without a child."""
    def refused(*_args: Any, **_kwargs: Any) -> Any:
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(parallel, "_mapped", refused)
    with parallel._PlanBeside([str(many)], 2) as planned:
        box = planned.result()
    assert box[0] is not None and plans_equal(box[0], parallel._SharePlan.of([str(many)], 2))


def test_a_file_with_no_plan_has_none_made_beside(tmp_path: Path) -> None:
    path = tmp_path / "capture.pcap.gz"
    path.write_bytes(gzip.compress(SHIPPED[0].read_bytes()))
    with parallel._PlanBeside([str(path)], 2) as planned:
        assert planned.result() == [None]
    with parallel._PlanBeside([str(SHIPPED[0])] * 2, 2) as planned:
        assert planned.result() == [None]  # several files: no plan


def test_a_child_that_fails_leaves_the_plan_to_be_made_here(
        many: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child raising (or killed) is not an error: the plan is made here instead."""
    here = os.getpid()
    made = parallel._SharePlan.of

    def failing_in_the_child(paths: list[str], jobs: int) -> Any:
        if os.getpid() != here:
            raise MemoryError("no room")
        return made(paths, jobs)

    monkeypatch.setattr(parallel._SharePlan, "of", staticmethod(failing_in_the_child))
    with parallel._PlanBeside([str(many)], 2) as planned:
        assert planned.pid != 0
        box = planned.result()
    assert plans_equal(box[0], made([str(many)], 2))


def test_leaving_early_ends_the_child(many: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception while the child plans (the warm-up interrupted): the child is ended and
    reaped, its pipe closed."""
    monkeypatch.setattr(parallel._SharePlan, "of", staticmethod(lambda *_: time.sleep(60)))
    with pytest.raises(KeyboardInterrupt), parallel._PlanBeside([str(many)], 2) as planned:
        child = planned.pid
        raise KeyboardInterrupt
    with pytest.raises(ChildProcessError):
        os.waitpid(child, os.WNOHANG)  # reaped already
