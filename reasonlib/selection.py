"""The ``--problems FILTER`` syntax of every run that takes problems (generation, fidelity; pure).

    all              every problem (the default)
    first:N          the first N problems in problem-id order
    ids:A,B-C        by position in problem-id order, 1-based; ranges inclusive ("ids:3,5-9")
    pid:X,Y          by problem id (exact)
    sample:N@SEED    N problems drawn without replacement with the seed (same seed, same draw)

Applied to an ordered list of problem ids, it returns the chosen ids in that order.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from reasonlib.ids import is_id
from reasonlib.refusals import Invalid

SYNTAX = "all | first:N | ids:A,B-C | pid:X,Y | sample:N@SEED"


class FilterError(Invalid):
    """A ``--problems`` filter that does not parse."""


def _positions(spec: str) -> list[int]:
    out: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise FilterError(f"ids: {part!r} is not a position or a range A-B")
        a = int(m.group(1))
        b = int(m.group(2) or a)
        if a < 1 or b < a:
            raise FilterError(f"ids: {part!r} is not a range of 1-based positions")
        out.extend(range(a, b + 1))
    return out


def select(spec: str | None, ordered_ids: Sequence[str]) -> list[str]:
    """The ids of ``ordered_ids`` that ``spec`` selects (FilterError naming the mistake)."""
    spec = (spec or "all").strip()
    if spec == "all":
        return list(ordered_ids)
    kind, sep, arg = spec.partition(":")
    if not sep:
        raise FilterError(f"unknown problem filter {spec!r}; use {SYNTAX}")
    if kind == "first":
        if not is_id(arg) or int(arg) < 1:
            raise FilterError(f"first:N needs a positive N, got {arg!r}")
        return list(ordered_ids[: int(arg)])
    if kind == "ids":
        wanted = _positions(arg)
        too_far = [p for p in wanted if p > len(ordered_ids)]
        if too_far:
            raise FilterError(f"ids: position {too_far[0]} is past the last problem ({len(ordered_ids)})")
        seen = sorted(set(wanted))
        return [ordered_ids[p - 1] for p in seen]
    if kind == "pid":
        wanted = [p.strip() for p in arg.split(",") if p.strip()]
        unknown = [p for p in wanted if p not in set(ordered_ids)]
        if unknown:
            raise FilterError(f"pid: no problem {unknown[0]!r}")
        keep = set(wanted)
        return [p for p in ordered_ids if p in keep]
    if kind == "sample":
        m = re.fullmatch(r"(\d+)@(-?\d+)", arg)
        if not m:
            raise FilterError(f"sample:N@SEED expected, got {arg!r}")
        n, seed = int(m.group(1)), int(m.group(2))
        if n < 1:
            raise FilterError("sample: N must be positive")
        chosen = set(random.Random(seed).sample(range(len(ordered_ids)), min(n, len(ordered_ids))))
        return [pid for i, pid in enumerate(ordered_ids) if i in chosen]
    raise FilterError(f"unknown problem filter {kind!r}; use {SYNTAX}")


def validate(spec: str | None) -> str:
    """``spec`` stripped when its syntax is right (whatever the problems are), else a FilterError:
    forms and serializers check a filter before any problem is read."""
    spec = (spec or "all").strip()
    if spec == "all":
        return spec
    kind, sep, arg = spec.partition(":")
    if not sep or kind not in ("first", "ids", "pid", "sample"):
        raise FilterError(f"unknown problem filter {spec!r}; use {SYNTAX}")
    if kind == "first" and not (is_id(arg) and int(arg) >= 1):
        raise FilterError(f"first:N needs a positive N, got {arg!r}")
    if kind == "ids":
        _positions(arg)
    if kind == "pid" and not any(p.strip() for p in arg.split(",")):
        raise FilterError("pid: name at least one problem id")
    if kind == "sample":
        m = re.fullmatch(r"(\d+)@(-?\d+)", arg)
        if not m or int(m.group(1)) < 1:
            raise FilterError(f"sample:N@SEED needs a positive N and a seed, got {arg!r}")
    return spec


def scope_and_filter(value: str | None, scopes: tuple[str, ...] = ("all", "missing")) -> tuple[str, str]:
    """(scope, filter) of a run's ``problems`` field: one of ``scopes`` (the first is the default), or a
    problem filter applied within the first scope. A FilterError names a filter whose syntax is wrong."""
    value = (value or scopes[0]).strip()
    if value in scopes:
        return value, ""
    return scopes[0], validate(value)
