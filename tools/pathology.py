"""Pathology variants of a capture: what real capture points do to TCP traffic.

    python -m tools.pathology capture.pcap out/ --seed 1
    python -m tools.pathology capture.pcap out/ --only swap,drop --drop 0.015

Each variant is the original's packets, changed in one way, written as a pcap
(microsecond timestamps, the original's link type):

- ``swap``: a share of data segments (default 15%) swapped with the next data
  segment, what multi-queue NICs and ``tcpdump -i any`` produce;
- ``window``: data segments shuffled within windows of N (default 6);
- ``ack-ahead``: every pure ACK moved before the data segment whose bytes it
  acknowledges last, so the capture shows acknowledgements of unseen data;
- ``drop``: a share of data segments (default 1.5%) lost;
- ``cut``: the capture starts in the middle (default at 40% of its packets);
- ``snaplen``: every packet cut at N bytes (default 200);
- ``retransmit``: a share of data segments (default 10%) sent again, exactly, a
  few packets later;
- ``overlap``: a share of data segments (default 10%) sent again joined to the
  head of the next segment of their direction (a retransmission that overlaps).

Reordering keeps every data segment after its connection's first packet and
before its FIN (reordering across the handshake or teardown is another
pathology) and within 50 ms of capture time (multi-queue reordering spans
microseconds), and keeps the timestamps in their slots (the i-th packet keeps the i-th
time), so capture time still runs forwards. The same seed gives the same files.
Lossless variants (swap, window, ack-ahead, retransmit, overlap) carry every
byte of the original; lossy ones (drop, cut, snaplen) are scored with
``tools/recoverable.py``.
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.packet import Packet, Raw
from scapy.utils import PcapReader

Packets = list[Packet]
SPAN = 0.05  # seconds: reordering moves a segment no further in capture time
Direction = tuple[str, int, str, int]


@dataclass(frozen=True, slots=True)
class Settings:
    seed: int = 1
    swap: float = 0.15
    window: int = 6
    drop: float = 0.015
    cut: float = 0.4
    snaplen: int = 200
    retransmit: float = 0.10
    overlap: float = 0.10


def read(path: Path) -> tuple[Packets, int]:
    with PcapReader(str(path)) as reader:
        packets = list(reader)
        linktype = int(getattr(reader, "linktype", 1))
    return packets, linktype


def write(path: Path, packets: Packets, linktype: int, snaplen: int = 262144) -> Path:
    """A microsecond pcap; packets longer than `snaplen` are cut (original length kept)."""
    records = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, linktype)]
    for packet in packets:
        data = bytes(packet)
        micros = round(packet.time * 1_000_000)
        kept = data[:snaplen]
        records.append(struct.pack("<IIII", micros // 1_000_000, micros % 1_000_000,
                                   len(kept), len(data)) + kept)
    path.write_bytes(b"".join(records))
    return path


def payload(packet: Packet) -> bytes:
    return bytes(packet[TCP].payload) if TCP in packet else b""


def direction(packet: Packet) -> Direction:
    ip = packet[IP] if IP in packet else packet[IPv6]
    return ip.src, packet[TCP].sport, ip.dst, packet[TCP].dport


def data_indexes(packets: Packets) -> list[int]:
    return [i for i, packet in enumerate(packets) if payload(packet)]


def in_slots(original: Packets, order: Packets) -> Packets:
    """`order`'s packets carrying `original`'s timestamps, slot by slot."""
    out = []
    for slot, packet in zip(original, order, strict=True):
        copy = packet.copy()
        copy.time = slot.time
        out.append(copy)
    return out


def piece(packet: Packet, data: bytes, seq: int) -> Packet:
    """A copy of a data packet carrying `data` from sequence number `seq`."""
    copy = packet.copy()
    copy[TCP].seq = seq % 2**32
    copy[TCP].remove_payload()
    copy[TCP].add_payload(Raw(data))
    if IP in copy:
        copy[IP].len = copy[IP].chksum = None
    else:
        copy[IPv6].plen = None
    copy[TCP].chksum = None
    return copy


# --- the variants ---

def connection_spans(packets: Packets) -> dict[frozenset[tuple[str, int]], tuple[int, int]]:
    """Per connection: the index of its first packet and of its first FIN or RST."""
    spans: dict[frozenset[tuple[str, int]], tuple[int, int]] = {}
    for i, packet in enumerate(packets):
        if TCP not in packet:
            continue
        src, sport, dst, dport = direction(packet)
        key = frozenset({(src, sport), (dst, dport)})
        first, end = spans.get(key, (i, len(packets)))
        if packet[TCP].flags & 0x05 and end == len(packets):  # FIN or RST
            end = i
        spans[key] = (first, end)
    return spans


def _fits(packets: Packets, spans: dict[frozenset[tuple[str, int]], tuple[int, int]],
          index: int, slot: int) -> bool:
    """Whether the data packet at `index` may move to `slot`: after its connection's first
    packet, before its FIN (reordering across the handshake is another pathology), and
    no further than SPAN of capture time."""
    src, sport, dst, dport = direction(packets[index])
    first, end = spans[frozenset({(src, sport), (dst, dport)})]
    near = abs(float(packets[slot].time) - float(packets[index].time)) <= SPAN
    return slot == index or (first < slot < end and near)


def swap(packets: Packets, settings: Settings) -> Packets:
    rng = random.Random(settings.seed)
    spans = connection_spans(packets)
    order = list(packets)
    data = data_indexes(packets)
    position = 0
    while position < len(data) - 1:
        a, b = data[position], data[position + 1]
        if (rng.random() < settings.swap and _fits(packets, spans, a, b)
                and _fits(packets, spans, b, a)):
            order[a], order[b] = order[b], order[a]
            position += 2
        else:
            position += 1
    return in_slots(packets, order)


def window(packets: Packets, settings: Settings) -> Packets:
    rng = random.Random(settings.seed)
    spans = connection_spans(packets)
    order = list(packets)
    data = data_indexes(packets)
    for start in range(0, len(data), settings.window):
        slots = data[start:start + settings.window]
        for _attempt in range(8):  # a shuffle that keeps every segment inside its connection
            chosen = list(slots)
            rng.shuffle(chosen)
            if all(_fits(packets, spans, i, slot) for i, slot in zip(chosen, slots, strict=True)):
                break
        else:
            chosen = list(slots)
        for slot, index in zip(slots, chosen, strict=True):
            order[slot] = packets[index]
    return in_slots(packets, order)


def ack_ahead(packets: Packets, _settings: Settings) -> Packets:
    """Each pure ACK goes right before the last data segment it acknowledges."""
    order: list[Packet] = []
    last_data: dict[Direction, tuple[int, int]] = {}  # direction: (position in order, end seq)
    for packet in packets:
        if TCP not in packet:
            order.append(packet)
            continue
        size = len(payload(packet))
        if size:
            last_data[direction(packet)] = (len(order), (packet[TCP].seq + size) % 2**32)
            order.append(packet)
            continue
        flags = packet[TCP].flags
        src, sport, dst, dport = direction(packet)
        acked = last_data.get((dst, dport, src, sport))
        if acked is not None and flags.A and not flags & 0x07 and packet[TCP].ack == acked[1]:
            position = acked[0]
            order.insert(position, packet)
            last_data = {key: (p + (p >= position), end) for key, (p, end) in last_data.items()}
            del last_data[(dst, dport, src, sport)]
        else:
            order.append(packet)
    return in_slots(packets, order)


def drop(packets: Packets, settings: Settings) -> Packets:
    rng = random.Random(settings.seed)
    data = data_indexes(packets)
    lost = set(rng.sample(data, max(1, round(len(data) * settings.drop))))
    return [packet for i, packet in enumerate(packets) if i not in lost]


def cut(packets: Packets, settings: Settings) -> Packets:
    return packets[int(len(packets) * settings.cut):]


def retransmit(packets: Packets, settings: Settings) -> Packets:
    rng = random.Random(settings.seed)
    chosen = {i for i in data_indexes(packets) if rng.random() < settings.retransmit}
    return _resend(packets, {i: packets[i].copy() for i in chosen})


def overlap(packets: Packets, settings: Settings) -> Packets:
    """A segment again, joined to the head of its direction's next data segment."""
    rng = random.Random(settings.seed)
    following: dict[int, int] = {}
    last: dict[Direction, int] = {}
    for i in data_indexes(packets):
        key = direction(packets[i])
        if key in last:
            following[last[key]] = i
        last[key] = i
    again = {}
    for i, j in following.items():
        first, second = packets[i], packets[j]
        contiguous = (first[TCP].seq + len(payload(first))) % 2**32 == second[TCP].seq
        if contiguous and rng.random() < settings.overlap:
            data = payload(first) + payload(second)[:max(1, len(payload(second)) // 2)]
            again[j] = piece(first, data, first[TCP].seq)
    return _resend(packets, again)


def _resend(packets: Packets, again: dict[int, Packet], delay: int = 3) -> Packets:
    """Each packet of `again` inserted `delay` packets after index key, timed like its slot."""
    out: Packets = []
    waiting: dict[int, list[Packet]] = {}
    for i, packet in enumerate(packets):
        out.append(packet)
        if i in again:
            waiting.setdefault(i + delay, []).append(again[i])
        for resent in waiting.pop(i, []):
            resent.time = packet.time
            out.append(resent)
    for key in sorted(waiting):
        for resent in waiting[key]:
            resent.time = packets[-1].time
            out.append(resent)
    return out


VARIANTS: dict[str, Callable[[Packets, Settings], Packets]] = {
    "swap": swap, "window": window, "ack-ahead": ack_ahead, "retransmit": retransmit,
    "overlap": overlap, "drop": drop, "cut": cut, "snaplen": lambda p, _s: p,
}
LOSSLESS = ("swap", "window", "ack-ahead", "retransmit", "overlap")
LOSSY = ("drop", "cut", "snaplen")


def build(source: Path, output: Path, settings: Settings,
          names: tuple[str, ...] = tuple(VARIANTS)) -> dict[str, Path]:
    """Write the variants named into `output`, as `<stem>.<variant>.pcap`; their paths."""
    packets, linktype = read(source)
    output.mkdir(parents=True, exist_ok=True)
    written = {}
    for name in names:
        snaplen = settings.snaplen if name == "snaplen" else 262144
        target = output / f"{source.stem}.{name}.pcap"
        written[name] = write(target, VARIANTS[name](packets, settings), linktype, snaplen)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.pathology", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("capture", type=Path)
    parser.add_argument("output", type=Path, help="directory for the variants")
    parser.add_argument("--only", default=",".join(VARIANTS),
                        help="comma-separated variants (default: all)")
    defaults = Settings()
    for name in ("seed", "swap", "window", "drop", "cut", "snaplen", "retransmit", "overlap"):
        value = getattr(defaults, name)
        parser.add_argument(f"--{name}", type=type(value), default=value)
    arguments = parser.parse_args(argv)
    names = tuple(arguments.only.split(","))
    unknown = [name for name in names if name not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    settings = Settings(**{name: getattr(arguments, name) for name in Settings.__slots__})
    for name, path in build(arguments.capture, arguments.output, settings, names).items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
