"""The bundled GSM8K demo file: without labels, every model still gets a
leaderboard row whose answer accuracy is the file's is_correct rate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from scoring import score_jobs

pytestmark = pytest.mark.django_db

DEMO = Path(settings.BASE_DIR) / "annotation" / "demo_data" / "gsm8k" / "example_model_solutions.jsonl"


def expected_accuracy() -> dict[str, float]:
    correct: dict[str, list[bool]] = {}
    for line in DEMO.read_text().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        for key, value in record.items():
            if isinstance(value, dict) and "is_correct" in value:
                correct.setdefault(key, []).append(bool(value["is_correct"]))
    return {model: sum(flags) / len(flags) for model, flags in correct.items()}


def test_it_reports_the_demo_files_accuracy_per_model_without_labels(study, owner, do_import):
    report = do_import(DEMO.read_bytes(), "gsm8k-solutions")
    assert report.committed, report.rejected[:3]
    score_jobs.recompute(study, warm=False)
    expected = expected_accuracy()
    assert len(expected) == 4
    client = APIClient()
    client.force_authenticate(owner)
    body = client.get(f"/api/v1/studies/{study.pk}/leaderboard/").json()
    rows = {r["model"]: r for r in body["results"]}
    assert set(rows) == set(expected)
    for model, accuracy in expected.items():
        assert rows[model]["answer_accuracy"] == pytest.approx(accuracy), model
        assert rows[model]["traces"] == 1319
    # Nothing is labelled yet (no judge has run), so process metrics are null, not zero.
    human = client.get(f"/api/v1/studies/{study.pk}/leaderboard/", {"source": "human"}).json()["results"]
    for row in body["results"] + human:
        assert row["process_mean"] is None and row["svr"] is None and row["lucky_guess_rate"] is None
