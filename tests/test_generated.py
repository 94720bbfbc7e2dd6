"""The generated decoders agree with the interpreter, value for value, on every message.

The interpreter is the reference. The fast path must either refuse a message
(the interpreter then decodes it) or give exactly the values the interpreter's
tree holds, and only for messages whose tree carries no note. Checked on every
message of the shipped, third-party and fuzz-regression captures, on random
messages of every shipped definition that kio (an independent codec) encodes,
and on those messages with bytes changed or cut.
"""

from __future__ import annotations

import importlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.static.primitive import Records

from kdissect.apis import request_header_version, response_header_version
from kdissect.decode.dissect import dissect_request, dissect_response, message_body
from kdissect.decode.generated import Unusual, struct_decoder, uvarint
from kdissect.decode.interpreter import decode_struct
from kdissect.decode.schema import compile_message, load_definitions, message_plan, parse_definition
from kdissect.decode.schema.plan import Kind
from kdissect.decode.tree import Node
from kdissect.decode.values import fast_body, tree_values
from kdissect.pair.message import Message
from kdissect.pipeline import read_messages
from tests.test_differential_kio import encode, framed

FUZZ_REGRESSIONS = Path(__file__).parent / "fuzz_regressions"
# kio has no strategy for record data: an empty records field (batches are checked against
# kafka-python's builders in test_records; random bytes would be malformed batches).
st.register_type_strategy(Records, st.just(b""))
QUICK = settings(max_examples=15, derandomize=True, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _kind(message: Message) -> str:
    return "request" if message.is_request else "response"


def _interpreted(data: bytes, kind: str, api_key: int, version: int) -> tuple[Node, Any]:
    tree = dissect_request(data) if kind == "request" else dissect_response(data, api_key, version)
    plan = message_plan(api_key, version, kind)
    body = message_body(tree)
    return tree, None if plan is None or body is None else tree_values(body, plan.body)


def _check_agreement(data: bytes, kind: str, api_key: int, version: int) -> bool:
    """Assert the fast path agrees with the interpreter; True when it took the message."""
    fast = fast_body(data, kind, api_key, version)
    if fast is None:
        return False
    tree, reference = _interpreted(data, kind, api_key, version)
    assert fast == reference
    assert [str(n) for n in tree.all_notes()] == []
    return True


def _decodable(paths: list[Path]) -> Iterator[tuple[str, Message]]:
    for path in paths:
        for message in read_messages(path):
            if message.api_key is not None and message.api_version is not None:
                yield path.name, message


def _agree_on_captures(paths: list[Path]) -> tuple[int, int]:
    taken = total = 0
    for name, message in _decodable(paths):
        if message_plan(message.api_key or 0, message.api_version or 0, _kind(message)) is None:
            continue
        if not carries_tagged_fields(message.frame.data, _kind(message), message.api_key or 0,
                                     message.api_version or 0):
            total += 1  # an ordinary body: the fast path should take it
        try:
            taken += _check_agreement(message.frame.data, _kind(message), message.api_key or 0,
                                      message.api_version or 0)
        except AssertionError as problem:
            raise AssertionError(f"{name} message {message.number}: {problem}") from None
    return taken, total


def test_fast_path_agrees_with_the_interpreter_on_every_shipped_capture(shipped_captures: Path) -> None:
    taken, total = _agree_on_captures(sorted(shipped_captures.glob("*.pcap")))
    assert total > 50 and taken >= total - 2  # nearly every real body takes the fast path


def test_fast_path_agrees_with_the_interpreter_on_every_third_party_capture(public_captures: Path) -> None:
    _agree_on_captures(sorted(p for p in public_captures.iterdir() if p.suffix in (".pcap", ".pcapng")))


def test_fast_path_agrees_with_the_interpreter_on_every_fuzz_regression() -> None:
    _agree_on_captures(sorted(FUZZ_REGRESSIONS.glob("*.pcap")))


# -- random messages of every shipped definition, encoded by kio ---------------------------


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _kio_cases() -> list[tuple[int, int, str]]:
    cases = []
    for spec in load_definitions():
        if spec.api_key is None:
            continue
        stem = _snake(spec.name.removesuffix("Request").removesuffix("Response"))
        high = spec.valid_versions.high
        for version in range(spec.valid_versions.low, (99 if high is None else high) + 1):
            if spec.kind == "request" and request_header_version(spec.api_key, version) == 0:
                continue  # ControlledShutdown v0's header v0: kio has no such header
            try:
                importlib.import_module(f"kio.schema.{stem}.v{version}.{spec.kind}")
            except ImportError:
                continue
            cases.append((spec.api_key, version, spec.kind))
    return cases


def kio_entity_type(api_key: int, version: int, kind: str) -> Any:
    """kio's class of an API's request or response body at `version`."""
    spec = next(s for s in load_definitions() if s.api_key == api_key and s.kind == kind)
    stem = _snake(spec.name.removesuffix("Request").removesuffix("Response"))
    module = importlib.import_module(f"kio.schema.{stem}.v{version}.{kind}")
    return getattr(module, spec.name)


def newest_kio_versions() -> list[tuple[int, int]]:
    """(API key, version): the newest version of each API whose request and response kio has."""
    both = {(key, version) for key, version, kind in _CASES if kind == "request"} & \
        {(key, version) for key, version, kind in _CASES if kind == "response"}
    return sorted({key: max(v for k, v in both if k == key) for key, _ in both}.items())


def _kio_frame(api_key: int, version: int, kind: str, data: st.DataObject) -> bytes:
    entity_type = kio_entity_type(api_key, version, kind)
    header = data.draw(_header_of(api_key, version, kind))
    entity = data.draw(st.from_type(entity_type))
    return framed(encode(type(header), header), encode(entity_type, entity))


def _header_of(api_key: int, version: int, kind: str) -> st.SearchStrategy[Any]:
    """kio's header of the version this API version uses (flexible or not; ApiVersions
    answers always with response header v0)."""
    if kind == "response":
        which = response_header_version(api_key, version)
        module = importlib.import_module(f"kio.schema.response_header.v{which}.header")
        return st.builds(module.ResponseHeader, correlation_id=st.integers(-(2**31), 2**31 - 1))
    which = request_header_version(api_key, version)
    module = importlib.import_module(f"kio.schema.request_header.v{which}.header")
    fields = {"request_api_key": st.just(api_key), "request_api_version": st.just(version),
              "correlation_id": st.integers(-(2**31), 2**31 - 1)}
    if which >= 1:
        fields["client_id"] = st.none() | st.text(max_size=30)
    return st.builds(module.RequestHeader, **fields)


FOUNDING_APIS = (55, 61, 75)


def _newest_and_founding(cases: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Every version of the founding APIs, and the newest version of every other API (the
    interpreter itself is checked against kio on more versions in test_definitions_kio)."""
    newest = {(key, kind): max(v for k, v, d in cases if (k, d) == (key, kind)) for key, _, kind in cases}
    return [(key, version, kind) for key, version, kind in cases
            if key in FOUNDING_APIS or version == newest[(key, kind)]]


# The founding APIs on every version kio has; KDISSECT_ALL_VERSIONS=1 adds the newest version
# of every other API (every version with =2). Real bodies of every API are checked on the
# captures below.
_CASES = _kio_cases()
KIO_CASES = {"1": _newest_and_founding(_CASES), "2": _CASES}.get(
    os.environ.get("KDISSECT_ALL_VERSIONS", ""), [case for case in _CASES if case[0] in FOUNDING_APIS])


@pytest.mark.parametrize(("api_key", "version", "kind"), KIO_CASES)
@QUICK
@given(data=st.data())
def test_fast_path_takes_every_kio_message_and_agrees(api_key: int, version: int, kind: str,
                                                      data: st.DataObject) -> None:
    frame = _kio_frame(api_key, version, kind, data)
    assert _check_agreement(frame, kind, api_key, version) or carries_tagged_fields(frame, kind,
                                                                                   api_key, version)


def carries_tagged_fields(frame: bytes, kind: str, api_key: int, version: int) -> bool:
    """Whether the message is one the fast path leaves to the interpreter by design: it holds
    tagged fields (kio writes those whose value differs from their default), or its plan has a
    field kind the generator does not handle (record batches)."""
    plan = message_plan(api_key, version, kind)
    if plan is not None and _has_records(plan.body):
        return True
    tree = dissect_request(frame) if kind == "request" else dissect_response(frame, api_key, version)
    return any(node.name == "tagged_fields" and node.value for node in tree.nodes())


def _has_records(plan: Any) -> bool:
    for field in plan.fields:
        if field.kind is Kind.RECORDS:
            return True
        for inner in (field.struct, field.element.struct if field.element is not None else None):
            if inner is not None and _has_records(inner):
                return True
    return False


@pytest.mark.parametrize(("api_key", "version", "kind"), KIO_CASES)
@QUICK
@given(data=st.data())
def test_fast_path_refuses_or_agrees_on_damaged_messages(api_key: int, version: int, kind: str,
                                                         data: st.DataObject) -> None:
    frame = bytearray(_kio_frame(api_key, version, kind, data))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(4, len(frame) - 1))
        frame[at] = data.draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF, frame[at] ^ 0x01]))
    cut = data.draw(st.integers(8, len(frame)))
    damaged = bytes(frame[:cut])
    _check_agreement(damaged, kind, api_key, version)
    resized = len(damaged).to_bytes(4, "big") + damaged[4:]  # a size prefix that agrees again
    _check_agreement(resized, kind, api_key, version)


# -- the small readers ------------------------------------------------------------------------


@pytest.mark.parametrize(("wire", "value"), [(b"\x00", 0), (b"\x7f", 127), (b"\x80\x01", 128),
                                             (b"\xff\xff\xff\xff\x0f", 0xFFFFFFFF)])
def test_uvarint_reads_minimal_encodings(wire: bytes, value: int) -> None:
    assert uvarint(wire, 0) == (value, len(wire))


@pytest.mark.parametrize("wire", [b"\x80\x00", b"\xff\x80\x00", b"\xff\xff\xff\xff\x1f",
                                  b"\x80\x80\x80\x80\x80\x01"])
def test_uvarint_refuses_what_the_interpreter_must_explain(wire: bytes) -> None:
    with pytest.raises(Unusual):
        uvarint(wire, 0)


def test_every_shipped_plan_compiles_to_a_generated_decoder() -> None:
    for api_key, version, kind in KIO_CASES:
        plan = message_plan(api_key, version, kind)
        assert plan is not None and struct_decoder(plan.body) is not None


def _nested_definition(depth: int) -> str:
    field: dict[str, Any] = {"name": "Leaf", "type": "int32", "versions": "0+"}
    for level in range(depth, 0, -1):
        field = {"name": f"Level{level}", "type": f"[]Level{level}", "versions": "0+", "fields": [field]}
    definition = {"apiKey": 1000, "type": "response", "name": "DeepResponse", "validVersions": "0",
                  "flexibleVersions": "0+", "fields": [field]}
    return json.dumps(definition)


def test_structs_nested_deeper_than_python_blocks_allow_still_decode_fast() -> None:
    depth = 12
    plan = compile_message(parse_definition(_nested_definition(depth), "deep.json"), 0)
    wire = b"\x02" * depth + b"\x00\x00\x00\x07" + b"\x00" * (depth + 1)  # one element each, tags empty
    decoder = struct_decoder(plan.body)
    assert decoder is not None
    values, end = decoder(wire, 0, len(wire))
    node = Node(plan.name, "struct")
    assert decode_struct(wire, node, len(wire), plan.body) and end == len(wire)
    assert values == tree_values(node, plan.body)
    leaf = values
    for level in range(1, depth + 1):
        leaf = leaf[f"Level{level}"][0]
    assert leaf == {"Leaf": 7}


def test_cycle_collection_is_paused_inside_a_decode_loop_and_only_there() -> None:
    import gc

    from kdissect.decode.values import cycle_collection_paused

    assert gc.isenabled()
    with pytest.raises(ZeroDivisionError), cycle_collection_paused():
        assert not gc.isenabled()
        _ = 1 / 0
    assert gc.isenabled()
    gc.disable()
    try:
        with cycle_collection_paused():
            pass
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()


def _assign_replicas_to_dirs_v0() -> bytes:
    """A real AssignReplicasToDirs v0 request, encoded by kio."""
    from kio.schema.assign_replicas_to_dirs.v0 import request
    from kio.schema.request_header.v2.header import RequestHeader

    header = RequestHeader(request_api_key=73, request_api_version=0, correlation_id=7, client_id=None)
    partitions = (request.PartitionData(partition_index=3),)
    body = request.AssignReplicasToDirsRequest(broker_id=1, broker_epoch=5, directories=(
        request.DirectoryData(id_=None, topics=(request.TopicData(topic_id=None, partitions=partitions),)),))
    return framed(encode(RequestHeader, header), encode(type(body), body))


@pytest.mark.parametrize("at", [4, 5, 6, 7])  # the API key's and the version's bytes
def test_a_request_whose_header_names_another_api_or_version_is_the_interpreters(at: int) -> None:
    frame = _assign_replicas_to_dirs_v0()
    assert _check_agreement(frame, "request", 73, 0)
    damaged = bytearray(frame)
    damaged[at] ^= 0x01
    assert fast_body(bytes(damaged), "request", 73, 0) is None
    _check_agreement(bytes(damaged), "request", 73, 0)
