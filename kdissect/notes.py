"""Expert notes: how every stage reports what went wrong, as data.

A note never stops the run. It travels with the thing it is about (a frame, a
tree node, a message) and is shown by the presentation layer, like Wireshark's
expert info. A note may carry a stable id (`kafka.request_missing`), so that
users filter and count notes by what happened rather than by their wording;
`EXPERT_IDS` lists every id with its severity and meaning.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Severity(enum.IntEnum):
    """How much a note matters, lowest first (Wireshark's expert severities)."""

    CHAT = 0  # normal but worth knowing (a retransmission delivered once)
    NOTE = 1  # unusual (request never answered)
    WARN = 2  # the data is incomplete (a gap, a missing request)
    ERROR = 3  # malformed: the bytes contradict the protocol

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Note:
    """One finding, optionally pinned to a byte offset within its frame.

    `id` names the situation (see `EXPERT_IDS`); it is empty where no stable id
    has been given yet.
    """

    severity: Severity
    message: str
    offset: int | None = None
    id: str = ""

    def __str__(self) -> str:
        where = "" if self.offset is None else f" at 0x{self.offset:04x}"
        return f"{self.severity}: {self.message}{where}"


def listed(found: Iterable[Note]) -> str:
    """Notes as the tables list them: `severity: message` each, joined by `; `."""
    return "; ".join([f"{n.severity}: {n.message}" for n in found])


def chat(message: str, offset: int | None = None, id: str = "") -> Note:
    return Note(Severity.CHAT, message, offset, id)


def note(message: str, offset: int | None = None, id: str = "") -> Note:
    return Note(Severity.NOTE, message, offset, id)


def warn(message: str, offset: int | None = None, id: str = "") -> Note:
    return Note(Severity.WARN, message, offset, id)


def error(message: str, offset: int | None = None, id: str = "") -> Note:
    return Note(Severity.ERROR, message, offset, id)


class Group(enum.StrEnum):
    """What kind of problem a note is about (Wireshark's expert groups)."""

    SEQUENCE = "sequence"  # bytes or messages missing, repeated or out of order
    REASSEMBLE = "reassemble"  # a Kafka frame could not be put together
    MALFORMED = "malformed"  # the bytes contradict the protocol
    CHECKSUM = "checksum"  # a CRC does not match
    UNDECODED = "undecoded"  # left as raw bytes: no definition, unknown API
    DECRYPTION = "decryption"  # TLS that could not be decrypted
    PROTOCOL = "protocol"  # legal but unusual use of the protocol
    ASSUMPTION = "assumption"  # decoded under an assumption the note states
    CAPTURE = "capture"  # the capture file itself
    SECURITY = "security"  # credentials and how they are shown


@dataclass(frozen=True, slots=True)
class ExpertId:
    id: str
    severity: Severity
    group: Group
    meaning: str


# Every stable id, in the order the README's table shows them. An id names one
# situation; its wording may carry details (numbers, names), its id never does.
EXPERT_IDS: tuple[ExpertId, ...] = (
    # Reading the capture file.
    ExpertId("pcap.cut_short", Severity.WARN, Group.CAPTURE,
             "the capture file (or its compressed stream) ends inside a record: the rest is "
             "missing"),
    ExpertId("pcap.record_corrupt", Severity.ERROR, Group.CAPTURE,
             "a packet record or block is corrupt (impossible length, unknown interface); "
             "that packet is skipped or cut, reading goes on"),
    ExpertId("pcap.resumed", Severity.WARN, Group.CAPTURE,
             "reading resumed at the next plausible record after a corrupt stretch"),
    ExpertId("pcap.unreadable", Severity.ERROR, Group.CAPTURE,
             "no readable record after a corrupt stretch: the rest of the file cannot be read"),
    ExpertId("pcap.snaplen_exceeded", Severity.NOTE, Group.CAPTURE,
             "a packet longer than the file's snap length (read anyway)"),
    ExpertId("pcap.unknown_block", Severity.NOTE, Group.CAPTURE,
             "a pcapng block of a type kdissect does not read"),
    ExpertId("pcap.interface_malformed", Severity.WARN, Group.CAPTURE,
             "a pcapng interface description is cut short or its options are malformed"),
    ExpertId("pcap.link_unsupported", Severity.NOTE, Group.CAPTURE,
             "a link type kdissect does not read; its packets are skipped"),
    # TCP and TLS.
    ExpertId("tcp.lost_bytes", Severity.WARN, Group.SEQUENCE,
             "bytes of a TCP stream were never captured (lost, or the capture started late)"),
    ExpertId("tcp.retransmission", Severity.CHAT, Group.SEQUENCE,
             "bytes sent again with the same content (delivered once)"),
    ExpertId("tcp.retransmission_differs", Severity.WARN, Group.SEQUENCE,
             "a retransmission whose content differs from the first copy (first copy kept)"),
    ExpertId("tls.no_keys", Severity.WARN, Group.DECRYPTION,
             "a TLS connection whose keys are not in the key log, or the capture starts after "
             "its handshake"),
    ExpertId("tls.unsupported", Severity.WARN, Group.DECRYPTION,
             "a TLS version or cipher suite kdissect cannot decrypt"),
    ExpertId("tls.malformed", Severity.WARN, Group.DECRYPTION,
             "bytes that are not a valid TLS record or handshake message"),
    ExpertId("tls.lost_bytes", Severity.WARN, Group.DECRYPTION,
             "TLS records lost by the capture; decryption resumes where it can"),
    ExpertId("tls.auth_failed", Severity.WARN, Group.DECRYPTION,
             "a TLS record fails authentication (tampered, corrupt or wrong keys)"),
    ExpertId("tls.not_decrypted", Severity.WARN, Group.DECRYPTION,
             "a TLS connection of which nothing could be decrypted (no ServerHello, no record "
             "opened)"),
    ExpertId("sasl.mechanism", Severity.CHAT, Group.SECURITY,
             "the SASL mechanism a connection authenticates with"),
    ExpertId("sasl.masked", Severity.CHAT, Group.SECURITY,
             "SASL credentials masked in the frame bytes (--show-secrets shows them)"),
    # Framing Kafka messages.
    ExpertId("kafka.none_found", Severity.NOTE, Group.UNDECODED,
             "the capture holds TCP connections but no Kafka on the ports looked at (see --port)"),
    ExpertId("kafka.frame_incomplete", Severity.WARN, Group.REASSEMBLE,
             "a frame whose bytes are not all in the capture (it ends, or bytes were lost)"),
    ExpertId("kafka.bad_frame_size", Severity.ERROR, Group.MALFORMED,
             "a size prefix that cannot be a Kafka frame size: the stream is resynchronised"),
    ExpertId("kafka.resync", Severity.WARN, Group.REASSEMBLE,
             "bytes skipped to find the next frame after a gap or a bad size prefix"),
    ExpertId("kafka.unframed", Severity.WARN, Group.REASSEMBLE,
             "bytes left at the end of a stream that form no frame"),
    ExpertId("kafka.request_missing", Severity.WARN, Group.SEQUENCE,
             "a response whose request is not in the capture (capture started after it, "
             "or its bytes were lost); its body cannot be decoded"),
    ExpertId("kafka.unanswered", Severity.NOTE, Group.SEQUENCE,
             "a request still unanswered when the capture ends"),
    ExpertId("kafka.response_overdue", Severity.NOTE, Group.SEQUENCE,
             "a request shown before its answer was seen, because holding it longer would "
             "exceed the hold limits (30 s of capture time, 10,000 messages or 64 MiB); "
             "a response that comes later is still paired with it"),
    ExpertId("kafka.duplicate_correlation_id", Severity.WARN, Group.SEQUENCE,
             "a request reuses the correlation id of a request still in flight on its connection"),
    ExpertId("kafka.response_out_of_order", Severity.WARN, Group.SEQUENCE,
             "a response answers a request while an older request of its connection is "
             "still unanswered (Kafka answers in order)"),
    ExpertId("kafka.header_short", Severity.ERROR, Group.MALFORMED,
             "a frame too short to hold a Kafka request or response header"),
    ExpertId("kafka.header_cut", Severity.WARN, Group.REASSEMBLE,
             "a request header cut before or inside its client id"),
    # Decoding bodies.
    ExpertId("kafka.malformed", Severity.ERROR, Group.MALFORMED,
             "a body contradicts its definition (length past the end, null where not allowed, "
             "bad presence byte)"),
    ExpertId("kafka.capture_cut", Severity.WARN, Group.REASSEMBLE,
             "a field cut by the end of the captured bytes, not by the sender"),
    ExpertId("kafka.trailing_bytes", Severity.ERROR, Group.MALFORMED,
             "bytes left after a body, a tagged field or a frame were fully decoded"),
    ExpertId("kafka.bad_utf8", Severity.WARN, Group.MALFORMED,
             "a string that is not valid UTF-8 (shown with replacements)"),
    ExpertId("kafka.tags_unordered", Severity.NOTE, Group.PROTOCOL,
             "tagged fields not in ascending tag order"),
    ExpertId("kafka.client_quirk", Severity.NOTE, Group.PROTOCOL,
             "a known client's departure from the protocol that brokers accept (librdkafka's "
             "API-key array after an ApiVersions v0 request)"),
    ExpertId("kafka.version_unpublished", Severity.NOTE, Group.PROTOCOL,
             "an API version outside the range Kafka publishes for that API"),
    ExpertId("kafka.version_newer", Severity.WARN, Group.ASSUMPTION,
             "an API version newer than every definition: decoded as the newest known"),
    ExpertId("kafka.unknown_api", Severity.WARN, Group.UNDECODED,
             "an API key Kafka does not define: body not decoded"),
    ExpertId("kafka.no_definition", Severity.NOTE, Group.UNDECODED,
             "no definition of this API version was found: body not decoded (see --schemas)"),
    # Records inside Produce and Fetch.
    ExpertId("kafka.crc_mismatch", Severity.ERROR, Group.CHECKSUM,
             "a record batch's CRC-32C or a legacy message's CRC32 does not match its content"),
    ExpertId("kafka.records_malformed", Severity.ERROR, Group.MALFORMED,
             "a record batch or message set that contradicts its own lengths and counts"),
    ExpertId("kafka.records_partial", Severity.CHAT, Group.PROTOCOL,
             "a partial batch at the end of a Fetch response (normal: the broker cuts at max "
             "bytes)"),
    ExpertId("kafka.records_not_decompressed", Severity.WARN, Group.UNDECODED,
             "compressed records that could not be decompressed (corrupt, unknown codec, or over "
             "the decompression cap)"),
)
EXPERT = {expert.id: expert for expert in EXPERT_IDS}
