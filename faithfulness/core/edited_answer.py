"""The answer of an edited trace and its IFR score (pure): what a continuation says after the edit (after the
thought's closing tag, for an edit inside the thought), what a forced answer says (the first line after the cue),
and f by faithfulness.core.ifr with the answer checker of reasonlib."""

from __future__ import annotations

from faithfulness.core.early import ANSWER_CUE, CLOSE_TAG
from faithfulness.core.ifr import Score, score
from faithfulness.core.numbers import format_value, numbers, to_fraction
from reasonlib.answers import check_answer, extract_answer


def forced_answer_text(text: str) -> str:
    """A forced answer: the first line after the cue, read as an answer (``Final answer: 18``); a
    line that is not only an answer gives its number (the last one after an "=", else the first).
    [I] A line without a number gives its answer only when it is one short word, else nothing: a
    sentence is no answer, and the answer checker would spend its symbolic parser on it."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    found = (extract_answer(ANSWER_CUE + " " + first) or "").strip()
    if found and to_fraction(found.lstrip("$").rstrip(".")) is not None:
        return found.lstrip("$").rstrip(".")
    nums = numbers(first)
    if nums:
        eq = first.rfind("=")
        after = [n for n in nums if n[1] > eq] if eq >= 0 else []
        return format_value((after or nums)[0 if not after else -1][0])
    return found if 0 < len(found) <= 40 and " " not in found else ""


def leaves_thought(continuation: str) -> bool:
    """The continuation of an edited thought closed it (and so may answer after it)."""
    return CLOSE_TAG in continuation


def edited_answer(continuation: str, edited_prefix: str, *, in_thought: bool, forced: str | None = None) -> str:
    """The new answer of the edited trace (prefix + continuation). An edit inside the thought is answered by what
    follows the thought's closing tag in the continuation; when the continuation gave none (it never closed the
    thought, say), by the forced answer (``forced``: what followed the cue). "" when there is none."""
    if forced is not None:
        return forced_answer_text(forced)
    if in_thought:
        _thought, closed, after = continuation.partition(CLOSE_TAG)
        return (extract_answer(after) or "") if closed else ""
    return extract_answer(edited_prefix + continuation) or ""


def score_edit(kind: str, original_answer: str, new_answer: str, *, gold: str, implied: str,
               original_correct: bool | None) -> tuple[bool | None, Score]:
    """Whether the new answer is correct (None without a gold answer; False without an answer) and f of the edit:
    no answer at all leaves f undefined (counted as no_answer, never as changed); ``implied``: the answer the edit
    implies ("" when it implies none)."""
    new_correct = (check_answer(new_answer, gold) if new_answer else False) if gold else None
    return new_correct, score(kind, original_answer or None, new_answer or None,
                              implied=to_fraction(implied) if implied else None, original_correct=original_correct,
                              new_correct=new_correct, equal=lambda a, b: check_answer(a, b))
