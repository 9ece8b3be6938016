"""The study's runs page in a real browser (Debian's chromium through Playwright): an owner starts runs of
several kinds by mouse and keyboard, against the tests' fake OpenAI-compatible server as the subject model,
sees a bad value refused once beside its field, and finds each run in the table with its status.

The first test runs in CI: a generation, a judge and an anytime run, and a field error. The
second starts every kind the page offers and saves docs/screenshots/runs_page_<kind>.png (and
runs_page_field_error.png); it runs on purpose:

    REASONAUDIT_SCREENSHOTS=1 .venv/bin/python -m pytest -q tests/runs/test_runs_browser.py -p no:cacheprovider

Celery is eager in the tests, so a run's work is done when its start request commits; the job page the
form leads to shows the finished job.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import Page, expect

from abstraction import services as abstraction_services
from judges import services as judge_services
from search import scanners
from subjects import services as subject_services
from subjects.models import SubjectModel
from tests.fidelity.conftest import problem_records
from tests.review.browser import browser, sign_in  # noqa: F401 - fixture
from tests.runs.fake_openai import FakeOpenAI
from tests.runs.fake_thinking import FOLLOW, FakeThinking
from tests.runs.test_continuation import SMOLLM2
from tests.search.fake_scanner import FakeScanner
from tests.subjects.conftest import generate

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path(settings.BASE_DIR) / "docs" / "screenshots"
SCREENSHOTS = bool(os.environ.get("REASONAUDIT_SCREENSHOTS"))


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    # Generates answers (chat) and continues raw prompts (/v1/completions), as the diagnostics need.
    fake = FakeOpenAI(generation=True, continue_completions=True).start()
    yield fake
    fake.stop()


@pytest.fixture
def lab(study, do_import, server, settings) -> SubjectModel:
    """Three problems with skeletons (and one without numbers), the mechanistic judge, and subject model
    "tiny" on the fake server, probed (the probe is no run: the subject model's page starts it)."""
    settings.RUN_RETRY_BASE_SECONDS = 0.01
    settings.RUN_RETRY_MAX_SECONDS = 0.05
    report = do_import(problem_records(3))
    assert report.committed, report.rejected
    judge_services.ensure_mechanistic(study)
    subject, _ = subject_services.do_save_subject(study, {
        "name": "tiny", "model": "tiny-model", "base_url": server.url, "concurrency": 2, "max_retries": 1,
        "timeout_seconds": 5.0, "seed": 0, "chat_template": SMOLLM2})
    subject_services.do_probe_subject_model(subject)
    return subject


def shot(page: Page, name: str) -> None:
    if SCREENSHOTS:
        path = SHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size < 400_000, f"{path} is {path.stat().st_size} bytes"


def choose_kind(page: Page, base: str, study_id: int, kind: str) -> None:
    """Open the runs page and pick the kind from its menu. htmx swaps the kind's form in: wait for that
    answer, or what is typed next may go into the form it replaces (the page opens on the first kind, so
    the hidden ``kind`` alone cannot tell the swap has happened)."""
    if f"/studies/{study_id}/runs/" not in page.url:
        page.goto(f"{base}/studies/{study_id}/runs/")
    with page.expect_response(lambda r: "part=start" in r.url and f"kind={kind}" in r.url):
        page.select_option("#run-kind", kind)
    expect(page.locator('#run-start input[name="kind"]')).to_have_value(kind)
    page.wait_for_function("() => !document.querySelector('#run-start.htmx-settling, #run-start .htmx-settling')")


def fill(page: Page, values: dict[str, str | bool]) -> None:
    """Type or pick each parameter as a person would: menus by their option, boxes by a click."""
    for name, value in values.items():
        field = page.locator(f"#run-{name}")
        tag = field.evaluate("e => e.tagName.toLowerCase() + ':' + (e.type || '')")
        if tag.endswith(":checkbox"):
            if bool(value) != field.is_checked():
                field.click()
        elif tag.startswith("select"):
            field.select_option(str(value))
        else:
            field.click()
            field.press("Control+a")
            field.type(str(value))


def start(page: Page, base: str, study_id: int, kind: str, values: dict[str, str | bool]) -> int:
    """Start a run of ``kind`` from the page; returns its job's id (the form leads to the job page)."""
    choose_kind(page, base, study_id, kind)
    fill(page, values)
    page.locator("#run-start button.primary").click()
    page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
    return int(page.url.rstrip("/").rsplit("/", 1)[1])


def row_of(page: Page, job_id: int):
    return page.locator("#run-table tbody tr").filter(has=page.locator(f'a[href="/jobs/{job_id}/"]'))


def expect_listed(page: Page, base: str, study_id: int, job_id: int, kind_text: str, status: str = "succeeded"):
    page.goto(f"{base}/studies/{study_id}/runs/")
    row = row_of(page, job_id)
    expect(row).to_have_count(1)
    expect(row.locator("td").nth(1)).to_have_text(kind_text)
    expect(row.locator(".status")).to_have_text(status)
    return row


def bad_value_is_shown_once_beside_its_field(page: Page, base: str, study_id: int) -> None:
    choose_kind(page, base, study_id, "generation")
    fill(page, {"problems": "first:x"})
    page.locator("#run-start button.primary").click()
    error = page.locator("#run-problems-error")
    expect(error).to_have_text(re.compile(r"^Problems: .*first:N needs a positive N"))
    expect(page.locator('#run-start [role="alert"]')).to_have_count(1)
    expect(page.locator("#run-problems")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#run-problems")).to_have_value("first:x")  # what was typed stays, to be mended
    shot(page, "runs_page_field_error")


def test_an_owner_starts_runs_of_several_kinds_and_sees_them_listed(live_server, browser, owner, study,  # noqa: F811
                                                                     lab):
    base = live_server.url
    page = sign_in(browser, base, "olivia", "pw-olivia", width=1400, height=900)
    # A start request does the run's work before it answers (eager Celery): allow for a loaded machine.
    page.set_default_timeout(30_000)
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))

    bad_value_is_shown_once_beside_its_field(page, base, study.pk)

    generation = start(page, base, study.pk, "generation", {"model": "tiny", "problems": "first:3", "samples": "1"})
    judge = start(page, base, study.pk, "judge", {"judge": "mechanistic", "traces": "all"})
    anytime = start(page, base, study.pk, "anytime", {"model": "tiny", "budgets": "tokens:4,16,full", "limit": "3"})

    expect_listed(page, base, study.pk, generation, "Generation")
    expect_listed(page, base, study.pk, judge, "Judge")
    row = expect_listed(page, base, study.pk, anytime, "Anytime profile")
    # Every forced answer done: 3 traces x the budgets below the full trace (the full one is its own answer).
    expect(row).to_contain_text(re.compile(r"\b(\d+) of \1 continuations"))
    assert not problems, problems


@pytest.mark.skipif(not SCREENSHOTS, reason="set REASONAUDIT_SCREENSHOTS=1 to start every kind and save screenshots")
def test_every_kind_starts_from_the_page_screenshots(live_server, browser, owner, study, lab):  # noqa: F811
    base = live_server.url
    # An LLM judge on a second fake server that answers scanner questions; a benchmark version; and a
    # reasoning model (a thought channel: what early answering cuts), probed and generated beforehand.
    scanner_server = FakeScanner().start()
    thinker = FakeThinking(form="field", behaviour=FOLLOW).start()
    try:
        reasoner, _ = subject_services.do_save_subject(study, {
            "name": "reasoner", "model": "r1-fake", "base_url": thinker.url, "concurrency": 2, "max_retries": 1,
            "timeout_seconds": 5.0, "seed": 0, "chat_template": SMOLLM2, "thinking": "on"})
        subject_services.do_probe_subject_model(reasoner)
        assert generate(reasoner, scope="first:2")[1].status == "succeeded"
        judge_services.do_save_judge(study, {"name": "gpt", "model": "fake-model", "base_url": scanner_server.url,
                                             "concurrency": 2, "max_retries": 1, "timeout_seconds": 5.0})
        scanners.do_create_scanner(study, name="totals", question='Does the solution say "total"?', judge_name="gpt",
                                   user=owner)
        abstraction_services.do_generate_benchmark(study, categories=["EC"], per_sub_dataset=1)
        page = sign_in(browser, base, "olivia", "pw-olivia", width=1400, height=900)
        page.set_default_timeout(120_000)  # the abstraction run answers 58 items inside its start request
        bad_value_is_shown_once_beside_its_field(page, base, study.pk)

        plan: list[tuple[str, dict[str, str | bool], str]] = [
            ("generation", {"model": "tiny", "problems": "first:3", "samples": "2"}, "Generation"),
            ("judge", {"judge": "mechanistic", "traces": "all"}, "Judge"),
            ("interventions", {"model": "tiny", "kinds": "value_flip,paraphrase", "per_trace": "2", "limit": "3"},
             "Interventions"),
            ("anytime", {"model": "tiny", "budgets": "tokens:4,16,full", "limit": "3"}, "Anytime profile"),
            ("early_answering", {"model": "reasoner", "grid": "0,0.5,1"}, "Early answering"),
            ("fidelity", {"model": "tiny", "axes": "perturbation,counterfactual", "problems": "first:2"}, "Fidelity"),
            # The benchmark menu holds the one version generated above, chosen already.
            ("abstraction", {"model": "tiny", "mode": "dp", "per_sub_dataset": "1"}, "Abstraction"),
            ("scanner", {"scanner": "totals", "budget_usd": "1"}, "Scanner"),
        ]
        for kind, values, listed in plan:
            job = start(page, base, study.pk, kind, values)
            choose_kind(page, base, study.pk, kind)
            if listed:
                row = row_of(page, job)
                expect(row.locator("td").nth(1)).to_have_text(listed)
                expect(row.locator(".status")).to_have_text(re.compile("succeeded|failed"))
            shot(page, f"runs_page_{kind}")
    finally:
        scanner_server.stop()
        thinker.stop()
