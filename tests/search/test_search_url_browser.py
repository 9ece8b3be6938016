"""The search page's pushed URL names only the filters given (issue 31: 29 empty parameters in every pushed
search URL), and a search that finds nothing offers no "Save these 0 traces"."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest
from playwright.sync_api import expect

from tests.review.browser import browser, sign_in  # noqa: F401 - fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_pushed_url_holds_only_the_filters_given(live_server, browser, owner, study, traces):  # noqa: F811
    page = sign_in(browser, live_server.url, "olivia", "pw-olivia")
    page.goto(f"{live_server.url}/studies/{study.pk}/search/")
    page.fill("input[name=q]", "wait")
    page.keyboard.press("Enter")
    page.wait_for_url("**/search/?q=wait*")
    expect(page.locator("ol.search-results > li").first).to_be_visible()
    params = parse_qsl(urlsplit(page.url).query, keep_blank_values=True)
    assert params == [("q", "wait")], page.url
    expect(page.locator(".save-cohort")).to_contain_text("Save these")
    hidden = page.locator(".save-cohort input[type=hidden]")
    assert {hidden.nth(i).get_attribute("name") for i in range(hidden.count())} <= {"q", "csrfmiddlewaretoken"}

    page.fill("input[name=q]", "zebra-nowhere")
    page.keyboard.press("Enter")
    page.wait_for_url("**/search/?q=zebra-nowhere")
    expect(page.locator("#results")).to_be_visible()
    expect(page.locator(".save-cohort")).to_have_count(0)
    assert "Save these 0" not in page.content()
