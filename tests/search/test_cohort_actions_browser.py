"""The cohort page's actions have a clear layout (issue 31: four forms crammed in a row, a Ctrl-click multi-select):
one titled card each for compare, queue, judge and delete, none overlapping another at 1280 px, and annotators
chosen with checkboxes."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotation.models import Assignment, Membership
from search.services import do_save_cohort
from tests.review.browser import browser, sign_in  # noqa: F401 - fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_cohort_actions_are_cards_and_annotators_are_checkboxes(live_server, browser, owner, member, study,  # noqa: F811
                                                                    traces):
    cohort = do_save_cohort(study, Membership.objects.get(study=study, user=owner), name="waits", data={"q": "wait"})
    page = sign_in(browser, live_server.url, "olivia", "pw-olivia", width=1280, height=800)
    page.goto(f"{live_server.url}/cohorts/{cohort.pk}/")
    cards = page.locator(".cohort-actions > section.card")
    expect(cards).to_have_count(4)
    assert [cards.nth(i).locator("h2").inner_text() for i in range(4)] == [
        "Compare", "Queue for review", "Judge run over this cohort", "Delete"]
    boxes = [cards.nth(i).bounding_box() for i in range(4)]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            apart = (a["x"] + a["width"] <= b["x"] + 1 or b["x"] + b["width"] <= a["x"] + 1
                     or a["y"] + a["height"] <= b["y"] + 1 or b["y"] + b["height"] <= a["y"] + 1)
            assert apart, (a, b)
    assert page.locator("select[multiple]").count() == 0
    queue = cards.nth(1)
    queue.get_by_label("alice").check()
    queue.get_by_role("button", name="Queue").click()
    expect(page.locator(".messages")).to_be_visible()
    assert Assignment.objects.filter(annotator=member, trace__cohort_memberships__cohort=cohort).count() == cohort.n_traces > 0
