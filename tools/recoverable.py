"""The recoverable bound: which messages of a capture survive in a lossy copy of it.

    python -m tools.recoverable original.pcap lossy.pcap [--port 9092] [--tshark]

A message is recoverable from the copy when every byte of it (size prefix
included) is in some packet of the copy: the bytes are located by sequence
number, so this needs no reassembly of the copy. The original's messages (a
lossless capture) are read with kdissect; where each byte sits comes from the
original's frames and its SYNs. Prints the bound and how many recoverable
messages kdissect (and, with --tshark, tshark) finds in the copy, and how many
messages each reports that the original does not have (invented).

A message's identity: client, server, direction, correlation id, length, and
the API (a response that says "request missing" names none, and is matched
without it).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kdissect.ingest.capture import read_records
from kdissect.ingest.framing import DEFAULT_PORTS
from kdissect.ingest.net import SYN, decode_tcp, format_address
from kdissect.pipeline import read_messages

Key = tuple[str, str, str, int, int]  # client, server, direction, correlation id, length


@dataclass(frozen=True, slots=True)
class Wanted:
    key: Key
    api: int | None
    sender: tuple[bytes, int, bytes, int]
    start: int  # first sequence number (absolute, unwrapped from the stream's base)
    size: int


@dataclass(frozen=True, slots=True)
class Score:
    recoverable: int
    recovered: int
    invented: int


def original_messages(path: Path, ports: Iterable[int]) -> list[Wanted]:
    bases = _stream_bases(path)
    out = []
    for message in read_messages(path, ports=ports):
        frame = message.frame
        connection = frame.connection
        request = message.is_request
        src, dst = (connection.client, connection.server) if request else (
            connection.server, connection.client)
        sender = (*src, *dst)
        base = bases.get(sender)
        if base is None or message.correlation_id is None:
            continue
        key = (format_address(connection.client), format_address(connection.server),
               str(frame.direction), message.correlation_id, len(frame.data))
        out.append(Wanted(key, message.api_key, sender, base + frame.stream_offset,
                          len(frame.data)))
    return out


def _stream_bases(path: Path) -> dict[tuple[bytes, int, bytes, int], int]:
    """Sequence number of stream offset 0 per direction: after the SYN, else the first byte."""
    bases: dict[tuple[bytes, int, bytes, int], int] = {}
    for _number, _time, linktype, data, length in read_records(path):
        raw = decode_tcp(linktype, data, length)
        if raw is None:
            continue
        src, sport, dst, dport, seq, _ack, flags, body, missing = raw
        sender = (src, sport, dst, dport)
        if flags & SYN:
            bases[sender] = seq + 1
        elif (body or missing) and sender not in bases:
            bases[sender] = seq
    return bases


def captured_bytes(path: Path) -> dict[tuple[bytes, int, bytes, int], list[tuple[int, int]]]:
    """Per direction, the sequence number ranges whose bytes the copy holds (32-bit, raw)."""
    ranges: dict[tuple[bytes, int, bytes, int], list[tuple[int, int]]] = {}
    for _number, _time, linktype, data, length in read_records(path):
        raw = decode_tcp(linktype, data, length)
        if raw is None or not raw[7]:
            continue
        src, sport, dst, dport, seq, _ack, _flags, body, _missing = raw
        ranges.setdefault((src, sport, dst, dport), []).append((seq, len(body)))
    return ranges


def recoverable(wanted: list[Wanted], lossy: Path) -> list[Wanted]:
    held = captured_bytes(lossy)
    out = []
    for message in wanted:
        pieces = [((seq - message.start) % 2**32, size) for seq, size in held.get(message.sender, [])]
        if _covers(pieces, message.size):
            out.append(message)
    return out


def _covers(pieces: list[tuple[int, int]], size: int) -> bool:
    """Whether pieces (offset from the message start mod 2^32, length) cover [0, size)."""
    spans = []
    for offset, length in pieces:
        if offset > 2**31:  # starts before the message
            offset -= 2**32
        if offset < size and offset + length > 0:
            spans.append((max(offset, 0), min(offset + length, size)))
    reached = 0
    for start, end in sorted(spans):
        if start > reached:
            return False
        reached = max(reached, end)
    return reached >= size


def score(wanted: list[Wanted], found: list[tuple[Key, int | None]], bound: list[Wanted]) -> Score:
    """Recovered: found messages that are recoverable; invented: found ones the original lacks."""
    original = Counter((m.key, m.api) for m in wanted)
    without_api = Counter(m.key for m in wanted)
    possible = Counter((m.key, m.api) for m in bound)
    recovered = invented = 0
    for key, api in found:
        if api is None and without_api[key] > 0:
            without_api[key] -= 1
            match = next((k for k in possible if k[0] == key and possible[k] > 0), None)
            recovered += match is not None
            if match is not None:
                possible[match] -= 1
            continue
        if original[(key, api)] > 0:
            original[(key, api)] -= 1
            without_api[key] -= 1
            if possible[(key, api)] > 0:
                possible[(key, api)] -= 1
                recovered += 1
        else:
            invented += 1
    return Score(len(bound), recovered, invented)


def kdissect_found(path: Path, ports: Iterable[int]) -> list[tuple[Key, int | None]]:
    found = []
    for message in read_messages(path, ports=ports):
        connection = message.frame.connection
        if message.correlation_id is None or not message.frame.complete:
            continue
        key = (format_address(connection.client), format_address(connection.server),
               str(message.frame.direction), message.correlation_id, len(message.frame.data))
        found.append((key, message.api_key))
    return found


def tshark_found(path: Path, ports: Iterable[int]) -> list[tuple[Key, int | None]]:
    """tshark's Kafka messages (each PDU of each packet), keyed like kdissect's."""
    ports = list(ports)
    command = [shutil.which("tshark") or "tshark", "-n", "-r", str(path)]
    for port in ports:
        command += ["-d", f"tcp.port=={port},kafka"]
    command += ["-Y", "kafka", "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=;",
                "-e", "ip.src", "-e", "tcp.srcport", "-e", "ip.dst", "-e", "tcp.dstport",
                "-e", "kafka.correlation_id", "-e", "kafka.len", "-e", "kafka.api_key"]
    run = subprocess.run(command, capture_output=True, text=True, check=True)
    found = []
    for line in run.stdout.splitlines():
        src, sport, dst, dport, ids, lengths, keys = (line.split("\t") + [""] * 7)[:7]
        request = int(dport) in ports
        client, server = (f"{src}:{sport}", f"{dst}:{dport}") if request else (
            f"{dst}:{dport}", f"{src}:{sport}")
        key_list = keys.split(";") if keys else []
        for i, (cid, length) in enumerate(zip(ids.split(";"), lengths.split(";"), strict=False)):
            if not cid or not length:
                continue
            api = int(key_list[i]) if i < len(key_list) and key_list[i] else None
            found.append(((client, server, "request" if request else "response", int(cid),
                           int(length) + 4), api))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.recoverable", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("original", type=Path)
    parser.add_argument("lossy", type=Path)
    parser.add_argument("--port", type=int, action="append", default=[])
    parser.add_argument("--tshark", action="store_true", help="score tshark on the copy too")
    arguments = parser.parse_args(argv)
    ports = [*DEFAULT_PORTS, *arguments.port]
    wanted = original_messages(arguments.original, ports)
    bound = recoverable(wanted, arguments.lossy)
    print(f"original {len(wanted)} messages; recoverable from the copy {len(bound)}")
    tools = {"kdissect": kdissect_found}
    if arguments.tshark:
        tools["tshark"] = tshark_found
    for name, finder in tools.items():
        result = score(wanted, finder(arguments.lossy, ports), bound)
        share = 100.0 * result.recovered / max(result.recoverable, 1)
        print(f"{name}: recovered {result.recovered} of {result.recoverable} ({share:.1f}%), "
              f"invented {result.invented}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
