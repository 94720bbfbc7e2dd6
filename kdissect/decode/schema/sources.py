"""Where message definitions come from, highest precedence first.

1. the operator's own: `--schemas PATH`, a folder of Kafka's message files (a
   source tree's `clients/src/main/resources/common/message`) or a
   `kafka-clients-*.jar`, which holds them under `common/message/`;
2. an installed kafka-python, which ships Kafka's files for the client-facing
   APIs (current versions) under `kafka/protocol/schemas/resources/`;
3. the project's own files in `definitions/`.

A source is only a folder of `<MessageName>.json` files: nothing here parses
JSON, and nothing is read before a definition is asked for. kafka-python is
located with `find_spec("kafka")`, which does not import it (its package
imports the whole client).
"""

from __future__ import annotations

import functools
import importlib.util
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from kdissect.decode.schema.versions import SchemaError

if TYPE_CHECKING:  # zipfile and the Traversable protocol are imported only when a jar is given
    from importlib.resources.abc import Traversable

PROJECT = "kdissect"
KAFKA_PYTHON = "kafka-python"
JAR_FOLDER = "common/message/"
SOURCE_TREE_FOLDER = Path("clients/src/main/resources/common/message")


@dataclass(frozen=True, slots=True, eq=False)
class DefinitionSource:
    """One folder of Kafka message files (on disk, in a package, or inside a jar)."""

    label: str  # shown by --list-apis: "kdissect", "kafka-python", "schemas:<path>"
    folder: Traversable

    def read(self, name: str) -> str | None:
        """The text of `<name>.json`, None when this source has no such file."""
        import zipfile  # off the start-up path; a damaged jar raises its errors or zlib's
        import zlib

        entry = self.folder.joinpath(f"{name}.json")
        try:
            return entry.read_text(encoding="utf-8") if entry.is_file() else None
        except (OSError, UnicodeDecodeError, EOFError, zipfile.BadZipFile, zlib.error) as problem:
            raise SchemaError(f"{self.label}: cannot read {name}.json: {problem}") from None

    def names(self) -> tuple[str, ...]:
        """Every message name this source has a file for, sorted."""
        return tuple(sorted(e.name[:-5] for e in self.folder.iterdir() if e.name.endswith(".json")))


@functools.cache
def project_source() -> DefinitionSource:
    return DefinitionSource(PROJECT, resources.files("kdissect.decode.schema").joinpath("definitions"))


@functools.cache
def kafka_python_source() -> DefinitionSource | None:
    """kafka-python's bundled Kafka definitions, when it is installed (without importing it)."""
    try:
        spec = importlib.util.find_spec("kafka")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        folder = Path(location, "protocol", "schemas", "resources")
        if (folder / "RequestHeader.json").is_file():
            return DefinitionSource(KAFKA_PYTHON, folder)
    return None


def schemas_source(path: str | os.PathLike[str]) -> DefinitionSource:
    """The operator's definitions: a message folder, a Kafka source tree, a jar, or a libs/ folder."""
    path = Path(path)
    label = f"schemas:{path.name or path}"
    if path.is_file():
        return DefinitionSource(label, _jar_folder(path))
    if not path.is_dir():
        raise SchemaError(f"--schemas {path}: no such file or directory")
    if any(path.glob("*Request.json")):
        return DefinitionSource(label, path)
    if (path / SOURCE_TREE_FOLDER).is_dir():
        return DefinitionSource(label, path / SOURCE_TREE_FOLDER)
    jars = sorted([*path.glob("kafka-clients-*.jar"), *path.glob("libs/kafka-clients-*.jar")])
    if jars:
        return DefinitionSource(f"schemas:{jars[-1].name}", _jar_folder(jars[-1]))
    raise SchemaError(f"--schemas {path}: no Kafka message files (*Request.json) or kafka-clients jar there")


def _jar_folder(jar: Path) -> Traversable:
    import zipfile

    try:
        archive = zipfile.ZipFile(jar)
    except (OSError, zipfile.BadZipFile) as problem:
        raise SchemaError(f"--schemas {jar}: not a readable jar: {problem}") from None
    if not any(n.startswith(JAR_FOLDER) and n.endswith(".json") for n in archive.namelist()):
        raise SchemaError(f"--schemas {jar}: no {JAR_FOLDER}*.json inside")
    return zipfile.Path(archive, at=JAR_FOLDER)


def default_sources(schemas: str | os.PathLike[str] | None = None, *, installed: bool = True) -> tuple[DefinitionSource, ...]:
    """The sources in precedence order: the operator's, an installed kafka-python's, the project's."""
    found = [schemas_source(schemas)] if schemas is not None else []
    third_party = kafka_python_source() if installed else None
    if third_party is not None:
        found.append(third_party)
    found.append(project_source())
    return tuple(found)
