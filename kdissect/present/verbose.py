"""`-V` text written straight from a body's flat values, by writers generated from its plan.

`render_rows` lays a body out as Row tuples and then formats them: most of
`-V`'s time went into building tuples only to take them apart again. Here each
struct plan compiles, on first use, into Python source that appends the lines
of that struct to a list, as `kdissect.decode.generated` compiles decoders:

- the name, type and description of every field are baked into its f-string
  (descriptions already cut to the limit and escaped);
- offsets follow as the fields tile the struct (one running position), sizes
  from the values, as `rows` works them out;
- the tree's prefixes are passed in; a line whose size is known only after its
  children (an array, a struct) is a slot filled in when they are written;
- nested structs are inlined, arrays of integers are one comprehension; these, and
  arrays of fixed-size structs of integers, are written by C where it is built
  (`verbose_records.native_fixed_elements`, from a template of the Python's text);
- integer displays follow the API's rules and the schema's meanings, and
  generated values (`Dissector.response_generated_values`) are inserted after
  their field, as in `rows`; `records` fields are written by
  `kdissect.present.verbose_records`.

The text is exactly `render_rows`'s and so the interpreter's (a test compares
them on every message of every capture). The rare parts are written from their
rows: a tagged-field block that is not empty, legacy message sets in a
`records` field. Whatever the writers do not handle is refused (`Refused`): a
name, type or display that would need escaping, a plan with a field kind they
do not know. The caller then writes the message the old way, so output never
depends on which path ran.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kdissect.apis import APIS, request_header_version, response_header_version
from kdissect.decode.dissect import FRAME_ABOUT, HEADER_ABOUT, HEADER_NAME, SIZE_ABOUT, message_name
from kdissect.decode.generated import StructDecoder, struct_decoder
from kdissect.decode.interpreter import (
    NULLABLE_STRUCT_ABOUT,
    count_display,
    elements_follow,
    hex_display,
)
from kdissect.decode.rows import uvarint_size
from kdissect.decode.schema import on_sources_change
from kdissect.decode.schema.plan import FieldPlan, Kind, StructPlan, header_plan, message_plan
from kdissect.decode.tree import printable
from kdissect.dissectors import SCHEMA_DISPLAYS, Display, GeneratedValue
from kdissect.dissectors.registry import dissector
from kdissect.present.lines import about_tail, node_text
from kdissect.present.verbose_records import (
    Hexes,
    Refused,
    hexes,
    native_fixed_elements,
    records_lines,
    tagged_lines,
)

if TYPE_CHECKING:
    from kdissect.pair.message import Message

Values = dict[str, Any]
Generated = dict[int, list[GeneratedValue]]
# (lines, values, position, child prefix, frame, generated values, offsets' text) -> the position after
# the struct
StructWriter = Callable[[list[str], Values, int, str, bytes, Generated, Hexes], int]
_NO_DISPLAYS: dict[str, Display] = {}
_NO_GENERATED: Generated = {}
_SCALARS = (Kind.INTEGER, Kind.FLOAT, Kind.BOOL, Kind.UUID)  # one line each, of a fixed size
_STRINGS = (Kind.STRING, Kind.BYTES)
# A struct whose version defines tags may carry their values after its fields (the tagged
# block is written from the frame): its fields are the first of its values.
_REST = "*_, "
# Python allows 20 statically nested blocks; deeper structs get a function of their own.
_MAX_INLINE_INDENT = 12


def message_text(message: Message) -> str | None:
    """`-V`'s tree of a message whose body took the fast path; None for any other message
    (or one the writers refuse), which the caller writes from rows or the tree."""
    lines: list[str] = []
    return "\n".join(lines) if message_lines(message, lines) else None


def message_lines(message: Message, lines: list[str]) -> bool:
    """`message_text` as pieces appended to `lines` (the text is the pieces joined by
    newlines): for a writer that joins them with its own, one copy of the text fewer.
    False, with `lines` as it was, where `message_text` says None."""
    key, version = message.api_key, message.api_version
    if key is None or version is None:
        return False
    layout = _layouts.get((key, version, message.kind))  # `_layout_of`, its lookup inline
    if layout is None:
        layout = _layout_of(key, version, message.kind)
        if layout is None:  # no plan for this message
            return False
    values = message.fast_values(keep=False)
    if values is None:
        return False
    mark = len(lines)  # `_lines`, inline: one call fewer for every message
    try:
        _message_lines(message.frame.data, version, values, layout, lines)
    except Refused:
        del lines[mark:]
        return False
    return True


def frame_text(data: bytes, kind: str, api_key: int, version: int, body: Values) -> str | None:
    """The text `render_rows(message_rows(data, kind, api_key, version, body))` gives, for a
    frame whose body's flat values `body` came from the fast path; None when refused."""
    layout = _layout_of(api_key, version, kind)
    return None if layout is None else _text(data, version, body, layout)


def _layout_of(api_key: int, version: int, kind: str) -> _Layout | None:
    found = _layouts.get((api_key, version, kind), _UNSET)
    if found is _UNSET:
        found = _layouts[(api_key, version, kind)] = _layout(api_key, version, kind)
    return found  # type: ignore[return-value]


def _text(data: bytes, version: int, body: Values, layout: _Layout) -> str | None:
    lines: list[str] = []
    return "\n".join(lines) if _lines(data, version, body, layout, lines) else None


def _lines(data: bytes, version: int, body: Values, layout: _Layout, lines: list[str]) -> bool:
    """The message's pieces appended to `lines`; False, and `lines` as it was, when refused."""
    mark = len(lines)
    try:
        _message_lines(data, version, body, layout, lines)
    except Refused:
        del lines[mark:]
        return False
    return True


_UNSET = object()


@dataclass(slots=True)
class _Layout:
    """What every message of one (API, version, direction) shares; the writer of its body,
    for bodies without generated values (most), is kept here once made."""

    title: str  # the message's name, "message" and its version
    header_decoder: StructDecoder
    head: HeadWriter  # the message's lines up to its body's
    body_title: str  # the body's name and type
    body_about: str
    body: StructPlan
    displays: Mapping[str, Display]
    generated_values: Callable[[Values], Generated] | None
    body_writer: StructWriter | None = None


_layouts: dict[tuple[int, int, str], _Layout | None] = {}
on_sources_change(_layouts.clear)  # other definitions, other plans


def _layout(key: int, version: int, kind: str) -> _Layout | None:
    plan = message_plan(key, version, kind)
    if plan is None:
        return None
    header_version = (request_header_version if kind == "request" else response_header_version)(key, version)
    header = header_plan(kind, header_version).body
    decoder = struct_decoder(header)
    if decoder is None:
        return None
    meaning = dissector(key) if kind == "response" else None
    return _Layout(f"{message_name(key, kind)} message v{version}", decoder,
                   _head_writer(header, kind, f"{HEADER_NAME[kind]} v{header_version}"),
                   f"{plan.name} struct", about_tail(f"message body, version {version}"), plan.body,
                   _NO_DISPLAYS if meaning is None else meaning.response_displays,
                   None if meaning is None else meaning.response_generated_values)


_FRAME = "+-- " + node_text("Frame", "frame", "", 0, 4, FRAME_ABOUT, False, False)
_SIZE_TAIL = about_tail(SIZE_ABOUT)


def _message_lines(data: bytes, version: int, values: Values, layout: _Layout, lines: list[str]) -> None:
    size = len(data)
    header_values, header_end = layout.header_decoder(data, 4, size)
    H = hexes(size)
    layout.head(lines, header_values, header_end, size, data, H, layout.title, layout.body_title, layout.body_about)
    generated = _NO_GENERATED if layout.generated_values is None else layout.generated_values(values)
    writer = layout.body_writer
    if generated:
        writer = _writer(layout.body, layout.displays, True)
    elif writer is None:
        writer = layout.body_writer = _writer(layout.body, layout.displays, False)
    writer(lines, values, header_end, "    ", data, generated, H)


def _api_key_display(value: int) -> str:
    api = APIS.get(value)
    return f"{value} ({api.name if api else 'unknown API'})"


# The request header names its API by number and name (as `rows` shows it).
_HEADER_DISPLAYS: dict[str, Mapping[str, Display]] = {
    "request": {"request_api_key": _api_key_display}, "response": _NO_DISPLAYS}
_WRITERS: dict[tuple[int, int, bool], tuple[StructPlan, Mapping[str, Display], StructWriter]] = {}
# (lines, header's values, header's end, frame's size, frame, offsets' text, title, body's title
# and tail) -> None
HeadWriter = Callable[[list[str], Values, int, int, bytes, Hexes, str, str, str], None]
_HEADS: dict[tuple[int, str], tuple[StructPlan, HeadWriter]] = {}


def _head_writer(header: StructPlan, kind: str, title: str) -> HeadWriter:
    """The writer of a message's lines before its body's: its own, the frame's, the size's, the
    header's (`title`) and its fields', the body's; one string for them all (to the header's
    tagged fields), where they were four. Compiled on first use, one for each header."""
    key = (id(header), kind)
    found = _HEADS.get(key)
    if found is not None and found[0] is header:
        return found[1]
    out = _Source()
    out.emit(0, "def head(L, v, end, size, data, H, title, body, body_about):")
    out.emit(1, "a = L.append")
    out.emit(1, "p = 4")
    generator = _Generator(out, _HEADER_DISPLAYS[kind], False)
    generator.line(1, "{title} [0x0000, {size}B]")
    generator.line(1, _literal(_FRAME))
    generator.line(1, f"|   +-- size int32 = {{size - 4}} [0x0000, 4B]{_literal(_SIZE_TAIL)}")
    generator.line(1, f"+-- {_literal(title)} [0x0004, {{end - 4}}B]{_literal(about_tail(HEADER_ABOUT[kind]))}")
    try:
        generator.struct(header, "v", "'|   '", 1)
        generator.line(1, "+-- {body} [{H[end]}, {size - end}B]{body_about}")
        generator.flush()
        writer: HeadWriter = out.compile("head", title)
    except _Unsupported:
        writer = _refusing
    _HEADS[key] = (header, writer)
    return writer


def _writer(plan: StructPlan, displays: Mapping[str, Display], generated: bool) -> StructWriter:
    """The writer of `plan`'s fields under these display rules, compiled on first use.

    `generated` says whether the body may have generated values to insert (a
    writer without their checks is a little faster: most APIs have none).
    """
    key = (id(plan), id(displays), generated)
    found = _WRITERS.get(key)
    if found is not None and found[0] is plan and found[1] is displays:
        return found[2]
    out = _Source()
    out.emit(0, "def write(L, v, p, c, data, gen, H):")
    out.emit(1, "a = L.append")
    try:
        _Generator(out, displays, generated).struct(plan, "v", "c", 1)
        out.emit(1, "return p")
        writer: StructWriter = out.compile("write", plan.name)
    except _Unsupported:
        writer = _refusing
    _WRITERS[key] = (plan, displays, writer)
    return writer


def _refusing(*_: Any) -> Any:
    """The writer of a plan the writers do not handle (a struct's or a header's)."""
    raise Refused("a plan the writers do not handle")


class _Shown(dict[int, str]):
    """An integer display rule's text of each value (the plain number where it says nothing),
    remembered: rules are functions of the value, and values repeat. A text that would need
    escaping is refused (the rows write it, escaped)."""

    def __init__(self, rule: Display) -> None:
        super().__init__()
        self.rule = rule

    def __missing__(self, value: int) -> str:
        shown = self.rule(value)
        text = str(value) if shown is None else shown
        if not text or not text.isprintable():
            raise Refused("a display that needs escaping")
        if len(self) >= 4096:
            self.clear()
        self[value] = text
        return text


_SHOWN: dict[int, tuple[Display, _Shown]] = {}


def _shown(rule: Display) -> _Shown:
    found = _SHOWN.get(id(rule))
    if found is None or found[0] is not rule:
        found = _SHOWN[id(rule)] = (rule, _Shown(rule))
    return found[1]


class _Unsupported(Exception):
    """A plan holds something the generator does not write: every message of it is refused."""


def generated_lines(append: Callable[[str], None], extra: list[GeneratedValue], after: str, at: int,
                    branch: str) -> None:
    """The generated values that follow the field `after`, as `rows` inserts them: each right
    after the field, so that later ones come first."""
    for item in reversed(extra):
        if item.after == after:
            append(branch + node_text(item.name, item.type, str(item.value), at, 0, item.about, True, False))


def generated_text(extra: list[GeneratedValue], after: str, at: int, branch: str) -> str:
    """`generated_lines` as text to follow a line in the same string ("" for none)."""
    lines: list[str] = []
    generated_lines(lines.append, extra, after, at, branch)
    return "".join("\n" + line for line in lines)


def follow_tail(count: int | None) -> str:
    """The description of an array's length, as a line's tail."""
    return " " + elements_follow(count)


_FOLLOWS = [follow_tail(count) for count in range(256)]  # of the common lengths, made once
_COUNTS = [count_display(count) for count in range(256)]


class _Source:
    """Python source of one writer, line by line; local names unique within it."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.counter = 0
        self.constants: dict[str, Any] = {
            "printable": printable, "hex_display": hex_display,
            "uvarint_size": uvarint_size, "follow_tail": follow_tail, "count_display": count_display,
            "node_text": node_text, "generated_lines": generated_lines, "generated_text": generated_text,
            "records_lines": records_lines, "tagged_lines": tagged_lines,
            "TRUTH": ("false", "true"), "FIXED": native_fixed_elements,
            "FOLLOWS": _FOLLOWS, "COUNTS": _COUNTS,
        }

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"

    def constant(self, value: Any, stem: str = "k") -> str:
        name = self.fresh(stem)
        self.constants[name] = value
        return name

    def compile(self, name: str, what: str) -> Any:
        namespace = dict(self.constants)
        source = "\n".join(self.lines)
        exec(compile(source, f"<kdissect -V writer {what}>", "exec"), namespace)
        function = namespace[name]
        function.__doc__ = source  # what was generated, for whoever debugs it
        return function


def _fixed_size(plan: StructPlan) -> int | None:
    """The size of a struct whose fields all have a fixed size (its tagged fields apart); None
    for any other."""
    size = 0
    for field in plan.fields:
        if field.kind is Kind.INTEGER:
            size += field.codec.size
        elif field.kind in _FIXED_SIZES:
            size += _FIXED_SIZES[field.kind]
        else:
            return None
    return size


_FIXED_SIZES = {Kind.FLOAT: 8, Kind.BOOL: 1, Kind.UUID: 16}


# What `_verbose_records_c.fixed_elements` writes for a template's int (besides an offset
# H[p + k], k itself): the element's index, its branch, its fields' branch, a field's value
# (_FIELD_VALUE - j for the j-th).
_ELEMENT_INDEX, _ELEMENT_BRANCH, _FIELD_BRANCH, _FIELD_VALUE = -1, -2, -3, -4
# The parts of an f-string's inside: a doubled brace, an escaped character, an expression, a
# run of other characters.
_PART = re.compile(r"(\{\{|\}\})|\\(.)|\{([^{}]*)\}|([^{}\\]+)")
_OFFSET = re.compile(r"H\[p(?: \+ (\d+))?\]")  # H[p] or H[p + k]
_ESCAPED = {"n": "\n", "\\": "\\", '"': '"'}


def _fixed_template(inside: str, branch: str, field_branch: str, index: str, items: list[str]) -> tuple[str | int, ...]:
    """The text of one element of `fixed_elements`'s loop, from the inside of its f-string, as
    `_verbose_records_c.fixed_elements` writes it: str where it is literal, ints for the
    element's index, the branches, the fields' values (the names given) and the offsets."""
    names = {branch: _ELEMENT_BRANCH, field_branch: _FIELD_BRANCH, index: _ELEMENT_INDEX}
    names.update((item, _FIELD_VALUE - place) for place, item in enumerate(items))
    parts: list[str | int] = []
    at = 0
    for part in _PART.finditer(inside):
        if part.start() != at:  # every character is in a part
            raise _Unsupported(f"a template of {inside!r}")
        at = part.end()
        braces, escaped, expression, literal = part.groups()
        if expression is None:
            text = braces[0] if braces else _ESCAPED[escaped] if escaped else literal
            if parts and isinstance(parts[-1], str):
                parts[-1] += text
            else:
                parts.append(text)
        elif expression in names:
            parts.append(names[expression])
        elif (offset := _OFFSET.fullmatch(expression)) is not None:
            parts.append(int(offset[1] or 0))
        else:
            raise _Unsupported(f"a template with {expression!r}")
    if at != len(inside):
        raise _Unsupported(f"a template of {inside!r}")
    return tuple(parts)


def _literal(text: str) -> str:
    """`text` as the literal part of a double-quoted f-string (it must print as it is)."""
    if not text.isprintable():
        raise _Unsupported(f"{text!r} would need escaping")
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("{", "{{").replace("}", "}}")


def _fline(head: str, display: str, at: str, size: str, tail: str) -> str:
    """One line as the inside of an f-string: `head` and `display` are f-string parts
    (display "" for none), `at` an expression, `size` an f-string part, `tail` text."""
    shown = f" = {display}" if display else ""
    return f"{head}{shown} [{{H[{at}]}}, {size}B]{_literal(tail)}"


class _Generator:
    """Emits straight-line code writing a struct plan's lines.

    Lines waiting to be written (`pending`) are joined into one f-string, one
    `append` for a run of fields: the text is the same once the lines are joined.
    The position is `base + delta`: `delta` grows at compile time over fixed-size
    fields, `base` is a fresh local after a field of variable size, and `p` wherever
    control flow joins (branches, loops), which writes the pending lines first.
    """

    def __init__(self, out: _Source, displays: Mapping[str, Display], generated: bool) -> None:
        self.out = out
        self.displays = displays
        self.generated = generated
        self.base, self.delta = "p", 0
        self.pending: list[str] = []
        self.pending_indent = 0

    def at(self) -> str:
        return f"{self.base} + {self.delta}" if self.delta else self.base

    def line(self, indent: int, text: str) -> None:
        """A line to write, as the inside of an f-string."""
        if self.pending and self.pending_indent != indent:
            self.flush()
        self.pending.append(text)
        self.pending_indent = indent

    def flush(self) -> None:
        if self.pending:
            self.out.emit(self.pending_indent, 'a(f"' + "\\n".join(self.pending) + '")')
            self.pending = []

    def emit(self, indent: int, text: str) -> None:
        """A statement that appends lines or moves `p`: the pending lines go first."""
        self.flush()
        self.out.emit(indent, text)

    def pure(self, indent: int, text: str) -> None:
        """A statement that neither appends nor moves `p` (nor rebinds a name a pending line reads)."""
        if self.pending and self.pending_indent != indent:
            self.flush()
        self.out.emit(indent, text)

    def settle(self, indent: int) -> None:
        """Bring the position into `p`, before control flow."""
        if self.base != "p" or self.delta:
            self.emit(indent, f"p = {self.at()}")
            self.base, self.delta = "p", 0

    def advance(self, indent: int, size: str) -> None:
        """Move the position by a size known only at run time (an expression)."""
        base = self.out.fresh("q")
        self.pure(indent, f"{base} = {self.at()} + {size}")
        self.base, self.delta = base, 0

    def struct(self, plan: StructPlan, values: str, prefix: str, indent: int) -> None:
        """Emit the lines of `plan`'s fields (values in `values`, tree prefix in `prefix`)."""
        out = self.out
        branch = out.fresh("b")
        self.pure(indent, f"{branch} = {prefix} + '+-- '")
        nested = [f for f in plan.fields if f.kind in (Kind.ARRAY, Kind.STRUCT, Kind.RECORDS)]
        continued = ""  # the prefix below a field with children, or with generated values after it
        if nested or self.generated:
            continued = out.fresh("cm")
            self.pure(indent, f"{continued} = {prefix} + '|   '")
        ended = ""
        if plan.flexible and not self.generated:  # only an uncommon tagged-field block needs it
            ended = f"{prefix} + '    '"
        elif nested or plan.flexible:
            ended = out.fresh("ce")
            self.pure(indent, f"{ended} = {prefix} + '    '")
        items = [out.fresh("x") for _ in plan.fields]
        if items:
            self.pure(indent, f"{', '.join(items)}, {_REST if plan.tagged else ''}= {values}.values()")
        extra = after = ""
        if self.generated:
            extra, after = out.fresh("extra"), out.fresh("after")
            self.pure(indent, f"{extra} = gen.get(id({values})) if gen else None")
            self.pure(indent, f"{after} = {{item.after for item in {extra}}} if {extra} else ()")
        for index, (field, item) in enumerate(zip(plan.fields, items, strict=True)):
            below = continued
            if index == len(plan.fields) - 1 and not plan.flexible and field in nested:
                below = self.last_prefix(field.name, after, continued, ended, indent)
            scalar = field.kind in _SCALARS or (field.kind in _STRINGS and not field.nullable)
            start = self.at()
            if extra and not scalar:
                self.settle(indent)
                start = out.fresh("q")
                self.pure(indent, f"{start} = p")
            self.field(field, _literal(field.name), item, field.about, branch, below, indent, named=True)
            if extra and scalar:  # one line, pending: its generated lines follow in the same string
                self.pending[-1] += (f"{{generated_text({extra}, {field.name!r}, {start}, {branch}) "
                                     f"if {field.name!r} in {after} else ''}}")
            elif extra:
                self.settle(indent)
                self.emit(indent, f"if {field.name!r} in {after}: generated_lines(a, {extra}, {field.name!r}, {start}, "
                                  f"{branch})")
        if plan.flexible:
            self.tagged_fields(plan, branch, self.last_prefix("tagged_fields", after, continued, ended, indent),
                               indent)
            if extra:
                self.settle(indent)
                self.emit(indent, f"if {extra}: generated_lines(a, {extra}, 'tagged_fields', q, {branch})")
        self.settle(indent)

    def last_prefix(self, name: str, after: str, continued: str, ended: str, indent: int) -> str:
        """The prefix below the last field: continued when generated values follow it."""
        if not after:
            return ended
        below = self.out.fresh("cl")
        self.pure(indent, f"{below} = {continued} if {name!r} in {after} else {ended}")
        return below

    def tagged_fields(self, plan: StructPlan, branch: str, below: str, indent: int) -> None:
        """The struct's tagged-field block: most are empty (one byte, 0), the rest laid out as rows."""
        self.settle(indent)
        tail = about_tail(plan.tagged_about)
        block = self.out.constant((plan, self.displays), "tagged")
        start = "q = p; " if self.generated else ""  # where generated values after the block go
        self.emit(indent, f"if data[p]: {start}p = tagged_lines(L, data, p, {branch}, {below}, *{block})")
        self.pure(indent, "else:")
        self.line(indent + 1, _fline(f"{{{branch}}}tagged_fields uvarint", "0", "p", "1", tail))
        self.emit(indent + 1, f"{start}p += 1")

    def field(self, f: FieldPlan, name: str, value: str, about: str, branch: str, below: str, indent: int,
              *, named: bool = False) -> None:
        """Emit the lines of one field: `name` is an f-string part (it may hold `{i}`), `below`
        the name of the prefix of its children."""
        head = f"{{{branch}}}{name} {_literal(f.label)}"
        tail = about_tail(about)
        kind = f.kind
        if kind is Kind.INTEGER:
            self.integer(f, head, value, tail, indent, named)
        elif kind in (Kind.FLOAT, Kind.BOOL, Kind.UUID):
            size, shown = {Kind.FLOAT: (8, f"{{{value}!r}}"), Kind.BOOL: (1, f"{{TRUTH[{value}]}}"),
                           Kind.UUID: (16, f"{{{value}}}")}[kind]
            self.line(indent, _fline(head, shown, self.at(), str(size), tail))
            self.delta += size
        elif (kind is Kind.STRING or kind is Kind.BYTES) and not f.nullable:
            self.length_prefixed(f, head, value, tail, indent)
        elif kind is Kind.STRING or kind is Kind.BYTES:
            self.settle(indent)
            self.nullable(f, head, value, tail, indent)
        elif kind is Kind.ARRAY:
            self.settle(indent)
            self.array(f, head, value, tail, below, indent)
        elif kind is Kind.STRUCT:
            self.settle(indent)
            self.nested(f, head, value, tail, below, indent)
        elif kind is Kind.RECORDS:
            if not named or name != _literal(f.name) or not f.label.isprintable():
                raise _Unsupported(f"{f.name}: records not in a named field")
            self.settle(indent)
            text = self.out.constant((f.name, f.label, about), "field")
            self.emit(indent, f"p = records_lines(L, data, {value}, p, {branch}, {below}, *{text}, {f.compact}, H)")
        else:
            raise _Unsupported(f"{f.name}: kind {kind!r}")

    def rule(self, f: FieldPlan) -> Display | None:
        """The display rule of a named integer field: the API's, else what the schema says it is."""
        rule = self.displays.get(f.name) if self.displays else None
        return SCHEMA_DISPLAYS[f.meaning] if rule is None and f.meaning is not None else rule

    def integer(self, f: FieldPlan, head: str, value: str, tail: str, indent: int, named: bool) -> None:
        rule = self.rule(f) if named else None
        shown = value
        if rule is not None:  # its text, or the plain number, remembered by value
            shown = f"{self.out.constant(_shown(rule), 'shown')}[{value}]"
        self.line(indent, _fline(head, f"{{{shown}}}", self.at(), str(f.codec.size), tail))
        self.delta += f.codec.size

    def length_prefixed(self, f: FieldPlan, head: str, value: str, tail: str, indent: int) -> None:
        """A string or bytes field that is not null: its display, then its length prefix's form."""
        out = self.out
        n = out.fresh("n")
        if f.kind is Kind.STRING:
            # its size in UTF-8, in line (a call per string cost more than the test)
            self.pure(indent, f"{n} = len({value}) if {value}.isascii() else len({value}.encode())")
            shown = f'\\"{{{value} if {value}.isprintable() else printable({value})}}\\"'
            width = 2
        else:
            self.pure(indent, f"{n} = len({value})")
            shown = f"{{hex_display({value})}}"
            width = 4
        if f.compact:
            s = out.fresh("s")
            self.pure(indent, f"{s} = 1 if {n} < 127 else uvarint_size({n} + 1)")
            shown += f" (compact, len+1={{{n} + 1}})"
            self.line(indent, _fline(head, shown, self.at(), f"{{{s} + {n}}}", tail))
            self.advance(indent, f"{s} + {n}")
        else:
            shown += f" (int{width * 8} len={{{n}}})"
            self.line(indent, _fline(head, shown, self.at(), f"{{{width} + {n}}}", tail))
            self.advance(indent, f"{width} + {n}")

    def nullable(self, f: FieldPlan, head: str, value: str, tail: str, indent: int) -> None:
        """A nullable string or bytes field (the position is settled)."""
        width = 2 if f.kind is Kind.STRING else 4
        null = "null (compact, len+1=0)" if f.compact else f"null (int{width * 8} len=-1)"
        size = 1 if f.compact else width
        self.emit(indent, f"if {value} is None:")
        self.line(indent + 1, _fline(head, null, "p", str(size), tail))
        self.emit(indent + 1, f"p += {size}")
        self.emit(indent, "else:")
        self.length_prefixed(f, head, value, tail, indent + 1)
        self.settle(indent + 1)

    def array(self, f: FieldPlan, head: str, value: str, tail: str, below: str, indent: int) -> None:
        out, element = self.out, f.element
        assert element is not None
        width = 1 if f.compact else 4
        length_head = f"{{{below}}}+-- length {'uvarint' if f.compact else 'int32'}"
        if f.nullable:
            self.emit(indent, f"if {value} is None:")
            self.line(indent + 1, _fline(head, "null", "p", str(width), tail))
            wire = "0 (compact, n+1)" if f.compact else "-1"
            self.line(indent + 1, _fline(length_head, wire, "p", str(width), " null array"))
            self.emit(indent + 1, f"p += {width}")
            self.emit(indent, "else:")
            indent += 1
        n, slot, start = out.fresh("n"), out.fresh("j"), out.fresh("s")
        self.emit(indent, f"{n} = len({value})")
        self.emit(indent, f"{slot} = len(L)")
        self.emit(indent, "a(None)")
        self.emit(indent, f"{start} = p")
        if f.compact:
            self.pure(indent, f"s = 1 if {n} < 127 else uvarint_size({n} + 1)")
            line = _fline(length_head, f"{{{n} + 1}} (compact, n+1)", "p", "{s}", "")
            self.emit(indent, f'a(f"{line}{{FOLLOWS[{n}] if {n} < 256 else follow_tail({n})}}")')
            self.emit(indent, "p += s")
        else:
            line = _fline(length_head, f"{{{n}}}", "p", "4", "")
            self.emit(indent, f'a(f"{line}{{FOLLOWS[{n}] if {n} < 256 else follow_tail({n})}}")')
            self.emit(indent, "p += 4")
        self.elements(element, value, n, below, indent)
        line = _fline(head, f"{{COUNTS[{n}] if {n} < 256 else count_display({n})}}", start, f"{{p - {start}}}", tail)
        self.emit(indent, f'L[{slot}] = f"{line}"')

    def elements(self, element: FieldPlan, value: str, count: str, prefix: str, indent: int) -> None:
        out = self.out
        # Nothing to write, and no prefix to make, for an array with no elements (a third of
        # them, such as ProduceResponse's RecordErrors).
        self.emit(indent, f"if {count}:")
        indent += 1
        branch = out.fresh("eb")
        self.pure(indent, f"{branch} = {prefix} + '+-- '")
        label = _literal(element.label)
        i, item = out.fresh("i"), out.fresh("y")
        if element.kind is Kind.INTEGER:  # arrays of ids and offsets: by C, else one comprehension
            size, head = element.codec.size, f"{{{branch}}}{label}[{{{i}}}] {label}"
            template, text = out.fresh("template"), out.fresh("t")
            out.constants[template] = _fixed_template(_fline(head, f"{{{item}}}", "p", str(size), ""), branch, "",
                                                      i, [item])
            self.emit(indent, f"if FIXED is None or ({text} := FIXED({value}, data, p, {size}, False, {branch}, '', '', "
                              f"{template})) is None:")
            line = _fline(head, f"{{{item}}}", f"p + {size} * {i}", str(size), "")
            self.emit(indent + 1, f'L.extend([f"{line}" for {i}, {item} in enumerate({value})])')
            self.emit(indent, "else:")
            self.emit(indent + 1, f"a({text})")
            self.emit(indent, f"p += {size} * {count}")
            return
        continued, ended, last = out.fresh("em"), out.fresh("ee"), out.fresh("last")
        self.pure(indent, f"{continued} = {prefix} + '|   '")
        self.pure(indent, f"{ended} = {prefix} + '    '")
        self.pure(indent, f"{last} = {count} - 1")
        fixed = None if element.struct is None or self.generated else _fixed_size(element.struct)
        if fixed is not None and indent + 3 < _MAX_INLINE_INDENT:
            assert element.struct is not None
            self.fixed_elements(element.struct, fixed, label, value, branch, continued, ended, last, indent)
            return
        self.emit(indent, f"for {i}, {item} in enumerate({value}):")
        below = out.fresh("c")
        self.pure(indent + 1, f"{below} = {continued} if {i} < {last} else {ended}")
        name = f"{label}[{{{i}}}]"
        if element.kind is Kind.STRUCT:
            assert element.struct is not None
            self.struct_node(element.struct, f"{{{branch}}}{name} {label}", item, "", below, indent + 1)
        else:
            self.field(element, name, item, "", branch, below, indent + 1)
            self.settle(indent + 1)  # the position moves with every element
        self.flush()

    def fixed_elements(self, plan: StructPlan, size: int, label: str, value: str, branch: str, continued: str,
                       ended: str, last: str, indent: int) -> None:
        """Elements that are structs of fixed-size fields (ids, versions, offsets): each, with
        its tagged-field block empty (most), one string, its size known before its fields are
        written; an element with tagged fields is written as any struct is."""
        out = self.out
        i, item = out.fresh("i"), out.fresh("y")
        middle, final, field_branch = out.fresh("fm"), out.fresh("fe"), out.fresh("fb")
        self.pure(indent, f"{middle} = {continued} + '+-- '")
        self.pure(indent, f"{final} = {ended} + '+-- '")
        # Integers shown as they are (versions, ids): all the elements' lines by C, where it is
        # built (`verbose_records.native_fixed_elements`), from a template of this loop's text
        # (`_fixed_template`); else, or where an element has tagged fields, by the loop.
        native = all(field.kind is Kind.INTEGER and self.rule(field) is None for field in plan.fields)
        template = text = ""
        if native:
            template, text = out.fresh("template"), out.fresh("t")
            self.emit(indent, f"if FIXED is None or ({text} := FIXED({value}, data, p, {size}, {plan.flexible}, "
                              f"{branch}, {middle}, {final}, {template})) is None:")
            indent += 1
        self.emit(indent, f"for {i}, {item} in enumerate({value}):")
        inner = indent + 1
        head = f"{{{branch}}}{label}[{{{i}}}] {label}"
        if plan.flexible:
            self.emit(inner, f"if data[p + {size}]:")
            below = out.fresh("c")
            self.pure(inner + 1, f"{below} = {continued} if {i} < {last} else {ended}")
            self.struct_node(plan, head, item, "", below, inner + 1)
            self.flush()
            self.emit(inner, "else:")
            inner += 1
        self.pure(inner, f"{field_branch} = {middle} if {i} < {last} else {final}")
        self.line(inner, _fline(head, "struct", "p", str(size + plan.flexible), ""))
        items = [out.fresh("x") for _ in plan.fields]
        if items:
            self.pure(inner, f"{', '.join(items)}, {_REST if plan.tagged else ''}= {item}.values()")
        for field, name in zip(plan.fields, items, strict=True):
            self.field(field, _literal(field.name), name, field.about, field_branch, "", inner, named=True)
        if plan.flexible:
            self.line(inner, _fline(f"{{{field_branch}}}tagged_fields uvarint", "0", self.at(), "1",
                                    about_tail(plan.tagged_about)))
            self.delta += 1
        if native:
            out.constants[template] = _fixed_template("\\n".join(self.pending), branch, field_branch, i, items)
        self.settle(inner)
        self.flush()
        if native:
            self.emit(indent - 1, "else:")
            self.emit(indent, f"a({text})")
            self.emit(indent, f"p += {size + plan.flexible} * len({value})")

    def nested(self, f: FieldPlan, head: str, value: str, tail: str, below: str, indent: int) -> None:
        assert f.struct is not None
        out = self.out
        presence = f"{{{below}}}+-- presence int8"
        presence_tail = about_tail(NULLABLE_STRUCT_ABOUT)
        if not f.nullable:
            self.struct_node(f.struct, head, value, tail, below, indent)
            return
        self.emit(indent, f"if {value} is None:")
        self.line(indent + 1, _fline(head, "null", "p", "1", tail))
        self.line(indent + 1, _fline(presence, "-1 (null)", "p", "1", presence_tail))
        self.emit(indent + 1, "p += 1")
        self.emit(indent, "else:")
        slot, start = out.fresh("j"), out.fresh("s")
        self.emit(indent + 1, f"{slot} = len(L)")
        self.emit(indent + 1, "a(None)")
        self.emit(indent + 1, f"{start} = p")
        self.line(indent + 1, _fline(presence, "1 (present)", "p", "1", presence_tail))
        self.delta += 1
        self.struct_body(f.struct, value, below, indent + 1)
        line = _fline(head, "struct", start, f"{{p - {start}}}", tail)
        self.emit(indent + 1, f'L[{slot}] = f"{line}"')

    def struct_node(self, plan: StructPlan, head: str, value: str, tail: str, below: str, indent: int) -> None:
        """A struct's own line (a slot until its size is known), then its fields' lines."""
        out = self.out
        slot, start = out.fresh("j"), out.fresh("s")
        self.emit(indent, f"{slot} = len(L)")
        self.emit(indent, "a(None)")
        self.emit(indent, f"{start} = p")
        self.struct_body(plan, value, below, indent)
        line = _fline(head, "struct", start, f"{{p - {start}}}", tail)
        self.emit(indent, f'L[{slot}] = f"{line}"')

    def struct_body(self, plan: StructPlan, value: str, prefix: str, indent: int) -> None:
        """Inline a struct's fields, or call their own writer where Python's block nesting ends."""
        if indent < _MAX_INLINE_INDENT:
            self.struct(plan, value, prefix, indent)
            return
        self.settle(indent)
        writer = self.out.constant(_writer(plan, self.displays, self.generated), "write")
        self.emit(indent, f"p = {writer}(L, {value}, p, {prefix}, data, gen, H)")


__all__ = ["Refused", "frame_text", "message_lines", "message_text"]
