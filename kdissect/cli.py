"""The `kdissect` command: Kafka messages of packet captures, listed, dissected, exported."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from typing import IO, BinaryIO

from kdissect import __version__
from kdissect.apis import APIS
from kdissect.ingest.capture import CaptureError
from kdissect.ingest.framing import DEFAULT_PORTS, MAX_FRAME_SIZE
from kdissect.notes import Note
from kdissect.pair.message import Message
from kdissect.pipeline import read_messages
from kdissect.present.filter import FilterError, Predicate, compile_filter
from kdissect.present.progress import Progress
from kdissect.present.records import MESSAGE_COLUMNS, message_json, message_record, tree_record

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2
MAX_CAPTURE_NOTES = 20  # capture-level problems shown per file before summarising

EXAMPLES = """\
examples:
  kdissect capture.pcap                      one line per Kafka message
  kdissect -V capture.pcap                   ... and the annotated field tree of each
  kdissect -V -x --api 55 capture.pcap       DescribeQuorum only, with hex dumps
  kdissect -Y 'api_key == 61 and latency_ms > 5' capture.pcap
  kdissect --port 19092 capture.pcap         also treat port 19092 as Kafka
  kdissect -T jsonl capture.pcap | jq .api_name
  kdissect --stats capture.pcap              per-API and per-connection statistics
  kdissect --export out/ --format parquet capture.pcap
  tcpdump -i any -U -w - port 9092 | kdissect -     live, streaming

filter fields (-Y): number frame time stream src dst direction api_key api_name
  api_version correlation_id client_id length pair latency_ms notes
  operators: == != < <= > >= in, not in, and/or/not (&& || ! also work)

exit status: 0 when every capture was read (malformed messages are reported, not
fatal), 2 for usage errors and unreadable or non-capture files.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kdissect",
        description="Dissect Apache Kafka traffic in pcap/pcapng captures: every request and "
        "response, paired, with latency; DescribeTopicPartitions (75), DescribeProducers (61) "
        "and DescribeQuorum (55) decoded field by field.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("files", nargs="+", metavar="FILE", help="pcap or pcapng capture; '-' reads standard input")
    add("-V", "--verbose", action="store_true", help="print the annotated field tree of each message")
    add("-i", "--info", action="store_true",
        help="add what the bodies of DescribeTopicPartitions, DescribeProducers and "
        "DescribeQuorum say to each summary line (topics, errors, leader, high watermark, "
        "producers); decodes those bodies, so it is slower on captures full of them")
    add("-x", "--hex", action="store_true", help="print a hex dump of each message's bytes")
    add("-T", "--output", choices=("text", "json", "jsonl"), default="text",
        help="output format: text (default), json (one array), jsonl (one object per line)")
    add("--port", type=_port, action="append", default=[], metavar="N",
        help=f"treat TCP port N as Kafka (repeatable; {', '.join(map(str, DEFAULT_PORTS))} always is)")
    add("--no-detect", action="store_true",
        help="only use the ports, do not detect Kafka on other ports from the first bytes")
    add("--api", type=_api_list, metavar="LIST",
        help="keep only these APIs, by key or name: --api 55,61 or --api DescribeQuorum")
    add("-Y", "--filter", metavar="EXPR", help="keep messages matching EXPR, e.g. 'latency_ms > 5'")
    add("-c", "--count", type=_positive, metavar="N", help="stop after N messages are shown")
    add("-t", "--time", choices=("r", "a"), default="r",
        help="time column: r seconds since the first message (default), a absolute UTC")
    add("--wide", action="store_true", help="do not shorten field descriptions in trees")
    add("--stats", action="store_true",
        help="print per-API (counts, errors, latency percentiles, bytes) and per-connection "
        "statistics instead of the message list")
    add("--export", metavar="DIR", help="write the analysis tables to DIR instead of listing")
    add("--format", choices=("parquet", "csv"), default="parquet", help="format for --export")
    add("--max-frame-size", type=_positive, default=MAX_FRAME_SIZE, metavar="BYTES",
        help=f"largest plausible Kafka frame (default {MAX_FRAME_SIZE})")
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


def _api_list(text: str) -> frozenset[int]:
    by_name = {api.name.lower(): api.key for api in APIS.values()}
    keys = set()
    for item in filter(None, (part.strip() for part in text.split(","))):
        key = int(item) if item.isdigit() else by_name.get(item.lower())
        if key is None or key not in APIS:
            raise argparse.ArgumentTypeError(f"{item!r} is not a Kafka API key or name")
        keys.add(key)
    return frozenset(keys)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        keep = _selector(args)
    except FilterError as exc:
        parser.error(str(exc))
    try:
        return _run(args, keep)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_OK
    except Exception as exc:  # the last line of defence: never a traceback for the user
        if os.environ.get("KDISSECT_DEBUG"):
            raise
        print(f"kdissect: internal error: {type(exc).__name__}: {exc} "
              "(set KDISSECT_DEBUG=1 for details)", file=sys.stderr)
        return EXIT_INTERNAL


def _selector(args: argparse.Namespace) -> Callable[[Message], bool]:
    predicate: Predicate | None = None
    if args.filter:
        predicate = compile_filter(args.filter, MESSAGE_COLUMNS)
    apis = args.api

    def keep(message: Message) -> bool:
        if apis is not None and message.api_key not in apis:
            return False
        if predicate is None:
            return True
        record = message_record(message)
        record["notes"] = "; ".join(n["message"] for n in record["notes"])
        return predicate(record)

    return keep


def _run(args: argparse.Namespace, keep: Callable[[Message], bool]) -> int:
    if args.export:
        from kdissect.present.export import export_files

        return export_files(args, _open_capture, _warn)
    sink = _make_sink(args)
    status = EXIT_OK
    shown = 0
    for path in args.files:
        for message in _messages(path, args):
            if message is None:
                status = EXIT_USAGE
                break
            if not keep(message):
                continue
            sink.write(message)
            shown += 1
            if args.count and shown >= args.count:
                sink.close()
                return status
    sink.close()
    return status


def _messages(path: str, args: argparse.Namespace) -> Iterator[Message | None]:
    """The messages of one capture; a final None when the file could not be read."""
    stream = _open_capture(path)
    if stream is None:
        yield None
        return
    problems = _ProblemReporter(path)
    progress = Progress(stream, path)
    try:
        yield from read_messages(progress.reader, ports=[*DEFAULT_PORTS, *args.port],
                                 detect=not args.no_detect, max_frame_size=args.max_frame_size,
                                 report=problems)
    except CaptureError as exc:
        _warn(f"{_display_name(path)}: {exc}")
        yield None
    finally:
        progress.close()
        problems.close()
        if stream is not sys.stdin.buffer:
            stream.close()


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
    print(f"kdissect: {text}", file=sys.stderr)


class _ProblemReporter:
    """Capture-level notes to stderr, a bounded number per file."""

    def __init__(self, path: str) -> None:
        self.name = _display_name(path)
        self.count = 0

    def __call__(self, note: Note) -> None:
        self.count += 1
        if self.count <= MAX_CAPTURE_NOTES:
            _warn(f"{self.name}: {note}")

    def close(self) -> None:
        if self.count > MAX_CAPTURE_NOTES:
            _warn(f"{self.name}: ... and {self.count - MAX_CAPTURE_NOTES} more capture problems")


def _make_sink(args: argparse.Namespace) -> _Sink:
    if args.stats:
        return _StatsSink()
    if args.output == "json":
        return _JsonSink(sys.stdout, array=True)
    if args.output == "jsonl":
        return _JsonSink(sys.stdout, array=False)
    return _TextSink(sys.stdout, args)


class _Sink:
    def write(self, message: Message) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class _TextSink(_Sink):
    def __init__(self, out: IO[str], args: argparse.Namespace) -> None:
        from kdissect.present.hexdump import hexdump
        from kdissect.present.summary import summary_line
        from kdissect.present.text import render_tree

        self.out, self.args = out, args
        self.summary_line, self.render_tree, self.hexdump = summary_line, render_tree, hexdump
        self.base_time: float | None = None

    def write(self, message: Message) -> None:
        if self.base_time is None:
            self.base_time = message.time
        base = self.base_time if self.args.time == "r" else None
        line = self.summary_line(message, base, body_info=self.args.info)
        if not (self.args.verbose or self.args.hex):
            self.out.write(line + "\n")
            return
        lines = [line]
        if self.args.verbose:
            lines.append(self.render_tree(message.tree(), wide=self.args.wide))
        if self.args.hex:
            lines.append(self.hexdump(message.frame.data))
        if self.args.verbose or self.args.hex:
            lines.append("")
        self.out.write("\n".join(lines) + "\n")


class _JsonSink(_Sink):
    def __init__(self, out: IO[str], *, array: bool) -> None:
        self.out, self.array, self.first = out, array, True

    def write(self, message: Message) -> None:
        record = message_record(message)
        record["tree"] = tree_record(message.tree())
        text = message_json(record)
        if self.array:
            text = ("[\n" if self.first else ",\n") + text
        else:
            text += "\n"
        self.first = False
        self.out.write(text)
        if not self.array:
            self.out.flush()  # jsonl is for pipes: one object as soon as it is known

    def close(self) -> None:
        if self.array:
            self.out.write("[]\n" if self.first else "\n]\n")


class _StatsSink(_Sink):
    def __init__(self) -> None:
        from kdissect.present.stats import Statistics

        self.statistics = Statistics()

    def write(self, message: Message) -> None:
        self.statistics.add(message)

    def close(self) -> None:
        sys.stdout.write(self.statistics.render())


def _silence_stdout() -> None:
    # After a closed pipe (`kdissect x.pcap | head`), make the interpreter's final
    # flush of stdout harmless instead of printing a second BrokenPipeError.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
