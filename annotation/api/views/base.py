"""What the REST views share: a label's row, a boolean query parameter's schema."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter

from annotation.models import StepLabel
from annotation.review.visibility import source_name


def label_row(lab: StepLabel, index: int) -> dict:
    source = {"human": "human", "adjudication": "final"}.get(lab.kind) or f"judge:{lab.judge.name}"
    return {"step": index, "source": source, "annotator": source_name(lab) if lab.kind != "judge" else lab.judge.name,
            "verdict": lab.verdict, "skeleton_refs": list(lab.skeleton_refs or []), "confidence": lab.confidence,
            "reason": lab.reason}


def bool_param(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(name, bool, description=description)
