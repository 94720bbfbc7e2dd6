"""--stats' text: client ids quoted (the empty one visible), error names counted and wrapped."""

from __future__ import annotations

from kdissect.error_codes import error_name
from kdissect.ingest.framing import Direction
from kdissect.pair.message import message_from_frame
from kdissect.pair.pairing import pair_messages
from kdissect.present.stats import WRAP, ApiStats, Statistics
from tests.conftest import CAPTURES
from tests.test_pairing import frame, request_bytes, response_bytes


def test_the_empty_client_id_is_shown_quoted_apart_from_a_missing_one():
    frames = [
        frame(request_bytes(3, 1, 1, client_id=b""), Direction.REQUEST, 1, 1.0),
        frame(response_bytes(1), Direction.RESPONSE, 2, 1.25),
        frame(request_bytes(3, 1, 2, client_id=b"app"), Direction.REQUEST, 3, 2.0),
        frame(response_bytes(2), Direction.RESPONSE, 4, 2.5),
        frame(response_bytes(9), Direction.RESPONSE, 5, 3.0),  # its request is not in the capture
    ]
    statistics = Statistics()
    for message in pair_messages(message_from_frame(n, f) for n, f in enumerate(frames, 1)):
        statistics.add(message)
    text = statistics.render()
    clients = text.split("Latency by client id")[1].split("Connections")[0].splitlines()
    assert any(line.startswith('""  ') and "250.000" in line for line in clients)
    assert any(line.startswith('"app"  ') and "500.000" in line for line in clients)
    assert any(line.startswith("(none)  ") for line in clients)
    assert statistics.as_dict()["clients"][0]["client_id"] in ("", "app", None)


def test_many_error_names_are_counted_and_wrapped():
    statistics = Statistics()
    api = statistics.apis[("DescribeTopicPartitions", 0)] = ApiStats(requests=1, responses=1, decoded=True)
    for code in range(1, 60):
        api.errors[error_name(code)] += code
    lines = statistics.render().splitlines()
    section = lines[lines.index("Error codes") + 2 :]
    section = section[: section.index("")]
    assert len(section) > 5 and all(len(line) <= WRAP for line in section)
    assert section[0].startswith(f"DescribeTopicPartitions v0: {error_name(59)} x59, ")
    assert sum(line.count(" x") for line in section) == 59
    api_row = next(line for line in lines if line.startswith("DescribeTopicPartitions "))
    assert api_row.split()[-1] == str(sum(range(1, 60)))


def test_files_read_each_on_its_own_keep_their_connections_apart(capsys) -> None:  # type: ignore[no-untyped-def]
    """--separate: each file's streams start at 0 again; its connections stay its own, each
    with its file, as each file's statistics alone have them, with one job or two."""
    import json

    from kdissect.cli import main
    from tests.conftest import CAPTURES

    files = [str(CAPTURES / "incident.pcap"), str(CAPTURES / "quorum_story.pcap")]
    alone = []
    for path in files:
        assert main(["--stats", "-T", "json", "-j", "1", path]) == 0
        alone.append(json.loads(capsys.readouterr().out)["connections"])
    for jobs in ("1", "2"):
        assert main(["--stats", "-T", "json", "--separate", "-j", jobs, *files]) == 0
        together = json.loads(capsys.readouterr().out)["connections"]
        assert [{k: v for k, v in c.items() if k != "file"} for c in together] == alone[0] + alone[1]
        assert [c["file"] for c in together] == [files[0]] * len(alone[0]) + [files[1]] * len(alone[1])


def test_top_alone_ranks_the_slowest_and_counts_nothing_else() -> None:
    """--top alone: the lines of the slowest answers as with every table counted, and no
    table counted (nothing else is shown)."""
    from kdissect.present.analysis import read_pcap

    messages = read_pcap(CAPTURES / "incident.pcap", jobs=1).message_list
    counted, ranked = Statistics(top=4, bodies=False), Statistics(top=4, bodies=False, counts=False)
    for message in messages:
        counted.add(message)
        ranked.add(message)
    assert ranked.render(full=False) == counted.render(full=False)
    assert "1503.525 ms" in ranked.render(full=False)
    assert counted.apis and not ranked.apis and not ranked.connections
