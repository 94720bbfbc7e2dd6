"""Several files as one capture, and compressed captures.

A rotated set read together must give exactly what the unsplit capture gives:
the same messages, numbers, connections, pairings, times and notes. The sets are
made by `tools.split_capture` at random packet boundaries (inside Kafka messages
and inside bursts of segments) from the shipped captures and from a capture of
many concurrent connections built from real exchanges.
"""

from __future__ import annotations

import bz2
import functools
import gzip
import io
import lzma
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import zstandard

import kdissect
from benchmarks.make_capture import build
from kdissect.ingest.capture import CaptureError
from kdissect.ingest.compressed import ZstdFrames
from kdissect.pipeline import read_messages
from tests.conftest import CAPTURES, ROOT
from tools.split_capture import packet_count, random_cuts, split

SHIPPED = sorted(CAPTURES.glob("*.pcap"))
COMPRESSORS = {
    "gz": gzip.compress,
    "bz2": bz2.compress,
    "xz": lzma.compress,
    "zst": lambda data: zstandard.ZstdCompressor().compress(data),
}


def signature(source: Any) -> list[tuple[Any, ...]]:
    """What must not change when a capture is split or compressed: everything but the file."""
    rows = []
    for m in read_messages(source, ports=(9092, 36333, 19092)):
        connection = m.frame.connection
        rows.append((m.number, m.frame.last_packet, m.frame.first_packet, m.time,
                     connection.index, connection.client, connection.server, m.is_request,
                     m.correlation_id, m.api_key, m.api_version, m.length, m.frame.data,
                     None if m.pair is None else m.pair.number,
                     tuple(str(n) for n in m.all_notes())))
    return rows


def write_parts(data: bytes, cuts: list[int], directory: Path, suffix: str = ".pcap") -> list[Path]:
    paths = []
    for index, part in enumerate(split(data, cuts)):
        path = directory / f"part-{index:03d}{suffix}"
        path.write_bytes(part)
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def many_connections(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 1 MB of real exchanges replayed over 64 interleaved connections."""
    out = tmp_path_factory.mktemp("many") / "many.pcap"
    build(out, 1.0, "mixed", sources=SHIPPED)
    return out


@pytest.mark.parametrize("capture", SHIPPED, ids=lambda p: p.name)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_split_shipped_capture_read_together_is_the_original(capture: Path, seed: int,
                                                               tmp_path: Path) -> None:
    data = capture.read_bytes()
    cuts = random_cuts(packet_count(data), 5, seed)
    parts = write_parts(data, cuts, tmp_path)
    assert len(parts) == 5
    assert signature(parts) == signature(capture)


def test_a_capture_split_at_every_packet_is_still_the_original(tmp_path: Path) -> None:
    capture = CAPTURES / "tansu_topic_partitions.pcap"
    data = capture.read_bytes()
    parts = write_parts(data, list(range(2, packet_count(data) + 1)), tmp_path)
    assert len(parts) == packet_count(data)
    assert signature(parts) == signature(capture)


@pytest.mark.parametrize("seed", [11, 12])
def test_many_interleaved_connections_split_anywhere(many_connections: Path, seed: int,
                                                     tmp_path: Path) -> None:
    data = many_connections.read_bytes()
    parts = write_parts(data, random_cuts(packet_count(data), 8, seed), tmp_path)
    original = signature(many_connections)
    assert len({row[4] for row in original}) >= 32  # connections really do run across files
    assert signature(parts) == original


def test_every_message_names_the_file_of_its_last_packet(tmp_path: Path) -> None:
    capture = CAPTURES / "quorum_story.pcap"
    data = capture.read_bytes()
    cuts = random_cuts(packet_count(data), 3, 5)
    parts = write_parts(data, cuts, tmp_path)
    bounds = [1, *cuts]  # first packet number of each part
    for message in read_messages(parts):
        part = max(i for i, start in enumerate(bounds) if start <= message.frame.last_packet)
        assert message.file == str(parts[part])


def test_a_pcapng_set_keeps_its_interfaces_in_every_part(public_captures: Path,
                                                          tmp_path: Path) -> None:
    capture = public_captures / "ndpi_kafka.pcapng"
    data = capture.read_bytes()
    parts = write_parts(data, random_cuts(packet_count(data), 4, 3), tmp_path, ".pcapng")
    assert signature(parts) == signature(capture)


def test_read_pcap_takes_a_list_or_a_glob(tmp_path: Path) -> None:
    capture = CAPTURES / "producers_story.pcap"
    data = capture.read_bytes()
    parts = write_parts(data, random_cuts(packet_count(data), 4, 9), tmp_path)
    whole = kdissect.read_pcap(capture).messages
    for source in (parts, str(tmp_path / "part-*.pcap")):
        merged = kdissect.read_pcap(source)
        assert merged.files == [str(p) for p in parts]
        table = merged.messages
        assert sorted(table["file"].astype(str).unique()) == [str(p) for p in parts]
        assert table.drop(columns="file").equals(whole.drop(columns="file"))


def test_a_glob_matching_nothing_says_so(tmp_path: Path) -> None:
    with pytest.raises(CaptureError, match="no file matches"):
        kdissect.read_pcap(str(tmp_path / "nothing-*.pcap"))


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_capture_file_that_cannot_be_read_is_named_once(tmp_path: Path, jobs: int) -> None:
    """Alone or in a set, with one job or two: the error says which file, once (an error
    opening a file names it already)."""
    good = str(CAPTURES / "quorum_story.pcap")
    (tmp_path / "text.pcap").write_text("hello\n")
    (tmp_path / "empty.pcap").write_bytes(b"")
    for bad, why in (("missing.pcap", "No such file or directory"), ("text.pcap", "not a pcap or pcapng file"),
                     ("empty.pcap", "empty file")):
        path = str(tmp_path / bad)
        for source in (path, [good, path]):
            with pytest.raises(CaptureError) as raised:
                kdissect.read_pcap(source, jobs=jobs)
            assert str(raised.value).startswith(f"{path}: {why}"), (source, str(raised.value))


def test_an_open_file_that_cannot_be_read_is_named_and_a_nameless_stream_is_not(tmp_path: Path) -> None:
    text = tmp_path / "text.pcap"
    text.write_text("hello\n")
    with text.open("rb") as stream, pytest.raises(CaptureError, match=rf"^{re.escape(str(text))}: not a pcap"):
        kdissect.read_pcap(stream)
    with pytest.raises(CaptureError, match=r"^not a pcap"):
        kdissect.read_pcap(io.BytesIO(b"hello\n"))


@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
def test_compressed_captures_are_recognised_by_content(suffix: str, tmp_path: Path) -> None:
    capture = CAPTURES / "tansu_topic_partitions.pcap"
    packed = tmp_path / f"no-telling-name.{suffix}.bin"
    packed.write_bytes(COMPRESSORS[suffix](capture.read_bytes()))
    assert signature(packed) == signature(capture)
    with packed.open("rb") as stream:  # a stream, as stdin is, reads the same
        assert signature(stream) == signature(capture)


def test_a_compressed_set_mixes_with_plain_files(tmp_path: Path) -> None:
    capture = CAPTURES / "quorum_story.pcap"
    data = capture.read_bytes()
    parts = write_parts(data, random_cuts(packet_count(data), 3, 4), tmp_path)
    parts[1].write_bytes(gzip.compress(parts[1].read_bytes()))
    assert signature(parts) == signature(capture)


@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
def test_a_cut_compressed_capture_gives_one_note_and_what_it_holds(suffix: str, many_connections: Path,
                                                                   tmp_path: Path) -> None:
    # bzip2 at its smallest blocks (100 kB), so that half the file holds whole blocks
    compress = functools.partial(bz2.compress, compresslevel=1) if suffix == "bz2" else COMPRESSORS[suffix]
    packed = compress(many_connections.read_bytes())
    cut = tmp_path / f"cut.pcap.{suffix}"
    cut.write_bytes(packed[: len(packed) // 2])
    problems: list[Any] = []
    messages = list(read_messages(cut, report=problems.append))
    assert 0 < len(messages) < len(list(read_messages(many_connections)))
    kind = {"gz": "gzip", "bz2": "bzip2", "xz": "xz", "zst": "zstd"}[suffix]
    said = [note.message for note in problems if "-compressed" in note.message]
    assert said == [f"{kind}-compressed capture is cut short or corrupt ({said[0].split('(', 1)[1]}"], problems
    assert said[0].endswith("; the rest cannot be read")


def zstd_frames(data: bytes) -> bytes:
    """`data` as zstd frames of every kind the format has: with and without a checksum and
    a content size, many blocks (raw, RLE and compressed), and a skippable frame between."""
    third = len(data) // 3
    with_all = zstandard.ZstdCompressor(write_checksum=True, write_content_size=True)
    bare = zstandard.ZstdCompressor(write_checksum=False, write_content_size=False)
    skippable = (0x184D2A57).to_bytes(4, "little") + (6).to_bytes(4, "little") + b"kafka!"
    streamed = bare.compressobj()  # no content size, blocks as they come
    middle = b"".join(streamed.compress(data[at:min(at + 4096, 2 * third)]) for at in range(third, 2 * third, 4096))
    return (with_all.compress(data[:third]) + skippable + middle + streamed.flush()
            + with_all.compress(data[2 * third:]))


def test_the_zstd_frame_follower_knows_a_whole_stream_from_every_cut_of_it() -> None:
    """Raw, RLE and compressed blocks (random bytes, zeros, text), frames with and without
    checksums and content sizes, a skippable frame: whole at the end, and at no cut inside
    a frame, whatever the reads' sizes."""
    rng = random.Random(5)
    data = bytes(1 << 18) + rng.randbytes(9_000)  # blocks: compressed, zeros (RLE), noise (raw)
    frames = [zstandard.ZstdCompressor(write_checksum=True).compress(data),
              (0x184D2A50).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"abc",
              zstandard.ZstdCompressor(level=-3, write_content_size=False).compress(b"Produce v9 " * 30_000)]
    stream = b"".join(frames)
    ends = {len(frames[0]), len(frames[0]) + len(frames[1]), len(stream)}  # where frames end
    cuts = {*range(0, 40), *(end + step for end in ends for step in range(-20, 20)),
            *(rng.randrange(len(stream)) for _ in range(300))}
    for cut in sorted(at for at in cuts if 0 <= at <= len(stream)):
        for size in (1, 7, 1 << 20) if cut < 64 or cut % 7 == 0 else (4096,):
            follower = ZstdFrames(io.BytesIO(stream[:cut]))
            while follower.read(size):
                pass
            assert follower.whole() == (cut in ends or cut == 0), (cut, size)


def test_zstd_frames_of_every_kind_read_whole_and_a_cut_in_any_is_said(many_connections: Path,
                                                                      tmp_path: Path) -> None:
    """python-zstandard's reader ends quietly where its input stops inside a frame: the
    frames are followed, so that such a cut is said, as gzip's and xz's are."""
    data = many_connections.read_bytes()
    packed = zstd_frames(data)
    whole = tmp_path / "whole.zst"
    whole.write_bytes(packed)
    problems: list[Any] = []
    assert signature(whole) == signature(many_connections)
    list(read_messages(whole, report=problems.append))
    assert problems == []
    # cuts inside each frame's header, its blocks, its checksum, and the skippable frame
    first = len(zstandard.ZstdCompressor(write_checksum=True).compress(data[: len(data) // 3]))
    for end in (5, 9, first // 2, first - 2, first + 3, first + 10, len(packed) - 2):
        cut = tmp_path / "cut.zst"
        cut.write_bytes(packed[:end])
        problems = []
        try:
            list(read_messages(cut, report=problems.append))
        except CaptureError as error:  # nothing decompressed at all
            assert "holds no capture" in str(error)
        assert "zstd-compressed capture is cut short or corrupt (the input ends inside a frame)" in (
            problems[0].message), (end, problems)
    cut.write_bytes(packed[:first + 14])  # right after the skippable frame: whole frames
    problems = []
    list(read_messages(cut, report=problems.append))
    assert not any("compressed" in note.message for note in problems), problems


def run_cli(*arguments: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "kdissect", *arguments], cwd=ROOT, input=stdin,
                          capture_output=True, timeout=120, check=False)


def test_the_command_reads_several_files_as_one_capture(tmp_path: Path) -> None:
    capture = CAPTURES / "quorum_story.pcap"
    data = capture.read_bytes()
    parts = write_parts(data, random_cuts(packet_count(data), 3, 8), tmp_path)
    whole = run_cli(str(capture))
    merged = run_cli(*map(str, parts))
    assert merged.returncode == whole.returncode == 0
    assert merged.stdout == whole.stdout
    shown = run_cli("--show-file", *map(str, parts)).stdout.decode().splitlines()
    assert shown[-1].endswith(f" file={parts[-1]}")


def test_the_command_reads_a_compressed_capture_from_stdin() -> None:
    capture = CAPTURES / "quorum_story.pcap"
    piped = run_cli("-", stdin=lzma.compress(capture.read_bytes()))
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == run_cli(str(capture)).stdout


def test_a_stream_is_named_for_what_it_is() -> None:
    data = (CAPTURES / "quorum_story.pcap").read_bytes()
    unnamed = kdissect.read_pcap(io.BytesIO(data))  # not standard input: a stream in memory
    assert set(unnamed.messages.file.astype(str)) == {"stream"}
    assert repr(unnamed).startswith("Capture stream: 50 Kafka messages")
    with open(CAPTURES / "quorum_story.pcap", "rb") as opened:  # an open file keeps its name
        assert set(kdissect.read_pcap(opened).messages.file.astype(str)) == {opened.name}
    shown = run_cli("--show-file", "-", stdin=data).stdout.decode().splitlines()
    assert shown and all(line.endswith(" file=standard input") for line in shown)


def test_separate_files_keep_their_own_numbering(tmp_path: Path) -> None:
    first, second = CAPTURES / "quorum_story.pcap", CAPTURES / "producers_story.pcap"
    result = run_cli("--separate", "--show-file", str(first), str(second))
    lines = result.stdout.decode().splitlines()
    own = [run_cli(str(path)).stdout.decode().splitlines() for path in (first, second)]
    assert len(lines) == len(own[0]) + len(own[1])
    assert lines[len(own[0])].split()[0] == "1"  # numbering starts again with the second file
    assert lines[-1].endswith(f" file={second.relative_to(ROOT)}") or lines[-1].endswith(
        f" file={second}")


def test_an_unreadable_file_in_a_set_is_named_and_the_rest_still_read(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("not a capture\n")
    capture = CAPTURES / "quorum_story.pcap"
    result = run_cli(str(bad), str(capture))
    assert result.returncode == 2
    assert result.stderr.decode().strip() == (
        f"kdissect: {bad}: not a pcap or pcapng file (magic 0x6e6f7420)")
    assert result.stdout == run_cli(str(capture)).stdout
