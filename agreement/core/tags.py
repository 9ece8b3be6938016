"""Agreement between two sources of step-function tags (pure: no Django, no I/O; docs/agreement.md,
"Step-function tags").

A source (an annotator, a judge, a published analysis) gives a step any number of the eight functions of
reasonlib.step_functions. Two sources are compared on the steps **both tagged** (each gave the step at least
one tag): a step one source never tagged is work it did not do, not a "no" on every category.

* Cohen's kappa per category: on those steps, each source's tag is present or absent; kappa of the two
  binary vectors, ``(p_o - p_e) / (1 - p_e)`` with ``p_o`` the share of steps where both agree (both have the
  category or neither has it) and ``p_e = p_a p_b + (1 - p_a)(1 - p_b)`` from each source's rate of the
  category. Undefined (``None``, with the reason) with no shared step, or when ``p_e = 1`` (both gave the
  category to every shared step, or to none).
* The confusion matrix: on the shared steps where each source gave exactly one tag, how often source a's tag
  was x and source b's was y (a step with several tags of either source is left out: it has no single cell).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from itertools import combinations
from typing import Any

from reasonlib.step_functions import FUNCTION_NAMES


def kappa_binary(n11: int, n10: int, n01: int, n00: int) -> tuple[float | None, str | None]:
    """Cohen's kappa of two presence/absence vectors given their 2x2 counts (``n10``: a has it, b not)."""
    n = n11 + n10 + n01 + n00
    if n == 0:
        return None, "no step tagged by both"
    p_o = (n11 + n00) / n
    p_a, p_b = (n11 + n10) / n, (n11 + n01) / n
    p_e = p_a * p_b + (1 - p_a) * (1 - p_b)
    if p_e >= 1:
        return None, "chance agreement 1 (all or none)"
    return (p_o - p_e) / (1 - p_e), None


def tags_by_source(rows: Iterable[tuple[Hashable, str, str]]) -> dict[str, dict[Hashable, frozenset[str]]]:
    """(step, source, tag) rows as source -> step -> its tags."""
    out: dict[str, dict[Hashable, set[str]]] = {}
    for step, source, tag in rows:
        out.setdefault(source, {}).setdefault(step, set()).add(tag)
    return {s: {k: frozenset(v) for k, v in steps.items()} for s, steps in out.items()}


def pair_agreement(a: dict[Hashable, frozenset[str]], b: dict[Hashable, frozenset[str]],
                   categories: Iterable[str] = FUNCTION_NAMES) -> tuple[list[dict[str, Any]], dict]:
    """Kappa per category and the confusion counts of two sources' tags (step -> tags)."""
    shared = [step for step in a if step in b]
    per_category = []
    for c in categories:
        n11 = n10 = n01 = n00 = 0
        for step in shared:
            in_a, in_b = c in a[step], c in b[step]
            if in_a and in_b:
                n11 += 1
            elif in_a:
                n10 += 1
            elif in_b:
                n01 += 1
            else:
                n00 += 1
        kappa, why = kappa_binary(n11, n10, n01, n00)
        per_category.append({"category": c, "steps": len(shared), "both": n11, "a_only": n10, "b_only": n01,
                             "neither": n00, "agreement": (n11 + n00) / len(shared) if shared else None,
                             "kappa": kappa, "undefined": why or ""})
    confusion: dict[tuple[str, str], int] = {}
    for step in shared:
        if len(a[step]) == 1 and len(b[step]) == 1:
            cell = (next(iter(a[step])), next(iter(b[step])))
            confusion[cell] = confusion.get(cell, 0) + 1
    return per_category, confusion


def tag_agreement(rows: Iterable[tuple[Hashable, str, str]],
                  categories: Iterable[str] = FUNCTION_NAMES) -> dict[str, Any]:
    """Every pair of sources (in name order): ``kappa`` rows (source_a, source_b, category, steps, both,
    a_only, b_only, neither, agreement, kappa, undefined) and ``confusion`` rows (source_a, source_b, tag_a,
    tag_b, steps; only non-zero cells, in the taxonomy's order), and ``sources`` with the steps each tagged."""
    categories = list(categories)
    order = {c: i for i, c in enumerate(categories)}
    by_source = tags_by_source(rows)
    sources = sorted(by_source)
    kappa_rows: list[dict[str, Any]] = []
    confusion_rows: list[dict[str, Any]] = []
    for sa, sb in combinations(sources, 2):
        per_category, confusion = pair_agreement(by_source[sa], by_source[sb], categories)
        kappa_rows += [{"source_a": sa, "source_b": sb, **r} for r in per_category]
        for (ta, tb), n in sorted(confusion.items(), key=lambda kv: (order.get(kv[0][0], 99), order.get(kv[0][1], 99))):
            confusion_rows.append({"source_a": sa, "source_b": sb, "tag_a": ta, "tag_b": tb, "steps": n})
    return {"sources": [{"source": s, "steps": len(by_source[s])} for s in sources], "kappa": kappa_rows,
            "confusion": confusion_rows}
