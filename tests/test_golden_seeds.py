"""The seed pages' minimal instances render line for line as the seed pages' trees.

The frames are built by hand, field by field, from the seed layouts (every
number zero, every string empty, every array one element). The expected trees
are the seed pages' object trees reflowed to one node per line (tests/golden/).
For API 75 the golden trees carry the nullable-struct presence byte the seeds
leave out (30 and 88 bytes on the wire, as kio encodes them below); the seeds'
literal 29- and 87-byte layouts must come out as malformed, with clear notes.
"""

from __future__ import annotations

import datetime
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.describe_topic_partitions.v0 import request as kio_request
from kio.schema.describe_topic_partitions.v0 import response as kio_response
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from kdissect.decode.dissect import dissect_request, dissect_response
from kdissect.decode.schema import configure_definitions, set_sources
from kdissect.notes import Severity
from kdissect.present.hexdump import hexdump
from kdissect.present.text import render_tree

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture(autouse=True)
def own_definitions() -> Iterator[None]:
    """The golden trees carry kdissect's own descriptions: pin its own files, whatever is installed."""
    configure_definitions(installed=False)
    yield
    set_sources(None)
ZERO_UUID = "00" * 16


def frame(*parts: str) -> bytes:
    """Hex parts (spaces allowed) joined, behind a computed int32 size prefix."""
    body = bytes.fromhex("".join(parts).replace(" ", ""))
    return len(body).to_bytes(4, "big") + body


def request_header(api_key: int, version: int) -> str:
    # api key, version, correlation id 0, client id "" (int16 len 0), no tagged fields
    return f"{api_key:04x} {version:04x} 00000000 0000 00"


RESPONSE_HEADER_V1 = "00000000 00"  # correlation id 0, no tagged fields

DESCRIBE_PRODUCERS_REQUEST = frame(
    request_header(61, 0),
    "02",  # Topics: one element
    "01 02 00000000 00",  # Name "", PartitionIndexes [0], tagged fields
    "00",
)
PRODUCER_STATE = "0000000000000000 00000000 00000000 0000000000000000 00000000 0000000000000000 00"
DESCRIBE_PRODUCERS_RESPONSE = frame(
    RESPONSE_HEADER_V1,
    "00000000",  # ThrottleTimeMs
    "02 01",  # Topics: one element, Name ""
    "02 00000000 0000 01",  # Partitions: one element, PartitionIndex, ErrorCode, ErrorMessage ""
    "02", PRODUCER_STATE,  # ActiveProducers: one element
    "00 00 00",  # tagged fields: partition, topic, body
)
DESCRIBE_QUORUM_REQUEST = frame(
    request_header(55, 2),
    "02 01",  # Topics: one element, TopicName ""
    "02 00000000 00",  # Partitions: one element, PartitionIndex, tagged fields
    "00 00",
)
REPLICA_STATE = f"00000000 {ZERO_UUID} 0000000000000000 0000000000000000 0000000000000000 00"
DESCRIBE_QUORUM_RESPONSE = frame(
    RESPONSE_HEADER_V1,
    "0000 01",  # ErrorCode, ErrorMessage ""
    "02 01",  # Topics: one element, TopicName ""
    "02 00000000 0000 01",  # Partitions: one element, PartitionIndex, ErrorCode, ErrorMessage ""
    "00000000 00000000 0000000000000000",  # LeaderId, LeaderEpoch, HighWatermark
    "02", REPLICA_STATE,  # CurrentVoters
    "02", REPLICA_STATE,  # Observers
    "00 00",  # tagged fields: partition, topic
    "02 00000000",  # Nodes: one element, NodeId
    "02 01 01 0000 00",  # Listeners: one element, Name "", Host "", Port 0, tagged fields
    "00 00",  # tagged fields: node, body
)


def describe_topic_partitions_request(presence: str) -> bytes:
    return frame(
        request_header(75, 0),
        "02 01 00",  # Topics: one element, Name "", tagged fields
        "00000000",  # ResponsePartitionLimit
        presence, "01 00000000 00",  # Cursor: TopicName "", PartitionIndex, tagged fields
        "00",
    )


def describe_topic_partitions_response(presence: str) -> bytes:
    int32_array = "02 00000000"
    return frame(
        RESPONSE_HEADER_V1,
        "00000000",  # ThrottleTimeMs
        "02 0000 01", ZERO_UUID, "00",  # Topics: one element, ErrorCode, Name "", TopicId, IsInternal
        "02 0000 00000000 00000000 00000000",  # Partitions: ErrorCode, PartitionIndex, LeaderId, LeaderEpoch
        int32_array * 5, "00",  # five []int32 fields, tagged fields
        "00000000 00",  # TopicAuthorizedOperations, tagged fields
        presence, "01 00000000 00",  # NextCursor
        "00",
    )


def golden(name: str) -> str:
    text = (GOLDEN / f"{name}.txt").read_text(encoding="utf-8").rstrip("\n")
    # The seeds show a sample instance, so their array lengths say "one sample
    # element follows"; a decoder cannot know an element is a sample, and says
    # "one element follows". That phrase is the only substitution made.
    return text.replace("one sample element follows", "one element follows")


CASES = [
    ("api61_v0_request", lambda: dissect_request(DESCRIBE_PRODUCERS_REQUEST)),
    ("api61_v0_response", lambda: dissect_response(DESCRIBE_PRODUCERS_RESPONSE, 61, 0)),
    ("api55_v2_request", lambda: dissect_request(DESCRIBE_QUORUM_REQUEST)),
    ("api55_v2_response", lambda: dissect_response(DESCRIBE_QUORUM_RESPONSE, 55, 2)),
    ("api75_v0_request", lambda: dissect_request(describe_topic_partitions_request("01"))),
    ("api75_v0_response", lambda: dissect_response(describe_topic_partitions_response("01"), 75, 0)),
]


@pytest.mark.parametrize(("name", "dissect"), CASES, ids=[c[0] for c in CASES])
def test_seed_instance_renders_exactly_as_the_seed_tree(name: str, dissect) -> None:
    tree = dissect()
    assert render_tree(tree, show_generated=False).splitlines() == golden(name).splitlines()
    assert tree.tiling_errors() == []
    assert list(tree.all_notes()) == []


def test_seed_frames_have_the_seed_sizes() -> None:
    sizes = [len(DESCRIBE_PRODUCERS_REQUEST), len(DESCRIBE_PRODUCERS_RESPONSE), len(DESCRIBE_QUORUM_REQUEST),
             len(DESCRIBE_QUORUM_RESPONSE), len(describe_topic_partitions_request("")),
             len(describe_topic_partitions_response(""))]
    assert sizes == [24, 64, 25, 145, 29, 87]


def test_kio_encodes_the_minimal_api75_instances_with_the_presence_byte() -> None:
    req: Any = kio_request  # kio's phantom int and str types are not worth spelling out here
    resp: Any = kio_response
    request = req.DescribeTopicPartitionsRequest(
        topics=(req.TopicRequest(name=""),), response_partition_limit=0,
        cursor=req.Cursor(topic_name="", partition_index=0))
    partition = resp.DescribeTopicPartitionsResponsePartition(
        error_code=ErrorCode.none, partition_index=0, leader_id=0, leader_epoch=0, replica_nodes=(0,), isr_nodes=(0,),
        eligible_leader_replicas=(0,), last_known_elr=(0,), offline_replicas=(0,))
    topic = resp.DescribeTopicPartitionsResponseTopic(
        error_code=ErrorCode.none, name="", topic_id=None, is_internal=False, partitions=(partition,),
        topic_authorized_operations=0)
    response = resp.DescribeTopicPartitionsResponse(
        throttle_time=datetime.timedelta(0), topics=(topic,),
        next_cursor=resp.Cursor(topic_name="", partition_index=0))
    assert describe_topic_partitions_request("01")[15:] == _kio_bytes(request)
    assert describe_topic_partitions_response("01")[9:] == _kio_bytes(response)


def _kio_bytes(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def test_describe_quorum_lag_is_generated_for_every_voter_and_observer() -> None:
    lines = render_tree(dissect_response(DESCRIBE_QUORUM_RESPONSE, 55, 2)).splitlines()
    lags = [(i, line) for i, line in enumerate(lines) if "[lag" in line]
    expected = "+-- [lag int64 = 0] [0x{:04x}, 0B] leader's log end offset minus this replica's (generated)"
    assert [line.split("|   ")[-1].strip() for _, line in lags] == [expected.format(0x3B), expected.format(0x69)]
    for index, _ in lags:
        assert "LogEndOffset int64 = 0" in lines[index - 1]
    assert len(lines) == len(golden("api55_v2_response").splitlines()) + 2


def test_literal_29_byte_api75_request_is_reported_malformed() -> None:
    tree = dissect_request(describe_topic_partitions_request(""))
    notes = [(n.severity, n.message, n.offset) for n in tree.all_notes()]
    assert notes == [
        (Severity.ERROR, "TopicName: null, but the field is not nullable in this version", 0x17),
        (Severity.ERROR, "truncated: tagged_fields uvarint needs 1 byte, 0 left", 0x1D),
    ]
    assert tree.tiling_errors() == []
    assert tree.size == 29


def test_literal_87_byte_api75_response_is_reported_malformed() -> None:
    tree = dissect_response(describe_topic_partitions_response(""), 75, 0)
    notes = [(n.severity, n.message, n.offset) for n in tree.all_notes()]
    assert notes == [
        (Severity.ERROR, "TopicName: null, but the field is not nullable in this version", 0x51),
        (Severity.ERROR, "truncated: tagged_fields uvarint needs 1 byte, 0 left", 0x57),
    ]
    assert tree.tiling_errors() == []
    assert "malformed bytes = empty [0x0057, 0B]" in render_tree(tree)


@pytest.mark.parametrize(("seed", "names"), [
    ("003_1b7e1849a78b5860.txt", ["api61_v0_request", "api61_v0_response"]),
    ("004_c9e027445b9c2119.txt", ["api55_v2_request", "api55_v2_response"]),
])
def test_golden_files_are_the_seed_trees_reflowed(seed: str, names: list[str], public_captures: Path) -> None:
    """Flattening a golden file the way the seed pages are flattened gives the seed's line back."""
    seeds = public_captures.parents[1] / "seeds"  # the shared folder holds both
    seed_trees = re.findall(r"object tree\n(.*)\n", (seeds / seed).read_text(encoding="utf-8"))
    flattened = [" ".join(
        line.replace("|   ", "| ").strip() for line in (GOLDEN / f"{name}.txt").read_text().splitlines())
        for name in names]
    assert [_squeeze(f) for f in flattened] == [_squeeze(t) for t in seed_trees]


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_hexdump_rows_follow_the_seed_byte_layout() -> None:
    rows = hexdump(DESCRIBE_PRODUCERS_REQUEST).splitlines()
    assert rows == [
        "0000  00 00 00 14 00 3d 00 00  00 00 00 00 00 00 00 02   .....=.. ........",
        "0010  01 02 00 00 00 00 00 00                            ........",
    ]
    assert [row[:4] for row in hexdump(DESCRIBE_QUORUM_RESPONSE).splitlines()] == [
        f"{offset:04x}" for offset in range(0, 0xA0, 0x10)]


def test_hexdump_shows_text_and_widens_offsets_past_64k() -> None:
    assert hexdump(b"kafka\x00\x7f\xff") == "0000  6b 61 66 6b 61 00 7f ff                            kafka..."
    rows = hexdump(bytes(0x10010)).splitlines()
    assert (len(rows), rows[0][:7], rows[-1][:7]) == (0x1001, "00000  ", "10000  ")
    assert hexdump(b"") == ""


def test_long_descriptions_are_cut_unless_wide() -> None:
    tree = dissect_response(DESCRIBE_PRODUCERS_RESPONSE, 61, 0)
    about = tree.children[2]["ThrottleTimeMs"].about
    narrow = render_tree(tree).splitlines()[7]
    wide = render_tree(tree, wide=True).splitlines()[7]
    assert narrow.endswith(about[:75] + "...")
    assert wide.endswith(about) and len(about) > 78
