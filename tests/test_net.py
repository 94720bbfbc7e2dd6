"""Link layers, IPv4/IPv6 and TCP headers: packets built by scapy, decoded by kdissect.ingest.net."""

from __future__ import annotations

import ipaddress
import struct
from pathlib import Path
from typing import Any

import pytest
from craft import CLIENT_MAC, SERVER_MAC, ethernet, records, write_pcap
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, TCP, UDP, IPOption_NOP
from scapy.layers.inet6 import (
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting,
)
from scapy.layers.l2 import CookedLinux, CookedLinuxV2, Ether
from scapy.packet import Packet as ScapyPacket

from kdissect.ingest import net
from kdissect.ingest.capture import Packet
from kdissect.ingest.net import (
    LINKTYPE_ETHERNET,
    LINKTYPE_IPV4,
    LINKTYPE_IPV6,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
    LINKTYPE_LOOP,
    LINKTYPE_NULL,
    LINKTYPE_RAW,
    Segment,
    decode_segment,
    decode_tcp,
    format_address,
    read_segments,
)

PAYLOAD = b"\x00\x00\x00\x0c\x00\x03\x00\x01\x00\x00\x00\x07\xff\xff"


def _tcp4(payload: bytes = PAYLOAD, **ip: Any) -> ScapyPacket:
    return IP(src="10.0.0.1", dst="10.0.0.2", **ip) / TCP(
        sport=40000, dport=9092, seq=123456, ack=654321, flags="PA") / payload


def _tcp6(*extensions: ScapyPacket) -> ScapyPacket:
    packet = IPv6(src="fd00::1", dst="fd00::2")
    for extension in extensions:
        packet = packet / extension
    return packet / TCP(sport=40000, dport=9092, seq=123456, ack=654321, flags="PA") / PAYLOAD


def _decode(linktype: int, data: bytes, original_length: int | None = None) -> Segment | None:
    return decode_segment(Packet(7, 1_500_000_000, linktype, data,
                                 len(data) if original_length is None else original_length))


def _expect(segment: Segment | None, src: str = "10.0.0.1", dst: str = "10.0.0.2",
            payload: bytes = PAYLOAD, missing: int = 0) -> None:
    assert segment is not None
    assert segment.src == (ipaddress.ip_address(src).packed, 40000)
    assert segment.dst == (ipaddress.ip_address(dst).packed, 9092)
    assert (segment.seq, segment.ack, segment.flags) == (123456, 654321, 0x18)
    assert (segment.payload, segment.missing) == (payload, missing)
    assert (segment.packet_number, segment.timestamp) == (7, 1_500_000_000)


@pytest.mark.parametrize("tags", [(), (("q", 10),), (("ad", 100), ("q", 10)), (("q", 1), ("q", 2))],
                         ids=["plain", "802.1Q", "QinQ 88a8", "stacked 8100"])
def test_ethernet_with_vlan_tags(tags: tuple[tuple[str, int], ...]) -> None:
    _expect(_decode(LINKTYPE_ETHERNET, bytes(ethernet(_tcp4(), tags=tags))))


def test_ethernet_padding_is_ignored() -> None:
    frame = bytes(ethernet(_tcp4(b"ab")))
    assert len(frame) < 60
    padded = frame + b"\xee" * (60 - len(frame))  # what the NIC adds to a short frame
    _expect(_decode(LINKTYPE_ETHERNET, padded), payload=b"ab")


def test_ipv4_options_respected() -> None:
    packet = _tcp4(options=[IPOption_NOP()] * 4)
    assert bytes(packet)[0] == 0x46  # IHL 6
    _expect(_decode(LINKTYPE_IPV4, bytes(packet)))


def test_linux_cooked_v1_and_v2() -> None:
    _expect(_decode(LINKTYPE_LINUX_SLL, bytes(CookedLinux(pkttype=0, proto=0x0800) / _tcp4())))
    _expect(_decode(LINKTYPE_LINUX_SLL2, bytes(CookedLinuxV2(proto=0x0800) / _tcp4())))
    _expect(_decode(LINKTYPE_LINUX_SLL2, bytes(CookedLinuxV2(proto=0x86DD) / _tcp6())),
            "fd00::1", "fd00::2")


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("family", [2, 24, 28, 30])
def test_bsd_null_loopback_in_both_byte_orders(order: str, family: int) -> None:
    inner = _tcp4() if family == 2 else _tcp6()
    data = struct.pack(order + "I", family) + bytes(inner)
    src, dst = ("10.0.0.1", "10.0.0.2") if family == 2 else ("fd00::1", "fd00::2")
    _expect(_decode(LINKTYPE_NULL, data), src, dst)


def test_openbsd_loop_family_in_network_order() -> None:
    _expect(_decode(LINKTYPE_LOOP, struct.pack(">I", 2) + bytes(_tcp4())))


@pytest.mark.parametrize("linktype", [LINKTYPE_RAW, LINKTYPE_IPV4])
def test_raw_ipv4(linktype: int) -> None:
    _expect(_decode(linktype, bytes(_tcp4())))


@pytest.mark.parametrize("linktype", [LINKTYPE_RAW, LINKTYPE_IPV6])
def test_raw_ipv6(linktype: int) -> None:
    _expect(_decode(linktype, bytes(_tcp6())), "fd00::1", "fd00::2")


def test_ipv6_extension_headers() -> None:
    packet = _tcp6(IPv6ExtHdrHopByHop(), IPv6ExtHdrRouting(addresses=["fd00::9"]),
                   IPv6ExtHdrDestOpt(), IPv6ExtHdrFragment(offset=0, m=0))
    _expect(_decode(LINKTYPE_RAW, bytes(packet)), "fd00::1", "fd00::2")


def test_ipv6_fragments_are_skipped() -> None:
    first = _tcp6(IPv6ExtHdrFragment(offset=0, m=1))
    later = _tcp6(IPv6ExtHdrFragment(offset=100, m=0))
    assert _decode(LINKTYPE_RAW, bytes(first)) is None
    assert _decode(LINKTYPE_RAW, bytes(later)) is None


def test_ipv4_fragments_are_skipped() -> None:
    assert _decode(LINKTYPE_IPV4, bytes(_tcp4(flags="MF"))) is None
    assert _decode(LINKTYPE_IPV4, bytes(_tcp4(frag=10))) is None
    _expect(_decode(LINKTYPE_IPV4, bytes(_tcp4(flags="DF"))))


def test_snaplen_cut_payload_is_missing_not_zero() -> None:
    whole = bytes(ethernet(_tcp4(b"0123456789" * 10)))
    cut = whole[:len(whole) - 60]
    segment = _decode(LINKTYPE_ETHERNET, cut, original_length=len(whole))
    _expect(segment, payload=(b"0123456789" * 10)[:40], missing=60)


def test_snaplen_cut_inside_tcp_options() -> None:
    packet = IP(src="10.0.0.1", dst="10.0.0.2") / TCP(
        sport=40000, dport=9092, seq=123456, ack=654321, flags="PA",
        options=[("NOP", None)] * 8) / PAYLOAD
    data = bytes(packet)
    segment = _decode(LINKTYPE_IPV4, data[:20 + 24], original_length=len(data))
    _expect(segment, payload=b"", missing=len(PAYLOAD))


def test_segmentation_offload_zero_total_length() -> None:
    data = bytearray(bytes(_tcp4()))
    data[2:4] = b"\x00\x00"  # what a capture on the sending host shows with TSO
    _expect(_decode(LINKTYPE_IPV4, bytes(data)))


@pytest.mark.parametrize("data", [
    bytes(Ether(src=CLIENT_MAC, dst=SERVER_MAC, type=0x0806) / (b"\x00" * 28)),  # ARP
    bytes(ethernet(IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1, dport=9092) / b"x")),
    bytes(ethernet(_tcp4()))[:14 + 20 + 10],  # TCP header cut before the flags
    bytes(ethernet(_tcp4()))[:20],  # IP header cut
    b"",
], ids=["arp", "udp", "tcp-header-cut", "ip-header-cut", "empty"])
def test_not_a_tcp_segment(data: bytes) -> None:
    assert _decode(LINKTYPE_ETHERNET, data) is None


def test_unknown_linktype() -> None:
    assert _decode(147, bytes(_tcp4())) is None


def test_format_address() -> None:
    assert format_address((bytes([10, 0, 0, 1]), 9092)) == "10.0.0.1:9092"
    assert format_address((ipaddress.ip_address("::1").packed, 9092)) == "[::1]:9092"
    assert format_address((ipaddress.ip_address("fd00::2").packed, 1)) == "[fd00::2]:1"


def test_read_segments_numbers_packets_in_capture_order(tmp_path: Path) -> None:
    packets = [bytes(ethernet(_tcp4())), bytes(Ether(src=CLIENT_MAC, dst=SERVER_MAC, type=0x0806)
                                               / (b"\x00" * 28)), bytes(ethernet(_tcp4(b"xy")))]
    path = write_pcap(tmp_path / "s.pcap", records(packets))
    segments = list(read_segments(path))
    assert [(s.packet_number, s.payload) for s in segments] == [(1, PAYLOAD), (3, b"xy")]


@settings(derandomize=True, max_examples=300, deadline=None, database=None)
@given(version_length=st.sampled_from([0x45, 0x46, 0x44, 0x65, 0x4F]), total=st.integers(0, 120),
       fragment=st.sampled_from([0, 0x4000, 0x2000, 0x0001, 0x1FFF, 0x8000]),
       protocol=st.sampled_from([6, 17]), data_offset=st.sampled_from([0x40, 0x50, 0x60, 0x80, 0xF0]),
       ethertype=st.sampled_from([0x0800, 0x86DD, 0x8100]), captured=st.integers(40, 130),
       body=st.binary(min_size=130, max_size=130))
def test_the_ethernet_ipv4_shortcut_reads_what_the_general_path_reads(
        version_length: int, total: int, fragment: int, protocol: int, data_offset: int,
        ethertype: int, captured: int, body: bytes) -> None:
    """Untagged Ethernet, IPv4 and TCP are read in one step; every header value (lengths that
    lie, fragments, options, snap length cuts) gives what the layer-by-layer path gives."""
    header = struct.pack(">12sHBBHHHBBH4s4s", bytes(12), ethertype, version_length, 0, total, 7, fragment,
                         64, protocol, 0, bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
    tcp = struct.pack(">HHIIBBHHH", 40000, 9092, 1000, 2000, data_offset, 0x18, 512, 0, 0)
    data = (header + tcp + body)[:captured]
    original = len(header + tcp + body)
    found = net._ethernet(data)  # the general path, layer by layer
    expected = None if found is None or found[1] != 4 else net._ipv4(data, found[0], original)
    assert decode_tcp(LINKTYPE_ETHERNET, data, original) == expected
