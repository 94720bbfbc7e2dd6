"""A frame's bytes as a hex dump: 16 bytes a row, offset, hex in two groups of 8, ASCII.

    0000  00 00 00 14 00 3d 00 00  00 00 00 00 00 00 00 02   .....=.. ........
"""

from __future__ import annotations

ROW = 16
_PRINTABLE = bytes(b if 0x20 <= b < 0x7F else 0x2E for b in range(256))


def hexdump(data: bytes) -> str:
    """Rows joined by newlines (no trailing newline); offsets widen past 0xffff as needed."""
    width = max(4, len(f"{max(len(data) - 1, 0):x}"))
    return "\n".join(_row(data[offset:offset + ROW], offset, width) for offset in range(0, len(data), ROW))


def _row(chunk: bytes, offset: int, width: int) -> str:
    left, right = chunk[:8], chunk[8:]
    hex_part = f"{left.hex(' '):<23}  {right.hex(' '):<23}"
    text = chunk.translate(_PRINTABLE).decode("ascii")
    return f"{offset:0{width}x}  {hex_part}   {text[:8]} {text[8:]}".rstrip()
