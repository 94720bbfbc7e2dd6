"""A scripted Kafka peer on loopback that answers a real client with kio-encoded responses.

The peer reads each request's header and body with kio, asks its story for the
values to answer with, encodes them with kio for the exact API version asked,
and logs every exchange (times, correlation id, version, the decoded request and
the exact values encoded). One thread accepts, one thread serves each connection;
a lock keeps the story's steps in the order the requests arrived.
"""

from __future__ import annotations

import socket
import struct
import sys
import threading
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Protocol

from kio.index import KioIndexError, load_response_schema

from tools.kio_codec import JsonValue, Request, encode_response, entity_to_json, read_request

LOOPBACK = "127.0.0.1"
MAX_REQUEST_SIZE = 1 << 20


class Story(Protocol):
    """What the peer says: the values of each response, or None to hang up."""

    def answer(self, request: Request) -> Mapping[str, Any] | None: ...


def _read_exactly(connection: socket.socket, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = connection.recv(size - len(chunks))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


def read_frame(connection: socket.socket) -> bytes | None:
    """The next request without its size prefix, or None at end of stream."""
    prefix = _read_exactly(connection, 4)
    if prefix is None:
        return None
    (size,) = struct.unpack(">i", prefix)
    if not 0 < size <= MAX_REQUEST_SIZE:
        return None
    return _read_exactly(connection, size)


def api_name(api_key: int, api_version: int) -> str:
    """Kafka's name of an API, from kio's schema class (``DescribeProducers``)."""
    try:
        return load_response_schema(api_key, api_version).__name__.removesuffix("Response")
    except KioIndexError:
        return f"Unknown{api_key}"


class ScriptedPeer:
    """A Kafka peer listening on a loopback port, answering from a story."""

    def __init__(self, story: Story, port: int = 0) -> None:
        self.story = story
        self.exchanges: list[dict[str, JsonValue]] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server((LOOPBACK, port))
        self._listener.settimeout(0.1)
        self.port: int = int(self._listener.getsockname()[1])
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._connections: list[socket.socket] = []

    def start(self) -> ScriptedPeer:
        self._spawn(self._accept_loop)
        return self

    def stop(self) -> None:
        self._stopping.set()
        for connection in list(self._connections):
            connection.close()
        for thread in list(self._threads):
            thread.join(timeout=5)
        self._listener.close()

    def __enter__(self) -> ScriptedPeer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._connections.append(connection)
            self._spawn(self._serve, connection, len(self._connections) - 1)

    def _serve(self, connection: socket.socket, index: int) -> None:
        with connection:
            try:
                while (frame := read_frame(connection)) is not None:
                    received = time.time()
                    answer = self._answer(read_request(frame), index, received, connection)
                    if answer is None:
                        return
                    connection.sendall(answer)
            except OSError:
                return
            except Exception as failure:  # a request kio cannot read: say so and hang up
                print(f"scripted peer: {failure!r}", file=sys.stderr)

    def _answer(self, request: Request, index: int, received: float,
                connection: socket.socket) -> bytes | None:
        with self._lock:
            values = self.story.answer(request)
            if values is None:
                name = api_name(request.api_key, request.api_version)
                print(f"scripted peer: hanging up on {name} v{request.api_version}",
                      file=sys.stderr)
                return None
            frame, entity = encode_response(request, values)
            self.exchanges.append(self._exchange(request, entity, index, received, connection))
            return frame

    def _exchange(self, request: Request, response: Any, index: int, received: float,
                  connection: socket.socket) -> dict[str, JsonValue]:
        return {
            "index": len(self.exchanges),
            "connection": index,
            "client_port": connection.getpeername()[1],
            "request_time": round(received, 6),
            "response_time": round(time.time(), 6),
            "api_key": request.api_key,
            "api_name": api_name(request.api_key, request.api_version),
            "api_version": request.api_version,
            "correlation_id": request.correlation_id,
            "client_id": request.client_id,
            "request": None if request.body is None else entity_to_json(request.body),
            "response": entity_to_json(response),
        }
