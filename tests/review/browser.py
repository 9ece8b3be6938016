"""Playwright helpers for the browser tests: Debian's chromium, never a
downloaded browser. Without /usr/bin/chromium the tests skip (fail under CI=true)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connections

from tests.integration import require

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@pytest.fixture
def browser(monkeypatch):
    require(CHROMIUM.exists(), f"{CHROMIUM} is missing (Debian's chromium package)")
    # Playwright's sync API runs an event loop in this thread; Django's ORM
    # calls made by the test itself are still synchronous and safe.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield b
        finally:
            b.close()
            # The test's own queries ran while Playwright's loop was up, on a
            # connection of that context: close it, or PostgreSQL refuses to
            # drop the test database at the end of the session.
            connections.close_all()


def sign_in(browser, base_url: str, username: str, password: str, *, width: int = 1400, height: int = 900):
    context = browser.new_context(viewport={"width": width, "height": height})
    context.set_default_timeout(10_000)
    page = context.new_page()
    page.goto(f"{base_url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/")
    return page
