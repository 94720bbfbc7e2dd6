"""Record the real Tansu broker driven by the real kafka-python client, with tcpdump on loopback.

    python -m tools.record_broker captures/tansu_topic_partitions.pcap --port 9092

The client creates three topics, produces with an idempotent producer to every
partition of two of them, then calls DescribeTopicPartitions (API 75): all topics,
a page limit, follow-up calls with an explicit cursor, and a topic that does not
exist. A sidecar JSON (same name, ``.json``) records the broker port, each call
with its arguments and what kafka-python decoded from the broker's answer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import kafka
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from tools.recording import TansuBroker, Tcpdump, recording_arguments, tansu_version

CLIENT_ID = "kdissect-recorder"
TOPICS = {"orders": 6, "payments": 3, "audit": 2}
PRODUCED_TOPICS = ("orders", "payments")
RECORDS_PER_PARTITION = 2
MISSING_TOPIC = "no-such-topic"
PAGE_LIMIT = 4
DESCRIBE_CALLS: tuple[dict[str, Any], ...] = (
    {"topics": list(TOPICS)},
    {"topics": ["orders", "payments"], "response_partition_limit": PAGE_LIMIT},
    {"topics": ["orders", "payments"], "response_partition_limit": PAGE_LIMIT,
     "cursor": {"topic_name": "orders", "partition_index": PAGE_LIMIT}},
    {"topics": ["orders", "payments"], "response_partition_limit": PAGE_LIMIT,
     "cursor": {"topic_name": "payments", "partition_index": 1}},
    {"topics": [MISSING_TOPIC]},
)


def create_topics(admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic(name, count, 1) for name, count in TOPICS.items()])


def produce(bootstrap: str) -> int:
    """Send a few records to every partition of two topics with an idempotent producer."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=CLIENT_ID + "-producer",
                             enable_idempotence=True, acks="all", linger_ms=0)
    sent = 0
    try:
        for topic in PRODUCED_TOPICS:
            for partition in range(TOPICS[topic]):
                for record in range(RECORDS_PER_PARTITION):
                    value = f"{topic}-{partition}-{record}".encode()
                    producer.send(topic, value=value, partition=partition).get(timeout=10)
                    sent += 1
    finally:
        producer.close()
    return sent


def describe(admin: KafkaAdminClient) -> list[dict[str, Any]]:
    """Each DescribeTopicPartitions call with its arguments and the decoded answer."""
    calls = []
    for arguments in DESCRIBE_CALLS:
        result = admin.describe_topic_partitions(**arguments)
        calls.append({"arguments": arguments, "result": json.loads(json.dumps(result,
                                                                             default=str))})
    return calls


def drive(bootstrap: str) -> dict[str, Any]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=CLIENT_ID,
                             request_timeout_ms=5000)
    try:
        create_topics(admin)
        produced = produce(bootstrap)
        calls = describe(admin)
    finally:
        admin.close()
    return {"produced_records": produced, "describe_topic_partitions": calls}


def record(output: Path, port: int | None = None) -> dict[str, Any]:
    """Run the broker session under tcpdump; write the capture and its sidecar.

    ``port`` None picks a free loopback port.
    """
    with TansuBroker(port) as broker, Tcpdump(output, f"tcp port {broker.port}"):
        session = drive(broker.bootstrap)
    sidecar = {
        "format": "kdissect-broker-session/1",
        "capture": output.name,
        "command": f"python -m tools.record_broker captures/{output.name}"
                   + (f" --port {port}" if port else ""),
        "broker": {"software": f"tansu {tansu_version()}", "host": "127.0.0.1",
                   "port": broker.port},
        "client": {"software": f"kafka-python {kafka.__version__}", "client_id": CLIENT_ID},
        "topics": TOPICS,
        **session,
    }
    output.with_suffix(".json").write_text(json.dumps(sidecar, indent=1) + "\n")
    return sidecar


def main(argv: list[str] | None = None) -> int:
    arguments = recording_arguments("python -m tools.record_broker", __doc__, argv)
    sidecar = record(arguments.output, arguments.port)
    size = arguments.output.stat().st_size
    print(f"{arguments.output}: {size} bytes, Tansu on port {sidecar['broker']['port']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
