"""Shared test fixtures: where the real captures live."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT / "captures"
# Third-party captures live beside the checkout, never inside it.
PUBLIC_CAPTURES = Path(
    os.environ.get("KDISSECT_PUBLIC_CAPTURES", ROOT.parent / "shared" / "captures" / "public")
)


@pytest.fixture(scope="session")
def public_captures() -> Path:
    if not PUBLIC_CAPTURES.is_dir():
        missing(f"third-party captures not found at {PUBLIC_CAPTURES}; "
                "set KDISSECT_PUBLIC_CAPTURES to their folder")
    return PUBLIC_CAPTURES


@pytest.fixture(scope="session")
def shipped_captures() -> Path:
    return CAPTURES


@pytest.fixture(scope="session")
def many(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Half a megabyte of real exchanges (the shipped captures') over 64 interleaved
    connections, for what several jobs do; read, never written."""
    from benchmarks.make_capture import build

    out = tmp_path_factory.mktemp("many") / "many.pcap"
    build(out, 0.5, "mixed", sources=sorted(CAPTURES.glob("*.pcap")))
    return str(out)


def missing(reason: str) -> NoReturn:
    """Something outside the repository is absent: skip on a developer's machine, fail in CI.

    CI (`CI=true`, set by `.ci/run`'s callers) installs and provides everything, so there
    an absence is a broken setup, never a reason to test less.
    """
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{reason} (CI must provide it)")
    pytest.skip(reason)
