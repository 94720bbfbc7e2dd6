"""Body decoding rate: kdissect's generated decoders against kio's native reader, same bodies.

Reads every Kafka message of a capture, keeps the bodies both can decode (a
request, or a response paired with its request, of an API and version kio
knows), then times, in this one process and alternating three rounds:

  kdissect  Message.values(): the generated decoder of the frame (header and
            body), giving the body as flat values, no tree
  kio       kio's entity reader (its native extension) on the body bytes

and prints bodies per second for each, best round, as one line of JSON.

    python benchmarks/decode_rate.py capture.pcap
"""

from __future__ import annotations

import gc
import importlib
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kio.serial import entity_reader  # noqa: E402

from kdissect.apis import request_header_version, response_header_version  # noqa: E402
from kdissect.decode.generated import decode_values  # noqa: E402
from kdissect.decode.schema import header_plan, message_spec  # noqa: E402
from kdissect.pair.message import Message  # noqa: E402
from kdissect.pipeline import read_messages  # noqa: E402

ROUNDS = 3


def _kio_reader(message: Message) -> Callable[..., Any] | None:
    spec = message_spec(message.api_key or 0, message.kind)
    if spec is None:
        return None
    stem = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", spec.name.removesuffix(message.kind.capitalize())).lower()
    try:
        module = importlib.import_module(f"kio.schema.{stem}.v{message.api_version}.{message.kind}")
    except ImportError:
        return None
    return entity_reader(getattr(module, spec.name))  # type: ignore[no-any-return]


def _body_start(message: Message) -> int | None:
    version = (request_header_version if message.is_request else response_header_version)(
        message.api_key or 0, message.api_version or 0)
    found = decode_values(header_plan(message.kind, version).body, message.frame.data, 4, len(message.frame.data))
    return None if found is None else found[1]


def _kio_reads(reader: Callable[..., Any], body: bytes) -> bool:
    try:
        reader(body, 0)
    except ValueError:
        return False
    return True


def main() -> None:
    readers: dict[tuple[Any, ...], Callable[..., Any] | None] = {}
    messages, bodies = [], []
    for message in read_messages(sys.argv[1]):
        if message.api_key is None or (not message.is_request and message.pair is None):
            continue
        key = (message.api_key, message.api_version, message.kind)
        if key not in readers:
            readers[key] = _kio_reader(message)
        reader, start = readers[key], _body_start(message)
        if reader is None or start is None or message.values(keep=False) is None:
            continue
        if not _kio_reads(reader, message.frame.data[start:]):
            continue  # a value kio refuses, such as an error code newer than its enum
        messages.append(message)
        bodies.append((reader, message.frame.data[start:]))
    gc.collect()
    best = {"kdissect": 0.0, "kio": 0.0}
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for message in messages:
            message.values(keep=False)
        best["kdissect"] = max(best["kdissect"], len(messages) / (time.perf_counter() - started))
        started = time.perf_counter()
        for reader, body in bodies:
            reader(body, 0)
        best["kio"] = max(best["kio"], len(bodies) / (time.perf_counter() - started))
    print(json.dumps({"bodies": len(messages), **{k: round(v) for k, v in best.items()}}))


if __name__ == "__main__":
    main()
