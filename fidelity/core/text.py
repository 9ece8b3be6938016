"""Tokens, steps and sentences as the fidelity metrics read them (docs/fidelity.md, "Text").

Pure: no Django, no I/O. NLTK is used only where it needs no data files
(BLEU in ``answer.py``); the stop-word list is our own short one so nothing is
downloaded at run time.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Sequence
from functools import lru_cache

from reasonlib import answers

# A small English stop-word list ([I] the paper names none; NLTK's list would need a download).
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between both but by
can could did do does doing down during each few for from further had has have having he her here hers herself him
himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only or other
our ours ourselves out over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which while who whom why will
with would you your yours yourself yourselves s t let lets also
""".split())

_WORD = re.compile(r"[a-z0-9]+(?:[.'][a-z0-9]+)*")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
_SENT = re.compile(r"(?<=[.!?])\s+|\n+")
_STEP_PREFIX = re.compile(r"^\s*(?:step\s*\d+\s*[:.)-]|\d+\s*[.)]|[-*•])\s*", re.IGNORECASE)
_TAIL = re.compile(r"^\s*(?:final\s+)?(?:answer|question)\s*:", re.IGNORECASE)


def words(text: str) -> list[str]:
    """Lower-cased word tokens, punctuation dropped (numbers kept, "3.5" is one token)."""
    return _WORD.findall((text or "").lower())


@lru_cache(maxsize=1 << 15)
def word_set(text: str) -> frozenset[str]:
    """set(words(text)), cached: the same base text meets every one of its variants."""
    return frozenset(words(text))


def content_words(text: str) -> set[str]:
    """K(.): lower-cased content words, stop-words removed."""
    return {w for w in words(text) if w not in STOPWORDS}


def raw_tokens(text: str) -> list[str]:
    """The raw-token variant: whitespace tokens, case and punctuation kept."""
    return (text or "").split()


@lru_cache(maxsize=1 << 16)  # a base trace's steps are normalised once per variant it is compared with
def normalize(text: str) -> str:
    """SQuAD normalisation: lower case, punctuation and articles removed, whitespace collapsed."""
    text = (text or "").lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """|A ∩ B| / |A ∪ B|; 0 when both are empty."""
    sa, sb = set(a), set(b)
    union = sa | sb
    return len(sa & sb) / len(union) if union else 0.0


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT.split(text or "") if s and s.strip()]


def split_steps(text: str) -> list[str]:
    """The reasoning steps of a free text: one per non-empty line, "Step k:" and list
    markers stripped, the closing "Answer: ..." / "Question: ..." line and a last line that only
    states the answer ("#### 42") left out.
    A one-line text falls back to its sentences."""
    lines = [ln.strip() for ln in (text or "").split("\n") if ln.strip()]
    if len(lines) == 1:
        lines = sentences(lines[0])
    # The last line that only states the answer ("#### 42", "The answer is 42") is the answer, not a step:
    # the same rule as the review page's segmentation (reasonlib.segmentation.parse_trace), so a trace has as
    # many steps on the fidelity item page as where it is labelled.
    if lines and answers.answer_only(lines[-1]) is not None:
        lines = lines[:-1]
    steps = []
    for line in lines:
        if _TAIL.match(line):
            continue
        body = _STEP_PREFIX.sub("", line).strip()
        if body:
            steps.append(body)
    return steps


def tail_field(text: str, name: str) -> str:
    """The text after the last "<name>:" line (e.g. "Question:" of a backward reconstruction)."""
    found = ""
    for line in (text or "").split("\n"):
        m = re.match(rf"^\s*(?:final\s+)?{re.escape(name)}\s*:\s*(.*)$", line, re.IGNORECASE)
        if m:
            found = m.group(1).strip()
    return found


def token_set(steps: Sequence[str]) -> set[str]:
    """W: the union of the content-word tokens of all steps."""
    out: set[str] = set()
    for s in steps:
        out |= content_words(s)
    return out
