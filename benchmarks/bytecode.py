"""kdissect's modules compiled to bytecode before anything is timed.

An installed package has its bytecode; a source tree run with PYTHONDONTWRITEBYTECODE
set (or whose modules changed since their last import) compiles each changed module
from source every time a process starts: tens of milliseconds a run, paid alike by
every arm of a benchmark, and so a serial part that shrinks what several processes can
gain over one."""

from __future__ import annotations

import compileall
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "kdissect"


def compile_package() -> None:
    """Write the bytecode of every kdissect module whose source is newer than it."""
    compileall.compile_dir(str(PACKAGE), quiet=1)
