"""The visibility gate: the one decision of what a member may filter, count and compare by.

Every trace filter, list column, count, comparison, cohort and report *declares* the label
sources it reads (:class:`Source`); :func:`check` (refuse) and :func:`may_read` (hide) decide,
per member, whether it may be used or shown. Pages, the REST API, commands, exports, cohorts,
scanners and the judge and study counters all ask here, so blind mode holds by construction:
a new filter that declares what it reads is gated like the others, and one that declares nothing
is refused where it is registered (search.filters, annotation.review.filters).

The rule (docs/review.md, "Blind mode"): in a blind study an annotator who does not see
everything (``access.sees_everything``) may read only the trace itself and her own labels.
Judges' verdicts, other annotators' labels and reviews, adjudications, scores derived from labels
and scanners' answers are for owners and adjudicators (and for everyone in an open study). Her
own *finished* traces reveal the other sources on that trace's review page (``access.is_revealed``);
across traces -- a filter, a count, a cohort -- nothing is revealed, because the traces that enter
or leave a list would tell her what the other sources said on the rest.

No membership (``None``) is the server's operator at the command line, who sees everything.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from annotation import access
from annotation.models import Membership


class Source(StrEnum):
    """What a filter, column, count or report reads."""

    TRACE = "trace"  # the trace itself: texts, model, problem, answer, regime, model runs' outputs
    OWN = "own"  # the member's own labels, notes, reviews and flags
    PEER = "peer"  # other annotators' labels, notes, reviews and flags
    JUDGE = "judge"  # judges' verdicts
    ADJUDICATION = "adjudication"  # adjudicated (final) labels
    SCORES = "scores"  # scores computed from labels: process, coverage, lucky guesses, PRM
    SCANNER = "scanner"  # a scanner's answers (a judge's) and their validation
    IMPORTED = "imported"  # published analyses brought in by an import: their step-function tags


#: Declarations used in many places: the trace alone; scores (computed from every source's labels).
TRACE_ONLY = frozenset({Source.TRACE})
SCORES_ONLY = frozenset({Source.SCORES})
#: What a blinded annotator may read.
BLIND_READABLE = frozenset({Source.TRACE, Source.OWN})
#: Every source but the trace and one's own: "the other sources" of blind mode.
OTHER_SOURCES = frozenset(Source) - BLIND_READABLE


class BlindRefusal(access.AccessDenied):
    """The gate's one refusal (403): ``what`` reads sources the member may not read.

    A member's refusal (never an outsider's): the study is already known to her."""

    def __init__(self, what: str, hidden: Iterable[Source]) -> None:
        names = ", ".join(sorted(s.value for s in hidden))
        super().__init__(f"in this blind study annotators filter, count and compare by their own labels only: "
                         f"{what} reads other sources ({names}), so it is for owners and adjudicators")
        self.what = what


def readable(m: Membership | None) -> frozenset[Source]:
    """The sources ``m`` may read across traces."""
    if m is None or access.sees_everything(m):
        return frozenset(Source)
    return BLIND_READABLE


def may_read(m: Membership | None, reads: Iterable[Source]) -> bool:
    """Whether what reads ``reads`` may be used or shown to ``m`` (hide it otherwise)."""
    return frozenset(reads) <= readable(m)


def check(m: Membership | None, what: str, reads: Iterable[Source]) -> None:
    """Refuse (:class:`BlindRefusal`) what ``m`` may not read."""
    hidden = frozenset(reads) - readable(m)
    if hidden:
        raise BlindRefusal(what, hidden)


def label_sources(source_name: str, *, own: bool) -> frozenset[Source]:
    """What a label source name of the filters and exports reads (``mine``, ``human``,
    ``annotator:NAME``, ``judge:NAME``, ``adjudicated``, ``final``); ``own``: the name is the member's."""
    if own:
        return frozenset({Source.OWN})
    if source_name.startswith("judge:"):
        return frozenset({Source.JUDGE})
    if source_name in ("adjudicated", "adjudication"):
        return frozenset({Source.ADJUDICATION})
    if source_name == "human":
        return frozenset({Source.OWN, Source.PEER})
    if source_name.startswith("annotator:"):
        return frozenset({Source.PEER})
    # "final" (adjudication, else the annotators, else the primary judge) and anything unknown: every source
    return frozenset(Source)
