"""`--jobs N`: several processes read one capture, each following a share of its connections.

The messages come back exactly as `pipeline.read_messages` gives them in one process:
the same numbers, connections, pairs, notes and order.

How the work is shared. A worker reassembles, frames and decodes only the connections of
its share: those whose 4-tuple's bucket (`reassembly.flow_bucket`, a CRC of both
endpoints) it owns. A connection, with every 4-tuple reuse of it, lives in exactly one
worker. What ties connections together in one process is only capture time and the
capture's end (`ConnectionTracker.tick` runs on every packet in every worker) and the
order of closings those fix; both are keyed below, so no worker needs another's state.

One classic pcap file (the usual case) is indexed first (`_SharePlan`: record headers
walked in chunks, each plain Ethernet IPv4 TCP packet's bucket found with numpy), once,
for the parent, whose forked workers inherit it (workers that are not forked each make
it alike; a parent that warms up first has it made by a forked child meanwhile,
`_PlanBeside`): the buckets are dealt out so that the workers get about the same bytes, and
a worker then reads only its own records and those no index can place (decoded and
placed as below). The others' records only move capture time on: their
times are in the index, so a worker ticks its connections' clock at the packet one
process would, without reading it. Other inputs (several files, pcapng, compressed,
irregular records) are read whole by every worker, bucket modulo N placing each
connection; since every worker then passes by every packet of the others' shares, it
remembers their Ethernet IPv4 4-tuples as the packet's own bytes: such a packet costs a
slice and a look-up, not a decoding of its headers.

What comes back. Each worker sends, in batches over its own pipe, the events one
process would make, in its order: a connection found to be Kafka, a frame, a
capture-level note. Each event carries an emission key that places it in the one
process's order: (packet number, phase, ...): phase -1 is a note made while reading
that packet, 0 what the packet itself caused, 1 a connection closed at that packet
because its grace after both FINs ran out (then the grace's start orders them), and
after the last packet, connections closed by the capture's end in the order they
opened. Within a worker the keys only grow; no two workers share one, because each
packet, connection and note belongs to one worker (capture notes and packets that
are not TCP to worker 0).

The parent heap-merges the workers' streams by key, which is exactly the order of one
process, and does what depends on the whole capture: numbering messages, numbering
connections (in the order they were found to be Kafka), pairing and releasing in capture
order (`pair.pairing`, unchanged), the capture's first-packet time, and the note of a
capture without Kafka. It builds the messages from the frames it receives and the header
fields the worker read from each (before pairing gives a response its request's API), so
everything read from a message in the parent is what one process reads. The heavy part
can run in the workers: a `prepare` function is called in the worker on its own copy of
each message (paired on its connection, which is all a body's decoding needs) and its
result comes back with the message. A `prepare` with a `started` method is told the
capture's first packet time once it goes by (`Prepare`). One that decodes bodies is
first run by the parent, before it forks, on the messages of the capture's first
kilobytes (`warm`): what the first message of each API costs (its decoder and writer
generated and compiled) is then paid once, not again by every worker. The command has
each message's whole text made so (its summary line, tree and hex dump, or its JSON, as
bytes): the parent only puts in what depends on the whole capture (the message's number;
for JSON its stream and pair too), and the message's notes (the summary line's, or the
JSON's) when pairing in capture order gave it notes its worker could not know of. Nothing
else of a message is read in the parent (a `prepare` whose `light` is true): its frame event
carries only what pairing and releasing read, from which the parent makes a
`light.Light` rather than a Message (about a quarter of the parent's work per message);
a batch's keys go as one array of ints, with which the parent puts the batches in order
with numpy (`kdissect.light`). That text does not travel with the events: a forked
worker copies it into a ring of memory it shares with the parent, which writes it to the
output from there (`kdissect.spool`); only where it lies goes through the pipe (the text
itself when the ring has no room, or when it is shorter than `SPOOLED_BYTES`, as a
summary line is: in the batch it costs the merge less).

With `finish` (what `read_pcap` uses for its per-API tables) a worker also keeps every
message of its share, paired, and once its share is read hands them to `finish`, whose
parts (it yields them) it sends one by one as they are made; the parent hands them on
as they come, with the capture's number of each message and index of each connection
(`Finished`). A caller that may never need the messages themselves
(`read_pcap`) uses `read_to_come`: each worker holds its frames, and sends its other
events once its share is read, at once (the keys of its frames as one array, which the
parent puts in order at numpy's speed: while the workers read, the parent does nothing
that would take a core from them); the messages are made from them, by the same merge,
when first asked for (`MessagesToCome`); a worker asked for its frames sends them between
two of its parts, or sooner where its `finish` calls `serve_waiting`, and, given an
`answer`, keeps its share for requests after that (`Finished.answers`: `read_pcap`'s other
tables). As a `prepare` that decodes bodies, `finish` is
first run by the parent on the capture's first kilobytes' messages (`warm`), while a
forked child makes the share plan. `progress` hears of the bytes of packet records read, as
far as the merge has come (the command's progress bar).

Bounds: a worker holds what one process holds for its connections, plus one batch
(`BATCH_EVENTS`; `LIGHT_BATCH_EVENTS` light events, or fewer once their texts reach
`LIGHT_BATCH_BYTES`), and its share of the text rings (`spool.RING_BYTES`); the parent
reads at most `AHEAD_BATCHES` batches of a worker (`LIGHT_AHEAD_BATCHES` light ones)
ahead of the merge, then the pipe makes the worker wait (with `read_to_come` a worker
holds its frames, as the capture would, and the keys of its events until its share is
read); the index of a file costs a worker one byte per record. A worker that fails sends
its error and the parent raises `WorkerError`; one that dies silently is found at the
end of its pipe; both stop the other workers. Workers come from multiprocessing's `fork`
or `forkserver` (`worker_context`), ignore Ctrl-C (the parent stops them), and are ended
when the messages are no longer read; a forked one first closes the parent's ends of the
pipes it inherited (`close_inherited`), so that it ends too when the parent is killed.

One bound is kept per process rather than per capture: SASL state is remembered for
65,536 connections (`ingest.sasl`) in each worker, so beyond that many SASL
connections open at once the workers remember more than one process would.

Only files are read in parallel (a stream, standard input, cannot be read twice), and
not with a TLS key log (TLS 1.2 session resumption is shared between connections).
Workers take message definitions from where the parent does (`--schemas`), when
those can be sent (`portable_definitions`; a jar cannot: then one process reads).
`default_jobs` picks N: the number of usable cores when the capture files hold at
least `PARALLEL_BYTES` (below that, starting the workers costs more than they gain),
1 otherwise.
"""

from __future__ import annotations

import array
import contextlib
import contextvars
import gc
import heapq
import importlib
import io
import multiprocessing
import os
import pickle
import queue
import signal
import stat
import struct
import sys
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from multiprocessing.connection import Connection as Pipe
from operator import itemgetter
from typing import Any

from kdissect.decode.schema import DefinitionSource, active_sources, set_sources
from kdissect.ingest.capture import (
    CaptureError,
    CaptureRecord,
    NotIndexable,
    PcapIndex,
    RecordChunk,
)
from kdissect.ingest.connections import KafkaConnections, _server_port
from kdissect.ingest.files import CaptureSource, PacketOrigins, merged_records, named
from kdissect.ingest.framing import DEFAULT_PORTS, MAX_FRAME_SIZE, Connection, Direction, Frame
from kdissect.ingest.net import RawSegment, decode_tcp
from kdissect.ingest.reassembly import (
    CLOSED_BUCKETS,
    CLOSING_END,
    MAX_HELD_BYTES,
    NEVER,
    ConnectionTracker,
    HoldLimits,
    flow_bucket,
)
from kdissect.ingest.reassembly import TcpConnection as _TcpConnection
from kdissect.ingest.sasl import SecretMasker
from kdissect.light import Columns, Key, merged, new_lights, received
from kdissect.native import native_or
from kdissect.notes import Note
from kdissect.pair.message import Message, message_from_frame
from kdissect.pair.pairing import Pairer, pair_messages
from kdissect.pipeline import CaptureClock, Report
from kdissect.spool import Piece, Ring, rings

PARALLEL_BYTES = 16 * 1024 * 1024  # capture bytes from which the default is every core
MAX_JOBS = CLOSED_BUCKETS  # a share is a set of buckets
BATCH_EVENTS = 256  # events a worker sends at once
AHEAD_BATCHES = 32  # batches the parent reads ahead of the merge, per worker
# Light batches are small (a message's text is in the ring): up to 16 times the events,
# the parent reading 8 ahead. It then wakes less often, each time taking a core from a
# worker: on 100 MB, -V --jobs 2 had half the context switches with 1,024 events a batch
# and was faster in each of seven pairs of runs against 256 (by 0.5-11%); the summary
# lines, a hundred bytes a message, were faster in 8 of 8 pairs with 4,096 against 1,024.
# A batch also ends once its texts reach LIGHT_BATCH_BYTES (or a ninth of the worker's
# ring, should that be less): the batches read ahead and the one being made fit in the
# ring (a -V batch holds about a thousand messages), and hold that much at most when
# the texts go through the pipe.
LIGHT_BATCH_EVENTS = 16 * BATCH_EVENTS
LIGHT_AHEAD_BATCHES = AHEAD_BATCHES // 4
LIGHT_BATCH_BYTES = 7 * 1024 * 1024
# A text shorter than this (a summary line) goes with its event rather than through the ring:
# bytes in a batch cost the merging process less than a place in the ring to make a Piece of.
SPOOLED_BYTES = 256
RECORD_OVERHEAD = 16  # bytes of a pcap record's header, counted with its data for progress
MAX_REMEMBERED = 1 << 20  # 4-tuples a worker remembers the share of (memory stays bounded)
KEPT_CHUNKS = 8  # chunks of the index kept from its first walk for the second (33 bytes a record)
PACKET_COST = 256  # what a packet costs a worker beyond its bytes, in bytes, when shares are weighed
PLAN_PIPE_BYTES = 1 << 20  # the pipe `_PlanBeside` asks for (Linux's largest without privilege)
WARM_BYTES = 64 * 1024  # of the first file, whose messages the parent makes ready before the fork (`warm`)
END = 1 << 62  # the packet number of what happens after the last packet
REQUEST, RESPONSE = Direction.REQUEST, Direction.RESPONSE
UNGUARDED = 87  # the exit code of a worker that found its script starting workers again

# What a worker makes of each message, in the worker, on its copy of the message (paired on
# its connection). One that has a method `started(start_ns)` is replaced, once the capture's
# first packet goes by, by what that returns: for what depends on the capture's start time.
# One whose attribute `spooled` is true returns a tuple whose first item is bytes of the
# output: with forked workers those reach the parent through shared memory (`kdissect.spool`),
# as a `spool.Piece`, when there is room (else as bytes); one that has an attribute `ring` is
# given the worker's `spool.Ring` there, and may put its text in it itself: its first item
# is then where the text lies, (offset, length), as `Ring.put_lines` gives it. One whose
# attribute `warm_up` is true (one that decodes bodies) is first run by the parent on the
# capture's start (`warm`).
Prepare = Callable[[Message], Any]
Finish = Callable[[list[Message]], Iterable[Any]]  # a worker's messages -> the parts it sends
Batch = list[tuple[Key, str, Any]]  # events of one worker, as it sends them
# What the parent keeps of a worker's events when the worker holds its frames (`read_to_come`):
# the keys of its frames, in its order (an int64 array of five columns, or a list of keys),
# and its other events.
Kept = tuple[Any, Batch]
# What answers the parent's requests of a worker holding its share (`read_to_come`): its messages
# and the request -> the answer (for `read_pcap`, a table over the share).
Answer = Callable[[list[Message], Any], Any]
_REPLIES = frozenset({"held", "held_end", "answer", "failed"})  # what such a worker sends when asked
_waiting: Callable[[], None] | None = None  # in such a worker while it makes its parts: `serve_waiting`


PAUSE_EVERY = 4096  # messages of a long pass over a held share between two calls of `serve_waiting`


def serve_waiting() -> None:
    """In a worker making its parts over a held share (`read_to_come`'s `finish`): answer now
    what the parent has asked meanwhile (its frames, a table), rather than after the last
    part; elsewhere nothing. Long work in a `finish` calls it now and then."""
    if _waiting is not None:
        _waiting()


class WorkerError(RuntimeError):
    """A worker process failed; the message says which and why."""


def died(name: str, process: Any, work: str = "its share") -> WorkerError:
    """The error for a worker process that ended before its work was done."""
    process.join(timeout=5)
    if process.exitcode == UNGUARDED:
        return WorkerError(
            "a script that reads with several jobs must do so under `if __name__ == \"__main__\":` "
            "(each worker process imports the script, which would start workers again); "
            "or pass jobs=1")
    return WorkerError(f"{name} ended without finishing {work} (exit code {process.exitcode})")


def default_jobs(sources: Sequence[CaptureSource]) -> int:
    """The number of usable cores for capture files of PARALLEL_BYTES or more, else 1."""
    if not parallel_readable(sources):
        return 1
    try:
        size = sum(os.path.getsize(os.fspath(source)) for source in sources)  # type: ignore[arg-type,misc]
    except OSError:
        return 1
    if size < PARALLEL_BYTES:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, MAX_JOBS))


def parallel_readable(sources: Sequence[CaptureSource]) -> bool:
    """Whether workers can read these sources: files they open themselves, each reading
    it from the start (not standard input, a pipe, a FIFO or a device: the first reader
    would take the bytes from the others), and message definitions they can be given (see
    `portable_definitions`). A path that cannot be looked at is left to the reading, which
    says why."""
    return bool(sources) and all(isinstance(s, str | os.PathLike) and os.fspath(s) != "-" and _rereadable(s)
                                 for s in sources) and portable_definitions() is not None


def _rereadable(path: str | os.PathLike[str]) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return True


def read_messages(
    sources: Sequence[CaptureSource],
    jobs: int,
    *,
    ports: Iterable[int] = DEFAULT_PORTS,
    detect: bool = True,
    max_frame_size: int = MAX_FRAME_SIZE,
    max_held: int = MAX_HELD_BYTES,
    report: Report | None = None,
    unreadable: Callable[[int, CaptureError], None] | None = None,
    names: Sequence[str] | None = None,
    clock: CaptureClock | None = None,
    show_secrets: bool = False,
    prepare: Prepare | None = None,
    preload: Iterable[str] = (),
    finish: Finish | None = None,
    finished: Callable[[Finished], None] | None = None,
    progress: Callable[[int], None] | None = None,
    released: Callable[[list[tuple[Message, Any]]], None] | None = None,
) -> Iterator[tuple[Message, Any]]:
    """`pipeline.read_messages` on `jobs` worker processes: (message, prepared) pairs.

    `prepared` is what `prepare` (a picklable function) returned for the message in
    its worker, None without one. `preload` names modules the workers will need
    anyway (see `worker_context`). Raises CaptureError as one process does, and
    WorkerError when a worker fails.

    `finish` (a picklable function), when given, is called in each worker once its share
    is read, on every message of its share, paired, in capture order, numbered and with
    connections indexed within the worker; each part it yields is sent as it is made.
    Once the last message is yielded, `finished` is given a `Finished` that hands on the
    parts (and from then on owns the workers).

    `progress`, when given, hears how far the merge has come, in bytes of packet records
    read (`RECORD_OVERHEAD` counted for each record's header), once per batch merged.

    `released`, when given, is handed the messages of a light merge (`kdissect.light`) as
    it releases them, a list of pairs at a time (never an empty one), rather than the
    pairs being yielded one after another.
    """
    if not 1 < jobs <= MAX_JOBS:
        raise ValueError(f"jobs must be 2 to {MAX_JOBS} here, not {jobs}")
    paths = [os.fspath(s) for s in sources]  # type: ignore[arg-type]
    options = {"ports": frozenset(ports), "detect": detect, "max_frame_size": max_frame_size,
               "max_held": max_held, "show_secrets": show_secrets,
               "names": list(names or paths), "definitions": portable_definitions()}
    context = worker_context(prepare, finish, *preload)
    plan = None
    if prepare is not None and getattr(prepare, "warm_up", False):
        plan = _warmed(context, paths, jobs, options, prepare=prepare)
    team = _Team(paths, jobs, options, prepare, finish, context, spooled=bool(getattr(prepare, "spooled", False)),
                 plan=plan)
    team.progress = progress
    handed = False
    try:
        prepared: dict[int, Any] = {}
        merged = _Merge(team, report, unreadable, clock, prepared, keep_numbers=finish is not None)
        yield from merged.paired(released)
        merged.finish(options)
        if os.environ.get("KDISSECT_JOBS_CPU"):  # for benchmarks: CPU seconds of every process
            workers = ", ".join(f"{s.get('cpu', 0.0):.2f}" for s in team.summaries)
            print(f"kdissect: CPU seconds: parent {time.process_time():.2f}, workers {workers}",
                  file=sys.stderr)
        if finish is not None and finished is not None:
            finished(Finished(team, merged))
            handed = True
    finally:
        if not handed:
            team.stop()


def read_to_come(
    sources: Sequence[CaptureSource],
    jobs: int,
    *,
    ports: Iterable[int] = DEFAULT_PORTS,
    detect: bool = True,
    report: Report | None = None,
    show_secrets: bool = False,
    preload: Iterable[str] = (),
    finish: Finish,
    answer: Answer | None = None,
    clock: CaptureClock | None = None,
) -> tuple[MessagesToCome, Finished]:
    """`read_messages` with `finish`, for a caller that may never need the messages
    themselves (`read_pcap`, whose per-API tables the workers make): the same messages,
    made only when first asked for (`MessagesToCome.get`).

    Each worker holds its frames and sends its other events once its share is read; the
    parent keeps them (no bound: they are what the messages are made of), and puts the
    keys in order: the capture's number of each message and index of each connection
    (for `Finished`), the capture-level notes to `report`, in one process's order. Raises
    CaptureError and WorkerError as `read_messages` does, once every worker has read its
    share.

    Asked for its frames, a worker sends them as soon as the part in hand is made (a
    `finish` calls `serve_waiting` now and then: sooner still). Given `answer` (a picklable
    function of a share's messages, numbered within the worker, and a request), the
    workers keep their shares after their parts and frames, for `Finished.answers`, until
    `Finished.stop` (for `read_pcap`, the tables that are not per-API: no message need be
    made here, nor sent to other processes, for them).
    """
    if not 1 < jobs <= MAX_JOBS:
        raise ValueError(f"jobs must be 2 to {MAX_JOBS} here, not {jobs}")
    paths = [os.fspath(s) for s in sources]  # type: ignore[arg-type]
    options = {"ports": frozenset(ports), "detect": detect, "max_frame_size": MAX_FRAME_SIZE,
               "max_held": MAX_HELD_BYTES, "show_secrets": show_secrets, "names": paths,
               "definitions": portable_definitions(), "hold": True, "answer": answer}
    context = worker_context(finish, answer, *preload)
    plan = _warmed(context, paths, jobs, options, finish=finish)
    team = _Team(paths, jobs, options, None, finish, context, ahead=0, duplex=True, plan=plan)
    try:
        kept = [team.keys(index) for index in range(jobs)]  # no bound: none waits for another
        merged = _Merge(team, report, None, clock, {}, keep_numbers=True)
        merged.number(kept)
        merged.finish(options)
    except BaseException:
        team.stop()
        raise
    if os.environ.get("KDISSECT_JOBS_CPU"):  # for benchmarks, as read_messages
        workers = ", ".join(f"{s.get('cpu', 0.0):.2f}" for s in team.summaries)
        print(f"kdissect: CPU seconds: parent {time.process_time():.2f}, workers {workers}", file=sys.stderr)
    finished = Finished(team, merged)
    # the workers still hold the frames: `MessagesToCome` ends them, or, where they answer on
    # once it has the frames, whoever holds `finished` (`Finished.stop`)
    finished.keep = True
    return MessagesToCome(team, kept), finished


class MessagesToCome:
    """The messages of a capture the workers read (`read_to_come`), made from what they
    sent, by the same merge as `read_messages`, when first asked for."""

    def __init__(self, team: _Team, kept: list[Kept]) -> None:
        self.team, self.kept = team, kept
        self.count = sum(len(frames) for frames, _others in kept)
        self.messages: list[Message] | None = None
        self.held: list[list[Any]] | None = None  # the workers' frame events, until made messages
        self.ending = weakref.finalize(self, team.stop)

    def __len__(self) -> int:
        return self.count

    def get(self) -> list[Message]:
        if self.messages is None:
            from kdissect.decode.values import cycle_collection_paused

            merged = _Merge(self.team, None, _skip, None, {})
            with cycle_collection_paused():
                if self.held is None:  # (asked again after an interrupt: the frames came)
                    try:
                        self.held = self.team.held()
                    except KeyboardInterrupt:  # what came is kept: asked again, it goes on
                        raise
                    except BaseException:
                        self.team.stop()
                        raise
                    if self.team.answers:  # they answer on once their frames are sent: kept running
                        self.ending.detach()
                    else:
                        self.team.stop()
                streams = [_replayed(worker, kept, self.held[worker]) for worker, kept in enumerate(self.kept)]
                self.messages = list(pair_messages(merged.messages(streams)))
            self.kept, self.held = [], None
        return self.messages


class Finished:
    """The parts each worker's `finish` makes of its share (`read_messages`), as they come,
    and where the worker's messages and connections are in the whole capture: per worker,
    the capture's number of each message it numbered (`numbers`: its number minus one is
    the index), and the capture's index of each connection it indexed (`streams`)."""

    def __init__(self, team: _Team, merged: _Merge) -> None:
        self.team = team
        self.numbers = merged.numbers
        self.streams: list[dict[int, int]] = [{} for _ in team.pipes]
        for (worker, local), connection in merged.connections.items():
            self.streams[worker][local] = connection.index
        self.ended: list[float | None] = [None] * len(team.pipes)  # each worker's CPU seconds once it sent all
        self.keep = False  # whether the workers outlive their parts (`read_to_come`)

    def part(self, worker: int) -> Any | None:
        """The next part `worker` made, waited for; None once it has sent them all. The
        workers end once every one has (unless `keep`)."""
        if self.ended[worker] is not None:
            return None
        try:
            kind, payload = self.team.finished(worker)
        except KeyboardInterrupt:  # where the workers outlive their parts, waited for again
            if not self.keep:
                self.team.stop()
            raise
        except BaseException:
            self.team.stop()
            raise
        if kind == "part":
            return payload
        self.ended[worker] = payload
        if not self.keep and None not in self.ended:
            self.team.stop()
        return None

    def cpu(self) -> list[float]:
        """CPU seconds each worker that has sent every part spent in `finish`."""
        return [cpu - summary.get("cpu", 0.0) for cpu, summary in zip(self.ended, self.team.summaries, strict=True)
                if cpu is not None]

    def answers(self, requests: Sequence[Any]) -> list[Any]:
        """Each worker's answer to its request (`requests`: one per worker, in order), by
        `read_to_come`'s `answer` over its share, asked of every worker at once; a failure
        stops them all, and raises."""
        answered: list[Any] = []
        try:
            for index, request in enumerate(requests):
                self.ask(index, request)
            for index in range(len(self.team.pipes)):
                answered.append(self.answer(index))
            return answered
        except KeyboardInterrupt:  # the workers answer on: those answers are let go
            for index in range(len(answered), len(self.team.pipes)):
                self.let_go(index, 1)
            raise

    def ask(self, worker: int, request: Any) -> None:
        """`request` to `worker`, whose answer (by `read_to_come`'s `answer` over its share)
        `answer` waits for; a worker answers its requests in the order asked. A failure
        stops every worker, and raises."""
        with self._failure_stops():
            self.team.ask(worker, ("ask", request))

    def answer(self, worker: int) -> Any:
        """The answer `worker` gives to the first of its requests not yet answered here,
        waited for (interrupted, the wait loses nothing: asked again, it goes on). A
        failure stops every worker, and raises."""
        with self._failure_stops():
            return self.team.reply(worker)[1]

    @contextlib.contextmanager
    def _failure_stops(self) -> Iterator[None]:
        """A failure stops every worker; an interrupt (Ctrl-C in a notebook) does not."""
        try:
            yield
        except KeyboardInterrupt:
            raise
        except BaseException:
            self.team.stop()
            raise

    def let_go(self, worker: int, count: int) -> None:
        """The answers to `worker`'s last `count` requests are awaited by no one: skipped."""
        self.team.stale[worker] += count

    def answering(self) -> bool:
        """Whether the workers answer requests (`answers`): they hold their shares, and have
        not been stopped."""
        return self.team.answers and not self.team.stopping.is_set()

    def stop(self) -> None:
        self.team.stop()


def worker_context(*uses: Any) -> Any:
    """How worker processes start. On Linux, from a process whose only thread is this one:
    multiprocessing's `fork`, a copy of this process made in a millisecond, with every
    module it imported, and the modules named in `uses` imported first (once, rather than
    by each worker after the fork: for -V, tens of milliseconds each). Otherwise (forking
    a process with other threads could copy a lock one of them holds) the `forkserver`
    context, its server preloading kdissect and `uses` (module names, or functions whose
    modules), so that a worker starts in milliseconds, from a process without threads, once
    the server is up (a second or so: it imports what it preloads); `spawn` where there is
    no fork server.

    The server starts once per process, with the preloads of its first use. A worker
    also imports the main module of a script (multiprocessing's rule: a script that
    starts workers needs the `if __name__ == "__main__":` guard). Without the guard, the
    worker importing the script is back here: it ends at once, with the exit code
    UNGUARDED, which the parent turns into one clear error (`died`) rather than
    multiprocessing's traceback from every worker.
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False):  # importing the script
        sys.stderr.flush()
        os._exit(UNGUARDED)
    # Python threads only: the native pools that importing pandas starts (OpenBLAS, Arrow)
    # register at-fork handlers of their own, so a fork is safe with them.
    if sys.platform == "linux" and threading.active_count() == 1:
        for use in uses:  # imported once, here: each forked worker inherits them
            if isinstance(use, str):
                importlib.import_module(use)
        return multiprocessing.get_context("fork")
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    modules = {"kdissect.parallel", *(use if isinstance(use, str) else getattr(use, "func", use).__module__
                                      for use in uses if use is not None)}
    context.set_forkserver_preload(sorted(modules))  # only before the server starts
    return context


def warm(path: str, options: dict[str, Any], prepare: Prepare | None = None, finish: Finish | None = None) -> None:
    """Before the workers are forked: what `prepare` makes of the messages of the capture's
    first `WARM_BYTES`, or what `finish` makes of them all, made here and thrown away, for
    what it leaves behind.

    The first message of each API, version and direction costs far more than the next
    ones: its decoder and its -V writer are generated and compiled, its plan built (for
    -V, about a third of a second of CPU on mixed traffic; for the per-API tables, the
    modules that make them imported too, five hundredths). Each worker paid that again;
    made once here, every forked worker inherits it, and pays only for the APIs the
    capture's start did not show. The price is that start read twice (a few hundredths
    of a second, made while a child makes the share plan: `_PlanBeside`). Nothing made
    here reaches the output: it only fills what a process fills on first use (the same
    whichever message fills it).
    """
    from kdissect.pipeline import read_messages as read_in_one

    if not os.path.isfile(path):  # what is read here must still be there for the workers
        return
    clock = CaptureClock()
    ready = None
    kept: list[Message] = []
    try:
        with open(path, "rb") as file:
            head = io.BytesIO(file.read(WARM_BYTES))
        for message in read_in_one(head, ports=options["ports"], detect=options["detect"],
                                   max_frame_size=options["max_frame_size"], report=_ignore,
                                   clock=clock, show_secrets=options["show_secrets"]):
            if prepare is None:
                kept.append(message)
                continue
            if ready is None:  # a copy, told the start as a worker is: the workers inherit `prepare` as it is
                ready = pickle.loads(pickle.dumps(prepare))
                started = getattr(ready, "started", None)
                if started is not None:
                    ready = started(clock.start_ns)
            ready(message)
        if finish is not None and kept:
            for _part in finish(kept):
                pass
    except Exception:  # a warm-up only (a compressed file cut short, say): the workers make the rest
        return


def _warmed(context: Any, paths: list[str], jobs: int, options: dict[str, Any], prepare: Prepare | None = None,
            finish: Finish | None = None) -> list[_SharePlan | None] | None:
    """With forked workers: this process warmed up (`warm`) while a child makes the share
    plan (`_PlanBeside`), and the plan; None (each worker makes it) otherwise."""
    if context.get_start_method() != "fork":
        return None
    with _PlanBeside(paths, jobs) as planned:
        warm(paths[0], options, prepare, finish)
        return planned.result()


def portable_definitions() -> tuple[DefinitionSource, ...] | None:
    """Where this process takes message definitions from (`--schemas`, `read_pcap(schemas=)`),
    for the workers; None when that cannot be sent to another process."""
    sources = active_sources()
    try:
        pickle.dumps(sources)
    except Exception:  # a source inside an open jar: the caller reads in one process
        return None
    return sources


def use_definitions(sources: tuple[DefinitionSource, ...] | None) -> None:
    """In a worker: take definitions from where the parent does."""
    if sources is not None and sources != active_sources():
        set_sources(sources)


class _Team:
    """The worker processes and the parent's end of their pipes."""

    def __init__(self, paths: list[str], jobs: int, options: dict[str, Any],
                 prepare: Prepare | None, finish: Finish | None, context: Any, ahead: int | None = None,
                 duplex: bool = False, spooled: bool = False, plan: list[_SharePlan | None] | None = None) -> None:
        self.paths = paths  # the capture's files, as the workers name them
        self.pipes: list[Pipe] = []
        self.processes: list[Any] = []
        self.finishing = finish is not None  # after its summary a worker sends what it finished
        self.light = _light(prepare, options)  # the workers send "lights" batches (`kdissect.light`)
        # the workers' text rings (`Prepare`): shared memory that only a fork hands on
        forked = context.get_start_method() == "fork"
        self.rings = rings(jobs, SPOOLED_BYTES) if spooled and forked else None
        # Forked workers inherit the plan made here (or given: `plan`, a box holding it), once,
        # rather than each making it alike; the box is emptied once they are forked, so that
        # the parent does not keep it.
        plan = (plan or [_SharePlan.of(paths, jobs)]) if forked else []
        for index in range(jobs):
            receiver, sender = context.Pipe(duplex=duplex)  # duplex: the parent asks too
            process = context.Process(target=work, args=(sender, index, jobs, paths, options, prepare, finish,
                                                         self.rings and self.rings[index], plan,
                                                         inherited(context, [*self.pipes, receiver])),
                                      name=f"kdissect-worker-{index}", daemon=True)
            process.start()
            sender.close()  # the worker's end: closed here so its death reads as the end of the pipe
            self.pipes.append(receiver)
            self.processes.append(process)
        plan.clear()
        self.summaries: list[dict[str, Any]] = [{} for _ in range(jobs)]
        self.progress: Callable[[int], None] | None = None
        self.read = [0] * jobs  # record bytes each worker had read when it sent its last batch merged
        # A reader thread per worker keeps its pipe drained, a few batches ahead of the merge,
        # so that a worker seldom waits for a parent the machine's other work holds up.
        if ahead is None:
            ahead = LIGHT_AHEAD_BATCHES if self.light else AHEAD_BATCHES
        self.ahead = [queue.Queue[tuple[str, Any]](ahead) for _ in range(jobs)]  # 0: no bound
        # A worker that holds its share (`read_to_come`) answers requests until it is stopped:
        # its replies (`_REPLIES`) go here, and its reader reads on after its last part.
        self.serving = bool(options.get("hold"))
        self.answers = options.get("answer") is not None  # and answers requests (`Finished.answers`)
        self.replies = [queue.Queue[tuple[str, Any]]() for _ in range(jobs)]
        self.stale = [0] * jobs  # answers still to come that no one waits for (an interrupted wait)
        self.frames: list[list[Any]] | None = None  # the held frame events received so far (`held`)
        self.frames_ended = [False] * jobs
        self.stopping = threading.Event()
        self.readers = [threading.Thread(target=self._read, args=(index,), daemon=True,
                                         name=f"kdissect-reader-{index}") for index in range(jobs)]
        for reader in self.readers:
            reader.start()

    def _read(self, index: int) -> None:
        pipe, ahead = self.pipes[index], self.ahead[index]
        while not self.stopping.is_set():
            try:
                item = pipe.recv()
            except (EOFError, OSError):
                item = ("gone", None)
            except Exception as problem:  # what it sent cannot be rebuilt here: said, not waited for
                item = ("error", f"what it sent cannot be read: {type(problem).__name__}: {problem}")
            kind = item[0]
            if kind in _REPLIES:
                self.replies[index].put(item)
                continue
            while not self.stopping.is_set():
                try:
                    ahead.put(item, timeout=0.1)
                    break
                except queue.Full:
                    continue
            if kind in ("gone", "error", "capture_error"):
                self.replies[index].put(item)  # for a request waiting for its reply
                return
            if kind not in ("events", "lights", "keys", "part") and not (kind == "end" and self.finishing) \
                    and not (kind == "finished" and self.serving):
                return

    def events(self, index: int) -> Iterator[tuple[Key, int, str, Any]]:
        """One worker's events, in its order; its summary is kept when it ends."""
        for kind, payload in self.batches(index):
            batch = payload[0] if kind == "events" else received(payload)
            yield from [(key, index, what, event) for key, what, event in batch]

    def batches(self, index: int) -> Iterator[tuple[str, Any]]:
        """One worker's batches of events ("events" or "lights", with their payloads), in its
        order; its summary is kept when it ends."""
        ahead = self.ahead[index]
        while True:
            kind, payload = ahead.get()
            if kind == "gone":
                raise died(f"worker {index}", self.processes[index]) from None
            if kind == "events" or kind == "lights":
                self.read[index] = payload[-1]
                if self.progress is not None:
                    self.progress(max(self.read))
                yield kind, payload
            elif kind == "end":
                self.summaries[index] = payload
                self.read[index] = payload["read"]
                if self.progress is not None:
                    self.progress(max(self.read))
                return
            elif kind == "capture_error":
                raise CaptureError(payload)
            else:
                raise WorkerError(f"worker {index} failed: {payload}")

    def keys(self, index: int) -> Kept:
        """What worker `index` sent of its events once its share was read, holding its frames
        (`read_to_come`): the keys of its frames, and its other events."""
        ahead = self.ahead[index]
        kept: Kept = ([], [])
        while True:
            kind, payload = ahead.get()
            if kind == "keys":
                kept = payload
                continue
            if kind == "end":
                self.summaries[index] = payload
                return kept
            if kind == "gone":
                raise died(f"worker {index}", self.processes[index]) from None
            if kind == "capture_error":
                raise CaptureError(payload)
            raise WorkerError(f"worker {index} failed: {payload}")

    def held(self) -> list[list[Any]]:
        """The frame events each worker held back (`_Worker._serve`), in its order: asked of
        every worker at once, each answering as soon as its part in hand is made. A wait
        interrupted (Ctrl-C in a notebook) goes on where it stopped when asked again."""
        if self.frames is None:
            for index in range(len(self.pipes)):
                self.ask(index, "held")
            self.frames = [[] for _ in self.pipes]
        for index, events in enumerate(self.frames):
            while not self.frames_ended[index]:
                kind, payload = self.reply(index)
                if kind == "held_end":
                    self.frames_ended[index] = True
                else:
                    events += payload
        found, self.frames = self.frames, []  # handed on, not kept (they are sent only once)
        return found

    def ask(self, index: int, request: Any) -> None:
        """Send worker `index`, which holds its share, a request: "held" or ("ask", what its
        answer function is given); `reply` waits for what it sends back."""
        try:
            self.pipes[index].send(request)
        except OSError:
            raise died(f"worker {index}", self.processes[index], "its share") from None

    def reply(self, index: int) -> tuple[str, Any]:
        """The next reply of worker `index` (`_REPLIES`); WorkerError if it failed or died."""
        while True:
            kind, payload = self._next(index, self.replies[index], "replied")
            if kind not in ("answer", "failed") or not self.stale[index]:
                break
            self.stale[index] -= 1  # the answer to a request whose wait was interrupted
        if kind == "gone":
            raise died(f"worker {index}", self.processes[index], "its share")
        if kind == "capture_error":
            raise CaptureError(payload)
        if kind in ("error", "failed"):
            raise WorkerError(f"worker {index} failed: {payload}")
        return kind, payload

    def _next(self, index: int, box: queue.Queue[tuple[str, Any]], awaited: str) -> tuple[str, Any]:
        """The next item of one of worker `index`'s queues, waited for as long as its reader
        may still put one there."""
        while True:
            try:
                return box.get(timeout=0.5)
            except queue.Empty:
                if self.stopping.is_set() or (not self.readers[index].is_alive() and box.empty()):
                    raise WorkerError(f"worker {index} was stopped before it {awaited}") from None

    def finished(self, index: int) -> tuple[str, Any]:
        """The next of what worker `index` sends after its summary: ("part", a part its
        `finish` made), then ("finished", its CPU seconds)."""
        kind, payload = self._next(index, self.ahead[index], "finished")
        if kind == "part" or kind == "finished":
            return kind, payload
        if kind == "gone":
            raise WorkerError(f"worker {index} ended before it finished") from None
        raise WorkerError(f"worker {index} failed: {payload}")

    def stop(self) -> None:
        self.stopping.set()
        for process in self.processes:
            if process.is_alive():
                process.terminate()
        for process in self.processes:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()
        for reader in self.readers:  # a dead worker's pipe ends: its reader stops
            reader.join(timeout=5)
        for pipe in self.pipes:
            pipe.close()


class _Merge:
    """The parent's side: the workers' events in one process's order, made into messages."""

    def __init__(self, team: _Team, report: Report | None,
                 unreadable: Callable[[int, CaptureError], None] | None,
                 clock: CaptureClock | None, prepared: dict[int, Any], *, keep_numbers: bool = False) -> None:
        self.team, self.report, self.unreadable, self.clock = team, report, unreadable, clock
        self.prepared = prepared
        self.connections: dict[tuple[int, int], Connection] = {}
        # per worker, with keep_numbers: the number of each message it sent, in its order (a list,
        # or an int64 array once `number` put the kept keys in order)
        self.numbers: list[Any] = [[] for _ in team.pipes] if keep_numbers else []

    def paired(self, released: Callable[[list[tuple[Message, Any]]], None] | None = None,
               ) -> Iterator[tuple[Message, Any]]:
        """The messages, numbered, paired and in capture order (`pair_messages`), each with
        what `prepare` made of it; a light merge's handed to `released`, if given, as lists."""
        team, prepared = self.team, self.prepared
        if not (team.light and not self.numbers):
            for message in pair_messages(self.messages()):
                yield message, prepared.pop(message.number, None)
            return
        # Batches merged a batch at a time, their messages made Lights and paired by `lights`
        # (in C where it is built: `kdissect.light`).
        lights = new_lights(prepared)
        for item in merged([team.batches(index) for index in range(len(team.pipes))], self.connections,
                           team.rings, lights, self._other):
            if type(item) is tuple:  # a batch that is not "lights": one by one from here on
                streams, number = item
                for light in self.messages(streams, number, lights.made):
                    yield from _handed(lights.one(light), released)  # type: ignore[arg-type]
                break
            yield from _handed(item, released)  # type: ignore[arg-type]
        yield from _handed(lights.finish(), released)

    def messages(self, streams: Sequence[Iterable[tuple[Key, int, str, Any]]] | None = None, number: int = 0,
                 light: Callable[..., Any] | None = None) -> Iterator[Message]:
        """The messages, numbered after `number`, from the workers' events (or `streams`:
        events kept); `light` makes a Light of a light message's fields."""
        team = self.team
        if streams is None:
            streams = [team.events(index) for index in range(len(team.pipes))]
        connections = self.connections
        numbers = self.numbers
        rings = team.rings
        # By key, the tuples compared whole: no two share a key and worker.
        for _key, worker, what, event in heapq.merge(*streams):
            if what == "frame":
                (local, request, offset, data, first, first_ns, last, last_ns, complete, notes, file, ready,
                 correlation_id, api_key, api_version, client_id, expects_response, header_notes) = event
                frame = Frame(connections[worker, local], REQUEST if request else RESPONSE,
                              offset, data, first, first_ns, last, last_ns, complete, notes)
                number += 1
                message = Message(number, frame, request, correlation_id, api_key, api_version, client_id,
                                  expects_response, file, list(header_notes) if header_notes else [])
                if ready is not None:
                    if rings is not None and type(ready[0]) is tuple:  # a place in the worker's ring
                        ready = (Piece(rings[worker], *ready[0]), *ready[1:])
                    self.prepared[number] = ready
                if numbers:
                    numbers[worker].append(number)
                yield message
            elif what == "light":  # (the rest of a merge of "lights" batches: `kdissect.light`)
                number += 1
                yield light(number, worker, event, connections, rings)  # type: ignore[misc]
            else:
                self._other(worker, what, event)

    def _other(self, worker: int, what: str, event: Any) -> None:
        """An event that is not a message."""
        if what == "open":
            local, client, server, tls = event
            self.connections[worker, local] = Connection(len(self.connections), client, server, tls)
        elif what == "note":
            if self.report is not None:
                self.report(event)
        elif what == "start":
            if self.clock is not None and self.clock.start_ns is None:
                self.clock.start_ns = event
        elif what == "unreadable":
            if self.unreadable is None:
                raise CaptureError(named(self.team.paths[event[0]], event[1]))
            self.unreadable(event[0], CaptureError(event[1]))

    def number(self, kept: list[Kept]) -> None:
        """From the events kept of each worker (`_Team.keys`): the capture's number of each
        message, the connections in the order they were found, capture-level notes in order."""
        import numpy as np

        numbers = self.numbers
        try:
            keys = [np.asarray(frames, dtype=np.int64).reshape(-1, 5) for frames, _others in kept]
        except OverflowError:  # a key beyond 64 bits (a capture time far off): sorted as tuples
            frames = sorted((tuple(key), worker) for worker, (found, _others) in enumerate(kept)
                            for key in (found.tolist() if isinstance(found, np.ndarray) else found))
            for number, (_key, worker) in enumerate(frames, 1):
                numbers[worker].append(number)
        else:
            every = np.concatenate(keys)
            order = np.lexsort(every.T[::-1])  # as the keys sort as tuples, none equal to another
            placed = np.repeat(np.arange(len(keys)), [len(found) for found in keys])[order]
            for worker in range(len(keys)):
                numbers[worker] = np.flatnonzero(placed == worker) + 1  # an array: what `Finished` users take
        others = sorted(((key, worker, what, event) for worker, (_frames, found) in enumerate(kept)
                         for key, what, event in found), key=itemgetter(0))
        for _key, worker, what, event in others:
            if what == "unreadable":
                raise CaptureError(named(self.team.paths[event[0]], event[1]))
            self._other(worker, what, event)

    def finish(self, options: dict[str, Any]) -> None:
        """The note of a capture in which no worker found Kafka, as one process makes it."""
        summaries = self.team.summaries
        kafka = KafkaConnections(options["ports"], options["detect"], options["max_frame_size"],
                                 self.report or _ignore)
        kafka.next_index = sum(s.get("kafka", 0) for s in summaries)
        kafka.tls_seen = sum(s.get("tls", 0) for s in summaries)
        counts: Counter[int] = Counter()
        first: dict[int, int] = {}
        for summary in summaries:
            for port, count, seen in summary.get("ports", ()):
                counts[port] += count
                first[port] = min(seen, first.get(port, seen))
        for port in sorted(counts, key=first.__getitem__):  # as one process met them
            kafka.tcp_ports[port] = counts[port]
        kafka.finish()


# --- the worker --------------------------------------------------------------


class _ShareConnections(KafkaConnections):
    """KafkaConnections of one worker: a connection found to be Kafka is an event too, and
    each server port remembers the first packet of its first connection."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ports_seen: dict[int, int] = {}

    def open(self, tcp: _TcpConnection) -> Any:
        self.ports_seen.setdefault(_server_port(tcp), tcp.first_packet)
        return super().open(tcp)

    def new_connection(self, client: Any, server: Any, tls: bool = False) -> Connection:
        connection = super().new_connection(client, server, tls)
        self.out.append(connection)  # type: ignore[arg-type]  # an event among the frames
        return connection


class _Worker:
    """One worker's pipeline: its share of the connections, its events keyed and batched."""

    def __init__(self, pipe: Pipe, index: int, jobs: int, options: dict[str, Any],
                 prepare: Prepare | None, finish: Finish | None = None, ring: Ring | None = None) -> None:
        self.pipe, self.index, self.jobs, self.prepare, self.finish = pipe, index, jobs, prepare, finish
        self.ring = ring  # where the text `prepare` makes goes (`Prepare`), with room
        if ring is not None and hasattr(prepare, "ring"):  # which it may put its text in itself
            prepare.ring = ring  # type: ignore[union-attr]
        if hasattr(prepare, "worker"):  # which says so of what names the worker's messages
            prepare.worker = index  # type: ignore[union-attr]
        # a `prepare` whose text goes on in the rings may make an ASCII text a str (`spool.Ring.put`)
        self.spooled = bool(getattr(prepare, "spooled", False))
        self.light = _light(prepare, options)  # frames go light, in "lights" batches (`kdissect.light`)
        self.kept: list[Message] = []  # with `finish`: every message of the share
        self.share: list[Message] = []  # those messages, kept for the answers (`_serve`)
        self.held: list[Any] | None = [] if options.get("hold") else None  # frame events not yet sent
        # ... and their keys, five int64 each, in order (a list of keys once one does not fit)
        self.held_keys: array.array[int] | list[Key] = array.array("q")
        self.options = options
        self.pending: list[Any] = []  # events not yet keyed: frames, connections, notes
        self.batch: Any = Columns() if self.light else []  # else the events as they are
        self.batch_events = LIGHT_BATCH_EVENTS if self.light else BATCH_EVENTS  # sent once it holds as many
        # ... or, light, once its messages' texts take as many bytes
        self.batch_bytes = LIGHT_BATCH_BYTES if ring is None else min(LIGHT_BATCH_BYTES,
                                                                       ring.size // (LIGHT_AHEAD_BATCHES + 1))
        self.batch_text = 0  # bytes of the texts of the batch's messages
        self.sequence = 0
        self.read = 0  # bytes of the records read so far (for progress)
        self.key: tuple[int, int, int, int] = (0, 0, 0, 0)
        self.kafka = _ShareConnections(options["ports"], options["detect"], options["max_frame_size"],
                                       self.pending.append)
        self.kafka.out = self.pending
        self.tracker = ConnectionTracker(self.kafka.open, HoldLimits(max_held=options["max_held"]))
        self.tracker.closing = self._closing
        self.origins = PacketOrigins(options["names"])
        self.pairer = Pairer()
        self.numbered = 0
        self.mask = SecretMasker(show_secrets=options["show_secrets"])
        self._others: set[bytes] = set()  # Ethernet IPv4 4-tuples of other shares, as packet bytes
        self._mine: set[tuple[bytes, int, bytes, int]] = set()  # 4-tuples of this share
        self.owner = [bucket % jobs for bucket in range(CLOSED_BUCKETS)]  # the worker of each bucket

    def run(self, paths: list[str], plans: list[_SharePlan | None] | None = None) -> None:
        """Read the share; `plans` may hold the plan already made (`work`)."""
        first = self.index == 0
        plan = plans.pop() if plans else _SharePlan.of(paths, self.jobs)  # popped: its kept chunks go once read
        if plan is not None:
            self.owner = plan.owner
            self._share_indexed(plan)
        else:
            records = merged_records(paths, self.origins, self.pending.append if first else None,
                                     self._unreadable if first else _skip)
            self._share(records)
        self._flush((END, -1, 0, 0))
        self.tracker.finish()
        self._flush(self.key)
        self._send_batch()
        kafka = self.kafka
        self.pipe.send(("end", {"kafka": kafka.next_index, "tls": kafka.tls_seen, "cpu": time.process_time(),
                                "read": self.read,
                                "ports": [(port, count, kafka.ports_seen.get(port, 0))
                                          for port, count in kafka.tcp_ports.items()]}))
        if self.finish is not None:
            self._finish()
        if self.held is not None:
            self._serve(wait=True)

    def _finish(self) -> None:
        """The parts `finish` makes of the share, each sent as made; a worker that holds its
        share answers what the parent asks meanwhile (`serve_waiting`), and keeps the share
        for what it asks later."""
        global _waiting
        kept, self.kept = self.kept, []
        if self.held is not None:
            self.share = kept
            _waiting = self._serve
        try:
            for part in self.finish(kept):  # type: ignore[misc]
                self.pipe.send(("part", part))
                serve_waiting()
        finally:
            _waiting = None
        self.pipe.send(("finished", time.process_time()))

    def _serve(self, wait: bool = False) -> None:
        """What the parent asked of a held share (`read_to_come`): its frame events ("held":
        sent in batches, then "held_end"), or ("ask", request): ("answer", what the answer
        function of the options makes of the share and the request), or ("failed", why).
        All it asked so far; with `wait`, all it asks until it closes the pipe."""
        global _waiting
        pipe, waiting, _waiting = self.pipe, _waiting, None  # an answer's own calls: not again
        try:
            self._answer_requests(pipe, wait)
        finally:
            _waiting = waiting

    def _answer_requests(self, pipe: Pipe, wait: bool) -> None:
        while wait or pipe.poll():
            try:
                request = pipe.recv()
            except (EOFError, OSError):
                return  # the parent is done with the share (without `wait`, it stops this worker)
            if request == "held":
                held, self.held = self.held or [], []
                for start in range(0, len(held), BATCH_EVENTS):
                    pipe.send(("held", held[start:start + BATCH_EVENTS]))
                pipe.send(("held_end", None))
                continue
            answering = self.options.get("answer")
            try:  # in a context of its own: as if nothing else were under way (`records_unexpanded`)
                if answering is None:
                    raise ValueError(f"nothing here answers {request!r}")
                answer = contextvars.Context().run(answering, self.share, request[1])
            except Exception as problem:  # said to the parent, which raises it; the share stays served
                pipe.send(("failed", f"{type(problem).__name__}: {problem}"))
            else:
                pipe.send(("answer", answer))

    def _share(self, records: Iterator[CaptureRecord]) -> None:
        tracker, kafka, pending, flush = self.tracker, self.kafka, self.pending, self._flush
        segment = tracker.segment
        first = self.index == 0
        others = self._others
        started = False
        for number, timestamp, linktype, data, original_length in records:
            self.read += len(data) + RECORD_OVERHEAD
            if pending:  # notes made while reading this packet
                flush((number, -1, 0, 0))
            if not started:
                started = True
                self._started(timestamp)
            self.key = (number, 0, 0, 0)
            if linktype != 1 or data[26:38] not in others or not _plain_tcp(data):
                raw = decode_tcp(linktype, data, original_length)
                if raw is None:
                    if first:
                        kafka.not_tcp(linktype)
                elif self._owns(raw):
                    segment(number, timestamp, raw)
            if timestamp > tracker.due:  # as in pipeline.frames_from_records
                tracker.tick(timestamp)
            if pending:
                flush(self.key)

    def _share_indexed(self, plan: _SharePlan) -> None:
        """`_share` over an indexed file: the records of this share, and those no index
        can place (not plain Ethernet IPv4 TCP: decoded and placed as `_share` does).
        The others' records only move capture time on (`_ticks`)."""
        import numpy as np

        tracker, kafka, pending, flush = self.tracker, self.kafka, self.pending, self._flush
        segment = tracker.segment
        first = self.index == 0
        data, linktype = plan.index.data, plan.index.linktype
        for chunk, buckets in plan.chunks():
            timestamps = chunk.timestamps
            if chunk.first == 0 and len(timestamps):
                self._started(int(timestamps[0]))
            owners = np.asarray(plan.owner, dtype=np.int8)[buckets]
            mine = np.flatnonzero((buckets < 0) | (owners == self.index))
            highest = np.maximum.accumulate(timestamps)
            previous = -1
            for at, start, captured, timestamp, original, placed in zip(
                    mine.tolist(), chunk.starts[mine].tolist(), chunk.captured[mine].tolist(),
                    timestamps[mine].tolist(), chunk.original[mine].tolist(), (buckets[mine] >= 0).tolist(),
                    strict=True):
                if tracker.due < NEVER and at > previous + 1:
                    self._ticks(chunk, highest, previous + 1, at)
                previous = at
                number = chunk.first + at + 1
                self.key = (number, 0, 0, 0)
                raw = decode_tcp(linktype, data[start:start + captured], original)
                if raw is None:
                    if first:
                        kafka.not_tcp(linktype)
                elif placed or self._owns(raw):
                    segment(number, timestamp, raw)
                if timestamp > tracker.due:
                    tracker.tick(timestamp)
                if pending:
                    flush(self.key)
            if tracker.due < NEVER:
                self._ticks(chunk, highest, previous + 1, len(timestamps))
            if len(timestamps):
                self.read = int(chunk.starts[-1] + chunk.captured[-1]) - 24

    def _started(self, timestamp: int) -> None:
        """The capture's first packet went by: its time is the capture's start (sent by
        worker 0), which a `prepare` that has `started` is told of (`Prepare`)."""
        if self.index == 0:
            self._event((0, 0, 0, 0), "start", timestamp)
        started = getattr(self.prepare, "started", None)
        if started is not None:
            self.prepare = started(timestamp)

    def _ticks(self, chunk: RecordChunk, highest: Any, start: int, stop: int) -> None:
        """Capture time moves on at the chunk's records `start` to `stop` (of other
        shares): each that one process would tick the connections' clock at, ticks it
        here (`highest`: the highest time up to each record, to pass most by at once)."""
        import numpy as np

        tracker, timestamps = self.tracker, chunk.timestamps
        while tracker.due < NEVER and start < stop:
            threshold = tracker.due
            if highest[stop - 1] <= threshold:
                return
            later = np.flatnonzero(timestamps[start:stop] > threshold)
            if not len(later):
                return
            at = start + int(later[0])
            self.key = (chunk.first + at + 1, 0, 0, 0)
            self.tracker.tick(int(timestamps[at]))
            if self.pending:
                self._flush(self.key)
            start = at + 1

    def _owns(self, raw: RawSegment) -> bool:
        """Whether this worker's share holds the segment's connection. An Ethernet IPv4
        4-tuple of another share is remembered, as its bytes in the packet, so that its
        next packets are passed by at the cost of a look-up (`_share`); one of this
        share is remembered as it is. Both up to MAX_REMEMBERED 4-tuples."""
        flow = raw[:4]
        if flow in self._mine:
            return True
        if self.owner[flow_bucket(flow)] == self.index:
            if len(self._mine) < MAX_REMEMBERED:
                self._mine.add(flow)
            return True
        src, src_port, dst, dst_port = flow
        if len(src) == 4 and len(self._others) < MAX_REMEMBERED:
            self._others.add(src + dst + src_port.to_bytes(2, "big") + dst_port.to_bytes(2, "big"))
        return False

    def _closing(self, why: tuple[int, int, int]) -> None:
        """A connection is about to close for capture time or the capture's end: what came
        before goes out under the key before, what its closing makes under its own."""
        self._flush(self.key)
        phase, first, second = why  # a tick's round (its packet's), or the end
        self.key = (END, 2, first, second) if phase == CLOSING_END else (self.key[0], phase, first, second)

    def _unreadable(self, index: int, problem: CaptureError) -> None:
        self._event((0, 0, 0, 0), "unreadable", (index, str(problem)))

    def _flush(self, key: tuple[int, int, int, int]) -> None:
        pending = self.pending
        if not pending:
            return
        for item in pending:
            if isinstance(item, Frame):
                self._frame(key, self.mask(item))
            elif isinstance(item, Connection):
                self._event(key, "open", (item.index, item.client, item.server, item.tls))
            elif isinstance(item, Note):
                self._event(key, "note", item)
        pending.clear()

    def _frame(self, key: tuple[int, int, int, int], frame: Frame) -> None:
        """A frame's event: the frame, its header fields as read here (before pairing
        changes a response's), and what `prepare` made of it."""
        file = self.origins.name_of(frame.last_packet)
        self.numbered += 1
        message = message_from_frame(self.numbered, frame)
        notes = tuple(message.notes) if message.notes else ()  # before pairing adds any
        # a light message's event is what the merge reads of it (`kdissect.light`)
        header = None if self.light else (message.correlation_id, message.api_key, message.api_version,
                                          message.client_id, message.expects_response, notes)
        ready = None
        if self.prepare is not None or self.finish is not None:
            message.file = file
            self.pairer.add(message)
            if self.prepare is not None:
                ready = self.prepare(message)
                if self.light or self.spooled:  # a tuple, its text first (`Prepare`)
                    text = ready[0]
                    if type(text) is tuple:  # put in the ring by `prepare` itself: (offset, length)
                        self.batch_text += text[1]
                    else:
                        if self.light:  # its text, which ends a batch at LIGHT_BATCH_BYTES
                            self.batch_text += len(text)
                        if self.ring is not None and len(text) >= self.ring.least:
                            ready = (self.ring.put(text), *ready[1:])
                        elif self.spooled and type(text) is str:  # an ASCII text: its bytes
                            ready = (text.encode("ascii"), *ready[1:])
            if self.finish is not None:
                self.kept.append(message)
        if header is None:
            light = (frame.connection.index, message.is_request, message.correlation_id, message.expects_response,
                     frame.last_ns, len(frame.data), frame.notes, notes, ready)
            self.sequence += 1
            self.batch.message(key, self.sequence, light)
            if len(self.batch) >= self.batch_events or self.batch_text >= self.batch_bytes:
                self._send_batch()
            return
        event: Any = (frame.connection.index, message.is_request, frame.stream_offset,
                      frame.data, frame.first_packet, frame.first_ns, frame.last_packet, frame.last_ns,
                      frame.complete, frame.notes, file, ready, *header)
        if self.held is not None:  # sent only when asked for (`_serve_held`): its key now
            self.held.append(event)
            self.sequence += 1
            self._held_key((*key, self.sequence))
            return
        self._event(key, "frame", event)

    def _held_key(self, key: Key) -> None:
        """The key of a frame held back, put with the others: in an int64 array, which goes
        to the parent as it is (`Kept`), with nothing to gather or free once the share is
        read; in a list from the first key that does not fit."""
        keys = self.held_keys
        if isinstance(keys, list):
            keys.append(key)
            return
        try:
            keys.extend(key)
        except OverflowError:
            del keys[len(keys) - len(keys) % 5:]  # what went in of this key
            self.held_keys = [tuple(keys[start:start + 5]) for start in range(0, len(keys), 5)]  # type: ignore[misc]
            self.held_keys.append(key)

    def _event(self, key: tuple[int, int, int, int], what: str, event: Any) -> None:
        self.sequence += 1
        if self.light:
            self.batch.add((*key, self.sequence), what, event)
        else:
            self.batch.append(((*key, self.sequence), what, event))
        if len(self.batch) >= self.batch_events and self.held is None:
            self._send_batch()

    def _send_batch(self) -> None:
        self.batch_text = 0
        if self.held is not None:  # holding its frames, it sends every event once its share is read
            self.pipe.send(("keys", _kept(self.held_keys, self.batch)))
            self.held_keys, self.batch = array.array("q"), []
        elif self.light:
            if self.batch:
                self.pipe.send(self.batch.payload(self.read))
                self.batch = Columns()
        elif self.batch:
            self.pipe.send(("events", (self.batch, self.read)))
            self.batch = []


def work(pipe: Pipe, index: int, jobs: int, paths: list[str], options: dict[str, Any],
         prepare: Prepare | None, finish: Finish | None = None, ring: Ring | None = None,
         plan: list[_SharePlan | None] | None = None, parents_ends: Sequence[Pipe] = ()) -> None:
    """A worker process: its share of the capture's connections, as events down `pipe`.
    `plan` holds the `_SharePlan` a forking parent made (None: the file has none), or is
    empty: the worker makes it. `parents_ends`: the parent's ends of the pipes, which a
    forked worker holds too (`inherited`)."""
    close_inherited(parents_ends)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the workers
    gc.freeze()  # what a forked worker inherits stays shared: the cycle collector leaves it be
    if finish is not None:
        # It keeps every message of its share, as `read_pcap` does in one process, and for the
        # same reason without the cycle collector (`cycle_collection_paused`): none is in a
        # cycle, and the collector would walk them again and again as they pile up.
        gc.disable()
    try:
        use_definitions(options["definitions"])
        _Worker(pipe, index, jobs, options, prepare, finish, ring).run(paths, plan)
    except CaptureError as problem:
        _send(pipe, ("capture_error", str(problem)))
    except BaseException as problem:  # every failure goes to the parent, in words
        _send(pipe, ("error", f"{type(problem).__name__}: {problem}"))
    finally:
        pipe.close()


def inherited(context: Any, parents_ends: list[Pipe]) -> list[Pipe]:
    """Of the parent's ends of its workers' pipes (`parents_ends`), those that a worker about
    to be started from `context` holds too, for it to close (`close_inherited`): all of them
    when it is forked, which copies every open descriptor; none when it is not, as it gets
    only what it is sent (and what is sent it would get as a copy)."""
    return parents_ends if context.get_start_method() == "fork" else []


def close_inherited(parents_ends: Sequence[Pipe]) -> None:
    """In a forked worker: the parent's ends of the pipes, its own and the workers' forked
    before it, closed. Kept open, they outlive the parent: a parent killed outright left
    its workers waiting for ever, each writing to a full pipe that it (or a worker forked
    after it) still held open for reading, or reading from one it held open for writing;
    closed, the next write or read ends the worker."""
    for end in parents_ends:
        end.close()


def _send(pipe: Pipe, message: tuple[str, Any]) -> None:
    with contextlib.suppress(OSError, ValueError):  # the parent may be gone
        pipe.send(message)


class _PlanBeside:
    """`_SharePlan.of(paths, jobs)` made by a forked child while this process does something
    else (`read_messages` warms up): a context whose `result` is a box holding the plan.

    What the plan holds (`_SharePlan.state`: its buckets and the index's chunks it kept,
    numpy arrays, about 33 bytes a record) the child writes into memory this process shares
    with it (a memfd), while this process is still busy: only the pickle's frame, a few
    hundred bytes, comes down a pipe, and the arrays are taken where they lie, not copied
    (where no memfd can be made, they come down the pipe in the pickle). This process maps
    the capture file again. Where the child cannot be forked or fails, `result` makes the
    plan here, as it would have been made without a child. Only for a process that may fork
    (one thread, on Linux: `worker_context`). Leaving the context early (an exception)
    ends the child."""

    def __init__(self, paths: list[str], jobs: int) -> None:
        self.paths, self.jobs = paths, jobs
        self.pid, self.reading, self.memory = 0, -1, -1

    def __enter__(self) -> _PlanBeside:
        import fcntl

        reading, writing = os.pipe()
        with contextlib.suppress(OSError):  # a larger pipe: the plan goes in fewer rounds
            fcntl.fcntl(writing, fcntl.F_SETPIPE_SZ, PLAN_PIPE_BYTES)
        with contextlib.suppress(OSError, AttributeError):  # (no memfd: the arrays come down the pipe)
            self.memory = os.memfd_create("kdissect-plan", os.MFD_CLOEXEC)
        try:
            self.pid = os.fork()
        except OSError:
            os.close(reading)
            os.close(writing)
            return self
        if self.pid == 0:
            self._child(reading, writing)
        os.close(writing)
        self.reading = reading
        import numpy  # noqa: F401  (beside the child: the plan comes as numpy arrays)

        return self

    def _child(self, reading: int, writing: int) -> None:
        code = 1
        try:
            os.close(reading)
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent ends it
            plan = _SharePlan.of(self.paths, self.jobs)
            state = None if plan is None else plan.state()
            arrays: list[pickle.PickleBuffer] = []
            frame = pickle.dumps(state, protocol=5, buffer_callback=arrays.append if self.memory >= 0 else None)
            with open(writing, "wb") as out:
                pickle.dump((frame, _shared(self.memory, arrays)), out, protocol=5)
            code = 0
        finally:
            os._exit(code)  # nothing of the parent's runs here: no atexit, no buffers flushed

    def result(self) -> list[_SharePlan | None]:
        if self.pid:
            with open(self.reading, "rb") as source:
                self.reading = -1
                sent = source.read()
            _pid, status = os.waitpid(self.pid, 0)
            self.pid = 0
            if status == 0 and sent:
                frame, places = pickle.loads(sent)
                with contextlib.suppress(NotIndexable, OSError):  # (the file changed since; no room to map)
                    state = pickle.loads(frame, buffers=_mapped(self.memory, places))
                    return [None if state is None else _SharePlan.of_state(self.paths[0], state)]
        return [_SharePlan.of(self.paths, self.jobs)]

    def __exit__(self, *_exception: object) -> None:
        if self.memory >= 0:
            os.close(self.memory)  # (a mapping of it lives on)
            self.memory = -1
        if self.reading >= 0:
            os.close(self.reading)
        if self.pid:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)


def _shared(memory: int, arrays: list[pickle.PickleBuffer]) -> list[tuple[int, int]]:
    """`arrays` (a pickle's out-of-band buffers) written into the memfd `memory`, each where
    a cache line starts: the place (offset, length) of each."""
    import mmap

    places, size = [], 0
    for buffer in arrays:
        length = buffer.raw().nbytes
        places.append((size, length))
        size += -(-length // 64) * 64
    if size:
        os.ftruncate(memory, size)
        with mmap.mmap(memory, size) as shared:
            for (start, length), buffer in zip(places, arrays, strict=True):
                shared[start:start + length] = buffer.raw()
    return places


def _mapped(memory: int, places: list[tuple[int, int]]) -> list[memoryview]:
    """The buffers `_shared` wrote into `memory`, as read-only views of one mapping of it."""
    import mmap

    size = max((start + length for start, length in places), default=0)
    if not size:  # (nothing written: no mapping, which could not be empty)
        return [memoryview(b"") for _place in places]
    view = memoryview(mmap.mmap(memory, size, access=mmap.ACCESS_READ))
    return [view[start:start + length] for start, length in places]


class _SharePlan:
    """Which worker reads each record of a capture file that can be indexed (one classic pcap
    file, `PcapIndex`), computed alike in every worker from the file alone.

    Each record that is a plain Ethernet IPv4 TCP segment (what `_plain_tcp` checks, here
    on a whole chunk of records at once) has its connection's bucket; the buckets go to
    the workers so that each gets about the same bytes (heaviest first, to the least
    loaded). The plan keeps one byte per record (its bucket, -1 when no index can say),
    and the first walk's chunks for the second only up to KEPT_CHUNKS of them.
    """

    def __init__(self, index: PcapIndex, jobs: int) -> None:
        import numpy as np

        self.index = index
        self.buckets: list[Any] = []
        self.kept: list[RecordChunk] | None = []  # the chunks, while they are few
        weights = np.zeros(CLOSED_BUCKETS)
        for chunk in index.chunks():
            buckets = self._buckets(chunk)
            self.buckets.append(buckets)
            if self.kept is not None:
                self.kept = [*self.kept, chunk] if len(self.kept) < KEPT_CHUNKS else None
            placed = buckets >= 0
            weights += np.bincount(buckets[placed], weights=chunk.captured[placed] + PACKET_COST,
                                   minlength=CLOSED_BUCKETS)
        self.owner = balanced(weights.tolist(), jobs)

    @classmethod
    def of(cls, paths: list[str], jobs: int) -> _SharePlan | None:
        if len(paths) != 1:
            return None
        try:
            return cls(PcapIndex(paths[0]), jobs)
        except NotIndexable:
            return None

    def state(self) -> tuple[list[int], list[Any], list[RecordChunk] | None]:
        """What the plan holds beside its index: for `of_state`, in another process."""
        return self.owner, self.buckets, self.kept

    @classmethod
    def of_state(cls, path: str, state: tuple[list[int], list[Any], list[RecordChunk] | None]) -> _SharePlan:
        """The plan of file `path` whose `state` another process made (raises NotIndexable)."""
        plan = cls.__new__(cls)
        plan.index = PcapIndex(path)
        plan.owner, plan.buckets, plan.kept = state
        return plan

    def chunks(self) -> Iterator[tuple[RecordChunk, Any]]:
        """Each chunk of records with its buckets (the file walked again, unless the chunks
        were few enough to keep)."""
        kept, self.kept = self.kept, None
        return zip(self.index.chunks() if kept is None else kept, self.buckets, strict=True)

    def _buckets(self, chunk: RecordChunk) -> Any:
        """The bucket of each record of the chunk (int8), -1 where no plan can say."""
        import numpy as np

        if self.index.linktype != 1:  # (then the file may be shorter than 48 bytes)
            return np.full(len(chunk.starts), -1, dtype=np.int8)
        starts, captured = (np.ascontiguousarray(column, dtype=np.int64) for column in (chunk.starts, chunk.captured))
        return np.frombuffer(_flow_buckets(self.index.data, starts, captured), dtype=np.int8)


def _python_buckets(data: Any, starts: Any, captured: Any) -> bytes:
    """The bucket of each record of an Ethernet capture (its bytes at `starts`, `captured`
    long: int64 arrays) that is a plain IPv4 TCP segment (what `_plain_tcp` checks, here on
    all the records at once), -1 for any other, as bytes (int8 each).

    The reference of `_pcap_index_c.flow_buckets`, and the plan's where that is not built or
    KDISSECT_PURE is set."""
    import numpy as np

    buckets = np.full(len(starts), -1, dtype=np.int8)
    long = np.flatnonzero(captured >= 48)
    if not len(long):
        return buckets.tobytes()
    # the first 48 bytes of each long record, a row each: taken in one step from a view of
    # every 48 bytes of the file (not byte by byte, with an index for each)
    windows = np.lib.stride_tricks.sliding_window_view(np.frombuffer(data, dtype=np.uint8), 48)
    head = windows[starts[long]]

    def byte(offset: int) -> Any:
        return head[:, offset].astype(np.int64)

    total, data_offset = byte(16) << 8 | byte(17), byte(46)
    start = 34 + (data_offset >> 4) * 4
    plain = ((byte(12) << 8 | byte(13)) == 0x0800) & (byte(14) == 0x45) & (byte(23) == 6)
    plain &= ((byte(20) << 8 | byte(21)) & 0x3FFF) == 0
    plain &= (data_offset >= 0x50) & (start <= 14 + total) & (start <= captured[long])
    long = long[plain]
    flows = np.ascontiguousarray(head[plain, 26:38])
    first, inverse = _distinct(flows)
    of_unique = np.array([_flow_bucket(flows[row].tobytes()) for row in first.tolist()], dtype=np.int8)
    buckets[long] = of_unique[inverse] if len(first) else -1
    return buckets.tobytes()


def _distinct(flows: Any) -> tuple[Any, Any]:
    """The distinct rows of `flows` (4-tuples as 12 bytes a row): where each is first found,
    and which of them each row is. Sorting 12-byte rows is slow, so each row's two parts are
    mixed into one 64-bit number, sorted instead; rows found equal that way are checked, and
    should two differ (a clash, rare) the rows themselves are sorted."""
    import numpy as np

    addresses = flows[:, :8].copy().view(np.uint64).ravel()
    ports = flows[:, 8:].copy().view(np.uint32).ravel()
    mixed = addresses ^ ports.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    _unique, first, inverse = np.unique(mixed, return_index=True, return_inverse=True)
    same = first[inverse]
    if not (np.array_equal(addresses[same], addresses) and np.array_equal(ports[same], ports)):
        _unique, first, inverse = np.unique(flows.view("V12").ravel(), return_index=True, return_inverse=True)
    return first, inverse.ravel()


def _flow_bucket(flow: bytes) -> int:
    """The bucket of a 4-tuple given as packet bytes 26 to 38 (addresses, then ports)."""
    return flow_bucket((flow[0:4], int.from_bytes(flow[8:10], "big"), flow[4:8], int.from_bytes(flow[10:12], "big")))


# the buckets of a chunk's records: in C where it is built (`kdissect.native`)
_flow_buckets = native_or("kdissect.ingest._pcap_index_c", "flow_buckets", _python_buckets)


def balanced(weights: list[float], jobs: int) -> list[int]:
    """The worker of each bucket: the heaviest first, each to the least loaded worker (the
    lowest index among equals), so that the workers' loads are about equal."""
    loads = [0.0] * jobs
    owner = [0] * len(weights)
    for bucket in sorted(range(len(weights)), key=lambda b: (-weights[b], b)):
        worker = min(range(jobs), key=lambda w: (loads[w], w))
        owner[bucket] = worker
        loads[worker] += weights[bucket]
    return owner


_IPV4_TCP_HEAD = struct.Struct(">12xHBxH2xHxB22xB")  # as net.decode_tcp's fast path reads it


def _plain_tcp(data: bytes) -> bool:
    """Whether `decode_tcp` surely reads this Ethernet packet as an IPv4 TCP segment whose
    4-tuple is bytes 26 to 38 (addresses, then ports): its fast path's conditions."""
    if len(data) < 48:
        return False
    ethertype, version_length, total, fragment, protocol, data_offset = _IPV4_TCP_HEAD.unpack_from(data)
    start = 34 + (data_offset >> 4) * 4
    return (ethertype == 0x0800 and version_length == 0x45 and protocol == 6 and not fragment & 0x3FFF
            and data_offset >= 0x50 and start <= 14 + total and start <= len(data))


def _handed(released: list[tuple[Any, Any]], hand: Callable[[list[tuple[Any, Any]]], None] | None,
            ) -> list[tuple[Any, Any]]:
    """Messages released (a Light, as a Message; what prepare made of it): handed to `hand`
    as one list (unless empty), if given, and none left to yield; else all of them."""
    if hand is None:
        return released
    if released:
        hand(released)
    return []


def _kept(keys: array.array[int] | list[Key], others: Batch) -> Kept:
    """Every event of a worker that holds its frames, as the parent keeps them (`Kept`): the
    keys of its frames (`_Worker._held_key`) as one array, a row each (a list when a key does
    not fit in 64 bits), which goes through a pipe and is put in order at once; the other
    events as they are."""
    import numpy as np

    if isinstance(keys, list):
        return keys, others
    return np.frombuffer(keys, dtype=np.int64).reshape(-1, 5), others


def _replayed(worker: int, kept: Kept, held: list[Any]) -> Iterator[tuple[Key, int, str, Any]]:
    """A worker's events kept, with the frame events it held back, as `_Team.events` gives them."""
    frames, others = kept
    keys = frames.tolist() if not isinstance(frames, list) else frames
    framed = ((tuple(key), "frame", event) for key, event in zip(keys, held, strict=True))
    for key, what, event in heapq.merge(framed, others, key=itemgetter(0)):
        yield key, worker, what, event


def _light(prepare: Prepare | None, options: dict[str, Any]) -> bool:
    """Whether workers send their messages light, in "lights" batches (`kdissect.light`):
    for a `prepare` whose `light` is true, when they do not hold their frames."""
    return bool(getattr(prepare, "light", False)) and not options.get("hold")


def _skip(_index: int, _problem: CaptureError) -> None:
    """Unreadable files are worker 0's to report; the others leave them out quietly."""


def _ignore(_note: Note) -> None:
    pass
