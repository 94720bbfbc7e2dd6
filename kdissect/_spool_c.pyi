"""`spool.put` in C (_spool_c.c)."""

from typing import Any

def put(memory: Any, at: int, text: bytes | str, /) -> None: ...
