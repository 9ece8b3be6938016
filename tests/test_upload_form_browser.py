"""The upload form shows only the chosen format's own fields (issue 31: every format's fields at once), as a
progressive enhancement: the HTML holds every field (without JavaScript all show), the script hides the others."""

from __future__ import annotations

import pytest
from django.test import Client
from playwright.sync_api import expect

from annotation.forms import ImportForm
from tests.review.browser import browser, sign_in  # noqa: F401 - fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

OWN = {name: formats for name, formats in ImportForm.FORMAT_FIELDS.items()}


def test_the_upload_form_shows_the_chosen_formats_fields(live_server, browser, owner, study):  # noqa: F811
    web = Client()
    web.force_login(owner)
    html = web.get(f"/studies/{study.pk}/").content.decode()
    for name in OWN:
        assert f'name="{name}"' in html  # in the page for a browser without JavaScript
    page = sign_in(browser, live_server.url, "olivia", "pw-olivia")
    page.goto(f"{live_server.url}/studies/{study.pk}/")
    form = page.locator("form[data-format-fields]")
    offered = form.locator("select[name=format] option").evaluate_all("options => options.map(o => o.value)")
    for fmt in ["reasonaudit", *sorted({f for formats in OWN.values() for f in formats if f in offered})]:
        form.locator("select[name=format]").select_option(fmt)
        for name, formats in OWN.items():
            field = form.locator(f"[name={name}]")
            if fmt in formats:
                expect(field).to_be_visible()
            else:
                expect(field).to_be_hidden()
    assert {"gsm-symbolic", "abstraction-outputs"} <= set(offered)
    labels = form.locator("select[name=format] option").evaluate_all("options => options.map(o => o.textContent)")
    assert not [text for text, value in zip(labels, offered, strict=True) if text == value], labels  # words, not ids
