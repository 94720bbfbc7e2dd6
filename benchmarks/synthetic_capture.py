"""Write a large synthetic Kafka capture quickly (struct only, no scapy).

Each connection opens with a three-way handshake, then carries request/response
pairs (Metadata v1 requests, small responses) in one packet each, and closes with
FIN/ACK. Checksums are left at zero: neither kdissect nor tshark checks them.

    python benchmarks/synthetic_capture.py OUT.pcap --packets 1000000
"""

from __future__ import annotations

import argparse
import struct
from collections.abc import Iterator
from pathlib import Path

PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
CLIENT_MAC = b"\x02\x00\x00\x00\x00\x01"
SERVER_MAC = b"\x02\x00\x00\x00\x00\x02"
SYN, ACK, PSH, FIN = 0x02, 0x10, 0x08, 0x01


def metadata_request(correlation_id: int, topic: bytes) -> bytes:
    body = struct.pack(">i", 1) + struct.pack(">h", len(topic)) + topic
    header = struct.pack(">hhih", 3, 1, correlation_id, 9) + b"synthetic"
    message = header + body
    return struct.pack(">i", len(message)) + message


def metadata_response(correlation_id: int, topic: bytes) -> bytes:
    brokers = struct.pack(">ii", 1, 1) + struct.pack(">h", 9) + b"127.0.0.1" + struct.pack(">ih", 9092, -1)
    topics = struct.pack(">ihh", 1, 0, len(topic)) + topic + b"\x00" + struct.pack(">i", 0)
    message = struct.pack(">i", correlation_id) + brokers + struct.pack(">i", 1) + topics
    return struct.pack(">i", len(message)) + message


def ethernet_ipv4_tcp(src: tuple[bytes, int], dst: tuple[bytes, int], seq: int, ack: int,
                      flags: int, payload: bytes) -> bytes:
    tcp = struct.pack(">HHIIBBHHH", src[1], dst[1], seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                      5 << 4, flags, 65535, 0, 0)
    total = 20 + len(tcp) + len(payload)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, 6, 0, src[0], dst[0])
    macs = SERVER_MAC + CLIENT_MAC if src[1] != 9092 else CLIENT_MAC + SERVER_MAC
    return macs + b"\x08\x00" + ip + tcp + payload


def connection_packets(index: int, exchanges: int) -> Iterator[bytes]:
    client = (bytes([10, 0, (index >> 8) & 0xFF, index & 0xFF]), 10000 + index % 50000)
    server = (bytes([10, 1, 0, 1]), 9092)
    c_seq, s_seq = 1000 + index * 7919, 5000 + index * 104729
    yield ethernet_ipv4_tcp(client, server, c_seq, 0, SYN, b"")
    yield ethernet_ipv4_tcp(server, client, s_seq, c_seq + 1, SYN | ACK, b"")
    c_seq, s_seq = c_seq + 1, s_seq + 1
    yield ethernet_ipv4_tcp(client, server, c_seq, s_seq, ACK, b"")
    topic = b"topic-%d" % index
    for correlation_id in range(exchanges):
        request = metadata_request(correlation_id, topic)
        yield ethernet_ipv4_tcp(client, server, c_seq, s_seq, PSH | ACK, request)
        c_seq += len(request)
        response = metadata_response(correlation_id, topic)
        yield ethernet_ipv4_tcp(server, client, s_seq, c_seq, PSH | ACK, response)
        s_seq += len(response)
    yield ethernet_ipv4_tcp(client, server, c_seq, s_seq, FIN | ACK, b"")
    yield ethernet_ipv4_tcp(server, client, s_seq, c_seq + 1, FIN | ACK, b"")
    yield ethernet_ipv4_tcp(client, server, c_seq + 1, s_seq + 1, ACK, b"")


def write_capture(path: Path, packets: int, exchanges_per_connection: int = 500) -> int:
    """Write about `packets` packets; return how many were written."""
    written, index = 0, 0
    with path.open("wb") as out:
        out.write(PCAP_HEADER)
        while written < packets:
            for data in connection_packets(index, exchanges_per_connection):
                micros = written * 10
                out.write(struct.pack("<IIII", 1_700_000_000 + micros // 1_000_000,
                                      micros % 1_000_000, len(data), len(data)))
                out.write(data)
                written += 1
            index += 1
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--packets", type=int, default=1_000_000)
    parser.add_argument("--exchanges", type=int, default=500, help="request/response pairs per connection")
    args = parser.parse_args()
    count = write_capture(args.out, args.packets, args.exchanges)
    print(f"{args.out}: {count} packets, {args.out.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
