"""Where definitions come from: --schemas (folder or jar), an installed kafka-python, kdissect's own.

Precedence is per (API, version); definitions are read lazily, only when a body
needs them; every file of every source loads; kdissect's own files written for
versions Kafka 4 dropped agree with Kafka's own files (as kafka-python ships
them) on every version both declare.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import missing

from kdissect.cli import main
from kdissect.decode.dissect import dissect_request
from kdissect.decode.schema import (
    DefinitionSource,
    SchemaError,
    compile_message,
    configure_definitions,
    default_sources,
    definition_problems,
    load_definitions,
    project_source,
    resolve,
    set_sources,
    shipped_api_keys,
    strip_comments,
)
from kdissect.decode.schema.loader import _source_spec
from kdissect.decode.schema.sources import kafka_python_source
from kdissect.notes import Severity
from kdissect.pipeline import read_messages

OWN = Path(project_source().folder)  # type: ignore[arg-type]
# Produce v7, topic "t", partition 0, 3 bytes of records: a classic (non-flexible) request.
PRODUCE_V7 = bytes.fromhex(
    "0000 0007 00000009 0004 6b646973"  # api key, version, correlation id, client id "kdis"
    "ffff 0001 00000064"  # TransactionalId null, Acks 1, TimeoutMs 100
    "00000001 0001 74 00000001 00000000 00000003 616263")
PRODUCE_V7 = len(PRODUCE_V7).to_bytes(4, "big") + PRODUCE_V7


@pytest.fixture(autouse=True)
def default_definitions() -> Iterator[None]:
    set_sources(None)
    yield
    set_sources(None)


def installed() -> DefinitionSource:
    source = kafka_python_source()
    if source is None:
        missing("kafka-python is not installed")
    return source


def operator_folder(tmp_path: Path, valid: str, about: str) -> Path:
    """A folder holding one ProduceRequest definition, declaring only `valid` versions."""
    raw = json.loads(strip_comments((OWN / "ProduceRequest.json").read_text()))
    raw["validVersions"] = valid
    raw["fields"][1]["about"] = about  # Acks
    folder = tmp_path / "message"
    folder.mkdir()
    (folder / "ProduceRequest.json").write_text(json.dumps(raw))
    return folder


def test_operator_definitions_win_for_the_versions_they_declare_and_the_rest_fall_through(tmp_path: Path) -> None:
    configure_definitions(operator_folder(tmp_path, "5-9", "acks, as the operator's broker defines it"))
    assert resolve(0, 7, "request").source == "schemas:message"  # type: ignore[union-attr]
    assert resolve(0, 2, "request").source == "kdissect"  # type: ignore[union-attr]
    assert resolve(0, 12, "request").source in ("kafka-python", "kdissect")  # type: ignore[union-attr]
    tree = dissect_request(PRODUCE_V7)
    assert tree.children[2]["Acks"].about == "acks, as the operator's broker defines it"
    # the crafted records field is a 3-byte stub: a partial batch (a chat note), nothing worse
    assert [str(n) for n in tree.all_notes() if n.severity > Severity.CHAT] == []


def test_a_kafka_clients_jar_is_read_in_place(tmp_path: Path) -> None:
    jar = tmp_path / "libs" / "kafka-clients-9.9.0.jar"
    jar.parent.mkdir()
    with zipfile.ZipFile(jar, "w") as archive:
        archive.writestr("org/apache/kafka/Something.class", b"\xca\xfe")
        for path in OWN.glob("*.json"):
            archive.writestr(f"common/message/{path.name}", path.read_text())
    for given in (jar, tmp_path):  # the jar itself, or an installation folder holding libs/
        configure_definitions(given, installed=False)
        assert resolve(52, 2, "response").source == "schemas:kafka-clients-9.9.0.jar"  # type: ignore[union-attr]
        assert dissect_request(PRODUCE_V7).children[2]["TopicData"].value == 1
    assert not any(tmp_path.rglob("*.json"))  # nothing extracted


@pytest.mark.parametrize("bad", ["nowhere", "empty", "not-a-jar.jar"])
def test_a_schemas_path_without_definitions_is_a_usage_error(tmp_path: Path, bad: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "not-a-jar.jar").write_bytes(b"PK but not really")
    with pytest.raises(SchemaError):
        configure_definitions(tmp_path / bad)
    with pytest.raises(SystemExit) as exit_info:
        main(["--schemas", str(tmp_path / bad), "--list-apis"])
    assert exit_info.value.code == 2
    assert "--schemas" in capsys.readouterr().err


def test_a_broken_operator_file_is_skipped_and_reported(tmp_path: Path) -> None:
    folder = operator_folder(tmp_path, "5-9", "x")
    (folder / "VoteRequest.json").write_text('{"apiKey": 52, "type": "request", "name": "VoteRequest"')
    configure_definitions(folder)
    assert resolve(52, 1, "request").source == "kdissect"  # type: ignore[union-attr]
    assert list(definition_problems()) == ["schemas:message/VoteRequest.json"]


def test_versions_missing_everywhere_stay_raw_with_a_pointer_to_schemas() -> None:
    set_sources((project_source(),))
    frame = bytes.fromhex("0000000c 004c 0000 00000001 0000 abcd")  # ShareGroupHeartbeat v0: none
    body = dissect_request(frame).children[2]
    assert (body.type, body.about) == ("bytes", "no definition")
    assert "--schemas PATH" in body.notes[0].message


def test_the_summary_path_parses_no_definition(shipped_captures: Path) -> None:
    set_sources(None)
    messages = list(read_messages(shipped_captures / "tansu_topic_partitions.pcap"))
    assert messages and _source_spec.cache_info().currsize == 0
    produce = next(m for m in messages if m.api_key == 0)
    produce.tree()
    assert _source_spec.cache_info().currsize <= 3  # the header, and Produce from each source having it


def test_shipped_api_keys_known_by_file_name_are_the_ones_the_files_define() -> None:
    parsed = {spec.api_key for spec in load_definitions()} - {None}
    assert shipped_api_keys() == parsed


def info_lines(capture: Path, capsys: pytest.CaptureFixture[str], *options: str) -> list[str]:
    assert main(["-i", "--jobs", "1", *options, str(capture)]) == 0
    return capsys.readouterr().out.splitlines()


def test_info_lines_read_only_the_definitions_of_the_apis_met(tmp_path: Path, shipped_captures: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Broken files of APIs a capture lacks are never read; one of an API met is skipped and
    reported when that API is first met, its versions falling through to the other sources."""
    folder = operator_folder(tmp_path, "5-9", "x")
    (folder / "FetchRequest.json").write_text("{ not json")
    (folder / "VoteResponse.json").write_text("{ not json")
    capture = shipped_captures / "quorum_story.pcap"  # ApiVersions, Metadata and DescribeQuorum
    expected = info_lines(capture, capsys)
    set_sources(None)
    assert info_lines(capture, capsys, "--schemas", str(folder)) == expected
    assert definition_problems() == {}
    (folder / "DescribeQuorumResponse.json").write_text("{ not json")
    assert info_lines(capture, capsys, "--schemas", str(folder)) == expected
    assert list(definition_problems()) == ["schemas:message/DescribeQuorumResponse.json"]


def test_info_lines_take_the_operators_definition_of_an_api_met_late(tmp_path: Path, shipped_captures: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """DescribeQuorum comes after ApiVersions and Metadata: its operator's definition, without
    the topic-name entity type, is read then and the requests no longer name their topic."""
    raw = json.loads(strip_comments((OWN / "DescribeQuorumRequest.json").read_text()))
    topics = next(field for field in raw["fields"] if field["name"] == "Topics")
    for field in topics["fields"]:
        field.pop("entityType", None)
    folder = tmp_path / "message"
    folder.mkdir()
    (folder / "DescribeQuorumRequest.json").write_text(json.dumps(raw))
    capture = shipped_captures / "quorum_story.pcap"
    before = [line for line in info_lines(capture, capsys) if "DescribeQuorum v2 Request" in line]
    after = [line for line in info_lines(capture, capsys, "--schemas", str(folder))
             if "DescribeQuorum v2 Request" in line]
    assert before and all("topics=__cluster_metadata" in line for line in before)
    assert len(after) == len(before) and not any("topics=" in line for line in after)


def test_finding_kafka_python_does_not_import_it() -> None:
    code = ("import sys; from kdissect.decode.schema import active_sources; "
            "print([s.label for s in active_sources()], 'kafka' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    installed()
    assert out.strip() == "['kafka-python', 'kdissect'] False"


def test_every_file_of_every_source_loads() -> None:
    sources = [*default_sources(), installed()]
    for source in sources:
        names = source.names()
        assert len(load_definitions(source)) == len(names), source.label
    assert definition_problems() == {}


def snake(name: str) -> str:  # kdissect's headers name fields as the tree shows them
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def plan_shape(spec: Any, version: int) -> list[tuple[Any, ...]]:
    shape: list[tuple[Any, ...]] = []

    def walk(struct: Any, depth: int) -> None:
        fields = [*struct.fields, *(struct.tagged[t] for t in sorted(struct.tagged))]
        shape.append((depth, struct.flexible))
        for field in fields:
            shape.append((depth, snake(field.name), field.label, field.kind, field.compact, field.nullable, field.tag,
                          field.default if field.tag is not None else None))
            inner = field.struct or (field.element.struct if field.element is not None else None)
            if field.element is not None:
                shape.append((depth + 1, field.element.label))
            if inner is not None:
                walk(inner, depth + 1)

    walk(compile_message(spec, version).body, 0)
    return shape


def test_own_definitions_agree_with_kafkas_files_on_every_shared_version() -> None:
    third_party = installed()
    shared = sorted(set(OWN.glob("*.json")) & {OWN / f"{n}.json" for n in third_party.names()})
    assert {p.stem for p in shared} >= {"ProduceRequest", "FetchResponse", "ListOffsetsRequest"}
    for path in shared:
        own, theirs = _source_spec(project_source(), path.stem), _source_spec(third_party, path.stem)
        assert own is not None and theirs is not None
        for version in range(theirs.valid_versions.low, (theirs.valid_versions.high or 0) + 1):
            assert plan_shape(own, version) == plan_shape(theirs, version), f"{path.stem} v{version}"


def test_list_apis_prints_every_api_with_its_versions_and_source(capsys: pytest.CaptureFixture[str]) -> None:
    set_sources((project_source(),))
    assert main(["--list-apis"]) == 0
    out = capsys.readouterr().out
    rows = {int(m[1]): m[2] for m in re.finditer(r"^ *(\d+)  (\S.*)$", out, re.M)}
    assert len(rows) == 93
    assert re.search(r"Vote +0-2 +0-2 +kdissect", rows[52])
    assert re.search(r"Produce +0-13 +0-13 +kdissect", rows[0])
    set_sources(())
    assert main(["--list-apis"]) == 0
    assert "no definition (see --schemas)" in capsys.readouterr().out


def test_read_pcap_takes_the_operators_definitions(tmp_path: Path, shipped_captures: Path) -> None:
    from kdissect import read_pcap

    folder = operator_folder(tmp_path, "3-13", "acks, as the operator's broker defines it")
    capture = read_pcap(shipped_captures / "tansu_topic_partitions.pcap", schemas=folder)
    produce = next(m for m in capture.message_list if m.api_key == 0 and m.is_request)
    assert produce.tree().children[2]["Acks"].about == "acks, as the operator's broker defines it"


def test_a_damaged_jar_member_is_skipped_and_reported(tmp_path: Path) -> None:
    jar = tmp_path / "kafka-clients-9.9.0.jar"
    text = (OWN / "VoteRequest.json").read_text()
    with zipfile.ZipFile(jar, "w") as archive:  # stored, so a flipped byte only breaks the CRC
        archive.writestr("common/message/VoteRequest.json", text)
    data = bytearray(jar.read_bytes())
    data[data.index(b'"VoteRequest"') + 1] ^= 0x20
    jar.write_bytes(bytes(data))
    configure_definitions(jar, installed=False)
    assert resolve(52, 2, "request").source == "kdissect"  # type: ignore[union-attr]
    assert "CRC" in definition_problems()["schemas:kafka-clients-9.9.0.jar/VoteRequest.json"]


def test_an_operator_struct_containing_itself_is_skipped_not_raised(tmp_path: Path) -> None:
    raw = json.loads(strip_comments((OWN / "ProduceRequest.json").read_text()))
    raw["fields"][-1]["fields"][-1]["fields"].append({"name": "Again", "type": "[]TopicProduceData",
                                                     "versions": "0+"})
    folder = tmp_path / "message"
    folder.mkdir()
    (folder / "ProduceRequest.json").write_text(json.dumps(raw))
    configure_definitions(folder, installed=False)
    assert dissect_request(PRODUCE_V7).children[2]["TopicData"].value == 1  # kdissect's own file
    assert "contains itself" in definition_problems()["schemas:message/ProduceRequest.json"]


def test_flat_values_follow_a_change_of_definitions(tmp_path: Path) -> None:
    """The compiled decoders are dropped with the definitions they were built from: a decoder
    kept across the change would give the old names (a filter or table would then miss them)."""
    from kdissect.decode.values import fast_body

    # FindCoordinator v0: api key 10, correlation id 1, client id "kdis"; Key "g"
    frame = bytes.fromhex("000a 0000 00000001 0004 6b646973 0001 67")
    frame = len(frame).to_bytes(4, "big") + frame

    def names() -> set[str]:
        body = fast_body(frame, "request", 10, 0)
        assert body is not None
        return set(body)

    assert names() == {"Key"}
    raw = json.loads(strip_comments((OWN / "FindCoordinatorRequest.json").read_text()))
    assert raw["fields"][0]["name"] == "Key"
    raw["fields"][0]["name"] = "CoordinatorKey"
    folder = tmp_path / "message"
    folder.mkdir()
    (folder / "FindCoordinatorRequest.json").write_text(json.dumps(raw))
    configure_definitions(folder)
    assert names() == {"CoordinatorKey"}
    set_sources(None)
    assert names() == {"Key"}
