"""Which TCP connections are Kafka, and which side is the client.

A connection is Kafka when one of its ports is a Kafka port, or (with detection
on) when the first bytes of one side are a request header. Until that is
decided, the connection's events are held (at most `HOLD_LIMIT` bytes); once
decided, each direction gets a `Framer` as its stream's sink, and the events
held are replayed into it. A TLS handshake on a Kafka port is reported once and
the connection skipped, unless a key log is given: then a TLS layer
(`kdissect.ingest.tls`) decrypts it and Kafka is looked for in the plaintext. At the end, a capture in which no Kafka was found gets
one note saying which TCP connections it holds, and how to name a port.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from kdissect.ingest.detect import REQUEST_HEADER_LENGTH, looks_like_tls, plausible_request
from kdissect.ingest.framing import Connection, Direction, Exchange, Frame, Framer, FramingSettings
from kdissect.ingest.net import (
    Address,
    format_address,
    supported_linktype,
    unsupported_linktype_note,
)
from kdissect.ingest.reassembly import TcpConnection
from kdissect.notes import Note, note, warn

if TYPE_CHECKING:
    from kdissect.ingest.tls import KeyLog, TlsLayer

HOLD_LIMIT = 64 * 1024  # bytes held per connection while deciding whether it is Kafka
PORTS_LISTED = 8  # server ports named in the note of a capture without Kafka

Report = Callable[[Note], None]


class KafkaConnections:
    """What every connection of one read shares: settings, numbering, the output queue."""

    def __init__(self, ports: frozenset[int], detect: bool, max_frame_size: int,
                 report: Report, tls_keys: KeyLog | None = None) -> None:
        self.ports, self.detect, self.report = ports, detect, report
        self.tls_keys = tls_keys
        self.tls_sessions: dict[bytes, bytes] = {}  # TLS 1.2 session id -> master secret
        self.tls_seen = 0  # TLS connections (each has its note when it cannot be decrypted)
        self.settings = FramingSettings(max_frame_size, report)
        self.out: list[Frame] = []
        self.next_index = 0
        self.linktypes_seen: set[int] = set()
        self.tcp_ports: Counter[int] = Counter()  # server port (or lower port) of every TCP connection

    def open(self, tcp: TcpConnection) -> KafkaConnection | None:
        (_ip0, port0), (_ip1, port1) = tcp.addresses
        self.tcp_ports[_server_port(tcp)] += 1
        on_port = (port0 in self.ports, port1 in self.ports)
        if not (self.detect or any(on_port)):
            return None
        return KafkaConnection(self, tcp, on_port)

    def new_connection(self, client: Address, server: Address, tls: bool = False) -> Connection:
        self.next_index += 1
        return Connection(self.next_index - 1, client, server, tls)

    def not_tcp(self, linktype: int) -> None:
        """A packet that carried no TCP: its link type is reported once if unsupported."""
        if linktype not in self.linktypes_seen:
            self.linktypes_seen.add(linktype)
            if not supported_linktype(linktype):
                self.report(unsupported_linktype_note(linktype))

    def finish(self) -> None:
        """The end of the capture: say what it held when it held no Kafka (TLS, decrypted or
        not, has notes of its own, connection by connection)."""
        if self.next_index or self.tls_seen or not self.tcp_ports:
            return
        count = sum(self.tcp_ports.values())
        ports = [str(port) for port, _n in self.tcp_ports.most_common(PORTS_LISTED)]
        more = len(self.tcp_ports) - len(ports)
        listed = ", ".join(ports) + (f" and {more} more" if more > 0 else "")
        known = ", ".join(str(port) for port in sorted(self.ports))
        self.report(note(
            f"no Kafka found: {count} TCP connection{'s' if count != 1 else ''} seen, on "
            f"port{'s' if len(self.tcp_ports) != 1 else ''} {listed}; Kafka ports: {known}"
            f"{'' if self.detect else ' (detection off)'}; if Kafka runs on another port, "
            "name it with --port", id="kafka.none_found"))


def _server_port(tcp: TcpConnection) -> int:
    (_ip0, port0), (_ip1, port1) = tcp.addresses
    if tcp.syn_sender is not None:
        return (port1, port0)[tcp.syn_sender]
    return min(port0, port1)


class _Verdict(enum.Enum):
    WAIT = "wait"
    KAFKA = "kafka"
    OTHER = "other"
    TLS = "tls"


class KafkaConnection:
    """A TCP connection that may be Kafka: decides, then frames both directions."""

    def __init__(self, owner: KafkaConnections, tcp: TcpConnection | TlsLayer,
                 on_port: tuple[bool, bool], tls: bool = False) -> None:
        self.owner, self.tcp, self.on_port, self.tls = owner, tcp, on_port, tls
        self.decrypted: tuple[TlsLayer, KafkaConnection] | None = None
        self.verdict = _Verdict.WAIT
        self.heads = (bytearray(), bytearray())  # first bytes of each direction, for the decision
        self.head_closed = [False, False]  # a gap came before enough bytes
        self.held: list[tuple[str, int, tuple]] = []  # events kept until the decision
        self.held_bytes = 0
        self.framers: list[Framer] = []
        self.exchange: Exchange | None = None

    # --- events from reassembly, until the decision (then the framers get them directly) ---

    def sinks(self) -> tuple[Undecided, Undecided]:
        return Undecided(self, 0), Undecided(self, 1)

    def data(self, side: int, offset: int, payload: bytes, number: int, timestamp: int,
             notes: tuple[Note, ...]) -> None:
        if self.verdict is _Verdict.WAIT:
            self._hold("data", side, (offset, payload, number, timestamp, notes), len(payload))
            head = self.heads[side]
            if not self.head_closed[side] and len(head) < REQUEST_HEADER_LENGTH:
                head += payload[:REQUEST_HEADER_LENGTH - len(head)]
            self._decide(final=False)

    def gap(self, side: int, offset: int, size: int, number: int, timestamp: int,
            reason: str) -> None:
        if self.verdict is _Verdict.WAIT:
            self._hold("gap", side, (offset, size, number, timestamp, reason), 0)
            self.head_closed[side] = True
            self._decide(final=False)

    def close(self) -> None:
        if self.verdict is _Verdict.WAIT and self.held:
            self._decide(final=True)
        if self.verdict is _Verdict.KAFKA:
            for framer in self.framers:
                framer.finish()
        if self.decrypted is not None:
            self.decrypted[1].close()
            self.decrypted[0].close()
        self.held.clear()

    def expire(self, now: int) -> None:
        """Capture time is `now`, past a wake-up the exchange asked for (`Exchange.wake`)."""
        if self.exchange is not None:
            self.exchange.expire(now)
        if self.decrypted is not None:
            self.decrypted[1].expire(now)

    # --- deciding ---

    def _hold(self, kind: str, side: int, event: tuple, size: int) -> None:
        self.held.append((kind, side, event))
        self.held_bytes += size

    def _decide(self, *, final: bool) -> None:
        final = final or self.held_bytes > HOLD_LIMIT
        verdict, client = self._classify(final)
        if verdict is _Verdict.WAIT and final:
            verdict = _Verdict.OTHER
        self.verdict = verdict
        if verdict is _Verdict.TLS:
            self.owner.tls_seen += 1
        if verdict is _Verdict.TLS and self.owner.tls_keys is not None:
            self._decrypt(self.owner.tls_keys)
            return
        if verdict is _Verdict.TLS:
            first, second = (format_address(a) for a in self.tcp.addresses)
            self.owner.report(warn(f"{first} <-> {second}: TLS, no keys (no key log given)",
                                   id="tls.no_keys"))
        if verdict is _Verdict.KAFKA and client is not None:
            self._start(client)
        elif verdict is not _Verdict.WAIT:
            self.tcp.stop()
        if verdict is not _Verdict.WAIT:
            self.held.clear()

    def _classify(self, final: bool) -> tuple[_Verdict, int | None]:
        heads = self.heads
        ready = [len(h) >= REQUEST_HEADER_LENGTH or self.head_closed[i] or final
                 for i, h in enumerate(heads)]
        if not self.tls and (any(self.on_port) or self.owner.tls_keys is not None) and any(
                looks_like_tls(head) for head in heads):
            return _Verdict.TLS, None
        if any(self.on_port) and not any(
                len(h) >= 3 or self.head_closed[i] or final for i, h in enumerate(heads)):
            return _Verdict.WAIT, None
        client = self.tcp.syn_sender
        if client is None and self.on_port[0] != self.on_port[1]:
            client = 0 if self.on_port[1] else 1
        if client is None:
            client = _requesting_side(heads, self.owner.settings.max_frame_size)
        if any(self.on_port):
            if client is None:
                if not all(ready):
                    return _Verdict.WAIT, None
                client = _higher_port_side(self.tcp.addresses)
            return _Verdict.KAFKA, client
        return self._detected(client, ready)

    def _detected(self, client: int | None, ready: list[bool]) -> tuple[_Verdict, int | None]:
        """Kafka on an unknown port: the client's first bytes must be a request header."""
        if client is None:
            return (_Verdict.OTHER if all(ready) else _Verdict.WAIT), None
        plausible = plausible_request(self.heads[client], 0, self.owner.settings.max_frame_size)
        if plausible is None:
            return (_Verdict.OTHER if ready[client] else _Verdict.WAIT), None
        return (_Verdict.KAFKA if plausible else _Verdict.OTHER), client

    def _start(self, client: int) -> None:
        addresses = self.tcp.addresses
        connection = self.owner.new_connection(addresses[client], addresses[1 - client], self.tls)
        exchange = self.exchange = Exchange(connection, self.owner.settings, self.owner.out,
                                            self.tcp.stream(client), self.tcp.wake)
        for side in (0, 1):
            stream = self.tcp.stream(side)
            direction = Direction.REQUEST if side == client else Direction.RESPONSE
            framer = Framer(exchange, direction, synced=stream is not None and stream.from_start)
            self.framers.append(framer)
            if stream is not None:
                stream.feed(framer)
        for kind, side, event in self.held:
            if kind == "data":
                self.framers[side].data(*event)
            else:
                self.framers[side].gap(*event)


    def _decrypt(self, keys: KeyLog) -> None:
        """TLS with a key log: a TLS layer takes the ciphertext, and a connection of its
        own decides on the plaintext whether it is Kafka, then frames it."""
        from kdissect.ingest.tls import TlsLayer

        first, second = (format_address(a) for a in self.tcp.addresses)
        layer = TlsLayer(self.tcp, keys, f"{first} <-> {second}", self.owner.report,
                         self.owner.tls_sessions, quiet=not any(self.on_port))
        inner = KafkaConnection(self.owner, layer, self.on_port, tls=True)
        for plain, sink in zip(layer.plain_streams, inner.sinks(), strict=True):
            plain.feed(sink)
        for side, reader in enumerate(layer.sinks()):
            stream = self.tcp.stream(side)
            if stream is not None:
                stream.feed(reader)
        self.decrypted = (layer, inner)
        held, self.held = self.held, []
        for kind, side, event in held:
            getattr(layer.sinks()[side], kind)(*event)


class Undecided:
    """One side of a connection not yet known to be Kafka: events go to the connection."""

    def __init__(self, owner: KafkaConnection, side: int) -> None:
        self.owner, self.side = owner, side

    def data(self, offset: int, payload: bytes, number: int, timestamp: int,
             notes: tuple[Note, ...]) -> None:
        self.owner.data(self.side, offset, payload, number, timestamp, notes)

    def gap(self, offset: int, size: int, number: int, timestamp: int, reason: str) -> None:
        self.owner.gap(self.side, offset, size, number, timestamp, reason)

    def duplicate(self, offset: int, size: int, number: int, differs: bool) -> None:
        pass  # nothing decided yet: nothing to annotate


def _requesting_side(heads: tuple[bytearray, bytearray], max_size: int) -> int | None:
    """The side whose first bytes are a request header.

    A response with a small correlation id also reads as a Produce request (key 0,
    version = the id), so when both sides qualify, the client is the side whose
    correlation id the other side's first bytes answer.
    """
    plausible = [plausible_request(head, 0, max_size) is True for head in heads]
    if plausible[0] != plausible[1]:
        return 0 if plausible[0] else 1
    if not plausible[0]:
        return None
    for side in (0, 1):
        if heads[side][8:12] == heads[1 - side][4:8]:
            return side
    return 0  # the side that spoke first


def _higher_port_side(addresses: tuple[Address, Address]) -> int:
    """Last resort for roles: clients usually have the higher (ephemeral) port."""
    return 0 if addresses[0][1] >= addresses[1][1] else 1
