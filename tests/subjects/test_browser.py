"""The prompt-template editor and the probe card in a real browser: the
preview comes through htmx (an error in place, with no page change), saving
makes the next version, and the probe card follows its background job until
the result shows. Screenshots go to docs/screenshots/ when
REASONAUDIT_SCREENSHOTS is set."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from subjects import services
from subjects.models import PromptTemplate
from tests.review.browser import browser, sign_in  # noqa: F401 - fixture
from tests.runs.fake_openai import FakeOpenAI
from tests.runs.test_continuation import SMOLLM2

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def shot(page, name: str) -> None:
    if os.environ.get("REASONAUDIT_SCREENSHOTS"):
        page.screenshot(path=str(SHOTS / name), full_page=True)


def test_the_editor_previews_through_htmx_and_saves_a_version(live_server, browser, owner, study,  # noqa: F811
                                                             make_problems):
    make_problems(3)
    page = sign_in(browser, live_server.url, "olivia", "pw-olivia")
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.goto(f"{live_server.url}/studies/{study.pk}/prompt-templates/")
    page.fill("input[name=name]", "terse")
    page.fill("textarea[name=template]", "{% debug %}{{ problem }}")
    page.click("button:has-text('Preview')")
    expect(page.locator("#preview .error")).to_contain_text("tag is not allowed")
    page.fill("textarea[name=template]", "Question {{ problem_id }}: {{ problem }}\nThink step by step.")
    page.fill("input[name=problem_id]", "p2")
    page.click("button:has-text('Preview')")
    expect(page.locator("#preview pre")).to_contain_text("Question p2: Ann has 4 apples and buys 5 more.")
    shot(page, "subjects_template_editor.png")
    page.click("button:has-text('Save')")
    saved = PromptTemplate.objects.get(study=study, name="terse")
    page.wait_for_url(f"**/prompt-templates/{saved.pk}/")
    expect(page.locator("#template-version h2")).to_contain_text("terse v1")
    assert not problems, problems


def test_the_probe_card_follows_its_job(live_server, browser, owner, study, settings):  # noqa: F811
    # Eager Celery: the task runs when the request's transaction commits; the page then polls the finished job.
    server = FakeOpenAI(continue_completions=True, chat_prefill="continue_final_message",
                        served_model="served/smollm2").start()
    try:
        subject, _ = services.do_save_subject(study, {"name": "tiny", "model": "subject", "base_url": server.url,
                                                      "max_retries": 0, "chat_template": SMOLLM2})
        page = sign_in(browser, live_server.url, "olivia", "pw-olivia")
        page.goto(f"{live_server.url}/subject-models/{subject.pk}/")
        page.click("#continuation button:has-text('Probe')")
        expect(page.locator("#probe-job")).to_contain_text("continuation mode completions")
        expect(page.locator("#continuation-mode")).to_have_text("completions")
        shot(page, "subjects_probe_result.png")
    finally:
        server.stop()
