"""Whether the optional C extensions are used: set KDISSECT_PURE=1 to turn them off.

Loops that run once per record, batch or element are also written in C, beside the
Python they mirror: `ingest/_pcap_index_c` (the walk over a classic pcap file's record
headers of `capture.PcapIndex.chunks`), `decode/_record_check_c` (the walks of
`record_check._records_clean` and `_entries_clean`) and
`present/_verbose_records_c` (the -V text of `verbose_records._batch_lines`, and of the
arrays of integers and of fixed-size structs of integers the generated -V writers loop
over) and `_light_c` (with `--jobs`, the merging process's Lights and their pairing,
`light.Lights`). An install with a C compiler builds them (setup.py); one without runs the Python,
which stays the reference and gives the same answers and the same text (tests
compare the two). KDISSECT_PURE=1 (any value but "" and "0") makes kdissect run
the Python even where they are built: to test the fallback, or to measure it.
It is read once, when kdissect is imported; worker processes inherit it.
This module is in the base tier, so that every tier that has C may import it.
"""

from __future__ import annotations

import importlib
import os
from typing import TypeVar

PURE = os.environ.get("KDISSECT_PURE", "") not in ("", "0")

T = TypeVar("T")


def native_or(module: str, name: str, python: T) -> T:
    """`name` of the C extension `module` where it is built and PURE is not set; else
    `python`, the function it mirrors."""
    if not PURE:
        try:
            found: T = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            pass
        else:
            return found
    return python


__all__ = ["PURE", "native_or"]
