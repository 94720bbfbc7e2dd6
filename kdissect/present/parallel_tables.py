"""A capture's tables built on several processes (`read_pcap(..., jobs=N)`), equal to one's.

A table's rows follow its messages in capture order, and each message's rows depend
only on the message and its pair. So the messages that feed a table are cut into
consecutive runs; each run goes, with the pairs of its messages, to a worker process,
which rebuilds the messages (header fields, frame, notes, pair, and the tree when the
parent keeps one, since its notes show) and builds the table over its run with the
same code as one process; the parts are concatenated in order. Categorical columns are
made again over the whole column, as one process makes them: categories sorted, or in
order of appearance for `fields`.

The worker processes (`kdissect.parallel.worker_context`) are started on the first
table built this way and serve every capture after it, with the parent's message
definitions; one that dies raises `WorkerError`. A table fed by fewer
than `PARALLEL_MESSAGES` messages is built in this process: shipping costs more than
it saves.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import pandas as pd

from kdissect.decode.schema import DefinitionSource
from kdissect.ingest.framing import Connection, Direction, Frame
from kdissect.pair.message import Message
from kdissect.parallel import WorkerError, portable_definitions, use_definitions, worker_context

PARALLEL_MESSAGES = 20_000  # messages feeding a table from which it is built on the workers
RUNS_PER_JOB = 2  # runs of messages per worker process, to even out their cost

State = tuple[Any, ...]
Builder = Callable[[list[Message], str], pd.DataFrame]


class TableJobs:
    """The worker processes of one capture's tables."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs

    def build(self, name: str, messages: list[Message], feeds: Callable[[Message], bool],
              dtypes: dict[str, str], builder: Builder) -> pd.DataFrame | None:
        """Table `name` over `messages` on the workers, each run made into the table by
        `builder` (a module-level function, sent by name); None when it is not worth it."""
        feeding = [message for message in messages if feeds(message)]
        definitions = portable_definitions()
        if not feeding or len(feeding) < PARALLEL_MESSAGES or definitions is None:
            return None
        runs = _runs(feeding, self.jobs * RUNS_PER_JOB)
        pool = _pool(self.jobs)
        try:
            done = list(pool.map(table_part, [builder] * len(runs), [name] * len(runs),
                                 [_states(run) for run in runs], [definitions] * len(runs)))
        except BrokenProcessPool:
            _POOLS.pop(self.jobs, None)
            raise WorkerError(f"a worker process building table {name!r} died") from None
        for _part, pid, seconds in done:
            WORKER_CPU[pid] = WORKER_CPU.get(pid, 0.0) + seconds
        return concatenated([part for part, _pid, _seconds in done], dtypes, appearance=name == "fields")


WORKER_CPU: dict[int, float] = {}  # CPU seconds each table worker spent on tables, by process id
_POOLS: dict[int, ProcessPoolExecutor] = {}  # by size: started once, for every capture


def _pool(jobs: int) -> ProcessPoolExecutor:
    pool = _POOLS.get(jobs)
    if pool is None:
        pool = _POOLS[jobs] = ProcessPoolExecutor(jobs, mp_context=worker_context(table_part))
    return pool


def _runs(messages: list[Message], count: int) -> list[list[Message]]:
    size = -(-len(messages) // count)
    return [messages[start:start + size] for start in range(0, len(messages), size)]


def _states(run: list[Message]) -> tuple[list[State], list[State]]:
    """The run's messages as plain data, and the pairs they need from outside the run."""
    inside = {id(message) for message in run}
    context = [_state(pair) for message in run
               if (pair := message.pair) is not None and id(pair) not in inside]
    return [_state(message) for message in run], context


def _state(message: Message) -> State:
    frame = message.frame
    connection = frame.connection
    pair = message.pair
    return (message.number, (connection.index, connection.client, connection.server, connection.tls),
            frame.direction is Direction.REQUEST,
            frame.stream_offset, frame.data, frame.first_packet, frame.first_ns, frame.last_packet,
            frame.last_ns, frame.complete, frame.notes, message.is_request, message.correlation_id,
            message.api_key, message.api_version, message.client_id, message.expects_response,
            message.file, tuple(message.notes), None if pair is None else pair.number,
            message._tree is not None)


def table_part(builder: Builder, name: str, states: tuple[list[State], list[State]],
               definitions: tuple[DefinitionSource, ...] | None) -> tuple[pd.DataFrame, int, float]:
    """In a worker: table `name` over one run of messages, this process's id and the CPU
    seconds it took."""
    started = time.process_time()
    use_definitions(definitions)
    run, context = states
    connections: dict[tuple[Any, ...], Connection] = {}
    built = {state[0]: _message(state, connections) for state in (*context, *run)}
    for state in (*context, *run):
        message, pair = built[state[0]], built.get(state[19])
        if message.is_request and pair is not None and message._pair is None:
            message.link(pair)
    messages = [built[state[0]] for state in run]
    for state in run:
        if state[20]:
            built[state[0]].tree()  # kept in the parent: its notes show in `messages`
    return builder(messages, name), os.getpid(), time.process_time() - started


def _message(state: State, connections: dict[tuple[Any, ...], Connection]) -> Message:
    (number, link, request, offset, data, first, first_ns, last, last_ns, complete, frame_notes,
     is_request, correlation_id, api_key, api_version, client_id, expects_response, file, notes,
     _pair, _tree) = state
    connection = connections.get(link)
    if connection is None:
        connection = connections[link] = Connection(*link)
    frame = Frame(connection, Direction.REQUEST if request else Direction.RESPONSE, offset, data,
                  first, first_ns, last, last_ns, complete, frame_notes)
    return Message(number, frame, is_request, correlation_id, api_key, api_version, client_id,
                   expects_response, file, list(notes))


def concatenated(parts: list[pd.DataFrame], dtypes: dict[str, str], *, appearance: bool) -> pd.DataFrame:
    """The parts of a table one after the other, categoricals as one process makes them."""
    frame = pd.concat(parts, ignore_index=True)
    for name, dtype in dtypes.items():
        if dtype != "category":
            continue
        text = pd.array(frame[name].astype(object), dtype="str")
        if appearance:
            codes, categories = pd.factorize(text)
            frame[name] = pd.Categorical.from_codes(codes, pd.Index(categories.to_numpy(dtype=object), dtype="str"))
        else:
            frame[name] = pd.Categorical(text)
    return frame
