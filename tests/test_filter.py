"""Display filters are parsed, checked against the known columns, and never executed."""

from __future__ import annotations

import pytest

from kdissect.present.filter import FilterError, compile_filter
from kdissect.present.records import MESSAGE_COLUMNS


def matches(expression: str, **record: object) -> bool:
    return compile_filter(expression, MESSAGE_COLUMNS)(record)


def test_comparisons_and_boolean_operators():
    assert matches("api_key == 55 and latency_ms > 5", api_key=55, latency_ms=5.5)
    assert not matches("api_key == 55 and latency_ms > 5", api_key=55, latency_ms=4.0)
    assert matches("api_key == 61 or api_key == 55", api_key=55)
    assert matches("not (direction == 'request')", direction="response")


def test_wireshark_spelling_outside_quotes_only():
    assert matches('api_key == 55 && !(client_id == "a&&b!")', api_key=55, client_id="x")
    assert not matches('client_id == "a&&b!" || api_key == 1', client_id="a and b not", api_key=2)
    assert matches('client_id == "a&&b!"', client_id="a&&b!")


def test_membership_and_substrings():
    assert matches("api_name in ('DescribeQuorum', 'DescribeProducers')", api_name="DescribeQuorum")
    assert matches("'request missing' in notes", notes="warn: request missing: ...")
    assert matches("api_key not in [0, 1]", api_key=3)


def test_missing_values_never_satisfy_an_ordering():
    assert not matches("latency_ms > 0", latency_ms=None)
    assert matches("latency_ms == None", latency_ms=None)


@pytest.mark.parametrize(
    ("expression", "complaint"),
    [
        ("__import__('os').system('true')", "cannot contain Call"),
        ("api_key.bit_length() > 1", "cannot contain"),
        ("no_such_column == 1", "unknown field 'no_such_column'"),
        ("api_key ==", "cannot parse"),
        ("[x for x in number]", "cannot contain ListComp"),
        ("lambda: 1", "cannot contain Lambda"),
    ],
)
def test_bad_filters_are_refused_with_a_reason(expression: str, complaint: str):
    with pytest.raises(FilterError, match=complaint):
        compile_filter(expression, MESSAGE_COLUMNS)
