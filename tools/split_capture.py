"""Split a capture into several files at packet boundaries, as `tcpdump -C/-G` rotation does.

    python -m tools.split_capture capture.pcap out/ --at 10,57,200
    python -m tools.split_capture capture.pcap out/ --parts 5 --seed 7

Cut points are packet numbers (1-based: `--at 10` starts the second file with packet
10) or, with `--parts`, chosen at random (seeded), so cuts fall anywhere: inside a
Kafka message that spans packets, inside a burst of segments. Each part is a valid
capture of the input's format: a classic pcap part repeats the file header; a pcapng
part starts with the section header and every interface description seen so far.
Records are copied byte for byte; nothing is re-encoded.
"""

from __future__ import annotations

import argparse
import random
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path

PCAP_MAGICS = {b"\xd4\xc3\xb2\xa1": "<", b"\x4d\x3c\xb2\xa1": "<",
               b"\xa1\xb2\xc3\xd4": ">", b"\xa1\xb2\x3c\x4d": ">"}
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"
PCAPNG_PACKET_BLOCKS = frozenset({2, 3, 6})  # obsolete packet, simple packet, enhanced packet
PCAPNG_INTERFACE_BLOCK = 1


def units(data: bytes) -> tuple[bytes, list[tuple[bytes, bool]]]:
    """(header kept in every part, [(record bytes, is a packet)]) of a pcap or pcapng file."""
    if data[:4] in PCAP_MAGICS:
        return data[:24], [(record, True) for record in _pcap_records(data, PCAP_MAGICS[data[:4]])]
    if data[:4] == PCAPNG_MAGIC:
        endian = "<" if data[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
        blocks = list(_pcapng_blocks(data, endian))
        header, rest = blocks[0][1], blocks[1:]
        return header, [(block, kind in PCAPNG_PACKET_BLOCKS) for kind, block in rest]
    raise ValueError("not a pcap or pcapng file")


def _pcap_records(data: bytes, endian: str) -> Iterator[bytes]:
    position = 24
    while position + 16 <= len(data):
        (captured,) = struct.unpack_from(endian + "I", data, position + 8)
        yield data[position:position + 16 + captured]
        position += 16 + captured


def _pcapng_blocks(data: bytes, endian: str) -> Iterator[tuple[int, bytes]]:
    position = 0
    while position + 12 <= len(data):
        kind, length = struct.unpack_from(endian + "II", data, position)
        yield kind, data[position:position + length]
        position += length


def split(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    """The parts of a capture cut before each packet number in `cuts`."""
    header, records = units(data)
    starts = sorted(set(cuts))
    parts: list[list[bytes]] = [[]]
    interfaces: list[bytes] = []  # pcapng: every part must describe the interfaces it uses
    number = 0
    for record, is_packet in records:
        if is_packet:
            number += 1
            if starts and number == starts[0]:
                starts.pop(0)
                parts.append(list(interfaces))
        elif data[:4] == PCAPNG_MAGIC and _block_kind(record, data) == PCAPNG_INTERFACE_BLOCK:
            interfaces.append(record)
        parts[-1].append(record)
    return [header + b"".join(part) for part in parts]


def _block_kind(block: bytes, data: bytes) -> int:
    endian = "<" if data[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
    kind: int = struct.unpack_from(endian + "I", block)[0]
    return kind


def packet_count(data: bytes) -> int:
    return sum(1 for _record, is_packet in units(data)[1] if is_packet)


def random_cuts(count: int, parts: int, seed: int) -> list[int]:
    """`parts - 1` distinct cut points among packets 2..count, chosen with `seed`."""
    chooser = random.Random(seed)
    return sorted(chooser.sample(range(2, count + 1), min(parts - 1, max(count - 1, 0))))


def write_parts(source: Path, directory: Path, cuts: Sequence[int]) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for index, part in enumerate(split(source.read_bytes(), cuts)):
        path = directory / f"{source.stem}-{index:03d}{source.suffix}"
        path.write_bytes(part)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", type=Path)
    parser.add_argument("directory", type=Path)
    how = parser.add_mutually_exclusive_group(required=True)
    how.add_argument("--at", help="comma-separated packet numbers that start a new file")
    how.add_argument("--parts", type=int, help="number of files, cut at random packets")
    parser.add_argument("--seed", type=int, default=0, help="seed for --parts")
    args = parser.parse_args(argv)
    data = args.capture.read_bytes()
    cuts = ([int(n) for n in args.at.split(",") if n] if args.at
            else random_cuts(packet_count(data), args.parts, args.seed))
    for path in write_parts(args.capture, args.directory, cuts):
        print(path)


if __name__ == "__main__":
    main()
