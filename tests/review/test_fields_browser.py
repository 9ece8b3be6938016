"""Issue 31's leftovers on the review and problem pages, as a person sees them in a real browser: the review page
keeps its header in view on load (also when the URL names a step), and a field with a long documented limit says
how much of it is used (the browser stops typing at ``maxlength`` silently)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotation.models import Trace
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
