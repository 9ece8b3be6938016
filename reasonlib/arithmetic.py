"""Exact arithmetic of a claim such as ``16 - 3 - 4 = 9`` or ``<<9*2=18>>``.

Numbers are read from their decimal text into ``fractions.Fraction`` (exact
rationals: the arithmetic of sympy's ``Rational`` without its import and
dispatch cost, and the contract's type) and combined by a tiny
recursive-descent parser over numbers, ``+ - * / ^`` and parentheses; no
text is ever evaluated as code.

Tolerance is only for rounding the claim itself shows (docs/judges.md,
"Rounding"): a stated result that is not the exact value holds only when it is
the value correctly rounded at the precision it shows *and* either the step
says it rounds (``rounded``, ``approximately``, ``about 6``, ``≈``, ``~``) or
the exact value has no finite decimal expansion, so any decimal must cut it:

* ``10 / 3 = 3.33`` and ``= 3.3`` hold, ``= 3.4`` and the cut ``2 / 3 = 0.66``
  do not; ``0.0625 * 100% = 6%`` and ``25 / 4 = 6.3`` are false (6.25 can be
  written exactly) unless the step says it rounds;
* a whole-number result of a division must be exact (``10 / 3 = 3`` is false)
  unless the step says it rounds, except a percentage of a non-terminating
  value (``1 / 7 * 100% = 14%``);
* ``12 = 13``: two plain numbers that differ are a false claim (an equal pair
  says nothing and is no claim);
* a number with 15+ significant digits is a float rendering
  (``0.1 + 0.2 = 0.30000000000000004``): compared to 1e-12 relative;
* an operand that shows a repeating decimal cut to 2+ decimals may stand for
  its fraction (``33.33 * 3 = 100``, ``100% / 33.33% = 3``).

Percent: ``50%`` is 0.5; a stated ``N%`` also matches a left side worth N
(``10 / 20 * 100 = 50%``); ``A - p%`` may mean A less p% of A
(``$80 - 50% = $40``); and when the result is a percentage, a percent in a
sum may be a unit (``28% - 0.5 = 27.5%``).

It lives in annotation, the lowest app, because skeleton authoring checks a
step's ``check`` equation with it; the mechanistic judge
(judges/providers/mechanistic/) reads steps with it. Pure: no Django, no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import pairwise


@dataclass(frozen=True)
class Claim:
    text: str  # as it appears: an annotation's inner text, or the visible equation
    lhs: str
    rhs: str
    value: Fraction | None  # exact value of lhs; None when undefined (division by zero)
    stated: Fraction | None  # rhs value
    ok: bool
    source: str  # "annotation" | "equation" | "check" (a skeleton step's)



# --------------------------------------------------------------------------
# Tokens

_VULGAR = {
    "½": Fraction(1, 2), "⅓": Fraction(1, 3), "⅔": Fraction(2, 3), "¼": Fraction(1, 4),
    "¾": Fraction(3, 4), "⅕": Fraction(1, 5), "⅖": Fraction(2, 5), "⅗": Fraction(3, 5),
    "⅘": Fraction(4, 5), "⅙": Fraction(1, 6), "⅚": Fraction(5, 6), "⅛": Fraction(1, 8),
    "⅜": Fraction(3, 8), "⅝": Fraction(5, 8), "⅞": Fraction(7, 8),
}
_VULGAR_CLASS = "".join(_VULGAR)
_OPS = {
    "+": "+", "-": "-", "\u2212": "-", "\u2013": "-", "*": "*", "×": "*", "·": "*",
    "⋅": "*", "∗": "*", "/": "/", "÷": "/", "∕": "/", "^": "^", "**": "^",
}
_SUPERSCRIPTS = {"²": 2, "³": 3}

# Alternatives are tried in order at each position. Words come first (most of
# the text); digit-led look-alikes of arithmetic (dates, phone numbers, clock
# times) come before numbers so "3/4/2020" and "3:30" never become operands.
_TOKEN_RE = re.compile(
    rf"""
    (?P<ws>\s+)
    |(?P<word>[^\W\d_{_VULGAR_CLASS}²³]+(?:[ \t]+[^\W\d_{_VULGAR_CLASS}²³]+)*)
    |(?P<date>(?<!\d)(?:0?[1-9]|1[0-2])/(?:0?[1-9]|[12]\d|3[01])/(?:\d{{4}}|\d{{2}})(?![\d/]))
    |(?P<phone>(?<!\d)\d{{3}}-\d{{3}}-\d{{4}}(?!\d))
    |(?P<clock>\d+(?::\d+)+)
    |(?P<num>
        (?P<cur>[$£€]\s?)?
        (?:
          (?P<int>\d{{1,3}}(?:,\d{{3}})+(?!\d|,\d)|\d+)(?P<frac>\.\d+)?(?P<vul1>[{_VULGAR_CLASS}])?
          |(?P<dot>\.\d+)
          |(?P<vul2>[{_VULGAR_CLASS}])
        )
        (?P<pct>\s?%)?
      )
    |(?P<op>\*\*|[-+*/^×·⋅∗÷∕\u2212\u2013])
    |(?P<eq>=+(?!>)|≈)
    |(?P<lp>\()
    |(?P<rp>\))
    |(?P<sup>[²³])
    |(?P<deg>°)
    |(?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)


_ZERO = Fraction(0)
_MAX_DIGITS = 4000  # Python refuses int() of longer digit strings


class Tok:
    __slots__ = ("kind", "text", "start", "end", "glued", "op", "value", "shown",
                 "approx", "decimals", "sig", "pct")

    def __init__(self, kind: str, text: str, start: int, end: int, glued: bool, op: str = ""):
        self.kind = kind  # num op sup lp rp eq word unit other
        self.text = text
        self.start = start
        self.end = end
        self.glued = glued  # no whitespace between this token and the previous one
        self.op = op  # normalized operator: + - * / ^
        self.value: Fraction = _ZERO  # num: exact value ("50%" is 1/2)
        self.shown: Fraction = _ZERO  # num: value without the percent sign
        self.approx: Fraction | None = None  # num: the fraction a cut repeating decimal stands for
        self.decimals = 0  # num: decimals shown
        self.sig = 0  # num: significant digits shown
        self.pct = False

    def __repr__(self) -> str:  # for debugging
        return f"<{self.kind} {self.text!r}>"


def _reconstruct(shown: Fraction, decimals: int) -> Fraction | None:
    """The simple fraction a decimal cut to ``decimals`` places stands for
    (33.33 -> 100/3, 0.67 -> 2/3, 0.14 -> 1/7), if any."""
    if decimals < 2 or decimals > 6:
        return None
    for q in (3, 6, 7, 9, 11, 12):
        cand = Fraction(round(shown * q), q)
        d = cand.denominator
        while d % 2 == 0:
            d //= 2
        while d % 5 == 0:
            d //= 5
        if d != 1 and cand != shown and shows(cand, shown, decimals):
            return cand
    return None


def _num_token(m: re.Match, start: int, end: int, glued: bool) -> Tok:
    int_part, frac_part, dot = m.group("int", "frac", "dot")
    if dot:
        int_part, frac_part = "0", dot
    return _make_num(m.group(0), start, end, glued, int_part, frac_part,
                     m.group("vul1") or m.group("vul2"), bool(m.group("pct")))


def _make_num(text: str, start: int, end: int, glued: bool, int_part: str | None,
              frac_part: str | None, vul: str | None = None, pct: bool = False) -> Tok:
    t = Tok("num", text, start, end, glued)
    value = _ZERO
    digits = ""
    if int_part is not None:
        digits = int_part.replace(",", "") if "," in int_part else int_part
        if len(digits) + len(frac_part or "") > _MAX_DIGITS:
            t.kind = "other"  # not arithmetic anyone shows; int() would refuse it anyway
            return t
        if frac_part:
            t.decimals = len(frac_part) - 1
            digits += frac_part[1:]
            value = Fraction(int(digits), 10**t.decimals)
        else:
            value = Fraction(int(digits))
    if vul:
        value += _VULGAR[vul]
    t.sig = len(digits.lstrip("0"))
    t.shown = value
    if t.decimals >= 2:
        t.approx = _reconstruct(value, t.decimals)
    if pct:
        t.pct = True
        value = value / 100
    t.value = value
    return t


# Most calculator annotations are bare arithmetic ("16-3-4=9"): a lean lexer.
# Possessive (++): a digit run is one operand, never split again -- "(?:\d+...)+" tried every split of a
# long run of digits (exponential time on "111...1x" in a model's calculator annotation).
_BARE_RE = re.compile(r"(?:\d++(?:\.\d++)?|\.\d++|\*\*|[-+*/^()=])++")
_BARE_TOKEN_RE = re.compile(r"(\d+)(\.\d+)?|(\.\d+)|(\*\*|[-+*/^])|(\()|(\))|(=)")
_BARE_KINDS = (None, None, None, None, "op", "lp", "rp", "eq")


def _tokenize_bare(text: str) -> list[Tok]:
    toks = []
    for m in _BARE_TOKEN_RE.finditer(text):
        start, end = m.span()
        idx = m.lastindex
        if idx <= 3:
            if idx == 3:
                t = _make_num(m.group(0), start, end, True, "0", m.group(3))
            else:
                t = _make_num(m.group(0), start, end, True, m.group(1), m.group(2))
        else:
            kind = _BARE_KINDS[idx]
            t = Tok(kind, m.group(0), start, end, True, _OPS[m.group(0)] if kind == "op" else "")
        toks.append(t)
    return toks


def _plain_tokens(s: str, offset: int, glued: bool) -> list[Tok]:
    # Inside an annotation "12/3/12" or "555-123-4567" is arithmetic.
    out = []
    for m in re.finditer(r"\d+|[-/]", s):
        t = Tok("num" if m.group(0)[0].isdigit() else "op", m.group(0),
                 m.start() + offset, m.end() + offset, glued if not out else True)
        if t.kind == "num":
            t.value = t.shown = Fraction(int(t.text))
            t.sig = len(t.text.lstrip("0"))
        else:
            t.op = t.text
        out.append(t)
    return out



def tokenize(text: str, visible: bool) -> list[Tok]:
    if not visible and _BARE_RE.fullmatch(text):
        return _tokenize_bare(text)
    toks: list[Tok] = []
    prev_end = -1
    for m in _TOKEN_RE.finditer(text):
        kind = m.lastgroup
        if kind == "ws":
            continue
        start, end = m.span()
        glued = start == prev_end
        prev_end = end
        if kind == "num":
            toks.append(_num_token(m, start, end, glued))
        elif kind == "op":
            toks.append(Tok("op", m.group(0), start, end, glued, _OPS[m.group(0)]))
        elif kind == "sup":
            t = Tok("sup", m.group(0), start, end, glued)
            t.value = Fraction(_SUPERSCRIPTS[m.group(0)])
            toks.append(t)
        elif kind in ("date", "phone"):
            if visible:
                toks.append(Tok("other", m.group(0), start, end, glued))
            else:
                toks.extend(_plain_tokens(m.group(0), start, glued))
        elif kind == "clock":
            toks.append(Tok("other", m.group(0), start, end, glued))
        elif kind == "deg":  # "90° - 30° = 60°": a unit when it follows a number
            unit = glued and toks and toks[-1].kind == "num"
            toks.append(Tok("unit" if unit else "other", m.group(0), start, end, glued))
        else:
            toks.append(Tok(kind, m.group(0), start, end, glued))
    # "2 x 0.5", "2x3", "5 X $4": an x between two operands is multiplication;
    # "x = 5", "2x + 1", "33 + x" stay words (variables are not checkable), and so
    # does an x glued to one side only ("1.45x 11,520": a coefficient times x).
    for i in range(1, len(toks) - 1):
        t = toks[i]
        if t.kind == "word" and (t.text == "x" or t.text == "X"):
            if toks[i - 1].kind in ("num", "rp", "sup") and toks[i + 1].kind in ("num", "lp") \
                    and t.glued == toks[i + 1].glued:
                t.kind, t.op = "op", "*"
    if visible:
        _mark_bullets(text, toks)
    return toks


_BULLET_OPS = frozenset("-*+\u2013\u2212")


def _mark_bullets(text: str, toks: list[Tok]) -> None:
    # "- 3^2 = 9" on a line of its own: a markdown bullet (a dash, star or plus
    # that opens a line and is followed by a blank) is no minus sign, so
    # "8\n- 3^2 = 9" is not "8 - 3^2".
    for t in toks:
        if t.kind != "op" or t.text not in _BULLET_OPS:
            continue
        if text[t.end:t.end + 1] not in (" ", "\t"):
            continue
        j = t.start  # back over blanks only: linear however long the line
        while j > 0 and text[j - 1] in " \t":
            j -= 1
        if j == 0 or text[j - 1] == "\n":
            t.kind, t.op = "other", ""



# --------------------------------------------------------------------------
# Parser / evaluator


class _Unparsable(Exception):
    pass


_MAX_POW_BITS = 4096
# How a number token is read: literally, with percent as a unit ("28% - 0.5
# = 27.5%"), with cut repeating decimals as their fractions, or both; and
# whether "A - p%" means A less p% of A ("$80 - 50% = $40").
_LITERAL, _PCT_UNIT, _APPROX, _BOTH, _PCT_OF = 0, 1, 2, 3, 4


def _tok_value(t: Tok, mode: int) -> Fraction:
    if mode == _LITERAL:
        return t.value
    if mode & _APPROX and t.approx is not None:
        return t.approx if (mode & _PCT_UNIT or not t.pct) else t.approx / 100
    return t.shown if (mode & _PCT_UNIT) else t.value


class _Parser:
    """expr := term (('+'|'-') term)* ; term := unary (('*'|'/') unary)* ;
    unary := ('+'|'-') unary | power ; power := atom ('^' unary | sup)* ;
    atom := NUM | '(' expr ')' ; a number or ')' glued to '(' multiplies."""

    __slots__ = ("toks", "n", "i", "n_ops", "mode", "undefined")

    def __init__(self, toks: Sequence[Tok], mode: int = _LITERAL):
        self.toks = toks
        self.n = len(toks)
        self.i = 0
        self.n_ops = 0  # binary operators seen
        self.mode = mode
        self.undefined = False  # a division by zero was met

    def parse(self) -> Fraction:
        if not self.toks:
            raise _Unparsable
        v = self.expr()
        if self.i != self.n:
            raise _Unparsable
        return v

    def expr(self) -> Fraction:
        v = self.term()
        toks = self.toks
        while self.i < self.n:
            t = toks[self.i]
            if t.kind != "op" or (t.op != "+" and t.op != "-"):
                break
            self.i += 1
            self.n_ops += 1
            if self.mode & _PCT_OF and self._lone_percent():
                p = toks[self.i].value
                self.i += 1
                v = v * (1 + p) if t.op == "+" else v * (1 - p)
                continue
            r = self.term()
            v = v + r if t.op == "+" else v - r
        return v

    def _lone_percent(self) -> bool:
        t = self.toks[self.i] if self.i < self.n else None
        if t is None or t.kind != "num" or not t.pct:
            return False
        nxt = self.toks[self.i + 1] if self.i + 1 < self.n else None
        return nxt is None or not (nxt.kind == "sup" or (nxt.kind == "op" and nxt.op in "*/^"))

    def term(self) -> Fraction:
        v = self.unary()
        toks = self.toks
        while self.i < self.n:
            t = toks[self.i]
            if t.kind == "op" and (t.op == "*" or t.op == "/"):
                self.i += 1
            elif t.kind == "lp" and t.glued and toks[self.i - 1].kind in ("num", "rp"):
                pass  # implicit multiplication: 2(3), (1+2)(3)
            else:
                break
            self.n_ops += 1
            r = self.unary()
            if t.op == "/":
                if r == 0:
                    self.undefined = True
                else:
                    v = v / r
            else:
                v = v * r
        return v

    def unary(self) -> Fraction:
        if self.i < self.n:
            t = self.toks[self.i]
            if t.kind == "op" and (t.op == "+" or t.op == "-"):
                self.i += 1
                v = self.unary()
                return -v if t.op == "-" else v
        return self.power()

    def power(self) -> Fraction:
        v = self.atom()
        toks = self.toks
        while self.i < self.n:
            t = toks[self.i]
            if t.kind == "sup":
                self.i += 1
                e = t.value
            elif t.kind == "op" and t.op == "^":
                self.i += 1
                e = self.unary()
            else:
                break
            self.n_ops += 1
            v = self._pow(v, e)
        return v

    def _pow(self, base: Fraction, e: Fraction) -> Fraction:
        if e.denominator != 1:
            raise _Unparsable  # roots are not rational in general: not checkable
        k = int(e)
        bits = max(base.numerator.bit_length(), base.denominator.bit_length())
        if abs(k) * bits > _MAX_POW_BITS:
            raise _Unparsable
        if base == 0 and k < 0:
            self.undefined = True
            return base
        return base**k

    def atom(self) -> Fraction:
        if self.i >= self.n:
            raise _Unparsable
        t = self.toks[self.i]
        if t.kind == "num":
            self.i += 1
            if self.i < self.n and self.toks[self.i].kind == "num":
                raise _Unparsable  # "3 4", "100%.01": juxtaposed numbers
            return _tok_value(t, self.mode)
        if t.kind == "lp":
            self.i += 1
            v = self.expr()
            if self.i >= self.n or self.toks[self.i].kind != "rp":
                raise _Unparsable
            self.i += 1
            return v
        raise _Unparsable


class Seg:
    """A parsed expression: one side of an equation."""

    __slots__ = ("toks", "text", "start", "end", "value", "alts", "n_ops", "src")

    def __init__(self, toks: list[Tok], span: tuple[int, int], src: str,
                 value: Fraction | None, n_ops: int):
        self.toks = toks  # without unit words
        self.start, self.end = span
        self.src = src  # the whole text the expression was read from
        self.text = src[self.start:self.end]
        self.value = value  # None: undefined (division by zero)
        self.n_ops = n_ops
        self.alts: list[tuple[int, Fraction]] = []  # (mode, value) under other readings


def segment(toks: list[Tok] | None, src: str) -> Seg | None:
    """Parse a run of tokens; None when it is not arithmetic."""
    if not toks:
        return None
    span = (toks[0].start, toks[-1].end)
    # "3/4 cup", "1/4 container": a quantity, not a division to check.
    quantity = len(toks) == 4 and [t.kind for t in toks] == ["num", "op", "num", "unit"] \
        and toks[1].op == "/"
    toks = [t for t in toks if t.kind != "unit"]  # "60 pounds / 2": units are labels
    p = _Parser(toks)
    try:
        value = p.parse()
    except (_Unparsable, RecursionError):
        return None
    seg = Seg(toks, span, src, None if p.undefined else value, 0 if quantity else p.n_ops)
    if seg.value is None or not p.n_ops:
        return seg
    modes = []
    if any(t.kind == "num" and t.pct for t in toks) and _percent_is_additive(toks):
        modes += [_PCT_UNIT, _PCT_OF]
    if any(t.kind == "num" and t.approx is not None for t in toks):
        modes.append(_APPROX)
        if modes[0] == _PCT_UNIT:
            modes.append(_BOTH)
    for mode in modes:
        p = _Parser(toks, mode)
        try:
            alt = p.parse()
        except _Unparsable:
            continue
        if not p.undefined and alt != value:
            seg.alts.append((mode, alt))
    return seg


def _percent_is_additive(toks: list[Tok]) -> bool:
    for i, t in enumerate(toks):
        if t.kind == "num" and t.pct:
            before = toks[i - 1] if i else None
            after = toks[i + 1] if i + 1 < len(toks) else None
            for nb in (before, after):
                if nb is not None and (nb.kind == "sup" or (nb.kind == "op" and nb.op in "*/^")):
                    return False
    return True


# --------------------------------------------------------------------------
# Comparison with the tolerance the claim itself shows


def shows(value: Fraction, stated: Fraction, decimals: int, whole: bool = False) -> bool:
    """Is ``stated`` (shown with ``decimals`` places) ``value`` rounded or
    truncated to that many places? Whole numbers must be exact unless
    ``whole`` (percentages: "1 / 7 * 100% = 14%")."""
    if value == stated:
        return True
    if decimals <= 0 and not whole:
        return False
    scale = 10**decimals
    s = stated * scale
    if s.denominator != 1:
        return False
    q = value * scale
    s_int = s.numerator
    return s_int == math.trunc(q) or abs(q - s_int) <= Fraction(1, 2)


_FLOAT_REL = Fraction(1, 10**12)

# Words and signs by which a step says it rounds: "rounded to 6%", "about 6",
# "≈ 6", "~6". "about"/"around"/"nearly"/"almost" count only before a number
# ("think about it" says nothing).
_ROUNDS_RE = re.compile(
    r"(?i)\bround(?:ed|ing|s)?\b|\bapprox(?:imately|imate|\.)?|\broughly\b|≈|~\s*[$£€]?\d"
    r"|\b(?:about|around|nearly|almost|circa)\s+[$£€]?\d"
)


def says_it_rounds(text: str) -> bool:
    """Does the text say that its numbers are rounded?"""
    return bool(_ROUNDS_RE.search(text))


def terminates(value: Fraction) -> bool:
    """Has ``value`` a finite decimal expansion (denominator 2^a 5^b)?"""
    d = value.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    return d == 1


def rounds_to(value: Fraction, stated: Fraction, decimals: int) -> bool:
    """Is ``stated`` ``value`` correctly rounded to ``decimals`` places (at an
    exact half, either neighbour)?"""
    s = stated * 10**decimals
    if s.denominator != 1:
        return False
    return abs(value * 10**decimals - s) <= Fraction(1, 2)


def _close(value: Fraction, stated: Fraction, decimals: int, floatish: bool,
           whole: bool = False, rounds: bool = False) -> bool:
    """Does ``stated`` (shown with ``decimals`` places) state ``value``? The
    rounding rule of the module docstring; ``whole``: a percentage, which may
    be rounded to a whole number; ``rounds``: the step says it rounds."""
    if value == stated:
        return True
    if floatish and abs(value - stated) <= _FLOAT_REL * max(abs(value), abs(stated)):
        return True
    if not rounds and (terminates(value) or (decimals <= 0 and not whole)):
        return False
    return rounds_to(value, stated, decimals)


def _floatish(seg: Seg) -> bool:
    return any(t.kind == "num" and t.sig >= 15 for t in seg.toks)


def _weight(toks: list[Tok], i: int) -> int:
    """How many times the number at ``toks[i]`` enters a product: its exponent in
    "2.8284^2" or "(2.8284)^2", else 1."""
    j = i + 1
    while j < len(toks) and toks[j].kind == "rp":
        j += 1
    if j < len(toks):
        if toks[j].kind == "sup":
            return int(toks[j].value)
        if toks[j].kind == "op" and toks[j].op == "^" and j + 1 < len(toks) and toks[j + 1].kind == "num":
            e = toks[j + 1].value
            if e.denominator == 1:
                return min(abs(int(e)), 50)
    return 1


def _rounded_operands(left: Seg, right: Seg, value: Fraction, stated: Fraction) -> bool:
    """Is the gap between ``value`` and ``stated`` no more than the rounding of the
    operands shows? An operand with 4+ decimals ("0.4167" for 5/12, "2.8284" for
    the square root of 8, "1.020150501" for 1.005^4 cut to 9 places) may stand for
    anything within half a unit of its last place; to first order that moves a
    product or quotient by the sum of the operands' relative errors (times their
    exponents), and a sum by no more."""
    if value == stated:
        return True
    tol = Fraction(0)
    # A stated plain result keeps the rounding rule of _close: only operands count.
    for seg in (left, right) if right.n_ops else (left,):
        for i, t in enumerate(seg.toks):
            if t.kind == "num" and t.decimals >= 4 and t.shown:
                tol += _weight(seg.toks, i) * Fraction(1, 2 * 10**t.decimals) / abs(t.shown)
    if not tol:
        return False
    return abs(value - stated) <= tol * max(abs(value), abs(stated))


def _negative_lead(right: Seg) -> Tok | None:
    # "120 - 875 = -755/288": a running step that opens with a negative number.
    toks = right.toks
    if len(toks) > 2 and toks[0].kind == "op" and toks[0].op == "-" and toks[1].kind == "num" \
            and toks[1].glued and toks[2].kind == "op" and toks[2].op != "^":
        lead = Tok("num", right.src[toks[0].start:toks[1].end], toks[0].start, toks[1].end, toks[0].glued)
        lead.value = lead.shown = -toks[1].value
        lead.decimals, lead.sig = toks[1].decimals, toks[1].sig
        return lead
    return None


def _judge_pair(left: Seg, right: Seg, rounds: bool = False, approx: bool = False,
                ) -> tuple[bool, Fraction | None, Tok | None]:
    """(holds, stated value, leading token when only a running total matched).
    ``approx``: the relation is "≈", which holds within a unit of the last place
    the stated value shows."""
    ok, stated, lead = _judge_exact(left, right, rounds)
    if ok or left.value is None or stated is None:
        return ok, stated, lead
    if _rounded_operands(left, right, left.value, stated):
        return True, stated, None
    if approx and _near(left.value, right):
        return True, stated, None
    return ok, stated, lead


_NEAR_REL = Fraction(1, 10**5)


def _near(value: Fraction, right: Seg) -> bool:
    """Does "value ≈ right" hold: within a unit of the last place the stated
    number shows ("≈ 425,500": hundreds), or within 1e-5 relative (an estimate
    carried through many digits is not wrong in its seventh)?"""
    nums = [t for t in right.toks if t.kind == "num"]
    if right.n_ops or len(nums) != 1 or right.value is None:
        return False
    t = nums[0]
    if t.decimals:
        unit = Fraction(1, 10**t.decimals)
    else:
        digits = t.text.replace(",", "").rstrip("%").strip().lstrip("$£€").strip()
        unit = Fraction(10 ** (len(digits) - len(digits.rstrip("0")))) if digits.strip("0") else Fraction(1)
    if t.pct:
        unit /= 100
    gap = abs(value - right.value)
    return gap <= unit or gap <= _NEAR_REL * abs(right.value)


def _judge_exact(left: Seg, right: Seg, rounds: bool = False) -> tuple[bool, Fraction | None, Tok | None]:
    """(holds, stated value, leading token when only a running total matched)."""
    # Percent as a unit only when the result is a percentage too: "28% - 0.5 =
    # 27.5%", but not "$50 + 10% = $60".
    pct_result = any(t.kind == "num" and t.pct for t in right.toks)
    lvals = [left.value, *(v for mode, v in left.alts if pct_result or not mode & _PCT_UNIT)]
    floatish = _floatish(left) or _floatish(right)
    nums = [t for t in right.toks if t.kind == "num"]
    if right.n_ops == 0 and len(nums) == 1:
        t = nums[0]
        # Money shown to the cent is rounded to the cent ("30,769.23 × 1.40 = $43,076.92").
        cents = t.decimals == 2 and t.text[:1] in "$£€"
        for v in lvals:
            if _close(v, right.value, t.decimals, floatish, rounds=rounds or cents):
                return True, right.value, None
        if t.pct:
            # "1 / 7 = 14%" (a percentage shown whole is conventionally
            # rounded), and "10 / 20 * 100 = 50%" states fifty percent too.
            for c, places in ((right.value, t.decimals + 2), (right.value * 100, t.decimals)):
                for v in lvals:
                    if _close(v, c, places, floatish, whole=True, rounds=rounds):
                        return True, c, None
        return False, right.value, None
    rvals = [right.value, *(v for _, v in right.alts)]
    if any(_close(v, r, 0, floatish, rounds=rounds) for v in lvals for r in rvals):
        return True, right.value, None
    # A running total: "3 * 4 = 12 + 2 = 14" says 3 * 4 = 12.
    lead = _negative_lead(right) or right.toks[0]
    if lead.kind == "num" and len(right.toks) > 1:
        nxt = right.toks[2 if lead is not right.toks[0] else 1]
        if nxt.kind == "op" and nxt.op != "^":
            for v in lvals:
                if _close(v, lead.value, lead.decimals, floatish or lead.sig >= 15, rounds=rounds):
                    return True, lead.value, lead
    return False, right.value, None



def _plain(seg: Seg) -> bool:
    return seg.n_ops == 0 and len(seg.toks) == 1 and seg.toks[0].kind == "num"


def pair_claims(chain: list[Seg | None], src: str, source: str, anchor: int | None = None,
                 skip: Callable[[Seg, Seg, Fraction | None], bool] | None = None,
                 plain: Callable[[Seg, Seg], bool] | None = None, rounds: bool = False,
                 approx: Sequence[bool] = (),
                 ) -> list[tuple[Claim, int, int, int]]:
    """Claims of one chain ``e0 = e1 = ... = ek`` as (claim, position,
    rhs start, rhs end). A pair ``L = R`` is a claim when L has an operator:
    "1 hour = 60 minutes" and "x = 5" are not arithmetic. Two plain numbers
    that differ (``12=13``, the ``7 = 8`` of ``3 + 4 = 7 = 8``) are a false
    claim when ``plain(left, right)`` allows it (bare equations: always).
    A false pair for which ``skip(left, right, stated)`` holds is no claim (a
    range or shorthand, in visible text). ``rounds``: the text says it rounds
    (``_close``); ``approx[k]``: the k-th relation is "≈", not "="."""
    out = []
    for k, (left, right) in enumerate(pairwise(chain)):
        if left is None or right is None:
            continue
        near = k < len(approx) and approx[k]
        if near and right.n_ops:
            continue  # "3183 * 3.1416 ≈ 3183 * 3": a rougher estimate, no claim
        if left.n_ops == 0:
            if not (_plain(left) and _plain(right)) or (plain is not None and not plain(left, right)):
                continue
            ok, stated, lead = _judge_pair(left, right, rounds, near)
            if ok:
                continue  # "12 = 12" says nothing checkable
        elif left.value is None:
            ok, stated, lead = False, right.value, None
        elif right.value is None:
            continue
        else:
            ok, stated, lead = _judge_pair(left, right, rounds, near)
            if not ok and skip is not None and skip(left, right, stated):
                continue
        if lead is not None:
            rhs_text, rhs_start, rhs_end = lead.text, lead.start, lead.end
        else:
            rhs_text, rhs_start, rhs_end = right.text, right.start, right.end
        claim = Claim(text=src[left.start:rhs_end], lhs=left.text, rhs=rhs_text,
                      value=left.value, stated=stated, ok=ok, source=source)
        out.append((claim, left.start if anchor is None else anchor, rhs_start, rhs_end))
    return out


# --------------------------------------------------------------------------
# Bare equations: calculator annotations and skeleton checks

ANNOTATION_RE = re.compile(r"<<([^<>]*)>>")
# Token kinds an expression is made of ("unit": a label such as "pounds" in
# "60 pounds / 2", marked by the reader of visible equations).
ARITH = frozenset(("num", "op", "lp", "rp", "sup", "unit"))


def _bare_chains(inner: str) -> list[tuple[list[Seg | None], list[bool]]]:
    """The chain ``e0 = e1 = ...`` of bare arithmetic (a calculator annotation
    or a skeleton check), a side that is not arithmetic being None, and which
    relations are "≈"."""
    if "=" not in inner:
        return []
    toks = tokenize(inner, visible=False)
    parts: list[list[Tok]] = [[]]
    approx: list[bool] = []
    for t in toks:
        if t.kind == "eq":
            parts.append([])
            approx.append(t.text == "≈")
        else:
            parts[-1].append(t)
    chain = []
    for part in parts:
        if all(t.kind in ARITH for t in part):
            chain.append(segment(part, inner))
        else:
            chain.append(None)  # "3*A", "500/month*12", "2:15+2:38"
    return [(chain, approx)]


def chain_claims(inner: str, source: str, rounds: bool = False) -> list[Claim]:
    """The claims of a bare equation chain such as ``"16-3-4=9"``; ``rounds``:
    the text around it says it rounds."""
    out = []
    for chain, approx in _bare_chains(inner):
        out.extend(claim for claim, _, _, _ in pair_claims(chain, inner, source, rounds=rounds, approx=approx))
    return out


# LaTeX is read as the plain arithmetic it typesets: \frac{a}{b}, \times, \text{...}.
_LATEX_SUBS = [
    (re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}"), r"((\1)/(\2))"),
    # A closing \) or \] ends an expression: "\(2^9 = 512\) - \(3^1 = 3\)" and
    # "\[ a = b \] \[ c = d \]" are two displays, not one chain.
    (re.compile(r"\\\]\s*\\\[\s*(?==)"), " "),  # "\[ a = b \] \[ = c \]" goes on
    (re.compile(r"\\[)\]]"), " ; "),
    (re.compile(r"\\q?quad(?![A-Za-z])"), " "),
    (re.compile(r"\^\s*\{?\\circ\}?"), "°"),
    (re.compile(r" ?\\(?:times|cdot|ast)(?![A-Za-z]) ?"), " × "),
    (re.compile(r" ?\\div(?![A-Za-z]) ?"), " ÷ "),
    (re.compile(r"\\(?:left|right)(?![A-Za-z])"), ""),
    (re.compile(r"\\[()[\]]"), " "),  # \( \) \[ \] delimiters
    (re.compile(r"(?<!\\)\$"), " "),  # $ math delimiters, once the text is LaTeX
    (re.compile(r"\\([$%])"), r"\1"),
    (re.compile(r"(?<=\d)(?:\{,\}|\\,|,\\!)(?=\d{3})"), ","),
    (re.compile(r"\\(?:text|mathrm|textbf|mathbf|boxed|operatorname)\s*\{([^{}]*)\}"), r" \1 "),
    # "≈" is read as approximately equal; the other relations stop a chain.
    (re.compile(r"\\approx(?![A-Za-z])"), " ≈ "),
    (re.compile(r"\\(?:neq|ne|leq|geq|le|ge|lt|gt|equiv|sim|cong|pmod|bmod|mod)(?![A-Za-z])"), " ≠ "),
    (re.compile(r"\\[,;:! ]"), " "),
    (re.compile(r"\^\{([^{}]*)\}"), r"^(\1)"),
]


_FRAC = _LATEX_SUBS[0][0]
# "3\frac{4}{5}": a whole number before a proper fraction of digits is a mixed number (3 4/5), not 3 * 4/5.
_MIXED = re.compile(r"(?<![\d.])(\d+)\s*\\[dt]?frac\s*\{\s*(\d+)\s*\}\s*\{\s*(\d+)\s*\}")


def _mixed(m: re.Match[str]) -> str:
    whole, num, den = m.groups()
    if int(num) >= int(den):
        return m.group(0)
    return f"({whole}+({num})/({den}))"


def unlatex(text: str) -> str:
    if "\\" not in text and "^{" not in text and "{,}" not in text:  # "2{,}180" needs no backslash
        return text
    text = _MIXED.sub(_mixed, text)
    for _ in range(4):  # nested fractions, innermost first
        text, n = _FRAC.subn(_LATEX_SUBS[0][1], text)
        if not n:
            break
    for pattern, repl in _LATEX_SUBS[1:]:
        text = pattern.sub(repl, text)
    return text


# --------------------------------------------------------------------------
# The value a skeleton check computes

_CHECK_CACHE: dict[str, tuple[Fraction, int] | None] = {}


def check_info(check: str | None) -> tuple[Fraction, int] | None:
    """(value, decimals shown) of a skeleton check's result."""
    if not check:
        return None
    if check in _CHECK_CACHE:
        return _CHECK_CACHE[check]
    inner = check.strip()
    m = ANNOTATION_RE.fullmatch(inner)
    if m:
        inner = m.group(1)
    toks = tokenize(unlatex(inner), visible=False)
    last: list[Tok] = []
    for t in toks:
        if t.kind == "eq":
            last = []
        else:
            last.append(t)
    info = None
    if last and all(t.kind in ARITH for t in last):
        seg = segment(last, inner)
        if seg is not None and seg.value is not None:
            nums = [t for t in last if t.kind == "num"]
            decimals = nums[0].decimals if seg.n_ops == 0 and len(nums) == 1 else 0
            info = (seg.value, decimals)
    if len(_CHECK_CACHE) < 50_000:
        _CHECK_CACHE[check] = info
    return info


def check_value(check: str | None) -> Fraction | None:
    """Value of a skeleton ``check`` result: ``"16-3-4=9"`` -> 9."""
    info = check_info(check)
    return info[0] if info else None
