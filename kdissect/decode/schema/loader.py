"""Finding and parsing message definitions, lazily, with per-version precedence.

The files follow Apache Kafka's own format, which allows `//` line comments
outside strings; they are removed before the JSON is parsed. A file is read and
parsed the first time a message of its API needs it, never before.

Precedence is per (API, version): the highest source (see `sources`) whose
definition declares a version valid decodes it; versions it lacks fall through
to lower sources (Kafka 4 dropped Produce v0-2, which old captures still carry).
A version newer than every definition is decoded as the newest one known.

Headers always come from the project's own files: their layout has not changed
since Kafka 0.8, and their field names (`correlation_id`) are what the rest of
kdissect reads.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from kdissect.apis import APIS
from kdissect.decode.schema.model import MessageSpec, parse_message
from kdissect.decode.schema.sources import DefinitionSource, default_sources, project_source
from kdissect.decode.schema.versions import SchemaError

HEADER_NAMES = {"request": "RequestHeader", "response": "ResponseHeader"}
_API_KEY = re.compile(r'"apiKey"\s*:\s*(\d+)')
_TYPE = re.compile(r'"type"\s*:\s*"(\w+)"')


@dataclass(frozen=True, slots=True)
class Resolved:
    """The definition that decodes one (API, version, kind), and where it came from."""

    spec: MessageSpec
    source: str  # the source's label
    version: int  # the version to decode as: the asked one, or the newest known when newer


def strip_comments(text: str) -> str:
    """Remove `//` comments that start outside a JSON string, keeping line breaks."""
    kept: list[str] = []
    index = 0
    while index < len(text):
        found = _UP_TO_COMMENT.match(text, index)
        assert found is not None  # the pattern matches the empty text
        kept.append(text[index : found.end()])
        line_end = text.find("\n", found.end())  # a comment runs to its line's end, which stays
        index = len(text) if line_end < 0 else line_end
    return "".join(kept)


# Text up to the next comment: JSON strings (to the end when unterminated), runs of other
# characters, and slashes not followed by a slash.
_UP_TO_COMMENT = re.compile(r'(?:"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)|[^"/]+|/(?!/))*', re.DOTALL)


def parse_definition(text: str, source: str) -> MessageSpec:
    """Parse one definition file's text (comments allowed) into a checked MessageSpec."""
    try:
        raw = json.loads(strip_comments(text))
    except json.JSONDecodeError as problem:
        raise SchemaError(f"{source}: not JSON: {problem}") from None
    return parse_message(raw, source)


# -- the active sources ---------------------------------------------------------------------

_sources: tuple[DefinitionSource, ...] | None = None
_problems: dict[str, str] = {}  # "<source>/<file>" -> why it was skipped
_on_change: list[Callable[[], None]] = []


def active_sources() -> tuple[DefinitionSource, ...]:
    """The sources in use, highest precedence first (by default: kafka-python if installed, ours)."""
    global _sources
    if _sources is None:
        _sources = default_sources()
    return _sources


def set_sources(sources: tuple[DefinitionSource, ...] | None) -> None:
    """Use these sources from now on (None: the defaults); every cache built on them is dropped."""
    global _sources
    _sources = sources
    _problems.clear()
    for cache in (_source_spec, _file_name, resolve, message_spec, dissected_api_keys, header_spec):
        cache.cache_clear()
    for callback in _on_change:
        callback()


def on_sources_change(callback: Callable[[], None]) -> None:
    """Call `callback` whenever the sources change (to drop caches built from definitions)."""
    _on_change.append(callback)


def definition_problems() -> dict[str, str]:
    """Definition files that were skipped because they are not valid, and why."""
    return dict(_problems)


@functools.cache
def _source_spec(source: DefinitionSource, name: str) -> MessageSpec | None:
    """One source's parsed definition of a message, None when absent or invalid (recorded)."""
    try:
        text = source.read(name)
        spec = None if text is None else parse_definition(text, f"{source.label}/{name}.json")
        if spec is not None:
            _check_no_struct_contains_itself(spec, f"{source.label}/{name}.json")
        return spec
    except SchemaError as problem:
        _problems[f"{source.label}/{name}.json"] = str(problem)
        return None


def _check_no_struct_contains_itself(spec: MessageSpec, where: str) -> None:
    """Reject a definition whose struct types refer to themselves (compiling one would fail)."""
    refers = {s.name: {f.type.element for f in s.fields if f.type.is_struct} for s in spec.structs}
    for start in refers:
        seen, stack = set(), list(refers[start])
        while stack:
            name = stack.pop()
            if name == start:
                raise SchemaError(f"{where}: struct {start} contains itself")
            if name not in seen:
                seen.add(name)
                stack.extend(refers.get(name, ()))


@functools.cache
def _file_name(source: DefinitionSource, api_key: int, kind: str) -> str | None:
    """The name of the file defining an API's request or response in one source."""
    if api_key in APIS:
        return f"{APIS[api_key].name}{kind.capitalize()}"
    for name in source.names():  # an API newer than kdissect's table: find it by content
        text = source.read(name) or ""
        key, typ = _API_KEY.search(text), _TYPE.search(text)
        if key and typ and int(key[1]) == api_key and typ[1] == kind:
            return name
    return None


def _candidates(api_key: int, kind: str) -> list[tuple[DefinitionSource, MessageSpec]]:
    found = []
    for source in active_sources():
        name = _file_name(source, api_key, kind)
        spec = None if name is None else _source_spec(source, name)
        if spec is not None and spec.api_key == api_key and spec.kind == kind:
            found.append((source, spec))
    return found


@functools.cache
def resolve(api_key: int, version: int, kind: str) -> Resolved | None:
    """Which definition decodes this (API, version, kind); None when no source knows it."""
    candidates = _candidates(api_key, kind)
    for source, spec in candidates:
        if version in spec.valid_versions:
            return Resolved(spec, source.label, version)
    newest: Resolved | None = None
    for source, spec in candidates:
        high = spec.valid_versions.high
        if high is None or high >= version:
            return None  # the version is inside or below the known ones: a gap, not newer
        if newest is None or high > newest.version:
            newest = Resolved(spec, source.label, high)
    return newest


@functools.cache
def message_spec(api_key: int, kind: str) -> MessageSpec | None:
    """The highest-precedence definition of one API's request or response, None when none."""
    candidates = _candidates(api_key, kind)
    return candidates[0][1] if candidates else None


@functools.cache
def header_spec(kind: str) -> MessageSpec:
    """The request or response header definition (always the project's own)."""
    name = HEADER_NAMES[kind]
    spec = _source_spec(project_source(), name)
    if spec is None:
        raise SchemaError(f"no {name} definition shipped")
    return spec


@functools.cache
def shipped_api_keys() -> frozenset[int]:
    """API keys the project's own files define a request or response of (by file name, nothing parsed)."""
    names = set(project_source().names())
    return frozenset(k for k, api in APIS.items() if {f"{api.name}Request", f"{api.name}Response"} & names)


@functools.cache
def dissected_api_keys() -> frozenset[int]:
    """API keys some source has a definition file for (found by file name, nothing parsed)."""
    keys: set[int] = set()
    for source in active_sources():
        names = set(source.names())
        keys.update(k for k, api in APIS.items() if f"{api.name}Request" in names)
    return frozenset(keys)


def load_definitions(source: DefinitionSource | None = None) -> tuple[MessageSpec, ...]:
    """Every valid definition of one source (default: the project's own), parsed now."""
    source = source or project_source()
    specs = (_source_spec(source, name) for name in source.names())
    return tuple(spec for spec in specs if spec is not None)


@dataclass(frozen=True, slots=True)
class Coverage:
    """A run of consecutive versions of one API decoded from one source."""

    api_key: int
    low: int
    high: int
    source: str  # a source label; "<label> (request only)" when the response has no definition

    @property
    def versions(self) -> str:
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


def coverage(api_key: int) -> list[Coverage]:
    """Which versions of an API decode, and from which source (parses that API's files)."""
    highs = [s.valid_versions.high or 0 for kind in ("request", "response") for _, s in _candidates(api_key, kind)]
    top = max([*highs, APIS[api_key].max_version if api_key in APIS else 0])
    runs: list[Coverage] = []
    for version in range(top + 1):
        label = _version_source(api_key, version)
        if label is None:
            continue
        if runs and runs[-1].source == label and runs[-1].high == version - 1:
            runs[-1] = Coverage(api_key, runs[-1].low, version, label)
        else:
            runs.append(Coverage(api_key, version, version, label))
    return runs


def _version_source(api_key: int, version: int) -> str | None:
    request, response = (resolve(api_key, version, kind) for kind in ("request", "response"))
    if request is None or request.version != version:
        return None
    if response is None or response.version != version:
        return f"{request.source} (request only)"
    if response.source != request.source:
        return f"{request.source} (response: {response.source})"
    return request.source
