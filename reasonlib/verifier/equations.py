"""Visible equations: ``16 - 3 - 4 = 9``, ``$1,200 / 4 = $300``,
``60 pounds / 2 = 30 pounds`` and running totals ``3 * 4 = 12 + 2 = 14``.

What is not read, to keep false alarms rare: variables (``x = 5``,
``2x + 3 = 7``), conversions without an operator (``1 hour = 60 minutes``),
dates, clock times, phone numbers, ranges (``Week 1-2 = 10 hours``), scaled
results (``= 1.2 million``, ``= 75k``), and left sides tangled with words
(``50% of 20 + 5 = 15``, ``3 times 4 + 2 = 14``). From reasoning models' text
(issue 30; docs/judges.md, "Real notation"): sides with unknowns (``= 1 + r``,
``= 50 - 50 cos A``), sums of different things (``3 boxes + 2 loose``),
fractions of an amount (``Rent 1/4 = 1500``), list and running shorthand
(``fine $120 + 3*25 = $75``, ``3182 - 319 + 1 = 3182 - 319 = 2863``), times of
day, other bases (``6 = 0110``), remainders (``= 4 remainder 2``) and
tentative claims (``= 15? Actually``). ``≈`` is read, within a unit of the
last place shown or 1e-5 relative.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from reasonlib.arithmetic import ARITH, Claim, Seg, Tok, pair_claims, segment, tokenize

# After a number, these words join it to what follows ("50% of 20 + 5",
# "3 times 4 + 2", "12 divided by 4 + 2", "12 apples x 3"): the expression
# after them is not the whole left side.
_JOINING_WORDS = frozenset(
    "of times by plus minus over into than from per x in for at on each every".split()
)
# ... and these join even when no number precedes them ("$3.5/gallon x 2/5",
# "divided by 4 + 2"): the left operand is text.
_ALWAYS_JOINING = frozenset("x times multiplied divided".split())
# Quantity words do so anywhere: "half of 20 + 5", "twice 3 + 4".
_QUANTITY_WORDS = frozenset(
    "half halves twice double triple thrice quarter quarters third thirds fourth fourths "
    "fifth fifths sixth sixths eighth eighths tenth tenths percent".split()
)
# Words that are not a unit label between a number and an operator.
_NOT_UNITS = frozenset(
    "is are was were be so then thus the a an to for each every more less left remaining "
    "total or if that which this it he she they we i you his her their its has have had "
    "gets got makes made needs will would can could should at on in with than because "
    "since as when while but after before until there here now not no".split()
)
# Words after a stated number that scale it: "= 1.2 million", "= 50k".
_SCALE_WORDS = frozenset(
    "k m b bn mn mil million millions billion billions thousand thousands hundred "
    "hundreds dozen dozens lakh crore trillion".split()
)
# Glued suffixes that leave the stated number as it is: "= 12kg", "= 3rd".
_GLUED_UNITS = frozenset(
    "cm mm km kg g mg lb lbs oz ft yd mi in hr hrs h min mins s sec secs ms ml l "
    "mph kph kmh am pm st nd rd th gal qt pt".split()
)
_CLOCK_WORDS = frozenset(("am", "pm"))
# Words right after a result that make it something else than the value:
# a remainder ("= 4 remainder 2", "= 3 R 2"), a quotient, a term of a
# formula ("= 50 - 50 cos A", "= 3 mod 8").
_NOT_A_VALUE_AFTER = re.compile(
    r"^\s*(?:;\s*)?(?:\(?\s*(?:with\s+(?:a\s+)?)?(?i:remainder|rem|quotient|r)\b"
    r"|(?i:cos|sin|tan|cot|sec|csc|log|ln|exp|sqrt|pi|mod|pmod)\b)"
)
# LaTeX commands that go on with a formula (after a number they multiply it).
_FORMULA_COMMANDS = frozenset(
    "cos sin tan cot sec csc log ln exp sqrt pi mod pmod angle alpha beta gamma delta theta lambda mu "
    "sigma phi omega binom dbinom tbinom cdots ldots dots infty".split()
)
_ELLIPSIS = re.compile(r"^\s*\$?\s*(?:\.\.\.|…|\\[lc]?dots)")
_LEFT_OVER = re.compile(r"(?i)^[^.;=\n]{0,40}?\bwith\s+\d[\d,]*\s+(?:\w+\s+){0,2}(?:remaining|left(?:\s+over)?|leftover)\b")


def _divides(toks: list[Tok], eq: int) -> bool:
    """Is the expression ending at ``toks[eq]`` a division ("2250 ÷ 360 =")?"""
    k = eq - 1
    while k >= 0 and toks[k].kind in ARITH:
        if toks[k].kind == "op" and toks[k].op == "/":
            return True
        k -= 1
    return False


_MATH_WORDS = frozenset("cos sin tan cot sec csc log ln exp sqrt pi mod pmod".split())
_BAD_GLUED = frozenset(".,#@_&'’\\<>}]|!")
_SIGN_MAY_FOLLOW = frozenset("([{,:;$\"“'")


def _mark_units(toks: list[Tok]) -> None:
    # "60 pounds / 2 = 30", "5 minutes - 3 minutes = 2 minutes": a short label
    # between a number and an operator (or "=") is a unit, not a variable.
    for i in range(1, len(toks) - 1):
        t = toks[i]
        if t.kind != "word" or toks[i - 1].kind not in ("num", "sup"):
            continue
        nxt = toks[i + 1]
        if nxt.kind != "eq" and not (nxt.kind == "op" and nxt.op != "^"):
            continue
        words = t.text.lower().split()
        if len(words) > 3 or any(
            len(w) == 1 or w in _JOINING_WORDS or w in _SCALE_WORDS or w in _NOT_UNITS
            or w in _QUANTITY_WORDS for w in words
        ):
            continue
        if t.glued and words[0] not in _GLUED_UNITS:
            continue  # "2x", "25k"
        if words[0] in _CLOCK_WORDS:
            continue  # "10pm-6am": times of day, not a difference
        t.kind = "unit"


def _first_word(t: Tok) -> str:
    return t.text.split(None, 1)[0].lower()



def _left_run(toks: list[Tok], eq: int) -> list[Tok] | None:
    """The expression ending just before ``toks[eq]``, or None when it is
    tangled with the surrounding text (variables, joining words, ...)."""
    j = eq
    while j > 0 and toks[j - 1].kind in ARITH:
        j -= 1
    run = toks[j:eq]
    if not run:
        return None
    boundary = toks[j - 1] if j > 0 else None
    # Start after the last unmatched "(": "(so 3 + 4 = 7)".
    depth = 0
    for k in range(len(run) - 1, -1, -1):
        kind = run[k].kind
        if kind == "rp":
            depth += 1
        elif kind == "lp":
            if depth == 0:
                boundary, run = run[k], run[k + 1:]
                break
            depth -= 1
    if not run:
        return None
    first = run[0]
    # Markdown bold: "**3 + 4 = 7**".
    if first.kind == "op" and first.text == "**" and len(run) > 1 and run[1].glued and (
        boundary is None or not first.glued or boundary.text in (":", "*")
    ):
        boundary, run = first, run[1:]
        first = run[0]
    if first.kind == "op":
        if first.op != "+" and first.op != "-":
            return None  # "2x * 3": the real left operand is text
        # A sign is unary only when glued to its operand and set apart from
        # what precedes it ("is -3 + 5"); "x - 3 + 4" continues a variable sum.
        if len(run) < 2 or not run[1].glued:
            return None
        if boundary is not None and first.glued and boundary.text not in _SIGN_MAY_FOLLOW:
            return None  # "x-3+4", "\sqrt{16}+1+2"
    if boundary is not None:
        if first.glued and (boundary.kind in ("word", "num") or boundary.text in _BAD_GLUED):
            return None  # "x2 + 3", "3:30", "v1.2", "3,2 + 1"
        if boundary.kind == "word":
            words = boundary.text.lower().split()
            command = j > 1 and toks[j - 2].text == "\\" and boundary.glued
            if command or words[-1] in _MATH_WORDS:
                return None  # "\pi (1.5)^3", "cos 60 * 2": a factor is not a number
            if first.kind == "op" and (
                (boundary.glued and j > 1 and toks[j - 2].kind == "num")
                or (len(words[-1]) == 1 and words[-1] not in ("a", "i"))
            ):
                return None  # "18r + 50 + 20", "x - 3 + 4": a sum that starts with a variable term
            if words[-1] in _QUANTITY_WORDS or words[-1] in _ALWAYS_JOINING or (
                len(words) > 1 and (words[-2] in _QUANTITY_WORDS or words[-2] in _ALWAYS_JOINING)
            ):
                return None
            # (a word boundary is always toks[j - 1]: cuts only give "(" or "**")
            if words[-1] in _JOINING_WORDS and len(words) <= 3:
                if j > 1 and toks[j - 2].kind in ("num", "rp", "sup", "unit"):
                    return None
    return run


def _right_run(toks: list[Tok], eq: int, src: str) -> tuple[list[Tok] | None, int]:
    """The expression right after ``toks[eq]`` (None when tangled with
    the text), and the index of the token after it."""
    n = len(toks)
    j = eq + 1
    while j < n and toks[j].kind in ARITH:
        j += 1
    run = toks[eq + 1:j]
    nxt = toks[j] if j < n else None
    if nxt is not None and nxt.kind == "eq":
        return run, j  # a chain goes on: the whole run is a middle term
    # Stop before the first unmatched ")": "(3 + 4 = 7)".
    depth = 0
    for k, t in enumerate(run):
        if t.kind == "lp":
            depth += 1
        elif t.kind == "rp":
            if depth == 0:
                run, nxt = run[:k], t
                break
            depth -= 1
    # Dangling operators belong to the text: "= 12/day", "= 7**"; any other
    # operator goes on with something that is no number: "= 1 + r",
    # "= 2 \cdot 5 \cos A", "= 1 + 12*0.005 + ...".
    while run and run[-1].kind == "op":
        nxt = run[-1]
        run = run[:-1]
        # "0.24 great-grandbabies": a hyphen inside a word, no operator.
        hyphen = nxt.op == "-" and nxt.glued and j < n and toks[j].glued and toks[j].kind == "word"
        if nxt.text != "**" and nxt.op != "/" and not hyphen:
            return None, j
    if not run:
        return None, j
    if nxt is not None and nxt.kind == "other" and nxt.text == "?":
        return None, j  # "= 15? Actually ...": tentative, corrected at once
    if nxt is not None and nxt.kind == "other" and nxt.text == "\\" and j + 1 < n \
            and toks[j + 1].glued and toks[j + 1].kind == "word" and _first_word(toks[j + 1]) in _FORMULA_COMMANDS:
        return None, j  # "= 2 \cdot 5 \cos A", "= \frac{4}{3} \pi": the formula goes on
    after = src[run[-1].end:run[-1].end + 60]
    if _NOT_A_VALUE_AFTER.match(after):
        return None, j  # "= 4 remainder 2", "= 3 R 2", "= 50 - 50 cos A"
    if _ELLIPSIS.match(after):
        return None, j  # "= 0.14285714285...": a decimal said to go on, not a value
    if _LEFT_OVER.match(after) and _divides(toks, eq):
        return None, j  # "2250 ÷ 360 = 6 full rotations with 90 degrees remaining"
    if nxt is not None:
        if nxt.kind == "word":
            if _first_word(nxt) in _SCALE_WORDS:
                return None, j
            if nxt.glued and _first_word(nxt) not in _GLUED_UNITS:
                return None, j  # "= 6x", "= 25k"
            if nxt.glued and len(nxt.text) == 1 and ((j + 1 < n and toks[j + 1].kind == "op") or nxt.text.isupper()):
                return None, j  # "= 4s-2s", "= 2S": a term of a variable
        elif nxt.kind == "other" and nxt.glued and nxt.text in _BAD_GLUED:
            # "= 3,2 million", "= 3:30", "= 4.5.6"; not a sentence's full stop
            after = toks[j + 1] if j + 1 < n else None  # nxt is toks[j] here
            if nxt.text not in ".," or (after is not None and after.glued):
                return None, j
    return run, j


def _side(run: list[Tok] | None, src: str) -> Seg | None:
    """One side of an equation, or None when it adds or subtracts different
    things ("3 boxes + 2 loose", "5 lollipops + 4 candies", "3 hours - 80
    minutes": not one quantity, so no number to check)."""
    if run is None:
        return None
    units = {t.text.lower().split()[-1].rstrip("s") for t in run if t.kind == "unit" and t.text != "°"}
    ops = {t.op for t in run if t.kind == "op"}
    if len(units) > 1 and ops & {"+", "-"} and not ops & {"*", "/"}:
        return None
    return segment(run, src)


# After a chain, an operator that goes on ("240 * 145 = 240*100 = 24000, +240*45
# = 10800"): the chain is one part of a longer computation.
_GOES_ON = re.compile(r"^\s*[,;]?\s*[-+*/×]\s*[$(\d]")


def _chains_in_visible(toks: list[Tok], src: str) -> list[tuple[list[Seg | None], list[bool], bool]]:
    """(chain, which relations are "≈", whether the computation goes on after it)."""
    chains = []
    i = 0
    n = len(toks)
    while i < n:
        if toks[i].kind != "eq":
            i += 1
            continue
        chain: list[Seg | None] = [_side(_left_run(toks, i), src)]
        approx = [toks[i].text == "≈"]
        eq = i
        end = toks[i].end
        while True:
            run, j = _right_run(toks, eq, src)
            chain.append(_side(run, src))
            if run:
                end = run[-1].end
            if run is not None and j < n and toks[j].kind == "eq":
                eq = j
                approx.append(toks[j].text == "≈")
                continue
            break
        chains.append((chain, approx, bool(_GOES_ON.match(src[end:end + 12]))))
        i = eq + 1
    return chains


def _is_range(left: Seg, stated: Fraction | None) -> bool:
    """"Week 1-2 = 10 hours", "grades 4-7 inclusive = 4 grades": a glued a-b
    with a < b whose stated value is neither a - b nor b - a (a dropped sign)
    names a range, not a subtraction."""
    toks = left.toks
    if len(toks) != 3:
        return False
    a, op, b = toks
    if a.kind != "num" or b.kind != "num" or op.kind != "op" or op.op != "-" or a.decimals or b.decimals:
        return False
    if not (op.glued and b.glued) or a.pct or b.pct or a.text[:1] in "$£€":
        return False
    return a.value < b.value and stated not in (a.value - b.value, b.value - a.value)


_WORD_AFTER = re.compile(r"^\s*[^\W\d_]")


def _fraction_of(left: Seg, right: Seg, stated: Fraction | None) -> bool:
    """"Rent 1/4 = 1500", "1/3 = 4 slices": a bare proper fraction p/q stated
    as a whole number (10 or more, or a count of something) names that part of
    an amount the text gave; "1/2 = 2" stays a false claim."""
    toks = left.toks
    if len(toks) != 3 or stated is None or stated < 1 or stated.denominator != 1:
        return False
    if stated < 10 and not _WORD_AFTER.match(right.src[right.end:right.end + 3]):
        return False
    p, op, q = toks
    return (p.kind == q.kind == "num" and op.kind == "op" and op.op == "/" and not p.decimals
            and not q.decimals and not p.pct and not q.pct and 0 < p.value < q.value
            and math.gcd(int(p.value), int(q.value)) == 1)  # "8/24 = 3 trips" is a division


_MAX_SUB_TOKENS = 40


def _is_sum_op(t: Tok) -> bool:
    return t.kind == "op" and t.op in ("+", "-")


def _part_of(left: Seg, right: Seg, middle: bool) -> bool:
    """Running shorthand: the right side states one part of the left.

    * the last term of a list of items added up, a product ("$120 + 3*25 =
      $75", "$12 + 5*3 = 15 + 4*1.5 = 6", "$200 + 3 vaccines * $20 = $60 + ..."):
      the right side's value, or the number it opens with, is that term's;
    * when the chain goes on after the right side (``middle``), a first part
      or a bracket being worked out ("3182 - 319 + 1 = 3182 - 319 = 2863",
      "(1/4 + 1/2) * 364 = (0.25+0.5) = 0.75").

    A sum that drops a term ("10 + 20 + 5 = 30", "30 * 2 - 12 = 60") stays a
    false claim."""
    toks = left.toks
    n = len(toks)
    if n > _MAX_SUB_TOKENS:
        return False
    wanted = {right.value}
    if right.n_ops and right.toks and right.toks[0].kind == "num":
        wanted.add(right.toks[0].value)
    wanted.discard(None)
    for i in range(n):
        for k in range(i + 3, n + 1):
            if i == 0 and k == n:
                continue
            part = toks[i:k]
            # The last term of a list of items added up: "30 * 2 - 12 = 60" drops a term.
            last_term = k == n and i > 0 and toks[i - 1].kind == "op" and toks[i - 1].op == "+"
            product = any(t.kind == "sup" or (t.kind == "op" and t.op in ("*", "/", "^")) for t in part)
            listed = last_term and product
            if not listed and not (
                middle and (i == 0 or (i == 1 and toks[0].kind == "lp")
                            or (part[0].kind == "lp" and part[-1].kind == "rp"))
            ):
                continue
            sub = segment(part, left.src)
            # A part being worked out is the whole right side ("(12*11*10*9)/24 * 0.005^4
            # = 495 * 0.0000000003125" opens with 495 and is still false).
            if sub is not None and sub.n_ops and (sub.value in wanted if listed else sub.value == right.value):
                return True
    return False


_ORDINAL = re.compile(r"\d(?:st|nd|rd|th)\b")


def _not_a_claim(left: Seg, right: Seg, stated: Fraction | None, middle: bool) -> bool:
    """A false pair that is shorthand, not a claim (see the functions it asks); and positions
    ("1st - 5 = 6th": falling back five places), which count the other way."""
    return (_is_range(left, stated) or _fraction_of(left, right, stated) or _part_of(left, right, middle)
            or bool(_ORDINAL.search(left.text) or _ORDINAL.search(right.src[right.start:right.end + 2])))



# Around a plain "12 = 13" in prose: what may come before the left number
# (start, punctuation, or a connective) and after the right one (end,
# punctuation, or a word that is no unit), so "Week 1 = 10 hours",
# "1 hour = 60 minutes" and "Step 2 = 5" are never read as claims.
_PLAIN_BEFORE = re.compile(
    r"(?:^|[(:;,.!?=\[]|\b(?:so|then|thus|hence|therefore|and|but|because|since|is|was|gives|get|got))\s*$",
    re.IGNORECASE,
)
_PLAIN_AFTER = re.compile(
    r"^\s*(?:$|[.,;:!?)\]\n]|(?:so|and|but|which|is|not|then|because|since|clearly|obviously|indeed"
    r"|exactly|certainly|surely|too|also|here|now)\b)", re.IGNORECASE,
)


_RATIO_BEFORE = re.compile(r"\d\s*:\s*$")
_RATIO_AFTER = re.compile(r"\s*:\s*\d")


def _plain_claim(left: Seg, right: Seg) -> bool:
    """May two plain numbers of visible text be read as an equation? Only
    bare numbers (no unit, currency or percent) set in prose as one."""
    src = left.src
    for seg in (left, right):
        tok = seg.toks[0]
        if tok.pct or tok.text != src[seg.start:seg.end] or not tok.text[:1].isdigit():
            return False
        if len(tok.text) > 1 and tok.text[0] == "0" and tok.text[1].isdigit():
            return False  # "6 = 0110": another base, or a padded label
    before, after = src[max(0, left.start - 20):left.start], src[right.end:right.end + 20]
    if _RATIO_BEFORE.search(before) and _RATIO_AFTER.match(after):
        return False  # "12 : 4 = 3 : 1": a ratio
    return bool(_PLAIN_BEFORE.search(before)) and bool(_PLAIN_AFTER.search(after))


# "194 ÷ 11 = 17 with a remainder of 7", "20 ÷ 6 = 3 R 2" (after unlatex, a closing "\)" is " ; "):
# integer division, a claim of its own. The dividend must not end a longer expression, nor the
# remainder begin one ("= 1 with a remainder of 419,430 - 262,144").
_REMAINDER = re.compile(
    r"(?<![\d.,])(?P<a>\d{1,3}(?:,\d{3})+|\d+)\s*[÷/]\s*(?P<b>\d{1,3}(?:,\d{3})+|\d+)"
    r"\s*=\s*(?P<q>\d{1,3}(?:,\d{3})+|\d+)\s*(?:;\s*)?\(?\s*(?:with\s+(?:a\s+)?)?"
    r"(?:remainder|rem|[rR])\b\s*(?:of\s+)?(?:;\s*)?(?P<r>\d{1,3}(?:,\d{3})+|\d+)(?!\d|[.,]\d|\s*[-+*/×÷^]\s*\d)"
)


_BEFORE_DIVIDEND = frozenset("0123456789.,)^*/×÷+-−–")


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def remainder_claims(visible: str) -> list[tuple[Claim, int, int, int]]:
    """Integer divisions with a remainder: ``a ÷ b = q remainder r`` holds when
    ``q·b + r = a`` and ``0 ≤ r < b``. Its value is a/b and it states q + r/b."""
    out = []
    for m in _REMAINDER.finditer(visible):
        raw = visible[max(0, m.start() - 40):m.start()]
        before = raw.rstrip(" \t")
        bullet = before[-1:] in ("-", "*", "+") and before[:-1].rstrip(" \t")[-1:] in ("", "\n")
        last = before.rstrip()[-1:]
        stop = last in ".," and len(raw) > len(raw.rstrip())  # "by 6. 1529 ÷ 6 = ...": a full stop
        if len(m.group(0)) > 200 or (last in _BEFORE_DIVIDEND and not bullet and not stop):
            continue  # "2 + 18 ÷ 4 = ...": the division is part of a longer expression
        a, b, q, r = (_int(m.group(k)) for k in ("a", "b", "q", "r"))
        if b == 0:
            continue
        lhs = visible[m.start("a"):m.end("b")]
        rhs = f"{m.group('q')} remainder {m.group('r')}"
        claim = Claim(text=f"{lhs} = {rhs}", lhs=lhs, rhs=rhs, value=Fraction(a, b),
                      stated=Fraction(q) + Fraction(r, b), ok=q * b + r == a and 0 <= r < b, source="equation")
        out.append((claim, m.start(), m.start("q"), m.end()))
    return out


def visible_claims(visible: str, rounds: bool = False) -> list[tuple[Claim, int, int, int]]:
    """Claims of the equations a reader sees, as (claim, position, rhs start,
    rhs end) in ``visible``; ``rounds``: the step says it rounds."""
    if "=" not in visible and "≈" not in visible:
        return []
    toks = tokenize(visible, visible=True)
    _mark_units(toks)
    out = []
    for chain, approx, goes_on in _chains_in_visible(toks, visible):
        def skip(left: Seg, right: Seg, stated: Fraction | None, goes_on: bool = goes_on,
                 chain: list[Seg | None] = chain) -> bool:
            # In a computation that goes on after the chain, an expression on the
            # right is a partial step ("240 * 145 = 240*100 = 24000, + ...").
            middle = right is not chain[-1]
            return _not_a_claim(left, right, stated, middle) or (goes_on and right.n_ops > 0)
        out.extend(pair_claims(chain, visible, "equation", skip=skip, plain=_plain_claim,
                               rounds=rounds, approx=approx))
    out.extend(remainder_claims(visible))
    return out
