"""The pages in a real browser (issue 19 part 5, issue 23 #11/#15/#17): the grouped navigation at 1280 px by
keyboard, Enter leaving the rating box, the focus after a refused adjudication, and long text kept inside
its box. Screenshots go to docs/screenshots/ with
REASONAUDIT_SCREENSHOTS=1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect
from rest_framework.authtoken.models import Token

from annotation.models import Assignment, Problem, StepLabel, Trace
from annotation.review.queues import do_assign
from tests.conftest import jsonl
from tests.review.browser import browser, sign_in  # noqa: F401 - fixture
from tests.review.conftest import human_label, seed

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def shot(page, name: str, **kwargs) -> None:
    """Refresh docs/screenshots/<name> only when asked (REASONAUDIT_SCREENSHOTS=1, as test_screenshots.py)."""
    if os.environ.get("REASONAUDIT_SCREENSHOTS"):
        page.screenshot(path=str(SCREENSHOTS / name), **kwargs)


def test_the_grouped_navigation_fits_1280_px_and_works_by_keyboard(live_server, browser, owner, study,  # noqa: F811
                                                                    do_import):
    seed(do_import, n_problems=1, models=("m1",))
    page = sign_in(browser, live_server.url, "olivia", "pw-olivia", width=1280, height=800)
    page.goto(f"{live_server.url}/studies/{study.pk}/")
    width = page.evaluate("() => document.documentElement.clientWidth")
    for name in ("Review", "Models and runs", "Results", "Study settings"):
        box = page.locator("summary", has_text=name).bounding_box()
        assert box and box["x"] + box["width"] <= width, name
    sign_out = page.get_by_role("button", name="Sign out").bounding_box()
    assert sign_out and sign_out["x"] + sign_out["width"] <= width
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width  # nothing pushed off-screen
    # Keyboard only: Tab to the "Results" group, open it with Enter, follow a link; Escape closes a menu.
    results = page.locator("summary", has_text="Results")
    results.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("link", name="Evidence")).to_be_visible()
    shot(page, "nav-1280.png")
    page.keyboard.press("Escape")
    expect(page.get_by_role("link", name="Evidence")).to_be_hidden()
    expect(results).to_be_focused()
    page.locator("summary", has_text="Study settings").focus()
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Members")).to_be_focused()
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/studies/{study.pk}/members/")
    shot(page, "members.png", full_page=True)
    # An account for someone new (site administrators create accounts): the one-time password is shown once,
    # and it signs in.
    type(owner).objects.filter(pk=owner.pk).update(is_staff=True)
    page.reload()
    page.get_by_label("New username").fill("bea")
    page.get_by_role("button", name="Create account and add").click()
    secret = page.locator(".secret .secret-value")
    expect(secret).to_be_visible()
    shot(page, "members-account-created.png", full_page=True)
    password = secret.inner_text().strip()
    # The first sign-in spends it: the user chooses their own password before any other page.
    other = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    other.goto(f"{live_server.url}/login/")
    other.fill("input[name=username]", "bea")
    other.fill("input[name=password]", password)
    other.click("button[type=submit]")
    other.wait_for_url(f"{live_server.url}/password/choose/")
    expect(other.get_by_role("heading", name="Choose your password")).to_be_visible()
    other.goto(f"{live_server.url}/studies/{study.pk}/")
    other.wait_for_url(f"{live_server.url}/password/choose/")
    shot(other, "password-choose.png", full_page=True)
    other.get_by_label("New password", exact=True).fill("bea's own long secret 42")
    other.get_by_label("New password confirmation").fill("bea's own long secret 42")
    other.get_by_role("button", name="Set password").click()
    expect(other.get_by_role("link", name="Study A")).to_be_visible()


def test_study_and_profile_pages(live_server, browser, owner):  # noqa: F811
    page = sign_in(browser, live_server.url, "olivia", "pw-olivia", width=1280, height=800)
    page.get_by_role("link", name="New study").click()
    page.get_by_label("Name").fill("Browser study")
    page.get_by_label("Split traces into steps by").select_option("paragraphs")
    shot(page, "new-study.png", full_page=True)
    page.get_by_role("button", name="Create study").click()
    expect(page.locator(".messages")).to_contain_text("you are its owner")
    page.get_by_role("link", name="olivia").click()
    page.get_by_role("button", name="Make a token").click()
    expect(page.locator(".secret")).to_contain_text("shown only now")
    shot(page, "profile-token.png", full_page=True)
    key = page.locator("#new-key").inner_text().strip()
    assert Token.objects.get(user=owner).key == key
    # A reload neither shows the key again nor replaces it (it was rendered in the POST's answer once).
    page.reload()
    expect(page.locator(".secret")).to_have_count(0)
    expect(page.locator("main")).to_contain_text(f"starting {key[:4]}")
    assert Token.objects.get(user=owner).key == key
    # Replace and Revoke ask first; "no" keeps the token.
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.get_by_role("button", name="Revoke token").click()
    expect(page.locator("main")).to_contain_text(f"starting {key[:4]}")
    assert Token.objects.get(user=owner).key == key
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Revoke token").click()
    expect(page.locator(".messages")).to_contain_text("revoked")
    assert not Token.objects.filter(user=owner).exists()


def test_removing_every_assignment_asks_first(live_server, browser, owner, member, study, do_import):  # noqa: F811
    seed(do_import, n_problems=2, models=("m1",))
    do_assign(study, owner, [member, owner], 1, stratify=False)
    assert Assignment.objects.count() == 2
    page = sign_in(browser, live_server.url, "olivia", "pw-olivia")
    page.goto(f"{live_server.url}/studies/{study.pk}/queue/")
    asked = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.get_by_role("button", name="Remove all assignments").click()
    expect(page.get_by_role("button", name="Remove all assignments")).to_be_visible()
    assert asked and "Remove every assignment" in asked[0]
    assert Assignment.objects.count() == 2  # "no" sent nothing
    page.once("dialog", lambda dialog: dialog.accept())
    with page.expect_navigation():
        page.get_by_role("button", name="Remove all assignments").click()
    assert Assignment.objects.count() == 0


def test_enter_leaves_the_rating_box_and_keeps_the_value(live_server, browser, member, study, do_import):  # noqa: F811
    seed(do_import, n_problems=1, models=("m1",))
    trace = Trace.objects.get()
    page = sign_in(browser, live_server.url, "alice", "pw-alice")
    page.goto(f"{live_server.url}/traces/{trace.pk}/")
    page.keyboard.press("r")
    rating = page.locator("#rating")
    expect(rating).to_be_focused()
    page.keyboard.type("7")
    page.keyboard.press("Enter")
    expect(rating).not_to_be_focused()
    expect(rating).to_have_value("7")
    assert page.url == f"{live_server.url}/traces/{trace.pk}/"  # not submitted by the Enter
    page.keyboard.press("v")  # the page's keys work again
    expect(page.locator("li.step").first).to_have_class(__import__("re").compile("is-valid"))


def test_a_refused_adjudication_keeps_its_choice_and_the_focus(live_server, browser, member, annotator2,  # noqa: F811
                                                                adjudicator, study, do_import):
    seed(do_import, n_problems=1, models=("m1",))
    trace = Trace.objects.get()
    human_label(trace, 1, member, "valid")
    human_label(trace, 1, annotator2, "invalid")
    page = sign_in(browser, live_server.url, "adam", "pw-adam")
    page.goto(f"{live_server.url}/studies/{study.pk}/adjudication/")
    # htmx binds what it swaps in when it settles; the browser focuses the swapped-in [autofocus] reason box
    # before that. A settle delay far longer than the typing below opens that gap every time: the resubmit must
    # still go through htmx (js/swap.js), not reload the page (CI's flaky failure, made deterministic).
    page.evaluate("() => { htmx.config.defaultSettleDelay = 3000; }")
    page.keyboard.press("i")  # choose invalid; the focus moves to the reason, left empty
    page.keyboard.press("Control+Enter")
    item = page.locator("article.adj-item").first
    expect(item.locator(".alert.error")).to_contain_text("reason")
    expect(item.locator('input[name="verdict"][value="invalid"]')).to_be_checked()
    expect(item.locator('input[name="reason"]')).to_be_focused()
    page.keyboard.type("bob is right")
    page.keyboard.press("Control+Enter")
    expect(page.locator("article.adj-item").first).to_contain_text("Final verdict saved")
    assert StepLabel.objects.get(kind="adjudication").verdict == "invalid"


def test_long_text_stays_inside_its_box(live_server, browser, owner, study, do_import):  # noqa: F811
    statement = "x" * 2_000_000  # 2 MB without a single space
    do_import(jsonl({"kind": "problem", "problem_id": "huge", "statement": statement, "gold_answer": "1"},
                    {"kind": "trace", "problem_id": "huge", "model": "m", "steps": ["9" * 400 + " = 1"], "answer": "1"}))
    problem = Problem.objects.get(problem_id="huge")
    page = sign_in(browser, live_server.url, "olivia", "pw-olivia", width=1280, height=800)
    for url in (f"/problems/{problem.pk}/", f"/traces/{Trace.objects.get().pk}/", f"/studies/{study.pk}/problems/"):
        page.goto(f"{live_server.url}{url}")
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 1280, url
    # A 400-digit check result in the skeleton editor stays inside the editor.
    page.goto(f"{live_server.url}/problems/{problem.pk}/")
    check = page.locator("#sk-rows > li.sk-row").first.locator("input[name^=check-]")
    check.fill("9" * 400 + "+1=1")
    result = page.locator("#sk-rows > li.sk-row").first.locator(".check-result")
    expect(result).to_contain_text("not 1")
    row = page.locator("#sk-rows > li.sk-row").first.bounding_box()
    box = result.bounding_box()
    assert box and row and box["x"] + box["width"] <= row["x"] + row["width"] + 1
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 1280
