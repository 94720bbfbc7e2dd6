"""`light.Light` and `light.Lights` in C (_light_c.c)."""

from collections.abc import Callable
from typing import Any

from kdissect.ingest.framing import Connection
from kdissect.notes import Note
from kdissect.spool import Ring

class Light:
    number: int
    connection: Connection
    is_request: bool
    correlation_id: int | None
    expects_response: bool
    last_ns: int
    size: int
    frame_notes: tuple[Note, ...]
    notes: list[Note]
    _pair: Light | None
    _asked: int | None
    def __init__(self, number: int, connection: Connection, is_request: bool, correlation_id: int | None,
                 expects_response: bool, last_ns: int, size: int, frame_notes: tuple[Note, ...],
                 notes: list[Note]) -> None: ...
    @property
    def frame(self) -> Light: ...
    @property
    def pair_number(self) -> int | None: ...
    def link(self, response: Light) -> None: ...
    def all_notes(self) -> list[Note]: ...

class Lights:
    light: type[Light]
    prepared: dict[int, Any]
    def __init__(self, prepared: dict[int, Any], hold_seconds: float = ..., hold_messages: int = ...,
                 hold_bytes: int = ...) -> None: ...
    def round(self, number: int, who: list[int], at: list[int], start: int, items: list[Any], kinds: list[Any],
              connections: dict[tuple[int, int], Connection], rings: list[Ring] | None,
              other: Callable[[int, str, Any], None], /) -> tuple[int, list[tuple[Light, Any]], int]: ...
    def made(self, number: int, worker: int, fields: tuple[Any, ...], connections: dict[tuple[int, int], Connection],
             rings: list[Ring] | None, /) -> Light: ...
    def one(self, light: Light, /) -> list[tuple[Light, Any]]: ...
    def finish(self) -> list[tuple[Light, Any]]: ...

def write_texts(fd: int, released: list[tuple[Any, Any]], start: int, /) -> int: ...
