"""A request body parsed with limits beyond its size (BodyLimit caps the bytes): hostile JSON
is a 400 that says why. Without them a body nested 30,000 deep was a RecursionError, a
5,000-digit integer Python's int-digits ValueError, and a lone surrogate (`"\\ud800"`, valid
JSON but no character) a UnicodeEncodeError wherever it was next written: 500s, or a call
to the LLM that its server refused."""

from __future__ import annotations

import json
from typing import Any

from kohaku_rag.serving.errors import ApiError

# No request the API takes nests deeper than a few levels (a chat message's content parts
# are 4); a JSON schema in `response_format` may nest more, but not this much.
MAX_DEPTH = 64
# No count, size or id the API takes needs more digits.
MAX_INT_DIGITS = 32


class _Refused(ValueError):
    """A value json.loads would accept that a request may not hold."""


def parse_body(raw: bytes) -> Any:
    """The request's JSON value (`{}` for an empty body); ApiError 400 naming the problem."""
    try:
        value = json.loads(raw or b"{}", parse_int=_whole_number, parse_constant=_no_constant)
    except _Refused as exc:
        raise ApiError(400, f"the body is refused: {exc}") from None
    except RecursionError:
        raise ApiError(400, f"the body is nested more than {MAX_DEPTH} deep; send a flatter JSON object") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the body is not JSON: {exc}") from None
    _check_value(value)
    return value


def _whole_number(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _Refused(f"a number of {digits} digits (at most {MAX_INT_DIGITS}); send the value the API asks for")
    return int(text)


def _no_constant(name: str) -> float:
    raise _Refused(f"{name} is not JSON (a JavaScript value); send a number or null")


def _check_value(value: Any) -> None:
    """Refuse nesting past MAX_DEPTH and a lone surrogate in any string or key, naming where
    (a walk with its own stack: the value may be nested up to the interpreter's limit)."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item, where or "the body")
        elif isinstance(item, (dict, list)):
            if depth >= MAX_DEPTH:
                raise ApiError(400, f"the body is nested more than {MAX_DEPTH} deep; send a flatter JSON object")
            if isinstance(item, dict):
                for key, child in item.items():
                    _check_text(key, f"a key of {where or 'the body'}")
                    stack.append((child, f"{where}.{key}" if where else key, depth + 1))
            else:
                stack.extend((child, f"{where}[{i}]", depth + 1) for i, child in enumerate(item))


def _check_text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        raise ApiError(
            400,
            f"{where[:80]}: a lone surrogate (\\u{code:04x}) is no character; send the text itself, "
            "or a high and a low surrogate together",
        ) from None
