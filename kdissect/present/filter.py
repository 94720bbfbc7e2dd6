"""Display filters (`-Y`), in Wireshark's words, over every field of a message.

    api_key == 55 and latency_ms > 5
    ErrorCode != 0                              any ErrorCode in the body differs from 0
    Topics[].Partitions[].LeaderId == -1        a path through arrays; Topics[0].Name a single one
    kafka.topic_name contains "ord" || client_id matches "^console-"
    api_name in {"DescribeQuorum" "DescribeProducers"} && ip.addr == 10.0.0.0/8
    expert == "kafka.unanswered"
    key == "order-17" && headers[].headerKey == "traceparent"    inside the record batches

The expression is tokenised and parsed here into a small tree of predicates: nothing
is ever evaluated as code. Every field and every comparison is checked when the
filter is compiled: an unknown field, or a value of another type than its field's,
is a `FilterError` naming both. A field compared with several values is true when
any value satisfies the comparison (a bare field: when it is present; a message's flag,
such as `tls`: when it is set).

Parts that need the body are evaluated last, and only for messages the cheap parts
did not already decide; the body is decoded only for APIs whose definitions have
the field.
"""

from __future__ import annotations

import difflib
import ipaddress
import itertools
import operator
import re
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from kdissect.pair.message import Message
from kdissect.present.fields import (
    ADDRESS,
    BOOLEAN,
    BYTES,
    COLUMNS,
    EVERY_FIELD,
    KAFKA_BODY_ALIASES,
    NUMBER,
    STRING,
    STRUCT,
    UUID,
    BodyFields,
    BodyReading,
    Column,
    Path,
    Step,
    body_fields,
    schema_index,
    value_kind,
)

Predicate = Callable[[Message], bool]
# What a worker process found of a message for a filter (`BodyTests`): which of the filter's
# tests on body fields it ran (a bit each), which of those passed, and the filter's verdict
# when what it could read decided it (else None).
Known = tuple[int, int, bool | None]


class Selection(Protocol):
    """A compiled filter: whether a message passes, given what a worker process found of it
    for the filter, where one did (`BodyTests`)."""

    def __call__(self, message: Message, known: Known | None = None, /) -> bool: ...


MAX_FILTER_LENGTH = 10_000


class FilterError(ValueError):
    """The expression is not a valid filter; the message says why."""


# -- tokens ----------------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<address>\d{1,3}(?:\.\d{1,3}){3}(?:/\d{1,2})?(?![\w.]))
  | (?P<address6>[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:/\d{1,3})?(?![\w:.]))
  | (?P<number>(?:0[xX][0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?!\w)(?!\.\d))
  | (?P<field>[A-Za-z_]\w*(?:\[-?\d*\])?(?:\.[A-Za-z_]\w*(?:\[-?\d*\])?)*)
  | (?P<op>==|!=|<=|>=|&&|\|\||\.\.|[<>!~(){}\[\],-])
""", re.VERBOSE)
_WORD_OPERATORS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
                   "and": "&&", "or": "||", "not": "!"}
_KEYWORDS = {"in", "contains", "matches", "true", "false", "null", "None"}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # string, number, address, field, word, op, end
    text: str
    value: Any = None


def tokenize(expression: str) -> list[Token]:
    tokens, position = [], 0
    while position < len(expression):
        found = _TOKEN.match(expression, position)
        if found is None:
            raise FilterError(f"unexpected {expression[position]!r} at position {position} "
                              f"in filter {expression!r}")
        position = found.end()
        kind, text = found.lastgroup or "", found.group()
        if kind != "space":
            tokens.append(_token(kind, text))
    tokens.append(Token("end", ""))
    return tokens


def _token(kind: str, text: str) -> Token:
    if kind == "string":
        return Token(kind, text, re.sub(r"\\(.)", lambda m: _ESCAPES.get(m[1], m[1]), text[1:-1]))
    if kind == "number":
        is_integer = text.lower().startswith("0x") or text.isdigit()
        return Token(kind, text, int(text, 0) if is_integer else float(text))
    if kind in ("address", "address6"):
        return Token("string", text, text)
    if kind == "field" and text in _WORD_OPERATORS:
        return Token("op", _WORD_OPERATORS[text], text)  # (as written, for messages)
    if kind == "field" and text in _KEYWORDS:
        return Token("word", text)
    return Token(kind, text)


# -- fields ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Field:
    """A resolved field name: where its values come from, their kinds, and a label."""

    name: str
    kinds: frozenset[str]
    label: str  # the type as the user should read it: "int32", "string or int16"
    column: Column | None = None
    paths: tuple[Path, ...] = ()
    apis: frozenset[int] = frozenset()  # body fields: APIs whose bodies can hold it

    @property
    def costly(self) -> bool:
        return bool(self.paths) or (self.column is not None and self.column.costly)

    @property
    def on_worker(self) -> bool:
        """Whether a worker process of `--jobs` reads it as one process does: a body field,
        or a column that depends on the message, its connection and its request alone."""
        return bool(self.paths) or (self.column is not None and self.column.on_worker)

    def values(self, context: FieldContext) -> Iterator[Any]:
        if self.column is not None:
            start = context.start() if self.column.relative else 0.0
            for value in self.column.read(context.message):
                if value is not None:
                    yield value - start if start else value
            return
        body = context.body(self.apis)
        if body is not None:
            for path in self.paths:
                yield from body.values(path)


def body_reading(fields: Iterable[Field]) -> BodyReading:
    """What reading these fields needs of a body (`BodyReading`)."""
    return BodyReading.of(path for field in fields for path in field.paths)


def resolve(name: str) -> Field:
    """The field a name denotes; FilterError when there is none."""
    column = COLUMNS.get(name)
    if column is not None:
        return Field(name, frozenset({column.kind}), column.label, column=column)
    if name in KAFKA_BODY_ALIASES:
        return _alias_field(name, KAFKA_BODY_ALIASES[name])
    path = _parse_path(name)
    problem = _path_problem(path)
    if problem:
        raise FilterError(problem)
    return _body_field(name, _spellings(path))


def _alias_field(name: str, texts: tuple[str, ...]) -> Field:
    paths = tuple(p for path in map(_parse_path, texts) if not _path_problem(path) for p in _spellings(path))
    if not paths:  # no loaded definition has it yet: it never matches, but it is not a typo
        return Field(name, frozenset({NUMBER, STRING}), "absent", paths=(_parse_path(texts[0]),))
    return _body_field(name, paths)


def _spellings(path: Path) -> tuple[Path, ...]:
    """A valid path under every spelling the definitions give its names, so that
    `TimeoutMs` also finds CreateTopics' `timeoutMs`; the path as written comes first."""
    spellings = schema_index().spellings
    if not any(step.name in spellings for step in path):
        return (path,)
    options = [[step, *(Step(other, step.index, step.brackets) for other in sorted(spellings.get(step.name, ()))
                        if other != step.name)] for step in path]
    return tuple(p for p in itertools.product(*options) if p == path or not _path_problem(p))


def _body_field(name: str, paths: tuple[Path, ...]) -> Field:
    index = schema_index()
    types: set[str] = set()
    apis: set[int] = set()
    for path in paths:
        last = path[-1]
        types.update(t.removeprefix("[]") if last.index is not None else t for t in index.types[last.name])
        apis.update(index.apis.get(path[0].name, ()))
    kinds = frozenset(value_kind(t) for t in types)
    return Field(name, kinds, " or ".join(sorted(types)), paths=paths, apis=frozenset(apis))


_STEP = re.compile(r"([A-Za-z_]\w*)(\[(-?\d*)\])?")


def _parse_path(text: str) -> Path:
    steps = []
    for part in text.split("."):
        found = _STEP.fullmatch(part)
        if found is None:
            raise FilterError(f"{text!r} is not a field name or path")
        name, brackets, index = found.groups()
        steps.append(Step(name, int(index) if index else None, brackets is not None))
    return tuple(steps)


def _path_problem(path: Path) -> str | None:
    index = schema_index()
    first = path[0].name
    if first not in index.types:
        return _unknown(".".join(map(str, path)))
    for parent, step in itertools.pairwise(path):
        if step.name not in index.children.get(parent.name, ()):
            return (f"field {parent.name!r} has no field {step.name!r} "
                    f"(it has: {', '.join(sorted(index.children.get(parent.name, ()))) or 'none'})")
    for step in path:
        if step.brackets and not index.is_array(step.name):
            return f"field {step.name!r} is not an array; [] and [N] select array elements"
    return None


def _unknown(name: str) -> str:
    known = [*COLUMNS, *KAFKA_BODY_ALIASES, *schema_index().types]
    close = difflib.get_close_matches(name, known, n=3)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    return (f"unknown field {name!r}{hint} (fields: message columns such as api_key, "
            "latency_ms, client_id; ip.addr, tcp.port, tcp.stream; kafka.* names; expert; "
            "or a body field of a decoded API, by name or path)")


# -- evaluation --------------------------------------------------------------------


class FieldContext:
    """One message being filtered, or its fields read (`-T fields`); its body is decoded at
    most once, and only if asked. `start` gives the capture's start, for relative times;
    `reading` what the fields asked about will need of the body (by default, anything)."""

    __slots__ = ("_body", "_decoded", "known", "message", "ran", "reading", "start")

    def __init__(self, message: Message, start: Callable[[], float], reading: BodyReading = EVERY_FIELD,
                 known: Known | None = None) -> None:
        self.message = message
        self.start = start  # the capture's start, for relative times
        self.reading = reading
        self.known = known  # the results of the tests on body fields, where a worker ran them
        self.ran: list[int] | None = None  # on a worker: [tests run, tests passed], as bits
        self._body: BodyFields | None = None
        self._decoded = False

    def body(self, apis: frozenset[int]) -> BodyFields | None:
        if self.message.api_key not in apis:
            return None
        if not self._decoded:
            self._decoded = True
            self._body = body_fields(self.message, self.reading)
        return self._body


@dataclass(frozen=True, slots=True)
class Node:
    """A compiled part of the filter: a test, whether it may decode the body, and what a
    worker process can say of it from what it reads exactly (`BodyTests`): True, False, or
    None for "it depends on what only the merging process reads"; no `maybe`: always None."""

    test: Callable[[FieldContext], bool]
    costly: bool
    maybe: Callable[[FieldContext], bool | None] | None = None


def compile_filter(expression: str, start: Callable[[], float | None] | None = None) -> Selection:
    """The predicate of a display filter; FilterError when it is not valid.

    `start` gives the epoch seconds of the capture's first packet, which `time_relative`
    counts from (None while unknown); without it, or while it is unknown, the time of the
    first message the predicate is asked about stands for it."""
    if len(expression) > MAX_FILTER_LENGTH:
        raise FilterError(f"filter of {len(expression)} characters; at most {MAX_FILTER_LENGTH}")
    parser = _Parser(expression)
    try:
        node = parser.parse()
    except RecursionError:
        raise FilterError("filter nested too deeply") from None
    test = node.test
    reading = body_reading(parser.fields)
    first: list[float] = []

    def origin() -> float:
        known = None if start is None else start()
        if known is not None:
            return known
        return first[0]

    def predicate(message: Message, known: Known | None = None, /) -> bool:
        """Whether the message passes; `known`: what a worker process found of it, where one
        did (`BodyTests`): its verdict, or the body tests it ran, not run again here."""
        if not first:
            first.append(message.time)
        if known is not None and known[2] is not None:  # the worker's verdict
            return known[2]
        return test(FieldContext(message, origin, reading, known))

    return predicate


class BodyTests:
    """What a worker process makes of each message for a filter (`--jobs`): the filter
    evaluated as far as the worker can read the message exactly (its body's fields, and
    what depends only on the message, its connection and its pair: API, addresses, times,
    latency; not message or stream numbers, relative times or notes), in three values
    (Kleene's: a part it cannot read is unknown) and lazily, cheap parts first, as the
    merging process evaluates it. The merging process then takes the verdict when there is
    one, and otherwise evaluates the filter itself with the results of the tests on body
    fields the worker ran (`compile_filter`'s `known`), decoding no body again for those. A
    body decodes on the worker as in one process: its request is on the same connection.
    Picklable: the filter is parsed again where it runs, from the same definitions."""

    warm_up = True  # the first bodies' decoders made once, before the workers fork
    preload = ("kdissect.decode.values",)

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self._parsed = False
        self._reading = EVERY_FIELD
        self._verdict: Callable[[FieldContext], bool | None] | None = None
        self._tests = 0  # how many tests on body fields alone

    @classmethod
    def of(cls, expression: str) -> BodyTests | None:
        """For a valid filter a worker can read part of; None for one it cannot."""
        tests = cls(expression)
        tests._parse()
        return tests if tests._verdict is not None or tests._tests else None

    def _parse(self) -> None:
        if not self._parsed:
            parser = _Parser(self.expression)
            self._verdict = parser.parse().maybe
            self._tests = len(parser.body_tests)
            self._reading = body_reading(parser.fields)
            self._parsed = True

    def __getstate__(self) -> str:
        return self.expression

    def __setstate__(self, expression: str) -> None:
        self.__init__(expression)  # type: ignore[misc]

    def __call__(self, message: Message) -> Known:
        self._parse()
        context = FieldContext(message, _no_start, self._reading)
        context.ran = [0, 0]
        verdict = None if self._verdict is None else self._verdict(context)
        return context.ran[0], context.ran[1], verdict


def _no_start() -> float:
    return 0.0  # a body field is never a relative time


class _Parser:
    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.tokens = tokenize(expression)
        self.position = 0
        self.fields: list[Field] = []  # every field the filter names
        self.body_tests: list[Callable[[FieldContext], bool]] = []  # comparisons of body fields alone

    def parse(self) -> Node:
        if self.peek().kind == "end":
            raise FilterError("empty filter")
        node = self.or_()
        if self.peek().kind != "end":
            raise self.unexpected()
        return node

    def peek(self) -> Token:
        return self.tokens[self.position]

    def take(self) -> Token:
        token = self.tokens[self.position]
        self.position += 1
        return token

    def accept(self, text: str) -> bool:
        token = self.peek()
        if token.kind in ("op", "word") and token.text == text:
            self.position += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.accept(text):
            raise self.unexpected(f"expected {text!r}")

    def unexpected(self, wanted: str = "") -> FilterError:
        token = self.peek()
        written = token.value if token.kind == "op" and token.value else token.text
        what = "end of filter" if token.kind == "end" else repr(written)
        return FilterError(f"cannot parse filter {self.expression!r}: unexpected {what}"
                           + (f", {wanted}" if wanted else ""))

    def or_(self) -> Node:
        parts = [self.and_()]
        while self.accept("||"):
            parts.append(self.and_())
        return parts[0] if len(parts) == 1 else _combine(parts, any)

    def and_(self) -> Node:
        parts = [self.unary()]
        while self.accept("&&"):
            parts.append(self.unary())
        return parts[0] if len(parts) == 1 else _combine(parts, all)

    def unary(self) -> Node:
        if self.accept("!"):
            return _negate(self.unary())
        if self.accept("("):
            inner = self.or_()
            self.expect(")")
            return inner
        return self.comparison()

    def comparison(self) -> Node:
        """A comparison (or a bare field). One of body fields alone is a `BodyTests` test,
        whose result a worker hands on; one of what a worker reads exactly it evaluates too."""
        first = len(self.fields)
        node = self._comparison()
        named = self.fields[first:]
        if not named or not all(field.paths for field in named):
            if named and all(field.on_worker for field in named):
                return Node(node.test, node.costly, node.test)  # exact on a worker too
            return node
        bit, test = 1 << len(self.body_tests), node.test
        self.body_tests.append(test)

        def body_test(context: FieldContext) -> bool:
            known = context.known
            if known is not None and known[0] & bit:  # run on the worker
                return known[1] & bit != 0
            passed = test(context)
            ran = context.ran
            if ran is not None:  # on the worker: said to the merging process
                ran[0] |= bit
                if passed:
                    ran[1] |= bit
            return passed

        return Node(body_test, node.costly, body_test)

    def _comparison(self) -> Node:
        left = self.operand()
        token = self.peek()
        if token.kind == "op" and token.text in _ORDERING:
            self.take()
            return _compare(left, token.text, self.operand())
        if self.accept("contains"):
            return _contains(left, self.operand())
        if self.accept("matches") or self.accept("~"):
            return _matches(left, self.operand())
        negate = self.accept("!")
        if negate or self.accept("in"):
            if negate:
                self.expect("in")
            node = self.membership(left)
            return _negate(node) if negate else node
        if isinstance(left, Field):
            return _exists(left)
        raise self.unexpected("expected a comparison after a value")

    def membership(self, left: Field | Literal) -> Node:
        if self.peek().kind == "field" and isinstance(left, Literal):  # "text" in notes
            return _contains(self.operand(), left)
        closing = {"{": "}", "(": ")", "[": "]"}
        opening = self.take()
        if opening.text not in closing or opening.kind != "op":
            self.position -= 1
            raise self.unexpected("expected a set such as {1 2 3} or (\"a\", \"b\")")
        members: list[tuple[Literal, Literal | None]] = []
        while not self.accept(closing[opening.text]):
            low = self.literal()
            high = self.literal() if self.accept("..") else None
            members.append((low, high))
            self.accept(",")
        return _member(left, members)

    def operand(self) -> Field | Literal:
        token = self.peek()
        if token.kind == "field":
            self.take()
            field = resolve(token.text)
            self.fields.append(field)
            return field
        return self.literal()

    def literal(self) -> Literal:
        token = self.take()
        if token.kind in ("string", "number"):
            return Literal(token.value, token.text)
        if token.kind == "op" and token.text == "-" and self.peek().kind == "number":
            number = self.take()
            return Literal(-number.value, "-" + number.text)
        if token.kind == "word" and token.text in ("true", "false"):
            return Literal(token.text == "true", token.text)
        self.position -= 1
        raise self.unexpected("expected a field or a value")


def _negate(node: Node) -> Node:
    test, maybe = node.test, node.maybe
    if maybe is None:
        return Node(lambda c: not test(c), node.costly)

    def negated(context: FieldContext) -> bool | None:
        known = maybe(context)
        return None if known is None else not known

    return Node(lambda c: not test(c), node.costly, negated)


def _combine(parts: list[Node], quantifier: Callable[[Iterable[bool]], bool]) -> Node:
    ordered = sorted(parts, key=lambda part: part.costly)  # cheap parts decide first
    tests = [part.test for part in ordered]
    known = [part.maybe for part in ordered if part.maybe is not None]  # cheap parts first, as `tests`
    costly = any(p.costly for p in parts)
    if not known:
        return Node(lambda c: quantifier(test(c) for test in tests), costly)
    deciding = quantifier is any  # the value one part decides the whole with: True for or, False for and
    unknown = len(known) < len(parts)

    def maybe(context: FieldContext) -> bool | None:  # Kleene's three-valued and / or
        undecided = unknown
        for part in known:
            value = part(context)
            if value is deciding:
                return deciding
            undecided = undecided or value is None
        return None if undecided else not deciding

    return Node(lambda c: quantifier(test(c) for test in tests), costly, maybe)


# -- comparisons -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Literal:
    value: Any
    text: str

    @property
    def kind(self) -> str:
        if isinstance(self.value, bool):
            return BOOLEAN
        return NUMBER if isinstance(self.value, int | float) else STRING


_ORDERING: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge,
}  # fmt: skip
_ORDERED_KINDS = frozenset({NUMBER, STRING})


def _exists(field: Field) -> Node:
    """A bare field: true when the message has it; a message's flag (`tls`), which every
    message has, when it is set."""
    if field.column is not None and field.column.kind == BOOLEAN:
        return Node(lambda c: any(field.values(c)), field.costly)
    return Node(lambda c: next(field.values(c), None) is not None, field.costly)


def _compare(left: Field | Literal, symbol: str, right: Field | Literal) -> Node:
    if isinstance(left, Literal) and isinstance(right, Field):
        flipped = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(symbol, symbol)
        return _compare(right, flipped, left)
    if not isinstance(left, Field):
        raise FilterError(f"{left.text} {symbol} {_text(right)}: a comparison needs a field")
    compare = _ORDERING[symbol]
    if symbol not in ("==", "!=") and not left.kinds & _ORDERED_KINDS:
        raise FilterError(f"field {left.name!r} ({left.label}) has no order; use == or !=")
    if isinstance(right, Field):
        return _compare_fields(left, compare, right)
    match = _matcher(left, right, compare)
    return Node(lambda c: any(match(value) for value in left.values(c)), left.costly)


def _compare_fields(left: Field, compare: Callable[[Any, Any], bool], right: Field) -> Node:
    common = left.kinds & right.kinds - {STRUCT}
    if not common:
        raise FilterError(f"cannot compare field {left.name!r} ({left.label}) with field "
                          f"{right.name!r} ({right.label}): different types")

    def test(context: FieldContext) -> bool:
        others = [v for v in right.values(context) if _kind_of(v) in common]
        return any(compare(a, b) for a in left.values(context) if _kind_of(a) in common for b in others)

    return Node(test, left.costly or right.costly)


def _matcher(field: Field, literal: Literal, compare: Callable[[Any, Any], bool]) -> Callable[[Any], bool]:
    """A test of one value of `field` against `literal`, its type checked once, here."""
    if STRUCT in field.kinds and len(field.kinds) == 1:
        raise FilterError(f"field {field.name!r} is a struct array ({field.label}); compare a "
                          f"field inside it, such as {field.name}[].<name>")
    if literal.kind == NUMBER and compare in (operator.eq, operator.ne):
        _check_integer(field, literal)
    for kind in (literal.kind, UUID, ADDRESS, BYTES):
        if kind not in field.kinds:
            continue
        wanted = _converted(field, kind, literal)
        if wanted is not None:
            return _typed_test(kind, wanted, compare)
    raise FilterError(f"cannot compare field {field.name!r} ({field.label}) with "
                      f"{literal.text} ({_literal_label(literal)})")


_INTEGER_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1), "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1), "varint": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1), "varlong": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1), "uint32": (0, (1 << 32) - 1),
}  # fmt: skip


def _check_integer(field: Field, literal: Literal) -> None:
    """An equality no value of an integer field can meet (a fraction, or beyond the type's
    range) is a mistake, said as one rather than a silently empty result."""
    ranges = [_INTEGER_RANGES.get(part) for part in field.label.split(" or ")]
    if not ranges or None in ranges:
        return
    value = literal.value
    if isinstance(value, float) and not value.is_integer():
        raise FilterError(f"field {field.name!r} is an integer ({field.label}); {literal.text} is not one")
    low, high = min(r[0] for r in ranges if r), max(r[1] for r in ranges if r)
    if not low <= value <= high:
        raise FilterError(f"field {field.name!r} ({field.label}) holds {low} to {high}; "
                          f"{literal.text} is beyond it")


def _converted(field: Field, kind: str, literal: Literal) -> Any:
    """The literal as a value of `kind`, None when it is not one."""
    value = literal.value
    if kind == literal.kind:
        return value
    if kind == UUID and literal.kind == STRING:
        try:
            return uuid.UUID(value)
        except ValueError:
            raise FilterError(f"field {field.name!r} is a uuid; {literal.text} is not one") from None
    if kind == ADDRESS and literal.kind == STRING:
        try:
            return ipaddress.ip_network(value, strict=False)
        except ValueError:
            raise FilterError(f"field {field.name!r} is an IP address; {literal.text} is not "
                              "an address or network") from None
    if kind == BYTES and literal.kind == STRING:
        return value.encode("utf-8")
    return None


def _typed_test(kind: str, wanted: Any, compare: Callable[[Any, Any], bool]) -> Callable[[Any], bool]:
    if kind == ADDRESS:
        inside = compare is operator.eq
        return lambda value: (value in wanted) == inside and _kind_of(value) == ADDRESS
    if kind == NUMBER:
        return lambda value: _kind_of(value) == NUMBER and compare(value, wanted)
    python_type = type(wanted)
    return lambda value: isinstance(value, python_type) and compare(value, wanted)


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int | float):
        return NUMBER
    if isinstance(value, str):
        return STRING
    if isinstance(value, uuid.UUID):
        return UUID
    if isinstance(value, bytes | bytearray):
        return BYTES
    return ADDRESS if isinstance(value, ipaddress.IPv4Address | ipaddress.IPv6Address) else STRUCT


def _literal_label(literal: Literal) -> str:
    if literal.kind == NUMBER:
        return "integer" if isinstance(literal.value, int) else "float"
    return literal.kind


def _contains(left: Field | Literal, right: Field | Literal) -> Node:
    if not isinstance(left, Field) or not isinstance(right, Literal):
        raise FilterError("contains needs a field on its left and a value on its right")
    if left.kinds & {STRING, BYTES}:
        if right.kind != STRING:
            raise FilterError(f"cannot look for {right.text} ({_literal_label(right)}) inside "
                              f"field {left.name!r} ({left.label}); contains takes a string here")
        text, raw = right.value, right.value.encode("utf-8")
        return Node(lambda c: any((text if isinstance(v, str) else raw) in v
                                  for v in left.values(c) if isinstance(v, str | bytes)), left.costly)
    return _compare(left, "==", right)  # an array of numbers contains a number


def _matches(left: Field | Literal, right: Field | Literal) -> Node:
    if not isinstance(left, Field) or not isinstance(right, Literal) or right.kind != STRING:
        raise FilterError("matches needs a field on its left and a quoted regular expression")
    if STRING not in left.kinds:
        raise FilterError(f"field {left.name!r} ({left.label}) is not a string; matches "
                          "takes a string field")
    try:
        pattern = re.compile(right.value)
    except re.error as exc:
        raise FilterError(f"invalid regular expression {right.text}: {exc}") from None
    search = pattern.search
    return Node(lambda c: any(isinstance(v, str) and search(v) is not None for v in left.values(c)),
                left.costly)


def _member(left: Field | Literal, members: list[tuple[Literal, Literal | None]]) -> Node:
    if not isinstance(left, Field):
        raise FilterError("in needs a field on its left")
    if not members:
        raise FilterError(f"the set after {left.name} in is empty")
    tests = []
    if any(high is not None for _, high in members) and not left.kinds & _ORDERED_KINDS:
        raise FilterError(f"field {left.name!r} ({left.label}) has no order; a range needs numbers")
    for low, high in members:
        if high is None:
            tests.append(_matcher(left, low, operator.eq))
        else:
            above, below = _matcher(left, low, operator.ge), _matcher(left, high, operator.le)
            tests.append(_both(above, below))
    return Node(lambda c: any(test(v) for v in left.values(c) for test in tests), left.costly)


# -- selection: --api and -Y together ------------------------------------------------


def api_keys(items: Iterable[int | str] | int | str) -> frozenset[int]:
    """API keys from keys or names (`55`, `"55"`, `"DescribeQuorum"`, any case), one or
    several; ValueError names the first item that is neither."""
    from kdissect.apis import APIS

    if isinstance(items, (int, str)):
        items = [items]
    by_name = {api.name.lower(): api.key for api in APIS.values()}
    keys = set()
    for item in items:
        text = str(item).strip()
        key = int(text) if text.isdigit() else by_name.get(text.lower())
        if key is None or key not in APIS:
            raise ValueError(f"{item!r} is not a Kafka API key or name")
        keys.add(key)
    return frozenset(keys)


def selector(apis: Iterable[int | str] | int | str | None = None, expression: str | None = None,
             start: Callable[[], float | None] | None = None) -> Selection:
    """Which messages to keep: of these APIs (keys or names), matching this display filter
    (`start`: as for `compile_filter`)."""
    keys = None if apis is None else api_keys(apis)
    predicate = compile_filter(expression, start) if expression else None

    def keep(message: Message, known: Known | None = None, /) -> bool:
        if keys is not None and message.api_key not in keys:
            return False
        return predicate is None or predicate(message, known)

    return keep


def _both(first: Callable[[Any], bool], second: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: first(value) and second(value)


def _text(operand: Field | Literal) -> str:
    return operand.name if isinstance(operand, Field) else operand.text
