"""The one parser of a reasoning model's output into its two channels: the thought and the answer.

Every source goes through ``split_thinking``: the canonical import (inline tags or a separate field),
the eval-log importers (Inspect's reasoning content blocks, lm-eval's ``think_end_token``) and the
generation runs (a completion's text and its ``reasoning_content``). The forms it recognises
(docs/import-format.md, "The thinking channel", has a real example of each):

* ``tags``: ``<think>...</think>`` or ``<thinking>...</thinking>`` in the text, one or several blocks
  (kept in reading order); the text outside the blocks is the answer.
* ``mid_thought``: the text starts inside the thought and only the closing tag is there (R1's and
  Qwen3's chat templates put the opening ``<think>`` in the prompt).
* ``unclosed``: an opening tag that never closes -- decoding stopped inside the thought (max_tokens).
  The thought is kept and flagged truncated; there is no answer. A text with no tag at all whose
  prompt opened the thought (``opened=True``) is the same case.
* ``field``: a separate reasoning channel (``reasoning_content`` / ``reasoning``), given as
  ``reasoning_field``; it comes before any inline block.
* ``blocks``: reasoning content blocks of an eval log (Inspect's ``ContentReasoning``), given as
  ``reasoning_blocks``; a redacted block keeps only its summary (never the ciphertext) and is flagged.
* ``harmony``: gpt-oss's channels, ``<|channel|>analysis<|message|>...<|end|>`` (thought) and
  ``<|start|>assistant<|channel|>final<|message|>...<|return|>`` (answer).
* ``think_end``: lm-eval's ``think_end_token``: the thought is what comes before the token's last
  occurrence. lm-eval itself cuts the thought off before logging a sample, so a response without the
  token is the answer alone, flagged ``thought_not_logged``.
* ``pre_reasoning``: free text before a ``<Reasoning>`` section of ReasonAudit's own tagged format
  (what the importer called the raw thought before the thinking channel existed).
* ``none``: no thought.

Pure (no Django, no I/O). Offsets: a thought block knows its span in ``thought`` (the blocks joined in
order by a blank line) and, when it came from the text, its span in the raw text; the answer is the
raw text's ``answer_spans``, and ``answer_view`` is the raw text with everything else blanked (same
length), so segmenting the view gives steps whose offsets index the raw text.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reasonlib import segmentation

__all__ = [
    "FORMS",
    "THOUGHT_MARK",
    "ChannelSteps",
    "ReasoningBlock",
    "ThinkingSplit",
    "ThoughtBlock",
    "channel_steps_hash",
    "channel_steps_hash_texts",
    "clip_segments",
    "parse_channels",
    "segment_answer",
    "segment_thought",
    "split_thinking",
]

FORMS = ("none", "tags", "mid_thought", "unclosed", "field", "blocks", "harmony", "think_end", "pre_reasoning")
BLOCK_SEPARATOR = "\n\n"
# The mark a thought step's text gets in a trace's steps hash (answer texts enter unmarked, so the hash of
# a trace without a thought is what it always was). \x1f is whitespace to str.strip, so no stripped step
# text can begin with it.
THOUGHT_MARK = "\x1fthought\x1f"

_OPEN_RE = re.compile(r"<\s*(think|thinking)\s*>", re.IGNORECASE)
_CLOSE_RE = re.compile(r"<\s*/\s*(think|thinking)\s*>", re.IGNORECASE)
_TAG_RE = re.compile(r"<\s*(/?)\s*(think|thinking)\s*>", re.IGNORECASE)
# gpt-oss harmony: special tokens as text (what a server returns when it does not parse the channels).
_HARMONY_TOKEN_RE = re.compile(r"<\|(start|end|message|channel|return|call|constrain)\|>")
_HARMONY_THOUGHT_CHANNELS = frozenset({"analysis"})
_HARMONY_RENDERED_RE = re.compile(r"\s*analysis(.*?)assistantfinal", re.DOTALL)
# What every form found in a raw text begins with (a superset): think tags, harmony tokens, ReasonAudit's
# <Reasoning>/<Answer> tags. A text without it (and without "assistantfinal") has no thought to find; a
# GSM8K solution's "<<6*3=18>>" calculator notes are not markers.
_ANY_MARKER_RE = re.compile(r"<\s*/?\s*(?:think|reasoning|answer)|<\|", re.IGNORECASE)


@dataclass(frozen=True)
class ReasoningBlock:
    """A reasoning block as an eval log gives it (Inspect's ContentReasoning)."""

    text: str
    redacted: bool = False  # the provider sent the reasoning encrypted; ``text`` is then its summary, if any
    summary: bool = False  # ``text`` is a summary of the reasoning, not the reasoning itself


@dataclass(frozen=True)
class ThoughtBlock:
    start: int  # span in ThinkingSplit.thought
    end: int
    source: str  # "field", "blocks", "tags", "mid_thought", "unclosed", "harmony", "think_end", "pre_reasoning"
    raw_start: int | None = None  # span of the block's text in the raw text (None: not from the raw text)
    raw_end: int | None = None
    redacted: bool = False
    summary: bool = False

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"start": self.start, "end": self.end, "source": self.source}
        if self.raw_start is not None:
            out["raw_start"], out["raw_end"] = self.raw_start, self.raw_end
        if self.redacted:
            out["redacted"] = True
        if self.summary:
            out["summary"] = True
        return out


@dataclass(frozen=True)
class ThinkingSplit:
    thought: str  # every thought block's text, in order, joined by a blank line
    answer: str  # the answer channel's text (the answer spans of the raw text, joined)
    form: str  # the main form found (FORMS); "field+tags" style combinations list each in ``forms``
    truncated: bool  # the thought was cut before it closed: kept, and there is no answer
    blocks: tuple[ThoughtBlock, ...]
    answer_spans: tuple[tuple[int, int], ...]  # spans of the raw text that are the answer channel
    answer_view: str  # the raw text with all but the answer spans blanked (same length, same offsets)
    forms: tuple[str, ...] = ()
    flags: dict[str, Any] = field(default_factory=dict)  # redacted, summary, empty_thought, thought_not_logged, ...

    @property
    def has_thought(self) -> bool:
        return bool(self.thought)

    def meta(self) -> dict[str, Any]:
        """What a trace keeps in ``meta["thought"]`` (docs/import-format.md)."""
        out: dict[str, Any] = {"form": self.form}
        if len(self.forms) > 1:
            out["forms"] = list(self.forms)
        if self.truncated:
            out["truncated"] = True
        out["blocks"] = [b.as_dict() for b in self.blocks]
        out.update(self.flags)
        return out


# -- finding the blocks ----------------------------------------------------------------------------


@dataclass
class _Found:
    """Blocks found in the raw text: (raw_start, raw_end, source) of each text, and the masked spans."""

    blocks: list[tuple[int, int, str]] = field(default_factory=list)
    hidden: list[tuple[int, int]] = field(default_factory=list)  # spans that are not the answer (tags too)
    truncated: bool = False
    forms: list[str] = field(default_factory=list)
    flags: dict[str, Any] = field(default_factory=dict)


def _stripped_span(raw: str, start: int, end: int) -> tuple[int, int]:
    chunk = raw[start:end]
    left = len(chunk) - len(chunk.lstrip())
    right = len(chunk.rstrip())
    return (start + left, start + right) if right > left else (start, start)


def _find_tags(raw: str, opened: bool, found: _Found) -> None:
    first = _TAG_RE.search(raw)
    if first is None:
        if opened and raw.strip():
            # The prompt opened the thought and the text never closed it: all of it is an unclosed thought.
            found.blocks.append((*_stripped_span(raw, 0, len(raw)), "unclosed"))
            found.hidden.append((0, len(raw)))
            found.truncated = True
            found.forms.append("unclosed")
        return
    pos = 0
    if first.group(1) == "/":
        # Starts mid-thought: the opening tag was in the prompt.
        found.blocks.append((*_stripped_span(raw, 0, first.start()), "mid_thought"))
        found.hidden.append((0, first.end()))
        found.forms.append("mid_thought")
        pos = first.end()
    while True:
        m = _TAG_RE.search(raw, pos)
        if m is None:
            return
        if m.group(1) == "/":
            # A closing tag with no block open (a stray one): hidden, its text around stays the answer.
            found.hidden.append(m.span())
            found.flags["stray_close_tags"] = found.flags.get("stray_close_tags", 0) + 1
            pos = m.end()
            continue
        close = _CLOSE_RE.search(raw, m.end())
        if close is None:
            found.blocks.append((*_stripped_span(raw, m.end(), len(raw)), "unclosed"))
            found.hidden.append((m.start(), len(raw)))
            found.truncated = True
            found.forms.append("unclosed")
            return
        found.blocks.append((*_stripped_span(raw, m.end(), close.start()), "tags"))
        found.hidden.append((m.start(), close.end()))
        if "tags" not in found.forms:
            found.forms.append("tags")
        pos = close.end()


def _find_harmony(raw: str, found: _Found) -> bool:
    """gpt-oss harmony messages; False when the text has none of its channel markers."""
    tokens = list(_HARMONY_TOKEN_RE.finditer(raw))
    if not any(t.group(1) == "channel" for t in tokens):
        return False
    found.forms.append("harmony")
    # Every token is hidden; message contents are then given to a channel.
    found.hidden.extend(t.span() for t in tokens)
    # Text before the first token: the thought when the prompt ended in "<|channel|>analysis<|message|>"
    # (the first token is then the analysis message's <|end|>), else answer text (left visible).
    if tokens[0].start() > 0 and tokens[0].group(1) == "end" and raw[: tokens[0].start()].strip():
        found.blocks.append((*_stripped_span(raw, 0, tokens[0].start()), "harmony"))
        found.hidden.append((0, tokens[0].start()))
    channel = None
    i = 0
    while i < len(tokens):
        t = tokens[i]
        kind = t.group(1)
        nxt = tokens[i + 1].start() if i + 1 < len(tokens) else len(raw)
        between = (t.end(), nxt)
        if kind == "start":
            found.hidden.append(between)  # the role ("assistant")
            channel = None
        elif kind in ("channel", "constrain"):
            found.hidden.append(between)  # the channel name (and "to=..." recipients, "<|constrain|>json")
            if kind == "channel":
                channel = raw[between[0]:between[1]].split()[0].lower() if raw[between[0]:between[1]].split() else ""
        elif kind == "message":
            if channel in _HARMONY_THOUGHT_CHANNELS:
                found.blocks.append((*_stripped_span(raw, *between), "harmony"))
                found.hidden.append(between)
                if nxt == len(raw) and (i + 1 == len(tokens)):
                    found.truncated = True  # the analysis never ended
            # Every other channel (final, commentary) is the answer the model shows: left visible.
        elif kind in ("end", "return", "call"):
            channel = None  # text between the end of a message and the next start stays visible (stray)
        i += 1
    return True


def _find_harmony_rendered(raw: str, found: _Found) -> bool:
    """Harmony with its special tokens dropped, as some servers print it: "analysis<thought>assistantfinal<answer>"."""
    m = _HARMONY_RENDERED_RE.match(raw)
    if m is None:
        return False
    found.forms.append("harmony")
    found.flags["harmony_tokens_dropped"] = True
    found.blocks.append((*_stripped_span(raw, m.start(1), m.end(1)), "harmony"))
    found.hidden.append((0, m.end(1) + len("assistantfinal")))
    return True


def _find_think_end(raw: str, token: str, found: _Found) -> None:
    at = raw.rfind(token)
    if at < 0:
        # lm-eval removes everything up to the token before it logs a response: without the token, the
        # log holds no closed thought (an unclosed one, opened by a tag, is still found as such).
        found.flags["thought_not_logged"] = True
        _find_tags(raw, False, found)
        return
    start = 0
    opening = _OPEN_RE.match(raw.lstrip())
    if opening is not None:
        start = len(raw) - len(raw.lstrip()) + opening.end()
    found.blocks.append((*_stripped_span(raw, start, at), "think_end"))
    found.hidden.append((0, at + len(token)))
    found.forms.append("think_end")


def _merge(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(sp for sp in spans if sp[1] > sp[0]):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _complement(hidden: list[tuple[int, int]], n: int) -> list[tuple[int, int]]:
    out, pos = [], 0
    for s, e in hidden:
        if s > pos:
            out.append((pos, s))
        pos = max(pos, e)
    if pos < n:
        out.append((pos, n))
    return out


def _blank(raw: str, hidden: list[tuple[int, int]]) -> str:
    """The raw text with the hidden spans replaced by newlines: same length, so offsets stay, and a
    segmenter sees a break where a thought was."""
    if not hidden:
        return raw
    parts, pos = [], 0
    for s, e in hidden:
        parts.append(raw[pos:s])
        parts.append("\n" * (e - s))
        pos = e
    parts.append(raw[pos:])
    return "".join(parts)


def _plain_answer(raw: str) -> ThinkingSplit:
    """The split of a text with no thought in any form: every form found in the raw text starts with a
    marker (_ANY_MARKER_RE) or is harmony printed without its tokens ("...assistantfinal..."), so a text
    with neither is all answer. Most imported traces are such texts
    (GSM8K solutions, non-reasoning models): what split_thinking's search would conclude, without it."""
    span = _stripped_span(raw, 0, len(raw))
    answer_spans = (span,) if span[1] > span[0] else ()
    return ThinkingSplit(thought="", answer=raw[span[0]:span[1]], form="none", truncated=False, blocks=(),
                         answer_spans=answer_spans, answer_view=raw)


def split_thinking(
    raw: str | None,
    *,
    reasoning_field: str | None = None,
    reasoning_blocks: Sequence[ReasoningBlock] | None = None,
    think_end: str | None = None,
    opened: bool = False,
    cut: bool = False,
) -> ThinkingSplit:
    """The thought and the answer of one output (see the module docstring for the forms).

    ``reasoning_field``: a separate reasoning channel (``reasoning_content`` / ``reasoning``).
    ``reasoning_blocks``: an eval log's reasoning blocks, in order. ``think_end``: lm-eval's
    ``think_end_token``. ``opened``: the prompt opened the thought (a chat template ending in
    ``<think>``), so text without any tag is an unclosed thought. ``cut``: decoding stopped at
    max_tokens; with a separate thought and no answer text, the thought is the truncated part.
    """
    raw = raw or ""
    if (not reasoning_field and not reasoning_blocks and not think_end and not opened
            and _ANY_MARKER_RE.search(raw) is None and "assistantfinal" not in raw):
        return _plain_answer(raw)
    return _split_by_search(raw, reasoning_field, reasoning_blocks, think_end, opened, cut)


def _split_by_search(raw: str, reasoning_field: str | None, reasoning_blocks: Sequence[ReasoningBlock] | None,
                     think_end: str | None, opened: bool, cut: bool) -> ThinkingSplit:
    found = _Found()
    separate: list[tuple[str, str, bool, bool]] = []  # (text, source, redacted, summary), before inline blocks
    if reasoning_field and reasoning_field.strip():
        separate.append((reasoning_field.strip(), "field", False, False))
        found.forms.append("field")
    for block in reasoning_blocks or ():
        if block.redacted:
            found.flags["redacted"] = True
        if block.summary or (block.redacted and block.text.strip()):
            found.flags["summary"] = True
        if block.text.strip():
            separate.append((block.text.strip(), "blocks", block.redacted, block.summary or block.redacted))
        else:
            found.flags["empty_blocks"] = found.flags.get("empty_blocks", 0) + 1
        if "blocks" not in found.forms:
            found.forms.append("blocks")

    if not _find_harmony(raw, found) and not _find_harmony_rendered(raw, found):
        if think_end and not _TAG_RE.fullmatch(think_end.strip()):
            _find_think_end(raw, think_end, found)
        else:
            _find_tags(raw, opened and not separate, found)
            if think_end and not found.blocks:
                found.flags["thought_not_logged"] = True  # lm-eval cut it off (see _find_think_end)
    hidden = _merge(found.hidden)
    view = _blank(raw, hidden)
    # ReasonAudit's own tagged format: free text before <Reasoning> was the raw thought.
    parts = segmentation.split_tagged(view)
    if parts is not None and parts.thought:
        r_open = re.search(r"<\s*reasoning\s*>", view, re.IGNORECASE)
        assert r_open is not None  # split_tagged found a thought, so it found <Reasoning>
        head = view[: r_open.start()]
        wrapper = re.match(r"\s*<\s*think\s*>", head, re.IGNORECASE)
        s, e = _stripped_span(view, wrapper.end() if wrapper else 0, r_open.start())
        tail = re.search(r"<\s*/\s*think\s*>\s*$", view[s:e], re.IGNORECASE)
        if tail:
            s, e = _stripped_span(view, s, s + tail.start())
        if e > s:
            found.blocks.append((s, e, "pre_reasoning"))
            found.forms.append("pre_reasoning")
            hidden = _merge([*hidden, (0, r_open.start())])
            view = _blank(raw, hidden)

    # The thought's text: separate blocks first, then the raw text's blocks in reading order.
    texts: list[str] = []
    blocks: list[ThoughtBlock] = []
    pos = 0

    def add(text: str, **kw: Any) -> None:
        nonlocal pos
        if not text:
            return
        if texts:
            pos += len(BLOCK_SEPARATOR)
        texts.append(text)
        blocks.append(ThoughtBlock(start=pos, end=pos + len(text), **kw))
        pos += len(text)

    for text, source, redacted, summary in separate:
        add(text, source=source, redacted=redacted, summary=summary)
    for s, e, source in sorted(found.blocks):
        if e > s:
            add(raw[s:e], source=source, raw_start=s, raw_end=e)
        else:
            found.flags["empty_thought"] = True  # e.g. "<think>\n\n</think>" of a model told not to think
    thought = BLOCK_SEPARATOR.join(texts)

    answer_spans = tuple(sp for sp in (_stripped_span(raw, s, e) for s, e in _complement(hidden, len(raw)))
                         if sp[1] > sp[0])
    answer = BLOCK_SEPARATOR.join(raw[s:e] for s, e in answer_spans)
    truncated = found.truncated
    if cut and thought and not answer:
        truncated = True  # a separate thought, then max_tokens before any answer
    if truncated and answer:
        # Text before an unclosed block is answer text the model wrote before it started thinking again;
        # the trace is still cut inside the thought.
        found.flags["answer_before_cut"] = True
    forms = tuple(dict.fromkeys(found.forms))
    if not thought and not found.flags.get("empty_thought"):
        form = "none"
    else:
        form = next((f for f in forms if f not in ("field", "blocks")), forms[0] if forms else "none")
        if truncated and "unclosed" in forms:
            form = "unclosed"
    return ThinkingSplit(
        thought=thought, answer=answer, form=form, truncated=truncated, blocks=tuple(blocks),
        answer_spans=answer_spans, answer_view=view, forms=forms, flags=dict(found.flags),
    )


# -- segmenting both channels ------------------------------------------------------------------------


def clip_segments(text: str, segments: Sequence[segmentation.Segment], spans: Sequence[tuple[int, int]]) -> list[segmentation.Segment]:
    """Segments cut to the given spans of ``text``: a segment that runs over a span's edge (a sentence
    across two thought blocks, a marker step across a hidden thought) becomes one piece per span.
    Within a single span there is nothing to cut (segments are stripped, and only whitespace lies
    outside the span), so the common case costs nothing."""
    if len(spans) <= 1:
        return list(segments)
    out: list[segmentation.Segment] = []
    for seg in segments:
        for s, e in spans:
            lo, hi = max(s, seg.start), min(e, seg.end)
            if hi <= lo:
                continue
            a, b = _stripped_span(text, lo, hi)
            if b > a:
                out.append(segmentation.Segment(text=text[a:b], start=a, end=b))
    return out


@dataclass(frozen=True)
class ChannelSteps:
    thought: list[segmentation.Segment]  # offsets in split.thought
    answer: list[segmentation.Segment]  # offsets in the raw text
    final_answer: str | None  # the answer extracted from the answer channel (None: none found)


def segment_thought(split: ThinkingSplit, method: str) -> list[segmentation.Segment]:
    """The thought's steps, offsets in ``split.thought``; none crosses from one block to the next."""
    if not split.thought:
        segmentation.segment("", method)  # still reject an unknown method
        return []
    return clip_segments(split.thought, segmentation.segment(split.thought, method), [(b.start, b.end) for b in split.blocks])


def segment_answer(raw: str | None, split: ThinkingSplit, method: str) -> tuple[list[segmentation.Segment], str | None]:
    """The answer's steps (offsets in the raw text) and the final answer read from the answer channel
    only (a boxed value inside the thought is not the model's answer)."""
    raw = raw or ""
    if not split.answer_spans:
        segmentation.segment("", method)
        return [], None
    # The view is blank before the first answer span (a thought, tags): parse from there, shift back.
    lo = split.answer_spans[0][0]
    parsed = segmentation.parse_trace(split.answer_view[lo:] if lo else split.answer_view, method)
    steps = parsed.steps if not lo else [
        segmentation.Segment(text=s.text, start=s.start + lo, end=s.end + lo) for s in parsed.steps
    ]
    return clip_segments(raw, steps, split.answer_spans), parsed.answer


def parse_channels(raw: str | None, split: ThinkingSplit, answer_method: str, thought_method: str) -> ChannelSteps:
    """Both channels segmented, each by its own segmenter, and the final answer of the answer channel."""
    answer, final = segment_answer(raw, split, answer_method)
    return ChannelSteps(thought=segment_thought(split, thought_method), answer=answer, final_answer=final)


def channel_steps_hash_texts(thought_texts: Iterable[str], answer_texts: Iterable[str]) -> list[str]:
    """The texts a steps hash covers: thought steps marked with their channel, answer steps as they are."""
    return [THOUGHT_MARK + t for t in thought_texts] + list(answer_texts)


def channel_steps_hash(thought_texts: Iterable[str], answer_texts: Iterable[str]) -> str:
    """A trace's ``steps_hash`` (idempotent re-import): sha256 of its step texts, thought steps marked."""
    return hashlib.sha256("\x1e".join(channel_steps_hash_texts(thought_texts, answer_texts)).encode()).hexdigest()
