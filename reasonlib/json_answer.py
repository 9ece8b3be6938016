"""Reading a JSON object out of a model's answer in linear time, with a cap on the input (pure).

Models talk around their JSON: prose before and after, a Markdown code fence, a wrapper object. The
judges' and the scanners' readers used a lazy DOTALL regular expression for fences and tried
``raw_decode`` at every ``{``; both are quadratic, so one 200 kB answer held a worker for half a
minute (issue 29, M5), and a server's ``max_tokens`` does not bound what it sends back. Here every
character is read a bounded number of times: fences by ``str.split``, and a decoding attempt that
fails at position ``e`` moves the next attempt past ``e`` (the attempts read disjoint spans).

Every failure is a ``JSONAnswerError`` (a ValueError) whatever went wrong underneath -- a cut fence,
JSON nested past the interpreter's recursion limit -- so a caller fails one item as malformed, never
its chunk or run (issue 29, L2).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

# An answer longer than this is refused unread: 1,000,000 characters is about 250,000 tokens,
# beyond any output limit a judge or scanner asks for, and reading it costs milliseconds.
MAX_ANSWER_CHARS = 1_000_000

_FENCE = "```"
_DECODER = json.JSONDecoder()
# Where an object can start: a brace, blanks, then a key's quote or the closing brace. Each match
# reads the blanks after one brace once, so the search is linear.
_OBJECT_START = re.compile(r'\{[ \t\n\r]*["}]')


class JSONAnswerError(ValueError):
    """No JSON object of the wanted kind could be read from the answer; the message says why."""


def check_length(text: str, limit: int = MAX_ANSWER_CHARS) -> str:
    """``text`` itself, or JSONAnswerError when it is longer than ``limit`` characters."""
    if len(text) > limit:
        raise JSONAnswerError(f"the answer is {len(text):,} characters long, more than {limit:,} (read none of it)")
    return text


def fenced_blocks(text: str) -> Iterator[str]:
    """The contents of the closed Markdown code fences of ``text``, in order, without the ``json``
    language tag and surrounding blanks. An unclosed last fence (an answer cut by max_tokens) is not
    a block."""
    parts = text.split(_FENCE)
    # parts[1], parts[3], ... lie between an opening and a closing fence; the last part follows
    # the last fence, so an odd index that is the last one is an unclosed fence's content.
    for i in range(1, len(parts) - 1, 2):
        block = parts[i]
        if block[:4].lower() == "json":
            block = block[4:]
        yield block.strip()


def loads_object(text: str) -> Any:
    """``json.loads`` with every failure a JSONAnswerError (RecursionError on deep nesting included)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise JSONAnswerError("the answer's JSON nests too deeply") from None
    except ValueError as exc:
        raise JSONAnswerError(f"not JSON ({exc})") from None


def first_object(value: Any, wanted: Callable[[dict], bool]) -> dict | None:
    """The first dict of ``value`` in document order (itself, then its members depth first) that is
    ``wanted``: an answer wrapped in another object (``{"result": {...}}``) is still found. Iterative,
    so no nesting depth can exhaust the stack."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if wanted(item):
                return item
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
    return None


class _Failed(Exception):
    def __init__(self, pos: int) -> None:
        self.pos = pos


def _decode_at(text: str, start: int) -> tuple[Any, int]:
    """The JSON value starting at ``text[start]`` and where it ends, or _Failed(where it failed).

    Decoded from a window of the text that doubles while the window's end may be why it failed:
    json's error computes its line number from the start of the document it was given, so a
    ``raw_decode(text, start)`` that fails costs O(start) -- quadratic over every ``{`` of a long
    answer. In a window the cost is that of the span read."""
    width = 256
    while True:
        end = min(len(text), start + width)
        window = text[start:end]
        try:
            value, used = _DECODER.raw_decode(window)
        except RecursionError:
            raise JSONAnswerError("the answer's JSON nests too deeply") from None
        except json.JSONDecodeError as exc:
            # A failure well inside the window is the text's own (an object ends with "}", so a
            # value never parses differently for being cut); near the window's end, or a string
            # still open when the window ended, may be the window's doing: read a wider one.
            cut = end < len(text)
            if not cut or (exc.pos < len(window) - 32 and not exc.msg.startswith("Unterminated string")):
                raise _Failed(start + max(exc.pos, 1)) from None
            width *= 2
        else:
            return value, start + used


def embedded_objects(text: str) -> Iterator[Any]:
    """The JSON values that start at a ``{`` of ``text`` and parse, in order; linear in ``len(text)``.

    An attempt that fails at position ``e`` (or succeeds and ends there) moves the search past
    ``e``: a ``{`` inside a span already read starts no new attempt, so the attempts read disjoint
    spans. Nesting deeper than the interpreter's recursion limit ends the search with JSONAnswerError."""
    found = _OBJECT_START.search(text)
    while found is not None:
        start = found.start()
        try:
            value, end = _decode_at(text, start)
        except _Failed as failed:
            # The decoder read text[start:failed.pos] as a valid prefix: a ``{`` inside it begins a
            # value that fails at the same place or one nested in this broken wrapper. Not searching
            # those is the price of linear time (the old reader tried each, quadratic).
            end = failed.pos
        else:
            yield value
        found = _OBJECT_START.search(text, end)


def find_object(text: str, wanted: Callable[[dict], bool] = lambda d: True, *,
                limit: int = MAX_ANSWER_CHARS) -> dict:
    """The JSON object of a model's answer: the whole (stripped) text, else the first closed code
    fence holding a ``wanted`` object, else the first ``wanted`` object embedded in the prose. At most
    ``limit`` characters are read; JSONAnswerError says why nothing was found."""
    text = check_length((text or "").strip(), limit)
    if not text:
        raise JSONAnswerError("the answer is empty")
    candidates = [text, *fenced_blocks(text)]
    for candidate in candidates:
        if not candidate.startswith(("{", "[")):
            continue
        try:
            value = loads_object(candidate)
        except JSONAnswerError:
            continue
        # The first wanted object in it; else a whole text or fence that is one object is the answer
        # as it stands (the caller's validation then says what it lacks).
        found = first_object(value, wanted) or (value if isinstance(value, dict) else None)
        if isinstance(found, dict):
            return found
    for value in embedded_objects(text):
        found = first_object(value, wanted)
        if found is not None:
            return found
    raise JSONAnswerError("no JSON object in the answer")
