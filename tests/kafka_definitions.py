"""Kafka's Produce and Fetch definitions from the installed kafka-python, for tests only.

The decoder reads definitions at run time; where this branch's loader does not
yet find Produce (0) and Fetch (1), tests add kafka-python's copies of Kafka's
files for the duration of a test (`with_record_apis`), and put things back after.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from importlib import resources

from kdissect.decode.schema import loader, plan
from kdissect.decode.schema.model import MessageSpec

RECORD_APIS = ("ProduceRequest", "ProduceResponse", "FetchRequest", "FetchResponse")


def _caches() -> tuple[object, ...]:
    return (loader.load_definitions, loader.message_spec, loader.dissected_api_keys,
            plan.message_plan)


def kafka_python_specs() -> list[MessageSpec]:
    folder = resources.files("kafka.protocol.schemas").joinpath("resources")
    return [loader.parse_definition(folder.joinpath(f"{name}.json").read_text(encoding="utf-8"),
                                    f"kafka-python {name}.json") for name in RECORD_APIS]


@contextlib.contextmanager
def with_record_apis() -> Iterator[None]:
    """Produce and Fetch decodable for the duration (a no-op where they already are)."""
    shipped = loader.load_definitions()
    have = {(s.api_key, s.kind) for s in shipped}
    extra = [s for s in kafka_python_specs() if (s.api_key, s.kind) not in have]
    if not extra:
        yield
        return
    original = loader.load_definitions
    combined = (*shipped, *extra)
    for cache in _caches():
        cache.cache_clear()  # type: ignore[attr-defined]
    loader.load_definitions = lambda: combined  # type: ignore[assignment]
    try:
        yield
    finally:
        loader.load_definitions = original
        for cache in _caches():
            cache.cache_clear()  # type: ignore[attr-defined]

