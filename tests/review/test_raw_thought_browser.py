"""The raw output view of a reasoning model's trace (issue 31): its separate reasoning field is shown with the
thought steps' boundaries marked (each step numbered as in the list), beside the answer's raw output."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotation.models import Step, Trace
from tests.conftest import jsonl
from tests.review.browser import browser, sign_in  # noqa: F401 - fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_reasoning_field_shows_its_thought_step_boundaries(live_server, browser, owner, study, do_import):  # noqa: F811
    thought = "First I add 2 and 3.\n\nThat gives 5.\n\nWait, let me check: 5."
    report = do_import(jsonl({"kind": "problem", "problem_id": "p", "statement": "2 + 3?", "gold_answer": "5"},
                             {"kind": "trace", "problem_id": "p", "model": "r1", "trace_id": "t",
                              "raw": f"<think>{thought}</think>The answer is 5.", "answer": "5"}))
    assert report.committed, report.rejected
    trace = Trace.objects.get()
    indices = list(Step.objects.filter(trace=trace, channel=Step.Channel.THOUGHT).order_by("index")
                   .values_list("index", flat=True))
    assert len(indices) == 3
    page = sign_in(browser, live_server.url, "olivia", "pw-olivia")
    page.goto(f"{live_server.url}/traces/{trace.pk}/")
    raw = page.locator("details#thought-raw")
    raw.locator("summary").click()
    marks = raw.locator("mark.seg")
    expect(marks).to_have_count(3)
    assert [int(marks.nth(i).get_attribute("data-step")) for i in range(3)] == indices
    expect(marks.nth(1)).to_contain_text("That gives 5.")
    expect(page.locator("details.raw", has_text="Raw output")).to_have_count(1)
