"""A 5,000-step thought in a real browser: collapsed blocks load as they open, keys walk from the
thought into the answer, the search jumps to a match in a block not loaded yet, labels typed in a
loaded block are saved and the other blocks' labels survive.

With REASONAUDIT_SCREENSHOTS=1 it also writes docs/screenshots/thought-{collapsed,searching,labelling}.png."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from annotation.models import StepLabel
from tests.review.browser import browser  # noqa: F401 - fixture
from tests.review.conftest import human_label, judge, judge_label
from tests.scoring.thought_fixtures import long_thought

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path(settings.BASE_DIR) / "docs" / "screenshots"


def _shot(page, name: str) -> None:
    if not os.environ.get("REASONAUDIT_SCREENSHOTS"):
        return
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    assert path.stat().st_size < 300_000, f"{path} is {path.stat().st_size} bytes"


def test_review_a_5000_step_thought(live_server, browser, owner, study):  # noqa: F811
    trace = long_thought(study, 5000, needle_at=4321)
    config = judge(study)
    for i in (2, 3, 8):
        judge_label(trace, i, config, "invalid" if i == 3 else "valid", reason="13 - 4 is 9")
    human_label(trace, 2500, owner, "neutral")  # in block 25: must survive a save of block 1
    problems: list[str] = []
    # A 5,000-step page on a shared two-core machine: more patience than sign_in's 10 s.
    expect.set_options(timeout=20_000)
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(30_000)
    page = context.new_page()
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", "olivia")
    page.fill("input[name=password]", "pw-olivia")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.goto(f"{live_server.url}/traces/{trace.pk}/")
    blocks = page.locator("details.thought-block")
    expect(blocks).to_have_count(50)
    # the page opens at the first unlabelled step: block 1 opens and loads
    expect(page.locator("#s1.current")).to_be_visible()
    expect(page.locator("#block-1 li.step")).to_have_count(100)
    expect(page.locator("#block-25 li.block-loading")).to_have_count(1)
    # collapsed: every block shows its label summary (block 25 holds my earlier label)
    page.click("#collapse-all")
    expect(page.locator("details.thought-block[open]")).to_have_count(0)
    expect(page.locator("#block-25 .block-summary")).to_contain_text("1/100 labelled")
    page.locator("#thought-bar").scroll_into_view_if_needed()
    _shot(page, "thought-collapsed")
    page.keyboard.press("g")
    expect(page.locator("#s1.current")).to_be_visible()

    # label the first three thought steps by keyboard
    for key in ("v", "i", "v"):
        page.keyboard.press(key)
    expect(page.locator("#s4.current")).to_be_visible()
    expect(page.locator("#labelled-count")).to_have_text("4")  # 3 + the kept label of step 2500
    expect(page.locator("#first-error")).to_have_text("step 2")
    # d: the next step where the visible verdicts differ (mine vs the judge's): step 2 wraps round, or 3
    page.keyboard.press("g")
    page.keyboard.press("d")
    expect(page.locator("li.step.current")).to_have_attribute("data-step", "2")
    _shot(page, "thought-labelling")

    # search: a paragraph in block 44, not loaded yet
    page.keyboard.press("/")
    page.keyboard.type("marmalade")
    page.keyboard.press("Enter")
    expect(page.locator("#s4321.current")).to_be_visible()
    expect(page.locator("#s4321 mark.hit")).to_have_text("marmalade")
    expect(page.locator("#search-status")).to_have_text("1 of 1 steps")
    _shot(page, "thought-searching")
    # A four-digit step number stays on one line in the gutter (it wrapped as "432 / 1").
    number = page.locator("#s4321 .step-no")
    assert page.evaluate("el => { const r = document.createRange(); r.selectNodeContents(el.firstChild);"
                         " return new Set(Array.from(r.getClientRects()).map(x => Math.round(x.top))).size; }",
                         number.element_handle()) == 1

    # End: the last step is the answer's; k walks back into the thought's last block
    page.locator("#trace-search").press("Escape")
    page.keyboard.press("G")
    expect(page.locator("#s5002.current")).to_be_visible()
    page.keyboard.press("k")
    page.keyboard.press("k")
    expect(page.locator("#s5000.current")).to_be_visible()

    page.keyboard.press("s")
    expect(page.locator("#save-status")).to_contain_text("Saved (version 1)")
    mine = dict(StepLabel.objects.filter(step__trace=trace, annotator=owner).values_list("step__index", "verdict"))
    assert mine == {1: "valid", 2: "invalid", 3: "valid", 2500: "neutral"}
    assert not problems, problems


def test_inline_dollar_math_in_a_thought_is_typeset_and_money_is_not(live_server, browser, owner, study,  # noqa: F811
                                                                     do_import):
    """R1 writes inline math as $...$ in its thought; "$" is money too. The pandoc rule tells them apart."""
    from tests.conftest import jsonl
    from tests.review.browser import sign_in

    thought = ("We need $3(1+3(1+3))$ first.\n\nThe pens cost $3 and $4, so $7 in all.\n\n"
               "Then $x^2 = 9$, so $x = 3$.")
    report = do_import(jsonl({"kind": "problem", "problem_id": "p", "statement": "?", "gold_answer": "3"},
                             {"kind": "trace", "problem_id": "p", "model": "r1", "trace_id": "t",
                              "raw": f"<think>{thought}</think>The answer is 3.", "answer": "3"}))
    assert report.committed, report.rejected
    from annotation.models import Trace

    page = sign_in(browser, live_server.url, "olivia", "pw-olivia")
    page.goto(f"{live_server.url}/traces/{Trace.objects.get().pk}/")
    steps = page.locator("li.step .step-text")
    expect(steps.nth(0).locator(".katex")).to_have_count(1)
    expect(steps.nth(2).locator(".katex")).to_have_count(2)
    expect(steps.nth(1)).to_contain_text("cost $3 and $4, so $7 in all")
    expect(steps.nth(1).locator(".katex")).to_have_count(0)
