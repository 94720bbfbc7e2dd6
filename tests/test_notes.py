"""Expert note ids: every id a stage gives is documented once, in `EXPERT_IDS`."""

from __future__ import annotations

import re
from pathlib import Path

from kdissect.notes import EXPERT, EXPERT_IDS, Note, Severity, warn

ROOT = Path(__file__).resolve().parents[1]
# A note id as the code gives it: `id="kafka.unanswered"` (module names such as
# "kdissect.present" are not ids).
GIVEN = re.compile(r"""\bid=["']((?:kafka|tcp|tls|pcap|kdissect)\.[a-z_]+)["']""")


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
    assert all(re.fullmatch(r"[a-z]+\.[a-z_]+", i) and EXPERT[i].meaning for i in ids)


def test_notes_without_an_id_still_work():
    plain = warn("something odd", 4)
    assert plain == Note(Severity.WARN, "something odd", 4) and plain.id == ""
    assert str(warn("gap", 4, id="tcp.gap")) == "warn: gap at 0x0004"
