"""Compiled walks over a body's flat values: only where a plan says the wanted fields are.

`-i`, its change marks and the `errors` table each read a few fields of a body
(its error codes, its topic names, a partition's leader and epoch). A generic
walk visits every value of every struct to find them; the plan already says
where they can be. So each walk is compiled once per `StructPlan` into Python
that looks up those fields by name and descends only into the arrays and
structs that can hold them, in wire order, as the generic walk would:

- `error_walk(plan)`: every non-zero `...ErrorCode` integer, depth first, each
  with the chain of structs (and array indexes) it sits in (`error_code_walk`:
  the codes alone, for counting);
- `scope_walk(plan, names, wanted)`: the values of `names` as each struct sees
  them (its own, else the nearest enclosing struct's), for every struct that
  sees at least one of `wanted`;
- `path_walk(plan, path)`: every value at a field-name path, arrays flattened.

They read flat values as `Message.values()` gives them, complete (generated
decoders) or partial (read off the interpreter's tree): absent fields and null
arrays or structs hold nothing. Tagged fields are looked for as untagged ones are,
after them (`value_fields`): a tag that is not on the wire is an absent field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kdissect.decode.schema.plan import FieldPlan, Kind, StructPlan, value_fields

Values = dict[str, Any]
# A struct and where it sits: (its values, its field name, its array index or None, the outer chain).
Chain = tuple[Values, str | None, int | None, Any]
# Called for each non-zero error code: (field name, code, the chain of the struct holding it).
ErrorFound = Callable[[str, int, Chain], None]
ErrorWalk = Callable[[Values, ErrorFound], None]
# Appends each non-zero error code of a body to the list it is given.
ErrorCodeWalk = Callable[[Values, list[int]], None]
ScopeWalk = Callable[[Values], list[tuple[Any, ...]]]
PathWalk = Callable[[Values], list[Any]]


def is_error_code(field: FieldPlan) -> bool:
    """An integer field named `ErrorCode` or `...ErrorCode`, as every error count reads them."""
    return field.kind is Kind.INTEGER and field.name.endswith("ErrorCode")


def inner_struct(field: FieldPlan) -> StructPlan | None:
    """The struct a field holds: its own, or its array's elements'."""
    if field.kind is Kind.STRUCT:
        return field.struct
    if field.kind is Kind.ARRAY and field.element is not None and field.element.kind is Kind.STRUCT:
        return field.element.struct
    return None


def chain_structs(chain: Chain) -> list[Values]:
    """The structs of a chain, outermost (the body) first."""
    found = []
    link: Any = chain
    while link is not None:
        found.append(link[0])
        link = link[3]
    return found[::-1]


def chain_path(chain: Chain, field: str) -> str:
    """`Topics[0].Partitions[2].ErrorCode`: a field's path from the body, as the tables write it."""
    steps = [field]
    link: Any = chain
    while link is not None and link[1] is not None:
        steps.append(link[1] if link[2] is None else f"{link[1]}[{link[2]}]")
        link = link[3]
    return ".".join(reversed(steps))


class _Source:
    """Python source of a group of functions, compiled together (they may call each other)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[int, str] = {}  # id(struct plan) -> its function's name
        self.pending: list[StructPlan] = []

    def function(self, stem: str, plan: StructPlan) -> str:
        """The name of the function for `plan`, queued for writing on first use."""
        name = self.names.get(id(plan))
        if name is None:
            name = self.names[id(plan)] = f"{stem}_{len(self.names)}"
            self.pending.append(plan)
        return name

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def compile(self, entry: str, constants: dict[str, Any]) -> Callable[..., Any]:
        namespace = dict(constants)
        source = "\n".join(self.lines)
        exec(compile(source, f"<kdissect walk {entry}>", "exec"), namespace)
        function: Callable[..., Any] = namespace[entry]
        function.__doc__ = source
        return function


def _holds(plan: StructPlan, wanted: Callable[[FieldPlan], bool], memo: dict[int, bool]) -> bool:
    """Whether any field matching `wanted` sits in `plan`, at any depth, tagged or not."""
    key = id(plan)
    if key in memo:
        return memo[key]
    memo[key] = False  # a struct that contains itself adds nothing new
    found = any(wanted(f) or ((inner := inner_struct(f)) is not None and _holds(inner, wanted, memo))
                for f in value_fields(plan))
    memo[key] = found
    return found


# -- error codes -------------------------------------------------------------------------


_ERROR_WALKS: dict[tuple[int, bool], tuple[StructPlan, Callable[..., None]]] = {}


def error_walk(plan: StructPlan) -> ErrorWalk:
    """`walk(values, found)` calls `found(field, code, chain)` for each non-zero error code of a
    body of this plan, depth first in wire order (compiled on first use, kept per plan)."""
    return _compiled_error_walk(plan, chained=True)


def error_code_walk(plan: StructPlan) -> ErrorCodeWalk:
    """`walk(values, codes)` appends each non-zero error code of a body of this plan to `codes`,
    in `error_walk`'s order (the same walk without the chains: what counting errors needs)."""
    return _compiled_error_walk(plan, chained=False)


def _compiled_error_walk(plan: StructPlan, *, chained: bool) -> Callable[..., None]:
    cached = _ERROR_WALKS.get((id(plan), chained))
    if cached is not None and cached[0] is plan:
        return cached[1]
    memo: dict[int, bool] = {}
    source = _Source()
    if not _holds(plan, is_error_code, memo):
        walk: Callable[..., None] = _no_errors
    else:
        entry = source.function("errors", plan)
        while source.pending:
            _error_function(source, source.pending.pop(), memo, chained=chained)
        source.emit(0, "def walk(values, found):")
        source.emit(1, f"{entry}(values, None, None, None, found)" if chained else f"{entry}(values, found)")
        walk = source.compile("walk", {})
    _ERROR_WALKS[id(plan), chained] = (plan, walk)
    return walk


def _no_errors(values: Values, found: object) -> None:
    """The walk of a body whose definition has no error code."""


def _error_function(source: _Source, plan: StructPlan, memo: dict[int, bool], *, chained: bool) -> None:
    """With `chained`, `found(field, code, chain)` is called; without, `found` is the list of codes."""
    if chained:
        source.emit(0, f"def {source.names[id(plan)]}(s, name, index, outer, found):")
        source.emit(1, "here = (s, name, index, outer)")
    else:
        source.emit(0, f"def {source.names[id(plan)]}(s, found):")
    for field in value_fields(plan):
        inner = inner_struct(field)
        if is_error_code(field):
            source.emit(1, f"c = s.get({field.name!r})")
            report = f"found({field.name!r}, c, here)" if chained else "found.append(c)"
            source.emit(1, f"if c and type(c) is int: {report}")
        elif inner is not None and _holds(inner, is_error_code, memo):
            callee = source.function("errors", inner)
            source.emit(1, f"v = s.get({field.name!r})")
            if field.kind is Kind.ARRAY:
                source.emit(1, "if v:")
                source.emit(2, "for i, e in enumerate(v):" if chained else "for e in v:")
                call = f"{callee}(e, {field.name!r}, i, here, found)" if chained else f"{callee}(e, found)"
                source.emit(3, f"if type(e) is dict: {call}")
            else:
                call = f"{callee}(v, {field.name!r}, None, here, found)" if chained else f"{callee}(v, found)"
                source.emit(1, f"if type(v) is dict: {call}")
    source.emit(1, "return None")


_NESTED = (Kind.ARRAY, Kind.STRUCT)


# -- scoped values ---------------------------------------------------------------------------


_SCOPE_WALKS: dict[tuple[int, tuple[str, ...], frozenset[str]], tuple[StructPlan, ScopeWalk | None]] = {}


def scope_walk(plan: StructPlan, names: tuple[str, ...], wanted: frozenset[str]) -> ScopeWalk | None:
    """`walk(values)`: for the body and each non-empty struct in it, depth first in wire order,
    the values of `names` as that struct sees them (its own non-null scalar, else the nearest
    enclosing struct's, else None); only structs that see at least one name of `wanted` are listed,
    and the structs inside one are not when none of them holds any of `names` at any depth
    (each would only repeat its row).
    None when no struct of the plan has a field of `wanted`: no body of it lists anything.
    """
    key = (id(plan), names, wanted)
    cached = _SCOPE_WALKS.get(key)
    if cached is not None and cached[0] is plan:
        return cached[1]
    memo: dict[int, bool] = {}

    def holds_wanted(field: FieldPlan) -> bool:
        return field.name in wanted and inner_struct(field) is None and field.kind is not Kind.ARRAY

    walk: ScopeWalk | None = None
    memo_names: dict[int, bool] = {}
    if _holds(plan, holds_wanted, memo):
        source = _Source()
        entry = source.function("scope", plan)
        while source.pending:
            _scope_function(source, source.pending.pop(), names, wanted, holds_wanted, memo, memo_names)
        resolved = ", ".join(["None"] * len(names))
        source.emit(0, "def walk(values):")
        source.emit(1, "rows = []")
        source.emit(1, f"{entry}(values, rows, {resolved})")
        source.emit(1, "return rows")
        walk = source.compile("walk", {})
    _SCOPE_WALKS[key] = (plan, walk)
    return walk


def _scope_function(source: _Source, plan: StructPlan, names: tuple[str, ...], wanted: frozenset[str],
                    holds_wanted: Callable[[FieldPlan], bool], memo: dict[int, bool],
                    memo_names: dict[int, bool]) -> None:
    slots = [f"r{index}" for index in range(len(names))]
    source.emit(0, f"def {source.names[id(plan)]}(s, rows, {', '.join(slots)}):")
    scalars = {f.name for f in value_fields(plan) if f.kind not in (Kind.ARRAY, Kind.STRUCT)}
    for slot, name in zip(slots, names, strict=True):
        if name in scalars:
            source.emit(1, f"v = s.get({name!r})")
            source.emit(1, f"if v is not None: {slot} = v")
    live = " or ".join(f"{slot} is not None" for slot, name in zip(slots, names, strict=True) if name in wanted)
    source.emit(1, f"live = {live or 'False'}")
    source.emit(1, f"if live: rows.append(({', '.join(slots)},))")
    inners = [(field, inner) for field in value_fields(plan) if (inner := inner_struct(field)) is not None]
    if not any(_holds(inner, lambda f: f.name in names and f.kind not in _NESTED, memo_names) for _, inner in inners):
        inners = []  # each struct inside would only repeat this one's row
    for field, inner in inners:
        callee = source.function("scope", inner)
        condition = "v" if _holds(inner, holds_wanted, memo) else "live and v"
        source.emit(1, f"v = s.get({field.name!r})")
        if field.kind is Kind.ARRAY:
            source.emit(1, f"if {condition}:")
            source.emit(2, "for e in v:")
            source.emit(3, f"if e and type(e) is dict: {callee}(e, rows, {', '.join(slots)})")
        else:
            source.emit(1, f"if {condition} and type(v) is dict: {callee}(v, rows, {', '.join(slots)})")
    source.emit(1, "return None")


# -- values at a path ------------------------------------------------------------------------


_PATH_WALKS: dict[tuple[int, tuple[tuple[str, ...], ...]], tuple[StructPlan, PathWalk]] = {}


def path_walk(plan: StructPlan, path: tuple[str, ...]) -> PathWalk:
    """`walk(values)`: every value at `path` (field names from the body), in wire order; arrays
    along the way and at the end are flattened, nulls left out."""
    return first_path_walk(plan, (path,))


def first_path_walk(plan: StructPlan, paths: tuple[tuple[str, ...], ...]) -> PathWalk:
    """`walk(values)`: what `path_walk` finds at the first of `paths` where it finds anything
    (the empty path is the body itself), in one function; paths the plan has not are left out."""
    key = (id(plan), paths)
    cached = _PATH_WALKS.get(key)
    if cached is not None and cached[0] is plan:
        return cached[1]
    source = _Source()
    source.emit(0, "def walk(values):")
    source.emit(1, "out = []")
    first = True
    for path in paths:
        if path and not path_exists(plan, path):
            continue
        indent = 1 if first else 2
        if not first:
            source.emit(1, "if not out:")
        if path:
            _path_steps(source, plan, path, "values", indent)
        source.emit(indent, "out.append(values)" if not path else "pass")
        first = False
    source.emit(1, "return out")
    walk: PathWalk = source.compile("walk", {})
    _PATH_WALKS[key] = (plan, walk)
    return walk


def path_exists(plan: StructPlan, path: tuple[str, ...]) -> bool:
    """Whether each step of a field-name path names a field of the struct it reaches."""
    struct: StructPlan | None = plan
    for step in path:
        field = None if struct is None else next((f for f in value_fields(struct) if f.name == step), None)
        if field is None:
            return False
        struct = inner_struct(field)
    return True


def _path_steps(source: _Source, plan: StructPlan, path: tuple[str, ...], item: str, indent: int) -> None:
    field = next((f for f in value_fields(plan) if f.name == path[0]), None)
    if field is None:
        return
    value = f"x{indent}"
    source.emit(indent, f"{value} = {item}.get({path[0]!r})")
    last = len(path) == 1
    if field.kind is Kind.ARRAY:
        source.emit(indent, f"if {value} is not None:")
        if last:
            source.emit(indent + 1, f"out.extend({value})")
            return
        inner = inner_struct(field)
        if inner is None:
            source.emit(indent + 1, "pass")
            return
        element = f"e{indent}"
        source.emit(indent + 1, f"for {element} in {value}:")
        source.emit(indent + 2, f"if type({element}) is dict:")
        _path_steps(source, inner, path[1:], element, indent + 3)
        source.emit(indent + 3, "pass")
        return
    if last:
        source.emit(indent, f"if {value} is not None: out.append({value})")
        return
    if field.kind is Kind.STRUCT and field.struct is not None:
        source.emit(indent, f"if type({value}) is dict:")
        _path_steps(source, field.struct, path[1:], value, indent + 1)
        source.emit(indent + 1, "pass")


__all__ = ["Chain", "ErrorCodeWalk", "ErrorFound", "ErrorWalk", "PathWalk", "ScopeWalk", "chain_path", "chain_structs",
           "error_code_walk", "error_walk", "first_path_walk", "inner_struct", "is_error_code",
           "path_exists", "path_walk", "scope_walk"]
