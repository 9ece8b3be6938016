"""Per-perturbation robustness (spec §5) and counterfactual indicators (spec §8) over
matched (original, variant) outputs. Pure: plain values in, dataclasses out.

Semantic consistency is the mean TF-IDF cosine (scikit-learn, fitted on the texts of
the pairs being compared) -- [I] the spec's fallback: no embedding model can be
downloaded here; ``SEMSIM_METHOD`` names it in every report.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction

import numpy as np
from rapidfuzz.distance import Levenshtein

from fidelity.core.answer import as_number, exact_match, step_similarity
from fidelity.core.explanation import confidence
from fidelity.core.text import normalize, word_set

SEMSIM_METHOD = "tfidf-cosine (scikit-learn TfidfVectorizer, l2, fitted per comparison)"
WEIGHTS = (0.3, 0.3, 0.2, 0.2)
_NUM = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")


@dataclass(frozen=True)
class Output:
    """One model output on one question."""

    text: str
    answer: str | None
    steps: tuple[str, ...]
    gold: str | None = None  # the gold answer of the question asked (a variant's derived gold)
    gold_steps: tuple[str, ...] = ()  # the gold path (the original problem's skeleton), if any


def em(o: Output) -> int:
    return exact_match(o.answer, o.gold)


def cot_score(o: Output, base: Output | None = None) -> float:
    """[I] (spec §11.5) the "CoT" of Table 1: mean soft step similarity against the gold path,
    or against the base trace when there is no gold path."""
    if o.gold_steps:
        return step_similarity(o.steps, o.gold_steps)
    ref = base if base is not None else o
    return step_similarity(o.steps, ref.steps)


def tfidf_cosines(left: Sequence[str], right: Sequence[str]) -> np.ndarray:
    """Cosine of TF-IDF vectors of left[i] and right[i], the vectorizer fitted on both sides."""
    if not left:
        return np.zeros(0)
    # scikit-learn is imported on first use: at module level it (with scipy) cost every command and worker
    # about 2.5 s of start-up, since the URL conf imports this module.
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(token_pattern=r"(?u)\b\w+\b")
    try:
        m = vec.fit_transform(list(left) + list(right))
    except ValueError:  # every text empty: no vocabulary
        return np.zeros(len(left))
    a, b = m[: len(left)], m[len(left):]
    return np.asarray(a.multiply(b).sum(axis=1)).ravel()


def token_jaccard(a: str, b: str) -> float:
    sa, sb = word_set(a), word_set(b)
    union = sa | sb
    return len(sa & sb) / len(union) if union else 0.0


def robustness(d_em: float, d_cot: float, sem: float, reason: float) -> float:
    """clip01(0.3 (1 - ΔEM) + 0.3 (1 - ΔCoT) + 0.2 SemSim + 0.2 ReasonSim)."""
    w = WEIGHTS
    return max(0.0, min(1.0, w[0] * (1 - d_em) + w[1] * (1 - d_cot) + w[2] * sem + w[3] * reason))


@dataclass(frozen=True)
class PerturbationRow:
    strategy: str
    n: int
    bl_em: float
    var_em: float
    bl_cot: float
    var_cot: float
    em_drop: float
    cot_drop: float
    sem: float
    reason: float
    conf_drop: float
    robustness: float

    def to_dict(self) -> dict:
        return asdict(self)


def row_from_means(strategy: str, n: int, bl_em: float, var_em: float, bl_cot: float, var_cot: float, sem: float,
                   reason: float, conf_drop: float) -> PerturbationRow:
    d_em, d_cot = bl_em - var_em, bl_cot - var_cot
    return PerturbationRow(strategy, n, bl_em, var_em, bl_cot, var_cot, d_em, d_cot, sem, reason, conf_drop,
                           robustness(d_em, d_cot, sem, reason))


@dataclass(frozen=True)
class PairScores:
    """Per-pair values the perturbation row averages (kept for bootstrap and exports)."""

    em_base: list[int]
    em_var: list[int]
    cot_base: list[float]
    cot_var: list[float]
    sem: list[float]
    reason: list[float]
    conf_base: list[float]
    conf_var: list[float]


def pair_scores(pairs: Sequence[tuple[Output, Output]]) -> PairScores:
    sem = tfidf_cosines([b.text for b, _ in pairs], [v.text for _, v in pairs]).tolist()
    return PairScores(
        [em(b) for b, _ in pairs], [em(v) for _, v in pairs],
        [cot_score(b) for b, _ in pairs], [cot_score(v, b) for b, v in pairs], sem,
        [token_jaccard(b.text, v.text) for b, v in pairs],
        [confidence(b.answer, b.steps, b.text) for b, _ in pairs],
        [confidence(v.answer, v.steps, v.text) for _, v in pairs],
    )


def _mean(xs: Sequence[float]) -> float:
    return float(sum(xs) / len(xs)) if xs else 0.0


def perturbation_row(strategy: str, pairs: Sequence[tuple[Output, Output]]) -> PerturbationRow:
    """ΔEM, ΔCoT, SemSim, ReasonSim, ΔConf and Robustness of one perturbation over its pairs."""
    s = pair_scores(pairs)
    return row_from_means(strategy, len(pairs), _mean(s.em_base), _mean(s.em_var), _mean(s.cot_base),
                          _mean(s.cot_var), _mean(s.sem), _mean(s.reason),
                          _mean(s.conf_base) - _mean(s.conf_var))


def rank(rows: Iterable[PerturbationRow]) -> list[PerturbationRow]:
    """Most robust first (ties by name, for a stable order)."""
    return sorted(rows, key=lambda r: (-r.robustness, r.strategy))


# --------------------------------------------------------------------------
# Counterfactuals


def numbers_in(text: str) -> set[Fraction]:
    out = set()
    for m in _NUM.finditer(text or ""):
        v = as_number(m.group(0))
        if v is not None:
            out.add(v)
    return out


def _canon(token: str) -> str:
    """A number token compared by value without building a Fraction: commas gone, "18.50" -> "18.5", "18.0" -> "18"."""
    t = token.replace(",", "")
    if "." in t:
        t = t.rstrip("0").rstrip(".")
    return t.lstrip("0") or "0"


def _canon_value(v: Fraction) -> str:
    if v.denominator == 1:
        return _canon(str(v.numerator))
    return _canon(format(float(v), ".10f"))


def mentions_value(text: str, values: Sequence[Fraction]) -> bool:
    """Does one of ``values`` occur as a number in ``text``? (CP_value)"""
    if not values:
        return False
    wanted = {_canon_value(v) for v in values}
    return any(_canon(m.group(0)) in wanted for m in _NUM.finditer(text or ""))


def step_consistency(a: Sequence[str], b: Sequence[str]) -> float:
    """SC = 1 - Lev(R, R') / max(|R|, |R'|), each normalised step one symbol (rapidfuzz); 1 for two empty chains."""
    na, nb = [normalize(s) for s in a], [normalize(s) for s in b]
    n = max(len(na), len(nb))
    if n == 0:
        return 1.0
    return 1.0 - Levenshtein.distance(na, nb) / n


@dataclass(frozen=True)
class CounterfactualPair:
    strategy: str
    magnitude: str
    complexity: str
    cp_value: int
    cp_diff: int
    ra: int
    aa: int
    aa_strict: bool  # False: lenient (gold unknown), AA = answer changed
    sc: float

    def to_dict(self) -> dict:
        return asdict(self)


def counterfactual_pair(base: Output, variant: Output, new_values: Sequence[Fraction], *, strategy: str,
                        magnitude: str, complexity: str, gold_known: bool) -> CounterfactualPair:
    """CP_value = a new value occurs in R(q'); CP_diff = the chains differ; RA = the chains differ
    with every number masked; AA = the answer changed and (strict, gold derived) equals the new gold;
    SC = step-level edit similarity."""
    cp_value = int(mentions_value(variant.text, new_values))
    na, nb = [normalize(s) for s in base.steps], [normalize(s) for s in variant.steps]
    cp_diff = int(na != nb)
    ma, mb = [_NUM.sub("#", s) for s in na], [_NUM.sub("#", s) for s in nb]
    ra = int(len(ma) != len(mb) or Levenshtein.distance(ma, mb) > 0)
    changed = not exact_match(base.answer, variant.answer) if (base.answer or variant.answer) else False
    if gold_known:
        aa = int(changed and bool(exact_match(variant.answer, variant.gold)))
    else:
        aa = int(changed)
    n = max(len(na), len(nb))
    sc = 1.0 if n == 0 else 1.0 - Levenshtein.distance(na, nb) / n
    return CounterfactualPair(strategy, magnitude, complexity, cp_value, cp_diff, ra, aa, gold_known, sc)


@dataclass(frozen=True)
class CounterfactualRow:
    group: str
    n: int
    cp_value: float
    cp_diff: float
    ra: float
    aa: float
    aa_strict_n: int
    sc: float
    difficulty: float

    def to_dict(self) -> dict:
        return asdict(self)


def counterfactual_row(group: str, pairs: Sequence[CounterfactualPair]) -> CounterfactualRow:
    """Rates over the pairs (Table 2) and Difficulty = 1 - mean((CP + RA + AA) / 3) with CP = CP_value."""
    n = len(pairs)
    if n == 0:
        return CounterfactualRow(group, 0, 0.0, 0.0, 0.0, 0.0, 0, 0.0, 0.0)
    cp = _mean([p.cp_value for p in pairs])
    ra = _mean([p.ra for p in pairs])
    aa = _mean([p.aa for p in pairs])
    return CounterfactualRow(group, n, cp, _mean([p.cp_diff for p in pairs]), ra, aa,
                             sum(p.aa_strict for p in pairs), _mean([p.sc for p in pairs]),
                             1.0 - _mean([(p.cp_value + p.ra + p.aa) / 3 for p in pairs]))


@dataclass
class CounterfactualTable:
    overall: CounterfactualRow
    by_strategy: list[CounterfactualRow] = field(default_factory=list)
    by_magnitude: list[CounterfactualRow] = field(default_factory=list)
    by_complexity: list[CounterfactualRow] = field(default_factory=list)


def counterfactual_table(pairs: Sequence[CounterfactualPair]) -> CounterfactualTable:
    groups: dict[str, dict[str, list[CounterfactualPair]]] = {"s": defaultdict(list), "m": defaultdict(list),
                                                              "c": defaultdict(list)}
    for p in pairs:
        groups["s"][p.strategy].append(p)
        groups["m"][f"{p.strategy} {p.magnitude}"].append(p)
        groups["c"][p.complexity].append(p)
    return CounterfactualTable(
        counterfactual_row("all", pairs),
        [counterfactual_row(k, v) for k, v in sorted(groups["s"].items())],
        [counterfactual_row(k, v) for k, v in sorted(groups["m"].items())],
        [counterfactual_row(k, v) for k, v in sorted(groups["c"].items())],
    )


# --------------------------------------------------------------------------
# Published perturbation sets (GSM-Plus)


@dataclass(frozen=True)
class PdrRow:
    perturbation: str
    n: int
    acc_original: float | None
    acc_variant: float | None
    pdr: float | None  # 1 - acc(variant) / acc(original); None when acc(original) = 0
    both: int
    seed_only: int
    variant_only: int
    neither: int

    def to_dict(self) -> dict:
        return asdict(self)


def pdr_rows(items: Iterable[tuple[str, bool, bool]]) -> list[PdrRow]:
    """Per perturbation type, from (type, seed correct, variant correct) pairs: accuracies, the
    performance drop rate and the seed-vs-variant confusion table."""
    by: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for kind, seed_ok, var_ok in items:
        by[kind].append((seed_ok, var_ok))
    rows = []
    for kind, xs in sorted(by.items()):
        n = len(xs)
        acc_o = sum(s for s, _ in xs) / n
        acc_v = sum(v for _, v in xs) / n
        rows.append(PdrRow(kind, n, acc_o, acc_v, (1 - acc_v / acc_o) if acc_o else None,
                           sum(s and v for s, v in xs), sum(s and not v for s, v in xs),
                           sum(v and not s for s, v in xs), sum(not s and not v for s, v in xs)))
    return rows
