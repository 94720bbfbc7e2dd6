"""`--stats`: per API/version and per connection statistics, like tshark's -z."""

from __future__ import annotations

from array import array
from collections import Counter
from dataclasses import dataclass, field

from kdissect.decode.tree import printable
from kdissect.ingest.net import format_address
from kdissect.pair.message import Message
from kdissect.present.summary import error_counts


@dataclass(slots=True)
class ApiStats:
    requests: int = 0
    responses: int = 0
    unanswered: int = 0
    request_bytes: int = 0
    response_bytes: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    latencies_ms: array = field(default_factory=lambda: array("d"))


@dataclass(slots=True)
class ConnectionStats:
    client: str
    server: str
    client_ids: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    responses: int = 0


class Statistics:
    def __init__(self) -> None:
        self.apis: dict[tuple[str, int | None], ApiStats] = {}
        self.connections: dict[int, ConnectionStats] = {}

    def add(self, message: Message) -> None:
        key = (message.api_name or "(request missing)", message.api_version)
        api = self.apis.setdefault(key, ApiStats())
        connection = self._connection(message)
        size = len(message.frame.data)
        if message.is_request:
            api.requests += 1
            api.request_bytes += size
            api.unanswered += message.pair is None and message.expects_response
            connection.requests += 1
            if message.client_id is not None:
                connection.client_ids[message.client_id] += 1
            return
        api.responses += 1
        api.response_bytes += size
        connection.responses += 1
        if message.latency is not None:
            api.latencies_ms.append(message.latency * 1000.0)
        body = message.values(keep=False)
        if body is not None:
            api.errors.update(error_counts(body))

    def _connection(self, message: Message) -> ConnectionStats:
        connection = message.frame.connection
        found = self.connections.get(connection.index)
        if found is None:
            found = ConnectionStats(format_address(connection.client), format_address(connection.server))
            self.connections[connection.index] = found
        return found

    def render(self) -> str:
        return "\n".join([*self._api_table(), "", *self._connection_table()]) + "\n"

    def _api_table(self) -> list[str]:
        lines = ["Kafka APIs", "=" * 10,
                 f"{'API':<30} {'ver':>3} {'req':>7} {'resp':>7} {'unans':>6} "
                 f"{'min':>9} {'p50':>9} {'p90':>9} {'p99':>9} {'max':>9} {'bytes':>11}  errors"]
        for (name, version), api in sorted(self.apis.items(), key=_api_order):
            latency = _percentiles(api.latencies_ms)
            errors = ", ".join(f"{e} x{n}" for e, n in api.errors.most_common()) or "-"
            lines.append(
                f"{name:<30} {'' if version is None else version:>3} {api.requests:>7} "
                f"{api.responses:>7} {api.unanswered:>6} {latency} "
                f"{api.request_bytes + api.response_bytes:>11}  {errors}"
            )
        lines.append("latency in milliseconds, from the request's last packet to the response's")
        return lines

    def _connection_table(self) -> list[str]:
        lines = ["Connections", "=" * 11,
                 f"{'stream':>6} {'client':>23} {'server':>23} {'req':>7} {'resp':>7}  client ids"]
        for index, conn in sorted(self.connections.items()):
            ids = ", ".join(printable(c) for c, _ in conn.client_ids.most_common(3)) or "-"
            lines.append(
                f"{index:>6} {conn.client:>23} {conn.server:>23} {conn.requests:>7} "
                f"{conn.responses:>7}  {ids}"
            )
        return lines


def _api_order(item: tuple[tuple[str, int | None], ApiStats]) -> tuple[str, int]:
    (name, version), _ = item
    return name, -1 if version is None else version


def _percentiles(values: array) -> str:
    if not values:
        return " ".join(f"{'-':>9}" for _ in range(5))
    ordered = sorted(values)
    last = len(ordered) - 1
    picks = [ordered[0], *(ordered[round(q * last)] for q in (0.5, 0.9, 0.99)), ordered[last]]
    return " ".join(f"{value:>9.3f}" for value in picks)
