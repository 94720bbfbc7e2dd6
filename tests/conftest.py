"""Shared test fixtures: where the real captures live."""

from __future__ import annotations

import os
from pathlib import Path

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
        pytest.fail(
            f"third-party captures not found at {PUBLIC_CAPTURES}; "
            "set KDISSECT_PUBLIC_CAPTURES to their folder"
        )
    return PUBLIC_CAPTURES


@pytest.fixture(scope="session")
def shipped_captures() -> Path:
    return CAPTURES
