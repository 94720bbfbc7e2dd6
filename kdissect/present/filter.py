"""Display filters (`-Y`): small boolean expressions over a message's columns.

    api_key == 55 and latency_ms > 5
    api_name in ("DescribeQuorum", "DescribeProducers") && direction == "response"
    "request missing" in notes

The expression is parsed with Python's own parser into a syntax tree and then
walked here over a whitelist of node kinds: nothing is ever evaluated as code.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

Record = Mapping[str, Any]
Predicate = Callable[[Record], bool]


class FilterError(ValueError):
    """The expression is not a valid filter; the message says why."""


_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
# Wireshark habits: && || and a lone ! mean and, or, not.
_WIRESHARK_SPELLING = ((re.compile(r"&&"), " and "), (re.compile(r"\|\|"), " or "),
                       (re.compile(r"!(?!=)"), " not "))  # fmt: skip
_QUOTED = re.compile(r"(\"[^\"]*\"|'[^']*')")


def compile_filter(expression: str, columns: tuple[str, ...]) -> Predicate:
    text = _python_spelling(expression)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise FilterError(f"cannot parse filter {expression!r}: {exc.msg}") from None
    _check(tree.body, set(columns))
    body = tree.body
    return lambda record: bool(_evaluate(body, record))


def _python_spelling(expression: str) -> str:
    """Rewrite && || ! as and/or/not, leaving quoted strings untouched."""
    pieces = _QUOTED.split(expression)
    for index in range(0, len(pieces), 2):  # even pieces are outside quotes
        for pattern, word in _WIRESHARK_SPELLING:
            pieces[index] = pattern.sub(word, pieces[index])
    return "".join(pieces)


def _check(node: ast.AST, columns: set[str]) -> None:
    match node:
        case ast.BoolOp() | ast.Compare() | ast.Tuple() | ast.List():
            pass
        case ast.UnaryOp(op=ast.Not() | ast.USub()):
            pass
        case ast.Name(id=name) if name not in columns:
            known = ", ".join(sorted(columns))
            raise FilterError(f"unknown field {name!r} in filter; fields are: {known}")
        case ast.Name() | ast.Constant() | ast.Load() | ast.And() | ast.Or() | ast.Not() | ast.USub():
            pass
        case ast.cmpop() if type(node) in _COMPARE:
            pass
        case _:
            raise FilterError(f"filters cannot contain {type(node).__name__} ({ast.unparse(node)!r})")
    for child in ast.iter_child_nodes(node):
        _check(child, columns)


def _evaluate(node: ast.expr, record: Record) -> Any:
    match node:
        case ast.Constant(value=value):
            return value
        case ast.Name(id=name):
            return record.get(name)
        case ast.Tuple(elts=items) | ast.List(elts=items):
            return tuple(_evaluate(item, record) for item in items)
        case ast.UnaryOp(op=ast.Not(), operand=operand):
            return not _evaluate(operand, record)
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            value = _evaluate(operand, record)
            return -value if isinstance(value, int | float) else None
        case ast.BoolOp(op=ast.And(), values=values):
            return all(_evaluate(value, record) for value in values)
        case ast.BoolOp(op=ast.Or(), values=values):
            return any(_evaluate(value, record) for value in values)
        case ast.Compare(left=left, ops=ops, comparators=comparators):
            return _compare(left, ops, comparators, record)
    raise FilterError(f"unsupported filter element {ast.unparse(node)!r}")


def _compare(left: ast.expr, ops: list[ast.cmpop], rights: list[ast.expr], record: Record) -> bool:
    current = _evaluate(left, record)
    for op, right in zip(ops, rights, strict=True):
        value = _evaluate(right, record)
        try:
            if not _COMPARE[type(op)](current, value):
                return False
        except TypeError:  # a missing value (None) never satisfies an ordering
            return False
        current = value
    return True
