"""`--jobs N` shows the progress bar one process shows: to a person at a terminal only."""

from __future__ import annotations

import gzip
import io
import re
import sys
from pathlib import Path

import pytest

from kdissect.cli import main
from kdissect.present import progress
from kdissect.present.progress import Progress
from tests.conftest import CAPTURES

SHIPPED = sorted(CAPTURES.glob("*.pcap"))


class Terminal(io.StringIO):
    """What stderr is when a person runs the command in a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every step of the bar drawn, however short the run."""
    monkeypatch.setattr(progress, "SHOW_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(progress, "REFRESH_SECONDS", 0.0)
    monkeypatch.delenv("CI", raising=False)


def listed(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, stderr: io.StringIO,
           *arguments: str) -> tuple[str, str]:
    monkeypatch.setattr(sys, "stderr", stderr)
    status = main([*arguments])
    monkeypatch.undo()
    assert status == 0
    return capsys.readouterr().out, stderr.getvalue()


@pytest.mark.usefixtures("at_once")
def test_two_jobs_draw_the_bar_at_a_terminal_up_to_the_whole_file(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, many: str) -> None:
    out, shown = listed(capsys, monkeypatch, Terminal(), "--jobs", "2", many)
    assert "many.pcap: [" in shown
    fractions = [float(found) for found in re.findall(r"(\d+\.\d)%", shown)]
    assert fractions == sorted(fractions) and fractions[-1] >= 99.0  # record bytes, not the file header
    assert shown.endswith("\r\x1b[K")  # cleared before anything else is written
    assert out == listed(capsys, monkeypatch, io.StringIO(), "--jobs", "1", many)[0]


@pytest.mark.usefixtures("at_once")
def test_two_jobs_write_no_bar_when_stderr_is_not_a_terminal(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, many: str) -> None:
    out, said = listed(capsys, monkeypatch, io.StringIO(), "--jobs", "2", "-V", many)
    assert said == "" and out


@pytest.mark.usefixtures("at_once")
def test_a_set_of_files_has_one_bar_named_for_its_first(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, many: str) -> None:
    _out, shown = listed(capsys, monkeypatch, Terminal(), "--jobs", "2", many, str(SHIPPED[0]))
    assert "many.pcap and 1 more: [" in shown


@pytest.mark.usefixtures("at_once")
def test_a_compressed_capture_shows_bytes_read_without_a_fraction(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, many: str,
        tmp_path: Path) -> None:
    packed = tmp_path / "many.pcap.gz"
    packed.write_bytes(gzip.compress(Path(many).read_bytes()))
    out, shown = listed(capsys, monkeypatch, Terminal(), "--jobs", "2", str(packed))
    assert "many.pcap.gz: " in shown and "MiB read" in shown and "%" not in shown
    assert out == listed(capsys, monkeypatch, io.StringIO(), "--jobs", "1", many)[0]


def test_a_bar_for_workers_exists_only_for_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert Progress.of_bytes("big.pcap", lambda: 100) is None
    monkeypatch.setattr(sys, "stderr", Terminal())
    bar = Progress.of_bytes("big.pcap", lambda: 100)
    assert bar is not None and bar.reader is None
    monkeypatch.setenv("CI", "true")
    assert Progress.of_bytes("big.pcap", lambda: 100) is None
