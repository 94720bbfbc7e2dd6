"""Lint and type checks are part of the test suite, so CI and the README's one command run them."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)  # fmt: skip


def test_ruff_finds_nothing():
    result = run("ruff", "check", "kdissect", "tests", "tools", "benchmarks", "notebooks")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing():
    result = run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
