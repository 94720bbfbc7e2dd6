"""Long fuzzing runs of kdissect, outside the test suite.

Three targets:

- ``decoder``: one frame through ``dissect_request`` / ``dissect_response``, with
  the right API key and version, a wrong one, or none. Inputs are mutated valid
  frames of the shipped captures (APIs 75, 61 and 55 in every version, requests
  and responses, and the other APIs around them), frames of the third-party
  captures, random headers of every other API, and random bytes.
- ``pipeline``: one capture file through ``read_messages``, every message's tree,
  summary line and JSON record; every 200th input also through the CLI. Inputs
  are the shipped and third-party captures, cut into windows, with records
  dropped, repeated, reordered, cut short or changed, written back as pcap or
  pcapng, sometimes with the file's own bytes damaged.
- ``records``: the bytes of one ``records`` field through the record decoder,
  its tree and its rows. Inputs are record sets of every magic and codec built
  by kafka-python's record builders, damaged, cut, concatenated, or with a
  batch's records replaced by a compression bomb, cut or damaged compressed
  data, or noise (the batch's CRC made right again, so decoding goes deeper).

Every input must decode without an exception escaping; every tree must tile and
span its frame, keep its notes inside the frame, render, and serialise to JSON;
a complete frame's size prefix must match its length and a direction's frames
must not go backwards; CaptureError may only mean "not a capture at all".

Two engines: ``atheris`` (coverage-guided libFuzzer; the default when installed;
its mutations alternate with the structured ones below) and ``random`` (a
deterministic loop: the same seed gives the same inputs). Each input that raises
or breaks an invariant is counted; the first of each kind is written to
``--findings`` under the name ``tests/fuzz_regressions/`` expects:
``decoder-<sha1>.bin`` (a 5-byte case header, then the frame; see
``FrameCase``) or ``pipeline-<sha1>.pcap``.

    python -m tools.fuzz decoder --inputs 1000000 --seed 1
    python -m tools.fuzz pipeline --inputs 100000 --seed 2 --engine random
    python -m tools.fuzz records --seconds 300 --engine random

kdissect is imported inside the functions that use it (``kdissect.apis`` aside),
so that atheris can instrument it before it is first loaded.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import importlib
import io
import json
import os
import random
import re
import shutil
import struct
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kdissect.apis import APIS, request_header_version, response_header_version

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "captures"
PUBLIC = Path(os.environ.get("KDISSECT_PUBLIC_CAPTURES", ROOT.parent / "shared" / "captures" / "public"))
MODULES = ("kdissect.decode.records", "kdissect.decode.record_nodes", "kdissect.decode.dissect", "kdissect.pipeline", "kdissect.present.text",
           "kdissect.present.records", "kdissect.present.summary", "kdissect.cli",
           "kdissect.present.export", "kdissect.present.analysis")
DISSECTED = ((75, 0), (61, 0), (55, 0), (55, 1), (55, 2))
CLI_EVERY = 200  # pipeline inputs between two CLI runs
MAX_FINDINGS = 50  # reproducers written per run

INT32_VALUES = (0, 1, -1, -2, 3, 0x7FFFFFFF, -0x80000000, 0x7FFFFFF0, 0xFFFF, 0x10000)
INT16_VALUES = (0, 1, -1, -2, 0x7FFF, -0x8000, 0xFF)
UVARINTS = (b"\x00", b"\x01", b"\x02", b"\x7f", b"\x80\x01", b"\xff\x7f",
            b"\xff\xff\xff\xff\x0f", b"\xfe\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x7f",
            b"\x80\x80\x80\x80\x80\x01", b"\x80", b"\x81\x80\x80\x80\x08")


# -- decoder cases ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FrameCase:
    """One decoder input: a frame and how it is decoded.

    Encoded as a 5-byte header (mode, api key int16, api version int16) and the
    frame: mode 0 decodes a request; 1 a response through the key and version;
    2 a response whose request is missing. Any byte string decodes to a case.
    """

    frame: bytes
    request: bool
    api_key: int | None = None
    api_version: int | None = None

    def encode(self) -> bytes:
        mode = 0 if self.request else 1 if self.api_key is not None else 2
        return struct.pack(">Bhh", mode, self.api_key or 0, self.api_version or 0) + self.frame

    @classmethod
    def decode(cls, data: bytes) -> FrameCase:
        mode, key, version = struct.unpack(">Bhh", data[:5].ljust(5, b"\x00"))
        frame = data[5:]
        if mode % 3 == 0:
            return cls(frame, True)
        return cls(frame, False, key, version) if mode % 3 == 1 else cls(frame, False)


# -- byte mutations --------------------------------------------------------------------------

Mutation = Callable[[bytearray, random.Random], None]


def _position(data: bytearray, rng: random.Random, *, end: bool = False) -> int:
    return rng.randrange(len(data) + (1 if end else 0)) if data or end else 0


def flip_bit(data: bytearray, rng: random.Random) -> None:
    if data:
        data[_position(data, rng)] ^= 1 << rng.randrange(8)


def set_byte(data: bytearray, rng: random.Random) -> None:
    if data:
        data[_position(data, rng)] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))


def insert_bytes(data: bytearray, rng: random.Random) -> None:
    at = _position(data, rng, end=True)
    data[at:at] = rng.randbytes(rng.randint(1, 16))


def delete_range(data: bytearray, rng: random.Random) -> None:
    at = _position(data, rng)
    del data[at:at + rng.randint(1, 16)]


def truncate(data: bytearray, rng: random.Random) -> None:
    del data[_position(data, rng, end=True):]


def put_int32(data: bytearray, rng: random.Random) -> None:
    """A length or count field gone wrong: an extreme int32, often over the size prefix."""
    at = 0 if rng.random() < 0.3 else _position(data, rng)
    value = rng.choice((*INT32_VALUES, len(data), len(data) - 3, len(data) + 1, rng.randrange(2**31)))
    data[at:at + 4] = struct.pack(">i", value if value < 2**31 else value - 2**32)


def put_int16(data: bytearray, rng: random.Random) -> None:
    at = _position(data, rng)
    data[at:at + 2] = struct.pack(">h", rng.choice(INT16_VALUES))


def put_uvarint(data: bytearray, rng: random.Random) -> None:
    """A compact length, array count or tag count replaced by an extreme varint."""
    at = _position(data, rng, end=True)
    data[at:at + 1] = rng.choice(UVARINTS)


def duplicate_range(data: bytearray, rng: random.Random) -> None:
    if data:
        start = _position(data, rng)
        piece = data[start:start + rng.randint(1, 64)]
        at = _position(data, rng, end=True)
        data[at:at] = piece * rng.randint(1, 4)


FRAME_MUTATIONS: tuple[Mutation, ...] = (
    flip_bit, set_byte, insert_bytes, delete_range, truncate, put_int32, put_int32, put_int16,
    put_uvarint, put_uvarint, duplicate_range,
)


def mutate_bytes(data: bytes, rng: random.Random, *, rounds: int | None = None) -> bytearray:
    out = bytearray(data)
    for _ in range(rounds or rng.randint(1, 4)):
        rng.choice(FRAME_MUTATIONS)(out, rng)
    return out


def mutate_frame(frame: bytes, rng: random.Random) -> bytes:
    """Mutations of a frame; half the time the size prefix is made right again, so the
    damage reaches the body instead of stopping at the frame."""
    out = mutate_bytes(frame, rng)
    if rng.random() < 0.5 and len(out) >= 4:
        out[:4] = struct.pack(">i", len(out) - 4)
    return bytes(out)


# -- random headers of every API ---------------------------------------------------------------


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def random_tags(rng: random.Random) -> bytes:
    count = rng.choice((0, 0, 1, 2, 3))
    entries = b""
    for tag in sorted(rng.sample(range(40), count)):
        value = rng.randbytes(rng.randint(0, 6))
        entries += uvarint(tag) + uvarint(len(value)) + value
    return uvarint(count) + entries


def random_api(rng: random.Random) -> tuple[int, int]:
    """An API key and version: mostly published ones, some just outside, some absurd."""
    if rng.random() < 0.1:
        return rng.randrange(-2**15, 2**15), rng.randrange(-2**15, 2**15)
    api = APIS[rng.choice(list(APIS))]
    return api.key, rng.randint(api.min_version - 1, api.max_version + 1)


def random_request(rng: random.Random) -> FrameCase:
    key, version = random_api(rng)
    client = rng.choice((b"", b"client", rng.randbytes(rng.randint(0, 12))))
    client_field = struct.pack(">h", -1) if rng.random() < 0.1 else struct.pack(">h", len(client)) + client
    header = struct.pack(">hhi", key, version, rng.randrange(-2**31, 2**31)) + client_field
    if request_header_version(key, version) >= 2:
        header += random_tags(rng)
    payload = header + rng.randbytes(rng.randint(0, 48))
    return FrameCase(struct.pack(">i", len(payload)) + payload, True)


def random_response(rng: random.Random) -> FrameCase:
    key, version = random_api(rng)
    header = struct.pack(">i", rng.randrange(-2**31, 2**31))
    if response_header_version(key, version) >= 1:
        header += random_tags(rng)
    payload = header + rng.randbytes(rng.randint(0, 48))
    return FrameCase(struct.pack(">i", len(payload)) + payload, False, key, version)


def reinterpret(case: FrameCase, rng: random.Random) -> FrameCase:
    """The same bytes decoded another way: a wrong API or version, no request, the other side."""
    choice = rng.randrange(4)
    if choice == 0:
        return FrameCase(case.frame, False, *rng.choice(DISSECTED))
    if choice == 1:
        return FrameCase(case.frame, False, *random_api(rng))
    return FrameCase(case.frame, False) if choice == 2 else FrameCase(case.frame, True)


def mutate_case(case: FrameCase, rng: random.Random) -> FrameCase:
    if rng.random() < 0.15:
        case = reinterpret(case, rng)
    if rng.random() < 0.9:
        case = FrameCase(mutate_frame(case.frame, rng), case.request, case.api_key, case.api_version)
    return case


# -- capture files ------------------------------------------------------------------------------


@dataclass(slots=True)
class CaptureModel:
    """A capture as records, to be changed record by record and written back."""

    linktype: int
    records: list[tuple[float, bytes, int]] = field(default_factory=list)  # time, data, original


def parse_pcap(data: bytes) -> CaptureModel | None:
    """The records of a classic pcap, as far as they are consistent; None if it is not one."""
    orders = {b"\xd4\xc3\xb2\xa1": ("<", 1e-6), b"\xa1\xb2\xc3\xd4": (">", 1e-6),
              b"\x4d\x3c\xb2\xa1": ("<", 1e-9), b"\xa1\xb2\x3c\x4d": (">", 1e-9)}
    if len(data) < 24 or data[:4] not in orders:
        return None
    endian, unit = orders[data[:4]]
    model = CaptureModel(struct.unpack_from(endian + "I", data, 20)[0] & 0xFFFF)
    position = 24
    while position + 16 <= len(data):
        seconds, fraction, captured, original = struct.unpack_from(endian + "IIII", data, position)
        if position + 16 + captured > len(data):
            break
        model.records.append((seconds + fraction * unit, data[position + 16:position + 16 + captured], original))
        position += 16 + captured
    return model


def parse_pcapng(data: bytes) -> CaptureModel | None:
    """The enhanced packet blocks of a little-endian pcapng (first interface's link type)."""
    if len(data) < 28 or data[:4] != b"\x0a\x0d\x0d\x0a" or data[8:12] != b"\x4d\x3c\x2b\x1a":
        return None
    model, position = CaptureModel(1), 0
    while position + 12 <= len(data):
        block_type, length = struct.unpack_from("<II", data, position)
        if length < 12 or position + length > len(data):
            break
        body = data[position + 8:position + length - 4]
        if block_type == 1 and len(body) >= 2:
            model.linktype = struct.unpack_from("<H", body)[0]
        elif block_type == 6 and len(body) >= 20:
            _interface, high, low, captured, original = struct.unpack_from("<IIIII", body)
            model.records.append((((high << 32) | low) / 1e6, body[20:20 + captured], original))
        position += length
    return model


def write_pcap(model: CaptureModel, rng: random.Random) -> bytes:
    endian = rng.choice("<<>")
    nano = rng.random() < 0.2
    scale = 10**9 if nano else 10**6
    snaplen = rng.choice((262144, 65535, 1514, rng.randint(60, 400)))
    parts = [struct.pack(endian + "IHHiIII", 0xA1B23C4D if nano else 0xA1B2C3D4, 2, 4, 0, 0,
                         snaplen, model.linktype)]
    for timestamp, data, original in model.records:
        seconds, fraction = divmod(round(max(timestamp, 0.0) * scale), scale)
        parts.append(struct.pack(endian + "IIII", seconds & 0xFFFFFFFF, fraction, len(data),
                                 max(original, len(data)) & 0xFFFFFFFF))
        parts.append(data)
    return b"".join(parts)


def _block(block_type: int, body: bytes) -> bytes:
    body += b"\x00" * (-len(body) % 4)
    return struct.pack("<II", block_type, len(body) + 12) + body + struct.pack("<I", len(body) + 12)


def write_pcapng(model: CaptureModel, rng: random.Random) -> bytes:
    parts = [_block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)),
             _block(1, struct.pack("<HHI", model.linktype, 0, 262144))]
    for timestamp, data, original in model.records:
        if rng.random() < 0.01:
            parts.append(_block(rng.choice((0x777, 5, 0x80000001, 3)), rng.randbytes(8)))
        ticks = round(max(timestamp, 0.0) * 1e6)
        parts.append(_block(6, struct.pack("<IIIII", 0, (ticks >> 32) & 0xFFFFFFFF, ticks & 0xFFFFFFFF,
                                           len(data), max(original, len(data)) & 0xFFFFFFFF) + data))
    return b"".join(parts)


# -- capture mutations --------------------------------------------------------------------------

RecordList = list[tuple[float, bytes, int]]


def _index(records: RecordList, rng: random.Random) -> int:
    return rng.randrange(len(records))


def take_window(records: RecordList, rng: random.Random) -> RecordList:
    """A run of consecutive records: a capture started or stopped mid-conversation."""
    start = _index(records, rng)
    return records[start:start + rng.randint(1, 60)]


def drop_record(records: RecordList, rng: random.Random) -> RecordList:
    del records[_index(records, rng)]
    return records


def repeat_record(records: RecordList, rng: random.Random) -> RecordList:
    """A retransmission: the same segment again, now or a little later."""
    item = records[_index(records, rng)]
    records.insert(min(len(records), _index(records, rng) + 1), item)
    return records


def swap_records(records: RecordList, rng: random.Random) -> RecordList:
    first = _index(records, rng)
    second = min(len(records) - 1, first + rng.randint(1, 8))
    records[first], records[second] = records[second], records[first]
    return records


def reverse_run(records: RecordList, rng: random.Random) -> RecordList:
    """Many segments out of order at once."""
    start = _index(records, rng)
    end = start + rng.randint(2, 30)
    records[start:end] = records[start:end][::-1]
    return records


def cut_record(records: RecordList, rng: random.Random) -> RecordList:
    """A snap length that cut one packet: fewer bytes captured than were on the wire."""
    at = _index(records, rng)
    timestamp, data, original = records[at]
    records[at] = (timestamp, data[:rng.randrange(len(data) + 1)], max(original, len(data)))
    return records


def damage_payload(records: RecordList, rng: random.Random) -> RecordList:
    """Byte mutations inside one packet, mostly past the link, IP and TCP headers."""
    at = _index(records, rng)
    timestamp, data, original = records[at]
    skip = min(len(data), 54) if rng.random() < 0.8 else 0
    changed = data[:skip] + bytes(mutate_bytes(data[skip:], rng, rounds=rng.randint(1, 2)))
    records[at] = (timestamp, changed, original - len(data) + len(changed))
    return records


def shift_time(records: RecordList, rng: random.Random) -> RecordList:
    at = _index(records, rng)
    timestamp, data, original = records[at]
    records[at] = (timestamp + rng.choice((-86400.0 * 2, -1.0, 1.0, 2**31)), data, original)
    return records


RECORD_MUTATIONS = (drop_record, repeat_record, swap_records, reverse_run, cut_record,
                    damage_payload, damage_payload, damage_payload, shift_time)


def mutate_model(model: CaptureModel, rng: random.Random, others: Sequence[CaptureModel]) -> CaptureModel:
    records = list(model.records)
    if rng.random() < 0.6 and records:
        records = take_window(records, rng)
    if others and rng.random() < 0.1:
        other = rng.choice(others).records
        records = sorted(records + take_window(list(other), rng) if other else records,
                         key=lambda item: item[0])
    for _ in range(rng.randint(0, 4)):
        if records:
            records = rng.choice(RECORD_MUTATIONS)(records, rng)
    return CaptureModel(model.linktype, records)


def mutate_capture(model: CaptureModel, rng: random.Random, others: Sequence[CaptureModel]) -> bytes:
    changed = mutate_model(model, rng, others)
    data = write_pcapng(changed, rng) if rng.random() < 0.25 else write_pcap(changed, rng)
    if rng.random() < 0.15:  # the file's own structure: headers, lengths, the end
        data = bytes(mutate_bytes(data, rng, rounds=rng.randint(1, 2)))
    return data


# -- seeds --------------------------------------------------------------------------------------


def capture_files() -> list[Path]:
    shipped = sorted(SHIPPED.glob("*.pcap"))
    public = sorted(PUBLIC.glob("*.pcap*")) if PUBLIC.is_dir() else []
    return shipped + public


def frame_seeds() -> list[FrameCase]:
    """Every frame of the shipped and third-party captures, responses with their request's API."""
    from kdissect.pipeline import read_messages

    cases = []
    for path in capture_files():
        for message in read_messages(path, ports=(9092, 36333)):
            if message.is_request:
                cases.append(FrameCase(message.frame.data, True))
            else:
                cases.append(FrameCase(message.frame.data, False, message.api_key, message.api_version))
    return cases


def capture_seeds() -> list[CaptureModel]:
    models = []
    for path in capture_files():
        data = path.read_bytes()
        model = parse_pcap(data) or parse_pcapng(data)
        if model is not None and model.records:
            models.append(model)
    return models


# -- checks -------------------------------------------------------------------------------------


def check_tree(tree: Any, data: bytes) -> list[str]:
    """What is wrong with a message tree decoded from `data` (empty when sound)."""
    from kdissect.present.records import tree_record
    from kdissect.present.text import render_tree

    problems = [f"tiling: {problem}" for problem in tree.tiling_errors()[:3]]
    if (tree.offset, tree.size) != (0, len(data)):
        problems.append(f"span: the root covers [{tree.offset}, {tree.end}) of a {len(data)}-byte frame")
    for note in tree.all_notes():
        if note.offset is not None and not 0 <= note.offset <= len(data):
            problems.append(f"note: offset {note.offset} outside the {len(data)}-byte frame: {note.message}")
            break
    text = render_tree(tree)
    if not all(line.isprintable() for line in text.split("\n")):
        problems.append("terminal: the rendered tree holds control characters")
    json.dumps(tree_record(tree), allow_nan=False)
    return problems


def check_case(data: bytes) -> tuple[list[str], int]:
    from kdissect.decode.dissect import dissect_request, dissect_response

    case = FrameCase.decode(data)
    if case.request:
        tree = dissect_request(case.frame)
    else:
        tree = dissect_response(case.frame, case.api_key, case.api_version)
    return check_tree(tree, case.frame), 1


def check_capture(data: bytes) -> tuple[list[str], int]:
    """Decode everything of one capture (problems, messages); CaptureError only before
    anything was read."""
    from kdissect.ingest.capture import CaptureError
    from kdissect.pipeline import read_messages

    problems: list[str] = []
    reported: list[Any] = []
    ends: dict[tuple[int, str], int] = {}
    count = 0
    try:
        for message in read_messages(io.BytesIO(data), report=reported.append):
            count += 1
            problems += check_message(message, ends)
    except CaptureError:
        if count or reported:
            problems.append("capture: CaptureError after the capture was being read")
    return problems, count


def check_message(message: Any, ends: dict[tuple[int, str], int]) -> list[str]:
    from kdissect.present.records import message_record
    from kdissect.present.summary import summary_line

    frame = message.frame
    problems = check_tree(message.tree(), frame.data)
    declared = int.from_bytes(frame.data[:4], "big", signed=True) + 4 if len(frame.data) >= 4 else -1
    if frame.complete and declared != len(frame.data):
        problems.append(f"frame: complete, but {len(frame.data)} bytes with a size prefix of {declared - 4}")
    key = (frame.connection.index, str(frame.direction))
    if frame.stream_offset < ends.get(key, 0) or frame.first_packet > frame.last_packet:
        problems.append(f"frame: out of order in its stream at offset {frame.stream_offset}")
    ends[key] = frame.stream_offset + len(frame.data)
    if not summary_line(message, 0.0, body_info=True).isprintable():
        problems.append("terminal: the summary line holds control characters")
    json.dumps(message_record(message), allow_nan=False)
    return problems


CLI_OPTIONS = (["-V", "-x", "-i"], ["-T", "json"], ["-T", "jsonl", "-Y", "latency_ms >= 0"],
               ["--stats"], ["-V", "--wide", "--port", "36333"], ["--export", "out", "--format", "csv"],
               ["-t", "a", "-i"])


def check_cli(data: bytes, rng: random.Random) -> list[str]:
    """The CLI on the capture as a file: exit 0 or 2, no internal error, terminal-safe output,
    and nothing written but the export tables."""
    from kdissect.cli import main

    with tempfile.TemporaryDirectory(prefix="kdissect-fuzz-") as folder:
        path = Path(folder) / "input.pcap"
        path.write_bytes(data)
        options = [str(Path(folder) / o) if o == "out" else o for o in rng.choice(CLI_OPTIONS)]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main([str(path), *options])
        written = sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*"))
    problems = []
    if status not in (0, 2) or "internal error" in err.getvalue():
        problems.append(f"cli: exit {status}: {err.getvalue().strip()[-300:]}")
    if not all(line.isprintable() for line in (out.getvalue() + err.getvalue()).splitlines()):
        problems.append("terminal: CLI output holds control characters")
    if any(name != "input.pcap" and not name.startswith("out") for name in written):
        problems.append(f"cli: files appeared beside the capture: {written}")
    return problems


# -- targets ------------------------------------------------------------------------------------


class Target:
    name = ""
    suffix = ""
    max_len = 0

    def seeds(self) -> list[bytes]:
        raise NotImplementedError

    def generate(self, rng: random.Random) -> bytes:
        raise NotImplementedError

    def mutate(self, data: bytes, rng: random.Random) -> bytes:
        raise NotImplementedError

    def check(self, data: bytes, rng: random.Random, index: int) -> tuple[list[str], int]:
        """(what is wrong, how many messages were decoded)"""
        raise NotImplementedError


class DecoderTarget(Target):
    name, suffix, max_len = "decoder", ".bin", 8192

    def __init__(self) -> None:
        self.cases = frame_seeds()

    def seeds(self) -> list[bytes]:
        return [case.encode() for case in self.cases]

    def generate(self, rng: random.Random) -> bytes:
        draw = rng.random()
        if draw < 0.03:
            return rng.randbytes(rng.randint(0, 300))
        if draw < 0.15:
            made = random_request(rng) if rng.random() < 0.5 else random_response(rng)
            return mutate_case(made, rng).encode() if rng.random() < 0.5 else made.encode()
        return mutate_case(rng.choice(self.cases), rng).encode()

    def mutate(self, data: bytes, rng: random.Random) -> bytes:
        return mutate_case(FrameCase.decode(data), rng).encode()

    def check(self, data: bytes, rng: random.Random, index: int) -> tuple[list[str], int]:
        return check_case(data)


class PipelineTarget(Target):
    name, suffix, max_len = "pipeline", ".pcap", 40000

    def __init__(self) -> None:
        self.models = capture_seeds()
        self.cli_runs = 0

    def seeds(self) -> list[bytes]:
        return [write_pcap(model, random.Random(0)) for model in self.models]

    def generate(self, rng: random.Random) -> bytes:
        return mutate_capture(rng.choice(self.models), rng, self.models)

    def mutate(self, data: bytes, rng: random.Random) -> bytes:
        model = parse_pcap(data) or parse_pcapng(data)
        if model is None or not model.records:
            return bytes(mutate_bytes(data, rng))
        return mutate_capture(model, rng, self.models)

    def check(self, data: bytes, rng: random.Random, index: int) -> tuple[list[str], int]:
        problems, count = check_capture(data)
        if index % CLI_EVERY == 0:
            problems += check_cli(data, rng)
            self.cli_runs += 1
        return problems, count


# -- records: record batches and compression ----------------------------------------------------

RECORDS_T0 = 1_796_000_000_000
BOMB_BYTES = 64 << 20  # what a bomb seed expands to; each is a few kilobytes


def built_record_sets() -> list[bytes]:
    """Record sets of every magic and codec, built by kafka-python's record builders."""
    from kafka.record.memory_records import MemoryRecordsBuilder

    sets = []
    for magic, codec in [(m, c) for m in (0, 1, 2) for c in range(5) if m == 2 or c < 4]:
        builder = MemoryRecordsBuilder(magic, codec, 1 << 16)
        for index in range(4):
            headers = [("h", b"v"), ("n", b"")] if magic == 2 and index % 2 else []
            builder.append(RECORDS_T0 + index, None if index == 1 else b"key-%d" % index,
                           None if index == 2 else b"value %d " % index * 8, headers)
        builder.close()
        sets.append(bytes(builder.buffer()))
    return sets


@functools.cache
def bombs() -> dict[int, bytes]:
    """A small payload per codec that decompresses to BOMB_BYTES zeros."""
    import gzip

    import zstandard

    zero = bytes(BOMB_BYTES)
    stream = zstandard.ZstdCompressor().compressobj()
    return {1: gzip.compress(zero, 9), 4: stream.compress(zero) + stream.flush()}


def rebatch(batch: bytes, codec: int, records: bytes) -> bytes:
    """A magic 2 batch with other records and codec; its length and CRC-32C made right again."""
    from kafka.record._crc32c import crc  # kafka-python's own, not the decoder's

    data = bytearray(batch[:61]) + records
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">h", data, 21, (struct.unpack_from(">h", data, 21)[0] & ~0x07) | codec)
    struct.pack_into(">I", data, 17, crc(bytes(data[21:])))
    return bytes(data)


def hostile_records(batch: bytes, rng: random.Random) -> bytes:
    """A batch whose records are a bomb, cut or damaged compressed data, or noise; CRC kept right."""
    from kdissect.decode.compression import decompress

    codec = batch[22] & 0x07
    draw = rng.random()
    if draw < 0.3:
        codec = rng.choice(sorted(bombs()))
        return rebatch(batch, codec, bombs()[codec])
    body = batch[61:]
    if draw < 0.6 and codec:
        return rebatch(batch, codec, body[:rng.randrange(len(body))])
    if draw < 0.8 and codec:
        plain = decompress(codec, body, cap=1 << 20, legacy=False)
        return rebatch(batch, rng.randrange(1, 5), bytes(mutate_bytes(plain, rng, rounds=1)))
    return rebatch(batch, codec, bytes(mutate_bytes(body, rng)))


def mutate_records(data: bytes, rng: random.Random) -> bytes:
    if rng.random() < 0.4 and len(data) > 61 and data[16] == 2:
        size = struct.unpack_from(">i", data, 8)[0] + 12
        if 61 <= size <= len(data):
            return hostile_records(data[:size], rng) + data[size:]
    if rng.random() < 0.2:
        return data + rng.choice(built_record_sets())[:rng.randrange(80)]  # a partial last batch
    return bytes(mutate_bytes(data, rng))


def check_records(data: bytes) -> tuple[list[str], int]:
    """A records field's bytes: the tree tiles and renders; rows come out; nothing escapes."""
    from kdissect.decode.record_nodes import entries_nodes
    from kdissect.decode.records import decode_records, record_rows
    from kdissect.decode.tree import Node

    node = Node("records", "records", data, "", 0, len(data))
    node.children = entries_nodes(data, 0, len(data))
    problems = check_tree(node, data)
    return problems, sum(1 for _ in record_rows(decode_records(data)))


class RecordsTarget(Target):
    name, suffix, max_len = "records", ".records", 16384

    def __init__(self) -> None:
        self.sets = built_record_sets()

    def seeds(self) -> list[bytes]:
        return [*self.sets, b"".join(self.sets[-5:])]

    def generate(self, rng: random.Random) -> bytes:
        data = rng.choice(self.sets)
        if rng.random() < 0.3:
            data += rng.choice(self.sets)
        return self.mutate(data, rng)

    def mutate(self, data: bytes, rng: random.Random) -> bytes:
        return mutate_records(data, rng)

    def check(self, data: bytes, rng: random.Random, index: int) -> tuple[list[str], int]:
        return check_records(data)


TARGETS: dict[str, Callable[[], Target]] = {"decoder": DecoderTarget, "pipeline": PipelineTarget,
                                            "records": RecordsTarget}


# -- running and reporting ----------------------------------------------------------------------


@dataclass
class Run:
    """What a run did and found."""

    target: Target
    engine: str
    seed: int
    findings: Path
    started: float = field(default_factory=time.perf_counter)
    inputs: int = 0
    messages: int = 0
    exceptions: Counter[str] = field(default_factory=Counter)
    violations: Counter[str] = field(default_factory=Counter)
    slowest: tuple[float, int] = (0.0, 0)
    written: list[Path] = field(default_factory=list)
    kinds: set[str] = field(default_factory=set)
    rng: random.Random = field(default_factory=random.Random)
    last_progress: float = field(default_factory=time.perf_counter)

    def one(self, data: bytes) -> None:
        """Run one input, counting what escapes or breaks."""
        self.inputs += 1
        began = time.perf_counter()
        try:
            problems, decoded = self.target.check(data, self.rng, self.inputs)
            self.messages += decoded
        except Exception as exc:  # everything that escapes is a finding
            signature = exception_signature(exc)
            self.exceptions[signature] += 1
            self.record(signature, data, traceback.format_exc())
            problems = []
        elapsed = time.perf_counter() - began
        if elapsed > self.slowest[0]:
            self.slowest = (elapsed, len(data))
        for problem in problems:
            kind = problem.split(":", 1)[0]
            self.violations[kind] += 1
            self.record(problem, data, problem)
        if began - self.last_progress > 60:
            self.last_progress = began
            print(f"[{self.target.name} seed {self.seed}] {self.progress()}", file=sys.stderr, flush=True)

    def record(self, signature: str, data: bytes, details: str) -> None:
        """Write the first reproducer of each kind of finding (numbers aside)."""
        kind = re.sub(r"\d+", "N", signature)
        if kind in self.kinds or len(self.written) >= MAX_FINDINGS:
            return
        self.kinds.add(kind)
        digest = hashlib.sha1(data).hexdigest()[:12]
        path = self.findings / f"{self.target.name}-{digest}{self.target.suffix}"
        self.findings.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        self.written.append(path)
        print(f"finding {path}:\n{details}", file=sys.stderr, flush=True)

    def progress(self) -> str:
        seconds = time.perf_counter() - self.started
        return (f"{self.inputs} inputs in {seconds:.0f} s, {sum(self.exceptions.values())} exceptions, "
                f"{sum(self.violations.values())} violations")

    def report(self) -> str:
        seconds = time.perf_counter() - self.started
        tiling = self.violations["tiling"] + self.violations["span"]
        lines = [
            f"kdissect fuzz: target={self.target.name} engine={self.engine} seed={self.seed}",
            f"  inputs              {self.inputs}",
            f"  seconds             {seconds:.1f} ({self.inputs / max(seconds, 1e-9):.0f} inputs/s)",
            f"  exceptions          {sum(self.exceptions.values())} ({len(self.exceptions)} distinct)",
            f"  tiling violations   {tiling}",
            f"  other violations    {sum(self.violations.values()) - tiling} {dict(self.violations)}",
            f"  messages decoded    {self.messages}" + _cli_runs(self.target),
            f"  slowest input       {self.slowest[0] * 1000:.1f} ms ({self.slowest[1]} bytes)",
            f"  findings written    {len(self.written)}",
        ]
        lines += [f"    {count} x {signature}" for signature, count in self.exceptions.most_common()]
        lines += [f"    {path}" for path in self.written]
        return "\n".join(lines)


def _cli_runs(target: Target) -> str:
    runs = getattr(target, "cli_runs", None)
    return "" if runs is None else f" (and {runs} CLI runs)"


def exception_signature(exc: BaseException) -> str:
    """The exception type and the innermost kdissect line it came from."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "kdissect" in f.filename] or frames
    where = f"{Path(ours[-1].filename).name}:{ours[-1].lineno}" if ours else "?"
    return f"{type(exc).__name__} at {where}: {str(exc)[:80]}"


def run_random(run: Run, inputs: int, deadline: float) -> None:
    rng = random.Random(run.seed)
    run.rng = random.Random(run.seed + 1)
    for _ in range(inputs):
        run.one(run.target.generate(rng))
        if run.inputs % 256 == 0 and time.perf_counter() > deadline:
            break


def run_atheris(run: Run, inputs: int, deadline: float) -> None:
    """Coverage-guided: libFuzzer drives; our structured mutations alternate with its own."""
    import atheris

    corpus = Path(tempfile.mkdtemp(prefix="kdissect-fuzz-corpus-"))
    for index, seed in enumerate(run.target.seeds()):
        (corpus / f"seed-{index}").write_bytes(seed)
    run.rng = random.Random(run.seed + 1)
    finish = functools.partial(_finish_atheris, run, corpus)

    def test_one_input(data: bytes) -> None:
        run.one(data)
        if run.inputs >= inputs or (run.inputs % 256 == 0 and time.perf_counter() > deadline):
            finish()

    def custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
        rng = random.Random(seed)
        if rng.random() < 0.5:
            return bytes(atheris.Mutate(data, max_size))
        return run.target.mutate(data, rng)[:max_size]

    atheris.Setup([sys.argv[0], f"-seed={run.seed}", f"-max_len={run.target.max_len}",
                   "-timeout=60", "-rss_limit_mb=4096", "-print_final_stats=0", str(corpus)],
                  test_one_input, custom_mutator=custom_mutator)
    atheris.Fuzz()
    finish()


def _finish_atheris(run: Run, corpus: Path) -> None:
    print(run.report(), flush=True)
    shutil.rmtree(corpus, ignore_errors=True)
    sys.stdout.flush()
    os._exit(1 if run.exceptions or run.violations else 0)  # libFuzzer never returns otherwise


def load_kdissect(instrument: bool) -> None:
    """Import the package under test, instrumented for coverage when atheris drives."""
    context: Any = contextlib.nullcontext()
    if instrument:
        import atheris

        context = atheris.instrument_imports(include=["kdissect"])
    with context:
        for name in MODULES:
            importlib.import_module(name)


def default_engine() -> str:
    try:
        importlib.import_module("atheris")
    except ImportError:
        return "random"
    return "atheris"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("target", choices=sorted(TARGETS))
    parser.add_argument("--inputs", type=int, default=1_000_000, help="inputs to run (default 1000000)")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--engine", choices=("atheris", "random"), default=default_engine())
    parser.add_argument("--findings", type=Path, default=Path("fuzz-findings"),
                        help="where reproducers are written (default ./fuzz-findings)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    load_kdissect(instrument=args.engine == "atheris")
    run = Run(TARGETS[args.target](), args.engine, args.seed, args.findings)
    deadline = time.perf_counter() + (args.seconds if args.seconds is not None else float("inf"))
    print(f"kdissect fuzz: {args.target}, {len(run.target.seeds())} seeds, engine {args.engine}, "
          f"seed {args.seed}", file=sys.stderr, flush=True)
    if args.engine == "atheris":
        run_atheris(run, args.inputs, deadline)
    run_random(run, args.inputs, deadline)
    print(run.report())
    return 1 if run.exceptions or run.violations else 0


if __name__ == "__main__":
    sys.exit(main())
