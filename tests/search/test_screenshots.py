"""Screenshots of search for docs/screenshots/ (issue 22; run on purpose, not in every test run):

    REASONAUDIT_SCREENSHOTS=1 .venv/bin/python -m pytest -q tests/search/test_screenshots.py -p no:cacheprovider

The search page with highlighted matches, and a scanner's validation page, over real GSM8K problems and
model solutions from the bundled demo data (MIT licence, see annotation/demo_data/gsm8k/LICENSE); the
scanner is answered by the tests' fake OpenAI-compatible server (tests/search/fake_scanner.py).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from django.conf import settings

from annotation.importing.pipeline import import_stream
from annotation.models import Step, Trace
from judges import services as judge_services
from search import scanners
from search.models import ScanLabel
from tests.review.browser import browser, sign_in  # noqa: F401 - fixture

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not os.environ.get("REASONAUDIT_SCREENSHOTS"), reason="set REASONAUDIT_SCREENSHOTS=1"),
]

OUT = Path(settings.BASE_DIR) / "docs" / "screenshots"
DEMO = Path(settings.BASE_DIR) / "annotation" / "demo_data" / "gsm8k" / "example_model_solutions.jsonl"
QUESTION = 'Does the solution add everything up to a "total"?'


def _shot(page, name: str, *, full_page: bool = False) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    assert path.stat().st_size < 300_000, f"{path} is {path.stat().st_size} bytes"


def test_search_screenshots(live_server, browser, owner, study, server, settings):  # noqa: F811
    settings.RUN_RETRY_BASE_SECONDS = 0.01
    lines = DEMO.read_bytes().splitlines(keepends=True)[:40]
    report = import_stream(study, io.BytesIO(b"".join(lines)), "gsm8k-solutions")
    assert report.committed, report.rejected

    # Search with highlights: a phrase and a word, as a researcher types them.
    page = sign_in(browser, live_server.url, "olivia", "pw-olivia", width=1400, height=900)
    page.goto(f"{live_server.url}/studies/{study.pk}/search/?q=%22per+day%22+OR+total")
    page.wait_for_selector("mark")
    _shot(page, "search_highlights")

    # A scanner run over the study, a validation sample, and people's answers.
    judge_services.do_save_judge(study, {"name": "gpt", "model": "fake-model", "base_url": server.url,
                                         "concurrency": 2, "max_retries": 2, "timeout_seconds": 5.0})
    scanner = scanners.do_create_scanner(study, name="totals", question=QUESTION, judge_name="gpt", user=owner)
    job = scanners.run_inline(scanners.do_start_scan(scanner, queue=False))
    assert job.status == "succeeded", job.error
    assert scanners.do_draw_sample(scanner, 40, seed=0) >= 20
    # The people's answer reads the solution rather than grepping one word: "altogether", "in all" and
    # "sum" count too (so the scanner misses some), and a "total" that is only the question's word does not.
    for lab in ScanLabel.objects.filter(scanner=scanner).select_related("trace"):
        text = " ".join(Step.objects.filter(trace=lab.trace).values_list("text", flat=True)).lower()
        adds_up = any(w in text for w in ("total", "altogether", "in all", "sum")) and "+" in text
        scanners.do_answer(scanner, Trace.objects.get(pk=lab.trace_id), owner, adds_up)
    page.goto(f"{live_server.url}/scanners/{scanner.pk}/")
    page.wait_for_selector("table")
    _shot(page, "scanner_validation", full_page=True)

    # Two cohorts from the scanner's answers, side by side, with the table's download links.
    from annotation.models import Membership
    from search import services

    m = Membership.objects.get(study=study, user=owner)
    yes = services.do_save_cohort(study, m, name="adds up (scanner)", data={"scanner": f"{scanner.pk}:yes"})
    no = services.do_save_cohort(study, m, name="does not (scanner)", data={"scanner": f"{scanner.pk}:no"})
    page.goto(f"{live_server.url}/cohorts/{yes.pk}/compare/?b={no.pk}")
    page.wait_for_selector("table.compare")
    _shot(page, "cohort_compare", full_page=True)
