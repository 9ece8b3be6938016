"""The scanner's validation sample as a person uses it (issue 31): each sampled trace is readable in place, the
answers given can be reviewed and changed, and an F1 from two traces gets no "[1.000, 1.000]" interval but a note
that the sample is too small."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from search import scanners
from search.core.validation import MIN_F1_INTERVAL_N, validate
from search.models import ScanAnswer
from tests.review.browser import browser, sign_in  # noqa: F401 - fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_two_agreeing_traces_give_no_f1_interval():
    v = validate([(True, True), (True, True)])
    assert v.f1 == 1.0 and v.f1_ci is None
    assert v.f1_ci_note == f"no interval: 2 traces, at least {MIN_F1_INTERVAL_N} needed"
    enough = validate([(True, True)] * 6 + [(False, False)] * 3 + [(True, False)])
    assert enough.f1_ci is not None and enough.f1_ci_note == ""


def test_the_sample_is_read_in_place_and_answers_are_changed(live_server, browser, scanner, owner, traces, study):  # noqa: F811
    trace = next(iter(traces.values()))
    scanners.do_answer(scanner, trace, None, True)  # in the sample (the command line's answer)
    page = sign_in(browser, live_server.url, "olivia", "pw-olivia")
    page.goto(f"{live_server.url}{scanner.get_absolute_url()}")
    item = page.locator("ul.to-answer li", has_text=trace.trace_id).first
    item.locator("summary", has_text="Read the trace here").click()
    expect(item.locator("pre.raw-text").first).to_contain_text(trace.raw[:30] or trace.answer[:30])
    item.get_by_role("button", name="yes").click()
    answered = page.locator("details.answered")
    expect(answered).to_be_visible()
    page.locator("details.answered > summary").click()
    row = answered.locator("li", has_text=trace.trace_id)
    expect(row).to_contain_text("your answer: yes")
    row.get_by_role("button", name="change to no").click()
    expect(page.locator("details.answered li", has_text=trace.trace_id)).to_contain_text("your answer: no")
    assert ScanAnswer.objects.get(label__trace=trace, annotator=owner).answer is False
