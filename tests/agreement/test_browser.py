"""The agreement and calibration pages in Debian's chromium: every chart is
drawn by plotly from our static files, and htmx swaps the body when a
filter changes."""

from __future__ import annotations

import os

import pytest

from agreement import calibration
from tests.review.browser import browser, sign_in  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_pages_draw_every_chart(browser, live_server, worked, owner, tmp_path):  # noqa: F811
    cal = calibration.do_create_calibration(worked, name="pilot", reference="human", candidates=["judge:gpt"], size=2)
    page = sign_in(browser, live_server.url, "olivia", "pw-olivia")
    page.goto(f"{live_server.url}/studies/{worked.pk}/agreement/?candidate=judge:gpt")
    page.wait_for_selector("[data-chart='chart-reliability'] .main-svg")
    assert page.locator("[data-chart] .main-svg").count() >= 2
    shots = os.environ.get("AGREEMENT_SCREENSHOTS") or str(tmp_path)
    page.screenshot(path=f"{shots}/agreement.png", full_page=True)
    page.select_option("select[name=reference]", "adjudicated")
    page.wait_for_url("**reference=adjudicated**")
    page.wait_for_selector("[data-chart='chart-position'] .main-svg")
    assert "judge:gpt against adjudicated" in page.inner_text(".provenance")
    page.goto(f"{live_server.url}/studies/{worked.pk}/calibration/{cal.pk}/?tune=judge:gpt&omegas=0,5")
    page.wait_for_selector("[data-chart='chart-tuning'] .main-svg")
    page.screenshot(path=f"{shots}/calibration.png", full_page=True)
    page.goto(f"{live_server.url}/studies/{worked.pk}/agreement/annotators/")
    page.wait_for_selector("#analytics-body")
    page.screenshot(path=f"{shots}/annotators.png", full_page=True)
