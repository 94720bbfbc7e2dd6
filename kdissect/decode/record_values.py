"""Record batches as flat values: what filters and `-T fields` read of records without
building the annotated tree.

`entries_values(raw)` are a `records` field's entries as dicts and lists, shaped as
`record_nodes` shapes the tree's nodes: the same names, in the same order, nested the
same way, so that a path read over these values gives what it gives over the tree (`kdissect.present.fields`: `ValuesBody` and `TreeBody`; a test
checks it on every shipped and third-party capture). A batch is a dict of its header
fields, its `attributes` (a dict of the bits' meanings) and its `records`: a list of
record dicts, or the compressed bytes when they could not be decompressed. A legacy
message (magic 0 and 1) is a dict whose `value` is, for a compressed wrapper, the list
of its inner messages. Bytes left undecoded after a problem are a bytes item of the
list they end. What the tree holds but no name reaches (length prefixes, cut or
malformed entries, control-record fields) is left out. Building these is several
times cheaper than the nodes, which carry offsets, sizes and displays.
"""

from __future__ import annotations

from typing import Any

from kdissect.decode import records as rec
from kdissect.decode.record_nodes import BATCH_FIELDS
from kdissect.decode.records import LegacyMessage, Record, RecordBatch

Values = dict[str, Any]
_BATCH_HEADER = sum(size for _name, _type, size, _about in BATCH_FIELDS)  # bytes before the records
_LEGACY_FIXED = {0: 18, 1: 26}  # offset, message_size, crc, magic, attributes (and magic 1's timestamp)


def entries_values(raw: bytes) -> list[Values]:
    """The batches and legacy messages of a `records` field's bytes, as values."""
    found: list[Values] = []
    for entry in rec.decode_records(raw, 0, len(raw), max_decompressed=rec.MAX_DECOMPRESSED_BYTES):
        if isinstance(entry, RecordBatch):
            found.append(_batch(entry, raw))
        elif isinstance(entry, LegacyMessage):
            found.append(_message(entry, raw))
    return found


def _batch(batch: RecordBatch, data: bytes) -> Values:
    attributes = {"compression": batch.compression, "timestampType": batch.timestamp_type,
                  "isTransactional": batch.transactional, "isControl": batch.control,
                  "hasDeleteHorizon": batch.delete_horizon}
    values: Values = {
        "baseOffset": batch.base_offset, "batchLength": batch.batch_length,
        "partitionLeaderEpoch": batch.partition_leader_epoch, "magic": batch.magic, "crc": batch.crc,
        "attributes": attributes, "lastOffsetDelta": batch.last_offset_delta,
        "baseTimestamp": batch.base_timestamp, "maxTimestamp": batch.max_timestamp,
        "producerId": batch.producer_id, "producerEpoch": batch.producer_epoch,
        "baseSequence": batch.base_sequence, "recordCount": batch.record_count,
    }  # fmt: skip
    end = batch.position + batch.size
    if batch.compression == "none" or batch.attributes & 0x07 == 0:
        values["records"] = _records(batch, data, end)
    elif batch.decompressed is not None:
        values["records"] = _records(batch, batch.decompressed, len(batch.decompressed))
    else:
        values["records"] = data[batch.position + _BATCH_HEADER:end]
    return values


def _records(batch: RecordBatch, body: bytes, end: int) -> list[Any]:
    found: list[Any] = [_record(record) for record in batch.records]
    if batch.records_end < end:
        found.append(body[batch.records_end:end])
    return found


def _record(record: Record) -> Values:
    values: Values = {"timestampDelta": record.timestamp_delta, "timestamp": record.timestamp,
                      "offsetDelta": record.offset_delta, "offset": record.offset,
                      "keyLength": record.key_length}
    if record.key is not None:
        values["key"] = record.key
    values["valueLength"] = record.value_length
    if record.value is not None:
        values["value"] = record.value
    headers = []
    for header in record.headers:
        item: Values = {"headerKeyLength": header.key_length, "headerKey": header.key,
                        "headerValueLength": header.value_length}
        if header.value is not None:
            item["headerValue"] = header.value
        headers.append(item)
    values["headers"] = headers
    return values


def _message(message: LegacyMessage, data: bytes) -> Values:
    attributes: Values = {"compression": message.compression}
    if message.timestamp_type is not None:
        attributes["timestampType"] = message.timestamp_type
    values: Values = {"offset": message.offset, "crc": message.crc, "magic": message.magic,
                      "attributes": attributes}
    if message.magic == 1:
        values["timestamp"] = message.timestamp
    # the key and value, where the message holds them (else bytes left undecoded, which no
    # name reaches)
    if message.key_end > message.position + _LEGACY_FIXED[message.magic]:
        values["key"] = message.key
        if message.key_end < message.position + message.size:
            values["value"] = _legacy_value(message)
    return values


def _legacy_value(message: LegacyMessage) -> Any:
    if not message.is_wrapper or message.decompressed is None:
        return message.value
    body = message.decompressed
    inner: list[Any] = [_message(m, body) for m in message.inner]
    stop = message.inner[-1].position + message.inner[-1].size if message.inner else 0
    if stop < len(body):
        inner.append(body[stop:])
    return inner
