"""The analytics pages in a real browser: every chart is drawn by plotly from
our static files, no request leaves the server, changing a filter redraws
the charts through htmx, and nothing is logged to the console."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from scoring import score_jobs
from tests.review.browser import browser, sign_in  # noqa: F401 - fixture
from tests.scoring.conftest import records

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_charts_draw_and_follow_the_filters(live_server, browser, owner, study, do_import):  # noqa: F811
    assert do_import(records()).committed
    score_jobs.recompute(study, warm=False)
    page = sign_in(browser, live_server.url, "olivia", "pw-olivia")
    problems, outside = [], []
    page.on("console", lambda msg: problems.append(msg.text) if msg.type in ("error", "warning") else None)
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.on("request", lambda req: outside.append(req.url) if not req.url.startswith(live_server.url) else None)

    # hazard: 4 charts; its thought-error chart is one line on a study without thoughts.
    for path, charts in [("", 1), ("hazard/", 4), ("distributions/", 3), ("ablations/", 1)]:
        page.goto(f"{live_server.url}/studies/{study.pk}/analytics/{path}")
        expect(page.locator("[data-chart] .main-svg").first).to_be_visible()
        assert page.locator("[data-chart][data-drawn='1']").count() == charts, path

    page.goto(f"{live_server.url}/studies/{study.pk}/analytics/hazard/")
    page.select_option("select[name=model]", "m1")
    page.wait_for_url("**model=m1**")
    expect(page.locator("#analytics-body details summary").first).to_contain_text("m1")
    expect(page.locator("[data-chart='chart-hazard'] .main-svg").first).to_be_visible()
    # one model: one table of the hazard by step and one by relative position
    assert page.locator("#analytics-body details").count() == 2
    assert not problems, problems
    assert not outside, outside
