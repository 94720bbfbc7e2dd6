"""The `--list-apis` table: every API key, the versions kdissect decodes, and from which source."""

from __future__ import annotations

from kdissect.apis import APIS
from kdissect.decode.schema import active_sources, coverage, definition_problems


def api_table() -> str:
    """One row per API and run of versions sharing a definition source; then the sources."""
    lines = [f"{'KEY':>3}  {'API':<29} {'PUBLISHED':<9}  {'DECODED':<9}  SOURCE"]
    for key, api in sorted(APIS.items()):
        published = f"{api.min_version}-{api.max_version}" if api.max_version > api.min_version else "0"
        runs = coverage(key)
        if not runs:
            lines.append(f"{key:>3}  {api.name:<29} {published:<9}  {'-':<9}  no definition (see --schemas)")
        for index, run in enumerate(runs):
            first = index == 0
            lines.append(f"{key if first else '':>3}  {api.name if first else '':<29} "
                         f"{published if first else '':<9}  {run.versions:<9}  {run.source}")
    lines.append("")
    lines.append("sources, highest precedence first: " + ", ".join(
        f"{s.label} ({s.folder})" for s in active_sources()))
    for where, problem in sorted(definition_problems().items()):
        lines.append(f"skipped {where}: {problem}")
    return "\n".join(lines)
