"""Kafka message definitions as data: a typed model, checked at load, compiled per version.

    sources (--schemas, kafka-python, definitions/*.json)
        ->  loader (MessageSpec, per-version precedence)  ->  plan (MessagePlan, cached)

The interpreter (`kdissect.decode.interpreter`) walks a MessagePlan over a frame.
"""

import os

from kdissect.decode.schema.loader import (
    Coverage,
    Resolved,
    active_sources,
    coverage,
    definition_problems,
    dissected_api_keys,
    header_spec,
    load_definitions,
    message_spec,
    on_sources_change,
    parse_definition,
    resolve,
    set_sources,
    shipped_api_keys,
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
from kdissect.decode.schema.sources import DefinitionSource, default_sources, project_source
from kdissect.decode.schema.versions import ALL_VERSIONS, NO_VERSIONS, SchemaError, VersionRange

on_sources_change(message_plan.cache_clear)


def configure_definitions(schemas: str | os.PathLike[str] | None = None, *, installed: bool = True) -> None:
    """Choose where definitions come from, for the whole process, from now on.

    `schemas` is a folder of Kafka's message files or a kafka-clients jar, used first;
    `installed=False` ignores an installed kafka-python, leaving the project's own files.
    Raises SchemaError when `schemas` holds no Kafka message files.
    """
    set_sources(default_sources(schemas, installed=installed))

__all__ = [
    "ALL_VERSIONS",
    "NO_VERSIONS",
    "Coverage",
    "DefinitionSource",
    "FieldPlan",
    "FieldSpec",
    "FieldType",
    "Kind",
    "MessagePlan",
    "MessageSpec",
    "Resolved",
    "SchemaError",
    "StructPlan",
    "StructSpec",
    "VersionRange",
    "active_sources",
    "compile_message",
    "configure_definitions",
    "coverage",
    "default_sources",
    "definition_problems",
    "dissected_api_keys",
    "header_plan",
    "header_spec",
    "load_definitions",
    "message_plan",
    "message_spec",
    "on_sources_change",
    "parse_definition",
    "parse_message",
    "project_source",
    "resolve",
    "set_sources",
    "shipped_api_keys",
    "strip_comments",
]
