"""The report in a real browser: Debian's chromium driven by Playwright, from file://.

Playwright's own browser downloads are never used: the system chromium is launched
with the network-quiet flags below and a fresh profile. Screenshots go to the test's
temporary folder, or to $KDISSECT_SCREENSHOTS when set.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kdissect
from kdissect.present.report import build_report
from tests.conftest import missing
from tests.test_report import HOSTILE_CLIENT, HOSTILE_MESSAGE, HOSTILE_TOPIC, hostile_capture

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT / "captures"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]
LARGE_MESSAGES = 100_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright (pip install playwright) is needed to test the report in chromium")
    executable = shutil.which("chromium")
    if executable is None:
        missing("chromium is not installed (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=executable, headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1400, "height": 1000})
        try:
            yield context
        finally:
            context.close()


class Page:
    """One page of the report, failing the test on any console error or script exception."""

    def __init__(self, context: Any, path: Path, shots: Path) -> None:
        self.page = context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.shots = shots
        self.page.goto(path.resolve().as_uri())

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(self.shots / f"{name}.png"))

    def selected_number(self) -> int:
        return int(self.page.locator("#kd-list .row.selected").get_attribute("data-number"))

    def expand(self, *labels: str) -> None:
        """Open the tree along labels (each the start of a node's label text)."""
        for label in labels:
            node = self.tree_node(label)
            if "closed" in (node.get_attribute("class") or ""):
                node.locator(":scope > .twisty").click()

    def tree_node(self, label: str) -> Any:
        starts = re.compile("^" + re.escape(label))
        return self.page.locator("#kd-tree .node").filter(
            has=self.page.locator(":scope > .label", has_text=starts)).first

    def highlighted(self) -> list[int]:
        return [int(o) for o in self.page.eval_on_selector_all(
            "#kd-hex .b.sel", "els => els.map(e => e.dataset.offset)")]

    def close(self) -> None:
        self.page.close()
        assert self.errors == []


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("KDISSECT_SCREENSHOTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_report(capture_path: Path, out: Path, **options: Any) -> tuple[Any, Path]:
    capture = kdissect.read_pcap(capture_path)
    out.write_text(build_report(capture, **options), encoding="utf-8")
    return capture, out


def quorum_step(sidecar: dict[str, Any], capture: Any, step: int) -> tuple[int, dict[str, Any]]:
    """The response number of the peer's DescribeQuorum exchange at `step`, and what it encoded."""
    exchange = next(e for e in sidecar["exchanges"]
                    if e["api_name"] == "DescribeQuorum" and e.get("step") == step)
    table = capture.exchanges
    row = table[(table.client == f"127.0.0.1:{exchange['client_port']}")
                & (table.correlation_id == exchange["correlation_id"])]
    return int(row.response.iloc[0]), exchange["response"]


def test_report_of_the_incident_in_chromium(browser, tmp_path, shots):
    capture, path = write_report(CAPTURES / "incident.pcap", tmp_path / "incident.html")
    sidecar = json.loads((CAPTURES / "incident.json").read_text())
    page = Page(browser, path, shots)
    page.shot("report-findings")
    assert page.page.locator("#findings").is_visible()  # something was found: the page opens on it
    # a finding's link leads to its message, selected in the packet browser
    link = page.page.locator("#findings a.msg-link").first
    number = int(link.inner_text().lstrip("#"))
    link.click()  # the page follows the link's #m<number> when it comes to it: waited for
    page.page.locator("#packets").wait_for(state="visible", timeout=10_000)
    page.page.locator(f"#kd-list .row.selected[data-number='{number}']").wait_for(timeout=10_000)
    assert page.selected_number() == number
    assert page.page.locator("#kd-tree .node .label").first.inner_text().startswith(
        capture.tree(number).name)
    # a message clicked in the list shows its tree; a field clicked highlights its bytes
    response, encoded = quorum_step(sidecar, capture, 20)
    page.page.fill("#kd-filter", f"corr={capture.message(response).correlation_id} "
                                 "DescribeQuorum v2 Response")
    page.page.locator(f"#kd-list .row[data-number='{response}']").click()
    assert page.selected_number() == response
    page.expand("Topics", "TopicData[0]", "Partitions", "PartitionData[0]")
    page.tree_node("HighWatermark").locator(":scope > .label").click()
    field = capture.fields.query(f"number == {response} and name == 'HighWatermark'").iloc[0]
    offset, size = int(field["offset"]), int(field["size"])
    assert page.highlighted() == list(range(offset, offset + size))
    shown = bytes.fromhex("".join(page.page.eval_on_selector_all(
        "#kd-hex .b.sel", "els => els.map(e => e.textContent)")))
    expected = encoded["Topics"][0]["Partitions"][0]["HighWatermark"]
    assert int.from_bytes(shown, "big", signed=True) == expected  # what the peer encoded
    page.shot("report-packets")
    # a byte clicked selects the deepest field holding it
    page.page.locator(f"#kd-hex .b[data-offset='{offset + 3}']").click()
    assert page.page.locator("#kd-tree .node.selected > .label").inner_text().startswith(
        "HighWatermark")
    page.page.locator("#kd-hex .b[data-offset='0']").click()
    assert page.page.locator("#kd-tree .node.selected > .label").inner_text().startswith("size")
    assert page.highlighted() == [0, 1, 2, 3]
    page.page.click("nav a[data-tab=charts]")
    assert page.page.locator("svg.kd-chart").count() == 5
    page.page.screenshot(path=str(shots / "report-charts.png"), full_page=True)
    page.close()


def test_strings_from_the_wire_render_as_text_and_run_nothing(browser, tmp_path, shots):
    _, path = write_report(hostile_capture(tmp_path / "hostile.pcap"), tmp_path / "hostile.html")
    page = Page(browser, path, shots)
    assert page.page.evaluate("typeof window.kdPwned") == "undefined"
    assert page.page.evaluate("document.images.length") == 0
    assert HOSTILE_TOPIC in page.page.locator("#findings").inner_text()
    page.page.click("nav a[data-tab=overview]")
    assert HOSTILE_CLIENT in page.page.locator("#overview").inner_text()
    page.page.click("nav a[data-tab=packets]")
    first = page.page.locator("#kd-list .row").first
    assert f"client={HOSTILE_CLIENT}" in first.inner_text()
    page.page.locator("#kd-list .row[data-number='2']").click()
    page.expand("Topics", "TopicResponse[0]", "Partitions", "PartitionResponse[0]")
    assert HOSTILE_MESSAGE in page.tree_node("ErrorMessage").inner_text()
    assert HOSTILE_TOPIC in page.tree_node("Name").inner_text()
    page.shot("report-hostile")
    assert page.page.evaluate("typeof window.kdPwned") == "undefined"
    page.close()


def large_capture(tmp_path: Path) -> Path:
    """A capture of at least 100,000 Kafka messages, from the benchmark's builder."""
    out = tmp_path / "large.pcap"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_capture.py"), str(out),
                    "--size-mb", "32", "--mix", "mixed"], check=True, capture_output=True,
                   timeout=600)
    return out


def timed(page: Any, script: str) -> float:
    """Milliseconds the page takes to run `script` (an async arrow function) to its end."""
    return float(page.evaluate(f"async () => {{ const t0 = performance.now(); "
                               f"await ({script})(); return performance.now() - t0; }}"))


NEXT_FRAME = "new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)))"


def test_a_large_report_stays_responsive(browser, tmp_path, shots):
    capture, path = write_report(large_capture(tmp_path), tmp_path / "large.html",
                                 detail_budget=8 * 1024 * 1024)
    assert len(capture) >= LARGE_MESSAGES
    started = time.monotonic()
    page = Page(browser, path, shots)
    page.page.click("nav a[data-tab=packets]")
    page.page.wait_for_selector("#kd-list .row")
    opened = time.monotonic() - started
    scroll = timed(page.page, f"""async () => {{ const list = document.getElementById('kd-list');
        list.scrollTop = list.scrollHeight / 2; list.dispatchEvent(new Event('scroll'));
        await {NEXT_FRAME}; }}""")
    middle = page.page.locator("#kd-list .row").nth(8)
    assert abs(int(middle.get_attribute("data-number")) - len(capture) // 2) < 200
    select = timed(page.page, f"""async () => {{
        document.querySelector('#kd-list .row:nth-child(8)').click(); await {NEXT_FRAME}; }}""")
    assert page.page.locator("#kd-tree .node, #kd-tree .hint").count() >= 1
    search = timed(page.page, f"""async () => {{ const box = document.getElementById('kd-filter');
        box.value = 'DescribeQuorum Response'; box.dispatchEvent(new Event('input'));
        while (!/ of /.test(document.getElementById('kd-count').textContent)) await {NEXT_FRAME}; }}""")
    shown = int(page.page.locator("#kd-count").inner_text().split()[0])
    assert 0 < shown < len(capture)
    page.shot("report-large")
    page.close()
    print(f"\n{len(capture)} messages: page open {opened:.1f} s, scroll {scroll:.0f} ms, "
          f"select {select:.0f} ms, filter {search:.0f} ms")
    assert scroll < 250 and select < 1000 and search < 3000


def test_a_capture_without_kafka_makes_a_page_without_errors(browser, tmp_path, shots):
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000"))
    _, path = write_report(empty, tmp_path / "empty.html")
    page = Page(browser, path, shots)
    # nothing found: the page opens on its overview, not on an empty findings list
    assert page.page.locator("#overview").is_visible() and not page.page.locator("#findings").is_visible()
    assert "No findings." in page.page.locator("#findings").inner_text()
    page.page.click("nav a[data-tab=packets]")
    assert page.page.locator("#kd-count").inner_text() == "0 messages"
    page.close()


def test_a_message_beyond_the_page_budget_says_how_to_see_it(browser, tmp_path, shots):
    capture, path = write_report(CAPTURES / "incident.pcap", tmp_path / "small.html",
                                 detail_budget=2048)
    page = Page(browser, path, shots)
    page.page.goto(path.resolve().as_uri() + "#m197")
    assert page.selected_number() == 197
    hint = page.page.locator("#kd-tree .hint").inner_text()
    assert "kdissect -V -x -Y 'number == 197' incident.pcap" in hint
    assert page.page.locator("#kd-hex .b").count() == 0
    page.page.evaluate("location.hash = '#m1'")
    page.page.locator("#kd-list .row.selected[data-number='1']").wait_for()
    assert page.page.locator("#kd-hex .b").count() == len(capture.message(1).frame.data)
    page.close()
