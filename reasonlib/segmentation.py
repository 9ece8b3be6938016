"""Cut a model's output into steps with exact offsets; split ReasonAudit's tagged format; parse a whole trace.

Pure functions only (no Django, no I/O) so importers, scorers and tests can
share them.  Every step keeps exact character offsets into the raw output so
the UI can highlight the original text: for every returned ``Segment``
``raw[seg.start:seg.end] == seg.text`` holds.  The final answer is read by
``reasonlib.answers``.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import NamedTuple

from reasonlib.answers import answer_only, extract_answer

__all__ = [
    "SEGMENTERS",
    "ParsedTrace",
    "Segment",
    "TaggedParts",
    "parse_trace",
    "segment",
    "split_tagged",
]


class Segment(NamedTuple):
    # A named tuple, not a dataclass: a long thought has thousands of steps, and a tuple is built in a
    # fraction of a frozen dataclass's time (same fields, same equality between segments, immutable).
    text: str  # stripped step text
    start: int  # offset into the ORIGINAL raw string
    end: int  # raw[start:end] == text


SEGMENTERS: tuple[str, ...] = ("lines", "paragraphs", "markers", "sentences", "moves")

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
_WORD_BEFORE_DOT_RE = re.compile(r"(?<![A-Za-z.])([A-Za-z][A-Za-z.]*)$")
_NEXT_CHAR_RE = re.compile(r"\S")
_LOOKBACK = 12  # longer than every abbreviation ("approx", "e.g") and list label ("(12")
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
    end = m.end()
    if end < len(line) and not line[end].isspace():
        # "3.5", "e.g.," and "x.y" never end a sentence.
        return False
    # The next character after the spaces; the spaces are skipped by a regex from ``end`` (no slice of the
    # rest of the line per candidate: a long line of "1. 1. 1." stays linear).
    nxt_m = _NEXT_CHAR_RE.search(line, end)
    nxt = nxt_m.group() if nxt_m else ""
    if nxt and not (nxt.isupper() or nxt.isdigit() or nxt in "$\\\"'\u201c("):
        return False
    if m.group().startswith(".") and len(m.group().rstrip("\"'\u201d\u2019)]")) == 1:
        # Only the word right before the dot matters: look back at most a few characters.
        before = line[max(sent_start, m.start() - _LOOKBACK) : m.start()]
        word = _WORD_BEFORE_DOT_RE.search(before)
        if word and word.group(1).lower() in _ABBREVIATIONS and (word.group(1).lower() != "no" or nxt.isdigit()):
            # "No." abbreviates a number only before one ("No. 5"); "Wait, no. We ..." ends a sentence.
            return False
        if m.start() - sent_start <= _LOOKBACK and _LIST_LABEL_RE.fullmatch(before.strip()):
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


# -- reasoning moves ----------------------------------------------------------------------------------

# Discourse markers that open a new move of a reasoning model's thought: a doubt, a check, a correction,
# another approach. Only at the start of a sentence (or line), where they open one.
_MOVE_RE = re.compile(
    r"(?:[*_]{1,2})?(?:"
    r"(?:but\s+)?wait|hmm+|alternatively|actually|hold\s+on|oops|on\s+second\s+thought|"
    r"let\s+me\s+(?:check|verify|double[- ]check|re-?check|re-?compute|re-?calculate|recount|re-?examine|"
    r"reconsider|think\s+again|see\s+again|confirm)|"
    r"let's\s+(?:check|verify|double[- ]check|re-?check|confirm)|double[- ]check|"
    r"no(?=,)|but\s+no(?=,)"
    r")(?![A-Za-z])",
    re.IGNORECASE,
)
# A paragraph this long holds several moves whatever its markers: it is cut into sentences.
_LONG_PARAGRAPH = 800


def _moves_spans(raw: str) -> list[tuple[int, int]]:
    """Steps that follow a thought's moves: paragraphs, cut before every sentence that opens a new move
    ("Wait, ...", "Hmm.", "Alternatively, ...", "Let me check", "Actually", "No, ..."); a thought without
    paragraph breaks, and a paragraph over ``_LONG_PARAGRAPH`` characters, cut into sentences."""
    paragraphs = [(seg.start, seg.end) for seg in _paragraph_segments(raw, 0)]
    if not paragraphs:
        return []
    by_sentence = len(paragraphs) == 1
    sentences = _sentence_spans(raw)
    spans: list[tuple[int, int]] = []
    si = 0
    for p_start, p_end in paragraphs:
        whole = by_sentence or p_end - p_start > _LONG_PARAGRAPH
        start = p_start
        while si < len(sentences) and sentences[si][1] <= p_end:
            s, _e = sentences[si]
            si += 1
            s += len(raw[s:_e]) - len(raw[s:_e].lstrip())
            if s <= start:
                continue
            if whole or _MOVE_RE.match(raw, s):
                spans.append((start, s))
                start = s
        spans.append((start, p_end))
    return spans


# -- formulas are never cut -----------------------------------------------------------------------------

# Display math, inline math and LaTeX environments, found by their delimiters in one pass.
# Not "\\\\[4pt]", the line break of an aligned environment.
_MATH_TOKEN_RE = re.compile(r"(?<!\\)\\[\[\]()]|\$\$|\\(begin|end)\{([A-Za-z*]+)\}")
# How far a delimiter may be from its closing one: an unclosed "\(" or "\[" (a cut-off thought) must not
# glue the rest of the text together.
_MAX_DISPLAY = 6000
_MAX_INLINE = 600
# A line that continues the formula of the line before: "= 160 minutes", "+ 20", "\times 3", "&= 12".
_CONTINUATION_RE = re.compile(
    r"^[^\S\r\n]*+(?:[=+×÷≈≤≥&]|\\(?:cdot|times|approx|Rightarrow|Longrightarrow|implies|quad|le|ge)(?![A-Za-z]))",
    re.MULTILINE,
)
# What a lead-in ending in ":" introduces when it is a formula: math, or a first line that states a relation
# ("a = -25/288", "3^1 = 3", "0.0001 < 1/(kπ)") or holds inline math, looked at over its first 300
# characters, or a computation ("-3125 + 5950 - 3775").
_FORMULA_START_RE = re.compile(
    r"\\[\[(]|\$\$|\\begin\{|[^\r\n]{0,300}?(?:[=<>≈≤≥]|\\\()|[\s(+-]*+\d[\d.,]*+\s*+[-+*/^×÷(]"
)
_TRIGGER_RE = re.compile(r"\\[\[(]|\$\$|\\begin\{|:[^\S\r\n]*[\r\n]")


def _math_regions(raw: str) -> list[tuple[int, int]]:
    """Spans of ``raw`` that no step boundary may cut, sorted and disjoint: display math (``\\[ ... \\]``,
    ``$$ ... $$``, ``\\begin{X} ... \\end{X}``), inline math (``\\( ... \\)``), and every line break before a
    line that continues a formula."""
    regions: list[tuple[int, int]] = []
    opener = ""  # "[", "(", "$$" or the environment's name
    open_at = depth = 0
    for m in _MATH_TOKEN_RE.finditer(raw):
        tok, pos = m.group(), m.start()
        if opener and pos - open_at > (_MAX_INLINE if opener == "(" else _MAX_DISPLAY):
            opener = ""  # never closed within reach: no region, and this token starts afresh
        if not opener:
            if tok == "\\[" or tok == "\\(":
                opener, open_at = tok[1], pos
            elif tok == "$$":
                opener, open_at = "$$", pos
            elif m.group(1) == "begin":
                opener, open_at, depth = "env:" + m.group(2), pos, 1
            continue
        if opener == "[" and tok == "\\]" or opener == "(" and tok == "\\)" or opener == "$$" and tok == "$$":
            regions.append((open_at, m.end()))
            opener = ""
        elif opener.startswith("env:") and m.group(2) == opener[4:]:
            depth += 1 if m.group(1) == "begin" else -1
            if depth == 0:
                regions.append((open_at, m.end()))
                opener = ""
    if opener and len(raw) - open_at <= (_MAX_INLINE if opener == "(" else _MAX_DISPLAY):
        regions.append((open_at, len(raw)))  # a display the output was cut off in
    for m in _CONTINUATION_RE.finditer(raw):
        # From the last character of the line before to the first of this one.
        prev = len(raw[: m.start()].rstrip())
        if prev:
            regions.append((prev - 1, m.end()))
    if not regions:
        return regions
    regions.sort()
    merged = [regions[0]]
    for s, e in regions[1:]:
        if s < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


def _keep_formulas_whole(raw: str, segments: list[Segment], offset: int, *, lead_ins: bool = False) -> list[Segment]:
    """Join the steps a formula was cut across: a step boundary inside display or inline math or before a
    line continuing a formula is dropped; with ``lead_ins`` (the moves segmenter), a lead-in ending in ":"
    joins the formula it introduces too (the other segmenters keep their unit: a line stays a line)."""
    if len(segments) < 2 or not (_TRIGGER_RE.search(raw) or _CONTINUATION_RE.search(raw)):
        return segments
    regions = _math_regions(raw)
    out: list[Segment] = []
    ri = 0
    for seg in segments:
        if out:
            prev = out[-1]
            pe, s = prev.end - offset, seg.start - offset
            while ri < len(regions) and regions[ri][1] <= pe:
                ri += 1
            straddles = ri < len(regions) and regions[ri][0] < s
            # ... but a new move after the colon is a move ("Simplify:" then "Wait, actually, we have \\(x\\)").
            lead_in = (lead_ins and prev.text.endswith(":") and _FORMULA_START_RE.match(raw, s) is not None
                       and _MOVE_RE.match(raw, s) is None)
            if straddles or lead_in:
                out[-1] = Segment(raw[prev.start - offset : seg.end - offset], prev.start, seg.end)
                continue
        out.append(seg)
    return out


def segment(raw: str, method: str = "lines", offset: int = 0) -> list[Segment]:
    """Split ``raw`` into stripped, non-empty steps with offsets (+``offset``).

    ``markers`` keeps the marker ("Step 2:") in the step text so offsets cover
    what the reader sees; with no marker present the whole text is one step.
    ``sentences`` treats line breaks as boundaries too.
    """
    if method == "lines":
        spans = _line_spans(raw)
    elif method == "paragraphs":
        return _keep_formulas_whole(raw, _paragraph_segments(raw, offset), offset)
    elif method == "markers":
        spans = _marker_spans(raw)
    elif method == "sentences":
        spans = _sentence_spans(raw)
    elif method == "moves":
        return _keep_formulas_whole(raw, _spans_to_segments(raw, _moves_spans(raw), offset), offset, lead_ins=True)
    else:
        raise ValueError(
            f"unknown segmentation method {method!r}; allowed: {', '.join(SEGMENTERS)}"
        )
    return _keep_formulas_whole(raw, _spans_to_segments(raw, spans, offset), offset)



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
