"""Agreement between the sources of step-function tags (annotators, judges, published analyses) in a study:
the annotators page's section and the ``tag-agreement`` / ``tag-confusion`` exports read the same report, so
the page and its downloads are equal (docs/agreement.md, "Step-function tags"). The formulas are
agreement.core.tags.

Every source's tags are in it, so it follows the agreement pages' rule (agreement.services.can_view: whoever
sees every label) and the exports' (owners and adjudicators); a blinded annotator never reaches it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agreement.core.tags import tag_agreement
from annotation.gate import Source
from annotation.models import StepTag, Study
from annotation.review.tags import tag_source_name
from reasonlib.step_functions import FUNCTION_LABELS

#: What the report reads (annotation.gate): every source of tags.
READS = frozenset({Source.OWN, Source.PEER, Source.JUDGE, Source.IMPORTED})

KAPPA_COLUMNS = ["source_a", "source_b", "category", "steps", "both", "a_only", "b_only", "neither", "agreement",
                 "kappa", "undefined"]
KAPPA_SCHEMA = {"source_a": "string", "source_b": "string", "category": "string", "steps": "int64", "both": "int64",
                "a_only": "int64", "b_only": "int64", "neither": "int64", "agreement": "float64",
                "kappa": "float64", "undefined": "string"}
CONFUSION_COLUMNS = ["source_a", "source_b", "tag_a", "tag_b", "steps"]
CONFUSION_SCHEMA = {"source_a": "string", "source_b": "string", "tag_a": "string", "tag_b": "string",
                    "steps": "int64"}


def tag_rows(study: Study, scope: Iterable[int] | None = None) -> list[tuple[int, str, str]]:
    """(step pk, source name, tag) of every tag of the study's traces (``scope``: those trace pks only)."""
    qs = StepTag.objects.filter(step__trace__study=study)
    if scope is not None:
        qs = qs.filter(step__trace_id__in=list(scope))
    return [(step, tag_source_name(kind, username, judge, origin), tag) for step, kind, username, judge, origin, tag
            in qs.values_list("step_id", "kind", "annotator__username", "judge__name", "origin", "tag")]


def tag_report(study: Study, scope: Iterable[int] | None = None) -> dict[str, Any]:
    """agreement.core.tags.tag_agreement over the study's tags, with the categories' labels for the page."""
    report = tag_agreement(tag_rows(study, scope))
    report["labels"] = dict(FUNCTION_LABELS)
    report["pairs"] = len({(r["source_a"], r["source_b"]) for r in report["kappa"]})
    return report
