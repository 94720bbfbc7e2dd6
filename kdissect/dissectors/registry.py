"""The one registry of APIs whose bodies get meaning beyond the generic decoding.

Which APIs are *decoded* follows from the definitions alone (every API with a
plan for its version), and what the definitions say a field is (broker ids,
error codes, timestamps, topic names...) applies to every API. This registry
names the APIs with more: display rules and generated values of their own
(a module each), or summary rules for the `-i` line (`everyday.RULES`).
"""

from __future__ import annotations

from kdissect.dissectors import (
    Dissector,
    describe_producers,
    describe_quorum,
    describe_topic_partitions,
)
from kdissect.dissectors.everyday import RULES
from kdissect.dissectors.summaries import summarize

DISSECTORS: dict[int, Dissector] = {
    **{key: Dissector(key, response_summary=summarize(response), request_summary=summarize(request))
       for key, (request, response) in RULES.items()},
    **{d.api_key: d for d in (describe_topic_partitions.DISSECTOR, describe_producers.DISSECTOR,
                              describe_quorum.DISSECTOR)},
}


def dissector(api_key: int | None) -> Dissector | None:
    """The meaning an API adds, or None when its bodies need only the generic decoding."""
    return None if api_key is None else DISSECTORS.get(api_key)


__all__ = ["DISSECTORS", "dissector"]
