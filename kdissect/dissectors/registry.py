"""The one registry of APIs whose bodies get meaning beyond the generic decoding.

Which APIs are *decoded* follows from the definitions alone (every API with a
plan for its version); this registry only names those with extra meaning.
"""

from __future__ import annotations

from kdissect.dissectors import (
    Dissector,
    describe_producers,
    describe_quorum,
    describe_topic_partitions,
)

DISSECTORS: dict[int, Dissector] = {
    d.api_key: d for d in (describe_topic_partitions.DISSECTOR, describe_producers.DISSECTOR,
                           describe_quorum.DISSECTOR)
}


def dissector(api_key: int | None) -> Dissector | None:
    """The meaning an API adds, or None when its bodies need only the generic decoding."""
    return None if api_key is None else DISSECTORS.get(api_key)


__all__ = ["DISSECTORS", "dissector"]
