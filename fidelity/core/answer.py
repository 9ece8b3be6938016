"""Answer- and path-level metrics (spec §3): EM, F1, BLEU, CoT-EM, step soft similarity. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from fractions import Fraction

from fidelity.core.text import jaccard, normalize, word_set


def as_number(text: str | None) -> Fraction | None:
    """The exact value of an answer written as a plain number ("1,000", "$18", "3.50", "-2"), else None."""
    if text is None:
        return None
    t = text.strip().replace(",", "").replace("$", "").rstrip(".").strip()
    if t.endswith("%"):
        t = t[:-1]
    try:
        return Fraction(t)
    except (ValueError, ZeroDivisionError):
        return None


def exact_match(pred: str | None, gold: str | None) -> int:
    """EM = 1[normalize(pred) = normalize(gold)]; [I] two plain numbers compare by value ("18.00" = "18")."""
    if pred is None or gold is None:
        return 0
    a, b = as_number(pred), as_number(gold)
    if a is not None and b is not None:
        return int(a == b)
    return int(normalize(pred) == normalize(gold) and normalize(gold) != "")


def f1(pred: str | None, gold: str | None) -> float:
    """SQuAD token F1 over normalised tokens with multiset overlap; 0 when either side is empty."""
    p, g = normalize(pred or "").split(), normalize(gold or "").split()
    if not p or not g:
        return 0.0
    common = sum((Counter(p) & Counter(g)).values())
    if common == 0:
        return 0.0
    prec, rec = common / len(p), common / len(g)
    return 2 * prec * rec / (prec + rec)


def bleu(pred: str | None, gold: str | None) -> float:
    """NLTK sentence BLEU, reference [gold tokens], uniform 4-gram weights, smoothing method1."""
    # nltk is imported on first use: at module level it pulled scipy and scikit-learn into the start-up
    # of every command and worker (the URL conf imports this module), about 2 s of CPU each time.
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    p, g = normalize(pred or "").split(), normalize(gold or "").split()
    if not p or not g:
        return 0.0
    return float(sentence_bleu([g], p, smoothing_function=SmoothingFunction().method1))


def _norm_steps(steps: Sequence[str]) -> list[str]:
    return [normalize(s) for s in steps if normalize(s)]


def cot_em(pred_steps: Sequence[str], gold_steps: Sequence[str]) -> int:
    """CoT-EM = 1[the normalised step sequences are equal]."""
    a, b = _norm_steps(pred_steps), _norm_steps(gold_steps)
    return int(bool(b) and a == b)


def step_similarity(pred_steps: Sequence[str], gold_steps: Sequence[str], *, greedy: bool = False) -> float:
    """Soft path score: Jaccard of word sets per step pair, averaged over max(k, m) with missing steps 0.
    Positional (step k with step k) by default; ``greedy`` pairs each gold step with its best unused
    predicted step."""
    p = [word_set(s) for s in pred_steps]
    g = [word_set(s) for s in gold_steps]
    n = max(len(p), len(g))
    if n == 0:
        return 0.0
    if not greedy:
        return sum(jaccard(a, b) for a, b in zip(p, g, strict=False)) / n
    unused = list(range(len(p)))
    total = 0.0
    for gs in g:
        if not unused:
            break
        best = max(unused, key=lambda j: jaccard(p[j], gs))
        total += jaccard(p[best], gs)
        unused.remove(best)
    return total / n
