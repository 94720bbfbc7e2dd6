"""`kdissect report capture.pcap -o report.html`: one self-contained page of what went wrong.

The page needs nothing but a browser: every script, style and chart is inline,
and a Content-Security-Policy forbids any other script and any network access.
It holds an overview (time span, brokers, clients, APIs with latency
percentiles), the findings ranked by severity with links to their messages,
SVG charts, and a packet browser in Wireshark's three panes (a virtualised
message list, the field tree, the hex bytes, selections linked both ways).

Messages, trees and bytes travel as JSON inside `<script type="application/json">`
elements, with `<`, `>` and `&` escaped so no string from the wire can end the
element; the page's script only ever sets `textContent`. Trees and bytes are
embedded for messages up to a size and within a total budget; the rest are
listed with a note saying how to see them on the command line. With several jobs the
workers that read the capture lay out the trees, each its share's, with a string table of
its own; this process puts them in capture order and gives them the page's string indexes
(`PacketData.add_share_details`): the page is the page of one process.
"""

from __future__ import annotations

import argparse
import base64
import collections
import dataclasses
import gc
import hashlib
import itertools
import json
import math
import os
import re
import sys
import time
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from html import escape
from importlib import resources
from typing import IO, TYPE_CHECKING, Any

import orjson

from kdissect.decode.tree import Node, Row, printable
from kdissect.ingest.net import format_address
from kdissect.native import native_or
from kdissect.present import findings as findings_module
from kdissect.present.findings import Finding, Severity, Thresholds
from kdissect.present.summary import REQUEST_MISSING
from kdissect.present.svgplot import Chart, Marker, Series, render

if TYPE_CHECKING:
    from kdissect.pair.message import Message
    from kdissect.present.analysis import Capture
    from kdissect.present.parallel_tables import HeldShares, ShareStream
    from kdissect.present.topic_stats import Topics

DETAIL_MAX_FRAME = 64 * 1024  # largest message whose tree and bytes go into the page
DETAIL_BUDGET = 64 * 1024 * 1024  # bytes of the page the messages' trees and bytes take, at most


# -- the data the page's script reads ----------------------------------------------------


class Strings:
    """A string table: each distinct string once, referred to by its index."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def __call__(self, text: str | None) -> int:
        if text is None:
            return -1
        found = self.index.get(text)
        if found is None:
            found = self.index[text] = len(self.index)
        return found

    def table(self) -> list[str]:
        return list(self.index)


def compact_tree(root: Node, strings: Strings) -> list[Any]:
    """[name, type, display, offset, size, about, children, generated, notes]; names, types
    and descriptions as string-table indexes; trailing empty parts left out."""
    index = strings.index
    intern = index.setdefault  # one C call per string: this runs for every node of the page

    def walk(node: Node) -> list[Any]:
        item = [intern(node.name, len(index)), intern(node.type, len(index)), node.display,
                node.offset, node.size, intern(node.about, len(index))]
        if node.children or node.generated or node.notes:
            item.append([walk(child) for child in node.children])
            if node.generated or node.notes:
                item.append(1 if node.generated else 0)
                item.append([str(note) for note in node.notes])
        return item

    return walk(root)


def compact_rows(root: Row, strings: Strings) -> list[Any]:
    """`compact_tree` of the same tree laid out as rows (`kdissect.decode.rows`), which come
    from bodies the fast path took and carry no notes."""
    index = strings.index
    intern = index.setdefault

    def walk(row: Row) -> list[Any]:
        name, kind, _value, display, offset, size, about, children, generated = row
        item = [intern(name, len(index)), intern(kind, len(index)), display, offset, size, intern(about, len(index))]
        if children or generated:
            item.append([walk(child) for child in children] if children else [])
            if generated:
                item += [1, []]
        return item

    return walk(root)


def detail_line(message: Message, tree: Node | None, strings: Strings) -> str:
    """The page's line of a message's details: its bytes in base64 and its tree, laid out
    compactly (`compact_rows` from flat values where `tree` is None and the fast path took
    the body, else `compact_tree`), its strings added to `strings`."""
    rows = message.rows(records=True) if tree is None else None
    if rows is not None:
        compact = compact_rows(rows, strings)
    else:
        compact = compact_tree(message.tree(keep=False) if tree is None else tree, strings)
    return script_json(_ascii_json([base64.b64encode(message.frame.data).decode("ascii"), compact]))


DETAIL_PIECE_BYTES = 1024 * 1024  # of detail lines a reading worker sends at a time
DETAIL_PIECES_AHEAD = 128  # pieces asked of a worker at most before it sent any


class _ShareDetails:
    """In a reading worker: where it is in its share's detail lines, and its string table."""

    def __init__(self, share: list[Message]) -> None:
        self.share, self.strings, self.at = share, Strings(), 0


_share_details: list[_ShareDetails] = []  # in a reading worker: the one under way


def share_details(share: list[Message], first: bool, piece_bytes: int) -> list[Any]:
    """In a reading worker that holds its share (`PacketData.add_share_details`): the next
    messages' entries, in order (from the first with `first`), until their lines take
    `piece_bytes`; none once the share is done. An entry is None for a message larger than
    DETAIL_MAX_FRAME, else (its size, its `detail_line` with the worker's own string
    table, the strings that line added to the table, in order)."""
    if first or not _share_details or _share_details[0].share is not share:
        _share_details[:] = [_ShareDetails(share)]
    made = _share_details[0]
    index = made.strings.index
    entries: list[Any] = []
    taken = 0
    while taken < piece_bytes and made.at < len(share):
        message = share[made.at]
        made.at += 1
        size = len(message.frame.data)
        if size > DETAIL_MAX_FRAME:
            entries.append(None)
            continue
        known = len(index)
        line = detail_line(message, None, made.strings)
        entries.append((size, line, list(itertools.islice(reversed(index), len(index) - known))[::-1]))
        taken += len(line)
    return entries


def _python_remapped(line: str, mapping: Sequence[int]) -> str:
    """A worker's detail line (`share_details`) with the page's string indexes: each node's
    name, type and description (its items 0, 1 and 5) index `mapping`, which gives the
    page's index; the rest stays as it is. The line is walked as tokens, each open array's
    kind and item count on a stack: the line's own array ([bytes, node]), a node ([name,
    type, display, offset, size, about, children, ...]), a node's children, or any other
    (notes). The reference of `_report_c.remapped`; ValueError on what is no detail line."""
    if not line.isascii():
        raise ValueError("not a detail line: a character beyond ASCII")
    out = []
    stack: list[list[int]] = []  # per open array: its kind, its items so far
    at = 0
    for token in _TOKEN.finditer(line):
        text = token.group()
        if token.start() != at or text == '"':
            raise ValueError(f"not a detail line: a string without its end at character {at}")
        at = token.end()
        if text == "[":
            kind = _LINE
            if stack:
                parent, item = stack[-1]
                kind = (_NODE if (parent == _LINE and item == 1) or parent == _CHILDREN
                        else _CHILDREN if parent == _NODE and item == 6 else _OTHER)
            stack.append([kind, 0])
        elif text == "]":
            if not stack:
                raise ValueError(f"not a detail line: a ']' closing nothing at character {token.start()}")
            stack.pop()
        elif text == ",":
            if not stack:
                raise ValueError(f"not a detail line: a ',' outside the line's array at character {token.start()}")
            stack[-1][1] += 1
        elif text[0] != '"' and stack and stack[-1][0] == _NODE and stack[-1][1] in (0, 1, 5):
            if len(text) > 18 or not text.isdigit():
                raise ValueError(f"not a detail line: a node's string index {text!r}")
            if int(text) >= len(mapping):
                raise ValueError(f"not a detail line: a string index out of range at character {token.start()}")
            text = str(mapping[int(text)])
        out.append(text)
    if at != len(line):
        raise ValueError(f"not a detail line: a string without its end at character {at}")
    if stack:
        raise ValueError(f"not a detail line: an array without its end at character {len(line)}")
    return "".join(out)


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\],]|[^\[\],"]+|"', re.DOTALL)
_LINE, _NODE, _CHILDREN, _OTHER = range(4)

# a worker's detail line given the page's string indexes: in C where it is built
remapped = native_or("kdissect.present._report_c", "remapped", _python_remapped)


@dataclass(slots=True)
class PacketData:
    """Column-wise message list plus one detail line per message (empty when not embedded)."""

    strings: Strings = field(default_factory=Strings)
    columns: dict[str, list[Any]] = field(default_factory=lambda: {k: [] for k in "ntsdpcilkwx"})
    details: dict[int, str] = field(default_factory=dict)
    detail_bytes: int = 0  # of the page, in the messages' lines of details
    base_time: float = 0.0
    budget: int = DETAIL_BUDGET
    full: bool = False  # a message's details did not fit: no later one's go in
    addresses: dict[int, tuple[int, int]] = field(default_factory=dict)  # per connection

    def add_detail(self, message: Message, tree: Node | None) -> bool:
        """The message's tree and bytes into the page (given in message order), while they
        fit in the budget: it counts what they take of the page (a tree in JSON is several
        times the bytes it describes: ten times on mixed traffic), so that the page stays one
        a browser opens whatever the traffic. The earliest messages go first; from the first
        that does not fit, the rest are listed only (but for one larger than DETAIL_MAX_FRAME,
        which is left out alone). The tree is laid out from flat values where `tree` is
        None. Whether the next message's tree may still fit."""
        size = len(message.frame.data)
        if self.full or size > DETAIL_MAX_FRAME:
            return not self.full
        return self._room_for(size) and self._kept(message.number, detail_line(message, tree, self.strings))

    def add_share_details(self, owners: Sequence[int], made: ShareStream) -> None:
        """`add_detail` of every message in capture order, made by the reading workers that
        hold the capture's shares (`share_details`), each on its own messages with a string
        table of its own. Each line comes with the strings its tree added to its worker's
        table, in order: those new to the page are added to the page's table here, in the
        order one process adds them (a string new to the page is new to its worker's table
        too, in the same message), and the line is given the page's indexes (`remapped`).
        What goes in, and the string table, are those of `add_detail` in one process.
        `owners`: the worker that holds each message, in capture order; `made`, what they
        make (`share_stream`)."""
        if self.full:
            return
        index = self.strings.index
        mappings: dict[int, array[int]] = collections.defaultdict(lambda: array("q"))
        for number, worker in enumerate(owners, 1):
            entry = made.next(worker)
            if entry is None:  # larger than DETAIL_MAX_FRAME: left out alone
                continue
            size, line, added = entry
            if not self._room_for(size):
                return
            mapping = mappings[worker]
            mapping.extend([index.setdefault(text, len(index)) for text in added])
            if not self._kept(number, remapped(line, mapping)):
                return

    def share_stream(self, shares: HeldShares) -> ShareStream:
        """The reading workers' detail lines of their shares (`share_details`), as many
        asked at once as the budget may take (the workers make them while this process does
        something else), for `add_share_details`."""
        pieces = self.budget // max(shares.count, 1) // DETAIL_PIECE_BYTES + 1
        return shares.stream(share_details, DETAIL_PIECE_BYTES, ahead=max(2, min(pieces, DETAIL_PIECES_AHEAD)))

    def _room_for(self, size: int) -> bool:
        """Whether a message of `size` bytes may still fit: its bytes alone, in base64."""
        if self.detail_bytes + 4 * size // 3 >= self.budget:
            self.full = True
        return not self.full

    def _kept(self, number: int, line: str) -> bool:
        if self.detail_bytes + len(line) > self.budget:
            self.full = True
            return False
        self.detail_bytes += len(line)
        self.details[number] = line
        return True

    def add_rows(self, messages: Iterable[Message]) -> None:
        """A row of the list for each message, column by column (`columns`: number, time,
        source, destination, label, correlation id, client id, latency, notes, their
        severity, whether the page holds its details), strings in the string table in the
        order the rows name them."""
        strings, details, base = self.strings, self.details, self.base_time
        numbers, times, sources, destinations, labels, correlations, clients, latencies, notes_, severities, shown = (
            self.columns[name] for name in "ntsdpcilkwx")
        addresses = self.addresses
        labels_of: dict[tuple[int | None, int | None, bool], int] = {}  # the API's name is its key's
        for message in messages:
            connection = message.frame.connection
            ends = addresses.get(connection.index)
            if ends is None:
                ends = addresses[connection.index] = (
                    strings(format_address(connection.client)), strings(format_address(connection.server)))
            request = message.is_request
            key = (message.api_key, message.api_version, request)
            label = labels_of.get(key)
            if label is None:
                kind = "Request" if request else "Response"
                label = labels_of[key] = strings(f"{message.api_name} v{message.api_version} {kind}"
                                                 if message.api_key is not None else f"{REQUEST_MISSING} {kind}")
            number = message.number
            numbers.append(number)
            times.append(round(message.time - base, 6))
            sources.append(ends[0] if request else ends[1])
            destinations.append(ends[1] if request else ends[0])
            labels.append(label)
            correlations.append(message.correlation_id)
            clients.append(strings(message.client_id))
            latency = message.latency
            latencies.append(None if latency is None else round(latency * 1000.0, 3))
            if message.notes or message.frame.notes:
                notes = message.all_notes()
                notes_.append(strings("; ".join(n.message for n in notes)) if notes else -1)
                severities.append(max((int(n.severity) for n in notes), default=-1))
            else:
                notes_.append(-1)
                severities.append(-1)
            shown.append(1 if number in details else 0)

    def detail_lines(self) -> str:
        return "\n".join(self.details.get(n, "") for n in self.columns["n"])


def script_json(value: Any) -> str:
    """JSON safe inside a `<script type="application/json">` element."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=True,
                                                           separators=(",", ":"), allow_nan=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _ascii_json(value: Any) -> str:
    """`script_json`'s JSON of a message's details (strings, ints and lists, no floats), as
    `json.dumps(value, ensure_ascii=True)` writes it: orjson's, several times faster, with
    what it leaves as it is and the standard library escapes (DEL and every non-ASCII
    character) escaped after; the standard library's for what orjson refuses."""
    try:
        made = orjson.dumps(value).decode("utf-8")
    except (orjson.JSONEncodeError, TypeError):  # a lone surrogate, an int beyond 64 bits
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    if made.isascii() and "\x7f" not in made:
        return made
    return _ESCAPED.sub(_escape, made)


_ESCAPED = re.compile("[\x7f-\U0010ffff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xd800 | code >> 10:04x}\\u{0xdc00 | code & 0x3ff:04x}"  # a surrogate pair, as json writes it


# -- building the page --------------------------------------------------------------------


def build_report(capture: Capture, thresholds: Thresholds | None = None,
                 detail_budget: int = DETAIL_BUDGET) -> str:
    """The whole page as one string; trees and bytes of the earliest messages, up to
    `detail_budget` bytes of the page in all."""
    collecting = gc.isenabled()
    gc.disable()  # a pass that makes millions of acyclic lists: no cycles to collect
    try:
        return _build(capture, thresholds, detail_budget)
    finally:
        if collecting:
            gc.enable()


def _build(capture: Capture, thresholds: Thresholds | None, detail_budget: int) -> str:
    from kdissect.present.topic_stats import Topics

    packets = PacketData(budget=detail_budget)
    if capture.start is not None:
        packets.base_time = capture.start
    topics: Topics | None
    if capture.workers_find_facts():
        # The reading workers find the bodies' facts and count the topics while the
        # messages are made here, then make the tables the detectors read; where they hold
        # their shares, they then lay out the page's trees while the detectors run here. The
        # list's rows, whose strings follow the trees' in the table, come last.
        messages = capture.message_list
        evidence = findings_module.Evidence(capture, thresholds or Thresholds(), None)
        topics = capture.workers_topics()
        shares = capture.held_shares()
        if shares is None:
            found = findings_module.run_detectors(evidence)
            for message in messages:
                if not packets.add_detail(message, None):
                    break
        else:
            for name in findings_module.TABLES_READ:  # asked for before the trees, which come after them
                evidence.table(name)
            with packets.share_stream(shares) as made:
                found = findings_module.run_detectors(evidence)
                packets.add_share_details(shares.owners().tolist(), made)
        packets.add_rows(capture.message_list)
    else:  # one pass over the bodies here: the facts, the page's trees, the topics' values
        topics = Topics()
        evidence = findings_module.Evidence(capture, thresholds or Thresholds(), packets.add_detail,
                                            topics.add_message)
        found = findings_module.run_detectors(evidence)
        packets.add_rows(capture.message_list)
    if topics is None:  # the workers' counts could not be merged, or their facts not used
        topics = Topics().add_messages(capture.message_list)
    page_data = {"strings": packets.strings.table(), "columns": packets.columns,
                 "base": packets.base_time, "source": _capture_name(capture)}
    sections = [
        _overview(capture, found, packets, evidence, topics),
        _findings_section(found, packets.base_time),
        _charts_section(capture, found, evidence, packets.base_time),
        _packets_section(),
    ]
    return _page(capture, "".join(sections), page_data, packets.detail_lines())


def _capture_name(capture: Capture) -> str:
    """The capture's file names without their folders: several for a set read as one."""
    return ", ".join(os.path.basename(name) for name in capture.files)


def _asset(name: str) -> str:
    return resources.files("kdissect.present").joinpath("report_assets", name).read_text("utf-8")


def _page(capture: Capture, body: str, page_data: dict[str, Any], details: str) -> str:
    script = _asset("report.js")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    policy = (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; "
              "img-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'")
    title = f"kdissect report: {printable(_capture_name(capture) or 'capture')}"
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{policy}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{escape(title)}</title><style>{_asset('report.css')}</style></head><body>"
        f"<header><h1>{escape(title)}</h1><nav>"
        "<a href='#overview' data-tab='overview'>Overview</a>"
        "<a href='#findings' data-tab='findings'>Findings</a>"
        "<a href='#charts' data-tab='charts'>Charts</a>"
        "<a href='#packets' data-tab='packets'>Packets</a></nav></header>"
        f"<main>{body}</main>"
        f"<script type='application/json' id='kd-data'>{script_json(page_data)}</script>"
        f"<script type='application/json' id='kd-details'>{script_json(details)}</script>"
        f"<script>{script}</script></body></html>\n"
    )


def _table(headers: list[str], body_rows: list[list[str]], cls: str = "") -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    lines = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in body_rows)
    return f"<table class='{cls}'><thead><tr>{head}</tr></thead><tbody>{lines}</tbody></table>"


def _overview(capture: Capture, found: list[Finding], packets: PacketData,
              evidence: findings_module.Evidence, topics: Topics) -> str:
    messages = capture.message_list
    exchanges = evidence.exchanges
    span = (messages[-1].time - messages[0].time) if messages else 0.0
    start = findings_module.iso_time(messages[0].time) if messages else "-"
    severities = {s: sum(1 for f in found if f.severity == s) for s in Severity}
    servers = sorted({format_address(m.frame.connection.server) for m in messages})
    facts = [
        ("capture", escape(printable(_capture_name(capture) or "(stream)"))),
        ("first message", escape(start)),
        ("time span", f"{span:.3f} s"),
        ("messages", f"{len(messages)} ({len(packets.details)} with tree and bytes in this page)"),
        ("findings", ", ".join(f"<span class='sev sev-{s}'>{n} {s}</span>"
                               for s, n in sorted(severities.items(), reverse=True) if n) or "none"),
        ("brokers", escape(", ".join(servers[:50])) or "-"),
    ]
    fact_rows = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in facts)
    errors = evidence.body_facts.errors
    return (f"<section id='overview' class='tab'><h2>Overview</h2><table class='facts'>{fact_rows}"
            f"</table><h3>APIs</h3>{_api_table(messages, exchanges, errors)}"
            f"<h3>Clients</h3>{_client_table(exchanges)}"
            f"{_topic_table(topics)}"
            + "".join(f"<p class='problem'>{escape(printable(str(p)))}</p>" for p in capture.problems[:20])
            + "</section>")


def _api_table(messages: list[Message], exchanges: list[dict[str, Any]],
               errors: list[findings_module.BodyFact]) -> str:
    requests: dict[str, int] = {}
    for message in messages:
        if message.is_request:
            name = message.api_name or "?"
            requests[name] = requests.get(name, 0) + 1
    latencies = findings_module.grouped(exchanges, "api_name")
    error_counts: dict[str, int] = {}
    for error in errors:
        error_counts[error.api] = error_counts.get(error.api, 0) + 1
    body = []
    for api in sorted(requests):
        ordered = sorted(r["latency_ms"] for r in latencies.get((api,), []))
        picks = [ordered[round(q * (len(ordered) - 1))] if ordered else None
                 for q in (0.5, 0.9, 0.99, 1.0)]
        body.append([escape(api), str(requests[api]), str(len(ordered)),
                     str(requests[api] - len(ordered)), str(error_counts.get(api, 0)),
                     *("-" if p is None else f"{p:.3f}" for p in picks)])
    return _table(["API", "requests", "answered", "not answered", "error codes",
                   "p50 ms", "p90 ms", "p99 ms", "max ms"], body, "numbers")


def _client_table(exchanges: list[dict[str, Any]]) -> str:
    groups = findings_module.grouped(exchanges, "client", "client_id")
    body = [[escape(client), escape(printable(client_id)), str(len(items))]
            for (client, client_id), items in sorted(groups.items())[:500]]
    return _table(["client address", "client id", "answered exchanges"], body)


def _topic_table(topics: Topics) -> str:
    """What was produced to and fetched from each topic, as `--stats` counts it; nothing
    when no Produce or Fetch body was decoded."""
    from kdissect.present.topic_stats import topic_label

    rows = topics.resolved()
    if not rows:
        return ""
    body = []
    for name, topic_id, stats in rows[:500]:
        label = escape(topic_label(name, topic_id, quoted=False))
        flows = (stats.produced, stats.fetched)
        body.append([label, *(str(value) for flow in flows
                              for value in (flow.partitions, flow.records, flow.bytes, flow.errors))])
    return "<h3>Topics</h3>" + _table(
        ["topic", "produced: partitions", "records", "bytes", "refused",
         "fetched: partitions", "records", "bytes", "errors"], body, "numbers")


def _findings_section(found: list[Finding], base: float) -> str:
    if not found:
        return "<section id='findings' class='tab'><h2>Findings</h2><p>No findings.</p></section>"
    body = []
    for rank, item in enumerate(found, 1):
        links = " ".join(f"<a class='msg-link' href='#m{n}'>#{n}</a>" for n in item.messages[:12])
        if len(item.messages) > 12:
            links += f" <span class='more'>+{len(item.messages) - 12} more</span>"
        body.append([str(rank), f"<span class='sev sev-{item.severity}'>{item.severity}</span>",
                     f"<code>{escape(item.id)}</code>",
                     f"{item.first_time - base:.3f} s - {item.last_time - base:.3f} s",
                     str(item.count), escape(item.summary), links])
    return ("<section id='findings' class='tab'><h2>Findings</h2>"
            + _table(["#", "severity", "id", "when", "count", "what", "evidence"], body, "findings")
            + "</section>")


# -- charts -----------------------------------------------------------------------------------


def _charts_section(capture: Capture, found: list[Finding], evidence: findings_module.Evidence,
                    base: float) -> str:
    charts = [_latency_chart(evidence.exchanges, base),
              _error_chart(evidence.body_facts.errors, base),
              _lag_chart(capture, found, base), _sequence_chart(capture, found, base),
              _transaction_chart(capture, base)]
    messages = capture.message_list
    span = (0.0, messages[-1].time - base) if messages else None
    rendered = "".join(f"<figure>{svg}</figure>" for svg in (
        render(dataclasses.replace(c, x_range=span)) for c in charts if c) if svg)
    return (f"<section id='charts' class='tab'><h2>Charts</h2>"
            f"{rendered or '<p>Nothing to chart in this capture.</p>'}</section>")


def _latency_chart(found: list[dict[str, Any]], base: float) -> Chart | None:
    if not found:
        return None
    series = [Series(str(api), [(r["time"] - base, r["latency_ms"]) for r in items], "points")
              for (api,), items in findings_module.grouped(found, "api_name").items()]
    return Chart("Latency over time by API", "latency ms (log)", series, log_y=True)


def _error_chart(errors: list[findings_module.BodyFact], base: float) -> Chart | None:
    if not errors:
        return None
    by_error: dict[str, list[tuple[float, float]]] = {}
    for event in sorted(errors, key=lambda e: e.time):
        points = by_error.setdefault(f"{event.value} ({event.api})", [])
        points.append((event.time - base, len(points) + 1))
    return Chart("Error codes over time (cumulative, by error and API)", "error codes",
                 [Series(name, points, "step") for name, points in list(by_error.items())[:10]])


def _lag_chart(capture: Capture, found: list[Finding], base: float) -> Chart | None:
    lags = findings_module.voter_lags(capture)
    if not lags:
        return None
    groups = findings_module.grouped(lags, "topic_name", "partition_index", "replica_id")
    several = len({(topic, partition) for topic, partition, _ in groups}) > 1
    series = [Series(f"voter {replica}" + (f" {printable(str(topic))}-{partition}" if several else ""),
                     [(r["time"] - base, r["lag"]) for r in items], "line")
              for (topic, partition, replica), items in list(groups.items())[:10]]
    markers = [Marker(f.last_time - base, f"leader {_id(f.details['leader_to'])}, "
                      f"epoch {f.details['epoch_to']}")
               for f in found if f.id == "quorum.leader_change" and "leader_to" in f.details]
    return Chart("Quorum: voter lag (leader's log end offset minus the voter's), leader and epoch",
                 "offsets behind", series, markers[:30])


def _id(value: Any) -> str:
    return "none" if value is None else str(value)


def _sequence_chart(capture: Capture, found: list[Finding], base: float) -> Chart | None:
    producers = [r for r in findings_module.rows(findings_module.table_read(capture, "producers"), (
        "time", "topic_name", "partition_index", "producer_id", "last_sequence")) if r["producer_id"] is not None]
    if not producers:
        return None
    groups = findings_module.grouped(producers, "producer_id", "topic_name", "partition_index")
    series = [Series(f"{producer} {printable(str(topic))}-{partition}",
                     [(r["time"] - base, r["last_sequence"]) for r in items
                      if r["last_sequence"] is not None], "line")
              for (producer, topic, partition), items in list(groups.items())[:10]]
    markers = [Marker(f.last_time - base, f"{f.details['producer_id']}: epoch {f.details['epoch_to']}")
               for f in found if f.id == "producer.epoch_bump" and "epoch_to" in f.details]
    return Chart("Producers: last sequence per partition, epoch bumps", "last sequence",
                 series, markers[:30])


def _transaction_chart(capture: Capture, base: float) -> Chart | None:
    ages = findings_module.transaction_ages(capture)
    if not ages:
        return None
    groups = findings_module.grouped(ages, "producer_id", "topic_name", "partition_index")
    series = [Series(f"{producer} {printable(str(topic))}-{partition}",
                     [(r["time"] - base, r["age"]) for r in items], "line")
              for (producer, topic, partition), items in list(groups.items())[:10]]
    return Chart("Open transactions: seconds seen open (dashed: the threshold)", "seconds open",
                 series, threshold=Thresholds().transaction_s)


def _packets_section() -> str:
    return (
        "<section id='packets' class='tab'><h2>Packets</h2>"
        "<div class='toolbar'><input id='kd-filter' type='search' placeholder='filter: words "
        "that every shown line contains, e.g. DescribeQuorum response'>"
        "<span id='kd-count'></span></div>"
        "<div id='kd-list' class='list' tabindex='0'><div id='kd-spacer'></div></div>"
        "<div class='panes'><div id='kd-tree' class='tree'><p class='hint'>Select a message.</p>"
        "</div><div id='kd-hex' class='hex'></div></div></section>"
    )


# -- command line ---------------------------------------------------------------------------


def report_main(argv: list[str]) -> int:
    """`kdissect report FILE -o OUT.html`."""
    parser = argparse.ArgumentParser(
        prog="kdissect report",
        description="Write one self-contained HTML page (no network needed) with the capture's "
        "overview, findings, charts and a three-pane packet browser.")
    _files_option(parser)
    parser.add_argument("-o", "--output", required=True, metavar="HTML", help="the page to write")
    parser.add_argument("--detail-mb", type=_megabytes, default=DETAIL_BUDGET / 2**20, metavar="MB",
                        help="megabytes of the page given to messages' trees and bytes, the "
                        f"earliest messages first (default {DETAIL_BUDGET // 2**20}); the rest "
                        "are listed only")
    _common_options(parser)
    args = parser.parse_args(argv)
    capture, thresholds = _load(parser, args)
    if capture is None:
        return 2
    started = time.monotonic()
    budget = sys.maxsize if math.isinf(args.detail_mb) else int(args.detail_mb * 2**20)
    page = build_report(capture, thresholds, detail_budget=budget)
    try:
        with open(args.output, "w", encoding="utf-8") as out:
            out.write(page)
    except OSError as exc:
        print(f"kdissect: {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"kdissect: wrote {args.output} ({len(page.encode('utf-8')) // 1024} KiB, "
          f"{len(capture)} messages, {time.monotonic() - started:.1f} s)", file=sys.stderr)
    return 0


def findings_main(argv: list[str]) -> int:
    """`kdissect --findings FILE [-T json|jsonl] [--threshold NAME=VALUE]`."""
    parser = argparse.ArgumentParser(
        prog="kdissect --findings",
        description="What went wrong in the capture, most severe first, with the message "
        "numbers as evidence.")
    parser.add_argument("--findings", action="store_true", required=True, help=argparse.SUPPRESS)
    _files_option(parser)
    parser.add_argument("-T", "--output", choices=("text", "json", "jsonl"), default="text",
                        help="text (default); json: one array of the findings; jsonl: one "
                        "object per finding, a line each")
    _common_options(parser)
    args = parser.parse_args(argv)
    capture, thresholds = _load(parser, args)
    if capture is None:
        return 2
    found = findings_module.find(capture, thresholds)
    write_findings(found, sys.stdout, args.output, capture.start)
    return 0


def write_findings(found: list[Finding], out: IO[str], output: str, base: float | None) -> None:
    """The findings as text, or as JSON objects: a line each (jsonl), or those lines in one
    array (json, laid out as the message list's)."""
    if output == "text":
        out.write(findings_module.render_text(found, base))
        return
    lines = [json.dumps(item.record(), ensure_ascii=True, default=str) for item in found]
    if output == "jsonl":
        out.write("".join(line + "\n" for line in lines))
    else:
        out.write("[\n" + ",\n".join(lines) + "\n]\n" if lines else "[]\n")


def _megabytes(text: str) -> float:
    """A `--detail-mb`: megabytes, zero or more; `inf` for no bound."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of megabytes") from None
    if math.isnan(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of megabytes (0 or more, or inf)")
    return value


def _files_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="pcap or pcapng capture, possibly gzip/bzip2/xz/zstd-compressed; several "
                        "files are read as one capture merged by packet time (a rotated set); '-' "
                        "reads standard input")


def _common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, action="append", default=[], metavar="N",
                        help="also treat TCP port N as Kafka (repeatable)")
    parser.add_argument("-j", "--jobs", type=int, metavar="N",
                        help="worker processes reading the capture, as for the message list "
                        "(default: every core for captures of 16 MiB or more, else 1)")
    parser.add_argument("--threshold", action="append", default=[], metavar="NAME=VALUE",
                        help="change a detector threshold; defaults: " + Thresholds.describe())


def _load(parser: argparse.ArgumentParser, args: argparse.Namespace,
          ) -> tuple[Capture | None, Thresholds]:
    """The capture the files name, its messages made while it is read (every one is walked
    at once), and what the findings read of the bodies found by the reading workers."""
    from kdissect.ingest.capture import CaptureError
    from kdissect.parallel import default_jobs
    from kdissect.present.analysis import read_pcap

    try:
        thresholds = Thresholds.parse(args.threshold)
    except ValueError as exc:
        parser.error(str(exc))
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"argument -j/--jobs: must be at least 1, not {args.jobs}")
    if "-" in args.files and len(args.files) > 1:
        parser.error("standard input ('-') is read alone, not with other files")
    for path in args.files:
        if path != "-" and not os.path.isfile(path):
            problem = "is a directory, not a capture file" if os.path.isdir(path) else "no such capture file"
            print(f"kdissect: {path}: {problem}", file=sys.stderr)
            return None, thresholds
    source: Any = sys.stdin.buffer if args.files == ["-"] else args.files
    jobs = args.jobs or default_jobs(args.files)
    try:
        return read_pcap(source, ports=args.port, jobs=jobs, findings=True), thresholds
    except (CaptureError, OSError) as exc:
        name = "standard input" if args.files == ["-"] else ", ".join(args.files)
        print(f"kdissect: {name}: {exc}", file=sys.stderr)
        return None, thresholds


def command(argv: list[str]) -> int:
    """`kdissect report ...` or `kdissect --findings ...`, with the CLI's last line of defence.
    Both keep every message to the end, and what they make of them holds no cycles: the
    cycle collector is kept out (`cycle_collection_paused`) until the capture is let go,
    rather than walking the messages once more after each step that paused it."""
    from kdissect.decode.values import cycle_collection_paused

    try:
        with cycle_collection_paused():
            return report_main(argv[1:]) if argv[:1] == ["report"] else findings_main(argv)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:  # never a traceback for the user
        if os.environ.get("KDISSECT_DEBUG"):
            raise
        print(f"kdissect: internal error: {type(exc).__name__}: {exc} "
              "(set KDISSECT_DEBUG=1 for details)", file=sys.stderr)
        return 1
