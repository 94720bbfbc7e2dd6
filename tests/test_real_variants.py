"""Real traffic: third-party captures, and variants of real Tansu broker captures.

The broker captures in captures/ were recorded with tcpdump while kafka-python
talked to a real Tansu broker. From each, scapy derives damaged copies
(reordered, retransmitted, tiny segments, wrapped sequence numbers, VLAN tags,
pcapng); every lossless copy must yield exactly the frames of the original, a
copy with a lost segment every frame that does not touch a lost byte, and a copy
cut in the middle every frame after the first resynchronisation.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import missing
from craft import Record, pcapng_interface, pcapng_packet, pcapng_section
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Packet as ScapyPacket
from scapy.packet import Raw
from scapy.utils import rdpcap, wrpcap

from kdissect.ingest.framing import DEFAULT_PORTS, Frame
from kdissect.ingest.net import Address
from kdissect.pipeline import read_frames, read_messages
from tools import pathology
from tools import recoverable as bound
from tools.recording import RecordingError, tansu_binary, tcpdump_binary

CAPTURES = sorted((Path(__file__).resolve().parents[1] / "captures").glob("*.pcap"))
Flow = tuple[Address, Address, str]  # client, server, direction
Shape = tuple[int, bytes, bool]  # stream offset, data, complete

# --- third-party captures: (connection, direction, frame size) in order, as tshark 4.0.17
# reads them when told the Kafka port (kafka.len + 4), with retransmissions counted once ---
THIRD_PARTY: dict[str, list[tuple[int, str, int]]] = {
    "arkime_kafka.pcap": [(0, "request", 79)],
    "deepflow_00-produce-v2.pcap": [(0, "request", 121), (0, "response", 50)],
    "deepflow_00-produce-v7-sw8.pcap": [(0, "request", 312), (0, "response", 69)],
    "deepflow_00-produce-v9.pcap": [(0, "request", 156), (0, "response", 59)],
    "deepflow_01-fetch-v12-ok.pcap": [(0, "request", 120), (0, "response", 21)],
    "deepflow_01-fetch-v12-perf.pcap": [(0, "request", 77), (0, "response", 21)],
    "deepflow_01-fetch-v12-unknown.pcap": [(0, "request", 77), (0, "response", 21)],
    "deepflow_11-join-group-v7.pcap": [(0, "request", 145), (0, "response", 79)],
    "deepflow_13-leave-group-v4.pcap": [(0, "request", 98), (0, "response", 76)],
    "deepflow_14-sync-group-v5.pcap": [(0, "request", 211), (0, "response", 70)],
    "deepflow_18-api-versions-v3.pcap": [(0, "request", 53), (0, "response", 439)],
    "deepflow_mixed-with-unsupported.pcap": [
        (0, "request", 76), (1, "request", 173), (1, "response", 31), (1, "request", 145),
        (1, "response", 16), (0, "response", 21)],
    "gosniffer_kafka.pcap": [
        (0, "request", 47), (0, "response", 79), (1, "request", 1124), (1, "response", 40)],
    "ndpi_kafka.pcapng": [
        (0, "request", 25), (0, "response", 350), (0, "request", 44), (0, "response", 120),
        (0, "response", 120), (1, "response", 350), (1, "response", 120), (1, "request", 44),
        (1, "response", 120), (2, "request", 44), (2, "response", 120), (3, "request", 25),
        (3, "response", 350), (4, "request", 448), (4, "response", 61), (4, "request", 381),
        (5, "request", 44), (4, "response", 61), (6, "request", 25), (7, "request", 25),
        (8, "request", 56), (8, "response", 446), (8, "request", 47), (8, "response", 26),
        (8, "request", 64), (8, "response", 126), (8, "request", 140), (8, "response", 62)],
}


@pytest.mark.parametrize("name", sorted(THIRD_PARTY))
def test_third_party_capture(public_captures: Path, name: str) -> None:
    notes: list[object] = []
    frames = list(read_frames(public_captures / name, report=notes.append))  # port 36333 detected
    # In each connection's order; across connections a response may come out later than
    # tshark shows it: one whose request the broker acknowledged but the capture lacks
    # waits for that request until the connection ends (ndpi_kafka's 5th packet).
    assert _per_connection([(f.connection.index, str(f.direction), len(f.data)) for f in frames]) \
        == _per_connection(THIRD_PARTY[name])
    assert all(f.complete for f in frames)
    assert notes == []


def _per_connection(frames: list[tuple[int, str, int]]) -> list[tuple[int, str, int]]:
    return sorted(frames, key=lambda frame: frame[0])  # stable: each connection keeps its order


def test_third_party_corpus_is_covered(public_captures: Path) -> None:
    on_disk = {p.name for p in public_captures.iterdir() if p.suffix in (".pcap", ".pcapng")}
    assert on_disk == set(THIRD_PARTY)


def test_port_36333_needs_detection_or_the_port(public_captures: Path) -> None:
    path = public_captures / "deepflow_11-join-group-v7.pcap"
    assert list(read_frames(path, detect=False)) == []
    assert len(list(read_frames(path, detect=False, ports=[36333]))) == 2


# --- variants of the real broker captures ---

def test_broker_captures_are_there() -> None:
    assert CAPTURES, "captures/*.pcap (real broker sessions) are missing"


def _flows(frames: list[Frame]) -> dict[Flow, list[Shape]]:
    out: dict[Flow, list[Shape]] = defaultdict(list)
    for frame in frames:
        key = (frame.connection.client, frame.connection.server, str(frame.direction))
        out[key].append((frame.stream_offset, frame.data, frame.complete))
    return dict(out)


def _frames(path: Path) -> list[Frame]:
    return list(read_frames(path, ports=[9092, *_server_ports()]))


def _server_ports() -> set[int]:
    return set()  # the broker captures use Kafka's default port; detection covers others


def _payload(packet: ScapyPacket) -> bytes:
    return bytes(packet[TCP].payload) if TCP in packet else b""


def _piece(packet: ScapyPacket, start: int, end: int) -> ScapyPacket:
    """A copy of a data packet carrying payload[start:end], its sequence number moved to match."""
    copy = packet.copy()
    payload = _payload(packet)
    copy[TCP].seq = (packet[TCP].seq + start) % 2**32
    copy[TCP].remove_payload()
    copy[TCP].add_payload(Raw(payload[start:end]))
    copy[IP].len = copy[IP].chksum = copy[TCP].chksum = None
    return copy


def _each_data_packet(packets: list[ScapyPacket],
                      change: Callable[[ScapyPacket, int], list[ScapyPacket]]) -> list[ScapyPacket]:
    out = []
    for packet in packets:
        size = len(_payload(packet))
        out.extend(change(packet, size) if size else [packet])
    return out


def reordered(packets: list[ScapyPacket]) -> list[ScapyPacket]:
    """Every data packet's second half arrives before its first half."""
    return _each_data_packet(packets, lambda p, n: [_piece(p, n // 2, n), _piece(p, 0, n // 2)]
                             if n >= 2 else [p])


def retransmitted(packets: list[ScapyPacket]) -> list[ScapyPacket]:
    return _each_data_packet(packets, lambda p, n: [p, p.copy()])


def overlapping(packets: list[ScapyPacket]) -> list[ScapyPacket]:
    """Three quarters of each payload, then all of it again (overlapping what came first)."""
    return _each_data_packet(packets, lambda p, n: [_piece(p, 0, 3 * n // 4), p] if n >= 4 else [p])


def tiny_segments(packets: list[ScapyPacket]) -> list[ScapyPacket]:
    """The first 40 bytes of every payload one byte per segment, then the rest in one."""
    def split(packet: ScapyPacket, size: int) -> list[ScapyPacket]:
        head = min(size, 40)
        pieces = [_piece(packet, i, i + 1) for i in range(head)]
        return pieces + ([_piece(packet, head, size)] if size > head else [])
    return _each_data_packet(packets, split)


def wrapped(packets: list[ScapyPacket]) -> list[ScapyPacket]:
    """Sequence numbers shifted so that every direction wraps past 2^32 halfway through."""
    first: dict[tuple[str, int], int] = {}
    total: dict[tuple[str, int], int] = defaultdict(int)
    for packet in packets:
        if TCP in packet:
            sender = (packet[IP].src, packet[TCP].sport)
            first.setdefault(sender, packet[TCP].seq)
            total[sender] += len(_payload(packet))
    shift = {s: (2**32 - first[s] - max(total[s] // 2, 1)) % 2**32 for s in first}
    out = []
    for packet in packets:
        copy = packet.copy()
        if TCP in copy:
            sender, receiver = (copy[IP].src, copy[TCP].sport), (copy[IP].dst, copy[TCP].dport)
            copy[TCP].seq = (copy[TCP].seq + shift[sender]) % 2**32
            if copy[TCP].flags.A and receiver in shift:
                copy[TCP].ack = (copy[TCP].ack + shift[receiver]) % 2**32
            copy[TCP].chksum = None
        out.append(copy)
    return out


def vlan_tagged(packets: list[ScapyPacket]) -> list[ScapyPacket]:
    return [Ether(src=p[Ether].src, dst=p[Ether].dst) / Dot1Q(vlan=99) / p[IP] for p in packets]


LOSSLESS = {
    "reordered": reordered,
    "retransmitted": retransmitted,
    "overlapping": overlapping,
    "tiny segments": tiny_segments,
    "wrapped": wrapped,
    "vlan": vlan_tagged,
}


def _write(path: Path, packets: list[ScapyPacket]) -> Path:
    wrpcap(str(path), packets, linktype=1)
    return path


@pytest.fixture(scope="module", params=CAPTURES, ids=[p.stem for p in CAPTURES])
def broker_capture(request: pytest.FixtureRequest) -> tuple[Path, list[ScapyPacket], list[Frame]]:
    path = request.param
    return path, list(rdpcap(str(path))), _frames(path)


@pytest.mark.parametrize("variant", list(LOSSLESS))
def test_lossless_variant_yields_the_original_frames(
        tmp_path: Path, broker_capture: tuple[Path, list[ScapyPacket], list[Frame]], variant: str) -> None:
    _path, packets, original = broker_capture
    assert original and all(f.complete for f in original)
    copy = _write(tmp_path / "variant.pcap", LOSSLESS[variant](packets))
    assert _flows(_frames(copy)) == _flows(original)


def test_pcapng_variant_yields_the_original_frames(
        tmp_path: Path, broker_capture: tuple[Path, list[ScapyPacket], list[Frame]]) -> None:
    _path, packets, original = broker_capture
    blocks = [pcapng_section(), pcapng_interface(1)]
    blocks += [pcapng_packet(Record(bytes(p), float(p.time))) for p in packets]
    copy = tmp_path / "variant.pcapng"
    copy.write_bytes(b"".join(blocks))
    frames = _frames(copy)
    assert _flows(frames) == _flows(original)
    assert [f.first_time for f in frames] == pytest.approx([f.first_time for f in original], abs=1e-6)


FourTuple = tuple[str, int, str, int]


def _four_tuple(packet: ScapyPacket) -> FourTuple:
    return packet[IP].src, packet[TCP].sport, packet[IP].dst, packet[TCP].dport


def _stream_bases(packets: list[ScapyPacket]) -> dict[FourTuple, int]:
    """Sequence number of stream offset 0 per direction (the byte after its SYN)."""
    return {_four_tuple(p): (p[TCP].seq + 1) % 2**32 for p in packets
            if TCP in p and p[TCP].flags.S}


def _data_indexes(packets: list[ScapyPacket]) -> list[int]:
    return [i for i, p in enumerate(packets) if _payload(p)]


@pytest.mark.parametrize("which", ["third", "middle", "largest", "last"])
def test_lossy_variant_yields_every_frame_not_touching_a_lost_byte(
        tmp_path: Path, broker_capture: tuple[Path, list[ScapyPacket], list[Frame]], which: str) -> None:
    _path, packets, original = broker_capture
    data = _data_indexes(packets)
    choice = {"third": data[2], "middle": data[len(data) // 2], "last": data[-1],
              "largest": max(data, key=lambda i: len(_payload(packets[i])))}[which]
    lost = packets[choice]
    sender = _four_tuple(lost)
    start = (lost[TCP].seq - _stream_bases(packets)[sender]) % 2**32
    end = start + len(_payload(lost))
    copy = _write(tmp_path / "lossy.pcap", packets[:choice] + packets[choice + 1:])
    frames = _frames(copy)
    expected = {key: [s for s in shapes if not _touches(key, s, sender, start, end)]
                for key, shapes in _flows(original).items()}
    complete = {key: [s for s in shapes if s[2]] for key, shapes in _flows(frames).items()}
    assert {k: v for k, v in complete.items() if v} == {k: v for k, v in expected.items() if v}
    touched = [s for key, shapes in _flows(original).items() for s in shapes
               if _touches(key, s, sender, start, end)]
    assert touched, "the lost segment carried Kafka bytes"


def _touches(key: Flow, shape: Shape, sender: FourTuple, start: int, end: int) -> bool:
    client, server, direction = key
    source, destination = (client, server) if direction == "request" else (server, client)
    if (_ip_text(source[0]), source[1], _ip_text(destination[0]), destination[1]) != sender:
        return False
    offset, data, _complete = shape
    return offset < end and start < offset + len(data)


def _ip_text(packed: bytes) -> str:
    return str(ipaddress.ip_address(packed))


@pytest.mark.parametrize("fraction", [0.1, 0.25, 0.5, 0.75, 0.9])
def test_mid_stream_cut_yields_every_frame_after_the_first_resynchronisation(
        tmp_path: Path, broker_capture: tuple[Path, list[ScapyPacket], list[Frame]],
        fraction: float) -> None:
    _path, packets, original = broker_capture
    data = _data_indexes(packets)
    cut = data[int(len(data) * fraction)] + 1  # the copy starts with original packet cut + 1
    frames = _frames(_write(tmp_path / "cut.pcap", packets[cut:]))
    assert all(f.complete for f in frames)
    # Every frame whose bytes all come after the cut is found: resynchronisation lands
    # on the first of them in each direction (a response through the next response's
    # correlation id when its request was cut off).
    wanted = [f for f in original if f.first_packet > cut]
    assert wanted, "the cut leaves frames"
    assert _by_flow(frames) == _by_flow(wanted)
    for mine, theirs in zip(sorted(frames, key=_flow_order), sorted(wanted, key=_flow_order),
                            strict=True):
        assert mine.last_packet == theirs.last_packet - cut


def _flow_order(frame: Frame) -> tuple[Address, Address, str, bytes, int]:
    key = (frame.connection.client, frame.connection.server, str(frame.direction))
    return (*key, frame.data, frame.last_packet)


def _by_flow(frames: list[Frame]) -> dict[Flow, list[bytes]]:
    out: dict[Flow, list[bytes]] = defaultdict(list)
    for frame in frames:
        out[(frame.connection.client, frame.connection.server, str(frame.direction))].append(frame.data)
    return dict(out)


# --- pathology variants built by tools/pathology.py, scored by tools/recoverable.py ---

LOAD = "load (Tansu, 6 clients, 1500-byte MTU)"
PATHOLOGY = pathology.Settings(seed=7)
MessageKey = tuple[object, ...]


@pytest.fixture(scope="module")
def load_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A busy real broker session with multi-segment responses, recorded for this run."""
    try:
        tansu_binary()
        tcpdump_binary()
    except RecordingError as absent:
        missing(str(absent))
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        missing("recording the load capture needs root, unshare and ip (its own network namespace)")
    path = tmp_path_factory.mktemp("load") / "load.pcap"
    subprocess.run([sys.executable, "-m", "tools.record_load", str(path), "--producers", "3",
                    "--consumers", "3", "--rounds", "12"],
                   check=True, cwd=Path(__file__).resolve().parents[1], timeout=300,
                   capture_output=True)
    return path


@pytest.fixture(scope="module", params=[*CAPTURES, LOAD],
                ids=[*(p.stem for p in CAPTURES), "load"])
def variants(request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    original = request.getfixturevalue("load_capture") if request.param == LOAD else request.param
    built = pathology.build(original, tmp_path_factory.mktemp("variants"), PATHOLOGY)
    return original, built


def _messages(path: Path) -> Counter[MessageKey]:
    """Each message as connection, direction, correlation id, API, length, completeness,
    and what it is paired with."""
    out: Counter[MessageKey] = Counter()
    for message in read_messages(path):
        connection, pair = message.frame.connection, message.pair
        out[(connection.client, connection.server, str(message.direction), message.correlation_id,
             message.api_key, len(message.frame.data), message.frame.complete,
             None if pair is None else (str(pair.direction), pair.correlation_id))] += 1
    return out


@pytest.mark.parametrize("variant", pathology.LOSSLESS)
def test_lossless_pathology_yields_the_original_messages_and_pairs(
        variants: tuple[Path, dict[str, Path]], variant: str) -> None:
    original, built = variants
    expected = _messages(original)
    assert sum(expected.values()) > 10
    assert _messages(built[variant]) == expected


@pytest.mark.parametrize("variant", pathology.LOSSY)
def test_lossy_pathology_recovers_99_percent_of_the_recoverable_and_invents_nothing(
        variants: tuple[Path, dict[str, Path]], variant: str) -> None:
    original, built = variants
    wanted = bound.original_messages(original, DEFAULT_PORTS)
    recoverable = bound.recoverable(wanted, built[variant])
    found = bound.kdissect_found(built[variant], DEFAULT_PORTS)
    score = bound.score(wanted, found, recoverable)
    assert score.invented == 0
    # 99% of what is recoverable; the live load capture holds only about a hundred messages
    # per variant, recorded afresh each run, so one missed message is allowed there. The one
    # cause seen (a whole response to a lost request skipped past a false candidate) is
    # fixed and pinned in test_framing.py; 84 further recordings missed none. Should it
    # fail, it names what was missed and where the captures are (pytest keeps them), so that
    # a recording that misses more can be looked into.
    missed = Counter(m.key for m in recoverable) - Counter(key for key, _api in found)
    assert score.recoverable - score.recovered <= max(1, 0.01 * score.recoverable), (
        f"missed {sorted(missed.elements())[:10]} of {original}, variant {built[variant]}")
    assert score.recoverable < len(wanted)  # the variant did lose messages


def test_pathology_variants_are_deterministic(tmp_path: Path) -> None:
    first = pathology.build(CAPTURES[0], tmp_path / "a", PATHOLOGY)
    second = pathology.build(CAPTURES[0], tmp_path / "b", PATHOLOGY)
    assert {name: path.read_bytes() for name, path in first.items()} == {
        name: path.read_bytes() for name, path in second.items()}
    other = pathology.build(CAPTURES[0], tmp_path / "c", replace(PATHOLOGY, seed=8), ("drop",))
    assert other["drop"].read_bytes() != first["drop"].read_bytes()


def test_recoverable_bound_counts_only_messages_whose_bytes_all_survive(tmp_path: Path) -> None:
    original = CAPTURES[0]
    packets = list(rdpcap(str(original)))
    wanted = bound.original_messages(original, DEFAULT_PORTS)
    assert len(bound.recoverable(wanted, original)) == len(wanted)
    data = _data_indexes(packets)
    lost = data[len(data) // 2]
    copy = _write(tmp_path / "lossy.pcap", packets[:lost] + packets[lost + 1:])
    held = len(_payload(packets[lost]))
    survivors = bound.recoverable(wanted, copy)
    gone = [m for m in wanted if m not in survivors]
    assert gone and sum(m.size for m in gone) >= held - 4  # what the segment carried
