"""Symbol remapping (spec §6): the three strategies in two modes.

``repo`` reproduces the authors' code: a character map over the instance's
non-whitespace characters (all), over the characters of the operator name
applied everywhere (op), or over every other character (num); targets are
drawn from the 62-character pool without excluding characters that stay
unmapped, so a partial remap can be ambiguous (spec §6.3 b).

``clean`` follows the paper's prose (§6.3 recommendation): the operator is
one token replaced as a whole (op); only letters and digits outside the
operator token are remapped (num); everything non-blank in "all"; targets
never collide with a character that stays unmapped, so it always inverts.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterable
from dataclasses import dataclass

from reasonlib.refusals import Invalid

POOL = string.digits + string.ascii_uppercase + string.ascii_lowercase  # the 62 single-token characters
VARIANTS = ("all", "num", "op")
MODES = ("repo", "clean")
_BLANK = frozenset(" \n")


class RemapError(Invalid):
    """The instance cannot be remapped (more symbols than the pool holds)."""


class AmbiguousRemap(ValueError):
    """A repo-mode partial remap sent a symbol onto one that stays unmapped: it cannot be inverted."""


@dataclass(frozen=True)
class Remap:
    """What was done to one instance: ``chars`` a character map, ``token`` an operator token replacement
    (clean op), ``protect`` the operator token left untouched by a clean num map."""

    variant: str
    mode: str
    chars: tuple[tuple[str, str], ...] = ()
    token: tuple[str, str] | None = None
    protect: str = ""

    def as_dict(self) -> dict:
        return {"variant": self.variant, "mode": self.mode, "chars": dict(self.chars),
                "token": list(self.token) if self.token else None, "protect": self.protect}


def symbols(texts: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for text in texts:
        out.update(text)
    return out - _BLANK


def _draw(rng: random.Random, sources: list[str], pool: str, item: str) -> dict[str, str]:
    if len(sources) > len(pool):
        raise RemapError(f"{item}: {len(sources)} distinct symbols to remap but only {len(pool)} "
                         f"characters available in the pool")
    return dict(zip(sources, rng.sample(pool, len(sources)), strict=True))


def _segments(text: str, token: str) -> list[tuple[bool, str]]:
    """``text`` cut at each occurrence of the operator token: (is_token, piece)."""
    if not token:
        return [(False, text)]
    out: list[tuple[bool, str]] = []
    parts = text.split(token)
    for i, part in enumerate(parts):
        if i:
            out.append((True, token))
        if part:
            out.append((False, part))
    return out


def _map_chars(text: str, table: dict[str, str], protect: str = "") -> str:
    trans = str.maketrans(table)
    if not protect:
        return text.translate(trans)
    return "".join(piece if is_tok else piece.translate(trans) for is_tok, piece in _segments(text, protect))


def build(texts: list[str], operator: str, variant: str, mode: str, rng: random.Random, item: str) -> Remap:
    """The map of one instance whose full text is ``texts`` (every example question and answer, the
    question and its answer); ``operator`` is the instance's operator name."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown remap variant {variant!r}")
    if mode not in MODES:
        raise ValueError(f"unknown remap mode {mode!r}; choose repo or clean")
    every = sorted(symbols(texts))
    if variant == "all":
        return Remap(variant, mode, tuple(_draw(rng, every, POOL, item).items()))
    op_chars = sorted(symbols([operator]) | (set(operator) & {" "} if mode == "repo" else set()))
    if mode == "repo":
        if variant == "op":
            return Remap(variant, mode, tuple(_draw(rng, op_chars, POOL, item).items()))
        operands = [c for c in every if c not in set(op_chars)]
        return Remap(variant, mode, tuple(_draw(rng, operands, POOL, item).items()))
    # clean
    if variant == "op":
        rest = symbols(_map_text(t, {}, None, operator, strip_token=True) for t in texts)
        pool = "".join(c for c in POOL if c not in rest)
        if not operator:
            raise RemapError(f"{item}: no operator to remap")
        if len(pool) < 1:
            raise RemapError(f"{item}: no character left in the pool for the operator token")
        token = "".join(rng.choice(pool) for _ in range(len(operator)))
        return Remap(variant, mode, token=(operator, token))
    body = symbols(_map_text(t, {}, None, operator, strip_token=True) for t in texts)
    operands = sorted(c for c in body if c.isalnum())
    stays = symbols(texts) - set(operands)
    pool = "".join(c for c in POOL if c not in stays)
    return Remap(variant, mode, tuple(_draw(rng, operands, pool, item).items()), protect=operator)


def _map_text(text: str, table: dict[str, str], token: tuple[str, str] | None, protect: str,
              strip_token: bool = False) -> str:
    if strip_token:
        return "".join(piece for is_tok, piece in _segments(text, protect) if not is_tok)
    if token:
        return text.replace(token[0], token[1])
    return _map_chars(text, table, protect)


def apply(remap: Remap, text: str) -> str:
    return _map_text(text, dict(remap.chars), remap.token, remap.protect)


def invert(remap: Remap, text: str, original_symbols: set[str] | None = None) -> str:
    """Undo ``remap`` on ``text``. A repo-mode partial map whose targets collide with characters left
    unmapped cannot be undone character by character: AmbiguousRemap."""
    if remap.token:
        return text.replace(remap.token[1], remap.token[0])
    table = dict(remap.chars)
    if len(set(table.values())) != len(table):
        raise AmbiguousRemap("the map is not injective")
    if original_symbols is not None:
        unmapped = original_symbols - set(table)
        clash = unmapped & set(table.values())
        if clash:
            raise AmbiguousRemap(f"targets {''.join(sorted(clash))!r} also occur unmapped")
    back = {v: k for k, v in table.items()}
    if remap.protect:
        return "".join(piece if is_tok else piece.translate(str.maketrans(back))
                       for is_tok, piece in _segments(text, remap.token[1] if remap.token else remap.protect))
    return text.translate(str.maketrans(back))
