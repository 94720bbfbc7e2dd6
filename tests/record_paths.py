"""Record batches read by name over `record_values` and over the tree of the same bytes, for
tests: filters and `-T fields` read the first, and must find what the second holds."""

from __future__ import annotations

from kdissect.decode import record_nodes
from kdissect.decode.tree import Node

RECORD_PATHS = ["key", "value", "offset", "timestamp", "timestampDelta", "offsetDelta", "keyLength", "valueLength",
                "headers", "headerKey", "headerValue", "headerKeyLength", "headerValueLength", "headers[].headerKey",
                "headers[0].headerValue", "records", "records[].key", "records[0].value", "records[-1].offset",
                "baseOffset", "batchLength", "partitionLeaderEpoch", "magic", "crc",
                "lastOffsetDelta", "baseTimestamp", "maxTimestamp", "producerId", "producerEpoch", "baseSequence",
                "recordCount", "compression", "timestampType", "isTransactional", "isControl", "Records",
                "kafka.message_value", "kafka.batch_codec"]  # fmt: skip


def values_read_as_the_tree(data: bytes) -> int:
    """Every record path read over the values of `record_values` gives what it gives over the
    tree of the same bytes (a struct standing for itself either way); how many values were
    compared."""
    from kdissect.present.fields import TreeBody, ValuesBody
    from kdissect.present.filter import resolve

    records = Node("Records", "records", data, "", 0, len(data))
    records.children = record_nodes.entries_nodes(data, 0, len(data))
    root = Node("body", "Body", None, "", 0, len(data), "", [records])
    by_tree, by_values = TreeBody(root), ValuesBody({"Records": data}, {}, records=frozenset({"Records"}))

    def comparable(values: list) -> list:
        return ["struct" if isinstance(v, dict | Node) else v for v in values]

    compared = 0
    for name in RECORD_PATHS:
        for path in resolve(name).paths:
            expected = comparable(list(by_tree.values(path)))
            assert comparable(list(by_values.values(path))) == expected, name
            compared += len(expected)
    return compared
