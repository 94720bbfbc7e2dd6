"""Expert note ids: every id a stage gives is documented once, in `EXPERT_IDS`."""

from __future__ import annotations

import io
import random
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from kdissect.decode.records import decode_records
from kdissect.ingest.capture import CaptureError
from kdissect.notes import EXPERT, EXPERT_IDS, Note, Severity, warn
from kdissect.pipeline import read_messages
from tests.conftest import CAPTURES
from tools import pathology
from tools.fuzz import built_record_sets, capture_seeds, mutate_capture, mutate_records

ROOT = Path(__file__).resolve().parents[1]
REGRESSIONS = Path(__file__).parent / "fuzz_regressions"
# A note id as the code gives it, by keyword or by position: `id="kafka.unanswered"`,
# `warn(text, offset, "tcp.lost_bytes")` (module names such as "kdissect.present" are not ids).
GIVEN = re.compile(r"""["']((?:kafka|tcp|tls|pcap|sasl)\.[a-z0-9_]+)["']""")


def test_every_id_given_in_the_code_is_in_the_table():
    given = set()
    for path in (ROOT / "kdissect").rglob("*.py"):
        if path.name not in ("notes.py", "fields.py", "filter.py", "cli.py"):
            given.update(GIVEN.findall(path.read_text(encoding="utf-8")))
    assert given, "no note ids found: the scan is broken"
    assert given <= set(EXPERT), sorted(given - set(EXPERT))


def test_the_table_names_each_id_once_with_its_meaning():
    ids = [expert.id for expert in EXPERT_IDS]
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"[a-z]+\.[a-z0-9_]+", i) and EXPERT[i].meaning for i in ids)


def test_notes_without_an_id_still_work():
    plain = warn("something odd", 4)
    assert plain == Note(Severity.WARN, "something odd", 4) and plain.id == ""
    assert str(warn("gap", 4, id="tcp.gap")) == "warn: gap at 0x0004"


# --- every note a stage actually gives carries a documented id ---------------------------

ROUNDS = 60  # mutated captures per seed capture; each reaches different note sites


def _notes_of(data: bytes) -> Iterator[Note]:
    """Every note reading `data` gives: reported, on messages, and in their trees."""
    reported: list[Note] = []
    try:
        for message in read_messages(io.BytesIO(data), report=reported.append):
            yield from message.frame.notes
            yield from message.notes
            for node in message.tree(keep=False).nodes():
                yield from node.notes
    except CaptureError:
        pass  # the file header itself is damaged: an error, not a note
    yield from reported


def _record_notes(data: bytes) -> Iterator[Note]:
    for entry in decode_records(data):
        yield from getattr(entry, "notes", ())
        for inner in getattr(entry, "records", ()) or getattr(entry, "messages", ()) or ():
            yield from getattr(inner, "notes", ())


def _unnamed(notes: Iterable[Note], seen: set[str]) -> list[str]:
    unnamed = []
    for found in notes:
        if found.id:
            seen.add(found.id)
        else:
            unnamed.append(str(found))
    return unnamed


def test_every_note_on_real_and_damaged_captures_has_a_documented_id(tmp_path: Path):
    rng = random.Random(20261130)
    models = capture_seeds()
    seen: set[str] = set()
    unnamed: list[str] = []
    inputs = [path.read_bytes() for path in (*CAPTURES.glob("*.pcap"), *REGRESSIONS.glob("pipeline-*.pcap"))]
    inputs += [mutate_capture(model, rng, models) for model in models for _ in range(ROUNDS)]
    variants = pathology.build(CAPTURES / "tansu_records.pcap", tmp_path, pathology.Settings(seed=7))
    inputs += [path.read_bytes() for path in variants.values()]
    for data in inputs:
        unnamed += _unnamed(_notes_of(data), seen)
    record_sets = [path.read_bytes() for path in REGRESSIONS.glob("records-*.records")]
    record_sets += [mutate_records(batch, rng) for batch in built_record_sets() for _ in range(20)]
    for data in record_sets:
        unnamed += _unnamed(_record_notes(data), seen)
    assert not unnamed, sorted(set(unnamed))[:20]
    assert seen <= set(EXPERT), sorted(seen - set(EXPERT))
    # The damage reached the stages: ids from reading, framing, bodies and records were given.
    assert {"tcp.lost_bytes", "tcp.retransmission", "kafka.resync", "kafka.malformed",
            "kafka.crc_mismatch", "pcap.cut_short"} <= seen, sorted(seen)


def test_the_readme_table_lists_every_id_with_its_severity():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for expert in EXPERT_IDS:
        assert f"| `{expert.id}` | {expert.severity} | {expert.group} |" in readme, expert.id
