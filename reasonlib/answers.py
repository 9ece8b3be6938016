"""Read a model's final answer and check it against the gold answer.

Pure functions only (no Django, no I/O) so importers, scorers and tests can
share them.
"""

from __future__ import annotations

import math
import re
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from reasonlib.answer_sentences import is_sentence, sentence_number

__all__ = [
    "answer_only",
    "check_answer",
    "extract_answer",
    "normalize_answer",
]

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
# The closing statement: what is read from the last paragraphs of an answer that names no answer.
_PARAGRAPH_RE = re.compile(r"\r?\n[^\S\r\n]*\r?\n")
_RULE_RE = re.compile(r"[-*_=\s]+")
_CONCLUSION_RE = re.compile(
    r"[\s*#>-]*+(?:so|thus|therefore|hence|overall|altogether|finally|in\s+total|in\s+conclusion|in\s+summary)\b",
    re.IGNORECASE,
)
# Possessive (*+): a line of blanks is taken once, never split between the two runs of blanks again.
_ANSWER_HEADING_RE = re.compile(
    r"^[^\S\r\n]*+(?:#++|\*\*)?+[^\S\r\n]*+(?:final\s++)?answer[^\S\r\n]*+(?:\*\*)?+[^\S\r\n]*+$",
    re.IGNORECASE | re.MULTILINE,
)
_MATH_RE = re.compile(r"\\\(.*?\\\)|\$[^$]*\$")
_WORDS_OUTSIDE_MATH_RE = re.compile(r"[A-Za-z]{2,}")
_OPERATOR_RE = re.compile(r"[+*×÷<>^]|\d\s*-\s*\d")
_OPEN_SENTENCE_RE = re.compile(r"[A-Za-z]\s*$")
# "= \\$3.50\\).", "= 31\\) slices.", "= \\mathbf{370}\\).": the value, closing math, up to three words of unit
# (matched once the wrappers and braces are dropped).
_RESULT_WRAPPERS_RE = re.compile(r"\\(?:mathbf|textbf|boxed|text|mathrm)\s*\{|[{}]")
_RESULT_ENDS_RE = re.compile(
    r"=\s*+(?:\\\$|\$|\\,)?+\s*+-?\d[\d,.]*+\s*+(?:\\[)\]]|\s)*+(?:[A-Za-z%°¢]+\.?\s*+){0,3}[.\s]*+"
)
_FINAL_WINDOW = 4000  # characters: a closing statement is near the end, and a runaway output is long


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


def _concise(value: str, source: str | None = None) -> str:
    """``value`` as the answer: a sentence ("He will be 21 years old in three years") gives its number, read
    from ``source`` (the same text with its bold kept: the stressed number is the answer) when given. A
    value with its unit ("18 dollars per day") and a word answer ("Tuesday") stay as they are."""
    if not is_sentence(value) or _to_fraction(normalize_answer(value)) is not None:
        return value
    return sentence_number(source if source is not None else value) or value


def _clean_value(value: str) -> str | None:
    # The answer phrase may be followed by more prose ("18. She spends ...").
    cut = _ANSWER_CUT_RE.search(value)
    if cut is not None:
        value = value[: cut.start()]
    cleaned = _unwrap_math(value)
    return _concise(cleaned, value) if cleaned else None


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
            return _concise(_unwrap_math(content)) or None
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
            return _concise(_unwrap_math(boxes[-1][2])) or None
        cleaned = _unwrap_math(value)
        # A "value" with a sentence break inside is prose, not an answer.
        if (
            not cleaned
            or len(cleaned) > _MAX_ANSWER_ONLY_LEN
            or _ANSWER_CUT_RE.search(cleaned)
        ):
            return None
        # The bold was stripped to match the line; the stressed number is read from the line as written.
        phrases = list(_ANSWER_PHRASE_RE.finditer(line))
        return _concise(cleaned, line[phrases[-1].end() :] if phrases else None)
    return None


def _final_statement(text: str) -> str | None:
    """The number of the closing statement when the text ends with one but names no answer: a line in
    bold or opened by "So"/"Thus"/... (``**Kylie collects 50 shells on Tuesday.**``, ``So the doorbell
    rang **175 times**.``), or a closing display that completes the sentence before it (``So the average is`` then
    ``\\[ 420/7 = 60 \\]``). A bare last computation ("13 * 2 = 26") is no statement: None."""
    paragraphs = [
        p for p in (p.strip() for p in _PARAGRAPH_RE.split(text[-_FINAL_WINDOW:]))
        # Rules ("---") and asides in parentheses after the statement are not it.
        if p and not _RULE_RE.fullmatch(p) and not (p.startswith("(") and p.endswith(")"))
    ]
    if not paragraphs:
        return None
    last = paragraphs[-1]
    if last.startswith(("\\[", "$$")) and last.endswith(("\\]", "$$")):
        lead = paragraphs[-2].splitlines()[-1] if len(paragraphs) > 1 else ""
        # The display completes the sentence before it ("So the average is", "the loser got").
        if (_CONCLUSION_RE.match(lead) or _OPEN_SENTENCE_RE.search(lead)) and "=" in last:
            return sentence_number(last[last.rindex("=") :])
        return None
    lines = [line for line in last.splitlines() if line.strip()]
    line = lines[-1]
    result = line[line.rindex("=") :].replace("**", "") if "=" in line else ""
    if _OPERATOR_RE.search(result):
        return None  # the last computation is unfinished ("= $<<41.472+8." of a cut-off output)
    if "**" in line or _CONCLUSION_RE.match(line):
        return sentence_number(line)
    if _CONCLUSION_RE.match(lines[0]) and len(lines) <= 3:
        return sentence_number(" ".join(lines))
    # A computation stated as a sentence: "Total \\(14 + 9 + 8 = 31\\) slices.", "Adding them up: 20 + 8 = 28."
    # The result ends the line (a unit at most): "2 + 3 = 6. and so the reasoning goes on" goes on.
    if result and _RESULT_ENDS_RE.fullmatch(_RESULT_WRAPPERS_RE.sub("", result)) and (
        line.rstrip().endswith(".") or _WORDS_OUTSIDE_MATH_RE.search(_MATH_RE.sub(" ", line))
    ):
        return sentence_number(result)
    return None


def _answer_heading(text: str, start: int) -> str | None:
    """The statement under the last "Answer" heading after ``start`` (``## Answer``, ``**Answer**`` alone
    on its line): the first line after it that gives a number."""
    headings = list(_ANSWER_HEADING_RE.finditer(text, start))
    if not headings:
        return None
    for line in text[headings[-1].end() :].splitlines()[:6]:
        if line.strip():
            found = sentence_number(line) if is_sentence(line) else _unwrap_math(line) or None
            if found is not None:
                return found
    return None


def _stated_answer(text: str, start: int) -> str | None:
    """An answer the text names after ``start``: the last "the answer is" / "Answer:" phrase with a
    value, else an "Answer" heading's statement."""
    matches = list(_ANSWER_PHRASE_RE.finditer(text, start))
    for m in reversed(matches):
        line_end = text.find("\n", m.end())
        value = _clean_value(text[m.end() : line_end if line_end >= 0 else len(text)])
        if value:
            return value
    return _answer_heading(text, start)


def _extract_untagged(text: str) -> str | None:
    boxes = _boxes(text)
    if boxes:
        # An answer named after the last box outranks it: the box held a step ("= \\boxed{\\$130}"), then
        # "## Answer / Colby can see **1 more movie**".
        return _stated_answer(text, boxes[-1][1]) or _concise(_unwrap_math(boxes[-1][2])) or None
    for pattern in (_HASH_RE, _A_LINE_RE):
        matches = list(pattern.finditer(text))
        if matches:
            value = _clean_value(matches[-1].group(1))
            if value:
                return value
    return _stated_answer(text, 0) or _final_statement(text)


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
# Normalisation and equivalence
# --------------------------------------------------------------------------

_TEXT_CMD_RE = re.compile(
    r"\\(?:text|textbf|textrm|mathrm|mathbf|mbox|operatorname)\s*\{"
)
_LATEX_FRAC_RE = re.compile(r"^(-?)\\[dt]?frac\s*\{\s*(-?\d+)\s*\}\s*\{\s*(\d+)\s*\}$")
_SPACE_GROUP_RE = re.compile(r"(?<=\d)(?:\\,|[\u2009\u202f\u00a0])(?=\d{3}(?!\d))")
_CURRENCY_RE = re.compile(r"[€£¥₹₱₩]")
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
_PROSE_RE = re.compile(r"[A-Za-z]'[A-Za-z]")  # John's, isn't: no mathematical notation writes these
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
    s = s.replace("\\$", "$").replace("\\%", "%").replace("{,}", ",").replace(",\\!", ",")
    # Thousands grouped by a thin or no-break space ("130\u202f000"); other currencies than "$".
    s = _SPACE_GROUP_RE.sub("", s)
    s = _CURRENCY_RE.sub("", s)
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
    if pred_value is None and is_sentence(predicted):
        # An answer stored as a sentence ("He will be 21 years old in three years"): its number.
        number = sentence_number(predicted)
        if number is not None:
            pred_norm = normalize_answer(number)
            pred_value = _to_fraction(pred_norm)
    if pred_value is not None and gold_value is not None:
        return pred_value == gold_value
    if not pred_norm or not gold_norm:
        return False
    if (_WORDS_RE.fullmatch(pred_norm) or _WORDS_RE.fullmatch(gold_norm)
            or _PROSE_RE.search(pred_norm) or _PROSE_RE.search(gold_norm)):
        # math-verify would read "hello" as the product h*e*l*l*o, so word
        # answers ("yes", "Tuesday") are compared as text; so is an answer
        # with a possessive or contraction ("10+John's age"): prose, whatever
        # numbers it holds (and loading math-verify for it cost more than
        # all the other checks of a GSM8K import together).
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
