"""The progress bar shows itself to a person at a terminal, and to nobody else."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from kdissect.present import progress
from kdissect.present.progress import Progress
from tests.conftest import CAPTURES

QUORUM = CAPTURES / "quorum_story.pcap"


def test_bar_is_drawn_and_cleared_at_a_terminal(monkeypatch: pytest.MonkeyPatch):
    screen = io.StringIO()
    monkeypatch.setattr(progress, "_wanted", lambda: True)
    monkeypatch.setattr(progress, "SHOW_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(progress, "REFRESH_SECONDS", 0.0)
    monkeypatch.setattr(sys, "stderr", screen)
    with QUORUM.open("rb") as stream:
        bar = Progress(stream, str(QUORUM))
        assert bar.reader is not stream  # reads are counted
        while bar.reader.read(4096):
            pass
        bar.close()
    shown = screen.getvalue()
    assert "quorum_story.pcap: [" in shown and "100.0%" in shown
    assert shown.endswith("\r\x1b[K")  # the line is cleared before results follow


def test_no_bar_and_no_wrapper_when_not_wanted(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(progress, "_wanted", lambda: False)
    with QUORUM.open("rb") as stream:
        assert Progress(stream, str(QUORUM)).reader is stream


def test_ci_or_a_pipe_never_gets_a_bar():
    result = subprocess.run([sys.executable, "-m", "kdissect", str(QUORUM)], capture_output=True,
                            text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0 and result.stderr == ""
