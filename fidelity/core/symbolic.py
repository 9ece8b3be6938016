"""GSM-Symbolic templates, instantiated safely. Pure.

A template's ``question_annotated`` holds the question with placeholders ``{name,default}``
followed by sections::

    #init:
    - $name = sample(names)
    - $t = range(10, 100, 10)
    #conditions:
    - is_int(y / d)
    #answer: y // d * t

Expressions are parsed with ``ast`` and evaluated by a small interpreter over exact
rationals that knows only arithmetic, comparisons, boolean operators, literals, lists and a
whitelist of functions (range, sample, is_int, divides, min, max, abs, int, round). Nothing
is passed to ``eval``; an unknown name or construct is an error naming it. Users bring the
templates (their licence forbids redistribution).
"""

from __future__ import annotations

import ast
import operator
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from reasonlib.refusals import Invalid

MAX_DRAWS = 1000
# Bounds of the interpreter (docs/fidelity.md): templates are user files, so no expression may take
# unbounded time or memory. Checked before the work where it can be (range, **, round), else on
# every result.
MAX_RANGE = 10_000  # items of one range()
MAX_BITS = 4_096  # numerator and denominator of any number
MAX_TEXT = 10_000  # characters of a string, items of a list
MAX_ROUND_DIGITS = 100
MAX_DEPTH = 50  # nesting of an expression
MAX_EXPRESSION_CHARS = 2_000
COLLECTIONS: dict[str, list[str]] = {
    "names": ["Ava", "Liam", "Mia", "Noah", "Zoe", "Omar", "Ines", "Kenji", "Priya", "Tomas"],
    "names_female": ["Ava", "Mia", "Zoe", "Ines", "Priya", "Sofia", "Hana", "Lucia"],
    "names_male": ["Liam", "Noah", "Omar", "Kenji", "Tomas", "Mateo", "Yusuf", "Ivan"],
    "cities": ["Lyon", "Osaka", "Denver", "Porto", "Nairobi", "Perth"],
    "currencies_sym": ["$", "€", "£"],
}
_PLACEHOLDER = re.compile(r"\{(\w+)(?:,[^{}]*)?\}")
_SECTION = re.compile(r"^#(init|conditions|answer)\s*:\s*(.*)$")


class TemplateError(Invalid):
    """A template that cannot be parsed or instantiated."""


_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
        ast.Gt: operator.gt, ast.GtE: operator.ge}


def _num(v: Any) -> Any:
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float):
        return Fraction(v).limit_denominator(10 ** 9) if isinstance(v, float) else Fraction(v)
    return v


def _bounded(value: Any) -> Any:
    """The value, when it is within the bounds; TemplateError otherwise."""
    if isinstance(value, Fraction):
        if value.numerator.bit_length() > MAX_BITS or value.denominator.bit_length() > MAX_BITS:
            raise TemplateError(f"a number of more than {MAX_BITS:,} bits")
    elif isinstance(value, (str, list)) and len(value) > MAX_TEXT:
        raise TemplateError(f"a text or list of more than {MAX_TEXT:,} items")
    return value


class _Eval:
    def __init__(self, env: Mapping[str, Any], rng: random.Random) -> None:
        self.env, self.rng = env, rng

    def __call__(self, node: ast.AST) -> Any:
        return _bounded(self._eval(node))

    def _eval(self, node: ast.AST) -> Any:
        match node:
            case ast.Expression(body=body):
                return self(body)
            case ast.Constant(value=v) if isinstance(v, int | float | str | bool):
                return _num(v)
            case ast.Name(id=name):
                if name in self.env:
                    return self.env[name]
                if name in COLLECTIONS:
                    return COLLECTIONS[name]
                raise TemplateError(f"unknown name {name!r}")
            case ast.List(elts=elts) | ast.Tuple(elts=elts):
                return [self(e) for e in elts]
            case ast.UnaryOp(op=ast.USub(), operand=x):
                return -self(x)
            case ast.UnaryOp(op=ast.UAdd(), operand=x):
                return self(x)
            case ast.UnaryOp(op=ast.Not(), operand=x):
                return not self(x)
            case ast.BinOp(op=ast.Pow(), left=a, right=b):
                base, exp = self(a), self(b)
                if not isinstance(exp, Fraction) or exp.denominator != 1 or abs(exp) > 64:
                    raise TemplateError("only small whole exponents are allowed")
                if not isinstance(base, Fraction):
                    raise TemplateError("only numbers can be raised to a power")
                bits = max(base.numerator.bit_length(), base.denominator.bit_length())
                if bits * abs(int(exp)) > MAX_BITS:  # before computing it: a tower would take for ever
                    raise TemplateError(f"a number of more than {MAX_BITS:,} bits")
                if base == 0 and exp < 0:
                    raise TemplateError("division by zero")
                return base ** int(exp)
            case ast.BinOp(op=op, left=a, right=b) if type(op) in _BIN:
                try:
                    return _BIN[type(op)](self(a), self(b))
                except ZeroDivisionError:
                    raise TemplateError("division by zero") from None
            case ast.BoolOp(op=ast.And(), values=vals):
                return all(self(v) for v in vals)
            case ast.BoolOp(op=ast.Or(), values=vals):
                return any(self(v) for v in vals)
            case ast.Compare(left=left, ops=ops, comparators=comps):
                cur = self(left)
                for op, c in zip(ops, comps, strict=True):
                    if type(op) not in _CMP:
                        raise TemplateError(f"comparison {type(op).__name__} is not allowed")
                    nxt = self(c)
                    if not _CMP[type(op)](cur, nxt):
                        return False
                    cur = nxt
                return True
            case ast.Call(func=ast.Name(id=fn), args=args, keywords=[]):
                return self._call(fn, [self(a) for a in args])
        raise TemplateError(f"construct not allowed in a template: {ast.dump(node)[:60]}")

    def _call(self, fn: str, args: list[Any]) -> Any:
        if fn == "range":
            if not 1 <= len(args) <= 3 or not all(isinstance(a, Fraction) for a in args):
                raise TemplateError("range() takes one to three numbers")
            ints = [int(a) for a in args]
            if len(ints) == 3 and ints[2] == 0:
                raise TemplateError("range() step must not be zero")
            numbers = range(*ints)  # lazy: its length is known before anything is made
            if len(numbers) > MAX_RANGE:
                raise TemplateError(f"range() of {len(numbers):,} numbers; at most {MAX_RANGE:,}")
            return [Fraction(i) for i in numbers]
        if fn == "sample":
            pool = args[0]
            if not isinstance(pool, list) or not pool:
                raise TemplateError("sample() needs a non-empty list")
            if len(args) > 1:
                k = int(args[1])
                if not 0 <= k <= len(pool):
                    raise TemplateError(f"sample() of {k} from a list of {len(pool)}")
                return self.rng.sample(pool, k)
            return self.rng.choice(pool)
        if fn == "is_int":
            return isinstance(args[0], Fraction) and args[0].denominator == 1
        if fn == "divides":
            return args[1] != 0 and Fraction(args[0]) % Fraction(args[1]) == 0
        if fn in ("min", "max"):
            vals = args[0] if len(args) == 1 and isinstance(args[0], list) else args
            return (min if fn == "min" else max)(vals)
        if fn == "abs":
            return abs(args[0])
        if fn == "int":
            return Fraction(int(args[0]))
        if fn == "round":
            digits = int(args[1]) if len(args) > 1 else None
            if digits is not None and abs(digits) > MAX_ROUND_DIGITS:
                raise TemplateError(f"round() to {digits} digits; at most {MAX_ROUND_DIGITS}")
            return Fraction(round(args[0], digits))
        raise TemplateError(f"function {fn!r} is not allowed")


def _depth(tree: ast.AST) -> int:
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _parse(expr: str) -> ast.Expression:
    text = expr.strip()
    if len(text) > MAX_EXPRESSION_CHARS:
        raise TemplateError(f"an expression of {len(text):,} characters; at most {MAX_EXPRESSION_CHARS:,}: "
                            f"{text[:40]!r}...")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise TemplateError(f"cannot parse {text!r}: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise TemplateError(f"cannot parse {text[:40]!r}: nested too deeply") from None
    if _depth(tree) > MAX_DEPTH:
        raise TemplateError(f"{text[:40]!r} is nested more than {MAX_DEPTH} levels deep")
    return tree


def _evaluate(ev: _Eval, node: ast.Expression, what: str) -> Any:
    """Evaluate one expression; whatever it raises is a TemplateError naming it."""
    try:
        return ev(node)
    except TemplateError as exc:
        raise TemplateError(f"{what}: {exc}") from None
    except (TypeError, ValueError, ArithmeticError, RecursionError, IndexError, KeyError) as exc:
        raise TemplateError(f"{what}: {type(exc).__name__}: {str(exc)[:120]}") from None


@dataclass(frozen=True)
class Template:
    question: str
    init: tuple[tuple[str, str], ...]
    conditions: tuple[str, ...]
    answer: str


def parse_template(annotated: str) -> Template:
    question_lines: list[str] = []
    init: list[tuple[str, str]] = []
    conditions: list[str] = []
    answer = ""
    section = ""
    for line in (annotated or "").split("\n"):
        m = _SECTION.match(line.strip())
        if m:
            section = m.group(1)
            if section == "answer":
                answer = m.group(2).strip()
            continue
        body = line.strip()
        if not section:
            question_lines.append(line)
        elif body.startswith("-"):
            body = body[1:].strip()
            if section == "init":
                lhs, eq, rhs = body.partition("=")
                name = lhs.strip().lstrip("$")
                if not eq or not name.isidentifier():
                    raise TemplateError(f"#init line is not '$name = expression': {body!r}")
                init.append((name, rhs.strip()))
            elif section == "conditions":
                conditions.append(body)
        elif section == "answer" and body:
            answer = (answer + " " + body).strip()
    if not answer:
        raise TemplateError("the template has no #answer")
    return Template("\n".join(question_lines).strip(), tuple(init), tuple(conditions), answer)


def _show(v: Any) -> str:
    if isinstance(v, Fraction):
        return str(v.numerator) if v.denominator == 1 else format(float(v), ".10g")
    return str(v)


@dataclass(frozen=True)
class Instance:
    question: str
    answer: Fraction
    values: dict[str, str]
    draws: int


def instantiate(annotated: str, seed: int, *, max_draws: int = MAX_DRAWS) -> Instance:
    """Draw the #init values until every #condition holds (at most ``max_draws`` draws), fill the
    placeholders and evaluate #answer. TemplateError when the conditions are never met."""
    t = parse_template(annotated)
    inits = [(n, _parse(e)) for n, e in t.init]
    conds = [(c, _parse(c)) for c in t.conditions]
    answer = _parse(t.answer)
    rng = random.Random(seed)
    for draw in range(1, max_draws + 1):
        env: dict[str, Any] = {}
        ev = _Eval(env, rng)
        for name, node in inits:
            value = _evaluate(ev, node, f"${name}")
            if isinstance(value, list):  # "$x = range(1, 10)": one value drawn from the list
                if not value:
                    raise TemplateError(f"${name} draws from an empty list")
                value = rng.choice(value)
            env[name] = value
        if all(_evaluate(ev, node, f"#condition {c!r}") for c, node in conds):
            result = _evaluate(ev, answer, "#answer")
            if not isinstance(result, Fraction):
                raise TemplateError(f"#answer is not a number: {result!r}")
            missing = [m.group(1) for m in _PLACEHOLDER.finditer(t.question) if m.group(1) not in env]
            if missing:
                raise TemplateError(f"placeholder(s) without an #init value: {', '.join(missing)}")
            question = _PLACEHOLDER.sub(lambda m, env=env: _show(env[m.group(1)]), t.question)
            return Instance(question, result, {k: _show(v) for k, v in env.items()}, draw)
    raise TemplateError(f"the template's conditions were not met in {max_draws} draws "
                        f"({'; '.join(c for c, _ in conds)})")
