"""Replay a calculator chain with changed numbers.

A GSM8K gold solution carries its arithmetic as ``<<16-3-4=9>>`` annotations;
a skeleton carries it as step checks (``16-3-4=9``). Two diagnostics need to
know what the chain computes once a number in it changes:

* fidelity's counterfactuals change an *input* of the question (16 eggs become
  20) and need the new gold answer: every operand equal to the old input takes
  the new value, and each step whose result changes passes its new result on to
  the later steps that used the old one (propagation);
* faithfulness's ``value_flip`` replaces a value *derived* at step k of a trace
  and needs the answer that edit implies: the same replay, starting after k.

Matching is by value, not by position: a chain has no names for its numbers,
so the value is the only link between the question, one step's result and a
later step's operand. That is also its limit -- when the old value appears as
an unrelated constant (a ``* 2`` beside an input 2) both change; callers that
care check ``used`` and the question text for ambiguity.

Everything is exact (``fractions.Fraction``) and goes through
reasonlib.arithmetic's tokenizer and parser; no text is evaluated as code.
Pure: no Django, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from reasonlib.arithmetic import ANNOTATION_RE, ARITH, Tok, segment, tokenize, unlatex


@dataclass(frozen=True)
class ChainStep:
    index: int
    expr: str  # left side as written, e.g. "16-3-4"
    result: Fraction  # the stated result
    span: tuple[int, int]  # where the annotation (or check) sits in its text
    operands: tuple[Fraction, ...]  # the number literals of expr, in order


@dataclass(frozen=True)
class Replay:
    answer: Fraction | None  # the new final answer; None when it cannot be traced
    traced: bool  # every substituted value met as an operand, and the answer is a result of the chain
    results: tuple[Fraction | None, ...]  # the recomputed result of each step
    used: frozenset[Fraction]  # old values actually substituted somewhere
    reason: str  # why not traced; "" when traced


def _split(inner: str) -> tuple[list[Tok], list[Tok]] | None:
    """Left-side and result tokens of ``expr=result`` (the last ``=`` splits a chain ``a=b=c``)."""
    toks = [t for t in tokenize(unlatex(inner), visible=False) if t.kind != "ws"]
    eqs = [i for i, t in enumerate(toks) if t.kind == "eq"]
    if not eqs:
        return None
    first, last = eqs[0], eqs[-1]
    left, right = toks[:first], toks[last + 1:]
    if not left or not right or not all(t.kind in ARITH for t in left + right):
        return None
    return left, right


def _step(index: int, inner: str, span: tuple[int, int]) -> ChainStep | None:
    parts = _split(inner)
    if parts is None:
        return None
    left, right = parts
    src = unlatex(inner)
    lhs, rhs = segment(left, src), segment(right, src)
    if lhs is None or rhs is None or lhs.value is None or rhs.value is None:
        return None
    expr = src[left[0].start:left[-1].end]
    operands = tuple(t.value for t in left if t.kind == "num")
    return ChainStep(index=index, expr=expr, result=rhs.value, span=span, operands=operands)


def parse_chain(solution: str) -> list[ChainStep]:
    """The ``<<expr=result>>`` annotations of a solution, in order. An annotation whose
    sides cannot be read exactly is left out; a replay that needed it reports so."""
    steps: list[ChainStep] = []
    for m in ANNOTATION_RE.finditer(solution):
        step = _step(len(steps), m.group(1), m.span())
        if step is not None:
            steps.append(step)
    return steps


def chain_from_checks(checks: Sequence[str | None]) -> list[ChainStep]:
    """The chain of a skeleton's step checks (``16-3-4=9`` or ``<<16-3-4=9>>``)."""
    steps: list[ChainStep] = []
    for position, check in enumerate(checks):
        if not check:
            continue
        inner = check.strip()
        m = ANNOTATION_RE.fullmatch(inner)
        if m:
            inner = m.group(1)
        step = _step(len(steps), inner, (position, position + 1))
        if step is not None:
            steps.append(step)
    return steps


def _render(value: Fraction) -> str:
    # Parenthesized so that a negative or fractional value stays one operand.
    if value.denominator == 1:
        return f"({value.numerator})"
    return f"({value.numerator}/{value.denominator})"


def _substituted(expr: str, subs: Mapping[Fraction, Fraction]) -> tuple[Fraction | None, set[Fraction]]:
    """Value of ``expr`` with every operand found in ``subs`` replaced, and the old values replaced."""
    src = unlatex(expr)
    toks = [t for t in tokenize(src, visible=False) if t.kind != "ws"]
    pieces: list[str] = []
    used: set[Fraction] = set()
    pos = 0
    for t in toks:
        if t.kind != "num":
            continue
        new = None
        if t.value in subs:
            new, old = subs[t.value], t.value
        elif t.pct and t.shown in subs:  # "50%" where the question said 50
            new, old = subs[t.shown] / 100, t.shown
        if new is None:
            continue
        used.add(old)
        pieces.append(src[pos:t.start])
        pieces.append(_render(new))
        pos = t.end
    if not used:
        seg = segment(toks, src)
        return (seg.value if seg else None), used
    pieces.append(src[pos:])
    rewritten = "".join(pieces)
    seg = segment([t for t in tokenize(rewritten, visible=False) if t.kind != "ws"], rewritten)
    return (seg.value if seg else None), used


def replay(chain: Sequence[ChainStep], substitutions: Mapping[Fraction, Fraction], *,
           final: Fraction | None = None, start: int = 0) -> Replay:
    """Recompute the chain with ``substitutions`` (old value -> new value) applied from step
    ``start`` on. The new answer is the recomputed value of the last step whose stated result
    is ``final`` (default: the last step)."""
    subs = {Fraction(k): Fraction(v) for k, v in substitutions.items() if Fraction(k) != Fraction(v)}
    wanted = set(subs)
    results: list[Fraction | None] = []
    used: set[Fraction] = set()
    broken = ""
    for step in chain:
        if step.index < start:
            results.append(step.result)
            continue
        value, hit = _substituted(step.expr, subs)
        used |= hit & wanted
        if value is None:
            results.append(None)
            if hit and not broken:
                broken = f"step {step.index + 1} ({step.expr}) is undefined with the new values"
            continue
        results.append(value)
        if value != step.result and step.result not in subs:
            subs[step.result] = value

    if not chain:
        return Replay(None, False, (), frozenset(), "the solution has no calculator chain")
    target = chain[-1].result if final is None else Fraction(final)
    producers = [i for i, step in enumerate(chain) if step.result == target]
    if not producers:
        return Replay(None, False, tuple(results), frozenset(used),
                      f"the final answer {_show(target)} is not a result of the chain")
    missing = wanted - used
    if missing:
        return Replay(None, False, tuple(results), frozenset(used),
                      "not found in the chain: " + ", ".join(sorted(_show(v) for v in missing)))
    if broken:
        return Replay(None, False, tuple(results), frozenset(used), broken)
    answer = results[producers[-1]]
    return Replay(answer, answer is not None, tuple(results), frozenset(used), "")


def _show(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
