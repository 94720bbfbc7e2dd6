"""`report._python_remapped` in C (_report_c.c)."""

from typing import Any

def remapped(line: str, mapping: Any, /) -> str: ...
