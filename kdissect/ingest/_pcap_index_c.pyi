"""`capture._record_heads` in C (_pcap_index_c.c)."""

from mmap import mmap

def record_heads(data: bytes | bytearray | mmap, position: int, count: int, big_endian: bool,
                 limit: int, /) -> tuple[bytes, int, int]: ...
