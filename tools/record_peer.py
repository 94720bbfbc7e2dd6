"""Record the scripted peer answering kafka-python's real admin client, with tcpdump on loopback.

    python -m tools.record_peer producers captures/producers_story.pcap --port 9092
    python -m tools.record_peer quorum captures/quorum_story.pcap --port 9092
    python -m tools.record_peer incident captures/incident.pcap --port 9092

Writes the capture and, next to it, a sidecar JSON (same name, ``.json``) with
every exchange in order: correlation id, API version, the request as kio read it
and the exact values kio encoded in the response. See ``captures/README.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kafka
import kio
from kafka import KafkaAdminClient, TopicPartition
from kafka.errors import KafkaError

from tools.recording import LOOPBACK, Tcpdump
from tools.scripted_peer import ScriptedPeer
from tools.stories import (
    COORDINATOR_GROUP,
    COORDINATOR_ROUNDS,
    INCIDENT_ROUNDS,
    INCIDENT_TOPICS,
    NODE_ID,
    IncidentStory,
    PeerStory,
    ProducersStory,
    QuorumStory,
)

CLIENT_ID = "kdissect-story"
PRODUCER_CALLS = 14
QUORUM_PHASES = ((0, 2), (1, 2), (2, 12))  # (highest DescribeQuorum version advertised, calls)
INCIDENT_PAUSE = 2.6  # seconds between rounds: the incident lasts about 80 s
ABOUT = {
    "producers": "kafka-python's admin client calls describe_producers on a scripted peer "
                 "whose DescribeProducers v0 answers (encoded by kio) tell a story over time",
    "quorum": "kafka-python's admin client calls describe_metadata_quorum on a scripted peer "
              "whose DescribeQuorum answers (encoded by kio) tell a story over time; the peer "
              "advertises v0, then v1, then v2 on three successive client connections",
    "incident": "kafka-python's admin client calls describe_metadata_quorum, describe_producers "
                "and describe_topic_partitions once a round on a scripted peer whose answers "
                "(encoded by kio) tell of a cluster incident: quorum, producers and partitions "
                "going wrong, a consumer group's coordinator moving (describe_groups); "
                "one answer is late and the last is never sent",
}


def pause(call: int) -> None:
    """Real seconds between calls: 0.2 to 0.5 s."""
    time.sleep(0.2 + 0.1 * (call % 4))


def admin_client(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id=CLIENT_ID,
                            request_timeout_ms=5000)


def attempt(call: Callable[[], Any]) -> None:
    """Make one admin call; the response is on the wire whatever the client makes of it.

    Errors the peer scripted make the client raise. kafka-python 3.0.12 also fails on
    DescribeQuorum v0 and v1 responses (it pops ``error_message``, a v2-only field,
    and raises KeyError) after it has read them.
    """
    try:
        call()
    except (KafkaError, KeyError) as refused:
        print(f"  client raised {type(refused).__name__}: {refused}", file=sys.stderr)


def drive_producers(bootstrap: str, story: PeerStory) -> None:
    partitions = [TopicPartition(topic, index)
                  for topic, count in story.topics.items() for index in range(count)]
    admin = admin_client(bootstrap)
    try:
        for call in range(PRODUCER_CALLS):
            pause(call)
            attempt(lambda: admin.describe_producers(partitions, broker_id=NODE_ID))
    finally:
        admin.close()


def drive_quorum(bootstrap: str, story: PeerStory) -> None:
    call = 0
    for max_version, calls in QUORUM_PHASES:
        story.max_version = max_version
        admin = admin_client(bootstrap)
        try:
            for _ in range(calls):
                pause(call)
                attempt(admin.describe_metadata_quorum)
                call += 1
        finally:
            admin.close()


def drive_incident(bootstrap: str, story: PeerStory, pause_seconds: float = INCIDENT_PAUSE) -> None:
    partitions = [TopicPartition(topic, index)
                  for topic, count in INCIDENT_TOPICS.items() for index in range(count)]
    admin = admin_client(bootstrap)
    try:
        for round_ in range(INCIDENT_ROUNDS):
            time.sleep(pause_seconds)
            attempt(admin.describe_metadata_quorum)
            attempt(lambda: admin.describe_producers(partitions, broker_id=NODE_ID))
            attempt(lambda: admin.describe_topic_partitions(list(INCIDENT_TOPICS)))
            if round_ in COORDINATOR_ROUNDS:
                describe_group(bootstrap)
    finally:
        admin.close()


def describe_group(bootstrap: str) -> None:
    """A new client (it caches coordinators) looks up the group's coordinator and asks it."""
    admin = admin_client(bootstrap)
    try:
        attempt(lambda: admin.describe_groups([COORDINATOR_GROUP]))
    finally:
        admin.close()


STORIES: dict[str, tuple[Callable[[], PeerStory], Callable[[str, PeerStory], None]]] = {
    "producers": (ProducersStory, drive_producers),
    "quorum": (QuorumStory, drive_quorum),
    "incident": (IncidentStory, drive_incident),
}


def record(story_name: str, output: Path, port: int = 0) -> dict[str, Any]:
    """Run one story under tcpdump; write the capture and its sidecar; return the sidecar.

    ``port`` 0 lets the system choose a free loopback port.
    """
    make_story, drive = STORIES[story_name]
    story = make_story()
    with ScriptedPeer(story, port) as peer:
        story.port = peer.port
        with Tcpdump(output, f"tcp port {peer.port}"):
            drive(f"{LOOPBACK}:{peer.port}", story)
        exchanges = list(peer.exchanges)
    sidecar = story_sidecar(story_name, output, story, peer.port, exchanges)
    if port:
        sidecar["command"] += f" --port {port}"
    output.with_suffix(".json").write_text(json.dumps(sidecar, indent=1) + "\n")
    return sidecar


def story_sidecar(story_name: str, output: Path, story: PeerStory, port: int,
                  exchanges: list[dict[str, Any]]) -> dict[str, Any]:
    served = getattr(story, "served_apis", (story.served_api,))
    steps = dict.fromkeys(served, 0)  # each served API counts its own steps (incident: rounds)
    for exchange in exchanges:
        if exchange["api_key"] in steps:
            exchange["step"] = steps[exchange["api_key"]]
            steps[exchange["api_key"]] += 1
    return {
        "format": "kdissect-story/1",
        "capture": output.name,
        "command": f"python -m tools.record_peer {story_name} captures/{output.name}",
        "about": ABOUT[story_name],
        "peer": {"host": LOOPBACK, "port": port, "node_id": NODE_ID,
                 "codec": f"kio {kio.__version__}"},
        "client": {"software": f"kafka-python {kafka.__version__}", "client_id": CLIENT_ID},
        "events": story.events,
        "exchanges": exchanges,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.record_peer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("story", choices=sorted(STORIES))
    parser.add_argument("output", type=Path, help="the pcap to write (sidecar: same name, .json)")
    parser.add_argument("--port", type=int, default=0,
                        help="loopback port of the peer (default: any free port)")
    arguments = parser.parse_args(argv)
    sidecar = record(arguments.story, arguments.output, arguments.port)
    size = arguments.output.stat().st_size
    print(f"{arguments.output}: {size} bytes, {len(sidecar['exchanges'])} exchanges "
          f"with the peer on port {sidecar['peer']['port']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
