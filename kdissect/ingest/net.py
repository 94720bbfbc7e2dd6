"""Stage 2: link layer, IPv4/IPv6 and TCP headers to TCP segments.

Only the fields reassembly needs are read, with `struct` and byte indexing
straight from the captured bytes. Anything that is not TCP over IP (ARP, UDP,
IP fragments, truncated headers) is skipped: it is not Kafka.
"""

from __future__ import annotations

import functools
import os
import socket
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from kdissect.ingest.capture import Packet, Report, read_records
from kdissect.notes import Note, note

Address = tuple[bytes, int]  # (packed IPv4 or IPv6 address, port)
# The fast form of a Segment: src ip, src port, dst ip, dst port, seq, ack, flags, payload, missing
RawSegment = tuple[bytes, int, bytes, int, int, int, int, bytes, int]

LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW_BSD = 12  # DLT_RAW as some systems wrote it into pcap files
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276

ETHERTYPE_IPV4, ETHERTYPE_IPV6 = 0x0800, 0x86DD
VLAN_ETHERTYPES = frozenset({0x8100, 0x88A8, 0x9100})
NULL_FAMILIES = {2: 4, 10: 6, 24: 6, 28: 6, 30: 6}  # AF_INET; AF_INET6 of Linux and the BSDs
IPV6_OPTION_HEADERS = frozenset({0, 43, 60})  # hop-by-hop, routing, destination options
IPV6_FRAGMENT, IPV6_AUTH, PROTO_TCP = 44, 51, 6
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10

_TCP = struct.Struct(">HHIIBB")
_U16 = struct.Struct(">H")
# Untagged Ethernet, a 20-byte IPv4 header and a TCP header, in one read (most captures):
# ethertype, version and header length, total length, flags and fragment offset, protocol,
# source, destination, then the TCP header as _TCP reads it.
_ETHERNET_IPV4_TCP = struct.Struct(">12xHBxH2xHxB2x4s4sHHIIBB")


@dataclass(frozen=True, slots=True)
class Segment:
    packet_number: int
    timestamp: int  # nanoseconds since the epoch
    src: Address
    dst: Address
    seq: int
    ack: int
    flags: int  # TCP flag bits (FIN=0x01, SYN=0x02, RST=0x04, PSH=0x08, ACK=0x10)
    payload: bytes
    missing: int = 0  # payload bytes cut off by the snap length (a gap, not data)


@functools.lru_cache(maxsize=4096)
def format_address(address: Address) -> str:
    """'10.0.0.1:9092' or '[::1]:9092' (cached: every message of a connection asks)."""
    ip, port = address
    if len(ip) == 16:
        return f"[{socket.inet_ntop(socket.AF_INET6, ip)}]:{port}"
    if len(ip) == 4:
        return f"{socket.inet_ntop(socket.AF_INET, ip)}:{port}"
    return f"{ip.hex()}:{port}"


def read_segments(source: str | os.PathLike[str] | BinaryIO,
                  report: Report | None = None) -> Iterator[Segment]:
    """Every TCP segment of a capture, in capture order."""
    for number, timestamp, linktype, data, original_length in read_records(source, report):
        raw = decode_tcp(linktype, data, original_length)
        if raw is not None:
            yield segment_from_raw(number, timestamp, raw)


def decode_segment(packet: Packet) -> Segment | None:
    """The TCP segment a packet carries, or None when it carries none."""
    raw = decode_tcp(packet.linktype, packet.data, packet.original_length)
    return None if raw is None else segment_from_raw(packet.number, packet.timestamp, raw)


def segment_from_raw(number: int, timestamp: int, raw: RawSegment) -> Segment:
    src_ip, src_port, dst_ip, dst_port, seq, ack, flags, payload, missing = raw
    return Segment(number, timestamp, (src_ip, src_port), (dst_ip, dst_port), seq, ack, flags,
                   payload, missing)


def decode_tcp(linktype: int, data: bytes, original_length: int) -> RawSegment | None:
    """Link, IP and TCP headers of one packet; None when it is not a TCP segment."""
    if linktype == LINKTYPE_ETHERNET and len(data) >= _ETHERNET_IPV4_TCP.size:
        (ethertype, version_length, total, fragment, protocol, src, dst, src_port, dst_port, seq,
         ack, data_offset, flags) = _ETHERNET_IPV4_TCP.unpack_from(data)
        start = 34 + (data_offset >> 4) * 4
        end = 14 + total
        if (ethertype == ETHERTYPE_IPV4 and version_length == 0x45 and protocol == PROTO_TCP
                and not fragment & 0x3FFF and data_offset >= 0x50 and start <= end):
            if end <= len(data):  # the whole payload captured: the usual case
                return src, src_port, dst, dst_port, seq, ack, flags, data[start:end], 0
            if start <= len(data):  # cut by the snap length
                return src, src_port, dst, dst_port, seq, ack, flags, data[start:], end - len(data)
        # anything else (a tagged frame, IP options, a fragment, a length of 0) takes the long way
    if linktype == LINKTYPE_ETHERNET and len(data) > 14 and data[12] == 8 and data[13] == 0:
        return _ipv4(data, 14, original_length)  # untagged Ethernet and IPv4
    link = _LINK_LAYERS.get(linktype)
    if link is None:
        return None
    found = link(data)
    if found is None:
        return None
    offset, version = found
    if version == 4:
        return _ipv4(data, offset, original_length)
    if version == 6:
        return _ipv6(data, offset, original_length)
    return None


def unsupported_linktype_note(linktype: int) -> Note:
    return note(f"link type {linktype} is not supported; its packets are skipped", id="pcap.link_unsupported")


def supported_linktype(linktype: int) -> bool:
    return linktype in _LINK_LAYERS


# --- link layers: each returns (offset of the IP header, IP version) or None ---

def _ethernet(data: bytes) -> tuple[int, int] | None:
    if len(data) < 14:
        return None
    ethertype = (data[12] << 8) | data[13]
    offset = 14
    while ethertype in VLAN_ETHERTYPES and len(data) >= offset + 4:
        ethertype = (data[offset + 2] << 8) | data[offset + 3]
        offset += 4
    return _by_ethertype(ethertype, offset)


def _by_ethertype(ethertype: int, offset: int) -> tuple[int, int] | None:
    if ethertype == ETHERTYPE_IPV4:
        return offset, 4
    if ethertype == ETHERTYPE_IPV6:
        return offset, 6
    return None


def _linux_sll(data: bytes) -> tuple[int, int] | None:
    if len(data) < 16:
        return None
    return _after_protocol(data, (data[14] << 8) | data[15], 16)


def _linux_sll2(data: bytes) -> tuple[int, int] | None:
    if len(data) < 20:
        return None
    return _after_protocol(data, (data[0] << 8) | data[1], 20)


def _after_protocol(data: bytes, ethertype: int, offset: int) -> tuple[int, int] | None:
    while ethertype in VLAN_ETHERTYPES and len(data) >= offset + 4:  # tags not stripped
        ethertype = (data[offset + 2] << 8) | data[offset + 3]
        offset += 4
    return _by_ethertype(ethertype, offset)


def _null(data: bytes) -> tuple[int, int] | None:
    """BSD loopback: a 4-byte address family in the byte order of the capturing host."""
    if len(data) < 5:
        return None
    family = int.from_bytes(data[:4], "little")
    if family > 0xFFFF:
        family = int.from_bytes(data[:4], "big")
    version = NULL_FAMILIES.get(family)
    return None if version is None else (4, version)


def _loop(data: bytes) -> tuple[int, int] | None:
    """OpenBSD loopback: the family is always in network byte order."""
    if len(data) < 5:
        return None
    version = NULL_FAMILIES.get(int.from_bytes(data[:4], "big"))
    return None if version is None else (4, version)


def _raw(data: bytes) -> tuple[int, int] | None:
    return (0, data[0] >> 4) if data else None


_LINK_LAYERS: dict[int, Callable[[bytes], tuple[int, int] | None]] = {
    LINKTYPE_ETHERNET: _ethernet,
    LINKTYPE_LINUX_SLL: _linux_sll,
    LINKTYPE_LINUX_SLL2: _linux_sll2,
    LINKTYPE_NULL: _null,
    LINKTYPE_LOOP: _loop,
    LINKTYPE_RAW: _raw,
    LINKTYPE_RAW_BSD: _raw,
    LINKTYPE_IPV4: lambda data: (0, 4),
    LINKTYPE_IPV6: lambda data: (0, 6),
}


# --- IP ---

def _ipv4(data: bytes, offset: int, original_length: int) -> RawSegment | None:
    if len(data) < offset + 20 or data[offset + 9] != PROTO_TCP:
        return None
    header_length = (data[offset] & 0x0F) * 4
    if header_length < 20 or data[offset] >> 4 != 4:
        return None
    if (data[offset + 6] & 0x3F) or data[offset + 7]:  # more fragments, or not the first
        return None
    total = (data[offset + 2] << 8) | data[offset + 3]
    if total == 0:  # segmentation offload: the length was never filled in
        end = offset + max(original_length - offset, 0)
    elif total < header_length:
        return None
    else:
        end = offset + total
    src, dst = data[offset + 12:offset + 16], data[offset + 16:offset + 20]
    return _tcp(data, offset + header_length, end, src, dst)


def _ipv6(data: bytes, offset: int, original_length: int) -> RawSegment | None:
    if len(data) < offset + 40:
        return None
    payload_length = (data[offset + 4] << 8) | data[offset + 5]
    end = offset + 40 + payload_length if payload_length else offset + max(original_length - offset, 40)
    header = _ipv6_upper_layer(data, offset + 40, data[offset + 6])
    if header is None:
        return None
    return _tcp(data, header, end, data[offset + 8:offset + 24], data[offset + 24:offset + 40])


def _ipv6_upper_layer(data: bytes, offset: int, next_header: int) -> int | None:
    """Walk the extension headers; the offset of the TCP header, or None."""
    for _ in range(16):  # a bound against hostile chains
        if next_header == PROTO_TCP:
            return offset
        if len(data) < offset + 8:
            return None
        if next_header in IPV6_OPTION_HEADERS:
            length = (data[offset + 1] + 1) * 8
        elif next_header == IPV6_FRAGMENT:
            if _U16.unpack_from(data, offset + 2)[0] != 0:  # a fragment, offset or more-flag set
                return None
            length = 8
        elif next_header == IPV6_AUTH:
            length = (data[offset + 1] + 2) * 4
        else:
            return None
        next_header = data[offset]
        offset += length
    return None


# --- TCP ---

def _tcp(data: bytes, offset: int, end: int, src: bytes, dst: bytes) -> RawSegment | None:
    """`end` is where the IP packet ends on the wire (it may lie beyond the captured bytes)."""
    if len(data) < offset + 14:
        return None
    src_port, dst_port, seq, ack, data_offset, flags = _TCP.unpack_from(data, offset)
    start = offset + (data_offset >> 4) * 4
    if start > end or (data_offset >> 4) < 5:
        return None
    captured_end = min(end, len(data))
    if start > captured_end:  # options cut by the snap length: the payload is all missing
        return src, src_port, dst, dst_port, seq, ack, flags, b"", end - start
    return src, src_port, dst, dst_port, seq, ack, flags, data[start:captured_end], end - captured_end
