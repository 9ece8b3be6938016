"""Step-function tags by keyboard in a real browser: ``f`` then 1..8 toggles a function of the current step
(several per step), the tag keys do not eat the skeleton keys, ``s`` saves labels and tags in one version,
and a second save starts from the version the first one left."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from annotation.models import Trace, TraceReview
from annotation.review.tags import my_tags
from tests.review.browser import browser, sign_in  # noqa: F401 - fixture
from tests.review.conftest import seed

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_tag_steps_by_keyboard_and_save(live_server, browser, member, study, do_import):  # noqa: F811
    seed(do_import, n_problems=1, models=("m1",))
    trace = Trace.objects.get(trace_id="p0/m1")
    page = sign_in(browser, live_server.url, "alice", "pw-alice")
    page.goto(f"{live_server.url}/traces/{trace.pk}/")
    expect(page.locator("li.step.current")).to_have_attribute("data-step", "1")

    step1 = page.locator("#s1")
    page.keyboard.press("f")
    expect(page.locator("body")).to_have_class(re.compile(r"\btag-mode\b"))
    page.keyboard.press("2")
    page.keyboard.press("f")
    page.keyboard.press("1")
    expect(step1.locator('.ftags input[value="plan_generation"]')).to_be_checked()
    expect(step1.locator('.ftags input[value="problem_setup"]')).to_be_checked()
    # Without "f" a digit is a skeleton step again.
    page.keyboard.press("1")
    expect(step1.locator('.refs input[value="1"]')).to_be_checked()
    expect(step1.locator('.ftags input[value="problem_setup"]')).to_be_checked()
    page.keyboard.press("v")  # label and move on to step 2
    page.keyboard.press("f")
    page.keyboard.press("4")
    expect(page.locator('#s2 .ftags input[value="active_computation"]')).to_be_checked()
    page.keyboard.press("s")
    expect(page.locator("#save-status")).to_contain_text("Saved (version 2)")
    assert my_tags(trace, member) == {1: ["problem_setup", "plan_generation"], 2: ["active_computation"]}

    # Untag step 2 and save again: the page holds the version the first save left.
    page.keyboard.press("f")
    page.keyboard.press("4")
    page.keyboard.press("s")
    expect(page.locator("#save-status")).to_contain_text("Saved (version 3)")
    assert my_tags(trace, member) == {1: ["problem_setup", "plan_generation"]}
    assert TraceReview.objects.get(trace=trace, annotator=member).version == 3
