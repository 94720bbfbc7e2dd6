"""The `kdissect` command: Kafka messages of packet captures, listed, dissected, exported."""

from __future__ import annotations

import argparse
import codecs
import contextlib
import errno
import functools
import io
import json
import os
import stat
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any, BinaryIO, NamedTuple

from kdissect import __version__
from kdissect.decode.tree import printable
from kdissect.ingest.capture import CaptureError
from kdissect.ingest.framing import DEFAULT_PORTS, MAX_FRAME_SIZE
from kdissect.notes import Note
from kdissect.pair.message import Message
from kdissect.pipeline import CaptureClock, read_messages
from kdissect.present.progress import Progress
from kdissect.spool import Ring, SpooledOutput, number_text, read_all

if TYPE_CHECKING:
    from kdissect.present.changes import ChangeMarker
    from kdissect.present.field_output import FieldColumns
    from kdissect.present.filter import BodyTests, Known, Selection

Prepare = Callable[[Message], Any]
EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2
MAX_CAPTURE_NOTES = 20  # capture-level problems shown per file before summarising

EXAMPLES = """\
examples:
  kdissect capture.pcap                      one line per Kafka message
  kdissect -V capture.pcap                   ... and the annotated field tree of each
  kdissect -V -x --api 55 capture.pcap       DescribeQuorum only, with hex dumps
  kdissect -Y 'api_key == 61 and latency_ms > 5' capture.pcap
  kdissect -Y 'ErrorCode != 0' capture.pcap  any error code anywhere in a body
  kdissect -Y 'Topics[].Partitions[].LeaderId == -1' capture.pcap
  kdissect --port 19092 capture.pcap         also treat port 19092 as Kafka
  kdissect -T jsonl capture.pcap | jq .api_name
  kdissect -T fields -e frame.number -e api_name -e kafka.topic_name capture.pcap
  kdissect --stats capture.pcap              per-API, client, topic and connection statistics
  kdissect --interval 10s capture.pcap       requests, errors and p99 latency per 10 s
  kdissect --top 10 capture.pcap             the ten slowest exchanges
  kdissect --export out/ --format parquet capture.pcap
  kdissect -V --jobs 2 big.pcap              two worker processes, the same output as one
  tcpdump -i any -U -w - port 9092 | kdissect -     live, streaming
  kdissect --findings capture.pcap           what went wrong, ranked (-T jsonl for tools)
  kdissect report capture.pcap -o out.html   one self-contained page: findings, charts, packets

display filters (-Y), Wireshark's syntax:
  fields     message columns: number frame time stream src dst direction api_key
             api_name api_version correlation_id client_id length pair latency_ms
             tls notes file; expert expert.severity; ip.addr ip.src ip.dst tcp.port tcp.srcport
             tcp.dstport tcp.stream frame.number; Wireshark's kafka.* names
             (kafka.api_key kafka.error_code kafka.topic_name kafka.partition_id ...);
             and every body field: a name at any depth (ErrorCode) or a path
             (Topics[].Partitions[].LeaderId, Topics[0].Name)
  operators  == != < <= > >= (eq ne lt le gt ge), contains, matches (~, a regular
             expression), in {1 2 5..9}, not in, and/or/not (&& || !), a bare field
             is true when present; a field with several values matches when any does

exit status: 0 when every capture was read (malformed messages are reported, not
fatal), 2 for usage errors (a bad filter too) and unreadable or non-capture files.
"""

TIME_FORMATS = {"r": "seconds since the capture's first packet (default)",
                "a": "absolute UTC date and time", "ad": "the same as a",
                "d": "seconds since the previous message shown"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kdissect",
        description="Dissect Apache Kafka traffic in pcap/pcapng captures: every request and "
        "response, paired, with latency; every body decoded field by field from Kafka's "
        "message definitions (see --list-apis).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("files", nargs="*", metavar="FILE",
        help="pcap or pcapng capture, possibly gzip/bzip2/xz/zstd-compressed; '-' reads standard "
        "input; several files are read as one capture merged by packet time (a rotated set)")
    add("--separate", action="store_true",
        help="read each file as a capture of its own (own numbering and connections), e.g. "
        "files from different capture points")
    add("--show-file", action="store_true",
        help="end each summary line with the file its message's last packet came from")
    add("-V", "--verbose", action="store_true", help="print the annotated field tree of each message")
    add("-i", "--info", action="store_true",
        help="add what each body says to its summary line: the topics, groups and transactional "
        "ids its definition names, every non-zero error code by name, and the API's own summary "
        "(Produce, Fetch, Metadata, group coordination, offsets, transactions, quorum, producers, "
        "partitions, ...); mark a leader change or an epoch bump against the previous response "
        "of the connection; decodes the bodies, so it is slower")
    add("-x", "--hex", action="store_true", help="print a hex dump of each message's bytes")
    add("-T", "--output", choices=("text", "json", "jsonl", "fields"), default="text",
        help="output format: text (default), json (one array; one object with --stats), "
        "jsonl (one object per line), fields (the -e fields of each message, one row each)")
    add("-e", dest="columns", action="append", metavar="FIELD",
        help="with -T fields: a column, by any name -Y takes (frame.number, api_name, "
        "latency_ms, kafka.topic_name, ErrorCode, Topics[].Partitions[].LeaderId, ...); repeatable")
    add("-E", dest="column_options", action="append", default=[], metavar="OPTION",
        help="with -T fields, as tshark: header=y|n, separator=/t|/s|CHAR, occurrence=f|l|a, "
        "aggregator=,|/s|CHAR, quote=d|s|n; repeatable")
    add("--port", type=_port, action="append", default=[], metavar="N",
        help=f"treat TCP port N as Kafka (repeatable; {', '.join(map(str, DEFAULT_PORTS))} always is)")
    add("--no-detect", action="store_true",
        help="only use the ports, do not detect Kafka on other ports from the first bytes")
    add("--api", type=_api_list, metavar="LIST",
        help="keep only these APIs, by key or name: --api 55,61 or --api DescribeQuorum")
    add("-Y", "--filter", metavar="EXPR",
        help="keep messages matching the display filter EXPR, e.g. 'latency_ms > 5' or "
        "'ErrorCode != 0' (see below)")
    add("-c", "--count", type=_positive, metavar="N", help="stop after N messages are shown")
    add("-t", "--time", choices=tuple(TIME_FORMATS), default="r",
        help="time column: " + "; ".join(f"{k} {v}" for k, v in TIME_FORMATS.items()))
    add("--frames", action="store_true",
        help="show the frame number of each message's last packet (Wireshark's No.) "
        "after the message number")
    add("--wide", action="store_true", help="do not shorten field descriptions in trees")
    add("--about", action="store_true",
        help="in JSON output, give each tree node the schema's description of its field (`about`)")
    add("--stats", action="store_true",
        help="print per-API (counts, errors, latency percentiles, bytes), per-client-id, "
        "per-topic (records and bytes produced and fetched) and per-connection statistics "
        "instead of the message list")
    add("--findings", action="store_true",  # main() hands these to the report module's parser
        help="print what went wrong, most severe first, with the messages as evidence, "
        "instead of the message list (its options: kdissect --findings --help)")
    add("--interval", type=_duration, metavar="DURATION",
        help="print requests, responses, errors and p99 latency per time bucket "
        "(10s, 500ms, 1m) instead of the message list, like tshark -z io,stat")
    add("--top", type=_positive, metavar="N",
        help="print the N slowest exchanges, one line each (latency, API, client, error)")
    add("-j", "--jobs", type=_positive, metavar="N",
        help="worker processes, each following a share of the connections; the output is the "
        "same as with one (default: every core for captures of 16 MiB or more, else 1; "
        "standard input and --tls-keylog are read in one process)")
    add("--export", metavar="DIR", help="write the analysis tables of the messages -Y, --api "
        "and -c select to DIR instead of listing them (Parquet: one dataset partitioned by "
        "table and capture file, DIR/messages/capture=NAME/part.0.parquet)")
    add("--format", choices=("parquet", "csv"), default="parquet", help="format for --export")
    add("--tls-keylog", action="append", metavar="FILE",
        help="decrypt TLS with the session keys of an NSS key log (SSLKEYLOGFILE); repeatable")
    add("--show-secrets", action="store_true",
        help="show SASL passwords, SCRAM proofs and tokens (masked by default)")
    add("--max-frame-size", type=_positive, default=MAX_FRAME_SIZE, metavar="BYTES",
        help=f"largest plausible Kafka frame (default {MAX_FRAME_SIZE})")
    add("--schemas", metavar="PATH",
        help="decode with these Kafka message definitions first: a folder of Kafka's *.json "
        "message files (clients/src/main/resources/common/message) or a kafka-clients jar")
    add("--list-apis", action="store_true",
        help="print every API key with the versions kdissect decodes and their definition source")
    add("--version", action="version", version=f"kdissect {__version__}")
    return parser


def _port(text: str) -> int:
    value = _integer(text)
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (1-65535)")
    return value


def _positive(text: str) -> int:
    value = _integer(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive integer")
    return value


def _integer(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


_DURATION_UNITS = {"us": 1e-6, "ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
SHORTEST_INTERVAL = 1e-6  # seconds: --interval finer than a microsecond says nothing more


def _duration(text: str) -> float:
    number = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = text[len(number):] or "s"
    try:
        seconds = float(number) * _DURATION_UNITS[unit]
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 10s, 500ms or 1m") from None
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive duration")
    if seconds < SHORTEST_INTERVAL:
        raise argparse.ArgumentTypeError(f"{text!r} is shorter than a microsecond (1us)")
    return seconds


def _api_list(text: str) -> frozenset[int]:
    from kdissect.present.filter import api_keys

    try:
        return api_keys(filter(None, (part.strip() for part in text.split(","))))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["report"] or "--findings" in argv:  # parsed by the report module itself
        from kdissect.present.report import command

        return command(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    _definitions(parser, args)
    if args.list_apis:
        from kdissect.present.definitions import api_table

        print(api_table())
        return EXIT_OK
    if not args.files:
        parser.error("the following arguments are required: FILE")
    _check_fields_output(parser, args)
    _tolerant_stdout()
    keep: Selection = _every
    if args.filter is not None and not args.filter.strip():  # -Y '' or -Y ' ': no filter, as tshark
        args.filter = None
    if args.api is not None or args.filter:  # the filter's machinery only when there is one
        from kdissect.present.filter import FilterError, selector

        try:
            keep = selector(args.api, args.filter, start=_ORIGIN.start)
        except FilterError as exc:  # one line, as tshark says a filter is not valid
            _warn(f"-Y: {exc}")
            return EXIT_USAGE
    if args.output == "fields":
        from kdissect.present.field_output import FieldColumns, parse_format
        from kdissect.present.filter import FilterError

        try:
            form = parse_format(args.column_options)
        except FilterError as exc:
            _warn(f"-E: {exc}")
            return EXIT_USAGE
        try:
            args.columns = FieldColumns(args.columns, form, _ORIGIN.start_ns)
        except FilterError as exc:
            _warn(f"-e: {exc}")
            return EXIT_USAGE
    if args.tls_keylog:  # read once for every capture; cryptography is imported only now
        from kdissect.ingest.tls import KeyLogError, load_keylog

        try:
            args.tls_keylog = load_keylog(args.tls_keylog)
        except KeyLogError as exc:
            _warn(f"--tls-keylog: {exc}")
            return EXIT_USAGE
    try:
        return _run(args, keep)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_OK
    except OSError as exc:
        if exc.errno not in _OUTPUT_FULL:
            return _internal_error(exc)
        with contextlib.suppress(OSError, ValueError):  # what is still buffered cannot be
            _silence_stdout()                          # written either: not tried again at exit
        print(f"kdissect: cannot write the output: {exc.strerror}", file=sys.stderr)
        return EXIT_INTERNAL
    except Exception as exc:  # the last line of defence: never a traceback for the user
        return _internal_error(exc)


# Why a write fails when the output, not kdissect, is at fault: a full disk or quota, or
# a file past its size limit (errors only a write gives). Said as such, not as an
# internal error.
_OUTPUT_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _internal_error(exc: Exception) -> int:
    if os.environ.get("KDISSECT_DEBUG"):
        raise exc
    print(f"kdissect: internal error: {type(exc).__name__}: {exc} "
          "(set KDISSECT_DEBUG=1 for details)", file=sys.stderr)
    return EXIT_INTERNAL


def _every(_message: Message, _known: Known | None = None, /) -> bool:
    return True


def _check_fields_output(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """-T fields, -e and -E go together, and only with the message list."""
    if args.output != "fields":
        if args.columns or args.column_options:
            parser.error(f"{'-e' if args.columns else '-E'} needs -T fields")
        return
    if not args.columns:
        parser.error("-T fields needs at least one -e FIELD (e.g. -e frame.number -e api_name)")
    other = [option for option, given in (("--stats", args.stats), ("--interval", args.interval),
                                          ("--top", args.top), ("--export", args.export)) if given]
    if other:
        parser.error(f"-T fields lists messages; it does not combine with {other[0]}")


def _definitions(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.schemas is None:
        return
    from kdissect.decode.schema import SchemaError, configure_definitions

    try:
        configure_definitions(args.schemas)
    except SchemaError as exc:
        parser.error(str(exc))


def _run(args: argparse.Namespace, keep: Selection) -> int:
    if args.export:
        from kdissect.present.export import export_files

        def read(paths: list[str], lost: list[str]) -> Iterator[tuple[Message, Any] | None]:
            return _messages(paths, args, _ORIGIN.new(), lost=lost)

        return export_files(args, keep, read, _warn)
    sink = _make_sink(args)
    try:
        status = _list(args, keep, sink)
    except BaseException:  # what was listed before still reaches the reader, if it can
        with contextlib.suppress(OSError):
            sink.flush()
        raise
    sink.flush()
    return status


def _list(args: argparse.Namespace, keep: Selection, sink: _Sink) -> int:
    """Every message of every capture (group) to the sink; the exit status."""
    status = EXIT_OK
    shown = unreadable = 0
    see = sink.see if sink.sees else None
    selected = None if keep is _every else keep
    write = sink.write
    groups = [[path] for path in args.files] if args.separate else [args.files]
    for paths in groups:
        clock = _ORIGIN.new()
        if args.separate:
            sink.new_capture(_display_name(paths[0]))
        sink.begin(clock)
        sink.prompt = sink.prompt or _live_input(paths)
        # Where every message is written and none is looked at here, `--jobs` hands them to
        # the sink a round of its merge at a time, to be written at once (`write_released`):
        # -i's marks too are then the workers' (`_TextLines`), when they make the text.
        looked_at = see is not None and getattr(sink, "coding", None) is None
        hand = None if looked_at or selected or args.count or sink.prompt else sink.write_released
        prepare, split = _with_filter_tests(sink.prepare, args, paths)
        for found in _messages(paths, args, clock, prepare, functools.partial(sink.flush, through=True),
                               released=hand):
            if found is None:
                status = EXIT_USAGE
                unreadable += 1
                continue
            message, prepared = found
            known = None
            if split and prepared is not None:
                prepared, known = prepared
            if see is not None and prepared is None:  # (else its worker saw it)
                see(message)
            if selected is not None and not selected(message, known):
                continue
            write(message, prepared)
            shown += 1
            if args.count and shown >= args.count:
                sink.close()
                return status
    if unreadable < len(args.files):  # no statistics, no empty JSON, when no file could be read
        sink.close()
    return status


def _with_filter_tests(prepare: Prepare | None, args: argparse.Namespace,
                        paths: list[str]) -> tuple[Prepare | None, bool]:
    """With --jobs and a filter, the workers evaluate it as far as they can (`filter.BodyTests`),
    beside what the output's `prepare` makes: (the prepare to run, whether its results are
    such pairs)."""
    if not args.filter or _jobs(paths, args) == 1 or getattr(prepare, "spooled", False):
        return prepare, False
    from kdissect.present.filter import BodyTests

    tests = BodyTests.of(args.filter)
    if tests is None:
        return prepare, False
    return _PreparedAndKnown(prepare, tests), True


class _PreparedAndKnown:
    """A worker's `prepare` for the output and its evaluation of the filter, as one
    (picklable, as each of them is). A message the filter rejects on what the worker reads
    is not prepared (`-V -Y 'kafka.topic_name == "x"'` formats only the messages that can
    pass)."""

    warm_up = True

    def __init__(self, prepare: Prepare | None, tests: BodyTests) -> None:
        self.prepare, self.tests = prepare, tests
        self.preload = (*getattr(prepare, "preload", ()), *tests.preload)

    def __call__(self, message: Message) -> tuple[Any, Any]:
        known = self.tests(message)
        if self.prepare is None or known[2] is False:
            return None, known
        return self.prepare(message), known


class _Origin:
    """The clock of the capture being read, which -Y's `time_relative` counts from: each
    capture read (each file, with --separate) starts a new one."""

    clock: CaptureClock | None = None

    def new(self) -> CaptureClock:
        self.clock = CaptureClock()
        return self.clock

    def start(self) -> float | None:
        return None if self.clock is None else self.clock.start

    def start_ns(self) -> int | None:
        return None if self.clock is None else self.clock.start_ns


_ORIGIN = _Origin()


def _live_input(paths: list[str]) -> bool:
    """Whether a capture comes from a pipe, a terminal or a device (`tcpdump -w - | kdissect -`)
    rather than a regular file: its messages are then written as soon as each is known."""
    for path in paths:
        try:
            mode = os.fstat(sys.stdin.fileno()).st_mode if path == "-" else os.stat(path).st_mode
        except (OSError, ValueError, AttributeError):  # no usable stdin, or unreadable (reported later)
            continue
        if not stat.S_ISREG(mode):
            return True
    return False


def _messages(paths: list[str], args: argparse.Namespace, clock: CaptureClock,
              prepare: Prepare | None = None, before_note: Callable[[], None] | None = None,
              *, released: Callable[[list[tuple[Message, Any]]], None] | None = None,
              lost: list[str] | None = None) -> Iterator[tuple[Message, Any] | None]:
    """The messages of the captures in `paths`, read as one capture merged by packet time,
    each with what `prepare` made of it (on a worker process with --jobs), else None.

    A None is yielded for each file that could not be read (after its one-line
    message); the other files are still read. `released`, if given, may be handed the
    messages of `--jobs` a list at a time, in their place (`parallel.read_messages`).
    `lost`, if given, is told the name of each file that could not be read.
    """
    lost = [] if lost is None else lost
    jobs = _jobs(paths, args)
    if jobs > 1:
        yield from _parallel_messages(paths, args, clock, prepare, jobs, before_note, released=released,
                                      lost=lost)
        return
    opened = [(path, _open_capture(path)) for path in paths]
    readable = [(path, stream) for path, stream in opened if stream is not None]
    for path, stream in opened:
        if stream is None:
            lost.append(_display_name(path))
            yield None
    if not readable:
        return
    names = [_display_name(path) for path, _ in readable]
    problems = _ProblemReporter(names[0] if len(names) == 1 else "", before_note)
    progress = [Progress(stream, path) for path, stream in readable]
    failed: list[int] = []

    def unreadable(index: int, problem: CaptureError) -> None:
        _warn(f"{names[index]}: {problem}")
        lost.append(names[index])
        failed.append(index)

    try:
        for message in read_messages([p.reader for p in progress], ports=[*DEFAULT_PORTS, *args.port],
                                     detect=not args.no_detect, max_frame_size=args.max_frame_size,
                                     report=problems, unreadable=unreadable, names=names, clock=clock,
                                     tls_keylog=args.tls_keylog, show_secrets=args.show_secrets):
            yield message, None
    except CaptureError as exc:
        _warn(f"{names[0]}: {exc}")
        lost.append(names[0])
        yield None
    finally:
        for bar in progress:
            bar.close()
        problems.close()
        for _path, stream in readable:
            if stream is not sys.stdin.buffer:
                stream.close()
    for _ in failed:
        yield None


def _jobs(paths: list[str], args: argparse.Namespace) -> int:
    """How many worker processes read `paths`: 1 for standard input and TLS key logs. Where
    `--jobs N` asked for more, the first time says why one process reads."""
    if args.jobs == 1:
        return 1
    from kdissect.parallel import MAX_JOBS, default_jobs, parallel_readable

    if args.tls_keylog:
        _one_process(args, "a capture read with a TLS key log is read in one process "
                           "(TLS 1.2 sessions resume across connections)")
        return 1
    if not parallel_readable(paths):
        _one_process(args, _why_one_process(paths))
        return 1
    return min(args.jobs, MAX_JOBS) if args.jobs else default_jobs(paths)


def _one_process(args: argparse.Namespace, why: str | None) -> None:
    if why and args.jobs and not getattr(args, "one_process_said", False):
        args.one_process_said = True
        _warn(f"--jobs {args.jobs}: {why}")


def _why_one_process(paths: list[str]) -> str | None:
    """Why these captures cannot be read by worker processes (None: a file that cannot be
    looked at, which the reading names)."""
    from kdissect.parallel import portable_definitions

    for path in paths:
        if path == "-":
            return "standard input is read in one process (it cannot be read twice)"
        try:
            regular = stat.S_ISREG(os.stat(path).st_mode)
        except OSError:
            return None
        if not regular:
            return f"{_display_name(path)} is read in one process (a pipe or a device cannot be read twice)"
    if portable_definitions() is None:
        return "message definitions from a jar cannot be given to worker processes: one process reads"
    return None


def _parallel_messages(paths: list[str], args: argparse.Namespace, clock: CaptureClock,
                       prepare: Prepare | None, jobs: int, before_note: Callable[[], None] | None = None,
                       *, released: Callable[[list[tuple[Message, Any]]], None] | None = None,
                       lost: list[str]) -> Iterator[tuple[Message, Any] | None]:
    """`_messages` on `jobs` worker processes (files that cannot be opened are left out first)."""
    from kdissect.parallel import read_messages as read_in_parallel  # a WorkerError is internal

    # The command multiplies no matrices: the pool of threads OpenBLAS starts when numpy is
    # first imported (here, for the capture's index) would only cost CPU (a tenth of its
    # import's time on two cores).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    readable = []
    for path in paths:
        stream = _open_capture(path)
        if stream is None:
            lost.append(_display_name(path))
            yield None
            continue
        stream.close()
        readable.append(path)
    if not readable:
        return
    problems = _ProblemReporter(readable[0] if len(readable) == 1 else "", before_note)
    bar = Progress.of_bytes(_set_name(readable), functools.partial(_plain_size, readable))
    failed = 0

    def unreadable(index: int, problem: CaptureError) -> None:
        nonlocal failed
        _warn(f"{readable[index]}: {problem}")
        lost.append(readable[index])
        failed += 1

    from kdissect.decode.values import cycle_collection_paused

    # Where the workers make the output, or all the merge reads of a message (`light`:
    # --stats, --interval, --top, -T fields), the merge makes no reference cycles: it runs
    # without the cycle collector (`cycle_collection_paused`), which would walk again and
    # again the batches read ahead of the merge (a sixth of the merging process's time;
    # for --stats, 0.8 s of 4 on 100 MB). Where it decodes bodies itself (-Y; -i with
    # -t d), the collector stays on.
    acyclic = getattr(prepare, "spooled", False) or getattr(prepare, "light", False)
    paused = cycle_collection_paused() if acyclic else contextlib.nullcontext()
    try:
        with paused:
            yield from read_in_parallel(readable, jobs, ports=[*DEFAULT_PORTS, *args.port],
                                        detect=not args.no_detect, max_frame_size=args.max_frame_size,
                                        report=problems, unreadable=unreadable, clock=clock,
                                        show_secrets=args.show_secrets, prepare=prepare,
                                        preload=getattr(prepare, "preload", ()),
                                        progress=None if bar is None else bar.reach, released=released)
    except CaptureError as exc:
        _warn(f"{readable[0]}: {exc}")
        lost.append(readable[0])
        yield None
    finally:
        if bar is not None:
            bar.close()
        problems.close()
    for _ in range(failed):
        yield None


def _set_name(paths: list[str]) -> str:
    """What the progress bar calls the capture files read together."""
    name = os.path.basename(paths[0])
    return name if len(paths) == 1 else f"{name} and {len(paths) - 1} more"


def _plain_size(paths: list[str]) -> int:
    """The bytes of capture files the workers read, for progress: 0 (not known) when a file
    is compressed or cannot be sized."""
    from kdissect.ingest.compressed import compression_of

    total = 0
    for path in paths:
        try:
            with open(path, "rb") as stream:
                if compression_of(stream.read(8)) is not None:
                    return 0
            total += os.path.getsize(path)
        except OSError:
            return 0
    return total


def _open_capture(path: str) -> BinaryIO | None:
    if path == "-":
        return sys.stdin.buffer
    name = _display_name(path)
    if os.path.isdir(path):
        _warn(f"{name}: is a directory, not a capture file")
        return None
    try:
        return open(path, "rb")
    except OSError as exc:
        _warn(f"{name}: {exc.strerror or exc}")
        return None


def _display_name(path: str) -> str:
    return "standard input" if path == "-" else path


def _warn(text: str) -> None:
    """A one-line message to stderr, escaped as text from the wire is: it may quote a file
    name, and a name can hold control characters."""
    print(f"kdissect: {printable(text)}", file=sys.stderr)


class _ProblemReporter:
    """Capture-level notes to stderr, a bounded number per capture.

    `name` prefixes each note; it is empty for a set of files, whose notes name
    their file themselves. `before` runs before each note is written (the lines
    listed so far go out first, so that output and notes keep their order).
    """

    def __init__(self, name: str, before: Callable[[], None] | None = None) -> None:
        self.prefix = f"{name}: " if name else ""
        self.count = 0
        self.before = before

    def __call__(self, note: Note) -> None:
        self.count += 1
        if self.count <= MAX_CAPTURE_NOTES:
            self._write(f"{self.prefix}{note}")

    def close(self) -> None:
        if self.count > MAX_CAPTURE_NOTES:
            self._write(f"{self.prefix}... and {self.count - MAX_CAPTURE_NOTES} more capture problems")

    def _write(self, text: str) -> None:
        if self.before is not None:
            self.before()
        _warn(text)


def _make_sink(args: argparse.Namespace) -> _Sink:
    if args.stats or args.interval or args.top:
        return _StatsSink(args)
    if args.output == "fields":
        return _FieldsSink(sys.stdout, args.columns, light=not args.filter and args.api is None)
    if args.output == "json":
        return _JsonSink(sys.stdout, array=True, about=args.about, args=args)
    if args.output == "jsonl":
        return _JsonSink(sys.stdout, array=False, about=args.about, args=args)
    return _TextSink(sys.stdout, args)


class _Sink:
    prepare: Prepare | None = None  # what a worker process computes of each message (--jobs)
    sees = False  # whether `see` must hear of every message
    prompt = False  # whether each message must reach the reader at once (live input)

    def begin(self, clock: CaptureClock) -> None:
        """A capture starts; its first packet's time is known once its first message is."""

    def new_capture(self, name: str) -> None:
        """With --separate, before `begin`: the file read next is a capture of its own."""

    def see(self, message: Message) -> None:
        """Every message goes by here, shown or not (before -Y, --api and -c decide)."""

    def write(self, message: Message, prepared: Any = None) -> None:
        raise NotImplementedError

    def write_released(self, released: list[tuple[Message, Any]]) -> None:
        """Messages as the merge of `--jobs` releases them, a round at a time, each with what
        its worker made of it: written as `write` writes each (`_list` hands them so when
        nothing else must see each message)."""
        write = self.write
        for message, prepared in released:
            write(message, prepared)

    def flush(self, *, through: bool = False) -> None:
        """Write out what is still held (at the end, on the way out after an error, and,
        `through` to the reader, before a note goes to stderr)."""

    def close(self) -> None:
        pass


SUMMARY_BATCH = 512  # summary lines written to the output at once (unless the input is live)


class _TextSink(_Sink):
    def __init__(self, out: IO[str], args: argparse.Namespace) -> None:
        from kdissect.present.summary import notes_text, summary_line

        self.out, self.args = out, args
        self.summary_line, self.notes_text = summary_line, notes_text
        self.clock = CaptureClock()
        self.previous: int | None = None  # the time (ns) of the previous message shown
        self.changes: ChangeMarker | None = None
        if args.info:
            from kdissect.present.changes import ChangeMarker

            self.changes = ChangeMarker()
        self.sees = self.changes is not None
        self.marks: tuple[Message | None, str] = (None, "")
        # with --jobs and -i: per worker, the capture's number of each response, by the worker's,
        # that a later change mark may name (`_TextLines`, `Marked`): one per connection and API
        self.named: dict[int, dict[int, int]] = {}
        self.when = {"a": utc_date_time, "ad": utc_date_time, "d": self._delta}.get(
            args.time, self._relative)
        self.relative = args.time not in ("a", "ad", "d")
        self.body_info, self.frame_number, self.show_file = args.info, args.frames, args.show_file
        self.lines_only = not (args.verbose or args.hex)
        self.held: list[str] = []  # summary lines not yet written
        self.prompt = _terminal(out)  # a person is reading: each line at once
        if args.verbose:
            self.prepare = functools.partial(tree_text, wide=args.wide)
        self.chunks: list[Any] = []  # encoded text of messages not yet written (`_TextLines`)
        self.bytes_out: SpooledOutput | None = None  # where they are written (`_write_bytes`)
        self.coding = _TextLines.coding(out, args)
        if self.coding is not None:
            self.prepare = _TextLines(args, *self.coding)
        # Where the output is UTF-8 over bytes, the text (-V, -x) of a message with a character
        # beyond ASCII is encoded here, piece by piece (`_write_encoded`): only the pieces that
        # hold one are then encoded character by character, not the whole text (a third of
        # -V's, on mixed traffic). The rest, most, is written as text, as before.
        self.encoded = None if self.coding is None or self.lines_only or codecs.lookup(
            self.coding[0]).name != "utf-8" else self.coding

    def begin(self, clock: CaptureClock) -> None:
        """A capture starts (each of --separate's files is one): its own connections, its
        own numbers, so change marks compare within it only."""
        self.clock = clock
        if self.changes is not None:
            self.changes = type(self.changes)()
        self.named.clear()  # (the merge of its own workers' numbers)

    def see(self, message: Message) -> None:
        if self.changes is not None:  # against the previous response, shown or not
            self.marks = (message, self.changes.marks(message))

    def write(self, message: Message, prepared: Any = None) -> None:
        if type(prepared) is tuple:
            self._write_prepared(message, prepared)
            return
        line = self.line(message)
        if self.lines_only:
            held = self.held
            held.append(line)
            if len(held) >= SUMMARY_BATCH or self.prompt:
                self.flush()
            return
        lines = self.pieces(message, line, prepared)
        text = "\n".join(lines)
        if self.encoded is None or text.isascii():
            self.out.write(text)
        else:
            self._write_encoded(lines, *self.encoded)
        if self.prompt:
            self.out.flush()

    def line(self, message: Message) -> str:
        """The message's summary line, with what -i and --show-file add."""
        start = self.clock.start_ns
        if self.relative and start is not None:  # the default: formatted there
            line = self.summary_line(message, start, body_info=self.body_info, frame_number=self.frame_number)
        else:
            line = self.summary_line(message, body_info=self.body_info, when=self.when(message.frame.last_ns),
                                     frame_number=self.frame_number)
        if self.marks[0] is message:
            line += self.marks[1]
        if self.show_file:
            line += _file_part(message)
        return line

    def pieces(self, message: Message, line: str, tree: str | None = None) -> list[str]:
        """The -V/-x text of a message, as pieces to join with newlines: `line`, its tree
        (`tree`, or made here), its hex dump, and the blank line after it."""
        lines = [line]
        if self.args.verbose:
            if tree is None:  # the tree's pieces, joined once with the rest
                _tree_lines()(message, lines, wide=self.args.wide)
            else:
                lines.append(tree)
        if self.args.hex:
            from kdissect.present.hexdump import hexdump

            lines.append(hexdump(message.frame.data))
        lines += ("", "")  # the blank line after each message
        return lines

    def _write_encoded(self, lines: list[str], encoding: str, errors: str) -> None:
        """The text of a message with a character beyond ASCII, the pieces `lines` joined by
        newlines, each piece encoded by itself; written under the text written before."""
        self.out.flush()  # the text before it, first
        self.out.buffer.write(_encoded_pieces(lines, encoding, errors))  # type: ignore[attr-defined]

    def flush(self, *, through: bool = False) -> None:
        held = self.held
        if held:
            held.append("")
            text = "\n".join(held)
            held.clear()
            self.out.write(text)
        if self.chunks:
            self._write_chunks()
        if self.prompt or through:
            self.out.flush()

    def _write_prepared(self, message: Message, prepared: tuple[Any, ...]) -> None:
        """A message whose text a worker made (`_TextLines`; bytes, or a `spool.Piece`): the
        capture's number before it; when the merge gave the message notes the worker could
        not know of, its summary line's notes as the merge has them; a change mark's number
        made the capture's (`Marked`)."""
        tail, notes, cut, end = prepared[:4]
        marked: Marked | None = prepared[4] if len(prepared) > 4 else None
        if self.held:
            self.flush()
        chunks = self.chunks
        if notes == len(message.notes) and marked is None:
            chunks += (number_text(message.number), tail)  # joined once, when written: one copy of the text
        else:
            if chunks:  # first: reading a text out of a worker's ring frees the ring up to its end
                self._write_chunks()
            text = read_all(tail)
            if marked is not None:
                text = self._renumbered(message, text, marked)
            if notes == len(message.notes):
                chunks += (number_text(message.number), text)
            else:
                found = self.notes_text(_with_tree_notes(message.all_notes(), marked)).encode(
                    *self.coding or ("utf-8",))
                chunks += (number_text(message.number), text[:cut], found, text[end:])
        if len(chunks) >= 2 * SUMMARY_BATCH or self.prompt:
            self.flush()

    def _write_chunks(self) -> None:
        self.bytes_out = _write_bytes(self.out, self.chunks, self.bytes_out)

    def _renumbered(self, message: Message, text: bytes, marked: Marked) -> bytes:
        """A worker's -i text (`Marked`) with its change mark naming the capture's number of
        the response it names; the numbers a later mark may name kept (`named`): per
        worker, the previous response of each of its connections and APIs."""
        named = self.named.setdefault(marked.worker, {})
        found = named.get(marked.local) if marked.local else None
        if found is not None:  # after the notes: put in first
            text = text[:marked.at] + b"%d" % found + text[marked.at + marked.size:]
        if marked.dropped:
            named.pop(marked.dropped, None)
        if marked.kept:
            named[marked.kept] = message.number
        return text

    def write_released(self, released: list[tuple[Message, Any]]) -> None:
        """As `_Sink.write_released`, the texts the workers made written straight to the
        output's file descriptor (`light.texts_written`: in C where it is built), each message
        that needs more (notes pairing gave it, no text) by `write` in its place."""
        try:
            fd = self.out.fileno()
        except (AttributeError, OSError, ValueError):
            fd = -1
        if fd < 0 or self.prompt or not hasattr(os, "writev"):
            super().write_released(released)
            return
        from kdissect.light import texts_written

        at, count = 0, len(released)
        while at < count:
            self.flush()  # what is held (summary lines, chunks), first
            self.out.flush()
            at = texts_written(fd, released, at)
            if at < count:
                self.write(*released[at])
                at += 1

    # The time column, as tshark's -t r, a/ad and d (delta displayed) print it, from the
    # capture's integer nanoseconds.

    def _relative(self, now: int) -> str:
        start = self.clock.start_ns
        return f"{(now - (now if start is None else start)) / 1e9:.6f}"

    def _delta(self, now: int) -> str:
        since = 0 if self.previous is None else now - self.previous
        self.previous = now
        return f"{since / 1e9:.6f}"


_ASCII = "".join(map(chr, range(128)))


def _writes_ascii(encoding: str) -> bool:
    """Whether `encoding` writes ASCII as ASCII, alike wherever a text starts: where the
    workers encode the text (or JSON) of their messages each by itself and the merge writes
    ASCII bytes of its own between them. Not UTF-16 or 32 (a byte order mark before each
    text), EBCDIC, UTF-7."""
    try:
        return _ASCII.encode(encoding) == _ASCII.encode("ascii")
    except (LookupError, ValueError):
        return False


class _TextLines:
    """What a worker process makes of each message for the text output (--jobs): its whole
    text, as one process writes it and encoded as the output is, but for the number that
    starts it (the capture's, known only where the workers' messages are merged); and how
    many notes the message had then, and where its summary line's notes are. The merge
    writes that text after the number; only its bytes go through the merging process.
    When the message has other notes there (pairing in capture order added some), the
    merge puts its own in the summary line, in their place. A message with notes that
    name other messages by number (numbers of the worker's) says -1: the merge's notes
    name them by the capture's.

    For the plain, -V, -x and -i text, with the time relative to the capture's first packet
    (told by `started`) or absolute; not with what depends on the messages shown before
    (-t d) or on a filter (which may decode a body, whose notes then show on the summary
    line).

    -i's change marks compare a response with the previous one of its connection and API,
    all of which its worker holds; they name it by the worker's number, which the merge
    makes the capture's: a response that becomes such a previous one says so, and which
    one it takes the place of, so that the merge keeps only the numbers a later mark may
    name (`_TextSink.named`). A message with a mark, that becomes the previous response,
    or with notes of a tree that -i decoded, says so in a fifth item (`Marked`), and the
    merge writes it in Python.
    """

    spooled = True  # the text reaches the merge in shared memory (`kdissect.spool`)
    light = True  # nothing else of a message is read where the workers' messages are merged

    def __init__(self, args: argparse.Namespace, encoding: str, errors: str,
                 start_ns: int | None = None) -> None:
        self.args, self.encoding, self.errors, self.start_ns = args, encoding, errors, start_ns
        # What every worker imports to make the text (the tree's writers and the decode tier
        # under them; the hex dump), imported before the workers are forked (`preload` of
        # `kdissect.parallel.read_messages`)
        self.preload = ((("kdissect.present.text", "kdissect.decode.values") if args.verbose else ())
                        + (("kdissect.present.hexdump",) if args.hex else ())
                        + (("kdissect.present.summary", "kdissect.present.changes", "kdissect.decode.values")
                           if args.info else ()))
        # the tree, or -i, decodes every body (`kdissect.parallel.warm`)
        self.warm_up = bool(args.verbose or args.info)
        self.sink: _TextSink | None = None  # in the worker, writing to a string
        self.utf8 = codecs.lookup(encoding).name == "utf-8"  # which encodes piece by piece alike
        # whether the encoding writes ASCII as ASCII: then an ASCII text goes on as a str, whose
        # characters are its bytes (the worker copies them into its ring: `spool.Ring.put`)
        self.ascii = _writes_ascii(encoding)
        # In a forked worker, its ring (`kdissect.parallel.Prepare`): an ASCII text is joined
        # straight into it (`spool.Ring.put_lines`), not into a str that is then copied there.
        self.ring: Ring | None = None
        self.worker = 0  # in a worker, its index (`kdissect.parallel`): what -i's marks say

    @staticmethod
    def coding(out: IO[str], args: argparse.Namespace) -> tuple[str, str] | None:
        """The encoding and its errors handling of `out` when workers can make the text
        written to it (a text file over bytes), else None."""
        encoding = getattr(out, "encoding", None)
        if (not hasattr(out, "buffer") or not isinstance(encoding, str) or not _writes_ascii(encoding)
                or args.filter or args.api is not None or args.time == "d"):
            return None
        return encoding, getattr(out, "errors", None) or "strict"

    def __getstate__(self) -> tuple[Any, ...]:
        return self.args, self.encoding, self.errors, self.start_ns

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.__init__(*state)  # type: ignore[misc]

    def started(self, start_ns: int) -> _TextLines:
        started = _TextLines(self.args, self.encoding, self.errors, start_ns)
        started.ring, started.worker = self.ring, self.worker
        return started

    def __call__(self, message: Message) -> tuple[Any, ...]:
        """The text (or where it lies in the worker's ring), the message's notes then (-1:
        some name messages by the worker's numbers), and where in the text the summary line's
        notes start and end (bytes); with -i, for a message with a change mark or notes of
        its tree, a fifth item: `Marked`."""
        sink = self.sink
        if sink is None:
            sink = self.sink = _TextSink(io.StringIO(), self.args)  # writes nothing: its pieces are taken
            sink.clock.start_ns = self.start_ns
        if sink.changes is not None:  # every message, in its connection's order (`changes`)
            sink.see(message)
        line = sink.line(message)
        number = message.number  # the merge's to write: it starts the line, in 6 places at least
        line = line[6 if number < 1_000_000 else len(str(number)):]
        notes = len(message.notes)
        if notes and any(note.id in NUMBERED_NOTES for note in message.notes):
            notes = -1
        mark = sink.marks[1] if sink.marks[0] is message else ""
        end = len(line) - (len(_file_part(message)) if sink.show_file else 0) - len(mark)
        tree = message._tree  # decoded for -i: its notes end the summary line too
        cut = end - len(sink.notes_text(message.all_notes())) if (message.notes or message.frame.notes
                                                                  or tree is not None) else end
        marked = None
        changes = sink.changes
        if mark or (changes is not None and changes.kept) or (tree is not None and tree.all_notes()):
            from kdissect.present.changes import MARK_HEAD

            named = changes.named if mark and changes is not None else 0
            tree_notes = tuple(tree.all_notes()) if tree is not None else ()
            kept, dropped = (changes.kept, changes.dropped) if changes is not None else (0, 0)
            marked = Marked(self.worker, named, end + len(MARK_HEAD), len(str(named)) if named else 0, tree_notes,
                            kept, dropped)
        if not line.isascii():  # where they are in the encoded text
            cut, end = (len(line[:at].encode(self.encoding, self.errors)) for at in (cut, end))
            if marked is not None:
                marked = marked._replace(at=len(line[:marked.at].encode(self.encoding, self.errors)))
        if sink.lines_only:
            return _made((line + "\n").encode(self.encoding, self.errors), notes, cut, end, marked)
        pieces = sink.pieces(message, line)
        if self.ring is not None and self.ascii and (placed := self.ring.put_lines(pieces)) is not None:
            return _made(placed, notes, cut, end, marked)
        text = "\n".join(pieces)
        if text.isascii():  # as a str, its characters its bytes, where they are (`Ring.put`)
            return _made(text if self.ascii else text.encode(self.encoding, self.errors), notes, cut, end, marked)
        if not self.utf8:
            return _made(text.encode(self.encoding, self.errors), notes, cut, end, marked)
        return _made(_encoded_pieces(pieces, self.encoding, self.errors), notes, cut, end, marked)


class Marked(NamedTuple):
    """What the merge needs of a message's -i text beyond the usual four items: the worker
    that made it; the worker's number of the message its change mark names (0: no mark),
    where that number's digits are in the text, and how many there are (bytes); the notes
    of the tree -i decoded, which end the summary line after the message's own; the
    worker's number of this message when a later mark may name it (the previous response
    of its connection and API from now on; else 0), and of the one it takes that place of
    (else 0)."""

    worker: int
    local: int
    at: int
    size: int
    tree_notes: tuple[Note, ...]
    kept: int = 0
    dropped: int = 0


def _made(text: Any, notes: int, cut: int, end: int, marked: Marked | None) -> tuple[Any, ...]:
    return (text, notes, cut, end) if marked is None else (text, notes, cut, end, marked)


def _with_tree_notes(notes: list[Note], marked: Marked | None) -> list[Note]:
    """A message's notes and, after them, its tree's that -i decoded (`Message.all_notes`)."""
    if marked is None or not marked.tree_notes:
        return notes
    seen = {(note.severity, note.message) for note in notes}
    return notes + [note for note in marked.tree_notes if (note.severity, note.message) not in seen]


class _JsonLines:
    """What a worker process makes of each message for -T json and jsonl (--jobs): its
    JSON, as one process writes it and encoded as the output is, cut where the capture's
    number, stream and pair go (each message's own, known only where the workers'
    messages are merged: `_JsonSink._write_prepared` puts them in), how many notes the
    message had then (as `_TextLines`), and where its notes are in the last part (which
    the merge writes anew when pairing in capture order gave it others). The last part,
    with the tree, comes first: it is the one that goes through shared memory (`spooled`,
    as `_TextLines`). Nothing else of a message is read where they are merged (`light`)."""

    spooled = True
    light = True
    # what every worker imports to make the JSON (as `_TextLines.preload`)
    preload = ("kdissect.present.json_text", "kdissect.decode.values")
    warm_up = True  # the tree decodes every body (`kdissect.parallel.warm`)

    def __init__(self, about: bool, encoding: str) -> None:
        self.about, self.encoding = about, encoding

    @staticmethod
    def coding(out: IO[str], args: argparse.Namespace) -> str | None:
        """The encoding of `out` when workers can make the JSON written to it, else None."""
        encoding = getattr(out, "encoding", None)
        if (not hasattr(out, "buffer") or not isinstance(encoding, str) or not _writes_ascii(encoding)
                or args.filter or args.api is not None):
            return None
        return encoding

    def __call__(self, message: Message) -> tuple[bytes, bytes, bytes, int, int, int]:
        from kdissect.present.records import message_json

        text = message_json(message, about=self.about).encode(self.encoding)
        start = text.index(b",")  # after {"number":N
        stream = text.index(b',"stream":', start) + 10
        middle = text.index(b",", stream)
        pair = text.index(b',"pair":', middle) + 8
        tail = text.index(b",", pair)
        notes = -1 if any(note.id in NUMBERED_NOTES for note in message.notes) else len(message.notes)
        # The notes' array: the first after the pair (only numbers come between), ended by the
        # first "],"file": after it (a quote within a string is escaped, so none is there).
        at = text.index(b',"notes":', tail) + 9
        end = text.index(b'],"file":', at) + 1
        return text[tail:], text[start:stream], text[middle:pair], notes, at - tail, end - tail


def _write_bytes(out: IO[str], chunks: list[Any], bytes_out: SpooledOutput | None) -> SpooledOutput:
    """Bytes the workers encoded (bytes, or `spool.Piece`s), written under the text output
    `out` after what was written to it before, through `bytes_out` (made the first time);
    `chunks` emptied."""
    out.flush()  # the text written before, first
    if bytes_out is None:
        bytes_out = SpooledOutput(out.buffer)  # type: ignore[attr-defined]
    bytes_out.write(chunks)
    chunks.clear()
    return bytes_out


def _file_part(message: Message) -> str:
    """What --show-file adds to a summary line."""
    return f" file={printable(message.file or '-')}"


def _encoded_pieces(pieces: list[str], encoding: str, errors: str) -> bytes:
    """`"\n".join(pieces)` in UTF-8, encoded piece by piece: when one piece holds a character
    beyond ASCII, only that piece goes through the encoder a character at a time, where the
    joined text would go so whole (`_TextSink._write_encoded`, `_TextLines`)."""
    return b"\n".join([piece.encode(encoding, errors) for piece in pieces])


NUMBERED_NOTES = frozenset({"kafka.duplicate_correlation_id", "kafka.response_out_of_order"})


def _terminal(out: IO[str]) -> bool:
    try:
        return out.isatty()
    except (OSError, ValueError):  # closed, or not a file at all
        return False


def utc_date_time(nanoseconds: int) -> str:
    """`2026-11-29 11:44:02.798123` (UTC, to the microsecond, never rounded up); epoch
    seconds when a corrupt timestamp lies beyond the calendar."""
    seconds, fraction = divmod(nanoseconds, 1_000_000_000)
    return f"{_utc_second(seconds)}.{fraction // 1000:06d}"


@functools.lru_cache(maxsize=16)  # messages come in time order: one conversion per second
def _utc_second(seconds: int) -> str:
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (ValueError, OverflowError, OSError):
        return str(seconds)


class _JsonSink(_Sink):
    def __init__(self, out: IO[str], *, array: bool, about: bool, args: argparse.Namespace | None = None) -> None:
        from kdissect.present.records import message_json, notes_json

        self.out, self.array, self.about, self.first = out, array, about, True
        self.message_json, self.notes_json = message_json, notes_json
        self.prepare = functools.partial(tree_json, about=about)
        self.chunks: list[Any] = []  # encoded JSON of messages not yet written (`_JsonLines`)
        self.bytes_out: SpooledOutput | None = None
        self.encoding = None if args is None else _JsonLines.coding(out, args)
        if self.encoding is not None:
            self.prepare = _JsonLines(about, self.encoding)

    def write(self, message: Message, prepared: Any = None) -> None:
        if type(prepared) is tuple:
            self._write_prepared(message, prepared)
            return
        if self.chunks:
            self._write_chunks()
        if prepared is None:
            text = self.message_json(message, about=self.about)
        else:
            text = message_json_with_tree(message, prepared)
        if self.array:
            text = ("[\n" if self.first else ",\n") + text
        else:
            text += "\n"
        self.first = False
        self.out.write(text)
        if not self.array:
            self.out.flush()  # jsonl is for pipes: one object as soon as it is known

    def _write_prepared(self, message: Message, prepared: tuple[Any, bytes, bytes, int, int, int]) -> None:
        """A message whose JSON a worker made (`_JsonLines`; its last part as bytes, or a
        `spool.Piece`): the capture's number, stream and pair put in; and, when the merge
        gave the message notes the worker could not know of, its notes as the merge has
        them."""
        tail, head, middle, notes, at, end = prepared
        if notes != len(message.notes):
            if self.chunks:  # first: reading a text out of a worker's ring frees the ring up to its end
                self._write_chunks()
            text = read_all(tail)
            found = self.notes_json(message.all_notes()).encode(self.encoding or "ascii")
            tail = b"%s%s%s" % (text[:at], found, text[end:])
        pair = message.pair_number
        text = b'%s{"number":%d%s%d%s%s' % (b"" if not self.array else b"[\n" if self.first else b",\n",
                                           message.number, head, message.frame.connection.index, middle,
                                           b"null" if pair is None else b"%d" % pair)
        self.first = False
        chunks = self.chunks
        chunks += (text, tail) if self.array else (text, tail, b"\n")
        if len(chunks) >= 2 * SUMMARY_BATCH:
            self._write_chunks()

    def _write_chunks(self) -> None:
        self.bytes_out = _write_bytes(self.out, self.chunks, self.bytes_out)
        self.out.flush()

    def flush(self, *, through: bool = False) -> None:
        if self.chunks:
            self._write_chunks()

    def close(self) -> None:
        if self.chunks:
            self._write_chunks()
        if self.array:
            self.out.write("[]\n" if self.first else "\n]\n")


class _FieldsSink(_Sink):
    """-T fields: one row of the -e fields per message, tshark's -T fields."""

    def __init__(self, out: IO[str], columns: FieldColumns, *, light: bool = False) -> None:
        self.out, self.columns = out, columns
        self.rows: list[str] = []
        self.begun = False
        # With --jobs the workers make the cells they read as one process does; all but the
        # merge's own (numbers, relative times), which it reads of light messages, where no
        # filter or --api looks at whole messages here (`light`)
        if light and columns.light:
            from kdissect.present.field_output import WorkerCells

            self.prepare = WorkerCells(columns.names, columns.form)
        elif columns.reads_bodies:  # the bodies' cells only
            from kdissect.present.field_output import BodyCells

            self.prepare = BodyCells(columns.names, columns.form)

    def begin(self, clock: CaptureClock) -> None:
        if not self.begun and self.columns.form.header:
            self.out.write(self.columns.header() + "\n")
        self.begun = True

    def write(self, message: Message, prepared: Any = None) -> None:
        if type(prepared) is tuple and len(prepared) == 2 and prepared[0] == "":  # `WorkerCells`
            made = prepared[1]
            if type(made) is str:  # the whole row
                row = made
            else:
                from kdissect.present.field_output import LightRow

                row = self.columns.row(message if isinstance(message, Message) else LightRow(message), made)
        else:
            row = self.columns.row(message, prepared)
        self.rows.append(row)
        if self.prompt or len(self.rows) >= SUMMARY_BATCH:
            self.flush(through=self.prompt)

    def flush(self, *, through: bool = False) -> None:
        if self.rows:
            self.out.write("\n".join(self.rows) + "\n")
            self.rows.clear()
        if through:
            self.out.flush()


class _StatsSink(_Sink):
    """--stats, --interval and --top: tables at the end, as text or as one JSON object."""

    def __init__(self, args: argparse.Namespace) -> None:
        from kdissect.present.stats import Statistics

        self.args = args
        # --interval needs the answers' errors, not the topics; --top alone no body but those
        # of the slowest answers, which its lines decode
        bodies, topics = bool(args.stats or args.interval), bool(args.stats)
        self.statistics = Statistics(interval=args.interval, top=args.top or 0, bodies=bodies, topics=topics,
                                     counts=bodies)
        self.clocks: list[CaptureClock] = []
        # With --jobs, the workers decode the bodies (for --top alone, only those of the answers
        # that may be among the slowest) and the merge counts light messages, but under a
        # filter or --api (which read the whole messages here)
        if (bodies or args.top) and not args.filter and args.api is None:
            self.prepare = _StatsFacts(bodies, topics, 0 if bodies else args.top)

    def begin(self, clock: CaptureClock) -> None:
        self.clocks.append(clock)

    def new_capture(self, name: str) -> None:
        self.statistics.new_capture(name)

    def write(self, message: Message, prepared: Any = None) -> None:
        if self.statistics.start is None and self.clocks:
            self.statistics.begin(self.clocks[0].start)
        if prepared is None:
            self.statistics.add(message)
        else:
            self.statistics.add_light(message, prepared)  # type: ignore[arg-type]

    def close(self) -> None:
        if self.args.output == "text":
            sys.stdout.write(self.statistics.render(full=self.args.stats))
            return
        found = self.statistics.as_dict()
        if not self.args.stats:  # only what was asked for
            found = {k: v for k, v in found.items() if (k == "intervals" and self.args.interval)
                     or (k == "slowest" and self.args.top)}
        sys.stdout.write(json.dumps(found, ensure_ascii=True, allow_nan=False,
                                    indent=2 if self.args.output == "json" else None) + "\n")


# What worker processes compute of each message for --jobs: the parts of the output that
# depend on the message alone (its own bytes and its pair on its connection).


class _StatsFacts:
    """What a worker process reads of each message for --stats, --interval and --top
    (`stats.message_facts`: plain values), so that the merge counts light messages
    (`kdissect.light`) and decodes no body.

    For --top alone (`top`, without `bodies`) nothing is counted: only the answers --top may
    show have facts (the others `stats.NOT_RANKED`), their errors decoded: those among the
    `top` slowest of the worker's share so far, ranked as --top ranks them (its latency in
    ms, then the earlier first: the worker's numbers keep the capture's order). An answer
    that is not so, when its worker reads it, has `top` slower answers before it in the
    worker alone, so it is not among the capture's."""

    light = True  # the merge reads nothing else of a message
    warm_up = True  # the facts decode the bodies (`kdissect.parallel.warm`)
    preload = ("kdissect.present.stats", "kdissect.decode.values")

    def __init__(self, bodies: bool, topics: bool, top: int = 0) -> None:
        self.bodies, self.topics, self.top = bodies, topics, top
        self.slowest: list[tuple[float, int]] = []  # the share's `top` slowest answers so far, a min-heap

    def __call__(self, message: Message) -> tuple[Any, ...]:
        from kdissect.present.stats import NOT_RANKED, kept_among, message_facts

        if not self.top:
            return message_facts(message, bodies=self.bodies, topics=self.topics)
        if message.is_request or (latency := message.latency) is None \
                or not kept_among(self.slowest, self.top, (latency * 1000.0, -message.number)):
            return NOT_RANKED
        return message_facts(message, bodies=True, topics=False)


def tree_text(message: Message, *, wide: bool) -> str:
    """`-V`'s tree of one message (computed where the message was read)."""
    return _render_message()(message, wide=wide)


@functools.cache
def _render_message() -> Callable[..., str]:
    """The tree writer, imported on first use (not at start-up) and once, not per message."""
    from kdissect.present.text import render_message

    return render_message


@functools.cache
def _tree_lines() -> Callable[..., None]:
    """`render_message_lines`, imported on first use and once (as `_render_message`)."""
    from kdissect.present.text import render_message_lines

    return render_message_lines


def tree_json(message: Message, *, about: bool) -> str:
    """The JSON of one message's tree, ASCII, as `message_json` writes it under "tree"."""
    import orjson

    from kdissect.present.json_text import message_tree_json
    from kdissect.present.records import ascii_json, message_tree_record

    tree = None if about else message_tree_json(message)  # an ordinary body: written at once
    return ascii_json(orjson.dumps(message_tree_record(message, about=about)).decode() if tree is None else tree)


def message_json_with_tree(message: Message, tree: str) -> str:
    """`message_json(message)` with its tree's JSON made elsewhere (`tree_json`)."""
    import orjson

    from kdissect.present.records import ascii_json, message_record

    record = message_record(message)
    time, record["time"] = record["time"], 0
    text: str = orjson.dumps(record).decode()
    text = text.replace('"time":0', f'"time":{time.exact()}', 1)
    return ascii_json(text[:-1]) + ',"tree":' + tree + "}"


def _tolerant_stdout() -> None:
    """What the output's encoding cannot write (a wire string's character, on an ASCII
    terminal, say) is written escaped, as a backslash sequence, rather than ending the run."""
    if getattr(sys.stdout, "errors", None) == "strict" and hasattr(sys.stdout, "reconfigure"):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            sys.stdout.reconfigure(errors="backslashreplace")


def _silence_stdout() -> None:
    # After a closed pipe (`kdissect x.pcap | head`), make the interpreter's final
    # flush of stdout harmless instead of printing a second BrokenPipeError.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
