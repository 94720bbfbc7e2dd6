"""Kafka message definitions as data: a typed model, checked at load, compiled per version.

    definitions/*.json  ->  loader (MessageSpec)  ->  plan (MessagePlan, cached)

The interpreter (`kdissect.decode.interpreter`) walks a MessagePlan over a frame.
"""

from kdissect.decode.schema.loader import (
    dissected_api_keys,
    header_spec,
    load_definitions,
    message_spec,
    parse_definition,
    strip_comments,
)
from kdissect.decode.schema.model import (
    FieldSpec,
    FieldType,
    MessageSpec,
    StructSpec,
    parse_message,
)
from kdissect.decode.schema.plan import (
    FieldPlan,
    Kind,
    MessagePlan,
    StructPlan,
    compile_message,
    header_plan,
    message_plan,
)
from kdissect.decode.schema.versions import ALL_VERSIONS, NO_VERSIONS, SchemaError, VersionRange

__all__ = [
    "ALL_VERSIONS",
    "NO_VERSIONS",
    "FieldPlan",
    "FieldSpec",
    "FieldType",
    "Kind",
    "MessagePlan",
    "MessageSpec",
    "SchemaError",
    "StructPlan",
    "StructSpec",
    "VersionRange",
    "compile_message",
    "dissected_api_keys",
    "header_plan",
    "header_spec",
    "load_definitions",
    "message_plan",
    "message_spec",
    "parse_definition",
    "parse_message",
    "strip_comments",
]
