"""The JSON writers' ASCII escaping and exact times, against the standard library."""

from __future__ import annotations

import json
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from kdissect.present.records import CaptureTime, ascii_json


@given(st.text())
def test_ascii_json_escapes_as_json_dumps_does(text: str) -> None:
    document = json.dumps({"a": text, "b": [text, 1]}, ensure_ascii=False, separators=(",", ":"))
    try:
        document.encode()
    except UnicodeEncodeError:  # lone surrogates: never in a decoded string from the wire
        return
    escaped = ascii_json(document)
    assert escaped.isascii()
    assert json.loads(escaped) == json.loads(document)
    # the standard library escapes DEL too; beyond ASCII both write the same escapes
    assert escaped == json.dumps(json.loads(document), separators=(",", ":")).replace("\\u007f", "\x7f")


def test_ascii_json_writes_pairs_beyond_the_basic_plane() -> None:
    assert ascii_json('"\u202eevil\U0001f600\u00e9"') == '"\\u202eevil\\ud83d\\ude00\\u00e9"'


@given(st.integers(-(2**64), 2**64))
def test_capture_time_writes_the_exact_decimal_of_its_nanoseconds(nanoseconds: int) -> None:
    assert CaptureTime(nanoseconds).exact() == f"{Decimal(nanoseconds).scaleb(-9):f}"
