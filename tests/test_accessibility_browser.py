"""Accessibility and layout of the main pages (issue 31): axe-core (from npm, node_modules/axe-core, injected from disk --
never fetched) runs in Debian's chromium over every main page of a study that has data in each view, and finds
no serious and no critical violation, no numeric table cell wraps and no page is wider than the window (1280 and
768 px). The pages are listed by URL name, so a page renamed away fails here.

Real GSM8K model solutions (annotation/demo_data/gsm8k, MIT licence, LICENSE beside them) and one real R1 thought
(tests/data/thinking, MIT licence, LICENSE-thought-anchors.md beside it)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from annotation import services
from annotation.importing.pipeline import import_stream
from annotation.models import Membership, Problem, Trace
from tests.review.browser import browser, sign_in  # noqa: F401 - fixture
from tests.review.conftest import human_label, judge

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AXE = Path(settings.BASE_DIR) / "node_modules" / "axe-core" / "axe.min.js"
DEMO = Path(settings.BASE_DIR) / "annotation" / "demo_data" / "gsm8k" / "example_model_solutions.jsonl"
R1 = Path(settings.BASE_DIR) / "tests" / "data" / "thinking" / "r1_three_ways.jsonl"
SEVERE = ("serious", "critical")
# The numeric cells (a number, an interval, a percentage) whose text runs over more than one line, and whether the
# page is wider than the window: "0.97" once read "0.97 / 2" in a squeezed column.
LAYOUT = """() => {
  const wrapped = [];
  for (const cell of document.querySelectorAll('main td, main th')) {
    const t = cell.innerText.trim();
    if (!t || t.length < 2 || t.length > 40 || !/[0-9]/.test(t) || !/^[-+\u2212]?[0-9.,%/ ()\\[\\]\u2013\u2212-]+$/.test(t)) continue;
    const range = document.createRange();
    range.selectNodeContents(cell);
    if (new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top))).size > 1) wrapped.push(t);
  }
  const doc = document.documentElement;
  return {wrapped: wrapped.slice(0, 5), wider: doc.scrollWidth > doc.clientWidth};
}"""


def _study_with_every_view(study, owner, member, django_user_model) -> dict[str, int]:
    """A study whose pages all have something to show: GSM8K solutions, an R1 thought, disagreeing human
    labels, the mechanistic judge's labels and scores, a cohort, a scanner and a calibration study."""
    from agreement.calibration import do_create_calibration
    from judges import services as judge_services
    from judges.models import JudgeRun
    from scoring import score_jobs
    from search.scanners import do_create_scanner
    from search.services import do_save_cohort

    lines = DEMO.read_bytes().splitlines(keepends=True)[:24]
    assert import_stream(study, io.BytesIO(b"".join(lines)), "gsm8k-solutions").committed
    assert import_stream(study, io.BytesIO(R1.read_bytes()), "reasonaudit").committed
    bob = django_user_model.objects.create_user("bob", password="pw-bob")
    services.do_add_member(study, bob.username, Membership.Role.ANNOTATOR)
    first = Trace.objects.filter(study=study).exclude(model__startswith="deepseek").order_by("pk").first()
    human_label(first, 1, member, "valid")
    human_label(first, 1, bob, "invalid")
    mechanistic = judge_services.ensure_mechanistic(study)
    judge_services.run_inline(judge_services.do_start_run(mechanistic, scope=JudgeRun.Scope.UNLABELLED, queue=False))
    score_jobs.recompute(study)
    owner_m = Membership.objects.get(study=study, user=owner)
    cohort = do_save_cohort(study, owner_m, name="wrong answers", data={"answer_correct": "false"})
    llm = judge(study, "keyword-judge", primary=False)
    scanner = do_create_scanner(study, name="says wait", question='Does a step say "wait"?', judge_name=llm.name)
    calibration = do_create_calibration(study, name="judge vs people", reference="human",
                                        candidates=["judge:mechanistic"], size=10)
    thought = Trace.objects.filter(study=study, model__startswith="deepseek").order_by("pk").first()
    # Step importance: a published analysis's values and tags (the heat map of the review page, the study page).
    from anchors.importing import import_analysis

    assert import_analysis(study, Path(settings.BASE_DIR) / "tests" / "data" / "thought_anchors" / "tiny-r1").committed
    anchored = Trace.objects.get(study=study, model="tiny-r1")
    return {"trace": first.pk, "thought": thought.pk, "anchored": anchored.pk, "problem": first.problem_id,
            "cohort": cohort.pk,
            "scanner": scanner.pk, "calibration": calibration.pk,
            "r1_problem": Problem.objects.get(study=study, problem_id="math/330").pk}


def test_main_pages_have_no_serious_or_critical_violation(live_server, browser, owner, member, study,  # noqa: F811
                                                          django_user_model):
    assert AXE.is_file(), f"{AXE} is missing: bin/setup installs the npm packages (axe-core)"
    ids = _study_with_every_view(study, owner, member, django_user_model)
    s = {"study_id": study.pk}
    pages = [
        ("studies", {}), ("profile", {}), ("study-create", {}),
        ("study", s), ("study-members", s), ("trace-list", s), ("problem-list", s),
        ("queue", s), ("adjudication", s),
        ("problem", {"problem_id": ids["problem"]}), ("problem", {"problem_id": ids["r1_problem"]}),
        ("trace", {"trace_id": ids["trace"]}), ("trace", {"trace_id": ids["thought"]}),
        ("trace", {"trace_id": ids["anchored"]}), ("anchors", s),
        ("scoring-leaderboard", s), ("scoring-hazard", s), ("scoring-distributions", s), ("scoring-lucky", s),
        ("scoring-ablations", s), ("scoring-profiles", s),
        ("scoring-agreement", s), ("scoring-annotators", s), ("scoring-calibrations", s),
        ("scoring-calibration", {**s, "cal_id": ids["calibration"]}),
        ("faithfulness", s), ("fidelity-list", s), ("abstraction-table", s),
        ("search", s), ("search-cohorts", s), ("search-cohort", {"pk": ids["cohort"]}),
        ("search-scanners", s), ("search-scanner", {"pk": ids["scanner"]}),
        ("study-runs", s), ("judge-list", s), ("subject-model-list", s), ("prompt-template-list", s),
    ]
    page = sign_in(browser, live_server.url, "olivia", "pw-olivia", width=1280, height=800)
    found: dict[str, list[str]] = {}
    for name, kwargs in pages:
        url = reverse(name, kwargs=kwargs)
        if name == "search":
            url += "?q=wait"
        response = page.goto(f"{live_server.url}{url}")
        assert response is not None and response.status == 200, (url, response and response.status)
        page.wait_for_load_state("networkidle")
        page.add_script_tag(path=str(AXE))
        violations = page.evaluate(
            "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
            ".map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))")
        severe = [f"{v['impact']} {v['id']}: {', '.join(v['nodes'])}" for v in violations if v["impact"] in SEVERE]
        layout = page.evaluate(LAYOUT)
        if layout["wrapped"] or layout["wider"]:
            severe.append(f"layout at 1280 px: {layout}")
        if severe:
            found[url] = severe
    # The tables of numbers at a tablet's width: a table wider than its card scrolls inside it, numbers stay whole.
    page.set_viewport_size({"width": 768, "height": 900})
    for name in ("scoring-leaderboard", "scoring-hazard", "scoring-lucky", "scoring-agreement", "faithfulness",
                 "abstraction-table", "search-cohorts"):
        url = reverse(name, kwargs=s)
        page.goto(f"{live_server.url}{url}")
        layout = page.evaluate(LAYOUT)
        if layout["wrapped"] or layout["wider"]:
            found[url + " (768 px)"] = [str(layout)]
    assert not found, "\n".join(f"{url}: {problems}" for url, problems in found.items())
