"""-Y with `--jobs N`: the workers run a filter's tests on body fields (`filter.BodyTests`),
the merging process the rest, and the output is that of one process, byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from kdissect import parallel
from kdissect.cli import main
from kdissect.present.filter import BodyTests
from tests.conftest import CAPTURES, PUBLIC_CAPTURES

FILTERS = [
    'kafka.topic_name == "records"',  # a body field alone
    "ErrorCode != 0 || ThrottleTimeMs > 0",  # two body tests, either
    '!(kafka.topic_name in {"records" "no-such-topic"}) && api_key == 0',  # negated, beside a column
    "kafka.topic_name not in {\"records\"} || stream == 1",  # a negated set test, with a capture-wide column
    "key && number > 3",  # inside record batches (the tree), and the capture's numbering
    'LeaderId == 2 || expert == "kafka.error_code"',  # a body test, and notes of the whole capture
    "Topics[].Partitions[].ErrorCode == 0 && latency_ms > 0",
    '(client_id contains "-" && time_relative > 1) || !(ErrorCode == 0 && tcp.port == 9092)',
]


def captures() -> list[Path]:
    found = sorted(CAPTURES.glob("*.pcap"))
    if PUBLIC_CAPTURES.is_dir():
        found += [PUBLIC_CAPTURES / "deepflow_mixed-with-unsupported.pcap", PUBLIC_CAPTURES / "ndpi_kafka.pcapng"]
    return found


@pytest.mark.parametrize("expression", FILTERS)
def test_jobs_give_the_bytes_of_one_process(capsys: pytest.CaptureFixture[str], expression: str):
    shown = 0
    for path in captures():
        for output in ([], ["-V"], ["-T", "jsonl"], ["-T", "fields", "-e", "number", "-e", "kafka.topic_name"]):
            one = (main(["--jobs", "1", *output, "-Y", expression, str(path)]), *capsys.readouterr())
            two = (main(["--jobs", "2", *output, "-Y", expression, str(path)]), *capsys.readouterr())
            assert two == one, (path.name, output)
            shown += one[1] != ""
    assert shown  # the filter selects something somewhere


def test_columns_a_worker_reads_of_several_files(capsys: pytest.CaptureFixture[str]):
    """File names, pairs' frames and addresses read on a worker as in one process."""
    files = [str(CAPTURES / "incident.pcap"), str(CAPTURES / "quorum_story.pcap")]
    for expression in ('file contains "incident" && api_key == 3', "kafka.request_frame > 10 && !tls",
                       'src contains ":9092" || client_id == "x"'):
        one = (main(["--jobs", "1", "-Y", expression, *files]), *capsys.readouterr())
        two = (main(["--jobs", "2", "-Y", expression, *files]), *capsys.readouterr())
        assert two == one and one[1], expression


def test_every_message_column_filters_alike_on_workers(capsys: pytest.CaptureFixture[str]):
    """Each message column, as the whole filter (its presence) and beside a body test: a
    worker decides what it reads exactly, and leaves the rest to the merge (a request's
    answer, for one, comes after the worker reads the request)."""
    from kdissect.present.fields import COLUMNS

    path = str(CAPTURES / "incident.pcap")
    for name in sorted(COLUMNS):
        for expression in (name, f"({name}) && ErrorCode == 0"):
            one = (main(["--jobs", "1", "-Y", expression, path]), *capsys.readouterr())
            two = (main(["--jobs", "2", "-Y", expression, path]), *capsys.readouterr())
            assert two == one, expression


def test_the_merging_process_decodes_no_body_for_body_tests(capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch):
    """The tests on body fields ran on the workers: the merging process decoded no body (the
    warm-up, which decodes the capture's first bodies before the workers fork, left out)."""
    import kdissect.present.fields as fields

    path = str(CAPTURES / "tansu_records.pcap")
    expression = 'kafka.topic_name == "records" && ErrorCode == 0'
    expected = (main(["--jobs", "1", "-Y", expression, path]), *capsys.readouterr())
    decoded: list[int] = []
    original = fields.body_fields

    def counting(message, *reading, **options):
        decoded.append(message.number)
        return original(message, *reading, **options)

    monkeypatch.setattr("kdissect.present.filter.body_fields", counting)
    monkeypatch.setattr(parallel, "warm", lambda *args, **kwargs: None)
    assert (main(["--jobs", "2", "-Y", expression, path]), *capsys.readouterr()) == expected
    assert expected[1].count("\n") > 10 and decoded == []


def test_what_a_worker_reads_of_a_filter():
    """A worker evaluates what it reads exactly, in three values, cheap parts first, running
    only the body tests it needs; the rest is for the merging process."""
    from kdissect.pipeline import read_messages

    assert BodyTests.of("stream == 1 || number > 3") is None  # numbered over the whole capture
    messages = list(read_messages(str(CAPTURES / "tansu_records.pcap")))
    produce = next(m for m in messages if m.api_key == 0 and m.is_request)
    metadata = next(m for m in messages if m.api_key == 3 and not m.is_request)
    tests = BodyTests.of('kafka.topic_name == "records" && api_key == 0')
    assert tests is not None
    assert tests(produce) == (1, 1, True)  # the body test ran and passed: the verdict is known
    assert tests(metadata) == (0, 0, False)  # api_key decided first: no body decoded
    either = BodyTests.of('ErrorCode != 0 && stream == 1 || !(kafka.topic_name == "records")')
    assert either is not None
    assert either(produce) == (0b11, 0b10, False)  # a request: no ErrorCode, and its topic is "records"
    assert either(metadata)[2] is None or either(metadata)[2] is True
    restored = BodyTests.__new__(BodyTests)
    restored.__setstate__(either.__getstate__())
    assert restored(produce) == either(produce)


@pytest.mark.parametrize("expression", FILTERS[:4])
def test_read_pcap_with_a_filter_on_two_workers(expression: str):
    """`read_pcap(filter=..., jobs=2)` keeps the messages one process keeps, with their tables."""
    import kdissect

    kept = 0
    for path in captures()[:5]:
        one = kdissect.read_pcap(path, filter=expression, jobs=1)
        two = kdissect.read_pcap(path, filter=expression, jobs=2)
        assert two.messages.equals(one.messages), path.name
        kept += len(one.messages)
    assert kept
