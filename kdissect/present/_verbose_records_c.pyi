"""`verbose_records._plain_records` in C (_verbose_records_c.c)."""

from collections.abc import Callable

def plain_records(body: bytes, pos: int, count: int, base_offset: int, base_time: int, log_append: bool,
                  prefix: str, /) -> str | None: ...
def configure(timestamp: Callable[[int], str], value_display: Callable[[bytes], str],
              printable: Callable[[str], str], create_time_tail: str, log_append_tail: str,
              offset_tail: str, /) -> None: ...
