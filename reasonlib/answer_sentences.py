"""The number a sentence gives as its answer: how today's models state a final answer in prose.

gpt-oss (and most chat models) end with a sentence, not a bare value: ``**Answer:** He will be **21 years
old** in three years.``, ``**Kylar needs to pay \\$64.**``, ``So the doorbell rang **175 times**.``,
``Thus each cage contains **5 rats**.`` This module reads the number out of such a sentence:

1. thousands separators of every kind are joined (``6,250``, ``6{,}250``, ``6,\\!250``, ``60\\,000``, a
   thin or no-break space), LaTeX wrappers (``\\text{}``, ``\\mathbf{}``, ``\\(``) and ``\\$`` are dropped,
   and parenthesised asides ("(about a 4 % underestimate)") are left out;
2. a number in bold is the one the model stressed: the last bold part holding a number wins (unless the
   whole sentence is bold, which stresses nothing in particular);
3. after a label ("Total gems: 595") the number after the last colon; in a formula the result after the
   last ``=``;
4. in a list with its sum ("84 sofas, 88 chairs, for a combined total of 172 pieces"), the number after
   "total";
5. otherwise the first number after a leading clause of time or place ("So after 10 hours, the sun is at
   82 degrees"): an answer sentence states its result first and the given quantities after it ("Crista
   needs 12 cups of water each day for her 20 plants"). A sentence with no digit may give its number in
   words ("one bowl of soup").

A duration in two units is read in the smaller one ("3 minutes and 36 seconds" -> 216 seconds), a clock
time on the hour as its hour ("2:00 PM" -> 2), and a number glued to a hyphen ("the 8-sandwich package")
is never the answer.

Pure and linear in the sentence's length (every pattern is a single pass without nested repetition).
"""

from __future__ import annotations

import re

__all__ = ["is_sentence", "sentence_number"]

# A thousands separator between digit groups: ",", "{,}", ",\!", "\,", thin space, narrow no-break space,
# no-break space. Only before exactly three digits, so "5, 10" and "7.5\,n" stay apart.
_GROUP_SEP_RE = re.compile(r"(?<=\d)(?:\{,\}|,\\!|,|\\,|\\ |[\u2009\u202f\u00a0])(?=\d{3}(?!\d))")
_WRAPPER_RE = re.compile(r"\\(?:text|textbf|textrm|mathbf|mathrm|mbox|boxed|fbox|operatorname)\s*\{([^{}]*)\}")
_DELIMITER_RE = re.compile(r"\\[()\[\]]|\$\$")
_ESCAPE_RE = re.compile(r"\\([$%])")
_SPACING_RE = re.compile(r"\\[,;:! ]|\\q?quad\b")
_PAREN_RE = re.compile(r"\([^()]*\)")
_BOLD_SPAN_RE = re.compile(r"\*\*([^*]+)\*\*")
# A number: optional sign (not the hyphen of "10-3"), digits, decimals, an optional "/b"; not one followed by a
# hyphen: a compound adjective ("the 8-sandwich package", "a 5‑day week") describes, never answers.
_NUMBER_RE = re.compile(
    r"(?:(?<![\w.\-])-?\d+(?:\.\d+)?(?:/\d+)?|(?<![\w.])\.\d+)(?![\d\-\u2010\u2011])"
)
# A duration in two units ("2 hours and 40 minutes", "3 minutes 36 seconds") is read in its smaller unit,
# the one a question counting minutes or seconds expects.
_DURATION_RE = re.compile(
    r"(\d+)\s*(hours?|hrs?|h|minutes?|mins?)\b,?\s*(?:and\s+)?(\d+)\s*(minutes?|mins?|seconds?|secs?|s)\b",
    re.IGNORECASE,
)
# A clock time on the hour ("2:00 PM") is its hour; a label's colon is followed by a space.
_ON_THE_HOUR_RE = re.compile(r"\b(\d{1,2}):00\b")
# A leading clause of time or place ("after 10 hours, ...") sets the scene; the answer follows it.
_LEAD_CLAUSE_RE = re.compile(
    r"^[\s*]*(?:(?:so|thus|therefore|hence)\s*,?\s*)?(?:after|in|on|at|by|over|during|within|for|with)\b[^,]{0,60},",
    re.IGNORECASE,
)
_OPERATOR_RE = re.compile(r"[+*/=^]")
_TOTAL_RE = re.compile(r"\btotal\b", re.IGNORECASE)
_WORD_RE = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")
_NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
}  # fmt: skip
_NUMBER_WORD_RE = re.compile(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", re.IGNORECASE)
# Longer than any answer sentence: a paragraph is not read as one sentence.
_MAX_SENTENCE = 600


def _plain(text: str) -> str:
    s = _GROUP_SEP_RE.sub("", text)
    # Twice: "\text{\mathbf{5}}" (the pattern takes innermost groups only).
    s = _WRAPPER_RE.sub(r"\1", _WRAPPER_RE.sub(r"\1", s))
    s = _ESCAPE_RE.sub(r"\1", s)
    s = _SPACING_RE.sub(" ", s)
    s = _DELIMITER_RE.sub(" ", s)
    return _GROUP_SEP_RE.sub("", s)


def is_sentence(text: str) -> bool:
    """Whether ``text`` is prose: three words or more, or two without an operator (LaTeX commands are
    not words). A value with a unit of several words ("18 dollars per day") is one too, which the caller
    tells apart by normalising it; an expression with words ("10+John's age") is kept as written."""
    words = len(_WORD_RE.findall(_WRAPPER_RE.sub(r" \1 ", text)))
    return words >= 3 or (words == 2 and not _OPERATOR_RE.search(text))


def _numbers(s: str) -> list[str]:
    return [m.group() for m in _NUMBER_RE.finditer(s)]


def _duration(m: re.Match[str]) -> str:
    big, small = m.group(2).lower(), m.group(4).lower()
    minutes_first = big.startswith("m")
    if not minutes_first and small.startswith("s"):
        return m.group(0)  # hours and seconds: no reading in one unit a question asks for
    return f"{int(m.group(1)) * 60 + int(m.group(3))} {'seconds' if minutes_first else 'minutes'}"


def _pick(s: str) -> str | None:
    """The answer among the numbers of a plain (bold-free) piece of text."""
    for cue in ("=", ": "):
        if cue in s:
            after = _numbers(s[s.rindex(cue) + len(cue) :])
            if after:
                return after[0]
    totals = list(_TOTAL_RE.finditer(s))
    if totals and len(_numbers(s)) >= 3:
        # A list and its sum: "84 sofas, 88 chairs, for a combined total of 172 pieces".
        after = _numbers(s[totals[-1].end() :])
        if after:
            return after[0]
    lead = _LEAD_CLAUSE_RE.match(s)
    if lead is not None and _numbers(s[lead.end() :]):
        s = s[lead.end() :]
    found = _numbers(s)
    return found[0] if found else None


def sentence_number(sentence: str) -> str | None:
    """The number ``sentence`` gives as its answer (digits as written, separators removed), else None."""
    if len(sentence) > _MAX_SENTENCE:
        return None
    s = _plain(sentence).strip().rstrip(".").strip()
    if s.count("**") % 2:
        # The closing "**" of a bold label ("**Answer:** He will be ...") or an opening one never closed.
        s = s[2:] if s.startswith("**") else s[:-2] if s.endswith("**") else s
    # Asides: "(about a 4 % underestimate)", "(i.e. 2 hours)". Not when the whole text is one.
    s = _ON_THE_HOUR_RE.sub(r"\1", _DURATION_RE.sub(_duration, s))
    unparenthesised = _PAREN_RE.sub(" ", s)
    if _numbers(unparenthesised):
        s = unparenthesised
    spans = list(_BOLD_SPAN_RE.finditer(s))
    whole = len(spans) == 1 and spans[0].start() == 0 and spans[0].end() == len(s)
    if spans and not whole:
        for span in reversed(spans):
            found = _pick(span.group(1))
            if found is not None:
                return found
    plain = s.replace("**", " ")
    found = _pick(plain)
    if found is not None:
        return found
    word = _NUMBER_WORD_RE.search(plain)
    return str(_NUMBER_WORDS[word.group(1).lower()]) if word else None
