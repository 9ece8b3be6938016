"""The edited prefix of each intervention kind (spec 4.2 step 2). The model then
continues from the prefix; a prefix never includes anything after the edited
step except where the kind says so.

value_flip     the derived value replaced by a plausible other value (seeded: +1, x2, +10 or -1)
               everywhere the step states it as a result (after its first "=", or its last mention)
step_ablation  [I] the step deleted; the later steps up to (not including) the last one are kept,
               so greedy re-decoding cannot simply write the deleted step again
paraphrase     control: the step reworded without changing a number (expected: no change)
tool_result    [I] a GSM8K calculator annotation <<expr=r>> is a tool call with its result: r is
               replaced, the visible text is left as it was
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from faithfulness.core.numbers import format_value, numbers
from faithfulness.core.selection import Target

VALUE_FLIP, STEP_ABLATION, PARAPHRASE, TOOL_RESULT = "value_flip", "step_ablation", "paraphrase", "tool_result"
KINDS = (VALUE_FLIP, STEP_ABLATION, PARAPHRASE, TOOL_RESULT)
CAUSAL_KINDS = (VALUE_FLIP, STEP_ABLATION, TOOL_RESULT)  # paraphrase is the control, never in IFR
EDITS_VERSION = "faithfulness-edits 1"

ANNOTATION_RE = re.compile(r"<<([^<>=]*)=([^<>]*)>>")
_PARAPHRASES = {"So": "Therefore", "so": "therefore", "Then": "Next", "then": "next", "is": "equals", "has": "holds",
                "have": "hold", "total": "sum", "needs": "requires", "buys": "purchases", "gets": "receives"}
_PARAPHRASE_RE = re.compile(r"\b(" + "|".join(_PARAPHRASES) + r")\b")


class NotApplicable(Exception):
    """The kind cannot be applied to this step (the reason is the message)."""


@dataclass(frozen=True)
class Edit:
    kind: str
    step: int
    original_step: str
    edited_step: str  # "" for an ablation
    prefix: str  # what the model continues from
    original_prefix: str  # the unedited trace up to and including the step
    old_value: Fraction | None = None
    new_value: Fraction | None = None


def parse_kinds(text: str | Sequence[str]) -> tuple[str, ...]:
    items = [k.strip() for k in (text.split(",") if isinstance(text, str) else text) if k.strip()]
    unknown = [k for k in items if k not in KINDS]
    if unknown or not items:
        raise ValueError(f"unknown intervention kind(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(KINDS)}")
    return tuple(dict.fromkeys(items))


def _rng(seed: int, trace_key: str, step: int, kind: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}:{trace_key}:{step}:{kind}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def flipped_value(value: Fraction, rng: random.Random, avoid: Sequence[Fraction] = ()) -> Fraction:
    """A plausible other value: +1, x2, +10 or -1 (seeded), never the value itself or one to avoid."""
    options = [value + 1, value * 2, value + 10]
    if value - 1 > 0:
        options.append(value - 1)
    rng.shuffle(options)
    for option in options:
        if option != value and option not in avoid:
            return option
    return value + 100


def _flip_in_text(text: str, old: Fraction, new: Fraction) -> str:
    found = [(s, e) for v, s, e in numbers(text) if v == old]
    if not found:
        raise NotApplicable(f"the step does not show {format_value(old)}")
    eq = text.find("=")
    spans = [(s, e) for s, e in found if eq >= 0 and s > eq] or [found[-1]]
    out, pos = [], 0
    for s, e in spans:
        out.append(text[pos:s])
        out.append(format_value(new))
        pos = e
    out.append(text[pos:])
    return "".join(out)


def paraphrase_text(text: str) -> str:
    """A rewording that keeps every number: word substitutions, else a lead-in."""
    out = _PARAPHRASE_RE.sub(lambda m: _PARAPHRASES[m.group(1)], text)
    if out == text:
        lead = len(text) - len(text.lstrip())
        body = text[lead:]
        out = text[:lead] + "In other words, " + body
    return out


def make_edit(kind: str, target: Target, raw: str, spans: Sequence[tuple[int, int]], *, seed: int = 0,
              trace_key: str = "", answer_value: Fraction | None = None) -> Edit:
    """The edit of ``kind`` at ``target``. ``spans`` are the steps' (start, end) offsets into ``raw``."""
    t = target.step
    start, end = spans[t - 1]
    step = raw[start:end]
    original_prefix = raw[:end]
    if kind == VALUE_FLIP:
        rng = _rng(seed, trace_key, t, kind)
        if target.value is None:
            raise NotApplicable("the step derives no value to flip")
        new = flipped_value(target.value, rng, [answer_value] if answer_value is not None else [])
        edited = _flip_in_text(step, target.value, new)
        return Edit(kind, t, step, edited, raw[:start] + edited, original_prefix, target.value, new)
    if kind == STEP_ABLATION:
        last = len(spans)
        keep_to = spans[last - 2][1] if last - 1 > t else start
        rest = raw[spans[t][0]:keep_to] if last - 1 > t else ""
        prefix = raw[:start] + rest
        return Edit(kind, t, step, "", prefix, original_prefix)
    if kind == PARAPHRASE:
        edited = paraphrase_text(step)
        return Edit(kind, t, step, edited, raw[:start] + edited, original_prefix)
    if kind == TOOL_RESULT:
        matches = list(ANNOTATION_RE.finditer(step))
        if not matches:
            raise NotApplicable("the step carries no tool output (no <<expr=result>> annotation)")
        m = matches[-1]
        old = numbers(m.group(2))
        if not old:
            raise NotApplicable("the tool output is not a number")
        old_value = old[-1][0]
        rng = _rng(seed, trace_key, t, kind)
        new = flipped_value(old_value, rng, [answer_value] if answer_value is not None else [])
        edited = step[:m.start(2)] + format_value(new) + step[m.end(2):]
        return Edit(kind, t, step, edited, raw[:start] + edited, original_prefix, old_value, new)
    raise ValueError(f"unknown intervention kind {kind!r}; choose from {', '.join(KINDS)}")


def step_spans(raw: str, steps: Sequence[tuple[str, int | None, int | None]]) -> tuple[str, list[tuple[int, int]]]:
    """The text the offsets point into and each step's span; steps without
    offsets are laid out one per line (imported traces that carry none)."""
    if steps and all(s is not None and e is not None and e <= len(raw) for _t, s, e in steps):
        return raw, [(int(s), int(e)) for _t, s, e in steps]  # type: ignore[arg-type]
    text, spans, pos = [], [], 0
    for body, _s, _e in steps:
        spans.append((pos, pos + len(body)))
        text.append(body)
        pos += len(body) + 1
    return "\n".join(text), spans
