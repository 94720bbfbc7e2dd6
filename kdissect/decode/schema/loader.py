"""Reading the message definitions shipped in `definitions/`, once per process.

The files follow Apache Kafka's own format, which allows `//` line comments
outside strings; they are removed before the JSON is parsed.
"""

from __future__ import annotations

import functools
import json
from importlib import resources

from kdissect.decode.schema.model import MessageSpec, parse_message
from kdissect.decode.schema.versions import SchemaError

HEADER_NAMES = {"request": "RequestHeader", "response": "ResponseHeader"}


def strip_comments(text: str) -> str:
    """Remove `//` comments that start outside a JSON string, keeping line breaks."""
    out: list[str] = []
    in_string = escaped = False
    index = 0
    while index < len(text):
        char = text[index]
        if escaped:
            escaped = False
        elif in_string:
            escaped = char == "\\"
            in_string = char != '"'
        elif char == '"':
            in_string = True
        elif text.startswith("//", index):
            end = text.find("\n", index)
            index = len(text) if end < 0 else end
            continue
        out.append(char)
        index += 1
    return "".join(out)


def parse_definition(text: str, source: str) -> MessageSpec:
    """Parse one definition file's text (comments allowed) into a checked MessageSpec."""
    try:
        raw = json.loads(strip_comments(text))
    except json.JSONDecodeError as problem:
        raise SchemaError(f"{source}: not JSON: {problem}") from None
    return parse_message(raw, source)


@functools.cache
def load_definitions() -> tuple[MessageSpec, ...]:
    """Every shipped definition, parsed and checked (cached: the files are read once)."""
    folder = resources.files("kdissect.decode.schema").joinpath("definitions")
    specs = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            specs.append(parse_definition(entry.read_text(encoding="utf-8"), entry.name))
    _check_unique_messages(specs)
    return tuple(specs)


def _check_unique_messages(specs: list[MessageSpec]) -> None:
    seen: set[tuple[int | None, str, str]] = set()
    for spec in specs:
        key = (spec.api_key, spec.kind, spec.name if spec.kind == "header" else "")
        if key in seen:
            raise SchemaError(f"{spec.name} is defined twice")
        seen.add(key)


@functools.cache
def message_spec(api_key: int, kind: str) -> MessageSpec | None:
    """The definition of one API's request or response, None when it is not shipped."""
    for spec in load_definitions():
        if spec.api_key == api_key and spec.kind == kind:
            return spec
    return None


@functools.cache
def header_spec(kind: str) -> MessageSpec:
    """The request or response header definition."""
    name = HEADER_NAMES[kind]
    for spec in load_definitions():
        if spec.kind == "header" and spec.name == name:
            return spec
    raise SchemaError(f"no {name} definition shipped")


@functools.cache
def dissected_api_keys() -> frozenset[int]:
    """API keys whose bodies are decoded field by field."""
    return frozenset(s.api_key for s in load_definitions() if s.api_key is not None)
