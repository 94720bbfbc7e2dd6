"""The package's structure as built: tiers import only downwards, and nothing imports in a circle.

    base (notes, apis, error_codes, spool, native) < ingest < decode (with dissectors) < pair
    < pipeline < present < cli

Every import counts, at module level or inside a function (a lazy import is
still a dependency); only imports for type checking are left out. Read from
the source with `ast`, so the test needs nothing imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "kdissect"
TIERS = {"base": 0, "ingest": 1, "decode": 2, "pair": 3, "pipeline": 4, "present": 5, "cli": 6}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


# The C extensions count as modules of their tiers too, through their stubs (`.pyi`).
MODULES = {module_name(path): path for pattern in ("*.py", "*.pyi") for path in PACKAGE.rglob(pattern)}


def tier(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return TIERS["cli"]  # the package itself: its lazy attributes reach the tables
    top = parts[1]
    if top in ("notes", "apis", "error_codes", "spool", "_spool_c", "native"):
        return TIERS["base"]
    if top == "dissectors":
        return TIERS["decode"]
    if top in ("cli", "__main__"):
        return TIERS["cli"]
    if top in ("parallel", "light", "_light_c"):  # the pipeline on several processes
        return TIERS["pipeline"]
    if top == "dask":  # tables over many captures: presentation, like the pandas tables
        return TIERS["present"]
    return TIERS[top]


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def runtime_imports(path: Path) -> set[str]:
    """The kdissect modules `path` imports at run time, lazily or not."""
    return imports_in(path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py")


def imports_in(source: str, own: str, is_package: bool) -> set[str]:
    found: set[str] = set()
    package = own if is_package else own.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking_only(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in MODULES else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return {name for name in found if name in MODULES and name != own}


GRAPH = {module: runtime_imports(path) for module, path in MODULES.items()}


def test_the_decode_tier_imports_nothing_from_present_or_the_cli() -> None:
    for module, imported in GRAPH.items():
        if tier(module) == TIERS["decode"]:
            upward = sorted(i for i in imported if i.startswith(("kdissect.present", "kdissect.cli")))
            assert upward == [], f"{module} imports {upward}"


def test_every_tier_imports_only_from_the_tiers_below_it() -> None:
    problems = [f"{module} -> {target}" for module, imported in GRAPH.items() for target in sorted(imported)
                if tier(target) > tier(module)]
    assert problems == []


def test_the_package_has_no_import_cycle() -> None:
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(GRAPH[module]):
            if state.get(target) == 1:
                cycle = [*path[path.index(target):], target]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)


def test_the_layering_test_sees_lazy_and_relative_imports_but_not_type_checking_ones() -> None:
    source = ("from typing import TYPE_CHECKING\n"
              "from . import tree\n"
              "if TYPE_CHECKING:\n    from kdissect.cli import main\n"
              "def f():\n    from kdissect.present.html import tree_html\n")
    assert imports_in(source, "kdissect.decode.probe", False) == {"kdissect.present.html", "kdissect.decode.tree"}


def test_the_graph_holds_the_known_edges() -> None:
    assert "kdissect.decode.interpreter" in GRAPH["kdissect.decode.dissect"]
    assert "kdissect.pair.message" in GRAPH["kdissect.pipeline"]
    assert "kdissect.pipeline" in GRAPH["kdissect"]  # a lazy import in a function
