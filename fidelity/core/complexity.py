"""Hop complexity (spec §2): the integer category of eq. 2-3 (the stratum) and the graded
score of eq. 11 (a continuous covariate). Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass

from fidelity.core.text import sentences

CONNECTIVES = ("and", "or", "but", "because", "when", "if")
_CONNECTIVE = re.compile(r"\b(?:" + "|".join(CONNECTIVES) + r")\b", re.IGNORECASE)
_TIME = re.compile(r"\bfrom\s+(?:1[5-9]|20)\d{2}\s+to\s+(?:1[5-9]|20)\d{2}\b|"
                   r"\b(?:in|before|after)\s+(?:1[5-9]|20)\d{2}\b", re.IGNORECASE)
_CAPITAL = re.compile(r"\b[A-Z][a-zA-Z]+")
LABELS = {1: "1-hop", 2: "2-hop", 3: "3-hop", 4: "4+-hop"}
CATEGORIES = tuple(LABELS.values())


@dataclass(frozen=True)
class Hops:
    category: str  # 1-hop .. 4+-hop (eq. 2-3)
    c: int  # the integer heuristic, 1..4
    graded: float  # h(q) of eq. 11, in [1, 4]


def has_time_scope(question: str, time_scope: object = None) -> bool:
    """An annotated scope (MenatQA ``time_scope`` non-empty), else "from YYYY to YYYY", "in/before/after YYYY"."""
    if time_scope:
        return True
    return bool(_TIME.search(question or ""))


def hops(question: str, time_scope: object = None, *, count_time: bool = True) -> Hops:
    """c = min(4, 1 + 1[multi-sentence] + 1[clausal] + 1[time scope]) (time scope only with
    ``count_time``, [I] default on); h = min(4, max(1, 1 + min(1, s-1) + min(1, (c'-1)/2) +
    min(1, w/3) + 1_time)) with c' = 1 + connective occurrences and w = capitalised words."""
    s = len(sentences(question))
    n_conn = len(_CONNECTIVE.findall(question or ""))
    time = has_time_scope(question, time_scope) and count_time
    c = min(4, 1 + int(s > 1) + int(n_conn > 0) + int(time))
    w = len(_CAPITAL.findall(question or ""))
    h = 1 + min(1, max(0, s - 1)) + min(1.0, n_conn / 2) + min(1.0, w / 3) + int(time)
    return Hops(LABELS[c], c, float(min(4.0, max(1.0, h))))
