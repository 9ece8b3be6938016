"""The study's step-importance page: mean importance per model and function tag (tags from a chosen source),
its chart, and downloads equal to the page with a manifest; a blinded annotator reads her own tags only."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.test import Client

from anchors import summaries
from anchors.importing import import_analysis
from annotation.models import Membership
from tests.anchors.test_import import SAMPLE

pytestmark = pytest.mark.django_db


def test_the_table_by_function_tag_its_chart_and_its_download(study, owner):
    import_analysis(study, SAMPLE)
    web = Client()
    web.force_login(owner)
    page = web.get(f"/studies/{study.pk}/step-importance/",
                   {"measure": "resampling_importance_accuracy", "values": "imported:thought-anchors"})
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="by-tag"' in html and 'data-chart="chart-by-tag"' in html
    table = page.context["table"]
    by_tag = {r["tag"]: r for r in table}
    assert page.context["choice"].tags == "imported:thought-anchors"  # the default when an import brought tags
    # plan generation: one step (chunk 2, 0.95 - 0.74); uncertainty management: chunks 4 and 5 (0.07, 0.01)
    assert by_tag["plan_generation"]["steps"] == 1 and by_tag["plan_generation"]["mean"] == pytest.approx(0.21)
    assert by_tag["uncertainty_management"]["mean"] == pytest.approx(0.04)
    assert by_tag["uncertainty_management"]["ci_low"] <= 0.04 <= by_tag["uncertainty_management"]["ci_high"]
    download = web.get(f"/studies/{study.pk}/step-importance/export/", {
        "what": "step-importance-by-tag", "format": "csv", "measure": "resampling_importance_accuracy",
        "values": "imported:thought-anchors", "tags": "imported:thought-anchors"})
    rows = list(csv.DictReader(io.StringIO(download.content.decode())))
    assert [(r["tag"], float(r["mean"])) for r in rows] == [(r["tag"], pytest.approx(r["mean"])) for r in table]
    manifest = json.loads(web.get(f"/studies/{study.pk}/step-importance/export/", {
        "what": "step-importance-by-tag", "format": "csv", "manifest": "1",
        "values": "imported:thought-anchors"}).content)
    assert manifest["code_version"] and manifest["value_source"] == "imported:thought-anchors"
    assert manifest["regime"]["source"] == "imported:thought-anchors"
    parquet = web.get(f"/studies/{study.pk}/step-importance/export/", {"what": "step-importance", "format": "parquet"})
    assert parquet.status_code == 200 and parquet.content[:4] == b"PAR1"


def test_a_blinded_annotator_chooses_her_own_tags_only(study, member):
    import_analysis(study, SAMPLE)
    study.blind = True
    study.save()
    her = Membership.objects.get(study=study, user=member)
    assert [v for v, _ in summaries.tag_sources(study, her)] == ["own"]
    web = Client()
    web.force_login(member)
    page = web.get(f"/studies/{study.pk}/step-importance/", {"values": "imported:thought-anchors"})
    assert page.status_code == 200 and page.context["choice"].tags == "own"
    assert {r["tag"] for r in page.context["table"]} == {"untagged"}
    refused = web.get(f"/studies/{study.pk}/step-importance/", {"tags": "imported:thought-anchors"})
    assert refused.status_code == 403
    refused = web.get(f"/studies/{study.pk}/step-importance/export/", {"what": "step-importance-by-tag",
                                                                        "tags": "imported:thought-anchors"})
    assert refused.status_code == 403
