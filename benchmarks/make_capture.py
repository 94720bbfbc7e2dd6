"""Build a large capture of Kafka traffic for benchmarks, from real exchanges.

Real exchanges (request and response bytes) are taken from the captures in
`captures/` and the third-party corpus when present, then replayed over 64
concurrent TCP connections: handshake, requests and responses cut into
MSS-sized segments, ACKs, FIN. Correlation ids are renumbered per connection so
every response pairs with its request. The result is a classic pcap, Ethernet,
IPv4, port 9092.

Two mixes, picked by API family with these weights:
  mixed     data plane (Produce, Fetch) 60%, other APIs 30%, DescribeTopicPartitions,
            DescribeProducers and DescribeQuorum 10%: a broker's usual traffic
  describe  only DescribeTopicPartitions, DescribeProducers and DescribeQuorum:
            the worst case for full dissection, every body decoded field by field

    python benchmarks/make_capture.py out.pcap --size-mb 100 --mix mixed
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kdissect.pipeline import read_messages  # noqa: E402

MSS = 1448
SERVER_IP = bytes([10, 0, 0, 1])
PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
ETHERNET = bytes.fromhex("020000000001020000000002") + b"\x08\x00"
SYN, ACK, PSH, FIN = 0x02, 0x10, 0x08, 0x01

Exchange = tuple[bytes, bytes]
DESCRIBE_APIS = {55, 61, 75}
DATA_APIS = {0, 1}
MIXES = {
    "mixed": {"data": 0.6, "other": 0.3, "describe": 0.1},
    "describe": {"data": 0.0, "other": 0.0, "describe": 1.0},
}


def harvest(paths: list[Path]) -> dict[str, list[Exchange]]:
    """Paired (request frame, response frame) byte strings from real captures, by API family."""
    families: dict[str, list[Exchange]] = {"data": [], "other": [], "describe": []}
    for path in paths:
        for message in read_messages(path, ports=(9092, 36333, 19092)):
            pair = message.pair
            if message.is_request and pair is not None and message.frame.complete and pair.frame.complete:
                families[_family(message.api_key)].append((message.frame.data, pair.frame.data))
    return families


def _family(api_key: int | None) -> str:
    if api_key in DESCRIBE_APIS:
        return "describe"
    return "data" if api_key in DATA_APIS else "other"


def pick(rng: random.Random, families: dict[str, list[Exchange]], weights: dict[str, float]) -> Exchange:
    names = [name for name, weight in weights.items() if weight > 0 and families[name]]
    family = rng.choices(names, [weights[name] for name in names])[0]
    return rng.choice(families[family])


class Connection:
    def __init__(self, index: int, rng: random.Random) -> None:
        self.client_ip = bytes([10, 1, (index >> 8) & 0xFF, index & 0xFF])
        self.client_port = 20000 + index % 40000
        self.client_seq = rng.getrandbits(32)
        self.server_seq = rng.getrandbits(32)
        self.correlation_id = 0

    def packet(self, to_server: bool, flags: int, payload: bytes = b"") -> bytes:
        if to_server:
            src, dst, sport, dport = self.client_ip, SERVER_IP, self.client_port, 9092
            seq, ack = self.client_seq, self.server_seq
        else:
            src, dst, sport, dport = SERVER_IP, self.client_ip, 9092, self.client_port
            seq, ack = self.server_seq, self.client_seq
        tcp = struct.pack(">HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 65535, 0, 0)
        total = 20 + len(tcp) + len(payload)
        ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, 6, 0, src, dst)
        advance = len(payload) + (1 if flags & (SYN | FIN) else 0)
        if to_server:
            self.client_seq = (self.client_seq + advance) & 0xFFFFFFFF
        else:
            self.server_seq = (self.server_seq + advance) & 0xFFFFFFFF
        return ETHERNET + ip + tcp + payload

    def handshake(self) -> Iterator[bytes]:
        yield self.packet(True, SYN)
        yield self.packet(False, SYN | ACK)
        yield self.packet(True, ACK)

    def exchange(self, request: bytes, response: bytes) -> Iterator[bytes]:
        self.correlation_id += 1
        request = request[:8] + struct.pack(">i", self.correlation_id) + request[12:]
        response = response[:4] + struct.pack(">i", self.correlation_id) + response[8:]
        yield from self._send(True, request)
        yield from self._send(False, response)
        yield self.packet(True, ACK)

    def _send(self, to_server: bool, data: bytes) -> Iterator[bytes]:
        for start in range(0, len(data), MSS):
            yield self.packet(to_server, ACK | PSH, data[start : start + MSS])

    def close(self) -> Iterator[bytes]:
        yield self.packet(True, FIN | ACK)
        yield self.packet(False, FIN | ACK)
        yield self.packet(True, ACK)


def write_capture(out: Path, families: dict[str, list[Exchange]], size: int, mix: str = "mixed",
                  seed: int = 7) -> int:
    """Write about `size` bytes of capture to `out`; returns the number of packets."""
    weights = MIXES[mix]
    rng = random.Random(seed)
    timestamp = 1_764_000_000.0
    written = packets = 0
    active: list[Connection] = []
    next_index = 0
    with out.open("wb") as sink:
        sink.write(PCAP_HEADER)
        while written < size:
            if len(active) < 64:
                connection = Connection(next_index, rng)
                next_index += 1
                active.append(connection)
                batch = list(connection.handshake())
            else:
                connection = rng.choice(active)
                if rng.random() < 0.01:
                    active.remove(connection)
                    batch = list(connection.close())
                else:
                    batch = list(connection.exchange(*pick(rng, families, weights)))
            for data in batch:
                timestamp += rng.uniform(0.00001, 0.0002)
                seconds = int(timestamp)
                micros = int((timestamp - seconds) * 1e6)
                record = struct.pack("<IIII", seconds, micros, len(data), len(data)) + data
                sink.write(record)
                written += len(record)
                packets += 1
    return packets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--size-mb", type=float, default=100.0)
    parser.add_argument("--mix", choices=sorted(MIXES), default="mixed")
    parser.add_argument("--public", type=Path, default=ROOT.parent / "shared" / "captures" / "public")
    args = parser.parse_args()
    sources = sorted((ROOT / "captures").glob("*.pcap*"))
    if args.public.is_dir():
        sources += sorted(args.public.glob("*.pcap*"))
    packets = build(args.out, args.size_mb, args.mix, sources)
    print(f"{args.out}: {packets} packets, mix {args.mix}")


def build(out: Path, size_mb: float, mix: str, sources: list[Path] | None = None) -> int:
    """Harvest exchanges (from captures/ by default) and write a capture of `size_mb`."""
    if sources is None:
        sources = sorted((ROOT / "captures").glob("*.pcap*"))
        public = ROOT.parent / "shared" / "captures" / "public"
        if public.is_dir():
            sources += sorted(public.glob("*.pcap*"))
    families = harvest(sources)
    missing = [name for name, weight in MIXES[mix].items() if weight > 0 and not families[name]]
    if missing:
        sys.exit(f"no exchanges of {', '.join(missing)} in the captures to replay")
    return write_capture(out, families, int(size_mb * 1e6), mix)


if __name__ == "__main__":
    main()
