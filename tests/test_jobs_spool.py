"""`--jobs N`: the text the workers make reaches the output through shared memory.

A worker copies each message's text into its ring (`spool.Ring`) and sends where it
lies; the merging process writes it from there, between its own bytes, and frees the
ring as it goes. A text the ring has no room for travels as bytes. Whichever way, the
output must be one process's bytes, to a regular file, a pipe or what has no file
descriptor at all.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kdissect import parallel, spool
from kdissect.cli import main
from kdissect.spool import Piece, Ring, SpooledOutput, read_all
from tests.conftest import CAPTURES
from tests.test_jobs_text import tangled  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parents[1]


def test_a_ring_keeps_each_text_whole_and_takes_no_more_than_was_written_out() -> None:
    ring = Ring(100)
    assert ring.put(b"a" * 60) == (0, 60)
    assert ring.put(b"b" * 30) == (60, 30)
    assert ring.put(b"c" * 20) == b"c" * 20  # would start the next turn over text not yet written out
    assert Piece(ring, 0, 60).read() == b"a" * 60  # written out: that room is the worker's again
    assert ring.put(b"c" * 20) == (100, 20)  # whole, at the start of the next turn
    assert bytes(ring.view[:20]) == b"c" * 20
    assert ring.put(b"d" * 101) == b"d" * 101  # longer than the ring: as bytes
    assert read_all(Piece(ring, 60, 30)) == b"b" * 30 and ring.written.value == 90
    assert read_all(b"sent as bytes") == b"sent as bytes"


def test_an_ascii_str_goes_into_a_ring_as_its_bytes() -> None:
    """A worker's text of ASCII characters only goes on as a str (`cli._TextLines`): the ring
    holds its bytes, and has them back as bytes when it has no room for it."""
    ring = Ring(100)
    assert ring.put("a" * 60) == (0, 60)
    assert bytes(ring.view[:60]) == b"a" * 60
    assert ring.put("b" * 50) == b"b" * 50  # no room: its bytes, to go through the pipe
    with pytest.raises((ValueError, UnicodeEncodeError)):
        ring.put("é")


@pytest.mark.parametrize("length", [0, 1, 15, 16, 17, 63, 64, 65, 4095, 4096, 4097, 4160, 70_001])
@pytest.mark.parametrize("at", [0, 1, 7, 16, 33])
def test_the_copy_in_c_writes_what_the_python_writes(length: int, at: int) -> None:
    """Bytes and ASCII strs, short (copied) and long (streamed past the caches), at every
    alignment: the same memory as the Python's, and nothing written beyond the text."""
    put_c = pytest.importorskip("kdissect._spool_c").put
    text = bytes((index * 7 + 3) % 128 for index in range(length))
    for given in (text, text.decode("ascii")):
        memories = [bytearray(b"\xee" * (at + length + 40)) for _ in range(2)]
        spool.put(memories[0], at, given)
        put_c(memories[1], at, given)
        assert memories[1] == memories[0]
        assert memories[0][at:at + length] == text and memories[0][at + length:] == b"\xee" * 40


def test_the_copy_in_c_refuses_what_the_python_refuses() -> None:
    put_c = pytest.importorskip("kdissect._spool_c").put
    for put in (spool.put, put_c):
        with pytest.raises(ValueError):
            put(bytearray(10), 5, b"x" * 6)  # beyond the memory
        with pytest.raises(ValueError):
            put(bytearray(10), -1, b"x")
        with pytest.raises(ValueError):  # not ASCII (UnicodeEncodeError is a ValueError)
            put(bytearray(10), 0, "é")
    with pytest.raises((TypeError, BufferError)):
        put_c(b"read only", 0, b"x")
    with pytest.raises(ValueError):
        put_c(bytearray(10), 0, 5)


def test_a_ring_places_texts_in_c_where_the_python_places_them() -> None:
    """`spool.place` (where `Ring.put` puts a text) and `_spool_c.place`, over texts of many
    lengths, bytes and ASCII strs, as the merging process writes some out: the same places,
    the same refusals, the same memory."""
    import random

    place_c = pytest.importorskip("kdissect._spool_c").place
    header, size = spool.HEADER_BYTES, 1000
    memories = [bytearray(header + size) for _ in range(2)]
    ends, written = [0, 0], 0
    choose = random.Random(7)
    for turn in range(3000):
        length = choose.choice([0, 1, 7, 64, 300, 999, 1000, 1001, choose.randrange(600)])
        text: bytes | str = bytes([turn % 128]) * length
        if turn % 2:
            text = text.decode("ascii")
        places = [spool.place(memories[0], header, ends[0], text), place_c(memories[1], header, ends[1], text)]
        assert places[0] == places[1] and memories[0] == memories[1], (turn, length)
        if places[0] >= 0:
            assert memories[0][header + places[0] % size:][:length] == bytes([turn % 128]) * length
            ends = [places[0] + length] * 2
        if choose.random() < 0.3:  # the merge writes out what was put
            written = ends[0] - choose.randrange(min(ends[0], size) + 1)
            for memory in memories:
                memory[:8] = written.to_bytes(8, sys.byteorder)
    full = bytearray(header + 10)
    full[:8] = (-100).to_bytes(8, sys.byteorder, signed=True)  # nothing written out: no room
    for place in (spool.place, place_c):
        assert place(full, header, 0, "x" * 5) == -1
        with pytest.raises(ValueError):  # not ASCII: refused, room or not
            place(full, header, 0, "\u00e9")
        with pytest.raises(ValueError):
            place(bytearray(header + 10), header, 0, "\u00e9")
    with pytest.raises(ValueError):
        place_c(bytearray(header + 10), 3, 0, b"x")  # not a ring's header


def test_lines_are_joined_straight_into_a_ring_in_c_as_in_the_python() -> None:
    """`spool.place_lines` and `_spool_c.place_lines` (`Ring.put_lines`: a -V text's lines
    joined straight into the ring): over many sets of lines, as the merging process writes
    some out, the same places and lengths, the same refusals, and the ring holding
    `"\\n".join(lines)` where it lies."""
    import random

    place_lines_c = pytest.importorskip("kdissect._spool_c").place_lines
    header, size = spool.HEADER_BYTES, 1000
    memories = [bytearray(header + size) for _ in range(2)]
    ends = [0, 0]
    choose = random.Random(11)
    for turn in range(3000):
        lines = ["".join(chr(32 + choose.randrange(95)) for _ in range(choose.choice([0, 1, 5, 80, 300, 5000])))
                 for _ in range(choose.choice([0, 1, 2, 7, 20]))]
        if turn % 17 == 0 and lines:
            lines[-1] += "\u00e9"  # not ASCII: the caller joins and encodes it
        least = choose.choice([0, 0, 256])
        places = [spool.place_lines(memories[0], header, ends[0], lines, least),
                  place_lines_c(memories[1], header, ends[1], lines, least)]
        assert places[0] == places[1] and memories[0] == memories[1], turn
        text = "\n".join(lines)
        if places[0] is None:
            assert not text.isascii() or len(text) < least or len(text) > size or ends[0] > 0
        else:
            start, length = places[0]
            assert length == len(text) and memories[0][header + start % size:][:length] == text.encode()
            ends = [start + length] * 2
        if choose.random() < 0.4:  # the merge writes out what was put
            written = ends[0] - choose.randrange(min(ends[0], size) + 1)
            for memory in memories:
                memory[:8] = written.to_bytes(8, sys.byteorder)
    for place_lines in (spool.place_lines, place_lines_c):  # what is not a list of strs: left to the caller
        assert place_lines(memories[0], header, ends[0], ("a", "b"), 0) is None
        assert place_lines(memories[0], header, ends[0], ["a", b"b"], 0) is None
    with pytest.raises(ValueError):
        place_lines_c(bytearray(header + 10), 3, 0, ["x"], 0)  # not a ring's header


def test_a_ring_takes_lines_whose_text_is_long_enough_and_fits() -> None:
    ring = Ring(100, least=5)
    assert ring.put_lines(["ab", "cd"]) == (0, 5) and bytes(ring.view[:5]) == b"ab\ncd"
    assert ring.put_lines(["abc"]) is None  # shorter than `least`: it goes with its event
    assert ring.put_lines(["x" * 40, "y" * 49]) == (5, 90)
    assert ring.put_lines(["z" * 10]) is None  # no room until what is before it is written out
    ring.written.value = 95
    assert ring.put_lines(["z" * 10]) == (100, 10)  # whole, at the start of the next turn
    assert bytes(ring.view[:10]) == b"z" * 10 and ring.end == 110


def test_a_workers_text_joined_into_its_ring_is_the_text_it_would_send() -> None:
    """`cli._TextLines` given a worker's ring (`parallel.Prepare`) puts each -V text there
    itself, joined from its lines: what lies there is the text it makes without a ring, and
    a text the ring has no room for, or one beyond ASCII, comes back as before."""
    from kdissect.cli import _TextLines, build_parser
    from kdissect.pipeline import read_messages

    args = build_parser().parse_args(["-V", "x.pcap"])
    with open(CAPTURES / "quorum_story.pcap", "rb") as capture:
        messages = list(read_messages(capture))
    plain = _TextLines(args, "utf-8", "strict")
    ringed = _TextLines(args, "utf-8", "strict")
    ringed.ring = Ring(1 << 20, least=parallel.SPOOLED_BYTES)
    assert ringed.started(0).ring is ringed.ring  # the capture's start told: the same ring
    for message in messages:
        made, placed = plain(message), ringed(message)
        assert type(placed[0]) is tuple and placed[1:] == made[1:]
        start, length = placed[0]
        assert bytes(ringed.ring.view[start:start + length]) == made[0].encode()
    ringed.ring = Ring(64, least=parallel.SPOOLED_BYTES)  # no room for a whole text
    assert ringed(messages[0]) == plain(messages[0])


def test_an_ascii_text_goes_on_as_a_str_only_where_its_encoding_writes_ascii_alike() -> None:
    from kdissect.cli import _TextLines, build_parser
    from kdissect.pipeline import read_messages

    args = build_parser().parse_args(["-V", "x.pcap"])
    with open(CAPTURES / "quorum_story.pcap", "rb") as capture:
        message = next(iter(read_messages(capture)))
    utf8, utf16 = (_TextLines(args, coding, "strict")(message) for coding in ("utf-8", "utf-16"))
    assert type(utf8[0]) is str and utf8[0].isascii()
    assert type(utf16[0]) is bytes and utf16[0] == utf8[0].encode("utf-16")
    assert utf8[1] == utf16[1]  # the notes alike (where they are counts bytes: not alike)


def test_a_ring_is_not_sent_to_a_process_that_does_not_share_it() -> None:
    import pickle

    with pytest.raises(TypeError):
        pickle.dumps(Ring(16))


def pieces_of(ring: Ring, *texts: bytes) -> list[Piece]:
    found = []
    for text in texts:
        place = ring.put(text)
        assert type(place) is tuple
        found.append(Piece(ring, *place))
    return found


def interleaved() -> tuple[list[Any], bytes, list[Ring]]:
    """Bytes of the merge and pieces of two rings, in turn, with what they make written."""
    first, second = Ring(64), Ring(64)
    a = pieces_of(first, b"alpha\n", b"gamma\n")
    b = pieces_of(second, b"beta\n", b"delta\n")
    items: list[Any] = [b"1 ", a[0], b"2 ", b[0], b"3 ", b[1], b"4 ", a[1], b"end\n"]
    return items, b"1 alpha\n2 beta\n3 delta\n4 gamma\nend\n", [first, second]


def test_pieces_and_the_merges_bytes_reach_a_file_in_their_order(tmp_path: Path) -> None:
    items, expected, rings = interleaved()
    path = tmp_path / "out"
    with open(path, "wb") as out:
        out.write(b"before\n")  # buffered: it must come first
        SpooledOutput(out).write(items)
    assert path.read_bytes() == b"before\n" + expected
    assert [ring.written.value for ring in rings] == [12, 11]  # each ring free up to its last piece


def test_pieces_reach_a_pipe_and_an_output_without_a_file_descriptor() -> None:
    items, expected, _rings = interleaved()
    readable, writable = os.pipe()
    with os.fdopen(writable, "wb") as out:
        SpooledOutput(out).write(items)
    with os.fdopen(readable, "rb") as back:
        assert back.read() == expected
    items, expected, rings = interleaved()
    kept = io.BytesIO()
    SpooledOutput(kept).write(items)
    assert kept.getvalue() == expected
    assert [ring.written.value for ring in rings] == [12, 11]


def test_what_one_writev_leaves_is_written_after(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    items, expected, _rings = interleaved()
    calls = []

    def short(fd: int, buffers: list[Any]) -> int:  # as a pipe or a signal may: 3 bytes at most
        calls.append(len(buffers))
        return os.write(fd, b"".join(bytes(buffer) for buffer in buffers)[:3])

    path = tmp_path / "out"
    with open(path, "wb") as out:
        output = SpooledOutput(out)
        output.writev = short
        output.write(items)
    assert path.read_bytes() == expected and len(calls) > 10


def test_many_messages_are_written_in_writes_of_iov_max_buffers(tmp_path: Path) -> None:
    ring = Ring(1 << 16)
    items: list[Any] = []
    for n in range(1500):
        items += [b"%6d" % n, *pieces_of(ring, b" message %d\n" % n)]
    path = tmp_path / "out"
    with open(path, "wb") as out:
        SpooledOutput(out).write(items)
    assert path.read_bytes() == b"".join(b"%6d message %d\n" % (n, n) for n in range(1500))


def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many texts the merge took from the rings (each worker's `Piece`s)."""
    made = [0]

    class Counted(Piece):
        __slots__ = ()

        def __init__(self, *arguments: Any) -> None:
            made[0] += 1
            super().__init__(*arguments)

    monkeypatch.setattr(parallel, "Piece", Counted)
    return made


def both(capsys: pytest.CaptureFixture[str], *arguments: str) -> str:
    one = (main(["--jobs", "1", *arguments]), *capsys.readouterr())
    two = (main(["--jobs", "2", *arguments]), *capsys.readouterr())
    assert two == one
    return str(one[1])


# The command in a process of its own (a test process may have threads: its workers
# then start from a fork server, without rings), with rings of the bytes given and light
# batches of the events and text bytes given (`parallel.LIGHT_BATCH_EVENTS`,
# `LIGHT_BATCH_BYTES`), counting the texts that came through the rings and the light
# batches the merge took.
COUNTING = """
import sys
from kdissect import light, parallel, spool
ring, events, text, short = (int(number) for number in sys.argv[1].split("/"))
spool.RING_BYTES, parallel.LIGHT_BATCH_EVENTS, parallel.LIGHT_BATCH_BYTES = ring, events, text
parallel.SPOOLED_BYTES = short
counts = {"through the rings": 0, "batches merged": 0}
def counted(base, what):  # each made (the class's own __init__: also where C makes it)
    made = base.__init__
    def __init__(self, *arguments):
        counts[what] += 1
        made(self, *arguments)
    base.__init__ = __init__
counted(spool.Piece, "through the rings")
counted(light._Batch, "batches merged")
from kdissect.cli import main
status = main(sys.argv[2:])
sys.stdout.flush()
for what, count in counts.items():
    print(f"{what}: {count}", file=sys.stderr)
sys.exit(status)
"""


def counting(arguments: list[str], ring_bytes: int = spool.RING_BYTES, events: int = parallel.LIGHT_BATCH_EVENTS,
             text: int = parallel.LIGHT_BATCH_BYTES, spooled: int = parallel.SPOOLED_BYTES
             ) -> tuple[bytes, dict[str, int]]:
    """The command's output with --jobs 2, rings of `ring_bytes` together, light batches of
    `events` and `text`, and texts from `spooled` bytes through the rings; how many texts
    came through the rings and batches were merged."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", COUNTING, f"{ring_bytes}/{events}/{text}/{spooled}", "--jobs", "2",
                             *arguments], cwd=ROOT, env=environment, check=True, capture_output=True)
    counts = {what.decode(): int(count) for what, count in re.findall(rb"^(.+): (\d+)$", result.stderr, re.M)
              if what in (b"through the rings", b"batches merged")}
    assert len(counts) == 2, result.stderr
    return result.stdout, counts


def through_rings(ring_bytes: int, arguments: list[str]) -> tuple[bytes, int]:
    """The command's output with --jobs 2 and rings of `ring_bytes` together, and how
    many texts came through the rings."""
    out, counts = counting(arguments, ring_bytes)
    return out, counts["through the rings"]


@pytest.mark.parametrize("options", [("-V",), ("-V", "-x"), ("-T", "json"), ("-T", "jsonl", "--about")],
                         ids=" ".join)
def test_interleaved_workers_and_notes_the_merge_adds_give_one_process_bytes_through_the_rings(
        tangled: str, options: tuple[str, ...]) -> None:  # noqa: F811
    expected = run(["--jobs", "1", *options, tangled], stdout=subprocess.PIPE).stdout
    assert b"(message #" in expected and b"no response within" in expected
    out, made = through_rings(spool.RING_BYTES, [*options, tangled])
    assert out == expected
    messages = expected.count(b"\n\n") if "-T" not in options else expected.count(b'{"number":')
    assert made == messages  # every text came through the rings


def test_summary_lines_go_with_their_events_and_longer_texts_through_the_rings(tangled: str) -> None:  # noqa: F811
    """A text shorter than `parallel.SPOOLED_BYTES` (a summary line) costs the merging
    process less in the batch than as a place in a ring: with the bound among the lines'
    lengths, some come through the rings, the others not, and the output is one process's
    either way. (The workers' texts are the lines but for their numbers, and the notes
    pairing in capture order adds.)"""
    expected = run(["--jobs", "1", tangled], stdout=subprocess.PIPE).stdout
    texts = sorted(len(line) - 6 for line in expected.splitlines(keepends=True))
    assert texts[-1] < parallel.SPOOLED_BYTES
    found = []
    for bound in (parallel.SPOOLED_BYTES, texts[len(texts) // 2], 1):
        out, counts = counting([tangled], spooled=bound)
        assert out == expected
        found.append(counts["through the rings"])
    assert found[0] == 0 and 0 < found[1] < found[2] == len(texts)


@pytest.mark.parametrize("options", [("-V",), ("-T", "json")], ids=" ".join)
def test_rings_too_small_for_what_the_merge_holds_send_the_rest_as_bytes(
        tangled: str, options: tuple[str, ...]) -> None:  # noqa: F811
    expected = run(["--jobs", "1", *options, tangled], stdout=subprocess.PIPE).stdout
    out, made = through_rings(8192, [*options, tangled])  # a few texts each: pairing holds more back
    assert out == expected
    messages = expected.count(b"\n\n") if "-T" not in options else expected.count(b'{"number":')
    assert 0 < made < messages  # some through the rings, turn after turn; the others as bytes


@pytest.mark.parametrize("options", [("-V",), ("-T", "jsonl")], ids=" ".join)
def test_text_made_in_the_workers_reaches_an_output_without_a_file_descriptor(
        capsys: pytest.CaptureFixture[str], tangled: str, options: tuple[str, ...]) -> None:  # noqa: F811
    assert "no response within" in both(capsys, *options, tangled)


def test_without_memory_for_the_rings_the_text_goes_through_the_pipes(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tangled: str) -> None:  # noqa: F811
    assert [ring.size for ring in spool.rings(4) or ()] == [spool.RING_BYTES // 4] * 4

    def no_memory(*_arguments: Any) -> None:
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(spool, "Ring", no_memory)
    assert spool.rings(2) is None
    made = counted(monkeypatch)
    assert "no response within" in both(capsys, "-V", tangled)
    assert made[0] == 0


def run(arguments: list[str], **streams: Any) -> subprocess.CompletedProcess[bytes]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "kdissect", *arguments], cwd=ROOT, env=environment,
                          check=True, **streams)


@pytest.mark.parametrize("options", [("-V", "-x"), ("-T", "jsonl")], ids=" ".join)
def test_one_process_bytes_to_a_regular_file_a_file_opened_to_append_and_a_pipe(
        tmp_path: Path, tangled: str, options: tuple[str, ...]) -> None:  # noqa: F811
    captures = [tangled, *sorted(str(p) for p in CAPTURES.glob("*.pcap"))]
    expected = run(["--jobs", "1", "--port", "36333", "--port", "19092", *options, *captures],
                   stdout=subprocess.PIPE).stdout
    arguments = ["--jobs", "2", "--port", "36333", "--port", "19092", *options, *captures]
    assert run(arguments, stdout=subprocess.PIPE).stdout == expected
    path = tmp_path / "out"
    with open(path, "wb") as out:
        run(arguments, stdout=out)
    assert path.read_bytes() == expected
    with open(path, "ab") as out:
        run(arguments, stdout=out)
    assert path.read_bytes() == expected * 2


@pytest.mark.parametrize(("events", "text", "every"), [(1, 1 << 30, 1), (3, 1 << 30, 3), (7, 1 << 30, 7),
                                                      (1 << 20, 1, 1), (1 << 20, 1500, 3)])
@pytest.mark.parametrize("capture", ["tangled", "incident.pcap"])
def test_light_batches_of_any_size_give_one_process_bytes(tangled: str, capture: str, events: int, text: int,  # noqa: F811
                                                          every: int) -> None:
    path = tangled if capture == "tangled" else str(CAPTURES / capture)
    expected = run(["--jobs", "1", "-V", path], stdout=subprocess.PIPE).stdout
    out, counts = counting(["-V", path], events=events, text=text)
    assert out == expected
    # a batch boundary every few messages (each -V text of these captures takes over 900 bytes)
    assert counts["batches merged"] >= expected.count(b"\n\n") // every


@pytest.mark.parametrize("output", ["text", "json"])
def test_a_text_read_out_of_a_ring_comes_after_the_texts_before_it_are_written(output: str) -> None:
    """Reading a text out of a worker's ring (to put in the notes the merge gave its message)
    frees the ring up to that text's end (`Piece.read`): the merge first writes the texts of
    that ring still waiting before it, which the worker could otherwise write over."""
    from kdissect import notes
    from kdissect.cli import _JsonSink, _TextSink, build_parser
    from kdissect.ingest.framing import Connection
    from kdissect.light import Light

    ring = Ring(1 << 16)
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    args = build_parser().parse_args(["-T", "jsonl", "x.pcap"] if output == "json" else ["x.pcap"])
    sink: Any = _JsonSink(out, array=False, about=False, args=args) if output == "json" else _TextSink(out, args)
    connection = Connection(0, ("10.0.0.1", 1), ("10.0.0.2", 9092), False)
    for number, added in ((1, []), (2, [notes.warn("given by the merge")])):
        message = Light(number, connection, False, None, False, 0, 10, (), added)
        if output == "json":
            text = b',"latency_ms":null,"tls":false,"notes":[],"file":null,"tree":{}}'
            at = text.index(b"[")
            prepared: tuple[Any, ...] = (Piece(ring, *ring.put(text)), b',"frame":1,"time":0,"stream":',
                                         b',"src":"a","dst":"b","pair":', 0, at, at + 2)
        else:
            text = b" line of message %d\n" % number
            prepared = (Piece(ring, *ring.put(text)), 0, len(text) - 1, len(text) - 1)
        sink.write(message, prepared)
    waiting = [chunk for chunk in sink.chunks if isinstance(chunk, Piece)]
    assert all(piece.start >= ring.written.value for piece in waiting)  # none the worker may write over
    sink.flush(through=True)
    written = out.buffer.getvalue()  # type: ignore[attr-defined]
    assert written.count(b"given by the merge") == 1 and written.index(b"1") < written.index(b"given by")
