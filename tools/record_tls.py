"""Record kafka-python talking to the scripted peer over TLS (or in clear text), with tcpdump.

    python -m tools.record_tls out.pcap --tls 1.3 --sasl SCRAM-SHA-256
    python -m tools.record_tls twin.pcap --sasl SCRAM-SHA-256        # the clear-text twin

Python's ssl has no setting for TLS 1.3 cipher suites; OpenSSL's configuration
does: run with ``OPENSSL_CONF`` naming a file whose ``system_default`` section says
``Ciphersuites = TLS_CHACHA20_POLY1305_SHA256`` (see ``tls13_suites_config``).

The real kafka-python admin client, with an SSL context that writes its session
keys (``keylog_filename``), calls describe_producers a few times on a peer whose
sockets Python's ssl (OpenSSL) wraps. The key log is written next to the
capture (same name, ``.keys``). Everything the peer says is fixed (its clock too,
the SCRAM salt and nonces), so a TLS recording and its clear-text twin carry the
same Kafka bytes, and decrypting one must give exactly the other's messages.
What the peer logged is written next to the capture too (``.json``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any
from unittest import mock

from kafka import KafkaAdminClient, TopicPartition
from kafka.errors import KafkaError

from tools.kio_codec import Request
from tools.recording import LOOPBACK, Tcpdump
from tools.stories import ProducersStory, Values
from tools.tls_peer import (
    SaslStory,
    TlsPeer,
    client_context,
    self_signed_certificate,
    server_context,
)

FIXED_CLOCK_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: the story's clock, fixed
CALLS = 3
CLIENT_ID = "kdissect-tls"
USER, PASSWORD = "alice", "alice-secret"
CLIENT_NONCE = uuid.UUID("6b646973-7365-4374-8000-00000000c11e")


class FixedClockProducers(ProducersStory):
    """The producers story with its clock stopped, so two recordings say the same."""

    def answer(self, request: Request) -> Values | None:
        if request.api_key == self.served_api:
            self.step += 1
            return self.next_response(request, FIXED_CLOCK_MS + self.step)
        return super().answer(request)


def client_config(keylog: Path | None, tls: str | None, sasl: str | None,
                  ciphers: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {"client_id": CLIENT_ID, "request_timeout_ms": 5000}
    protocol = ("SASL_" if sasl else "") + ("SSL" if tls else "PLAINTEXT")
    config["security_protocol"] = protocol
    if tls:
        assert keylog is not None
        config["ssl_context"] = client_context(keylog, tls, ciphers)
    if sasl:
        config.update(sasl_mechanism=sasl, sasl_plain_username=USER,
                      sasl_plain_password=PASSWORD)
    return config


def drive(bootstrap: str, story: ProducersStory, config: dict[str, Any], calls: int) -> None:
    partitions = [TopicPartition(topic, index)
                  for topic, count in story.topics.items() for index in range(count)]
    with mock.patch("kafka.net.sasl.scram.uuid.uuid4", return_value=CLIENT_NONCE):
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, **config)
        try:
            for _ in range(calls):  # later steps of the story answer with errors: on the wire
                with contextlib.suppress(KafkaError):
                    admin.describe_producers(partitions, broker_id=1)
        finally:
            admin.close()


def record(output: Path, *, tls: str | None = None, sasl: str | None = None,
           ciphers: str | None = None, calls: int = CALLS, port: int = 0) -> dict[str, Any]:
    """Record one run; returns what the peer logged (its ``exchanges``) and the key log path.

    ``port`` 0 lets the system choose; twins to compare must share a port, which the
    peer's Metadata answers carry.
    """
    keylog = output.with_suffix(".keys") if tls else None
    if keylog is not None and keylog.exists():
        keylog.unlink()
    story = FixedClockProducers()
    served: Any = SaslStory(story, sasl, USER, PASSWORD) if sasl else story
    with tempfile.TemporaryDirectory() as scratch:
        context = server_context(*self_signed_certificate(Path(scratch))) if tls else None
        peer = TlsPeer(served, context, port) if context is not None else _plain_peer(served, port)
        with peer:
            story.port = peer.port
            with Tcpdump(output, f"tcp port {peer.port}"):
                drive(f"{LOOPBACK}:{peer.port}", story, client_config(keylog, tls, sasl, ciphers),
                      calls)
            exchanges = list(peer.exchanges)
    return {"port": peer.port, "keylog": keylog, "exchanges": exchanges}


def _plain_peer(story: Any, port: int) -> Any:
    from tools.scripted_peer import ScriptedPeer

    return ScriptedPeer(story, port)


def tls13_suites_config(suites: str) -> str:
    """An OpenSSL configuration file's text limiting TLS 1.3 to ``suites`` (colon-separated)."""
    return ("openssl_conf = openssl_init\n[openssl_init]\nssl_conf = ssl_module\n"
            "[ssl_module]\nsystem_default = tls_defaults\n[tls_defaults]\n"
            f"Ciphersuites = {suites}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.record_tls", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", type=Path, help="the pcap to write (key log: same name, .keys)")
    parser.add_argument("--tls", choices=("1.2", "1.3"), help="TLS version (default: clear text)")
    parser.add_argument("--sasl", choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"))
    parser.add_argument("--ciphers", help="OpenSSL cipher list for TLS 1.2")
    parser.add_argument("--calls", type=int, default=CALLS)
    parser.add_argument("--port", type=int, default=0, help="loopback port (default: any free)")
    arguments = parser.parse_args(argv)
    result = record(arguments.output, tls=arguments.tls, sasl=arguments.sasl,
                    ciphers=arguments.ciphers, calls=arguments.calls, port=arguments.port)
    sidecar = {"port": result["port"], "exchanges": result["exchanges"],
               "keylog": None if result["keylog"] is None else Path(result["keylog"]).name}
    arguments.output.with_suffix(".json").write_text(json.dumps(sidecar, indent=1) + "\n")
    print(f"{arguments.output}: {len(result['exchanges'])} exchanges with the peer on port "
          f"{result['port']}" + (f"; keys in {result['keylog']}" if result["keylog"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
