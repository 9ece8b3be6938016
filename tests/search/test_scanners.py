"""Scanners: a question run by an LLM judge configuration over a cohort through the run engine, the
results as a filter and a cohort, and the validation loop (tests/search/fake_scanner.py answers)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from annotation.access import AccessDenied
from annotation.jobs import RunConflict
from annotation.models import Job
from judges import services as judge_services
from runs.models import Run
from search import scanners, services
from search.core import scan
from search.core.validation import validate
from search.models import ScanAnswer, ScanLabel, ScannerRun, ScanResult
from tests.runs.fake_openai import Fault
from tests.search.conftest import QUESTION, label

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def quick_retries(settings):
    settings.RUN_RETRY_BASE_SECONDS = 0.01
    settings.RUN_RETRY_MAX_SECONDS = 0.05


def run(scanner, **kwargs):
    record = scanners.do_start_scan(scanner, queue=False, **kwargs)
    job = scanners.run_inline(record)
    return record, job


def test_a_scan_answers_per_trace_with_validated_citations(scanner, traces, server):
    record, job = run(scanner)
    assert job.status == Job.Status.SUCCEEDED and job.done == 4
    got = {r.trace.trace_id: (r.answer, r.cited) for r in ScanResult.objects.select_related("trace")}
    assert got == {"t1": (True, [2]), "t2": (False, []), "t3": (True, [2]), "t4": (False, [])}
    assert job.result["yes"] == 2 and job.result["no"] == 2
    assert scanners.counts(scanner)["uncited"] == 2  # the two "no" answers cite nothing: marked


def test_cited_steps_that_do_not_exist_are_set_apart(scanner, server):
    server.cite_missing = True
    record, job = run(scanner)
    r = ScanResult.objects.get(trace__trace_id="t1")
    assert r.cited == [2] and r.bad_citations == [999]
    record.run.refresh_from_db()
    assert record.run.warnings == 4  # every answer cited 999: a warning per trace


def test_a_second_run_is_answered_from_the_cache_and_resumable_runs_are_the_engines(scanner, server):
    run(scanner)
    n = len(server.requests)
    record, job = run(scanner)
    assert len(server.requests) == n and Run.objects.get(pk=record.run_id).cache_hits == 4
    record, job = run(scanner, force=True)
    assert len(server.requests) == n + 4


def test_a_scan_of_a_cohort_scans_its_traces_only(study, owner_m, scanner, server):
    cohort = services.do_save_cohort(study, owner_m, name="m2", data={"model": "m2"})
    record, job = run(scanner, cohort=cohort)
    assert job.total == 2
    assert sorted(ScanResult.objects.values_list("trace__trace_id", flat=True)) == ["t3", "t4"]


def test_a_budget_stops_the_run(scanner, server):
    scanner.judge.price_input_per_mtok = 1_000_000.0  # 100 prompt tokens: $100 a request
    scanner.judge.save()
    record, job = run(scanner, budget_usd=150.0)
    assert ScanResult.objects.count() < 4 and job.status in (Job.Status.PARTIAL, Job.Status.FAILED,
                                                              Job.Status.CANCELLED, Job.Status.SUCCEEDED)
    assert Run.objects.get(pk=record.run_id).stop_reason


def test_one_run_at_a_time(scanner):
    scanners.do_start_scan(scanner, queue=False)
    with pytest.raises(RunConflict):
        scanners.do_start_scan(scanner, queue=False)


def test_results_are_a_filter_and_a_cohort(study, owner_m, member_m, scanner):
    run(scanner)
    ids = lambda **p: list(services.search(study, owner_m, p).traces.values_list("trace_id", flat=True))  # noqa: E731
    assert ids(scanner=f"{scanner.pk}:yes") == ["t1", "t3"]
    assert ids(scanner=f"{scanner.pk}:no", model="m2") == ["t4"]
    assert ids(scanner=f"{scanner.pk}:uncited") == ["t2", "t4"]
    cohort = services.do_save_cohort(study, owner_m, name="waiters", data={"scanner": f"{scanner.pk}:yes"})
    assert cohort.n_traces == 2
    with pytest.raises(AccessDenied, match="blind study"):
        services.search(study, member_m, {"scanner": f"{scanner.pk}:yes"})


def test_creation_is_validated(study, traces, server):
    judge_services.ensure_mechanistic(study)
    with pytest.raises(scanners.ScannerError, match="question"):
        scanners.do_create_scanner(study, name="x", question="short?", judge_name="gpt")
    with pytest.raises(scanners.ScannerError, match="mechanistic"):
        scanners.do_create_scanner(study, name="x", question=QUESTION, judge_name="mechanistic")


def test_the_validation_loop(study, owner, scanner, traces):
    run(scanner)
    assert scanners.do_draw_sample(scanner, 10, seed=1) == 4
    labels = {lab.trace.trace_id: lab for lab in ScanLabel.objects.select_related("trace")}
    assert {lab.split for lab in labels.values()} <= {"dev", "test"}
    # People answer: t1, t3 say wait (the scanner agrees); t4 too, people say (the scanner missed it).
    for tid, answer in {"t1": True, "t2": False, "t3": True, "t4": True}.items():
        scanners.do_answer(scanner, traces[tid], owner, answer)
    report = scanners.validation_report(scanner)
    both = validate([(True, True), (False, False), (True, True), (True, False)])
    assert report["dev"].n + report["test"].n == 4 and report["pending"] == 0
    assert both.tp == 2 and both.fn == 1 and both.precision == 1.0 and both.recall == pytest.approx(2 / 3)
    # The split of a trace is a fixed function of (scanner, trace).
    assert all(lab.split == scanners.split_for(scanner, lab.trace_id) for lab in labels.values())


def test_validation_intervals():
    v = validate([(True, True)] * 8 + [(False, True)] * 2 + [(True, False)] * 2 + [(False, False)] * 8)
    assert (v.tp, v.fp, v.fn, v.tn) == (8, 2, 2, 8)
    assert v.precision == 0.8 and v.recall == 0.8 and v.f1 == pytest.approx(0.8)
    assert v.precision_ci[0] < 0.8 < v.precision_ci[1] and v.f1_ci[0] < 0.8 < v.f1_ci[1]
    empty = validate([])
    assert empty.precision is None and empty.f1 is None and empty.f1_ci is None


def test_answers_are_read_strictly():
    a = scan.parse('```json\n{"answer": "Yes", "steps": [2, 2, 7], "explanation": "x"}\n```', [1, 2, 3])
    assert (a.answer, a.cited, a.bad_citations) == (True, (2,), (7,))
    for bad in ("no json", '{"answer": "maybe", "steps": []}', '{"answer": "no", "steps": ["2"]}'):
        with pytest.raises(scan.BadAnswer):
            scan.parse(bad, [1])


def test_the_prompt_numbers_steps_of_both_channels_one_line_each():
    msgs = scan.messages("Q?", "P", [scan.StepText(1, "thought", "hm\nwait"), scan.StepText(2, "answer", "5")], "5")
    assert "Thought step 1: hm wait\nStep 2: 5" in msgs[1]["content"]


def test_the_api(study, owner, member, scanner, traces):
    c = APIClient()
    c.force_authenticate(owner)
    r = c.post(f"/api/v1/scanners/{scanner.pk}/runs/", {}, format="json")
    assert r.status_code == 202, r.content
    r = c.get(f"/api/v1/studies/{study.pk}/scanners/")
    assert r.status_code == 200 and r.json()[0]["name"] == "waits"
    m = APIClient()
    m.force_authenticate(member)
    assert m.post(f"/api/v1/scanners/{scanner.pk}/runs/", {}, format="json").status_code == 403
    r = m.post(f"/api/v1/scanners/{scanner.pk}/labels/", {"trace": traces["t1"].pk, "answer": True}, format="json")
    assert r.status_code == 200 and ScanAnswer.objects.get(label__trace=traces["t1"], annotator=member).answer is True
    # A blinded annotator sees neither the answers' counts nor the validation (issue 29, L1).
    body = m.get(f"/api/v1/scanners/{scanner.pk}/").json()
    assert body["counts"] is None and body["validation"] is None
    assert c.get(f"/api/v1/scanners/{scanner.pk}/").json()["validation"]["pending"] == 0


def test_the_pages_and_the_review_page_question(client, study, owner, member, scanner, traces):
    run(scanner)
    scanners.do_draw_sample(scanner, 4)
    client.force_login(owner)
    page = client.get(f"/scanners/{scanner.pk}/").content.decode()
    assert "2 yes</a>" in page and "4 sampled traces wait for an answer" in page
    assert "waits" in client.get(f"/studies/{study.pk}/scanners/").content.decode()
    client.force_login(member)
    review = client.get(f"/traces/{traces['t2'].pk}/").content.decode()
    assert "Questions from scanners" in review and "Does the model say &quot;wait&quot;" in review
    r = client.post(f"/scanners/{scanner.pk}/label/", {"trace": traces["t2"].pk, "answer": "no",
                                                      "next": f"/traces/{traces['t2'].pk}/"})
    assert r.status_code == 302 and r["Location"] == f"/traces/{traces['t2'].pk}/"
    assert ScanAnswer.objects.get(label__trace=traces["t2"], annotator=member).answer is False
    r = client.post(f"/scanners/{scanner.pk}/label/", {"trace": traces["t2"].pk, "answer": "yes",
                                                      "next": "https://evil.example/"})
    assert r["Location"] == f"/scanners/{scanner.pk}/"
    # A blinded annotator sees no counts of the scanner's answers, and no validation table.
    page = client.get(f"/scanners/{scanner.pk}/").content.decode()
    assert "2 yes</a>" not in page and 'class="grid validation"' not in page
    assert "the validation (the scanner's answers against people's) is for owners and adjudicators" in page


def test_each_person_answers_for_themselves(study, owner, member, scanner, traces):
    # One answer per scanner and trace, last writer wins, let any member overwrite or withdraw anyone's (L1).
    run(scanner)
    scanners.do_answer(scanner, traces["t1"], owner, True)
    scanners.do_answer(scanner, traces["t1"], member, False)
    scanners.do_answer(scanner, traces["t1"], member, None)  # withdraws her own answer only
    assert list(ScanAnswer.objects.values_list("annotator__username", "answer")) == [("olivia", True)]
    scanners.do_answer(scanner, traces["t1"], member, False)
    scanners.do_answer(scanner, traces["t1"], owner, True)  # changes the owner's own, not hers
    assert sorted(ScanAnswer.objects.values_list("annotator__username", "answer")) == [("alice", False),
                                                                                      ("olivia", True)]
    report = scanners.validation_report(scanner)
    assert report["dev"].n + report["test"].n == 2  # each person's answer is one pair
    # The review page's question shows each person their own answer.
    assert [q["answer"] for q in scanners.pending_questions(traces["t1"], member)] == [False]
    assert [q["answer"] for q in scanners.pending_questions(traces["t1"], owner)] == [True]
    assert list(scanners.unanswered_by(scanner, member).values_list("trace_id", flat=True)) == []
    assert scanners.people_answers(scanner)[traces["t1"].pk][1] is None  # one yes, one no: no majority


def test_an_outsider_gets_404(client, outsider, scanner):
    client.force_login(outsider)
    assert client.get(f"/scanners/{scanner.pk}/").status_code == 404
    api = APIClient()
    api.force_authenticate(outsider)
    assert api.get(f"/api/v1/scanners/{scanner.pk}/").status_code == 404


def test_the_scan_command_runs_samples_and_reports(study, owner, scanner, traces):
    label(traces["t2"], 2, verdict="invalid", user=owner)
    for tid in ("t1", "t3", "t4"):
        label(traces[tid], 1, verdict="valid", user=owner)
    out = io.StringIO()
    call_command("scan", "--study", study.name, "--scanner", "waits", "--sample", "4", "--answers-from-labels",
                 "human", stdout=out, stderr=io.StringIO())
    report = json.loads(out.getvalue())
    assert report["counts"]["yes"] == 2 and report["pending"] == 0
    assert report["dev"]["n"] + report["test"]["n"] == 4


def test_the_readme_scan_command_creates_runs_samples_and_reports(study, scanner):
    out, err = io.StringIO(), io.StringIO()
    call_command("scan", "--study", study.name, "--scanner", "says wait", "--judge", "gpt", "--question", QUESTION,
                 "--sample", "3", stdout=out, stderr=err)
    report = json.loads(out.getvalue())  # stdout is the report alone; the run's lines went to stderr
    assert report["scanner"] == "says wait" and report["counts"]["yes"] == 2 and report["pending"] == 3
    assert "succeeded: 4 of 4 traces scanned, 0 failed; 2 yes, 2 no; 4 requests" in err.getvalue()


def test_scan_wait_ends_with_the_report_and_the_runs_status(study, scanner, server):
    out, err = io.StringIO(), io.StringIO()
    call_command("scan", "--study", study.name, "--scanner", "waits", "--wait", stdout=out, stderr=err)
    record = ScannerRun.objects.get(scanner=scanner)
    assert record.job.status == Job.Status.SUCCEEDED
    lines = err.getvalue()
    assert f"scanner run {record.pk} (job {record.job_id}): waits over 4 traces of the study" in lines
    assert "succeeded: 4 of 4 traces scanned, 0 failed; 2 yes, 2 no; 4 requests, 0 cache hits" in lines
    report = json.loads(out.getvalue())
    assert report["counts"] == {"yes": 2, "no": 2, "uncited": 2, "failed": 0} and report["pending"] == 0
    # --budget and --force are the shared ones: asked again despite the cache, under a budget.
    call_command("scan", "--study", study.name, "--scanner", "waits", "--wait", "--force", "--budget", "5",
                 stdout=io.StringIO(), stderr=io.StringIO())
    again = ScannerRun.objects.filter(scanner=scanner).first()
    assert again.force and again.budget_usd == 5.0 and again.requests == 4 and len(server.requests) == 8


@pytest.fixture
def not_eager():
    """Celery as with a worker (the tests' settings run tasks eagerly); the test's transaction is rolled
    back, so the chunks queued on commit never reach a broker."""
    from reasonaudit.celery import app as celery_app

    old = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False
    yield
    celery_app.conf.task_always_eager = old


def test_scan_without_wait_only_queues_the_run(study, scanner, not_eager):
    # With a worker (not eager) the command queues the run and ends; there is no report of a run not yet done.
    out, err = io.StringIO(), io.StringIO()
    call_command("scan", "--study", study.name, "--scanner", "waits", stdout=out, stderr=err)
    record = ScannerRun.objects.get(scanner=scanner)
    assert out.getvalue() == "" and f"queued; follow it with --wait, or on the web page of job {record.job_id}" \
        in err.getvalue()
    assert record.job.status == Job.Status.QUEUED
    # --no-run reports at once, without starting anything.
    out = io.StringIO()
    call_command("scan", "--study", study.name, "--scanner", "waits", "--no-run", stdout=out, stderr=io.StringIO())
    assert json.loads(out.getvalue())["counts"]["yes"] == 0 and ScannerRun.objects.count() == 1


def test_scan_cancel_stops_the_run_in_progress(study, scanner):
    record = scanners.do_start_scan(scanner, queue=False)
    with pytest.raises(CommandError, match=f"already has run {record.pk} in progress"):
        call_command("scan", "--study", study.name, "--scanner", "waits", "--wait")
    out, err = io.StringIO(), io.StringIO()
    call_command("scan", "--study", study.name, "--scanner", "waits", "--cancel", stdout=out, stderr=err)
    assert f"run {record.pk} (job {record.job_id}): cancelled" in err.getvalue() and out.getvalue() == ""
    assert Job.objects.get(pk=record.job_id).status == Job.Status.CANCELLED
    err = io.StringIO()
    call_command("scan", "--study", study.name, "--scanner", "waits", "--cancel", stdout=io.StringIO(), stderr=err)
    assert "scanner waits has no run in progress" in err.getvalue()
    with pytest.raises(CommandError, match="no scanner named 'nope'"):  # --cancel never creates a scanner
        call_command("scan", "--study", study.name, "--scanner", "nope", "--judge", "gpt", "--question", QUESTION,
                     "--cancel")


def test_scan_exits_1_when_the_run_failed(study, scanner, server):
    server.rule(lambda body: True, Fault(status=400, message="bad request"))
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as stop:
        call_command("scan", "--study", study.name, "--scanner", "waits", "--sample", "2", stdout=out, stderr=err)
    assert stop.value.code == 1
    assert "failed: 4 of 4 traces scanned, 4 failed; 0 yes, 0 no" in err.getvalue()
    assert "HTTP 400: bad request" in err.getvalue()  # the job's error names the reasons
    report = json.loads(out.getvalue())  # the report still comes, and nothing was drawn from a failed run
    assert report["counts"]["failed"] == 4 and not ScanLabel.objects.exists()


def test_scan_refuses_a_bad_sample_before_running(study, scanner):
    with pytest.raises(CommandError, match=r"--sample: must lie in 1\.\.2000"):
        call_command("scan", "--study", study.name, "--scanner", "waits", "--sample", "-1")
    with pytest.raises(CommandError, match="--answers-from-labels: choose"):
        call_command("scan", "--study", study.name, "--scanner", "waits", "--answers-from-labels", "nobody")
    assert not ScannerRun.objects.exists()


def test_the_scanner_page_refuses_an_unknown_cohort_instead_of_scanning_the_whole_study(study, owner, scanner):
    """Was: an unknown cohort id read as "no cohort" and the whole study was scanned. Now the refusal of the
    runs page and the API (the kind's one serializer, runs.kinds), flashed on the page the form was on."""
    import re

    from django.urls import reverse

    from tests.conftest import signed_in

    web = signed_in(owner)
    url = reverse("search-scanner-run", args=[scanner.pk])
    page = scanner.get_absolute_url()
    for form in ({"cohort": "999999"}, {"budget_usd": "1e9"}):
        answer = web.post(url, form, HTTP_REFERER=f"http://testserver{page}")
        assert answer.status_code == 302 and answer["Location"].endswith(page)
        shown = " ".join(re.findall(r'<ul class="messages">(.*?)</ul>', web.get(page).content.decode(), re.S))
        assert "Not started: " in shown and ("Cohort" in shown if "cohort" in form else "Budget (USD)" in shown)
    assert not ScannerRun.objects.exists()
