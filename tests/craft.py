"""Crafting helpers for tests: Kafka bytes by hand, TCP conversations with scapy, capture files.

Kafka messages are built with `struct` here, never with kdissect's own code, so
the tests check kdissect against bytes it did not produce. Packets are scapy
layers; capture files are written with `struct` so every header field (byte
order, timestamp resolution, snap length, interface list) is under the test's
control.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1AD, Dot1Q, Ether
from scapy.packet import Packet as ScapyPacket

CLIENT_MAC, SERVER_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"
LINKTYPE_ETHERNET, LINKTYPE_RAW, LINKTYPE_SLL, LINKTYPE_SLL2 = 1, 101, 113, 276
LINKTYPE_NULL, LINKTYPE_IPV4, LINKTYPE_IPV6 = 0, 228, 229


# --- Kafka bytes ---

def framed(payload: bytes) -> bytes:
    """A Kafka frame: the 4-byte size prefix, then `payload`."""
    return struct.pack(">i", len(payload)) + payload


def uvarint(value: int) -> bytes:
    """Kafka's unsigned varint: 7 bits a byte, low bits first."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def compact(text: str | bytes) -> bytes:
    """A compact string: uvarint(length + 1), then the UTF-8 bytes."""
    raw = text.encode() if isinstance(text, str) else text
    return uvarint(len(raw) + 1) + raw


def kafka_request(api_key: int, api_version: int, correlation_id: int,
                  client_id: bytes | None = b"craft", body: bytes = b"") -> bytes:
    """A request with a v1 header (size, key, version, correlation id, int16 client id)."""
    client = struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id)) + client_id
    message = struct.pack(">hhi", api_key, api_version, correlation_id) + client + body
    return struct.pack(">i", len(message)) + message


def kafka_response(correlation_id: int, body: bytes = b"") -> bytes:
    message = struct.pack(">i", correlation_id) + body
    return struct.pack(">i", len(message)) + message


def metadata_request(correlation_id: int, topic: bytes = b"events") -> bytes:
    """Metadata v1: one topic name."""
    return kafka_request(3, 1, correlation_id, body=struct.pack(">ih", 1, len(topic)) + topic)


def metadata_response(correlation_id: int, filler: int = 40) -> bytes:
    """A response with an opaque body of `filler` bytes (framing does not read bodies)."""
    return kafka_response(correlation_id, bytes(range(filler % 256)) * (filler // 256) +
                          bytes(range(filler % 256)))


# --- TCP conversations ---

@dataclass
class Endpoint:
    ip: str
    port: int
    seq: int  # next sequence number this endpoint sends

    @property
    def ipv6(self) -> bool:
        return ":" in self.ip


@dataclass
class Conversation:
    """A TCP connection between a client and a server, packet by packet (scapy layers)."""

    client: Endpoint
    server: Endpoint
    packets: list[ScapyPacket] = field(default_factory=list)

    @classmethod
    def between(cls, client: tuple[str, int], server: tuple[str, int], *,
                client_isn: int = 1000, server_isn: int = 50000) -> Conversation:
        return cls(Endpoint(*client, client_isn), Endpoint(*server, server_isn))

    def _ends(self, from_client: bool) -> tuple[Endpoint, Endpoint]:
        return (self.client, self.server) if from_client else (self.server, self.client)

    def segment(self, from_client: bool, payload: bytes = b"", flags: str = "PA", *,
                seq: int | None = None, advance: bool = True) -> ScapyPacket:
        """One segment; `seq` overrides the sender's next sequence number (retransmissions)."""
        src, dst = self._ends(from_client)
        layer = IPv6(src=src.ip, dst=dst.ip) if src.ipv6 else IP(src=src.ip, dst=dst.ip)
        number = src.seq if seq is None else seq
        packet = layer / TCP(sport=src.port, dport=dst.port, seq=number % 2**32,
                             ack=dst.seq % 2**32, flags=flags, window=65535)
        if payload:
            packet = packet / payload
        if advance and seq is None:
            src.seq += len(payload) + (1 if any(f in flags for f in "SF") else 0)
        self.packets.append(packet)
        return packet

    def handshake(self) -> list[ScapyPacket]:
        return [self.segment(True, flags="S"), self.segment(False, flags="SA"),
                self.segment(True, flags="A")]

    def send(self, from_client: bool, data: bytes, *, chunk: int | None = None) -> list[ScapyPacket]:
        """`data` in segments of at most `chunk` bytes (one segment by default)."""
        size = chunk or len(data) or 1
        return [self.segment(from_client, data[i:i + size]) for i in range(0, len(data), size)]

    def close(self) -> list[ScapyPacket]:
        return [self.segment(True, flags="FA"), self.segment(False, flags="FA"),
                self.segment(True, flags="A")]


def ethernet(packet: ScapyPacket, *, tags: Sequence[tuple[str, int]] = ()) -> ScapyPacket:
    """Wrap an IP packet in Ethernet, with VLAN tags outermost first ('ad' 0x88a8 or 'q' 0x8100)."""
    frame: ScapyPacket = Ether(src=CLIENT_MAC, dst=SERVER_MAC)
    for kind, vlan in tags:
        frame = frame / (Dot1AD(vlan=vlan) if kind == "ad" else Dot1Q(vlan=vlan))
    return frame / packet


# --- capture files ---

@dataclass
class Record:
    data: bytes
    timestamp: float = 0.0
    original_length: int | None = None  # more than len(data) for a snaplen-cut packet
    interface: int = 0  # pcapng only
    ns: int | None = None  # the exact time in nanoseconds since the epoch, instead of `timestamp`

    def ticks(self, units_per_second: int) -> int:
        if self.ns is not None:
            return self.ns * units_per_second // 10**9
        # the float's shortest decimal form, scaled exactly: 1700000000.000003 s is
        # 1700000000000003000 ns, not the float's nearest binary value times 1e9
        return round(Decimal(repr(self.timestamp)) * units_per_second)


def records(packets: Iterable[ScapyPacket | bytes], *, start: float = 1_700_000_000.0,
            step: float = 0.001, wrap: Callable[[ScapyPacket], ScapyPacket | bytes] | None = None
            ) -> list[Record]:
    """Capture records for packets (wrapped by `wrap`, e.g. `ethernet`), 1 ms apart."""
    out = []
    for index, packet in enumerate(packets):
        item = wrap(packet) if wrap is not None and not isinstance(packet, bytes) else packet
        out.append(Record(bytes(item), start + index * step))
    return out


def pcap_bytes(items: Iterable[Record], linktype: int = LINKTYPE_ETHERNET, *,
               big_endian: bool = False, nanoseconds: bool = False, snaplen: int = 262144) -> bytes:
    endian = ">" if big_endian else "<"
    magic = 0xA1B23C4D if nanoseconds else 0xA1B2C3D4
    scale = 10**9 if nanoseconds else 10**6
    parts = [struct.pack(endian + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    for item in items:
        seconds, fraction = divmod(item.ticks(scale), scale)
        original = item.original_length if item.original_length is not None else len(item.data)
        parts.append(struct.pack(endian + "IIII", seconds, fraction, len(item.data), original))
        parts.append(item.data)
    return b"".join(parts)


def write_pcap(path: Path, items: Iterable[Record], linktype: int = LINKTYPE_ETHERNET,
               **options: bool | int) -> Path:
    path.write_bytes(pcap_bytes(items, linktype, **options))  # type: ignore[arg-type]
    return path


def _block(endian: str, block_type: int, body: bytes) -> bytes:
    body += b"\x00" * (-len(body) % 4)
    length = len(body) + 12
    return struct.pack(endian + "II", block_type, length) + body + struct.pack(endian + "I", length)


def pcapng_section(endian: str = "<") -> bytes:
    body = struct.pack(endian + "IHHq", 0x1A2B3C4D, 1, 0, -1)
    return _block(endian, 0x0A0D0D0A, body)


def pcapng_interface(linktype: int, *, tsresol: int | None = None, endian: str = "<",
                     snaplen: int = 262144) -> bytes:
    options = b""
    if tsresol is not None:
        options += struct.pack(endian + "HH", 9, 1) + bytes([tsresol]) + b"\x00" * 3
    if options:
        options += struct.pack(endian + "HH", 0, 0)
    return _block(endian, 1, struct.pack(endian + "HHI", linktype, 0, snaplen) + options)


def pcapng_packet(item: Record, *, units_per_second: int = 10**6, endian: str = "<") -> bytes:
    ticks = item.ticks(units_per_second)
    original = item.original_length if item.original_length is not None else len(item.data)
    body = struct.pack(endian + "IIIII", item.interface, ticks >> 32, ticks & 0xFFFFFFFF,
                       len(item.data), original) + item.data
    return _block(endian, 6, body)


def pcapng_block(block_type: int, body: bytes, endian: str = "<") -> bytes:
    return _block(endian, block_type, body)
