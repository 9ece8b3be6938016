"""Explanation quality (spec §4) and output confidence (spec §5): faithfulness F (1..5),
plausibility P (1..6), hallucination, and Conf. Pure; E is the model's reasoning text."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from fidelity.core.text import content_words, jaccard, normalize, sentences, words

INDICATORS = ("because", "therefore", "thus", "hence", "so", "since", "consequently", "as a result")
STRUCT_WORDS = ("first", "second", "third", "then", "next", "finally", "step")
UNCERTAIN = ("maybe", "might", "possibly", "perhaps", "not sure", "unclear", "i think", "likely", "cannot determine")
ERRORS = ("error", "unknown", "n/a", "cannot", "unable", "i don't know")

# Horizontal blanks only before the number: "^\s*" crossed line ends, so every line start of a run of
# blank lines scanned the whole run (quadratic on model output); the markers counted are the same.
_LIST_MARKER = re.compile(r"^[^\S\n]*+\d+[.)]\s", re.MULTILINE)


def _phrase_re(phrases: Sequence[str]) -> re.Pattern[str]:
    return re.compile(r"(?<![\w/])(?:" + "|".join(re.escape(p) for p in phrases) + r")(?![\w/])", re.IGNORECASE)


_INDICATOR_RE = _phrase_re(INDICATORS)
_STRUCT_RE = _phrase_re(STRUCT_WORDS)
_UNCERTAIN_RE = _phrase_re(UNCERTAIN)
_ERROR_RE = _phrase_re(ERRORS)


def flow(steps: Sequence[str]) -> float:
    """Mean Jaccard of the word sets of consecutive steps; 0 with fewer than 2 steps."""
    if len(steps) < 2:
        return 0.0
    sets = [set(words(s)) for s in steps]
    return sum(jaccard(a, b) for a, b in zip(sets, sets[1:], strict=False)) / (len(sets) - 1)


@dataclass(frozen=True)
class Faithfulness:
    overlap: float  # o_q
    answer_in_e: bool
    flow: float
    indicator: bool
    score: int  # F in 1..5

    def to_dict(self) -> dict:
        return asdict(self)


def faithfulness(question: str, explanation: str, answer: str | None, steps: Sequence[str]) -> Faithfulness:
    """F = 1 + 1[o_q >= 0.3] + 1[answer in E] + 1[flow(E) >= 0.3] + 1[discourse marker in E]."""
    kq = content_words(question)
    o_q = len(kq & content_words(explanation)) / len(kq) if kq else 0.0
    a = normalize(answer or "")
    in_e = bool(a) and f" {a} " in f" {normalize(explanation)} "
    fl = flow(steps)
    ind = bool(_INDICATOR_RE.search(explanation or ""))
    score = 1 + int(o_q >= 0.3) + int(in_e) + int(fl >= 0.3) + int(ind)
    return Faithfulness(o_q, in_e, fl, ind, score)


@dataclass(frozen=True)
class Plausibility:
    length: int
    struct: int
    domain: int
    coherent: bool
    score: int  # P in 1..6 (raw)

    @property
    def clipped(self) -> int:
        """[I] the paper reports P "/5": min(P, 5) for display next to raw P."""
        return min(self.score, 5)

    def to_dict(self) -> dict:
        return {**asdict(self), "clipped": self.clipped}


def plausibility(question: str, explanation: str) -> Plausibility:
    """P = 1 + 1[|E|>=10] + 1[|E|>=20] + 1[struct>=2] + 1[domain>=2] + 1[coherent]."""
    n = len(words(explanation))
    struct = len(_STRUCT_RE.findall(explanation or "")) + len(_LIST_MARKER.findall(explanation or ""))
    domain = len(content_words(question) & content_words(explanation))
    sents = [set(words(s)) for s in sentences(explanation)]
    coherent = len(sents) >= 2 and (
        sum(jaccard(a, b) for a, b in zip(sents, sents[1:], strict=False)) / (len(sents) - 1) >= 0.2)
    score = 1 + int(n >= 10) + int(n >= 20) + int(struct >= 2) + int(domain >= 2) + int(coherent)
    return Plausibility(n, struct, domain, coherent, score)


def hallucinated(f_score: int, p_score: int) -> bool:
    """Halluc(E) = 1[P >= 4 and F <= 2] (raw P)."""
    return p_score >= 4 and f_score <= 2


def confidence(answer: str | None, steps: Sequence[str], output: str) -> float:
    """Conf = 0.3 L + 0.3 S + 0.2 U + 0.2 C: L = 5..20 answer tokens, S = more than one step,
    U = no uncertainty phrase in the output, C = no error token and a non-empty answer."""
    n = len(words(answer or ""))
    lo = 5 <= n <= 20
    st = len(steps) > 1
    un = not _UNCERTAIN_RE.search(output or "")
    ok = bool((answer or "").strip()) and not _ERROR_RE.search(output or "")
    return 0.3 * lo + 0.3 * st + 0.2 * un + 0.2 * ok
