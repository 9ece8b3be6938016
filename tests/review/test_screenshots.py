"""Screenshots for docs/screenshots/ (run on purpose, not in every test run):

    REASONAUDIT_SCREENSHOTS=1 .venv/bin/python -m pytest -q tests/review/test_screenshots.py -p no:cacheprovider

Real GSM8K problems and model solutions from the bundled demo data (MIT
licence, see annotation/demo_data/gsm8k/LICENSE).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from django.conf import settings

from annotation import services
from annotation.importing.pipeline import import_stream
from annotation.models import Membership, Problem, Step, StepLabel, Trace
from annotation.review.queues import do_assign
from tests.review.browser import browser, sign_in  # noqa: F401 - fixture
from tests.review.conftest import human_label, judge, judge_label

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not os.environ.get("REASONAUDIT_SCREENSHOTS"), reason="set REASONAUDIT_SCREENSHOTS=1"),
]

OUT = Path(settings.BASE_DIR) / "docs" / "screenshots"
DEMO = Path(settings.BASE_DIR) / "annotation" / "demo_data" / "gsm8k" / "example_model_solutions.jsonl"


def _shot(page, name: str, *, full_page: bool = False) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    assert path.stat().st_size < 300_000, f"{path} is {path.stat().st_size} bytes"


def test_screenshots(live_server, browser, owner, member, study, django_user_model):  # noqa: F811
    lines = DEMO.read_bytes().splitlines(keepends=True)[:12]
    report = import_stream(study, io.BytesIO(b"".join(lines)), "gsm8k-solutions")
    assert report.committed, report.rejected
    bob = django_user_model.objects.create_user("bob", password="pw-bob")
    django_user_model.objects.create_user("adam", password="pw-adam")
    services.do_add_member(study, "bob", Membership.Role.ANNOTATOR)
    services.do_add_member(study, "adam", Membership.Role.ADJUDICATOR)
    config = judge(study, "gpt-4o-judge")
    do_assign(study, owner, [member, bob, owner], 2, stratify=True)

    # The judge and bob have labelled alice's first trace.
    first = Trace.objects.filter(assignments__annotator=member).order_by("assignments__position").first()
    n = first.n_steps
    for step in Step.objects.filter(trace=first).order_by("index"):
        verdict = "invalid" if step.index == n - 1 and n > 1 else "valid"
        judge_label(first, step.index, config, verdict, reason="the multiplication uses the wrong quantity"
                    if verdict == "invalid" else "arithmetic checks out")
        human_label(first, step.index, bob, "invalid" if step.index == 1 else "valid",
                    refs=[step.index] if step.index <= first.problem.l_gold else [],
                    note="skips the eggs she bakes with" if step.index == 1 else "")

    # Skeleton editor: a draft with a check that does not hold.
    page = sign_in(browser, live_server.url, "olivia", "pw-olivia", width=1400, height=900)
    problem = Problem.objects.get(pk=first.problem_id)
    page.goto(f"{live_server.url}/problems/{problem.pk}/")
    rows = page.locator("#sk-rows > li.sk-row")
    rows.nth(1).locator("input[name^=check-]").fill("9*2=19")
    page.wait_for_selector("#sk-rows li.sk-row:nth-child(2) .check-result.bad")
    page.locator("#sk-rows > li.sk-row").first.locator("textarea").click()
    page.wait_for_timeout(300)
    _shot(page, "skeleton_editor")

    # Review page, blind, halfway through.
    page = sign_in(browser, live_server.url, "alice", "pw-alice", width=1400, height=900)
    page.goto(f"{live_server.url}/traces/{first.pk}/")
    page.keyboard.press("1")
    page.keyboard.press("v")
    page.wait_for_timeout(200)
    _shot(page, "review_blind")

    # Finish it: the page reloads with the judge's and bob's labels beside alice's.
    for _ in range(n - 1):
        page.keyboard.press("v")
    page.keyboard.press("s")
    page.wait_for_selector("ul.others")
    page.keyboard.press("g")
    page.wait_for_timeout(300)
    _shot(page, "review_revealed")

    # Queue (owner: progress per annotator and the assignment form).
    page = sign_in(browser, live_server.url, "olivia", "pw-olivia", width=1400, height=900)
    page.goto(f"{live_server.url}/studies/{study.pk}/queue/?status=all")
    _shot(page, "queue")

    # Adjudication.
    assert StepLabel.objects.filter(kind="human").exists()
    page = sign_in(browser, live_server.url, "adam", "pw-adam", width=1400, height=900)
    page.goto(f"{live_server.url}/studies/{study.pk}/adjudication/")
    page.keyboard.press("i")
    page.keyboard.type("bob is right: 16 - 3 leaves out the 4 eggs for muffins")
    _shot(page, "adjudication")
