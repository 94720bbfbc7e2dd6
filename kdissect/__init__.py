"""kdissect: dissect and analyse Apache Kafka traffic in packet captures.

Pipeline, one stage per module: capture -> net -> reassembly -> framing ->
protocol -> pairing -> present. `read_pcap` (pandas tables) is imported on
first use so that the command line starts without pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["__version__", "read_messages", "read_pcap"]

if TYPE_CHECKING:
    from kdissect.pipeline import read_messages
    from kdissect.present.analysis import read_pcap


def __getattr__(name: str) -> Any:
    if name == "read_pcap":
        from kdissect.present.analysis import read_pcap

        return read_pcap
    if name == "read_messages":
        from kdissect.pipeline import read_messages

        return read_messages
    raise AttributeError(f"module 'kdissect' has no attribute {name!r}")
