"""The HTML report: one self-contained file, strings from the wire escaped everywhere,
the data the page's script reads complete and exact. The browser test is beside it
(`test_report_browser.py`)."""

from __future__ import annotations

import base64
import html
import json
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import kdissect
from kdissect.present import report as report_module
from kdissect.present.findings import find
from kdissect.present.report import build_report, script_json
from tests.craft import Conversation, compact, ethernet, records, uvarint, write_pcap
from tools.kio_codec import encode_response, read_request

CAPTURES = Path(__file__).resolve().parents[1] / "captures"
HOSTILE_CLIENT = '<script>window.kdPwned="client"</script>"\'</style>&amp;'
HOSTILE_TOPIC = '</style><script>window.kdPwned="topic"</script>"<img src=x onerror=kdPwned=1>'
HOSTILE_MESSAGE = '</script><script>window.kdPwned="message"</script>'


def describe_producers_request(correlation_id: int, client_id: str, topic: str) -> bytes:
    """DescribeProducers v0 (request header v2), by hand: one topic, partition 0."""
    client = client_id.encode()
    header = struct.pack(">hhih", 61, 0, correlation_id, len(client)) + client + b"\x00"
    body = uvarint(2) + compact(topic) + uvarint(2) + struct.pack(">i", 0) + b"\x00" + b"\x00"
    message = header + body
    return struct.pack(">i", len(message)) + message


def hostile_capture(path: Path, exchanges: int = 3) -> Path:
    """A client whose id, and a topic whose name, carry markup; answers encoded by kio carry
    error NOT_LEADER_OR_FOLLOWER with a hostile error message (an error burst finding)."""
    talk = Conversation.between(("10.0.0.2", 40100), ("10.0.0.1", 9092))
    talk.handshake()
    for correlation_id in range(1, exchanges + 1):
        frame = describe_producers_request(correlation_id, HOSTILE_CLIENT, HOSTILE_TOPIC)
        request = read_request(frame[4:])  # kio reads what was built by hand
        assert request.client_id == HOSTILE_CLIENT
        answer, _ = encode_response(request, {"throttle_time": 0, "topics": [
            {"name": HOSTILE_TOPIC, "partitions": [
                {"partition_index": 0, "error_code": 6, "error_message": HOSTILE_MESSAGE,
                 "active_producers": []}]}]})
        talk.send(True, frame)
        talk.send(False, answer)
    talk.close()
    return write_pcap(path, records(talk.packets, wrap=ethernet))


@pytest.fixture(scope="module")
def incident_page() -> tuple[kdissect.present.analysis.Capture, str]:
    capture = kdissect.read_pcap(CAPTURES / "incident.pcap")
    return capture, build_report(capture)


def page_json(page: str, element: str) -> str:
    match = re.search(f"<script type='application/json' id='{element}'>(.*?)</script>", page, re.S)
    assert match is not None
    return match.group(1)


def test_the_page_needs_nothing_but_itself(incident_page):
    _, page = incident_page
    assert not re.search(r"""(src|href)\s*=\s*['"]?(https?:|//)""", page)
    assert "<link" not in page and "@import" not in page and "url(" not in page
    policy = re.search(r"Content-Security-Policy' content=\"([^\"]+)\"", page).group(1)
    assert "default-src 'none'" in policy and "connect-src 'none'" in policy
    assert "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0]
    assert page.count("<script>") == 1  # the page's own script, allowed by its hash


def test_the_page_data_holds_every_message_and_exact_bytes(incident_page):
    capture, page = incident_page
    data = json.loads(page_json(page, "kd-data"))
    assert data["columns"]["n"] == [m.number for m in capture.message_list]
    lines = page_json(page, "kd-details").split("\n")
    assert len(lines) == len(capture)
    for message, line in zip(capture.message_list, lines, strict=True):
        encoded, tree = json.loads(line)
        assert base64.b64decode(encoded) == message.frame.data
        root = message.tree()
        assert (tree[3], tree[4]) == (root.offset, root.size)
        assert data["strings"][tree[0]] == root.name


def test_findings_are_ranked_and_link_to_their_messages(incident_page):
    capture, page = incident_page
    found = find(capture)
    section = page.split("<section id='findings'")[1].split("</section>")[0]
    ids = re.findall(r"<td><code>([a-z_.]+)</code></td>", section)
    assert ids == [f.id for f in found]
    first_links = re.findall(r"href='#m(\d+)'", section.split("</tr>")[1])
    assert [int(n) for n in first_links] == list(found[0].messages[:12])


def test_the_charts_are_inline_svg(incident_page):
    _, page = incident_page
    titles = re.findall(r"<svg class=\"kd-chart\".*?<title>(.*?)</title>", page)
    assert len(titles) == 5
    assert any(t.startswith("Quorum: voter lag") for t in titles)
    assert any(t.startswith("Open transactions") for t in titles)


def test_strings_from_the_wire_are_escaped_everywhere(tmp_path):
    capture = kdissect.read_pcap(hostile_capture(tmp_path / "hostile.pcap"))
    page = build_report(capture)
    for hostile in (HOSTILE_CLIENT, HOSTILE_TOPIC, HOSTILE_MESSAGE):
        assert hostile not in page
    assert "kdPwned" in page  # the strings are there, as text
    assert page.count("<script") == 3 and page.count("</script>") == 3
    assert page.count("<style>") == 1 and page.count("</style>") == 1
    assert html.escape(HOSTILE_TOPIC) in page  # in the findings table, as text
    data = json.loads(page_json(page, "kd-data"))
    assert HOSTILE_CLIENT in data["strings"]


def test_script_json_cannot_end_its_element():
    text = script_json({"a": "</script><!-- & -->"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"a": "</script><!-- & -->"}


@pytest.mark.parametrize("value", [
    ["AAEC", [0, 1, "</script>", 4, 2, 3, [[5, 6, "x & y", 0, 1, 3]]]],
    ["", [0, 1, "caf\u00e9 \u2603 \U0001f600 \U0010ffff \uffff", 0, 1, 2]],  # escaped as json escapes them
    ["", [0, 1, "del \x7f, controls \x00\x01\x1f\n\t\b\f\r \\ \" /", 0, 1, 2]],
    ["", [0, 1, "lone \ud800 surrogate", 0, 1, 2]],  # orjson refuses it
    ["", [0, 1, "x", 2**70, 1, 2]],  # and an int beyond 64 bits
])
def test_a_messages_details_are_the_json_the_standard_library_writes(value):
    """A message's details go into the page through orjson where it writes ASCII; the page is
    the same as with `json.dumps(..., ensure_ascii=True)` whatever the strings."""
    expected = json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    assert report_module._ascii_json(value) == expected


def test_random_strings_in_details_are_the_json_the_standard_library_writes():
    import random

    chance = random.Random(7)
    pools = [(0, 0x80), (0x80, 0x800), (0x800, 0xD800), (0xE000, 0x10000), (0x10000, 0x110000)]
    for _ in range(300):
        text = "".join(chr(chance.randrange(*chance.choice(pools))) for _ in range(chance.randrange(12)))
        value = ["", [0, 1, text, 0, len(text), 2, [[3, 4, text[::-1], 1, 2, 5]]]]
        assert report_module._ascii_json(value) == json.dumps(value, ensure_ascii=True, separators=(",", ":"))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kdissect", *args], capture_output=True,
                          text=True, timeout=300)


def test_report_command_writes_the_page(tmp_path):
    out = tmp_path / "report.html"
    done = run("report", str(CAPTURES / "quorum_story.pcap"), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_text().startswith("<!DOCTYPE html>") and "wrote" in done.stderr
    assert run("report", str(tmp_path / "missing.pcap"), "-o", str(out)).returncode == 2
    assert run("report", str(CAPTURES / "quorum_story.pcap")).returncode == 2  # no -o
    unwritable = run("report", str(CAPTURES / "quorum_story.pcap"), "-o", str(tmp_path))
    assert unwritable.returncode == 2 and "kdissect:" in unwritable.stderr


def test_report_of_several_files_reads_them_as_one_capture(tmp_path):
    out = tmp_path / "both.html"
    files = [str(CAPTURES / "incident.pcap"), str(CAPTURES / "quorum_story.pcap")]
    done = run("report", *files, "-o", str(out), "-j", "2")
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert "<title>kdissect report: incident.pcap, quorum_story.pcap</title>" in page
    together = kdissect.read_pcap(files, jobs=1)
    assert json.loads(page_json(page, "kd-data"))["columns"]["n"] == [
        m.number for m in together.message_list]


def test_every_third_party_capture_makes_a_page_whose_data_parses(public_captures):
    for path in sorted(public_captures.glob("*.pcap*")):
        capture = kdissect.read_pcap(path)
        page = build_report(capture)
        data = json.loads(page_json(page, "kd-data"))
        assert data["columns"]["n"] == [m.number for m in capture.message_list], path.name
        for line in filter(None, page_json(page, "kd-details").split("\n")):
            encoded, _ = json.loads(line)
            assert base64.b64decode(encoded)


def test_chart_labels_are_escaped_and_large_series_thinned():
    from kdissect.present.svgplot import MAX_POINTS, Chart, Marker, Series, render, thin

    points = [(i / 10, float(i % 97)) for i in range(50_000)]
    svg = render(Chart(HOSTILE_TOPIC, "y", [Series(HOSTILE_CLIENT, points)],
                       [Marker(3.0, HOSTILE_MESSAGE)]))
    assert HOSTILE_TOPIC not in svg and HOSTILE_CLIENT[:28] not in svg
    assert HOSTILE_MESSAGE not in svg and html.escape(HOSTILE_MESSAGE) in svg
    kept = thin(points, 600)
    assert len(kept) <= 2 * 600 < MAX_POINTS
    assert max(y for _, y in kept) == 96.0 and min(y for _, y in kept) == 0.0


def test_the_detail_budget_bounds_what_the_page_embeds(tmp_path):
    """--detail-mb bounds the bytes of the page that messages' trees and bytes take (a tree
    in JSON is several times its message's bytes; the names and descriptions of its fields
    go once, in the page's string table): the earliest messages first, and from the first
    that does not fit, none."""
    pages = {}
    for megabytes in ("0", "0.01"):
        out = tmp_path / f"page-{megabytes}.html"
        done = run("report", str(CAPTURES / "incident.pcap"), "-o", str(out), "--detail-mb", megabytes)
        assert done.returncode == 0, done.stderr
        pages[megabytes] = out.read_text()
    assert page_json(pages["0"], "kd-details").strip("\n") == ""
    lines = page_json(pages["0.01"], "kd-details").split("\n")  # a line per message, empty if left out
    assert len(lines) == 229 and sum(len(line.encode()) for line in lines) <= 0.01 * 2**20
    first_left_out = lines.index("")
    assert 0 < first_left_out < len(lines) and all(lines[:first_left_out]) and not any(lines[first_left_out:])
    frames = [base64.b64decode(json.loads(line)[0]) for line in lines[:first_left_out]]
    capture = kdissect.read_pcap(CAPTURES / "incident.pcap")
    assert frames == [capture.message(number).frame.data for number in range(1, first_left_out + 1)]


def test_the_detail_budget_is_a_number_of_megabytes(tmp_path):
    out = tmp_path / "page.html"
    for wrong in ("nan", "-1", "lots"):
        done = run("report", str(CAPTURES / "incident.pcap"), "-o", str(out), "--detail-mb", wrong)
        assert done.returncode == 2 and "--detail-mb" in done.stderr and "Traceback" not in done.stderr
        assert not out.exists()
    done = run("report", str(CAPTURES / "incident.pcap"), "-o", str(out), "--detail-mb", "inf")  # no bound
    assert done.returncode == 0, done.stderr
    lines = page_json(out.read_text(), "kd-details").split("\n")
    assert all(lines) and len(lines) == len(kdissect.read_pcap(CAPTURES / "incident.pcap"))


def test_the_overview_counts_each_topics_records_as_stats_does():
    capture = kdissect.read_pcap(CAPTURES / "tansu_records.pcap")
    page = build_report(capture)
    table = page[page.index("<h3>Topics</h3>"):].split("</table>")[0]
    cells = re.findall(r"<td>(.*?)</td>", table)
    stats = json.loads(subprocess.run([sys.executable, "-m", "kdissect", "--stats", "-T", "json",
                                       str(CAPTURES / "tansu_records.pcap")], capture_output=True,
                                      text=True, timeout=120, check=True).stdout)
    [topic] = stats["topics"]
    flows = (topic["produced"], topic["fetched"])
    assert cells == [topic["topic_name"], *(str(f[k]) for f in flows for k in ("partitions", "records", "bytes", "errors"))]
    assert cells[2] == "33"  # the records kafka-python's producers sent (the capture's sidecar)
    assert "<h3>Topics</h3>" not in build_report(kdissect.read_pcap(CAPTURES / "quorum_story.pcap"))


def test_the_topics_come_from_the_values_the_findings_pass_reads(monkeypatch):
    """The Topics table counts from the values the findings' pass reads, as a pass of its own
    over the messages counts (`Topics.add_messages`), without decoding a body again."""
    from kdissect.present.topic_stats import Topics

    capture = kdissect.read_pcap(CAPTURES / "tansu_records.pcap")
    expected = Topics().add_messages(capture.message_list).resolved()
    assert expected
    handed: dict[int, bool] = {}
    add_message = Topics.add_message

    def seen(topics: Topics, message: object, body: object = None) -> None:
        handed[message.number] = body is not None  # type: ignore[attr-defined]
        add_message(topics, message, body)  # type: ignore[arg-type]

    made: list[Topics] = []
    monkeypatch.setattr(Topics, "add_message", seen)
    monkeypatch.setattr(report_module, "_topic_table", lambda topics: made.append(topics) or "")
    build_report(capture)
    [topics] = made
    assert topics.resolved() == expected
    produce_fetch = [m.number for m in capture.message_list if m.api_key in (0, 1)]
    assert produce_fetch and all(handed[number] for number in produce_fetch)
    assert len(handed) == len(capture)


def test_a_tree_laid_out_from_values_goes_into_the_page_as_the_tree_does():
    """The report puts a body the fast path took into the page from its rows: the same
    compact tree (and string table) as from the interpreter's tree, on every shipped,
    fuzz-found and third-party capture."""
    from kdissect.present.report import Strings, compact_rows, compact_tree
    from tests.every_message import count_passing, reading_captures

    def same(message) -> bool:
        rows = message.rows(records=True)
        if rows is None:
            return False
        by_rows, by_tree = Strings(), Strings()
        assert compact_rows(rows, by_rows) == compact_tree(message.tree(keep=False), by_tree)
        assert by_rows.table() == by_tree.table()
        return True

    assert count_passing(reading_captures(), same) > 400
