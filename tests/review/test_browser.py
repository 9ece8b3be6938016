"""The review workflow in a real browser: sign in, author a skeleton, label a
trace by keyboard, meet a version conflict in two pages, adjudicate."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from annotation.models import LabelHistory, Problem, Skeleton, StepLabel, Trace, TraceReview
from tests.review.browser import browser, sign_in  # noqa: F401 - fixture
from tests.review.conftest import human_label, judge, judge_label, seed

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_sign_in_and_author_a_skeleton(live_server, browser, owner, study, do_import):  # noqa: F811
    seed(do_import, n_problems=1, models=("m1",))
    problem = Problem.objects.get(problem_id="p0")
    page = sign_in(browser, live_server.url, "olivia", "pw-olivia")
    expect(page.get_by_role("link", name="Study A")).to_be_visible()
    page.goto(f"{live_server.url}/problems/{problem.pk}/")

    rows = page.locator("#sk-rows > li.sk-row")
    expect(rows).to_have_count(2)  # the two steps of v1 (the blank spare row is for forms without JS)
    # A wrong check is explained live.
    check = rows.nth(0).locator("input[name^=check-]")
    check.fill("0+2=3")
    expect(rows.nth(0).locator(".check-result")).to_contain_text("0+2 is 2, not 3")
    check.fill("0+2=2")
    expect(rows.nth(0).locator(".check-result")).to_contain_text("looks for 2")

    # Add an assertion, then move it to the top with the keyboard.
    page.click("#sk-add")
    name = page.locator("#sk-rows > li.sk-row").last.locator("textarea").get_attribute("name")
    new = page.locator(f"textarea[name={name}]")
    expect(new).to_be_focused()
    new.fill("Ann starts with $0$ apples")
    for _ in range(3):
        page.keyboard.press("Alt+ArrowUp")
    first = page.locator("#sk-rows > li.sk-row").first.locator("textarea")
    expect(first).to_have_value("Ann starts with $0$ apples")
    expect(page.locator("#sk-count")).to_contain_text("3 assertions")
    # Remove the old second assertion by its button.
    page.locator("#sk-rows > li.sk-row").nth(2).locator(".sk-del").click()
    expect(page.locator("#sk-count")).to_contain_text("2 assertions")
    page.fill("input[name=note]", "start from the apples she has")
    page.click("button[value=approve]")

    expect(page.locator(".messages")).to_contain_text("Saved version 2 and approved it")
    problem.refresh_from_db()
    sk = Skeleton.objects.get(problem=problem, version=2)
    assert problem.approved_skeleton_id == sk.pk and problem.l_gold == 2
    assert [s.text for s in sk.steps.order_by("position")] == ["Ann starts with $0$ apples", "She buys 2 more: $0+2=2$"]
    assert sk.steps.get(position=2).check_expr == "0+2=2" and sk.created_by == owner
    # History with a diff; the math is typeset by KaTeX from our static files.
    expect(page.locator("#history .version").first).to_contain_text("v2")
    expect(page.locator("#history .version.current .diff li.add").first).to_contain_text("Ann starts with")
    expect(page.locator(".sk-preview .katex").first).to_be_visible()


def test_label_a_trace_by_keyboard_and_blind_reveal(live_server, browser, member, study, do_import):  # noqa: F811
    seed(do_import, n_problems=2, models=("m1",))
    config = judge(study)
    trace = Trace.objects.get(trace_id="p0/m1")
    judge_label(trace, 2, config, "invalid", reason="JUDGE-REASON-XYZ")
    page = sign_in(browser, live_server.url, "alice", "pw-alice")
    page.goto(f"{live_server.url}/traces/{trace.pk}/")
    expect(page.locator("#blind-state")).to_contain_text("blind")
    assert "JUDGE-REASON-XYZ" not in page.content()

    page.keyboard.press("?")
    expect(page.locator("#help")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#help")).to_be_hidden()

    # Step 1: valid, establishes skeleton steps 1 and 2; then a note.
    expect(page.locator("li.step.current")).to_have_attribute("data-step", "1")
    page.keyboard.press("1")
    page.keyboard.press("2")
    page.keyboard.press("v")  # labels and moves on
    expect(page.locator("#coverage-count")).to_have_text("2")
    page.keyboard.press("i")
    expect(page.locator("#first-error")).to_have_text("step 2")
    expect(page.locator("li.step.first-error")).to_have_attribute("data-step", "2")
    page.keyboard.press("k")
    page.keyboard.press("c")
    page.keyboard.type("wrong sum")
    page.keyboard.press("Enter")
    page.keyboard.press("j")
    page.keyboard.press("n")
    expect(page.locator("#labelled-count")).to_have_text("3")
    page.keyboard.press("s")
    # Completing the trace reloads the page with the others' labels beside mine.
    expect(page.locator("#blind-state")).to_contain_text("revealed")
    expect(page.locator("#s2 ul.others")).to_contain_text("JUDGE-REASON-XYZ")

    review = TraceReview.objects.get(trace=trace, annotator=member)
    assert review.version == 1 and review.complete
    labels = {lab.step.index: lab for lab in StepLabel.objects.filter(annotator=member).select_related("step")}
    assert (labels[1].verdict, labels[1].skeleton_refs) == ("valid", [1, 2])
    assert (labels[2].verdict, labels[2].reason) == ("invalid", "wrong sum")
    assert labels[3].verdict == "neutral"
    assert LabelHistory.objects.filter(actor=member, via="web").count() == 3

    # Shift+S saves and opens the next trace of my queue.
    other = Trace.objects.get(trace_id="p1/m1")
    page.keyboard.press("S")
    page.wait_for_url(re.compile(rf"/traces/{other.pk}/"))
    expect(page.locator("h1")).to_contain_text("p1")


def _in_view(page, selector: str) -> None:
    """The element is wholly inside the window, where a keyboard-only reviewer sees it after "s"."""
    box = page.locator(selector).bounding_box()
    size = page.viewport_size
    assert box and size and box["y"] >= 0 and box["x"] >= 0, box
    assert box["y"] + box["height"] <= size["height"] and box["x"] + box["width"] <= size["width"], (box, size)


def test_a_version_conflict_between_two_pages(live_server, browser, member, study, do_import):  # noqa: F811
    seed(do_import, n_problems=1, models=("m1",))
    trace = Trace.objects.get()
    page_a = sign_in(browser, live_server.url, "alice", "pw-alice", width=1280, height=800)
    page_b = page_a.context.new_page()
    for page in (page_a, page_b):
        page.goto(f"{live_server.url}/traces/{trace.pk}/")
    page_a.keyboard.press("v")
    page_a.keyboard.press("s")
    expect(page_a.locator("#save-status")).to_contain_text("Saved (version 1)")
    _in_view(page_a, "#save-status .alert")  # at 1280x800 it once sat below the fold of the sidebar

    page_b.keyboard.press("i")
    page_b.keyboard.press("s")
    status = page_b.locator("#save-status .alert.conflict")
    expect(status).to_contain_text("changed in another browser tab or window")
    expect(status).to_contain_text("Nothing was saved")
    _in_view(page_b, "#save-status .alert.conflict")
    assert StepLabel.objects.get(annotator=member).verdict == "valid"

    # Reloading picks up version 1; the next save goes through.
    with page_b.expect_navigation():
        page_b.click("#save-status a")
    # Keys go to the page only once its script has bound them (review.js marks <html class="js">); on a
    # loaded CI machine they could otherwise arrive first and be lost.
    page_b.wait_for_load_state("load")
    expect(page_b.locator("html.js")).to_have_count(1)
    expect(page_b.locator("#save-status .alert.conflict")).to_have_count(0)
    page_b.keyboard.press("g")  # the reload starts at the first unlabelled step
    page_b.keyboard.press("i")
    page_b.keyboard.press("s")
    expect(page_b.locator("#save-status")).to_contain_text("Saved (version 2)")
    assert StepLabel.objects.get(annotator=member).verdict == "invalid"


def test_adjudicate_a_disagreement(live_server, browser, member, annotator2, adjudicator, study, do_import):  # noqa: F811
    seed(do_import, n_problems=1, models=("m1",))
    trace = Trace.objects.get()
    human_label(trace, 1, member, "valid", note="looks right")
    human_label(trace, 1, annotator2, "invalid", note="BOB-NOTE")
    page = sign_in(browser, live_server.url, "adam", "pw-adam")
    page.goto(f"{live_server.url}/studies/{study.pk}/adjudication/")
    item = page.locator("article.adj-item").first
    expect(item).to_contain_text("BOB-NOTE")
    expect(item).to_contain_text("alice")
    page.keyboard.press("i")  # choose, focus moves to the reason
    page.keyboard.type("the sum is off by one")
    page.keyboard.press("Control+Enter")
    expect(page.locator("article.adj-item").first).to_contain_text("Final verdict saved")
    final = StepLabel.objects.get(kind="adjudication")
    assert (final.verdict, final.reason, final.annotator) == ("invalid", "the sum is off by one", adjudicator)
    assert LabelHistory.objects.filter(kind="adjudication", via="web").count() == 1
    # The human labels stay.
    assert StepLabel.objects.filter(kind="human").count() == 2


def test_a_long_trace_stays_responsive(live_server, browser, member, study, do_import):  # noqa: F811
    from tests.conftest import jsonl

    steps = [f"Step {i}: {i} boxes of {i + 3} apples make {i} * {i + 3} = {i * (i + 3)} apples, and with the "
             f"{2 * i} loose ones {i * (i + 3)} + {2 * i} = {i * (i + 3) + 2 * i} in all; we carry this on." for i in range(240)]
    do_import(jsonl({"kind": "problem", "problem_id": "long", "statement": "s", "gold_answer": "1",
                     "skeleton": [{"text": f"fact {k}"} for k in range(10)]},
                    {"kind": "trace", "problem_id": "long", "model": "m", "steps": steps, "answer": "1"}))
    trace = Trace.objects.get()
    page = sign_in(browser, live_server.url, "alice", "pw-alice")
    page.goto(f"{live_server.url}/traces/{trace.pk}/")
    # 240 labels and 240 skeleton toggles by key, timed inside the page.
    elapsed = page.evaluate("""() => {
        const t0 = performance.now();
        for (let i = 0; i < 240; i++) {
            document.dispatchEvent(new KeyboardEvent("keydown", {key: String(1 + i % 9), bubbles: true}));
            document.dispatchEvent(new KeyboardEvent("keydown", {key: i % 7 ? "v" : "i", bubbles: true}));
        }
        return performance.now() - t0;
    }""")
    # Speed is measured, not asserted (a busy 2-core CI machine is no stopwatch): the figure goes to the log.
    print(f"{elapsed:.0f} ms for 480 key presses")
    expect(page.locator("#labelled-count")).to_have_text("240")
    expect(page.locator("#first-error")).to_have_text("step 1")
    page.keyboard.press("s")
    expect(page.locator("#blind-state")).to_contain_text("revealed")  # complete: reloaded
    assert StepLabel.objects.filter(annotator=member).count() == 240
