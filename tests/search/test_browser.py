"""Search in a real browser (Debian's chromium): type a query, read the highlighted matches, take the
results as a file from the link under them, save them as a cohort and download the cohorts table."""

from __future__ import annotations

import csv
import io
import json

import pytest
from playwright.sync_api import expect

from search.models import Cohort
from tests.review.browser import browser, sign_in  # noqa: F401 - fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _csv(download) -> list[dict[str, str]]:
    with open(download.path(), encoding="utf-8") as fh:
        return list(csv.DictReader(io.StringIO(fh.read())))


def test_search_download_and_save_a_cohort(live_server, browser, owner, study, traces):  # noqa: F811
    page = sign_in(browser, live_server.url, "olivia", "pw-olivia")
    page.goto(f"{live_server.url}/studies/{study.pk}/search/")
    page.fill("input[name=q]", '"let me check" or wait')
    page.keyboard.press("Enter")
    results = page.locator("ol.search-results > li")
    expect(results).to_have_count(3)
    expect(page.locator("ol.search-results mark").first).to_be_visible()
    # The file under the results holds every matching trace, one row each, as the page lists them.
    with page.expect_download() as info:
        page.locator(".exports a", has_text="CSV").first.click()
    rows = _csv(info.value)
    assert [r["trace_id"] for r in rows] == ["t1", "t3", "t4"]
    assert [r["trace_id"] for r in rows] == [results.nth(i).locator("a").first.inner_text() for i in range(3)]
    href = page.locator(".exports a", has_text="manifest").first.get_attribute("href")
    manifest = page.request.get(live_server.url + href)
    assert json.loads(manifest.body())["filters"] == {"query": 'q=%22let+me+check%22+or+wait'}

    # Saved as a cohort, then the cohorts page's own table as a file.
    page.fill("input[name=name]", "checks")
    page.click("button:has-text('Save cohort')")
    expect(page.locator("h1")).to_contain_text("Cohort checks")
    assert Cohort.objects.get(name="checks").n_traces == 3
    page.goto(f"{live_server.url}/studies/{study.pk}/cohorts/")
    with page.expect_download() as info:
        page.locator(".exports a", has_text="CSV").click()
    assert [(r["name"], r["n_traces"]) for r in _csv(info.value)] == [("checks", "3")]
