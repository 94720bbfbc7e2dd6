"""Record records: the Tansu broker and kafka-python producing with every codec and consuming it back.

    python -m tools.record_records captures/tansu_records.pcap --port 9092

One producer per compression kafka-python supports (none, gzip, snappy, lz4,
zstd) sends keyed records with headers and explicit timestamps to topic
`records` (null keys and values included), waiting for each batch; then a
transactional producer sends records and commits (when the broker supports
transactions); then a consumer reads the topic from the start. A sidecar JSON
(same name, ``.json``) holds what each producer sent, with the offset the broker
gave it, and what the consumer received: keys, values and header values as hex.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import kafka
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

from tools.recording import TansuBroker, Tcpdump, recording_arguments, tansu_version

CLIENT_ID = "kdissect-records"
TOPIC = "records"
PARTITIONS = 2
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
RECORDS_PER_CODEC = 6
T0 = 1_796_000_000_000  # record timestamps: fixed, so re-recording gives the same bytes


def hexed(raw: bytes | None) -> str | None:
    return None if raw is None else raw.hex()


def planned(codec: str, index: int) -> dict[str, Any]:
    """The n-th record a producer sends: every shape of key, value and headers."""
    key = None if index == 1 else f"{codec}-key-{index}".encode()
    value = None if index == 2 else (f"{codec} value {index} " * (3 + index)).encode()
    if index == 3:
        value = bytes(range(256)) * 2  # binary, compressible
    headers = [] if index % 3 == 0 else [("trace", f"{codec}-{index}".encode()), ("empty", b"")]
    if index == 4:
        headers = [("bin", b"\x00\xff\x10"), ("utf8-\u00e9", "v\u00e9".encode())]
    return {"partition": index % PARTITIONS, "key": key, "value": value, "headers": headers,
            "timestamp_ms": T0 + 1000 * (CODECS.index(codec) if codec in CODECS else len(CODECS)) + index}


def sent_record(label: str, record: dict[str, Any], meta: Any) -> dict[str, Any]:
    """What a producer sent, with the partition and offset the broker gave it."""
    return {"producer": label, "partition": meta.partition, "offset": meta.offset,
            "timestamp": record["timestamp_ms"], "key": hexed(record["key"]),
            "value": hexed(record["value"]), "headers": [[k, hexed(v)] for k, v in record["headers"]]}


def produce_every_codec(bootstrap: str) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    for codec in CODECS:
        producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=f"{CLIENT_ID}-{codec}",
                                 compression_type=None if codec == "none" else codec,
                                 acks="all", linger_ms=50, enable_idempotence=True)
        try:
            records = [planned(codec, i) for i in range(RECORDS_PER_CODEC)]
            futures = [producer.send(TOPIC, **r) for r in records]  # several records per batch
            producer.flush(timeout=15)
            sent += [sent_record(codec, r, f.get(timeout=15)) for r, f in zip(records, futures, strict=True)]
        finally:
            producer.close()
    return sent


def produce_transaction(bootstrap: str) -> tuple[list[dict[str, Any]], str | None]:
    """Records sent and committed in one transaction; (records, None) or ([], why not)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=f"{CLIENT_ID}-txn",
                             transactional_id="kdissect-txn", compression_type="gzip",
                             acks="all")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        records = [planned("txn", i) for i in range(3)]
        futures = [producer.send(TOPIC, **r) for r in records]
        producer.commit_transaction()
        return [sent_record("transactional", r, f.get(timeout=15))
                for r, f in zip(records, futures, strict=True)], None
    except Exception as failure:  # the broker may not support transactions
        return [], f"{type(failure).__name__}: {failure}"
    finally:
        producer.close(timeout=5)


def consume(bootstrap: str, expected: int) -> list[dict[str, Any]]:
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, client_id=f"{CLIENT_ID}-consumer",
                             group_id=None, auto_offset_reset="earliest", enable_auto_commit=False,
                             isolation_level="read_committed", consumer_timeout_ms=3000)
    received: list[dict[str, Any]] = []
    deadline = time.monotonic() + 20
    try:
        while len(received) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                received.extend({"partition": r.partition, "offset": r.offset,
                                 "timestamp": r.timestamp, "timestamp_type": r.timestamp_type,
                                 "key": hexed(r.key), "value": hexed(r.value),
                                 "headers": [[k, hexed(v)] for k, v in r.headers]} for r in batch)
    finally:
        consumer.close()
    return received


def drive(bootstrap: str) -> dict[str, Any]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=CLIENT_ID, request_timeout_ms=5000)
    try:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    finally:
        admin.close()
    produced = produce_every_codec(bootstrap)
    transactional, no_transactions = produce_transaction(bootstrap)
    produced += transactional
    consumed = consume(bootstrap, len(produced))
    return {"produced": produced, "consumed": consumed, "transactions": no_transactions or "committed"}


def record(output: Path, port: int | None = None) -> dict[str, Any]:
    with TansuBroker(port) as broker, Tcpdump(output, f"tcp port {broker.port}"):
        session = drive(broker.bootstrap)
    sidecar = {
        "format": "kdissect-records-session/1",
        "capture": output.name,
        "command": f"python -m tools.record_records captures/{output.name}"
                   + (f" --port {port}" if port else ""),
        "broker": {"software": f"tansu {tansu_version()}", "host": "127.0.0.1", "port": broker.port},
        "client": {"software": f"kafka-python {kafka.__version__}", "client_id": CLIENT_ID},
        "topic": TOPIC, "partitions": PARTITIONS, "codecs": list(CODECS),
        **session,
    }
    output.with_suffix(".json").write_text(json.dumps(sidecar, indent=1) + "\n")
    return sidecar


def main(argv: list[str] | None = None) -> int:
    arguments = recording_arguments("python -m tools.record_records", __doc__, argv)
    sidecar = record(arguments.output, arguments.port)
    print(f"{arguments.output}: {arguments.output.stat().st_size} bytes, "
          f"{len(sidecar['produced'])} records produced, {len(sidecar['consumed'])} consumed, "
          f"transactions: {sidecar['transactions']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
