"""The demo shows every view (issue 31): after ``manage.py demo`` the Abstraction page shows the published
GPT-4o-mini outputs, the Fidelity page a finished run and the Evidence page its IFR, anytime (thinking budgets)
and early-answering sections, each run of the stand-in model (demo/standin) and each page of it saying it is a
stand-in. The demo's GSM8K file is cut to five problems here (the command reads it from DEMO_FILE)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from django.core.management import call_command

from annotation.models import Study
from demo import research
from faithfulness.models import FaithfulnessRun
from fidelity.models import FidelityRun
from subjects.models import STAND_IN_MODEL, SubjectModel
from tests.review.browser import browser, sign_in  # noqa: F401 - fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

GSM8K = Path(__file__).resolve().parents[1] / "annotation" / "demo_data" / "gsm8k" / "example_model_solutions.jsonl"


@pytest.fixture
def demo_study(tmp_path, monkeypatch) -> Study:
    from demo.management.commands import demo

    small = tmp_path / "demo.jsonl"
    small.write_bytes(b"".join(GSM8K.read_bytes().splitlines(keepends=True)[:5]))
    monkeypatch.setattr(demo, "DEMO_FILE", small)
    monkeypatch.setattr(demo, "DEMO_LABELS", [])
    out = io.StringIO()
    call_command("demo", password="pw-demo-123", stdout=out)
    assert "stand-in: fidelity succeeded" in out.getvalue(), out.getvalue()
    return Study.objects.get(name=demo.DEMO_STUDY)


def test_the_demo_fills_abstraction_fidelity_and_evidence(demo_study, live_server, browser):  # noqa: F811
    subject = SubjectModel.objects.get(study=demo_study, name=research.STAND_IN_NAME)
    assert subject.model == STAND_IN_MODEL and subject.continuation == "completions"
    kinds = set(FaithfulnessRun.objects.filter(subject=subject, job__status="succeeded").values_list("kind", flat=True))
    assert kinds == {"interventions", "anytime", "early_answering"}
    assert FidelityRun.objects.get(subject=subject).job.status == "succeeded"

    page = sign_in(browser, live_server.url, "demo", "pw-demo-123")
    page.set_default_timeout(60_000)  # the research pages read every run on first view; a loaded CI box is slow
    pk = demo_study.pk

    page.goto(f"{live_server.url}/studies/{pk}/abstraction/")
    main = page.locator("main")
    assert "No checked answers yet" not in main.inner_text()
    row = main.locator("tr", has_text="gpt-4o-mini (DP)").first
    assert re.search(r"0\.\d\d", row.inner_text())  # an EC accuracy and Δs, from the published verdicts

    page.goto(f"{live_server.url}/studies/{pk}/fidelity/")
    text = page.locator("main").inner_text()
    assert "No finished run yet" not in text
    assert page.locator(".stand-in-notice").is_visible() and "not a language model" in text
    page.locator("main a", has_text="run 1").first.click()
    assert page.locator("h1").inner_text().startswith("Fidelity: stand-in")
    assert page.locator(".stand-in-notice").is_visible()

    page.goto(f"{live_server.url}/studies/{pk}/faithfulness/")
    assert page.locator(".stand-in-notice").is_visible()
    for heading in ("Intervention faithfulness (IFR)", "Anytime profile", "Early answering"):
        card = page.locator("section.card", has=page.locator("h2", has_text=heading)).first
        body = card.inner_text()
        assert "stand-in" in body, (heading, body[:500])
