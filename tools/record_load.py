"""Record a busy Tansu session: many connections, responses spanning many TCP segments.

    python -m tools.record_load load.pcap --producers 4 --consumers 4 --rounds 40

Several kafka-python producers write batches of 1 KB records to one topic while
as many consumers (manual assignment, no group) fetch them back, each client on
its own TCP connection. The session runs in a network namespace of its own
(``unshare --net``, so run it as root) whose loopback has an Ethernet MTU of 1500
and sends one segment per packet (``gso_max_segs 1``): the broker's 5-12 KB
Fetch responses and the producers' batches span many segments, as on a real link.
The capture is the real thing to build pathology variants from
(``tools/pathology.py``). A sidecar JSON (same name, ``.json``) records what was
sent and received.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import kafka
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from tools.recording import TansuBroker, Tcpdump, tansu_version

TOPIC = "load"
CLIENT_ID = "kdissect-load"
MTU = 1500
RECORD_SIZE = 1024
PAUSE = 0.05  # seconds between a producer's batches
SOCKET_OPTIONS = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
NAMESPACE_MARK = "KDISSECT_LOAD_NAMESPACE"


def in_own_namespace(argv: list[str]) -> int | None:
    """Re-run this command in a new network namespace; None when already inside one."""
    if os.environ.get(NAMESPACE_MARK):
        for setting in (["mtu", str(MTU), "up"], ["gso_max_segs", "1"]):
            subprocess.run(["ip", "link", "set", "dev", "lo", *setting], check=True)
        return None
    command = ["unshare", "--net", "--", sys.executable, "-m", "tools.record_load", *argv]
    return subprocess.run(command, env={**os.environ, NAMESPACE_MARK: "1"}, check=False).returncode


class BufferedTcpdump(Tcpdump):
    """tcpdump with a 64 MiB kernel buffer: bursts of a busy session lose no packet."""

    def command(self) -> list[str]:
        command = super().command()
        return [command[0], "-B", "65536", *command[1:]]


def produce(bootstrap: str, index: int, partitions: int, rounds: int, batch: int) -> int:
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=f"{CLIENT_ID}-p{index}",
                             acks=1, linger_ms=5, socket_options=SOCKET_OPTIONS)
    sent = 0
    try:
        for round_ in range(rounds):
            for record in range(batch):
                value = (f"{index}-{round_}-{record}-".encode() * RECORD_SIZE)[:RECORD_SIZE]
                producer.send(TOPIC, value=value, partition=(index + record) % partitions)
                sent += 1
            producer.flush(timeout=10)
            time.sleep(PAUSE)  # tcpdump on a busy machine must keep up: it may lose no packet
    finally:
        producer.close()
    return sent


def consume(bootstrap: str, index: int, partitions: int, wanted: int) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id=f"{CLIENT_ID}-c{index}",
                             group_id=None, enable_auto_commit=False,
                             fetch_max_bytes=12 * 1024, max_partition_fetch_bytes=12 * 1024,
                             socket_options=SOCKET_OPTIONS, consumer_timeout_ms=3000)
    consumer.assign([TopicPartition(TOPIC, index % partitions)])
    consumer.seek_to_beginning()
    received = 0
    try:
        for _record in consumer:
            received += 1
            if received >= wanted:
                break
    finally:
        consumer.close()
    return received


def drive(bootstrap: str, producers: int, consumers: int, rounds: int, batch: int) -> dict[str, Any]:
    partitions = max(producers, consumers)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=CLIENT_ID,
                             request_timeout_ms=5000, socket_options=SOCKET_OPTIONS)
    try:
        admin.create_topics([NewTopic(TOPIC, partitions, 1)])
    finally:
        admin.close()
    results: dict[str, int] = {}
    per_partition = producers * rounds * batch // partitions

    def run(name: str, work: Any, *arguments: Any) -> None:
        results[name] = work(bootstrap, *arguments)

    threads = [threading.Thread(target=run, args=(f"producer {i}", produce, i, partitions,
                                                  rounds, batch)) for i in range(producers)]
    threads += [threading.Thread(target=run, args=(f"consumer {i}", consume, i, partitions,
                                                   per_partition)) for i in range(consumers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"partitions": partitions, "records": dict(sorted(results.items()))}


def record(output: Path, producers: int, consumers: int, rounds: int, batch: int) -> dict[str, Any]:
    with TansuBroker(9092) as broker, BufferedTcpdump(output, f"tcp port {broker.port}"):
        session = drive(broker.bootstrap, producers, consumers, rounds, batch)
    sidecar = {
        "format": "kdissect-load-session/1",
        "capture": output.name,
        "broker": {"software": f"tansu {tansu_version()}", "port": broker.port},
        "client": {"software": f"kafka-python {kafka.__version__}", "client_id": CLIENT_ID,
                   "loopback_mtu": MTU},
        "topic": TOPIC, "record_size": RECORD_SIZE, "rounds": rounds, "batch": batch,
        **session,
    }
    output.with_suffix(".json").write_text(json.dumps(sidecar, indent=1) + "\n")
    return sidecar


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.record_load", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", type=Path, help="the pcap to write (sidecar: same name, .json)")
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=30, help="batches per producer")
    parser.add_argument("--batch", type=int, default=8, help="records per batch")
    arguments = parser.parse_args(argv)
    outer = in_own_namespace(sys.argv[1:] if argv is None else argv)
    if outer is not None:
        return outer
    sidecar = record(arguments.output, arguments.producers, arguments.consumers,
                     arguments.rounds, arguments.batch)
    print(f"{arguments.output}: {arguments.output.stat().st_size} bytes; {sidecar['records']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
