"""Every (API, version, direction) that both kio and kdissect's definitions cover decodes kio's messages exactly.

kio (Aiven's codec, generated from Apache Kafka's schemas) encodes random
messages drawn by hypothesis from its own types; the decoded tree, whichever
source its definition came from (an installed kafka-python's files or
kdissect's own; the cases kafka-python covers are run again with kdissect's own
files alone), must hold exactly kio's values, tagged fields included, tile
the frame, and carry no note. `records` fields are compared as raw bytes.
kio omits tagged fields left at their default; those must then be absent.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import importlib
import io
import os
import pkgutil
import re
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import kio.schema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_writer
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.static.primitive import Records

from kdissect.apis import APIS, request_header_version, response_header_version
from kdissect.decode.dissect import dissect_request, dissect_response
from kdissect.decode.schema import project_source, resolve, set_sources
from kdissect.decode.schema.sources import PROJECT, kafka_python_source
from kdissect.decode.tree import Node

FEW = settings(max_examples=int(os.environ.get("KDISSECT_EXAMPLES", "2")), derandomize=True, deadline=None,
               suppress_health_check=list(HealthCheck))
WIRE_ONLY = frozenset({"length", "presence", "tagged_fields"})
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
NOT_API_MODULES = frozenset({"request_header", "response_header"})


def kio_entities() -> dict[tuple[int, int, str], Any]:
    """Every kio message class by (api key, version, kind)."""
    found = {}
    for module in pkgutil.iter_modules(kio.schema.__path__):
        if not module.ispkg or module.name in NOT_API_MODULES:
            continue
        package = importlib.import_module(f"kio.schema.{module.name}")
        for sub in pkgutil.iter_modules(package.__path__):
            for kind in ("request", "response") if re.fullmatch(r"v\d+", sub.name) else ():
                entity = kio_entity(module.name, int(sub.name[1:]), kind)
                if entity is not None:
                    found[(int(entity.__api_key__), int(entity.__version__), kind)] = entity
    return found


def kio_entity(module: str, version: int, kind: str) -> Any:
    try:
        mod = importlib.import_module(f"kio.schema.{module}.v{version}.{kind}")
    except ImportError:
        return None
    for value in vars(mod).values():
        if (isinstance(value, type) and dataclasses.is_dataclass(value) and value.__module__ == mod.__name__
                and str(getattr(value, "__type__", "")).endswith(kind)):
            return value
    return None


def decodable(api_key: int, version: int, kind: str) -> bool:
    found = resolve(api_key, version, kind)
    return found is not None and found.version == version


def boundary_versions(cases: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Each API's oldest and newest version, and the versions on either side of flexible."""
    chosen = []
    for key, version, kind in cases:
        api = APIS.get(key)
        versions = [v for k, v, d in cases if (k, d) == (key, kind)]
        edges = {min(versions), max(versions)}
        if api is not None and api.first_flexible is not None:
            edges |= {api.first_flexible, api.first_flexible - 1}
        if version in edges:
            chosen.append((key, version, kind))
    return chosen


# kio has no strategy for record data: an empty records field (record batches are checked
# against kafka-python's builders in test_records; random bytes would be malformed batches).
st.register_type_strategy(Records, st.just(b""))
KIO = kio_entities()
# KDISSECT_ALL_VERSIONS=1 checks every version instead of the boundaries (about 600 cases).
ALL_CASES = sorted(case for case in KIO if decodable(*case))
CASES = ALL_CASES if os.environ.get("KDISSECT_ALL_VERSIONS") else boundary_versions(ALL_CASES)
# The newest version of what an installed kafka-python decodes, again with kdissect's own files alone
# (every version of those files is compared with kafka-python's in test_definition_sources).
set_sources((project_source(),))
OWN_CASES = [case for case in CASES if decodable(*case)]
set_sources(None)
OWN_CASES = [case for case in OWN_CASES if resolve(*case).source != PROJECT  # type: ignore[union-attr]
             and case[1] == max(v for k, v, d in OWN_CASES if (k, d) == (case[0], case[2]))]  # newest


def encode(entity_type: Any, entity: object) -> bytes:
    buffer = io.BytesIO()
    entity_writer(entity_type)(buffer, entity)
    return buffer.getvalue()


def frame_of(api_key: int, version: int, kind: str, correlation_id: int, entity: Any) -> bytes:
    if kind == "request":
        flexible = request_header_version(api_key, version) == 2
        header = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"kdis" + (b"\x00" if flexible else b"")
        assert flexible or encode(RequestHeaderV2, RequestHeaderV2(
            request_api_key=api_key, request_api_version=version, correlation_id=correlation_id,
            client_id="kdis"))[:-1] == header  # the classic header is the flexible one without its tags
    else:
        header = encode(ResponseHeaderV1, ResponseHeaderV1(correlation_id=correlation_id))
        if response_header_version(api_key, version) == 0:
            header = header[:-1]
    payload = header + encode(type(entity), entity)
    return struct.pack(">i", len(payload)) + payload


# -- the tree's values, keyed like kio's fields ----------------------------------------------


def plain(name: str) -> str:
    """A field name with case and underscores dropped: kio writes `KRaftX` as k_raft_x, `Id` as id_."""
    return name.replace("_", "").lower()


def tree_struct(node: Node) -> dict[str, Node]:
    """A struct node's fields by plain name, tagged ones included (their value nodes)."""
    fields = {plain(c.name): c for c in node.children if c.name not in WIRE_ONLY and not c.generated}
    tagged = node.child("tagged_fields")
    for entry in tagged.children if tagged is not None else ():
        if entry.name != "count":
            fields[plain(entry.name)] = entry.children[2]
    return fields


def kio_value(value: Any) -> Any:
    match value:
        case enum.Enum():
            return int(value.value)
        case datetime.timedelta():
            return round(value.total_seconds() * 1000)
        case datetime.datetime():
            return round((value - EPOCH).total_seconds() * 1000)
        case bool() | int() | str() | float() | bytes() | uuid.UUID() | None:
            return value
    raise TypeError(type(value))


def at_default(value: Any, spec: dataclasses.Field[Any]) -> bool:
    """A value kio leaves out of a tagged-field block: its default, explicit or implicit."""
    if spec.default is not dataclasses.MISSING:
        return bool(value == spec.default)
    return bool(value == get_tagged_field_default(spec))


def assert_same(node: Node, value: Any, path: str) -> None:
    if dataclasses.is_dataclass(value):
        fields = tree_struct(node)
        for spec in dataclasses.fields(value):
            got = fields.get(plain(spec.name)) or fields.get(plain(spec.name) + "ms")
            expected = getattr(value, spec.name)
            if got is None:  # only a tagged field left at its default may be absent
                assert "tag" in spec.metadata and at_default(expected, spec), f"{path}.{spec.name}"
                continue
            assert_same(got, expected, f"{path}.{spec.name}")
        assert len(fields) <= len(dataclasses.fields(value)), f"{path}: extra fields {sorted(fields)}"
    elif isinstance(value, tuple):
        items = [c for c in node.children if c.name != "length"]
        assert node.value == len(value) == len(items), path
        for index, (item, element) in enumerate(zip(items, value, strict=True)):
            assert_same(item, element, f"{path}[{index}]")
    elif value is None and node.type == "uuid":
        assert node.value == uuid.UUID(int=0), path  # kio writes a missing uuid as all zeros
    elif value is None and node.display == "null":
        pass
    elif value is None and isinstance(node.value, int):
        assert node.value == -1, path  # kio writes a missing timestamp as -1
    else:
        assert node.value == kio_value(value), path


def test_the_cases_cover_kdissects_own_and_installed_definitions() -> None:
    keys = {key for key, _, _ in CASES}
    assert {0, 1, 2, 52, 53, 54, 55, 56, 59, 61, 62, 63, 67, 68, 69, 75, 80, 81, 82} <= keys
    assert len(ALL_CASES) > 500
    assert len(OWN_CASES) > 80 or kafka_python_source() is None


@pytest.fixture
def own_definitions_only() -> Iterator[None]:
    set_sources((project_source(),))
    yield
    set_sources(None)


@pytest.mark.usefixtures("own_definitions_only")
@pytest.mark.parametrize(("api_key", "version", "kind"), OWN_CASES)
@FEW
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1))
def test_kio_messages_decode_with_kdissects_own_files_alone(api_key: int, version: int, kind: str, data: Any,
                                                           correlation_id: int) -> None:
    check_kio_message(api_key, version, kind, data, correlation_id)


@pytest.mark.parametrize(("api_key", "version", "kind"), CASES)
@FEW
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1))
def test_kio_messages_decode_to_kios_values(api_key: int, version: int, kind: str, data: Any,
                                            correlation_id: int) -> None:
    check_kio_message(api_key, version, kind, data, correlation_id)


def check_kio_message(api_key: int, version: int, kind: str, data: Any, correlation_id: int) -> None:
    entity_type = KIO[(api_key, version, kind)]
    entity = data.draw(st.from_type(entity_type))
    frame = frame_of(api_key, version, kind, correlation_id, entity)
    tree = dissect_request(frame) if kind == "request" else dissect_response(frame, api_key, version)
    assert [str(n) for n in tree.all_notes()] == []
    assert tree.tiling_errors() == []
    assert (tree.offset, tree.size) == (0, len(frame))
    assert tree.children[1]["correlation_id"].value == correlation_id
    assert_same(tree.children[2], entity, entity_type.__name__)
