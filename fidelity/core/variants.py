"""Seeded variant generation (spec §5 perturbations, §8 counterfactuals). Pure.

Every variant is a function of (question, strategy, magnitude choice, seed): the same
inputs give the same text, and the exact text is what gets stored and asked. A
question with nothing to modify gives a ``Skip`` with the reason instead.

Perturbations: token_shuffle, distractor, rephrase, semantic_noise, combined.
Counterfactuals: percent (±10/20/30 %), absolute (+/-k), year (±1/2/5), multiplier (x2, x3).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

PERTURBATIONS = ("token_shuffle", "distractor", "rephrase", "semantic_noise", "combined")
COUNTERFACTUALS = ("percent", "absolute", "year", "multiplier")
STRATEGIES = PERTURBATIONS + COUNTERFACTUALS
LABELS = {"token_shuffle": "Token Shuffle", "distractor": "Distractor Injection", "rephrase": "Rephrasing",
          "semantic_noise": "Semantic Noise", "combined": "Combined", "percent": "Percentage shift",
          "absolute": "Absolute change", "year": "Year shift", "multiplier": "Multiplier"}
VERSION = "fidelity-variants/1"

# The spec's number regex (§8 [I]); years are told apart by their own regex and context.
NUMBER = re.compile(r"\b\d{1,3}(?:,\d{3})*(?:\.\d+)?\b|\b\d+(?:\.\d+)?\b")
YEAR = re.compile(r"^(?:1[5-9]|20)\d{2}$")
_YEAR_CONTEXT = re.compile(r"(?:\b(?:in|from|to|since|before|after|until|by|of|year)\s+|[-–])$", re.IGNORECASE)
_FROM_TO = re.compile(r"\bfrom\s+((?:1[5-9]|20)\d{2})\s+to\s+((?:1[5-9]|20)\d{2})\b", re.IGNORECASE)

PERCENTS = (10, 20, 30)
ABSOLUTES = (1, 2, 3, 5)
YEAR_SHIFTS = (1, 2, 5)
MULTIPLIERS = (2, 3)

SYNONYMS = {
    "buys": "purchases", "buy": "purchase", "bought": "purchased", "sells": "vends", "sell": "vend",
    "makes": "produces", "make": "produce", "gets": "receives", "get": "receive", "has": "possesses",
    "needs": "requires", "need": "require", "wants": "wishes", "want": "wish", "uses": "employs",
    "use": "employ", "total": "overall", "each": "every", "every": "each", "day": "day", "big": "large",
    "small": "little", "large": "big", "little": "small", "starts": "begins", "start": "begin",
    "begins": "starts", "finishes": "completes", "decides": "chooses", "gives": "hands", "give": "hand",
    "money": "cash", "store": "shop", "shop": "store", "friends": "pals", "friend": "pal", "house": "home",
    "quickly": "rapidly", "many": "numerous", "also": "additionally", "earns": "makes", "pays": "spends",
    "team": "squad", "played": "competed", "belonged": "was affiliated", "joined": "signed with",
    "worked": "was employed", "lives": "resides", "lived": "resided",
}
DISTRACTOR_ENTITIES = ("the Riverside Library", "Northgate Bakery", "the Oak Street Museum", "Summit Rowing Club",
                       "the Harbor Theater", "Maple Grove School", "the Crescent Football Club", "Blue Pine Farm")
_WORDTOK = re.compile(r"\S+")
_PLAIN_WORD = re.compile(r"^[a-z][a-z]+$")
# Linear on any text (problem statements may be long and hostile): possessive quantifiers (++, *+) never
# give back what they took, so no run of spaces is scanned again from each of its positions.
_QUESTION_TAIL = re.compile(r"(?s)^(?P<body>.*?[.!])\s++(?P<q>[^.!?]*+\?)\s*+$")
# A time scope at the end of a question, found by searching the text before its "?" for a scope that ends
# it; (the old "^(head.*?)\s+(scope)\s*\?\s*$" was quadratic in a run of spaces).
_SCOPE_AT_END = re.compile(r"\b(?:(?:from|between)\s++\d{4}\s++(?:to|and)\s++\d{4}|in\s++\d{4})$", re.IGNORECASE)


def _trailing_scope(text: str) -> tuple[str, str] | None:
    """(head, scope) of a stripped question that ends in a time scope ("... from 2001 to 2005?"), else None."""
    if not text.endswith("?"):
        return None
    body = text[:-1].rstrip()
    m = _SCOPE_AT_END.search(body)
    if m is None or m.start() == 0 or not body[m.start() - 1].isspace():
        return None
    return body[: m.start()], m.group(0)


@dataclass(frozen=True)
class Change:
    """One edited number: where it sat in the original text, and its old and new value."""

    start: int
    end: int
    old: str
    new: str

    def to_dict(self) -> dict:
        return {"start": self.start, "end": self.end, "old": self.old, "new": self.new}


@dataclass(frozen=True)
class Variant:
    strategy: str
    magnitude: str  # "+20%", "-3", "+2y", "x3"; for perturbations the rule applied
    text: str
    changes: tuple[Change, ...] = field(default_factory=tuple)

    @property
    def substitutions(self) -> dict[Fraction, Fraction]:
        return {number_value(c.old): number_value(c.new) for c in self.changes}


@dataclass(frozen=True)
class Skip:
    strategy: str
    reason: str


def seed_for(seed: int, *parts: object) -> int:
    """A stable per-item seed (not Python's salted hash)."""
    digest = hashlib.sha256("\x1f".join([str(seed), *map(str, parts)]).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def number_value(text: str) -> Fraction:
    return Fraction(text.replace(",", ""))


def render_number(value: Fraction, like: str) -> str:
    """``value`` written the way ``like`` was: thousands separators kept, the decimals it needs."""
    if value.denominator == 1:
        s = str(value.numerator)
    else:
        decimals = len(like.split(".")[1]) if "." in like else 0
        decimals = max(decimals, 1)
        for d in range(decimals, 7):
            if (value * 10 ** d).denominator == 1:
                decimals = d
                break
        s = f"{float(value):.{decimals}f}"
    if "," in like:
        whole, _, frac = s.partition(".")
        neg = whole.startswith("-")
        whole = f"{int(whole.lstrip('-')):,}"
        s = ("-" if neg else "") + whole + (f".{frac}" if frac else "")
    return s


@dataclass(frozen=True)
class Mention:
    start: int
    end: int
    text: str
    is_year: bool


def mentions(text: str) -> list[Mention]:
    """The modifiable numbers of a question (regex detection), years marked."""
    out = []
    for m in NUMBER.finditer(text):
        before = text[max(0, m.start() - 12): m.start()]
        is_year = bool(YEAR.match(m.group(0))) and "," not in m.group(0) and not before.endswith("$") and (
            bool(_YEAR_CONTEXT.search(before)) or m.start() == 0)
        out.append(Mention(m.start(), m.end(), m.group(0), is_year))
    return out


def _replace(text: str, changes: Sequence[Change]) -> str:
    for c in sorted(changes, key=lambda c: -c.start):
        text = text[: c.start] + c.new + text[c.end:]
    return text


# --------------------------------------------------------------------------
# Counterfactuals


def _pick(cands: list[Mention], rng: random.Random) -> Mention:
    """[I] prefer a number written once in the question: an unambiguous input to trace."""
    counts: dict[str, int] = {}
    for c in cands:
        counts[c.text] = counts.get(c.text, 0) + 1
    once = [c for c in cands if counts[c.text] == 1]
    return rng.choice(once or cands)


def counterfactual(text: str, strategy: str, seed: int) -> Variant | Skip:
    """modify(q; m, δ): one number of the question changed by the strategy, δ drawn from the seed."""
    rng = random.Random(seed)
    found = mentions(text)
    if strategy == "year":
        years = [m for m in found if m.is_year]
        if not years:
            return Skip(strategy, "no year to shift")
        shift = rng.choice(YEAR_SHIFTS) * rng.choice((1, -1))
        ft = _FROM_TO.search(text)
        if ft:
            # "from A to B": shift both ends, so start < end holds.
            changes = tuple(Change(ft.start(g), ft.end(g), ft.group(g), str(int(ft.group(g)) + shift)) for g in (1, 2))
        else:
            m = _pick(years, rng)
            changes = (Change(m.start, m.end, m.text, str(int(m.text) + shift)),)
        return Variant(strategy, f"{shift:+d}y", _replace(text, changes), changes)
    cands = [m for m in found if not m.is_year and number_value(m.text) != 0]
    if not cands:
        return Skip(strategy, "no number to perturb")
    m = _pick(cands, rng)
    old = number_value(m.text)
    integer = "." not in m.text
    if strategy == "percent":
        pct = rng.choice(PERCENTS) * rng.choice((1, -1))
        new = old * (1 + Fraction(pct, 100))
        if integer:
            # [I] an integer stays an integer (rounded half up), and differs from the old value.
            new = Fraction(int(new + Fraction(1, 2)))
            if new == old:
                new = old + (1 if pct > 0 else -1)
        magnitude = f"{pct:+d}%"
    elif strategy == "absolute":
        k = rng.choice(ABSOLUTES)
        sign = rng.choice((1, -1)) if old - k > 0 else 1
        new = old + sign * k
        magnitude = f"{sign * k:+d}"
    elif strategy == "multiplier":
        k = rng.choice(MULTIPLIERS)
        new = old * k
        magnitude = f"x{k}"
    else:
        raise ValueError(f"unknown counterfactual strategy {strategy!r}")
    if new <= 0:
        new = old + 1
    change = Change(m.start, m.end, m.text, render_number(new, m.text))
    return Variant(strategy, magnitude, _replace(text, [change]), (change,))


# --------------------------------------------------------------------------
# Perturbations


def _has_digit(w: str) -> bool:
    return any(ch.isdigit() for ch in w)


def token_shuffle(text: str, seed: int) -> Variant | Skip:
    """Shuffle word order inside 1-2 windows of 3-4 adjacent words (about 15% of words); windows
    never hold a number, a year or the question mark, so time expressions and quantities stay intact."""
    rng = random.Random(seed)
    toks = [(m.start(), m.end(), m.group(0)) for m in _WORDTOK.finditer(text)]
    n_windows = 1 if len(toks) < 20 else 2
    spans: list[tuple[int, int]] = []
    for _ in range(n_windows):
        size = rng.choice((3, 4))
        starts = [i for i in range(len(toks) - size + 1)
                  if not any(_has_digit(toks[j][2]) or "?" in toks[j][2] for j in range(i, i + size))
                  and not any(a < i + size and i < b for a, b in spans)
                  and len({toks[j][2] for j in range(i, i + size)}) > 1]
        if not starts:
            break
        i = rng.choice(starts)
        spans.append((i, i + size))
    if not spans:
        return Skip("token_shuffle", "no window of 3-4 words without numbers to shuffle")
    words = [t[2] for t in toks]
    for a, b in spans:
        window = words[a:b]
        for _ in range(10):
            rng.shuffle(window)
            if window != words[a:b]:
                break
        words[a:b] = window
    out, last = [], 0
    for (s, e, _w), new in zip(toks, words, strict=True):
        out.append(text[last:s] + new)
        last = e
    out.append(text[last:])
    return Variant("token_shuffle", f"{len(spans)} window(s)", "".join(out))


def distractor(text: str, seed: int, entities: Sequence[str] = ()) -> Variant:
    """Append "Note that {entity} was founded in {year}." (entity from the dataset when given)."""
    rng = random.Random(seed)
    pool = [e for e in entities if e and e not in text] or list(DISTRACTOR_ENTITIES)
    entity = rng.choice(pool)
    year = rng.randint(1850, 2015)
    sentence = f"Note that {entity} was founded in {year}."
    q = _QUESTION_TAIL.match(text)
    if q:  # [I] before the question sentence, so the question still ends the text
        new = f"{q.group('body')} {sentence} {q.group('q')}"
    else:
        new = f"{text.rstrip()} {sentence}"
    return Variant("distractor", "1 sentence", new)


def rephrase(text: str, seed: int) -> Variant:
    """Template paraphrase: a trailing time scope moves to the front ("From A to B, ...?"); else the
    closing question moves before the facts; else a framing sentence."""
    found = _trailing_scope(text.strip())
    if found:
        head, scope = found[0].strip(), found[1]
        return Variant("rephrase", "scope-first",
                       f"{scope[0].upper()}{scope[1:]}, {head[0].lower()}{head[1:]}?")
    q = _QUESTION_TAIL.match(text.strip())
    if q:
        return Variant("rephrase", "question-first",
                       f"{q.group('q').strip()} Here is the situation: {q.group('body').strip()}")
    return Variant("rephrase", "framed", f"Consider the following. {text.strip()}")


def semantic_noise(text: str, seed: int) -> Variant | Skip:
    """Replace 1-2 non-entity words with synonyms; with none available, 1-2 character typos
    (two adjacent letters swapped in a lower-case word of 4+ letters)."""
    rng = random.Random(seed)
    toks = [(m.start(), m.end(), m.group(0)) for m in re.finditer(r"[A-Za-z]+", text)]
    swappable = [t for t in toks if t[2] in SYNONYMS and SYNONYMS[t[2]] != t[2]]
    k = rng.choice((1, 2))
    if swappable:
        chosen = rng.sample(swappable, min(k, len(swappable)))
        changes = [Change(s, e, w, SYNONYMS[w]) for s, e, w in chosen]
        return Variant("semantic_noise", f"{len(changes)} synonym(s)", _replace(text, changes))
    typo = [t for t in toks if _PLAIN_WORD.match(t[2]) and len(t[2]) >= 4]
    if not typo:
        return Skip("semantic_noise", "no word to replace or misspell")
    chosen = rng.sample(typo, min(k, len(typo)))
    changes = []
    for s, e, w in chosen:
        i = rng.randrange(len(w) - 1)
        changes.append(Change(s, e, w, w[:i] + w[i + 1] + w[i] + w[i + 2:]))
    return Variant("semantic_noise", f"{len(changes)} typo(s)", _replace(text, changes))


def combined(text: str, seed: int, entities: Sequence[str] = ()) -> Variant | Skip:
    """Shuffle, then distractor, then noise, each with its own derived seed."""
    cur, applied = text, []
    for name, fn in (("token_shuffle", token_shuffle), ("distractor", None), ("semantic_noise", semantic_noise)):
        s = seed_for(seed, name)
        v = distractor(cur, s, entities) if fn is None else fn(cur, s)
        if isinstance(v, Variant):
            cur = v.text
            applied.append(name)
    if cur == text:
        return Skip("combined", "no transformation applied")
    return Variant("combined", "+".join(applied), cur)


def perturbation(text: str, strategy: str, seed: int, entities: Sequence[str] = ()) -> Variant | Skip:
    if strategy == "token_shuffle":
        return token_shuffle(text, seed)
    if strategy == "distractor":
        return distractor(text, seed, entities)
    if strategy == "rephrase":
        return rephrase(text, seed)
    if strategy == "semantic_noise":
        return semantic_noise(text, seed)
    if strategy == "combined":
        return combined(text, seed, entities)
    raise ValueError(f"unknown perturbation {strategy!r}")


def make_variant(text: str, strategy: str, seed: int, entities: Sequence[str] = ()) -> Variant | Skip:
    """Any of the nine strategies; a Skip when the question offers nothing to change."""
    if not (text or "").strip():
        return Skip(strategy, "empty question")
    if strategy in COUNTERFACTUALS:
        return counterfactual(text, strategy, seed)
    return perturbation(text, strategy, seed, entities)


def entities_of(texts: Sequence[str], limit: int = 200) -> list[str]:
    """Capitalised multi-word spans of a dataset, for distractors (first ``limit``, de-duplicated)."""
    seen: dict[str, None] = {}
    for t in texts:
        for m in re.finditer(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)+", t):
            seen.setdefault(m.group(0), None)
            if len(seen) >= limit:
                return list(seen)
    return list(seen)
