"""The scanner run as every door starts it (runs.kinds): one of the study's scanners over a saved cohort or
the whole study (the scanner's own page and ``POST scanners/<id>/runs/`` start the same)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from annotation.models import Study
from runs import kinds
from search import scanners
from search.models import Cohort, Scanner, ScannerRun


class ScannerStartSerializer(kinds.RunParams):
    scanner = serializers.CharField(label="Scanner", help_text="name of one of the study's scanners")

    def validate_scanner(self, value: str) -> Scanner:
        scanner = Scanner.objects.filter(study=self.context["study"], name=value).select_related("judge").first()
        if scanner is None:
            raise serializers.ValidationError(f"no scanner named {value!r} in this study")
        return scanner


def start(study: Study, d: dict[str, Any], user) -> ScannerRun:
    cohort = Cohort.objects.get(study=study, pk=int(d["cohort"])) if d.get("cohort") else None
    return scanners.do_start_scan(d["scanner"], cohort=cohort, user=user, force=d["force"],
                                  budget_usd=d.get("budget_usd"))


def declare() -> None:
    kinds.declare(kinds.RunKind(
        "scanner", "Scanner", ScannerStartSerializer, start,
        options=lambda study: {"scanner": list(Scanner.objects.filter(study=study).order_by("name")
                                               .values_list("name", flat=True))},
        help="Ask a scanner's question of every trace of a cohort (or of the study) with its LLM judge; "
             "each answer cites the steps it rests on."))
