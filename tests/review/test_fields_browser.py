"""Issue 31's leftovers on the review and problem pages, as a person sees them in a real browser: the review page
keeps its header in view on load (also when the URL names a step), and a field with a long documented limit says
how much of it is used (the browser stops typing at ``maxlength`` silently); the sign-in form is one column."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotation.models import Problem, Trace
from annotation.review.base import NOTE_MAX
from annotation.skeletons import TEXT_MAX
from tests.review.browser import browser, sign_in  # noqa: F401 - fixture
from tests.review.conftest import seed

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _header_in_view(page) -> bool:
    box = page.locator("main h1").first.bounding_box()
    return box is not None and box["y"] >= 0


@pytest.mark.parametrize("fragment", ["", "#s1", "#s3"])
def test_the_review_page_keeps_its_header_in_view_on_load(live_server, browser, member, study, do_import,  # noqa: F811
                                                          fragment):
    seed(do_import, n_problems=1, models=("m1",), n_steps=3)
    trace = Trace.objects.get(trace_id="p0/m1")
    page = sign_in(browser, live_server.url, "alice", "pw-alice", width=1280, height=800)
    page.goto(f"{live_server.url}/traces/{trace.pk}/{fragment}")
    step = fragment[2:] or "1"
    expect(page.locator("li.step.current")).to_have_attribute("data-step", step)
    page.wait_for_load_state("load")  # the browser's own jump to a fragment comes by then; two frames to settle
    page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    assert page.evaluate("window.scrollY") == 0 and _header_in_view(page)
    expect(page.locator(f"#s{step}")).to_be_in_viewport()


def test_a_review_note_counts_its_characters(live_server, browser, member, study, do_import):  # noqa: F811
    seed(do_import, n_problems=1, models=("m1",))
    trace = Trace.objects.get(trace_id="p0/m1")
    page = sign_in(browser, live_server.url, "alice", "pw-alice")
    page.goto(f"{live_server.url}/traces/{trace.pk}/")
    note = page.locator("#s1 input.note")
    expect(note).to_have_attribute("maxlength", str(NOTE_MAX))
    note.fill("a short note")
    expect(page.locator("#s1 .char-count")).to_have_text(f"12 / {NOTE_MAX:,} characters")
    assert page.evaluate("document.querySelector('#s1 input.note').getBoundingClientRect().width") >= 250


def test_a_skeleton_assertion_counts_its_characters_and_marks_the_limit(live_server, browser, member,  # noqa: F811
                                                                         study, do_import):
    seed(do_import, n_problems=1, models=("m1",))
    problem = Problem.objects.get(problem_id="p0")
    page = sign_in(browser, live_server.url, "alice", "pw-alice")
    page.goto(f"{live_server.url}/problems/{problem.pk}/")
    text = page.locator('textarea[name="text-1"]')
    expect(text).to_have_attribute("maxlength", str(TEXT_MAX))
    counter = page.locator('li.sk-row[data-j="1"] .char-count')
    expect(counter).to_be_visible()  # the row holds text already: its count shows without a focus
    text.fill("x" * (TEXT_MAX + 50))  # the browser keeps the limit
    expect(counter).to_have_text(f"{TEXT_MAX:,} / {TEXT_MAX:,} characters")
    expect(counter).to_have_class("char-count muted full")


@pytest.mark.parametrize("width", [1280, 768, 375])
def test_the_sign_in_form_lines_up(live_server, browser, width):  # noqa: F811
    page = browser.new_page(viewport={"width": width, "height": 800})
    page.goto(f"{live_server.url}/login/")
    boxes = [page.locator(s).bounding_box() for s in ("input[name=username]", "input[name=password]",
                                                      "button[type=submit]")]
    card = page.locator("section.card").bounding_box()
    lefts, widths = {round(b["x"]) for b in boxes}, {round(b["width"]) for b in boxes}
    assert len(lefts) == 1 and len(widths) == 1  # one column: the fields and the button share edges
    assert card["x"] <= boxes[0]["x"] and boxes[0]["x"] + boxes[0]["width"] <= card["x"] + card["width"]
    # each label's words sit above its field, not beside it
    for name in ("username", "password"):
        label = page.locator(f"label:has(input[name={name}])").bounding_box()
        field = page.locator(f"input[name={name}]").bounding_box()
        assert field["y"] > label["y"] + 5
