"""Display filters on real captures: every form, checked against the trees, tshark, and
the tables, plus the errors a user makes (types, unknown fields), all refused when compiled."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kdissect.decode.dissect import message_body
from kdissect.decode.schema import message_plan
from kdissect.pair.message import Message
from kdissect.pipeline import read_messages
from kdissect.present.filter import FilterError, api_keys, compile_filter, selector
from tests.conftest import CAPTURES, missing

QUORUM = CAPTURES / "quorum_story.pcap"
PRODUCERS = CAPTURES / "producers_story.pcap"
TANSU = CAPTURES / "tansu_topic_partitions.pcap"


@pytest.fixture(scope="module")
def captures() -> dict[str, list[Message]]:
    return {path.stem: list(read_messages(path)) for path in (QUORUM, PRODUCERS, TANSU)}


def numbers(messages: list[Message], expression: str) -> list[int]:
    keep = compile_filter(expression)
    return [m.number for m in messages if keep(m)]


def where(messages: list[Message], test: Callable[[Message], bool]) -> list[int]:
    return [m.number for m in messages if test(m)]


def body_values(message: Message, name: str) -> list[object]:
    """Every value of a field called `name` in the decoded body, read straight off the tree."""
    if message.api_key is None or (not message.is_request and message.pair is None):
        return []
    if message_plan(message.api_key, message.api_version or 0, message.kind) is None:
        return []
    body = message_body(message.tree(keep=False))
    return [] if body is None else [n.value for n in body.nodes() if n.name == name and not n.children]


# -- header fields ----------------------------------------------------------------


def test_comparisons_and_boolean_operators_on_header_fields(captures):
    quorum = captures["quorum_story"]
    slow = numbers(quorum, "api_key == 55 and latency_ms > 5")
    assert slow == where(quorum, lambda m: m.api_key == 55 and m.latency is not None and m.latency > 0.005)
    assert slow  # the capture has a few slow DescribeQuorum answers
    assert numbers(quorum, "api_key == 18 || api_key == 3") == where(quorum, lambda m: m.api_key in (18, 3))
    assert numbers(quorum, "not (direction == 'request')") == where(quorum, lambda m: not m.is_request)
    assert numbers(quorum, "api_version ge 1 && api_key eq 55") == where(
        quorum, lambda m: m.api_key == 55 and (m.api_version or 0) >= 1)


def test_set_membership_ranges_and_negation(captures):
    tansu = captures["tansu_topic_partitions"]
    assert numbers(tansu, "api_key in {75 3}") == where(tansu, lambda m: m.api_key in (75, 3))
    assert numbers(tansu, "api_key in (75, 3)") == numbers(tansu, "api_key in {75 3}")
    assert numbers(tansu, "api_key in {1..20}") == where(tansu, lambda m: 1 <= (m.api_key or -1) <= 20)
    assert numbers(tansu, "api_key not in [0, 18]") == where(tansu, lambda m: m.api_key not in (0, 18))
    assert numbers(tansu, 'api_name in {"Produce" "Metadata"}') == where(tansu, lambda m: m.api_key in (0, 3))


def test_a_response_answers_for_its_requests_client_id(captures):
    tansu = captures["tansu_topic_partitions"]
    found = numbers(tansu, 'client_id == "kdissect-recorder" && direction == "response"')
    assert found and found == where(
        tansu, lambda m: not m.is_request and m.pair is not None and m.pair.client_id == "kdissect-recorder")


def test_ipv6_addresses_and_networks_are_written_as_wireshark_writes_them(tmp_path: Path):
    from tests.craft import Conversation, ethernet, kafka_request, records, write_pcap

    talk = Conversation.between(("2001:db8::2", 40000), ("2001:db8::1", 9092))
    talk.handshake()
    talk.send(True, kafka_request(18, 0, 1))
    messages = list(read_messages(write_pcap(tmp_path / "v6.pcap", records(talk.packets, wrap=ethernet))))
    assert [m.number for m in messages] == [1]
    assert numbers(messages, "ip.addr == 2001:db8::1") == [1]
    assert numbers(messages, "ip.src == 2001:db8::2 && ip.dst == 2001:DB8:0:0:0:0:0:1") == [1]
    assert numbers(messages, "ip.addr == 2001:db8::/32") == [1]
    assert numbers(messages, "ip.addr == ::1 || ip.addr == fe80::/10") == []


def test_fields_inside_record_batches_are_fields_too():
    """Keys, values, headers and batch fields of the records inside Produce and Fetch, by
    name or path (through compressed batches too), checked against what kafka-python
    produced and consumed (the capture's sidecar)."""
    import json

    session = json.loads((CAPTURES / "tansu_records.json").read_text())
    messages = list(read_messages(CAPTURES / "tansu_records.pcap"))
    produce = {(m.number, m.is_request) for m in messages if m.api_key == 0}
    by_codec: dict[str, set[int]] = {}
    for record in session["produced"]:
        if record["key"] is None:
            continue
        key = bytes.fromhex(record["key"]).decode()
        found = numbers(messages, f'key == "{key}"')
        assert {m.api_key for m in messages if m.number in found} == {0, 1}, key  # produced, fetched
        assert numbers(messages, f'records[].key == "{key}"') == found
        sent = [n for n in found if (n, True) in produce]
        assert len(sent) == 1, key
        by_codec.setdefault(record["producer"], set()).add(sent[0])
        for name, value in record["headers"]:
            text = bytes.fromhex(value).decode("utf-8", errors="replace")
            test = f'headers[].headerKey == "{name}"'
            if "\ufffd" not in text:  # (a value a filter's string can spell)
                test += f' && headerValue == "{text}"'
            assert sent[0] in numbers(messages, test), test
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):  # (the transactional producer's codec is its own)
        requests = {n for n in numbers(messages, f'compression == "{codec}"') if (n, True) in produce}
        assert by_codec[codec] <= requests, codec
        assert not requests & set().union(*(sent for other, sent in by_codec.items()
                                                    if other not in (codec, "transactional"))), codec
    assert numbers(messages, 'key == "no such key"') == []


def test_addresses_ports_and_streams(captures):
    quorum = captures["quorum_story"]
    everything = [m.number for m in quorum]
    assert numbers(quorum, "ip.addr == 127.0.0.1") == everything
    assert numbers(quorum, "ip.addr == 127.0.0.0/8 && ip.src == 127.0.0.1") == everything
    assert numbers(quorum, "ip.addr == 10.0.0.0/8") == []
    assert numbers(quorum, "tcp.port == 9092") == everything
    assert numbers(quorum, "tcp.dstport == 9092") == where(quorum, lambda m: m.is_request)
    assert numbers(quorum, "tcp.stream == 1") == where(quorum, lambda m: m.frame.connection.index == 1)
    client_port = quorum[0].frame.connection.client[1]
    assert numbers(quorum, f"tcp.srcport == {client_port}") == where(
        quorum, lambda m: m.is_request and m.frame.connection.client[1] == client_port)


@pytest.mark.parametrize("expression", [
    "kafka.correlation_id == 5 && kafka.api_key == 55",
    "kafka.request_key == 18",
    "kafka.response_key == 18",
    "kafka.request.version == 1",
    "kafka.request_frame == 85",
    "kafka.len > 200",
    "tcp.srcport == 9092 && kafka.correlation_id in {2,3}",
])
def test_wireshark_names_select_what_tshark_selects(captures, expression: str):
    """`kafka.*` header names and frame numbers agree with tshark's on the same capture."""
    if shutil.which("tshark") is None:
        missing("tshark is not installed")
    keep = compile_filter(expression)
    ours = [m.frame.last_packet for m in captures["quorum_story"] if keep(m)]
    theirs = subprocess.run(
        ["tshark", "-r", str(QUORUM), "-Y", expression, "-T", "fields", "-e", "frame.number"],
        capture_output=True, text=True, timeout=120, check=True).stdout.split()
    assert ours == [int(n) for n in theirs] and ours


# -- body fields ----------------------------------------------------------------


def test_a_bare_name_matches_at_any_depth(captures):
    producers = captures["producers_story"]
    failed = numbers(producers, "ErrorCode != 0")
    assert failed == where(producers, lambda m: any(v != 0 for v in body_values(m, "ErrorCode")))
    assert len(failed) == 2  # two responses answer one partition with NOT_LEADER_OR_FOLLOWER
    assert numbers(producers, "kafka.error_code == 6") == failed  # NOT_LEADER_OR_FOLLOWER is 6
    assert numbers(producers, "ProducerId == 3002") == where(
        producers, lambda m: 3002 in body_values(m, "ProducerId"))


def test_paths_select_inside_arrays(captures):
    tansu = captures["tansu_topic_partitions"]
    leaders = numbers(tansu, "Topics[].Partitions[].LeaderId == 111")
    assert leaders == where(tansu, lambda m: 111 in body_values(m, "LeaderId"))
    assert numbers(tansu, "Topics.Partitions.LeaderId == 111") == leaders  # [] may be left out
    assert numbers(tansu, "Topics[].Partitions[].LeaderId == -1") == []
    first_orders = numbers(tansu, 'Topics[0].Name == "orders"')
    assert first_orders == where(tansu, lambda m: _first_topic(m) == "orders")
    assert first_orders and numbers(tansu, 'Topics[1].Name == "orders"') == where(
        tansu, lambda m: _names_in_topics(m)[1:2] == ["orders"])
    assert numbers(tansu, 'Topics[-1].Name == "payments"') == where(tansu, lambda m: _last_topic(m) == "payments")


def _topics(message: Message) -> list[str]:
    return [v for v in body_values(message, "Name") if isinstance(v, str)]


def _names_in_topics(message: Message) -> list[str]:
    """The `Name` of each element of the body's top-level `Topics` array, off the tree."""
    if not body_values(message, "Name"):
        return []
    body = message_body(message.tree(keep=False))
    topics = None if body is None else body.child("Topics")
    if topics is None:
        return []
    elements = [c for c in topics.children if c.name != "length"]
    return [n.value for e in elements for n in e.children if n.name == "Name" and isinstance(n.value, str)]


def _first_topic(message: Message) -> str | None:
    return next(iter(_names_in_topics(message)), None)


def _last_topic(message: Message) -> str | None:
    names = _names_in_topics(message)
    return names[-1] if names else None


def test_contains_matches_and_uuid_values(captures):
    tansu = captures["tansu_topic_partitions"]
    assert numbers(tansu, 'kafka.topic_name contains "pay"') == where(
        tansu, lambda m: any("pay" in t for t in _topics(m)))
    missing_topic = numbers(tansu, 'Topics[].Name matches "^no-"')
    assert missing_topic == where(tansu, lambda m: "no-such-topic" in _topics(m))
    assert numbers(tansu, "Topics[].TopicId == \"00000000-0000-0000-0000-000000000000\"") == [
        n for n in missing_topic if not next(m for m in tansu if m.number == n).is_request]
    assert numbers(tansu, "ReplicaNodes contains 111") == numbers(tansu, "ReplicaNodes == 111")
    assert numbers(tansu, 'client_id matches "recorder$"') == where(
        tansu, lambda m: (m.client_id if m.is_request else m.pair and m.pair.client_id) == "kdissect-recorder")


def test_a_bare_field_is_true_when_present(captures):
    quorum = captures["quorum_story"]
    assert numbers(quorum, "CurrentVoters") == where(quorum, lambda m: bool(body_values(m, "ReplicaId")))
    assert numbers(quorum, "!latency_ms") == where(quorum, lambda m: m.latency is None)


def test_time_relative_counts_from_the_start_given_else_the_first_message(captures):
    quorum = captures["quorum_story"]
    start = quorum[0].time - 2.0
    given = compile_filter("time_relative < 2.5", start=lambda: start)
    assert [m.number for m in quorum if given(m)] == where(quorum, lambda m: m.time - start < 2.5)
    assert numbers(quorum, "frame.time_relative < 0.5") == where(quorum, lambda m: m.time - quorum[0].time < 0.5)


def test_a_bare_flag_is_true_when_set(captures):
    """`tls` is a flag every message has: bare, it selects the messages read from TLS
    (none of clear-text captures; the recorded TLS tests check the others)."""
    for messages in captures.values():
        assert numbers(messages, "tls") == [] and numbers(messages, "!tls") == where(messages, bool)
        assert numbers(messages, "tls == false") == where(messages, bool)


def test_generated_values_are_fields_too(captures):
    quorum = captures["quorum_story"]
    assert numbers(quorum, "lag > 0") == where(
        quorum, lambda m: any(isinstance(v, int) and v > 0 for v in _generated(m, "lag")))


def _generated(message: Message, name: str) -> list[object]:
    if message.api_key != 55 or message.is_request or message.pair is None:
        return []
    return [n.value for n in message.tree(keep=False).nodes() if n.name == name and n.generated]


def test_expert_notes_by_id(captures, tmp_path: Path):
    from scapy.layers.inet import TCP
    from scapy.layers.l2 import Ether  # noqa: F401  (registers the link type for rdpcap)
    from scapy.utils import rdpcap, wrpcap

    packets = rdpcap(str(PRODUCERS))
    answers = [i for i, p in enumerate(packets) if p.haslayer(TCP) and p[TCP].sport == 9092
               and len(p[TCP].payload) > 40]
    gone = set(answers[-2:])  # the last two answers never reach the capture
    wrpcap(str(tmp_path / "cut.pcap"), [p for i, p in enumerate(packets) if i not in gone])
    messages = list(read_messages(tmp_path / "cut.pcap"))
    unanswered = numbers(messages, 'expert == "kafka.unanswered"')
    assert unanswered and unanswered == where(messages, lambda m: m.is_request and m.pair is None)
    assert numbers(messages, 'expert.severity == "note"') == unanswered
    assert numbers(messages, '"never answered" in notes') == unanswered
    assert numbers(messages, 'expert.group == "sequence"') == unanswered
    assert numbers(messages, 'expert.group == "checksum"') == []


def test_body_is_decoded_only_when_the_cheap_parts_pass(captures, monkeypatch):
    import kdissect.present.fields as fields

    decoded: list[int] = []
    original = fields.body_fields

    def counting(message: Message, *reading):
        decoded.append(message.number)
        return original(message, *reading)

    monkeypatch.setattr("kdissect.present.filter.body_fields", counting)
    fresh = list(read_messages(QUORUM))
    stream = next(m for m in fresh if m.api_version == 2).frame.connection.index  # the v2 client's
    keep = compile_filter(f"LeaderId == 2 && correlation_id == 9 && stream == {stream}")
    kept = [m.number for m in fresh if keep(m)]
    assert decoded == where(fresh, lambda m: m.correlation_id == 9 and m.frame.connection.index == stream
                            and m.api_key == 55)
    assert kept == [42] and decoded == [41, 42]  # the request too: it has no LeaderId, but its API does
    decoded.clear()
    assert numbers(fresh, "api_key == 18 || LeaderId == 2")  # ApiVersions carries no LeaderId
    # only APIs whose definitions have a LeaderId are decoded: DescribeQuorum and Metadata
    # (its partitions carry one), never ApiVersions
    assert {m.api_key for m in fresh if m.number in decoded} <= {3, 55}
    assert all(m._tree is None for m in fresh)  # nothing kept in memory


# -- spelling --------------------------------------------------------------------


def test_wireshark_spelling_outside_quotes_only(captures):
    tansu = captures["tansu_topic_partitions"]
    assert numbers(tansu, 'api_key == 75 && !(client_id == "a&&b!")') == where(tansu, lambda m: m.api_key == 75)
    assert numbers(tansu, 'client_id == "a&&b!" || api_key == 1') == []


def test_api_selection_by_key_or_name(captures):
    assert api_keys(["DescribeQuorum", "61", 75, "describeproducers"]) == {55, 61, 75}
    keep = selector(["DescribeQuorum"], "latency_ms > 5")
    quorum = captures["quorum_story"]
    assert [m.number for m in quorum if keep(m)] == numbers(quorum, "api_key == 55 && latency_ms > 5")
    with pytest.raises(ValueError, match="'Nope' is not a Kafka API"):
        api_keys(["Nope"])


# -- errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "complaint"),
    [
        ('LeaderId == "abc"', "cannot compare field 'LeaderId' (int32) with \"abc\" (string)"),
        ("client_id > 3", "cannot compare field 'client_id' (string) with 3 (integer)"),
        ("IsInternal == 1", "field 'IsInternal' (bool) with 1 (integer)"),
        ('api_key == "55"', "field 'api_key' (int16) with \"55\" (string)"),
        ("latency_ms == true", "field 'latency_ms' (milliseconds) with true (boolean)"),
        ("LeaderId == client_id", "cannot compare field 'LeaderId' (int32) with field 'client_id' (string)"),
        ("Topics == 1", "'Topics' is a struct array"),
        ('TopicId == "xyz"', "field 'TopicId' is a uuid; \"xyz\" is not one"),
        ('ip.addr == "nowhere"', "is not an address or network"),
        ("ip.addr > 1", "has no order"),
        ("ErrorCode matches \"x\"", "field 'ErrorCode' (int16) is not a string"),
        ('Name matches "("', "invalid regular expression"),
        ("ErrorCode contains 1 && client_id contains 2", "contains takes a string here"),
        ("api_key == 1.5", "field 'api_key' is an integer (int16); 1.5 is not one"),
        ("tcp.port == 99999", "field 'tcp.port' (uint16) holds 0 to 65535; 99999 is beyond it"),
        ("ErrorCode in {0 40000}", "field 'ErrorCode' (int16) holds -32768 to 32767; 40000 is beyond it"),
        ("ip.addr == 2001:db8::zz", "unexpected"),
    ],
)
def test_values_of_another_type_are_refused_naming_both(expression: str, complaint: str):
    with pytest.raises(FilterError) as raised:
        compile_filter(expression)
    assert complaint in str(raised.value)


@pytest.mark.parametrize(
    ("expression", "complaint"),
    [
        ("no_such_column == 1", "unknown field 'no_such_column'"),
        ("LeaderID == 1", "did you mean LeaderId"),
        ("Topics[].Foo == 1", "field 'Topics' has no field 'Foo'"),
        ("ErrorCode[] == 1", "'ErrorCode' is not an array"),
        ("kafka.nonsense == 1", "unknown field 'kafka.nonsense'"),
    ],
)
def test_unknown_fields_are_refused(expression: str, complaint: str):
    with pytest.raises(FilterError, match=complaint.replace("[", r"\[").replace("]", r"\]")):
        compile_filter(expression)


@pytest.mark.parametrize(
    ("expression", "complaint"),
    [
        ("__import__('os').system('true')", "unexpected"),
        ("api_key.bit_length() > 1", "unknown field 'api_key.bit_length'"),
        ("api_key ==", "cannot parse filter 'api_key ==': unexpected end of filter, expected a field or a value"),
        ("[x for x in number]", "cannot parse"),
        ("lambda: 1", "unexpected ':'"),
        ("", "empty filter"),
        ("5 == 5", "a comparison needs a field"),
        ("api_key == 1 )", r"unexpected '\)'"),
        ("api_key == 1 or or", "unexpected 'or'"),  # the word written, not its '||'
        ("(" * 4000 + "api_key == 1" + ")" * 4000, "nested too deeply"),
        ("api_key == 1 or " * 1000 + "api_key == 2", "at most 10000"),
    ],
)
def test_filters_are_parsed_never_executed(expression: str, complaint: str):
    with pytest.raises(FilterError, match=complaint):
        compile_filter(expression)


_PIECES = ["ErrorCode", "Topics[]", ".", "Name", "[0]", "api_key", "ip.addr", "kafka.topic_name",
           "==", "!=", "<", ">=", "contains", "matches", "in", "not", "and", "or", "&&", "||", "!",
           "(", ")", "{", "}", "..", ",", "-", "1", "0x10", "2.5", '"orders"', "'x'", "10.0.0.0/8",
           "true", "expert", "lag", " "]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=12).map(" ".join) | st.text(max_size=40))
def test_any_text_either_compiles_or_is_refused_with_a_reason(captures, expression: str):
    """Whatever is typed, the result is a working filter or a FilterError: never another
    exception, at compile time or on real messages."""
    try:
        keep = compile_filter(expression)
    except FilterError as exc:
        assert str(exc)
        return
    for message in captures["quorum_story"][:12]:
        assert keep(message) in (True, False)
