"""Turn a model's raw output into steps and a final answer, and check answers.

Pure functions only (no Django, no I/O) so importers, scorers and tests can
share them.  Every step keeps exact character offsets into the raw output so
the UI can highlight the original text: for every returned ``Segment``
``raw[seg.start:seg.end] == seg.text`` holds.
"""

from __future__ import annotations

import itertools
import math
import re
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any, NamedTuple

__all__ = [
    "SEGMENTERS",
    "ParsedTrace",
    "Segment",
    "TaggedParts",
    "answer_only",
    "check_answer",
    "extract_answer",
    "normalize_answer",
    "parse_trace",
    "segment",
    "split_tagged",
]


# --------------------------------------------------------------------------
# Segmentation
# --------------------------------------------------------------------------


class Segment(NamedTuple):
    # A named tuple, not a dataclass: a long thought has thousands of steps, and a tuple is built in a
    # fraction of a frozen dataclass's time (same fields, same equality between segments, immutable).
    text: str  # stripped step text
    start: int  # offset into the ORIGINAL raw string
    end: int  # raw[start:end] == text


SEGMENTERS: tuple[str, ...] = ("lines", "paragraphs", "markers", "sentences")

# \r\n, lone \r and \n all end a line; \r\n must be tried first so it counts once.
_NEWLINE = r"(?:\r\n|\r(?!\n)|\n)"
_LINE_RE = re.compile(r"[^\r\n]+")
# A blank line is a newline, optional horizontal whitespace, another newline.
_PARAGRAPH_BREAK = _NEWLINE + r"[^\S\r\n]*" + _NEWLINE + r"\s*"
# Captured, so that re.split keeps the breaks (_paragraph_segments counts offsets with them); the second is the
# same break in a text without "\r", where _NEWLINE can only match "\n".
_PARAGRAPH_SPLIT_RE = re.compile(f"({_PARAGRAPH_BREAK})")
_PARAGRAPH_SPLIT_LF_RE = re.compile(r"(\n[^\S\r\n]*\n\s*)")
# Markers only count at the start of a line (after optional markdown such as
# `**`, `###`, `-`, `>`) so prose like "as shown in Step 1: ..." does not split.
# Possessive (*+, ++): a run of markdown characters is taken once, never split again ("(?:[#>*_-]+...)*"
# tried every split of a long run of dashes in model output).
_MARKER_RE = re.compile(
    r"^[^\S\r\n]*+(?:[#>*_-]++[^\S\r\n]*+)*+step[^\S\r\n]*+\d++[^\S\r\n]*+[:.)]",
    re.IGNORECASE | re.MULTILINE,
)
# Candidate sentence ends: terminal punctuation plus any closing quotes/brackets.
_SENTENCE_END_RE = re.compile(r"[.?!]+[\"'\u201d\u2019)\]]*")
_ABBREVIATIONS = frozenset(
    {
        "e.g", "i.e", "eg", "ie", "cf", "etc", "vs", "approx", "appr", "ca",
        "mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "no", "fig", "eq",
        "eqn", "min", "max", "avg", "est", "resp", "incl", "dept",
    }
)  # fmt: skip
_WORD_BEFORE_DOT_RE = re.compile(r"([A-Za-z][A-Za-z.]*)$")
# "1." / "a." / "(2." at the start of a sentence are list labels, not sentences.
_LIST_LABEL_RE = re.compile(r"\(?(?:\d{1,3}|[A-Za-z])$")


def _strip_span(raw: str, start: int, end: int, offset: int) -> Segment | None:
    """Shrink [start, end) to its non-whitespace core, or None if nothing is left."""
    chunk = raw[start:end]
    text = chunk.strip()
    if not text:
        return None
    # Most spans (paragraphs of a long thought) need no stripping: skip the second scan then.
    s = start if len(text) == len(chunk) else start + len(chunk) - len(chunk.lstrip())
    return Segment(text=text, start=s + offset, end=s + len(text) + offset)


def _spans_to_segments(
    raw: str, spans: list[tuple[int, int]], offset: int
) -> list[Segment]:
    out: list[Segment] = []
    for start, end in spans:
        seg = _strip_span(raw, start, end, offset)
        if seg is not None:
            out.append(seg)
    return out


def _paragraph_segments(raw: str, offset: int) -> list[Segment]:
    """The paragraphs of ``raw`` as stripped segments, in one pass (a long thought has hundreds).

    The text is cut by ``re.split`` with the break captured (the pieces alternate paragraph, break), so
    offsets are running sums of lengths; the loop does no match-object calls and no slicing. A text
    without "\r" is cut by the same pattern for "\n" only, which the regular expression engine finds by
    its first character instead of trying the newline alternation at every position."""
    out: list[Segment] = []
    append = out.append
    # tuple.__new__ builds the named tuple in C; Segment(...) runs its generated __new__ in Python.
    new = tuple.__new__
    pieces = (_PARAGRAPH_SPLIT_RE if "\r" in raw else _PARAGRAPH_SPLIT_LF_RE).split(raw)
    pos = offset
    it = iter(pieces)
    for chunk in it:
        text = chunk.strip()
        if text:
            # Most paragraphs need no stripping: skip the second scan then.
            start = pos if len(text) == len(chunk) else pos + len(chunk) - len(chunk.lstrip())
            append(new(Segment, (text, start, start + len(text))))
        pos += len(chunk) + len(next(it, ""))  # the paragraph and the break after it
    return out


def _line_spans(raw: str) -> list[tuple[int, int]]:
    return [m.span() for m in _LINE_RE.finditer(raw)]


def _marker_spans(raw: str) -> list[tuple[int, int]]:
    starts = [m.start() for m in _MARKER_RE.finditer(raw)]
    # Text before the first marker is a step of its own (often a preamble);
    # with no marker at all the whole text is one step.
    bounds = [0, *[s for s in starts if s > 0], len(raw)]
    return list(itertools.pairwise(bounds))


def _is_sentence_end(line: str, sent_start: int, m: re.Match[str]) -> bool:
    rest = line[m.end() :]
    if rest and not rest[0].isspace():
        # "3.5", "e.g.," and "x.y" never end a sentence.
        return False
    nxt = rest.lstrip()
    if nxt and not (nxt[0].isupper() or nxt[0].isdigit() or nxt[0] in "$\\\"'\u201c("):
        return False
    before = line[sent_start : m.start()]
    if m.group().startswith(".") and len(m.group().rstrip("\"'\u201d\u2019)]")) == 1:
        word = _WORD_BEFORE_DOT_RE.search(before)
        if word and word.group(1).lower() in _ABBREVIATIONS:
            return False
        if _LIST_LABEL_RE.fullmatch(before.strip()):
            return False
    return True


def _sentence_spans(raw: str) -> list[tuple[int, int]]:
    # Line breaks are hard boundaries: model traces put one statement per line
    # far more often than they hard-wrap prose, and an unpunctuated final
    # "A: 18" line must not be glued to the sentence before it.
    spans: list[tuple[int, int]] = []
    for line_start, line_end in _line_spans(raw):
        line = raw[line_start:line_end]
        pos = 0
        for m in _SENTENCE_END_RE.finditer(line):
            if _is_sentence_end(line, pos, m):
                spans.append((line_start + pos, line_start + m.end()))
                pos = m.end()
        spans.append((line_start + pos, line_end))
    return spans


def segment(raw: str, method: str = "lines", offset: int = 0) -> list[Segment]:
    """Split ``raw`` into stripped, non-empty steps with offsets (+``offset``).

    ``markers`` keeps the marker ("Step 2:") in the step text so offsets cover
    what the reader sees; with no marker present the whole text is one step.
    ``sentences`` treats line breaks as boundaries too.
    """
    if method == "lines":
        spans = _line_spans(raw)
    elif method == "paragraphs":
        return _paragraph_segments(raw, offset)
    elif method == "markers":
        spans = _marker_spans(raw)
    elif method == "sentences":
        spans = _sentence_spans(raw)
    else:
        raise ValueError(
            f"unknown segmentation method {method!r}; allowed: {', '.join(SEGMENTERS)}"
        )
    return _spans_to_segments(raw, spans, offset)


# --------------------------------------------------------------------------
# Answer detection and extraction
# --------------------------------------------------------------------------

_BOX_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")
# Markdown bold around labels/values, but not Python-style powers like 2**10.
_BOLD_RE = re.compile(r"(?:^|(?<=[\s:]))\*\*|\*\*(?=[\s:]|$)")
_ANSWER_TAG_RE = re.compile(
    r"<\s*answer\s*>(.*?)(?:<\s*/\s*answer\s*>|$)", re.IGNORECASE | re.DOTALL
)
_HASH_RE = re.compile(r"^[^\S\r\n]*####[^\S\r\n]*(\S[^\r\n]*)", re.MULTILINE)
_A_LINE_RE = re.compile(r"^[^\S\r\n]*A:[^\S\r\n]*(\S[^\r\n]*)", re.MULTILINE)
# Only the phrase: its value runs to the end of the line, and a later phrase
# on the same line ("... is 17. Wait, the final answer is 18") must win.
_ANSWER_PHRASE_RE = re.compile(
    r"(?:\banswer\s+is|\banswer\s*:)[^\S\r\n]*:?[^\S\r\n]*(?=\S)", re.IGNORECASE
)
# Sentence end inside a captured answer ("18. She ..."), not a decimal point.
_ANSWER_CUT_RE = re.compile(r"[.!?;](?=\s)")
_HOPE_RE = re.compile(r"\s*I hope it is correct\.?\s*$", re.IGNORECASE)

# Lines that only state the answer.  The optional lead-in words are the usual
# connectives; anything longer ("So she makes 18 dollars, the answer is 18")
# is reasoning, not an answer line.
_ANSWER_ONLY_RES: tuple[re.Pattern[str], ...] = (
    re.compile(r"A:\s*(\S.*)", re.DOTALL),
    re.compile(r"####\s*(\S.*)", re.DOTALL),
    re.compile(
        r"(?:(?:so|thus|therefore|hence|finally|overall|in\s+conclusion)\s*,?\s+)?"
        r"(?:the\s+)?(?:final\s+)?answer\s+is\s*:?\s*(\S.*)",
        re.IGNORECASE | re.DOTALL,
    ),
    re.compile(
        r"(?:the\s+)?(?:final\s+)?answer\s*:\s*(\S.*)", re.IGNORECASE | re.DOTALL
    ),
    re.compile(
        r"<\s*answer\s*>(.*?)(?:<\s*/\s*answer\s*>)?", re.IGNORECASE | re.DOTALL
    ),
)
_MAX_ANSWER_ONLY_LEN = 80


def _balanced_group(text: str, open_brace: int) -> tuple[str, int] | None:
    """Content of the {...} group opening at ``open_brace`` and the index after it."""
    depth = 0
    for i in range(open_brace, len(text)):
        ch = text[i]
        if ch == "{" and (i == 0 or text[i - 1] != "\\"):
            depth += 1
        elif ch == "}" and text[i - 1] != "\\":
            depth -= 1
            if depth == 0:
                return text[open_brace + 1 : i], i + 1
    return None  # unbalanced: truncated output


def _boxes(text: str) -> list[tuple[int, int, str]]:
    """All complete \\boxed{...}/\\fbox{...} as (start, end, content)."""
    found: list[tuple[int, int, str]] = []
    for m in _BOX_RE.finditer(text):
        group = _balanced_group(text, m.end() - 1)
        if group is not None:
            found.append((m.start(), group[1], group[0]))
    return found


def _unwrap_math(s: str) -> str:
    """Remove presentation wrappers that enclose the whole answer."""
    prev = None
    while s != prev:
        prev = s
        s = s.strip()
        s = _HOPE_RE.sub("", s)
        s = _BOLD_RE.sub("", s).strip()
        s = re.sub(r"(?<!\.)\.$", "", s).strip()  # trailing period, not "..."
        for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
            inner = (
                s[len(left) : -len(right)] if len(s) > len(left) + len(right) else ""
            )
            if (
                s.startswith(left)
                and s.endswith(right)
                and inner.strip()
                and "$" not in inner
            ):
                s = inner
                break
        boxes = _boxes(s)
        if len(boxes) == 1 and boxes[0][0] == 0 and boxes[0][1] == len(s):
            s = boxes[0][2]
    return s.strip()


def _clean_value(value: str) -> str | None:
    # The answer phrase may be followed by more prose ("18. She spends ...").
    cut = _ANSWER_CUT_RE.search(value)
    if cut is not None:
        value = value[: cut.start()]
    cleaned = _unwrap_math(value)
    return cleaned or None


def answer_only(line: str) -> str | None:
    """The answer if ``line`` does nothing but state the final answer, else None."""
    s = _BOLD_RE.sub("", line.strip()).strip()
    if not s or len(s) > _MAX_ANSWER_ONLY_LEN + 40:
        return None
    boxes = _boxes(s)
    if boxes:
        # A line that is only a boxed value, possibly in math delimiters.
        last_start, last_end, content = boxes[-1]
        if not re.sub(r"[\s$.]|\\[\[\]()]", "", s[:last_start] + s[last_end:]):
            return _unwrap_math(content) or None
    # Several lines are never "a line that only states the answer", except an
    # <Answer> section spread over lines.
    patterns = _ANSWER_ONLY_RES[-1:] if "\n" in s or "\r" in s else _ANSWER_ONLY_RES
    for pattern in patterns:
        m = pattern.fullmatch(s)
        if m is None:
            continue
        value = m.group(1).strip()
        # "Final Answer: The final answer is $x$. I hope it is correct."
        nested = answer_only(value) if value != s else None
        if nested is not None:
            return nested
        value = _HOPE_RE.sub("", value)
        boxes = _boxes(value)
        if boxes:
            return _unwrap_math(boxes[-1][2]) or None
        cleaned = _unwrap_math(value)
        # A "value" with a sentence break inside is prose, not an answer.
        if (
            not cleaned
            or len(cleaned) > _MAX_ANSWER_ONLY_LEN
            or _ANSWER_CUT_RE.search(cleaned)
        ):
            return None
        return cleaned
    return None


def _extract_untagged(text: str) -> str | None:
    boxes = _boxes(text)
    if boxes:
        return _unwrap_math(boxes[-1][2]) or None
    for pattern in (_HASH_RE, _A_LINE_RE):
        matches = list(pattern.finditer(text))
        if matches:
            value = _clean_value(matches[-1].group(1))
            if value:
                return value
    matches = list(_ANSWER_PHRASE_RE.finditer(text))
    for m in reversed(matches):
        line_end = text.find("\n", m.end())
        value = _clean_value(text[m.end() : line_end if line_end >= 0 else len(text)])
        if value:
            return value
    return None


def extract_answer(text: str) -> str | None:
    """Final answer of a whole output (see module spec for the priority order)."""
    tags = list(_ANSWER_TAG_RE.finditer(text))
    for m in reversed(tags):
        inner = m.group(1)
        if inner.strip():
            # The tag may itself hold "The answer is \boxed{18}".
            return _extract_untagged(inner) or _unwrap_math(inner) or None
    return _extract_untagged(text)


# --------------------------------------------------------------------------
# Tagged outputs
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class TaggedParts:
    thought: str | None  # leading raw-thought text before <Reasoning> (None if empty)
    reasoning: str | None
    answer: str | None
    reasoning_start: int  # offset of reasoning text in raw (for segment offsets)


_REASONING_OPEN_RE = re.compile(r"<\s*reasoning\s*>", re.IGNORECASE)
_REASONING_CLOSE_RE = re.compile(r"<\s*/\s*reasoning\s*>", re.IGNORECASE)
_ANSWER_OPEN_RE = re.compile(r"<\s*answer\s*>", re.IGNORECASE)
_ANSWER_CLOSE_RE = re.compile(r"<\s*/\s*answer\s*>", re.IGNORECASE)
_THINK_WRAPPER_RE = re.compile(
    r"^\s*<\s*think\s*>|<\s*/\s*think\s*>\s*$", re.IGNORECASE
)


def _stripped(raw: str, start: int, end: int) -> tuple[str | None, int]:
    chunk = raw[start:end]
    text = chunk.strip()
    if not text:
        return None, start
    return text, start + len(chunk) - len(chunk.lstrip())


def split_tagged(raw: str) -> TaggedParts | None:
    """Split a <Reasoning>/<Answer> tagged output; None if it has no such tags.

    ``reasoning`` is stripped and ``raw[reasoning_start:][:len(reasoning)]``
    equals it.  Without a <Reasoning> tag the text before <Answer> is the
    reasoning (there is nothing else to audit) and ``thought`` is None.
    When there is no reasoning, ``reasoning_start`` is where it would begin.
    """
    r_open = _REASONING_OPEN_RE.search(raw)
    a_open = _ANSWER_OPEN_RE.search(raw, r_open.end() if r_open else 0)
    if r_open is None and a_open is None:
        return None

    answer: str | None = None
    if a_open is not None:
        a_close = _ANSWER_CLOSE_RE.search(raw, a_open.end())
        answer, _ = _stripped(
            raw, a_open.end(), a_close.start() if a_close else len(raw)
        )

    if r_open is None:
        assert a_open is not None
        reasoning, r_start = _stripped(raw, 0, a_open.start())
        return TaggedParts(
            thought=None, reasoning=reasoning, answer=answer, reasoning_start=r_start
        )

    thought_text = _THINK_WRAPPER_RE.sub("", raw[: r_open.start()]).strip() or None
    r_close = _REASONING_CLOSE_RE.search(raw, r_open.end())
    # A missing </Reasoning> is closed by <Answer> or by the end of the text.
    candidates = [len(raw)]
    if r_close is not None:
        candidates.append(r_close.start())
    if a_open is not None:
        candidates.append(a_open.start())
    reasoning, r_start = _stripped(raw, r_open.end(), min(candidates))
    return TaggedParts(
        thought=thought_text,
        reasoning=reasoning,
        answer=answer,
        reasoning_start=r_start,
    )


# --------------------------------------------------------------------------
# Whole-trace parsing
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedTrace:
    steps: list[Segment]
    answer: str | None
    thought: str | None  # from split_tagged, else None


def _drop_trailing_answer(
    raw: str, steps: list[Segment]
) -> tuple[list[Segment], str | None]:
    """Remove a final answer-only step (or answer-only last line of the last step)."""
    if not steps:
        return steps, None
    last = steps[-1]
    found = answer_only(last.text)
    if found is not None:
        return steps[:-1], found
    # Paragraph/marker steps often end with the answer line; it is not a step.
    lines = last.text.rsplit("\n", 1)
    if len(lines) == 2:
        found = answer_only(lines[1])
        if found is not None:
            head = lines[0].rstrip()
            trimmed = Segment(text=head, start=last.start, end=last.start + len(head))
            return [*steps[:-1], trimmed] if head else steps[:-1], found
    return steps, None


def parse_trace(raw: str, method: str = "lines") -> ParsedTrace:
    """Steps, final answer and raw thought of one model output."""
    if not raw.strip():
        segment("", method)  # still reject an unknown method
        return ParsedTrace(steps=[], answer=None, thought=None)
    parts = split_tagged(raw)
    if parts is not None:
        steps = segment(parts.reasoning or "", method, parts.reasoning_start)
    else:
        steps = segment(raw, method)
    steps, answer = _drop_trailing_answer(raw, steps)
    if parts is not None and parts.answer is not None:
        # An explicit <Answer> section outranks a stated answer line.
        answer = extract_answer(f"<Answer>{parts.answer}</Answer>") or answer
    if answer is None:
        answer = extract_answer(raw)
    return ParsedTrace(
        steps=steps, answer=answer, thought=parts.thought if parts else None
    )


# --------------------------------------------------------------------------
# Normalisation and equivalence
# --------------------------------------------------------------------------

_TEXT_CMD_RE = re.compile(
    r"\\(?:text|textbf|textrm|mathrm|mathbf|mbox|operatorname)\s*\{"
)
_LATEX_FRAC_RE = re.compile(r"^(-?)\\[dt]?frac\s*\{\s*(-?\d+)\s*\}\s*\{\s*(\d+)\s*\}$")
_THOUSANDS_RE = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:\s*/\s*\d+)?"
# A number followed only by words (units, "dollars", "per hour", "km/h").
_NUMBER_WORDS_RE = re.compile(rf"^({_NUMBER})\s*([A-Za-z][A-Za-z\s./'-]*)$")
_SCALE = {
    "thousand": 10**3,
    "million": 10**6,
    "billion": 10**9,
    "trillion": 10**12,
}
_DECIMAL_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_WORDS_RE = re.compile(r"[A-Za-z]{2,}(?:[\s'-]+[A-Za-z]+)*")
_RATIO_RE = re.compile(r"([+-]?\d+)\s*/\s*(\d+)")


def _replace_commands(s: str, pattern: re.Pattern[str]) -> str:
    """Replace ``\\cmd{X}`` by ``X`` for every match of ``pattern`` (nested-safe)."""
    while True:
        m = pattern.search(s)
        if m is None:
            return s
        group = _balanced_group(s, m.end() - 1)
        if group is None:
            return s[: m.start()] + s[m.end() :]
        s = s[: m.start()] + group[0] + s[group[1] :]


def normalize_answer(s: str) -> str:
    """Canonical surface form of an answer, for comparison.

    Percentages keep their number: "40%" and "40 percent" become "40",
    because GSM8K-style questions ask "what percent..." and store "40" as the
    gold answer (so "40%" does NOT equal "0.4").  Scale words are applied
    ("1.8 billion" -> "1800000000"); other trailing words are treated as units
    and dropped ("18 dollars" -> "18").
    """
    s = s.strip()
    s = _replace_commands(s, _BOX_RE)
    s = _replace_commands(s, _TEXT_CMD_RE)
    s = s.replace("\\$", "$").replace("\\%", "%").replace("{,}", ",")
    s = re.sub(r"\\[,!;: ]|\\quad|\\qquad", "", s)
    s = re.sub(r"\^\s*\{?\\circ\}?|°", "", s)
    s = s.replace("$", "")
    s = _BOLD_RE.sub("", s)
    s = re.sub(r"\s+", " ", s).strip()
    s = re.sub(r"(?<!\.)\.$", "", s).strip()
    s = _THOUSANDS_RE.sub("", s)
    s = re.sub(r"(?<=\d)\s*%$", "", s)
    m = _NUMBER_WORDS_RE.match(s)
    if m is not None:
        number, words = m.group(1), m.group(2).strip().rstrip(".").lower()
        scale = _SCALE.get(words)
        value = _to_fraction(number)
        if scale is not None and value is not None:
            s = _format_fraction(value * scale)
        else:
            s = number.replace(" ", "")
    m = _LATEX_FRAC_RE.match(s)
    if m is not None:
        s = f"{m.group(1)}{m.group(2)}/{m.group(3)}".replace("--", "")
    return s


def _format_fraction(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else str(value)


def _to_fraction(s: str) -> Fraction | None:
    """Exact value of an int, decimal or a/b string, else None."""
    s = s.strip()
    try:
        if _DECIMAL_RE.fullmatch(s):
            # Via Decimal: Fraction(str) hits Python's int-string digit limit
            # on runaway outputs like "3333...3".
            return Fraction(Decimal(s))
        m = _RATIO_RE.fullmatch(s)
        if m is not None and int(m.group(2)) != 0:
            return Fraction(int(m.group(1)), int(m.group(2)))
    except (ValueError, ZeroDivisionError, OverflowError, InvalidOperation):
        return None
    return None


def _mv_parse(s: str, timeout: int | None) -> list[Any]:
    from math_verify import parse

    # Inside math delimiters math-verify parses the whole expression; bare
    # text mode grabs a single number ("1+x^2" -> 1, "(1, 2)" -> 2).
    parsed = parse(f"${s}$", parsing_timeout=timeout, raise_on_error=True)  # type: ignore[arg-type]
    if not parsed:
        parsed = parse(s, parsing_timeout=timeout, raise_on_error=True)  # type: ignore[arg-type]
    return list(parsed)


def _mv_equal(predicted: str, gold: str, timeout: int | None) -> bool:
    from math_verify import verify

    gold_parsed = _mv_parse(gold, timeout)
    pred_parsed = _mv_parse(predicted, timeout)
    if not gold_parsed or not pred_parsed:
        return False
    return bool(
        verify(gold_parsed, pred_parsed, timeout_seconds=timeout, raise_on_error=True)  # type: ignore[arg-type]
    )


def check_answer(predicted: str | None, gold: str, timeout: float = 5.0) -> bool | None:
    """True/False for (in)equivalence; None when undecided (timeout or error)."""
    if predicted is None or not predicted.strip():
        return False
    pred_norm, gold_norm = normalize_answer(predicted), normalize_answer(gold)
    pred_value, gold_value = _to_fraction(pred_norm), _to_fraction(gold_norm)
    if pred_value is not None and gold_value is not None:
        return pred_value == gold_value
    if not pred_norm or not gold_norm:
        return False
    if _WORDS_RE.fullmatch(pred_norm) or _WORDS_RE.fullmatch(gold_norm):
        # math-verify would read "hello" as the product h*e*l*l*o, so word
        # answers ("yes", "Tuesday") are compared as text.
        return pred_norm.casefold() == gold_norm.casefold()

    if threading.current_thread() is threading.main_thread():
        # math-verify's own timeout uses signal.alarm, which takes whole seconds.
        seconds = max(1, math.ceil(timeout))
        try:
            return _mv_equal(pred_norm, gold_norm, seconds)
        except Exception:  # noqa: BLE001 - any math-verify failure means "undecided"
            return None

    # signal.alarm only works in the main thread, so elsewhere we disable
    # math-verify's timeouts and bound the wait ourselves.  A daemon thread
    # (rather than a ThreadPoolExecutor, whose workers are joined at exit) is
    # used so a runaway sympy computation cannot block process shutdown; it is
    # abandoned, not killed, when it overruns.
    future: Future[bool] = Future()

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(_mv_equal(pred_norm, gold_norm, None))
        except BaseException as exc:  # noqa: BLE001 - reported via the future
            future.set_exception(exc)

    threading.Thread(target=work, name="check_answer", daemon=True).start()
    try:
        return future.result(timeout=timeout)
    except FutureTimeout:
        return None
    except Exception:  # noqa: BLE001 - any math-verify failure means "undecided"
        return None
