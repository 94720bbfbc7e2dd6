"""Version ranges as Kafka's message definitions write them: "N", "N-M", "N+", "none"."""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_VERSION = 0x7FFF  # versions travel as int16

_RANGE = re.compile(r"(?P<low>\d+)(?:(?P<plus>\+)|-(?P<high>\d+))?")


class SchemaError(ValueError):
    """A message definition contradicts the definition format (raised at load time only)."""


@dataclass(frozen=True, slots=True)
class VersionRange:
    """An inclusive range of versions; `high=None` means open-ended, `low > high` is empty."""

    low: int
    high: int | None

    @classmethod
    def parse(cls, text: object) -> VersionRange:
        if text == "none":
            return NO_VERSIONS
        match = _RANGE.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise SchemaError(f"bad version range {text!r}: expected 'N', 'N-M', 'N+' or 'none'")
        low = int(match["low"])
        high = None if match["plus"] else int(match["high"] or low)
        if low > MAX_VERSION or (high is not None and not low <= high <= MAX_VERSION):
            raise SchemaError(f"bad version range {text!r}: empty or beyond int16")
        return cls(low, high)

    @property
    def empty(self) -> bool:
        return self.high is not None and self.low > self.high

    def __contains__(self, version: object) -> bool:
        if not isinstance(version, int) or version < self.low:
            return False
        return self.high is None or version <= self.high

    def within(self, other: VersionRange) -> bool:
        """True when every version of this range is also in `other`."""
        if self.empty:
            return True
        if self.low not in other:
            return False
        if other.high is None:
            return True
        return self.high is not None and self.high <= other.high

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.high is None:
            return f"{self.low}+"
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


NO_VERSIONS = VersionRange(1, 0)
ALL_VERSIONS = VersionRange(0, None)
