"""A capture's tables built on several processes (`read_pcap(..., jobs=N)`), equal to one's.

A table's rows follow its messages in capture order, and each message's rows depend
only on the message and its pair. So the capture's messages are cut once into
consecutive runs of about equal bytes, `RUNS_PER_JOB` per worker process, dealt out in
turn (run i to worker i mod N) so that every worker holds some of each part of the
capture. Each worker is sent its runs once, with the pairs of their messages that lie
outside them, rebuilds the messages (header fields, frame, notes, pair) and keeps them
for every table after: a table is then one short request to each worker, which builds
it over each of its runs with the same code as one process and sends the parts back.
The parent puts the parts in run order and concatenates them; categorical columns are
made again over the whole column, as one process makes them: categories sorted, or in
order of appearance for `fields`. A tree the parent built since the last table (its
notes show in the tables) is built in the worker too before the next table.

The workers (`kdissect.parallel.worker_context`) are started with a capture's first
table, take the parent's message definitions, and end with the capture (or when this
process ends); one that dies raises `WorkerError`. A capture of fewer than
`PARALLEL_MESSAGES` messages builds its tables in this process: shipping costs more
than it saves.

The per-API tables are made sooner, by the workers that read the capture
(`read_pcap`): each already holds every message of its connections, paired, so once
its share is read it makes every per-API table over them (`api_tables`) while this
process still merges, and sends each table as soon as it is made (`_EarlyParts`): this
process joins one table's parts while the workers still make the next, rather than all
of them once the last worker is done. Its rows carry the worker's own message numbers
and connection indexes; here they become the capture's (`kdissect.parallel.Finished`),
and the rows of the workers are put in message order (a stable sort by number: each
message's rows stay as made), the messages `read_pcap` left out dropped. Only a tree
built here before the first per-API table is asked for (its notes show in the tables)
sends them the long way.
When `read_pcap` keeps every message, this process does not even make them while the
workers read (`kdissect.parallel.read_to_come`): the per-API tables need only the
numbers, and the messages are made the first time something else needs them. Nor do
the other tables (messages, exchanges, fields, records, batches) need them: the reading
workers keep their shares after their per-API tables and make those too when asked
(`share_table`), even in the middle of their pass (`parallel.serve_waiting`); their
parts are put together as above, the numbers of messages in the `pair`, `request` and
`response` columns and in pairing notes made the capture's. Only this process knows
where holding a request back broke a bound (`pair.pairing.release_notes`: the bounds count
every connection's messages): it adds those notes to the messages table. Table workers
are started only where the reading workers cannot serve: messages made while reading
(`lazy=False`, a filter), or a tree built here. Reading workers that do not keep their
shares end once their per-API tables are sent: those are taken in before table workers
start (`TableJobs._reading_done`), so that no reader thread is left and they are forked.
With `findings=True` the reading workers first find the facts of every body, then make
only the per-API tables the detectors read (`api_facts_and_tables`,
`findings.TABLES_READ`): those bodies are all `--findings` and the report decode; any
other per-API table is asked of them later, as the tables that are not per-API are.
A share held so also answers what a function of a module makes of it (`share_answer`):
`HeldShares` asks each worker, piece after piece (`ShareStream`), for the report's trees
(`report.share_details`).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import gc
import re
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pandas.api.types import union_categoricals

from kdissect.decode.schema import DefinitionSource
from kdissect.decode.values import cycle_collection_paused
from kdissect.ingest.framing import Connection, Direction, Frame
from kdissect.notes import listed
from kdissect.pair.message import Message
from kdissect.parallel import (
    Finished,
    MessagesToCome,
    WorkerError,
    close_inherited,
    died,
    inherited,
    portable_definitions,
    serve_waiting,
    use_definitions,
    worker_context,
)
from kdissect.present.columns import column

PARALLEL_MESSAGES = 20_000  # messages of a capture from which its tables are built on the workers
RUNS_PER_JOB = 2  # runs of messages per worker process, to even out their cost over every table
MESSAGE_BYTES = 200  # what a message costs beyond its bytes, in bytes, when runs are cut

State = tuple[Any, ...]
# (a run's messages, the table's name, a dict kept per run for tables made ahead) -> the table
Builder = Callable[[list[Message], str, dict[str, pd.DataFrame]], pd.DataFrame]
# a share's messages (and what to call now and then during the pass) -> every per-API
# table over them, (name, table) one by one as made
Maker = Callable[..., Iterator[tuple[str, pd.DataFrame]]]
Part = tuple[pd.DataFrame, np.ndarray, np.ndarray]  # a worker's rows of a table, their numbers and streams
Link = tuple[int, Any, Any, bool]  # a connection: index, client, server, tls

WORKER_CPU: dict[int, float] = {}  # CPU seconds each table worker has spent, by process id


class TableJobs:
    """The worker processes of one capture's tables, each keeping its runs of messages."""

    def __init__(self, jobs: int, early: Finished | None = None, facts: bool = False) -> None:
        self.jobs = jobs
        self.early = early  # the per-API tables the reading workers make
        self.facts = facts  # and their body facts first (`api_facts_and_tables`)
        self.found: tuple[Any, Any] | None = None  # those facts, once taken
        self.early_parts: _EarlyParts | None = None
        self.places: _Places | None = None  # where the reading workers' messages are in the capture
        if early is not None:
            weakref.finalize(self, early.stop)
        self.messages: list[Message] | None = None  # the list the workers hold runs of
        self.pipes: list[Any] = []
        self.processes: list[Any] = []
        self.trees: set[int] = set()  # messages whose trees the workers have built

    def build(self, name: str, messages: list[Message] | MessagesToCome, feeds: Callable[[Message], bool],
              dtypes: dict[str, str], builder: Builder) -> pd.DataFrame | None:
        """Table `name` over `messages` on the workers, each run made into the table by
        `builder` (a module-level function, sent by name, which keeps the messages that
        feed the table as it does in one process); None when it is not worth it.
        Messages still to come are made only when the reading workers' tables cannot serve."""
        del feeds  # each worker's builder chooses the messages that feed the table
        if name in _api_table_names():
            self._early_parts(messages)
        if self.early_parts is not None and (early := self.early_parts.parts(name)) is not None:
            return _early_table(messages, early, dtypes)
        if self._answering(messages):  # by the workers that hold their shares
            assert self.early is not None
            places = self._places()
            # the messages' notes name messages by number: those workers are told the capture's
            requests = [(name, numbers if name == "messages" else None) for numbers in places.numbers]
            answers = [(part, places.numbers[worker], places.stream_of[worker])
                       for worker, part in enumerate(self.early.answers(requests))]
            table = _early_table(messages, answers, dtypes, NUMBERED.get(name, ("number",)),
                                 appearance=name == "fields")
            return _released(table) if name == "messages" else table
        if not isinstance(messages, list):
            messages = messages.get()
        definitions = portable_definitions()
        if len(messages) < PARALLEL_MESSAGES or definitions is None:
            return None
        if self.messages is not messages:
            self._start(messages, definitions)
        trees = [m.number for m in messages if m._tree is not None and m.number not in self.trees]
        self.trees.update(trees)
        replies = self._ask(("table", builder, name, trees))
        parts = sorted((part for reply in replies for part in reply), key=lambda part: part[0])
        return concatenated([frame for _run, frame in parts], dtypes, appearance=name == "fields")

    def body_facts(self, messages: list[Message] | MessagesToCome) -> tuple[Any, Any] | None:
        """The facts of every body (`findings.BodyFacts`) and the topics (`topic_stats.Topics`,
        None where they cannot be merged) the reading workers found, as one pass over the
        capture finds them; None where they found none, or their parts are not used (as for
        the per-API tables)."""
        if self.found is None and self.facts:
            self._early_parts(messages)
            parts = None if self.early_parts is None else self.early_parts.parts(FACTS)
            if parts is not None:
                from kdissect.present.findings import renumbered_facts
                from kdissect.present.topic_stats import merged_topics

                self.found = (renumbered_facts([(facts, numbers, streams) for (facts, _), numbers, streams in parts]),
                              merged_topics([(topics, numbers) for (_, topics), numbers, _streams in parts]))
        return self.found

    def held_shares(self, messages: list[Message] | MessagesToCome) -> HeldShares | None:
        """The shares the reading workers hold (`read_to_come`), for what they make of them
        on request; None where they hold none, or trees were built here (as for the tables:
        `_answering`)."""
        if not self._answering(messages):
            return None
        return HeldShares(self.early, self._places())  # type: ignore[arg-type]

    def _answering(self, messages: list[Message] | MessagesToCome) -> bool:
        """Whether the reading workers, which hold their shares, make a table that is not
        per-API (`parallel.Finished.answers`): unless trees were built here (their notes
        show in the tables, which are then made the long way)."""
        if self.early is None or not self.early.answering():
            return False
        return not isinstance(messages, list) or all(m._tree is None for m in messages)

    def _places(self) -> _Places:
        if self.places is None:
            assert self.early is not None
            self.places = _Places(self.early)
        return self.places

    def _early_parts(self, messages: list[Message] | MessagesToCome) -> None:
        """Take the reading workers' parts, unless trees were built here before the first was
        asked for: their notes show in the tables, which are then made the long way."""
        if self.early is None or self.early_parts is not None:
            return
        if isinstance(messages, list) and any(m._tree is not None for m in messages):  # the long way
            self.early.stop()
            self.early = None
        else:
            self.early_parts = _EarlyParts(self.early, self._places(), _early_names(self.facts))

    def _start(self, messages: list[Message], definitions: tuple[DefinitionSource, ...]) -> None:
        self.stop()
        self._reading_done(messages)
        context = worker_context(serve)
        for index in range(self.jobs):
            mine, theirs = context.Pipe()
            process = context.Process(target=serve, args=(theirs, definitions, inherited(context, [*self.pipes, mine])),
                                      daemon=True, name=f"kdissect-tables-{index}")
            process.start()
            theirs.close()
            self.pipes.append(mine)
            self.processes.append(process)
        weakref.finalize(self, _stop, self.pipes, self.processes)
        self.messages, self.trees = messages, {m.number for m in messages if m._tree is not None}
        runs = _runs(messages, self.jobs * RUNS_PER_JOB)
        for index, pipe in enumerate(self.pipes):
            _put(pipe, ("keep", *_shipment(runs, index, self.jobs)), index, self.processes[index])
        self._ask(None)

    def _reading_done(self, messages: list[Message]) -> None:
        """Reading workers that do not hold their shares (messages made while reading) end
        once they have sent their per-API tables: these are taken in first, so that their
        team's reader threads are gone and the table workers are forked (in milliseconds,
        with no `if __name__ == "__main__":` guard needed) rather than started by the fork
        server."""
        if self.early is None or self.early.answering():
            return
        self._early_parts(messages)
        if self.early_parts is not None:
            self.early_parts.take_all()

    def _ask(self, request: tuple[Any, ...] | None) -> list[Any]:
        """`request` to every worker (None: only their answers to what was sent), then
        every answer, in worker order."""
        if request is not None:
            for index, (pipe, process) in enumerate(zip(self.pipes, self.processes, strict=True)):
                _put(pipe, request, index, process)
        answers = []
        for index, (pipe, process) in enumerate(zip(self.pipes, self.processes, strict=True)):
            try:
                kind, payload, seconds = pipe.recv()
            except (EOFError, OSError):
                problem = died(f"table worker {index}", process, "its tables")
                self.stop()
                raise problem from None
            if kind == "error":
                self.stop()
                raise WorkerError(f"table worker {index} failed: {payload}")
            WORKER_CPU[process.pid] = seconds
            answers.append(payload)
        return answers

    def stop(self) -> None:
        _stop(self.pipes, self.processes)
        self.pipes, self.processes, self.messages = [], [], None


def _api_table_names() -> set[str]:
    from kdissect.present.tables import TABLES

    return set(TABLES)


def _early_names(facts: bool) -> set[str]:
    """The parts each reading worker makes: every per-API table, or (`facts`) the bodies'
    facts and the per-API tables the detectors read (`api_facts_and_tables`)."""
    if not facts:
        return _api_table_names()
    from kdissect.present.findings import TABLES_READ

    return {FACTS, *TABLES_READ}


def api_tables(made: Maker, messages: list[Message], names: Sequence[str] | None = None,
               ) -> Iterator[tuple[str, pd.DataFrame]]:
    """In a reading worker: every per-API table (or those `names`) over the messages of its
    share, made by `made` (`analysis.api_frames_made`) together, as one process makes them,
    and yielded one by one as made, to be sent while the next is made. A worker that holds
    its share answers what it is asked meanwhile (`parallel.serve_waiting`) during the
    pass too."""
    from kdissect.present.tables import TABLES

    with cycle_collection_paused():
        yield from made(messages, None if names is None else [TABLES[name] for name in names], pause=serve_waiting)


# In a reading worker, which holds one share for its life: a table made over the share
# together with another (`analysis.table_of`'s `ahead`: the batches with the records), until
# it is asked for.
_SHARE_AHEAD: dict[str, Any] = {}


def share_table(made: Callable[..., pd.DataFrame], messages: list[Message],
                request: tuple[str, np.ndarray | None]) -> pd.DataFrame:
    """In a reading worker that holds its share (`parallel.read_to_come`'s `answer`): table
    `name` over the share's messages, made by `made` (`analysis.table_of`) as one process
    makes it, numbered within the worker; `request` is (name, the capture's number of each
    message of the share, for the messages table, whose notes may name messages). A
    per-API table is made alone (those the detectors read were made already)."""
    name, numbers = request
    with cycle_collection_paused():
        table = made(messages, name, None if name in _api_table_names() else _SHARE_AHEAD)
        if name == "messages":  # and what releasing in capture order reads (`_released`)
            assert numbers is not None
            _notes_renumbered(table, messages, numbers)
            count = len(messages)
            table["_size"] = np.fromiter((len(m.frame.data) for m in messages), np.int64, count)
            table["_expects"] = np.fromiter((m.expects_response for m in messages), bool, count)
            last = [m.frame.last_ns for m in messages]
            try:
                table["_last_ns"] = np.array(last, dtype=np.int64)
            except OverflowError:  # a capture time far off
                table["_last_ns"] = pd.Series(last, dtype=object)
        return table


def share_answer(made: Callable[..., pd.DataFrame], messages: list[Message],
                 request: tuple[Any, ...]) -> Any:
    """In a reading worker that holds its share (`parallel.read_to_come`'s `answer`): a
    table (`share_table`'s request), or for (function, *arguments) what the function (one
    of a module, sent by name: `HeldShares.stream`) makes of the share and the arguments."""
    if callable(request[0]):
        function, *arguments = request
        return function(messages, *arguments)
    return share_table(made, messages, request)


class HeldShares:
    """The shares the reading workers hold once read (`read_pcap` with several jobs and
    every message kept), for what each makes of its own share on request."""

    def __init__(self, early: Finished, places: _Places) -> None:
        self.early, self.numbers = early, places.numbers
        self.count = len(self.numbers)  # the workers

    def owners(self) -> np.ndarray:
        """The worker that holds each message, in capture order."""
        owner = np.full(sum(len(numbers) for numbers in self.numbers), -1, dtype=np.int64)
        for worker, numbers in enumerate(self.numbers):
            owner[numbers - 1] = worker
        if len(owner) and owner.min() < 0:  # every message is in one share: nothing was left out
            raise WorkerError("the workers' shares do not hold every message of the capture")
        return owner

    def stream(self, function: Callable[..., list[Any]], *arguments: Any, ahead: int = 2) -> ShareStream:
        """What `function(share, first, *arguments)` makes of each worker's share, piece
        after piece (`ShareStream`), the first `ahead` pieces asked at once."""
        return ShareStream(self.early, self.count, function, arguments, ahead)


class ShareStream:
    """What `function(share, first, *arguments)` (one of a module: it is sent by name) makes
    of each worker's share, a piece at a time: a list of entries, from the share's start
    (`first` true) and then on from where the last piece ended (the function keeps its
    place in the worker); an empty one once the share is done. `next(worker)` gives that
    worker's entries one by one, in order. The first `ahead` pieces are asked of each
    worker at once, and from then on AHEAD are asked before they are needed, so that the
    workers make them while this process does something else or takes the last ones;
    those never taken are let go when the stream is closed (a `with` block). A worker
    answers in the order asked, on one pipe: while the stream is open nothing else is
    asked of the workers (a table, their frames: the report takes the messages first)."""

    AHEAD = 2

    def __init__(self, early: Finished, workers: int, function: Callable[..., list[Any]],
                 arguments: tuple[Any, ...], ahead: int = AHEAD) -> None:
        self.early, self.function, self.arguments = early, function, arguments
        self.entries: list[collections.deque[Any]] = [collections.deque() for _ in range(workers)]
        self.asked = [0] * workers  # pieces asked of each worker and not yet taken
        for worker in range(workers):
            self.early.ask(worker, (function, True, *arguments))
            self.asked[worker] = 1
            self._ask_ahead(worker, ahead)

    def next(self, worker: int) -> Any:
        entries = self.entries[worker]
        while not entries:
            piece = self.early.answer(worker)
            self.asked[worker] -= 1
            if not piece:
                raise WorkerError(f"worker {worker} has no more of its share to give")
            entries.extend(piece)
            self._ask_ahead(worker, self.AHEAD)
        return entries.popleft()

    def _ask_ahead(self, worker: int, ahead: int) -> None:
        while self.asked[worker] < ahead:
            self.early.ask(worker, (self.function, False, *self.arguments))
            self.asked[worker] += 1

    def __enter__(self) -> ShareStream:
        return self

    def __exit__(self, *_exception: object) -> None:
        for worker, asked in enumerate(self.asked):
            if asked:
                self.early.let_go(worker, asked)
        self.asked = [0] * len(self.asked)


FACTS = "body facts"  # the part of a reading worker that is no table (`api_facts_and_tables`)


def api_facts_and_tables(made: Maker, messages: list[Message]) -> Iterator[tuple[str, Any]]:
    """The facts of every body of the share (`findings.body_facts_of`) and the topics
    counted from the same values (`topic_stats.Topics`), then the per-API tables the
    detectors read (`api_tables` of `findings.TABLES_READ`), for a caller that reads them
    all (`--findings`, the report): found here, each worker its share."""
    from kdissect.present.findings import TABLES_READ, body_facts_of
    from kdissect.present.topic_stats import Topics

    with cycle_collection_paused():
        topics = Topics()
        yield FACTS, (body_facts_of(messages, on_values=topics.add_message, pause=serve_waiting), topics)
    yield from api_tables(made, messages, TABLES_READ)


class _Places:
    """Where each reading worker's messages and connections are in the capture: arrays that
    give the capture's number of a message from the worker's (index: its number minus
    one), and the capture's index of a connection from the worker's (index: its index)."""

    def __init__(self, early: Finished) -> None:
        self.numbers = [np.asarray(numbers, dtype=np.int64) for numbers in early.numbers]
        self.stream_of = []
        for streams in early.streams:
            stream_of = np.zeros(max(streams, default=-1) + 1, dtype=np.int64)
            stream_of[list(streams)] = list(streams.values())
            self.stream_of.append(stream_of)


class _EarlyParts:
    """The per-API tables the reading workers make, each worker's kept as they come, with
    where its messages and connections are in the capture (`_Places`)."""

    def __init__(self, early: Finished, places: _Places, expected: set[str]) -> None:
        self.early = early
        self.numbers, self.stream_of = places.numbers, places.stream_of
        self.tables: list[dict[str, pd.DataFrame]] = [{} for _ in early.numbers]  # come, not yet asked for
        self.given: set[str] = set()  # the tables handed on (the capture keeps them)
        self.expected = expected  # what each worker makes
        self.received = [0] * len(early.numbers)  # tables come from each worker

    def parts(self, name: str) -> list[Part] | None:
        """Each worker's part of table `name`, waited for; None if the workers make no
        such table, or it was handed on already."""
        if name not in self.expected or name in self.given:
            return None
        for worker, tables in enumerate(self.tables):  # (a wait interrupted loses nothing)
            while name not in tables:
                self._next(worker)
        self.given.add(name)
        return [(tables.pop(name), self.numbers[worker], self.stream_of[worker])
                for worker, tables in enumerate(self.tables)]

    def take_all(self) -> None:
        """Every part still to come, kept until asked for: the workers then end."""
        for worker, received in enumerate(self.received):
            for _ in range(received, len(self.expected)):
                self._next(worker)

    def _next(self, worker: int) -> None:
        """The next table `worker` sent, kept; after its last, its end too (which says its
        CPU seconds)."""
        part = self.early.part(worker)
        if part is None:
            raise WorkerError(f"worker {worker} ended without making every part")
        name, table = part
        self.tables[worker][name] = table
        self.received[worker] += 1
        if self.received[worker] < len(self.expected):
            return
        if self.early.part(worker) is not None:  # its end comes right after its last table
            raise WorkerError(f"worker {worker} sent more than its parts")
        if None not in self.early.ended:
            for process, seconds in zip(self.early.team.processes, self.early.cpu(), strict=True):
                WORKER_CPU[process.pid] = seconds


NUMBERED = {"messages": ("number", "pair"), "exchanges": ("request", "response")}  # else ("number",)


def _early_table(messages: list[Message] | MessagesToCome, parts: list[Part], dtypes: dict[str, str],
                 numbered: tuple[str, ...] = ("number",), *, appearance: bool = False) -> pd.DataFrame:
    """A table from the reading workers' `parts`: the capture's numbers (in the columns
    `numbered`: the first, or where it is missing the next, places a row) and connections,
    only the messages kept, rows in message order. Each column is made once from the
    parts (joined, then taken in that order); categories sorted, or (`appearance`) in
    order of appearance."""
    total = sum(len(numbers) for _part, numbers, _streams in parts)
    kept = None
    if isinstance(messages, list) and total != len(messages):
        kept = np.fromiter((m.number for m in messages), np.int64, len(messages))
    found = []
    for part, numbers, stream_of in parts:
        columns: dict[str, Any] = dict(part.items())
        columns[numbered[0]], place = _renumbered(part[numbered[0]], numbers)
        for name in numbered[1:]:
            columns[name], number = _renumbered(part[name], numbers)
            place = np.where(place == 0, number, place)
        if "stream" in columns:
            columns["stream"] = stream_of[part["stream"].to_numpy(dtype=np.int64)]
        if kept is not None:
            keep = np.isin(place, kept)
            columns = {name: _taken(column, keep) for name, column in columns.items()}
            place = place[keep]
        found.append((columns, place))
    filled = [item for item in found if len(item[1])] or found[:1]
    categorical = [name for name in filled[0][0] if dtypes.get(name) == "category"]
    if len(filled) == 1:
        frame = pd.DataFrame(filled[0][0], copy=False).reset_index(drop=True)
        return _categories_remade(frame, dict.fromkeys(categorical, "category"), appearance=appearance)
    order = np.argsort(np.concatenate([place for _columns, place in filled]), kind="stable")  # rows of a message stay as made
    joined_columns: dict[str, Any] = {}
    remade = {}  # the categorical columns still to be made from their text
    for name in filled[0][0]:
        joined, whole = _joined([pd.Series(columns[name], copy=False) for columns, _place in filled],
                                dtypes.get(name), unused=kept is not None)
        joined_columns[name] = joined.take(order)
        if name in categorical and (appearance or not whole):
            remade[name] = "category"
    return _categories_remade(pd.DataFrame(joined_columns, copy=False), remade, appearance=appearance)


def _notes_renumbered(table: pd.DataFrame, messages: list[Message], numbers: np.ndarray) -> None:
    """The notes column of a share's messages table, where a pairing note names another
    message (`pair.pairing`: a duplicate correlation id, a response out of order), with
    the capture's number of that message (`numbers`, by the worker's number minus one):
    those notes are this project's own words around one number, found by their ids."""
    places = [place for place, message in enumerate(messages)
              if any(note.id in _NAMING for note in message.notes)]
    if not places:
        return
    notes = table["notes"].to_numpy(dtype=object, na_value="")
    for place in places:
        notes[place] = listed(dataclasses.replace(note, message=_NUMBER.sub(
            lambda found: f"#{numbers[int(found.group(1)) - 1]}", note.message)) if note.id in _NAMING else note
            for note in messages[place].all_notes())
    table["notes"] = column(notes.tolist(), "string")


_NAMING = frozenset({"kafka.duplicate_correlation_id", "kafka.response_out_of_order"})
_NUMBER = re.compile(r"#(\d+)")


def _released(table: pd.DataFrame) -> pd.DataFrame:
    """The messages table of the reading workers with the notes releasing in capture order
    gives (`pair.pairing.release_notes`), which no worker could make (the bounds on holding
    a request count every connection's messages), added to its notes as one process adds
    them: last. The columns only that needed (`share_table`) are left out."""
    from kdissect.pair.pairing import release_notes

    size, expects, last_ns = (table.pop(name) for name in ("_size", "_expects", "_last_ns"))
    count = len(table)
    pair = table["pair"].to_numpy(dtype=np.int64, na_value=0)
    waiting = ((table["direction"] == "request").to_numpy(dtype=bool) & expects.to_numpy(dtype=bool)
               & table["correlation_id"].notna().to_numpy(dtype=bool))
    answered_at = np.where(pair > 0, pair - 1, count)  # numbers run 1 to `count`, in capture order
    found = release_notes(waiting, answered_at, last_ns.to_numpy(), size.to_numpy())
    if found:
        notes = table["notes"].to_numpy(dtype=object, na_value="")
        for place, note in found:
            notes[place] = listed([note]) if not notes[place] else f"{notes[place]}; {listed([note])}"
        table["notes"] = column(notes.tolist(), "string")
    return table


def _renumbered(column: pd.Series, numbers: np.ndarray) -> tuple[Any, np.ndarray]:
    """A column of a worker's message numbers as the capture's (a missing one stays
    missing), and those as an array, 0 where missing."""
    array = column.array
    if isinstance(array, pd.arrays.IntegerArray):
        missing = np.asarray(array.isna())
        number = numbers[array.to_numpy(dtype=np.int64, na_value=1) - 1]
        number[missing] = 0
        return pd.arrays.IntegerArray(number.copy(), missing), number
    number = numbers[column.to_numpy(dtype=np.int64) - 1]
    return number, number


def _taken(column: Any, keep: np.ndarray) -> Any:
    return column[keep].reset_index(drop=True) if isinstance(column, pd.Series) else column[keep]


def _joined(columns: list[pd.Series], dtype: str | None, *, unused: bool) -> tuple[Any, bool]:
    """The parts of a column one after the other, and whether a categorical one is whole:
    its parts all categorical, joined by their categories (their sorted union, as one
    process makes them over the whole column, without reading the values again; `unused`:
    some rows were left out, so some categories may be too)."""
    arrays = [column.array for column in columns]
    if dtype == "category" and all(isinstance(array.dtype, pd.CategoricalDtype) for array in arrays):
        if unused:
            arrays = [array.remove_unused_categories() for array in arrays]
        with contextlib.suppress(TypeError):  # categories of different types: made from the text
            return union_categoricals(arrays, sort_categories=True, ignore_order=True), True
    first = arrays[0].dtype
    if all(array.dtype == first for array in arrays) and not isinstance(first, pd.CategoricalDtype):
        if isinstance(first, np.dtype):
            return np.concatenate([column.to_numpy() for column in columns]), False
        joined = type(arrays[0])._concat_same_type(arrays)
        if isinstance(joined, pd.arrays.ArrowStringArray):  # Arrow takes from one chunk much faster
            whole = pa.array(joined)
            if isinstance(whole, pa.ChunkedArray):
                whole = whole.combine_chunks()
            joined = pd.arrays.ArrowStringArray(whole, dtype=joined.dtype)
        return joined, False
    return pd.concat(columns, ignore_index=True).array, False


def _put(pipe: Any, request: tuple[Any, ...], index: int, process: Any) -> None:
    try:
        pipe.send(request)
    except OSError:  # it ended: why, in words (`parallel.died`: an unguarded script, say)
        raise died(f"table worker {index}", process, "its tables") from None


def _stop(pipes: list[Any], processes: list[Any]) -> None:
    for pipe in pipes:
        with contextlib.suppress(OSError):
            pipe.close()  # the worker reads the end of its pipe and ends
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join()


def _runs(messages: list[Message], count: int) -> list[list[Message]]:
    """`messages` cut into `count` (or fewer) consecutive runs of about equal bytes."""
    total = sum(len(m.frame.data) for m in messages) + MESSAGE_BYTES * len(messages)
    runs: list[list[Message]] = [[]]
    size, share = 0, total / count
    for message in messages:
        if size >= share * len(runs):
            runs.append([])
        runs[-1].append(message)
        size += len(message.frame.data) + MESSAGE_BYTES
    return runs


def _shipment(runs: list[list[Message]], worker: int, jobs: int) -> tuple[Any, ...]:
    """What `worker` keeps: its runs (by index) as plain data, the pairs they need from
    outside them, and the connections of both."""
    mine = [(index, run) for index, run in enumerate(runs) if index % jobs == worker]
    inside = {id(message) for _index, run in mine for message in run}
    context = [pair for _index, run in mine for message in run
               if (pair := message.pair) is not None and id(pair) not in inside]
    links: dict[int, Link] = {}
    for message in (*context, *(m for _index, run in mine for m in run)):
        connection = message.frame.connection
        links.setdefault(connection.index, (connection.index, connection.client, connection.server,
                                            connection.tls))
    return ([(index, [_state(m) for m in run]) for index, run in mine],
            [_state(m) for m in context], list(links.values()))


def _state(message: Message) -> State:
    frame = message.frame
    pair = message.pair
    return (message.number, frame.connection.index, frame.direction is Direction.REQUEST,
            frame.stream_offset, frame.data, frame.first_packet, frame.first_ns, frame.last_packet,
            frame.last_ns, frame.complete, frame.notes, message.is_request, message.correlation_id,
            message.api_key, message.api_version, message.client_id, message.expects_response,
            message.file, tuple(message.notes), None if pair is None else pair.number)


# --- the worker --------------------------------------------------------------


def serve(pipe: Any, definitions: tuple[DefinitionSource, ...] | None, parents_ends: Sequence[Any] = ()) -> None:
    """A table worker: keeps its runs of messages and builds tables over them on request,
    until its pipe ends. Each answer is (kind, payload, CPU seconds so far). `parents_ends`:
    the parent's ends of the pipes, which a forked worker holds too (`parallel.inherited`)."""
    close_inherited(parents_ends)
    runs: list[tuple[int, list[Message]]] = []
    built: dict[int, Message] = {}
    ahead: dict[int, dict[str, pd.DataFrame]] = {}  # per run: tables made before they are asked for
    try:
        use_definitions(definitions)
        while True:
            try:
                with cycle_collection_paused():  # a shipment is many objects, none in a cycle
                    request = pipe.recv()
            except (EOFError, OSError):
                return
            try:
                if request[0] == "keep":
                    with cycle_collection_paused():
                        runs, built = _kept(*request[1:])
                    ahead = {index: {} for index, _run in runs}
                    gc.freeze()  # kept for every table: the cycle collector need not walk them again
                    answer: tuple[str, Any] = ("kept", None)
                else:
                    _what, builder, name, trees = request
                    own = {message.number for _index, run in runs for message in run}
                    for number in trees:
                        if number in own:
                            built[number].tree()  # built in the parent: its notes show in the tables
                    answer = ("parts", [(index, builder(run, name, ahead[index])) for index, run in runs])
            except Exception as problem:  # every failure goes to the parent, in words
                answer = ("error", f"{type(problem).__name__}: {problem}")
            pipe.send((*answer, time.process_time()))
    finally:
        pipe.close()


def _kept(runs: list[tuple[int, list[State]]], context: list[State],
          links: list[Link]) -> tuple[list[tuple[int, list[Message]]], dict[int, Message]]:
    """The worker's runs as messages, paired as in the parent, and every message it holds by
    number (which keeps alive the responses its requests refer to weakly)."""
    connections = {link[0]: Connection(*link) for link in links}
    states = [*context, *(state for _index, run in runs for state in run)]
    built = {state[0]: _message(state, connections) for state in states}
    for state in states:
        message, pair = built[state[0]], built.get(state[19]) if state[19] is not None else None
        if message.is_request and pair is not None and message._pair is None:
            message.link(pair)
    return [(index, [built[state[0]] for state in run]) for index, run in runs], built


def _message(state: State, connections: dict[int, Connection]) -> Message:
    (number, link, request, offset, data, first, first_ns, last, last_ns, complete, frame_notes,
     is_request, correlation_id, api_key, api_version, client_id, expects_response, file, notes,
     _pair) = state
    frame = Frame(connections[link], Direction.REQUEST if request else Direction.RESPONSE, offset, data,
                  first, first_ns, last, last_ns, complete, frame_notes)
    return Message(number, frame, is_request, correlation_id, api_key, api_version, client_id,
                   expects_response, file, list(notes))


def concatenated(parts: list[pd.DataFrame], dtypes: dict[str, str], *, appearance: bool) -> pd.DataFrame:
    """The parts of a table one after the other, categoricals as one process makes them.
    Each column is joined as `_early_table` joins it: categorical parts by their codes
    (`_joined`), not by `pd.concat`, which makes text of categoricals whose categories
    differ: for the 20 million rows of `fields` on 100 MB, 15 s and 3.5 GB."""
    filled = [part for part in parts if len(part)] or parts[:1]
    if len(filled) == 1:
        return _categories_remade(filled[0].reset_index(drop=True), dtypes, appearance=appearance)
    columns = {name: _joined([part[name] for part in filled], dtypes.get(name), unused=False)[0]
               for name in filled[0].columns}
    return _categories_remade(pd.DataFrame(columns, copy=False), dtypes, appearance=appearance)


def _categories_remade(frame: pd.DataFrame, dtypes: dict[str, str], *, appearance: bool) -> pd.DataFrame:
    """Categorical columns made again over the whole column, as one process makes them:
    categories sorted, or (`appearance`) in order of appearance."""
    for name, dtype in dtypes.items():
        if dtype != "category":
            continue
        remade = _recoded(frame[name], appearance=appearance)
        if remade is not None:
            frame[name] = remade
            continue
        text = pd.array(frame[name].astype(object), dtype="str")
        if appearance:
            codes, categories = pd.factorize(text)
            frame[name] = pd.Categorical.from_codes(codes, pd.Index(categories.to_numpy(dtype=object), dtype="str"))
        else:
            frame[name] = pd.Categorical(text)
    return frame


def _recoded(column: pd.Series, *, appearance: bool) -> pd.Categorical | None:
    """A categorical column whose categories are distinct as text made again from its codes,
    which is what making it again from its text gives, without that text: categories in
    order of appearance, or the values present sorted as pandas sorts them (it sorts them
    here, the few of them, rather than the whole column). None for any other column."""
    if not isinstance(column.dtype, pd.CategoricalDtype):
        return None
    # as text as the text's way makes it (numpy's own text would drop trailing NULs)
    categories = pd.Index(pd.array(column.cat.categories.to_numpy(dtype=object), dtype="str"))
    if not categories.is_unique:
        return None
    codes = np.asarray(column.cat.codes, dtype=np.int64)
    present = codes >= 0
    if appearance:
        found, used = pd.factorize(codes[present])
    else:
        used = np.unique(codes[present])
        found = np.searchsorted(used, codes[present])
    chosen = pd.Index(categories[used].to_numpy(dtype=object), dtype="str")
    if not appearance:
        ordered = pd.Categorical(chosen).categories  # as pandas sorts the values present
        found, chosen = ordered.get_indexer(chosen)[found], ordered
    if not len(chosen):  # as one process makes them: text, which Arrow writes as text even when none
        chosen = pd.Index([], dtype="str")  # (an Arrow array of no chunks would be written as nulls)
    recoded = np.full(len(codes), -1, dtype=np.int64)
    recoded[present] = found
    return pd.Categorical.from_codes(recoded, chosen)
