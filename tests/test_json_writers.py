"""The JSON writers' ASCII escaping, against the standard library's `ensure_ascii`."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from kdissect.present.records import ascii_json


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
