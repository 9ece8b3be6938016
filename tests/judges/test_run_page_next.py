"""A finished run's page is no dead end (issue 31): it says what the run wrote and links on to the judge's
disagreements, adjudication and the traces; "Counts cover the chunks committed so far" only while it runs; a judge
that calls no model says so instead of offering requests, tokens and cost it never has; the run and its job name
each other, and the job page's link says what the run's page holds."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client

from judges import services
from judges.models import MECHANISTIC, JudgeConfig
from tests.judges.conftest import run_judge

pytestmark = pytest.mark.django_db

GSM8K = Path(__file__).resolve().parents[2] / "annotation" / "demo_data" / "gsm8k" / "example_model_solutions.jsonl"


def test_a_finished_judge_run_says_what_it_wrote_and_where_to_go_next(study, owner, do_import):
    lines = GSM8K.read_bytes().splitlines(keepends=True)[:3]
    assert do_import(b"".join(lines), fmt="gsm8k-solutions").committed
    services.ensure_mechanistic(study)
    judge = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    run, job = run_judge(judge)
    assert job.status == "succeeded" and run.labels_created > 0
    web = Client()
    web.force_login(owner)
    page = web.get(f"/judge-runs/{run.pk}/").content.decode()
    assert f"Judge run #{run.pk} of" in page and f"Its job is #{job.pk}" in page
    assert "Counts cover the chunks committed so far" not in page
    assert f"{run.labels_created} new step labels" in page
    for url in (f"/judges/{judge.pk}/disagreements/", f"/studies/{study.pk}/adjudication/",
                f"/studies/{study.pk}/traces/"):
        assert f'href="{url}"' in page, url
    assert "Model calls" in page and "no requests, tokens or cost" in page
    job_page = web.get(f"/jobs/{job.pk}/").content.decode()
    assert f'href="/judge-runs/{run.pk}/" id="run-page-link">What this run wrote' in job_page
    assert "Run details: requests, tokens, cost, failures" not in job_page
