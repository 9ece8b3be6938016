"""Every page of a study uses a number of queries that does not grow with the data (issue 19
part 6; benchmarks/page_speed.py times the same pages at 5k and 100k traces).

A study in use (two annotators' labels with disagreements, the mechanistic judge's run, the
score job's scores and stored evidence, a subject model, a cohort) at 3 problems, then grown to
12 with more labels: each page must not issue more queries than it did at 3.
tests/review/test_query_counts.py covers the review lists and the API the same way."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation import services
from annotation.models import Job, Membership, Trace
from judges import services as judge_services
from judges.models import JudgeConfig, JudgeRun
from scoring import score_jobs
from search import services as search_services
from search.models import Cohort
from subjects import services as subject_services
from subjects.models import SubjectModel
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db

STUDY_PAGES = [
    "study", "problem-list", "trace-list", "queue", "adjudication", "scoring-leaderboard", "scoring-hazard",
    "scoring-distributions", "scoring-lucky", "scoring-ablations", "scoring-profiles", "scoring-agreement",
    "scoring-annotators", "scoring-calibrations", "faithfulness", "fidelity-list", "abstraction-table",
    "judge-list", "subject-model-list", "prompt-template-list", "study-runs", "search", "search-cohorts",
    "search-scanners", "study-members",
]


def _records(start: int, n: int) -> list[dict]:
    """Problems with a checkable skeleton; four models' traces, one of three with a wrong sum;
    two annotators on the first model's trace (they disagree where the sum is wrong)."""
    records: list[dict] = []
    for p in range(start, start + n):
        a, b = 3 + p, 5 + 2 * p
        records.append({"kind": "problem", "problem_id": f"g{p}", "domain": ("arithmetic", "algebra")[p % 2],
                        "statement": f"Tom has {a} apples and buys {b} more. How many?", "gold_answer": str(a + b),
                        "skeleton": [{"text": f"{a} + {b} = {a + b}", "check": f"{a}+{b}={a + b}"}]})
        for m in range(4):
            total = a + b + (m % 3 == 0)
            steps = [f"Tom starts with {a} apples.", f"He buys {b} more.", f"{a} + {b} = {total}",
                     f"The answer is {total}."]
            labels = [{"step": k, "annotator": who, "note": "",
                       "verdict": "invalid" if k == 3 and total != a + b and who == "ann1" else "valid"}
                      for who in (("ann1", "ann2") if m == 0 else ()) for k in range(1, 5)]
            records.append({"kind": "trace", "problem_id": f"g{p}", "model": f"model-{m}", "trace_id": f"g{p}/{m}",
                            "steps": steps, "answer": str(total), "regime": {"temperature": 0.0},
                            "labels": labels})
    return records


def _grow(study, do_import, start: int, n: int) -> None:
    """Import, judge, score: what the import's, the judge's and the score's jobs leave behind."""
    report = do_import(jsonl(*_records(start, n)))
    assert report.committed, report.rejected
    judge = judge_services.ensure_mechanistic(study)
    run = judge_services.do_start_run(judge, scope=JudgeRun.Scope.UNLABELLED, queue=False)
    judge_services.run_inline(run)
    score_jobs.recompute(study)


def _pages(study) -> list[str]:
    trace = Trace.objects.filter(study=study).order_by("pk").first()
    judge = JudgeConfig.objects.get(study=study)
    urls = [reverse("studies"), reverse("profile")]
    urls += [reverse(name, args=[study.pk]) for name in STUDY_PAGES]
    urls += [reverse("search", args=[study.pk]) + "?q=apples",
             reverse("problem", args=[trace.problem_id]), reverse("trace", args=[trace.pk]),
             reverse("judge", args=[judge.pk]), reverse("judge-disagreements", args=[judge.pk]),
             reverse("judge-run", args=[JudgeRun.objects.filter(judge=judge).latest("pk").pk]),
             reverse("subject-model", args=[SubjectModel.objects.get(study=study).pk]),
             reverse("search-cohort", args=[Cohort.objects.get(study=study).pk]),
             reverse("job", args=[Job.objects.filter(study=study).earliest("pk").pk])]
    return urls


def _count(client, url: str, django_assert_max_num_queries, limit: int = 60) -> int:
    with django_assert_max_num_queries(limit) as ctx:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return len(ctx.captured_queries)


def test_every_page_of_a_study_uses_as_many_queries_at_12_problems_as_at_3(
        client, django_assert_max_num_queries, study, do_import, owner):
    for name in ("ann1", "ann2"):
        services.do_add_member(study, name, Membership.Role.ANNOTATOR, password="pw-annotator-1")
    _grow(study, do_import, 0, 3)
    subject_services.ensure_builtin_templates(study)
    subject_services.do_save_subject(study, {"name": "local", "base_url": "http://127.0.0.1:8080/v1",
                                             "model": "local", "seed": 0})
    membership = Membership.objects.get(study=study, user=owner)
    search_services.do_save_cohort(study, membership, name="wrong", data={"answer_correct": "false"})
    client.force_login(owner)
    urls = _pages(study)
    small = {url: _count(client, url, django_assert_max_num_queries) for url in urls}
    _grow(study, do_import, 3, 9)
    assert Trace.objects.filter(study=study).count() == 48
    grown = {url: _count(client, url, django_assert_max_num_queries) for url in urls}
    more = {url: (small[url], grown[url]) for url in urls if grown[url] > small[url]}
    assert not more, f"queries that grew with the data (3 -> 12 problems): {more}"


def _shapes(client, url: str) -> list[str]:
    """The page's queries with their numbers (ids, times, limits) taken out: what it reads, and how."""
    import re

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    # Savepoint names are made of the thread's id and a counter.
    return [re.sub(r"'[^']*'|\"s\d+_x\d+\"|\b\d+(\.\d+)?\b", "?", q["sql"]) for q in ctx.captured_queries]


#: What a page reads of the stored summaries (the note's own look-up reads only their times).
STORED_READS = ('"annotation_studysummary"."counts"', '"faithfulness_evidencesummary"."data"',
                'FROM "annotation_summarydisagreement"')


def test_between_a_change_and_its_score_job_every_page_reads_what_it_read_before(client, study, do_import, owner):
    """A change of the labels marks the stored summaries stale and keeps them (annotation.study_summary,
    faithfulness.stored_evidence): every page of the study (the list above, so a new page is covered) then issues
    the queries it issued before the change, but for the note that says how old they are (the latest score job)
    and the agreement menus' probe for a new reviewer; none counts from the data. At a million traces counting
    took a minute or more a page, for the twelve minutes of the job (issue 33)."""
    from annotation import signals

    for name in ("ann1", "ann2"):
        services.do_add_member(study, name, Membership.Role.ANNOTATOR, password="pw-annotator-1")
    _grow(study, do_import, 0, 3)
    subject_services.ensure_builtin_templates(study)
    subject_services.do_save_subject(study, {"name": "local", "base_url": "http://127.0.0.1:8080/v1",
                                             "model": "local", "seed": 0})
    search_services.do_save_cohort(study, Membership.objects.get(study=study, user=owner), name="wrong",
                                   data={"answer_correct": "false"})
    client.force_login(owner)
    filtered = reverse("trace-list", args=[study.pk]) + "?disagreement=true"  # the filter reads the stored steps
    urls = [*_pages(study), filtered]
    before = {url: _shapes(client, url) for url in urls}
    signals.data_changed.send(sender=type(study), study=study, reason="labels")  # its score job not run
    allowed = ('FROM "annotation_job"', 'FROM "annotation_membership"')
    noted, readers = [], []
    for url in urls:
        after = _shapes(client, url)
        new = [q for q in after if q not in before[url]]
        assert not [q for q in new if not any(part in q for part in allowed)], (url, new)
        assert len(after) <= len(before[url]) + 2, (url, len(before[url]), len(after))
        if any(part in q for q in after for part in STORED_READS):
            readers.append(url)
        if "were computed" in client.get(url).content.decode():
            noted.append(url)
    # Every page that reads the stored counts, figures or disagreement steps (found from its queries, so a new
    # page is covered) says they are being recomputed; but the calibrations page, whose menus alone read them.
    menus_only = {reverse("scoring-calibrations", args=[study.pk])}
    assert len(readers) > 15 and not [url for url in readers if url not in noted and url not in menus_only], \
        (readers, noted)
    assert "The disagreement steps this filter reads were computed" in client.get(filtered).content.decode()


def test_the_stored_summaries_hold_what_the_pages_count_and_are_marked_when_the_data_changes(study, do_import, owner):
    """What the score job stores (annotation.study_summary, faithfulness.stored_evidence) equals what
    the pages compute from the data without it; a change of the data marks it stale."""
    from annotation import signals, study_summary, study_summary_writer
    from annotation.models import StudySummary, SummaryDisagreement
    from annotation.review.adjudication import disagreement_step_ids
    from faithfulness import stored_evidence
    from faithfulness.evidence import evidence
    from faithfulness.models import EvidenceSummary
    from judges.services import judge_list

    for name in ("ann1", "ann2"):
        services.do_add_member(study, name, Membership.Role.ANNOTATOR, password="pw-annotator-1")
    report = do_import(jsonl(*_records(0, 4)))
    assert report.committed, report.rejected
    judge = judge_services.ensure_mechanistic(study)
    judge_services.run_inline(judge_services.do_start_run(judge, queue=False))
    live_progress = study_summary.study_progress([study.pk], owner)[study.pk]
    live_evidence = evidence(study)
    live_judges = [(j.name, j.n_labels, j.n_disagreements) for j in judge_list(study)]
    live_by_model = study_summary.by_model(study)
    live_reviewers = study_summary.reviewer_ids(study)
    live_models = study_summary.trace_models(study)
    assert study_summary.stored_counts(study) is None
    assert not StudySummary.objects.exists() and not EvidenceSummary.objects.exists()
    assert live_progress["disagreements"] > 0 and live_judges[0][2] > 0  # the sums of model-0 are wrong

    score_jobs.recompute(study)
    assert StudySummary.objects.filter(study=study).exists()
    assert stored_evidence.read(study, None, "exclude") is not None
    assert study_summary.study_progress([study.pk], owner)[study.pk] == live_progress
    assert evidence(study) == live_evidence
    assert [(j.name, j.n_labels, j.n_disagreements) for j in judge_list(study)] == live_judges
    assert study_summary.stored_counts(study)["by_model"] == live_by_model
    # The agreement pages' menus: who reviewed (two annotators) and the models, as stored.
    assert len(live_reviewers) == 2 and study_summary.stored_reviewer_ids(study) == live_reviewers
    assert study_summary.trace_models(study) == live_models == ["model-0", "model-1", "model-2", "model-3"]
    # The disagreement steps are written by the database (INSERT ... SELECT), each once, also when stored again.
    live_steps = sorted(disagreement_step_ids(study, open_only=False).values_list("step", flat=True))
    assert live_steps and sorted(SummaryDisagreement.objects.filter(study=study).values_list("step", flat=True)) \
        == live_steps
    study_summary_writer.store(study)
    assert sorted(SummaryDisagreement.objects.filter(study=study).values_list("step", flat=True)) == live_steps

    # A change marks them stale and keeps them (the pages say how old they are) until the score job writes anew.
    counts = study_summary.stored_counts(study)
    signals.data_changed.send(sender=type(study), study=study, reason="labels")
    summary = StudySummary.objects.get(study=study)
    assert summary.stale and summary.marked_at >= summary.computed_at and summary.counts == counts
    assert study_summary.status([study.pk])[study.pk] == {"computed_at": summary.computed_at,
                                                           "marked_at": summary.marked_at}
    assert sorted(SummaryDisagreement.objects.filter(study=study).values_list("step", flat=True)) == live_steps
    assert EvidenceSummary.objects.filter(study=study).exists()
    assert not EvidenceSummary.objects.filter(study=study, stale=False).exists()
    assert stored_evidence.status(study)["computed_at"] is not None
    score_jobs.recompute(study)
    assert not StudySummary.objects.get(study=study).stale and study_summary.status([study.pk]) == {}
    assert stored_evidence.status(study) is None and not EvidenceSummary.objects.filter(study=study, stale=True).exists()


def test_a_summary_counted_while_the_data_changed_is_stored_stale(study, do_import):
    """The writers read at one time and write later: a change in between (it marked the old row, or queued another
    score job) leaves what they write stale, so no page shows it as current; the job that change queued writes anew."""
    from annotation import signals, study_summary, study_summary_writer
    from annotation.models import Job, StudySummary
    from faithfulness import stored_evidence
    from faithfulness.evidence import store_summaries

    _grow(study, do_import, 0, 2)
    assert study_summary.status([study.pk]) == {} and stored_evidence.status(study) is None
    original = study_summary.count

    def count_then_change(*args, **kwargs):
        out = original(*args, **kwargs)
        signals.data_changed.send(sender=type(study), study=study, reason="labels")  # marks the old row
        return out

    study_summary_writer.count = count_then_change
    try:
        study_summary_writer.store(study)
    finally:
        study_summary_writer.count = original
    assert StudySummary.objects.get(study=study).stale
    # A score job queued after the read began (a change on a study without a stored row) does the same.
    job = Job.objects.create(study=study, kind=Job.Kind.SCORE, status=Job.Status.RUNNING)
    store_summaries(study, job)
    assert stored_evidence.status(study) is None  # nothing queued since: current
    StudySummary.objects.filter(study=study).delete()
    queued = []

    def queue_during(*args, **kwargs):
        queued.append(Job.objects.create(study=study, kind=Job.Kind.SCORE, status=Job.Status.QUEUED))
        return original(*args, **kwargs)

    study_summary_writer.count = queue_during
    try:
        study_summary_writer.store(study, job)
    finally:
        study_summary_writer.count = original
    assert queued and StudySummary.objects.get(study=study).stale
    queued[0].delete()
    study_summary_writer.store(study, job)
    assert not StudySummary.objects.get(study=study).stale


def test_the_agreement_pages_read_their_menus_from_the_stored_summary(client, study, do_import, owner):
    """Who reviewed and which models (the menus of sources and the calibration form) come from the score
    job's summary, not from grouping every review and trace on each request; the page is the same."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from annotation import signals

    for name in ("ann1", "ann2"):
        services.do_add_member(study, name, Membership.Role.ANNOTATOR, password="pw-annotator-1")
    _grow(study, do_import, 0, 3)
    client.force_login(owner)
    urls = [reverse(name, args=[study.pk]) for name in ("scoring-agreement", "scoring-calibrations")]
    for url in urls:
        with CaptureQueriesContext(connection) as ctx:
            stored = client.get(url).content.decode()
        grouped = [q["sql"] for q in ctx.captured_queries
                   if "annotation_tracereview" in q["sql"] or 'DISTINCT "annotation_trace"."model"' in q["sql"]]
        assert not grouped, grouped
        assert "annotator:ann1" in stored and "annotator:ann2" in stored
        signals.data_changed.send(sender=type(study), study=study, reason="labels")  # no summary: counted live
        live = client.get(url).content.decode()
        assert "annotator:ann1" in live and "annotator:ann2" in live
        score_jobs.recompute(study)
    assert "model-3" in client.get(urls[1]).content.decode()


def test_the_adjudication_lists_and_counts_the_stored_steps_as_it_would_live_and_an_adjudication_keeps_them(
        client, study, do_import, owner):
    """The adjudication page and API list the stored disagreement steps in (trace, index) order, counted from
    the stored counts per model less the adjudicated ones: the same steps and counts as from the labels, under
    every status and model. A final verdict changes nothing stored, so the summary stays current and the page's
    next load still reads it; a label save marks it stale, and the page says so."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from annotation import signals, study_summary
    from annotation.models import Step, StudySummary
    from annotation.review.adjudication import disagreement_count, disagreement_steps, do_adjudicate

    for name in ("ann1", "ann2"):
        services.do_add_member(study, name, Membership.Role.ANNOTATOR, password="pw-annotator-1")
    _grow(study, do_import, 0, 4)
    cases = [(status, model) for status in ("open", "resolved", "all") for model in ("", "model-0", "model-1")]

    def listed() -> dict:
        return {case: (list(disagreement_steps(study, *case).values_list("trace__trace_id", "index")),
                       disagreement_count(study, *case)) for case in cases}

    # The stored steps are ordered by their own copy of trace and index (the (study, trace, index) index cuts a page),
    # not by a join to the trace's default ordering (its study, problem and model: every stored step sorted).
    order = str(disagreement_steps(study, "all").query).split("ORDER BY")[1]
    assert order.strip() == ('"annotation_summarydisagreement"."trace_id" ASC, '
                             '"annotation_summarydisagreement"."index" ASC'), order
    first = Step.objects.filter(pk__in=disagreement_steps(study, "open").values("pk")).order_by("trace_id", "index")[0]
    do_adjudicate(first, owner, version=0, verdict="invalid", skeleton_refs=[], reason="the sum is wrong")
    assert StudySummary.objects.filter(study=study).exists()  # the verdict kept the stored steps
    stored = listed()
    assert study_summary.stored_disagreements(study) is not None
    StudySummary.objects.filter(study=study).delete()  # counted from the labels
    live = listed()
    assert stored == live
    for _case, (steps, n) in live.items():
        assert n == len(steps) and steps == sorted(steps, key=lambda s: (s[0].split("/"), s[1]))
    assert live[("resolved", "")][1] == 1 and live[("open", "")][1] == live[("all", "")][1] - 1 > 0
    assert live[("all", "model-1")] == ([], 0)  # model-1's sums are right

    score_jobs.recompute(study)
    progress = study_summary.study_progress([study.pk], owner)[study.pk]
    assert progress["disagreements"] == live[("open", "")][1]
    client.force_login(owner)
    url = reverse("adjudication", args=[study.pk])
    with CaptureQueriesContext(connection) as ctx:
        page = client.get(url + "?status=all").content.decode()
    assert not [q["sql"] for q in ctx.captured_queries if "COUNT(DISTINCT" in q["sql"]]  # no grouping of the labels
    assert f"· {live[('all', '')][1]} steps" in page  # the pager's count
    api = client.get(reverse("api-study-disagreements", args=[study.pk]) + "?status=resolved").json()
    assert api["count"] == 1 and api["results"][0]["step_id"] == first.pk
    signals.data_changed.send(sender=type(study), study=study, reason="labels")
    assert StudySummary.objects.get(study=study).stale  # kept, marked: the page says how old it is
    assert "The counts on this page were computed" in client.get(url).content.decode()


def test_the_subject_model_list_reads_the_imported_models_from_the_stored_table(study, do_import):
    """Without generations, the subject-model list's imported models (traces, accuracy) come from the score job's
    table by model: equal to grouping every trace of the study, which it then does not do."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from annotation.models import StudySummary

    _grow(study, do_import, 0, 4)
    Trace.objects.filter(study=study, model="model-2", trace_id__endswith="/2").update(answer_correct=None)
    score_jobs.recompute(study)  # the table by model, with the answers unchecked above
    with CaptureQueriesContext(connection) as ctx:
        stored = [(r.model, r.traces, r.accuracy) for r in subject_services.model_table(study)]
    assert not [q["sql"] for q in ctx.captured_queries if 'FROM "annotation_trace"' in q["sql"] and "COUNT(" in q["sql"]]
    StudySummary.objects.filter(study=study).delete()
    live = [(r.model, r.traces, r.accuracy) for r in subject_services.model_table(study)]
    assert stored == live and [r[0] for r in live] == ["model-0", "model-1", "model-2", "model-3"]
    assert live[2][2] is None  # model-2: no answer checked


def test_with_generations_the_imported_models_are_the_stored_table_less_the_generated_traces(study, do_import):
    """With generations, the imported models' rows are the score job's table by model less the generated traces
    (read with the generations the table already reads), while the table is current and no generation came after
    it; otherwise grouped from the traces. Both equal grouping the traces no subject model generated."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from annotation import signals
    from annotation.models import StudySummary
    from subjects.models import Generation

    _grow(study, do_import, 0, 4)
    subject, _ = subject_services.do_save_subject(study, {"name": "gen", "model": "gen",
                                                          "base_url": "http://127.0.0.1:9/v1"})
    for i, trace in enumerate(Trace.objects.filter(study=study, model__in=["model-1", "model-2"]).order_by("pk")[:5]):
        Generation.objects.create(subject=subject, config_version=subject.version, problem=trace.problem,
                                  sample=i, trace=trace)
    score_jobs.recompute(study)

    def imported() -> list:
        return [(r.model, r.traces, r.accuracy) for r in subject_services.model_table(study) if r.subject is None]

    with CaptureQueriesContext(connection) as ctx:
        stored = imported()
    assert not [q["sql"] for q in ctx.captured_queries if 'FROM "annotation_trace"' in q["sql"] and "COUNT(" in q["sql"]]
    StudySummary.objects.filter(study=study).delete()
    live = imported()
    assert stored == live and {m: n for m, n, _ in live} == {
        m: Trace.objects.filter(study=study, model=m, generation__isnull=True).count()
        for m in ("model-0", "model-1", "model-2", "model-3")}
    assert sum(n for _m, n, _a in live) == 16 - 5
    score_jobs.recompute(study)
    # A run writes its traces before the change that ends it marks the table stale: a new trace, generated after
    # the table was stored, is in neither the table nor the imported ones (the table less it would miss one).
    report = do_import(jsonl(*_records(4, 1)))  # its change is sent on commit: not here, the table stays current
    assert report.committed
    later = Trace.objects.filter(study=study, model="model-3").order_by("-pk").first()
    Generation.objects.create(subject=subject, config_version=subject.version, problem=later.problem, sample=9,
                              trace=later)
    assert not StudySummary.objects.get(study=study).stale
    assert [r for r in imported() if r[0] == "model-3"][0][1] == 4  # grouped from the traces
    signals.data_changed.send(sender=type(study), study=study, reason="generation")  # stale: grouped too
    assert [r for r in imported() if r[0] == "model-3"][0][1] == 4


def test_a_reviewer_new_since_the_stored_summary_is_offered_while_it_is_stale(study, do_import, owner):
    """The agreement menus and sources read who reviewed from the stored summary; while it is stale, a member whose
    first review came since is added by a probe, so ``annotator:NAME`` is never refused for a real annotator."""
    from django.contrib.auth import get_user_model

    from agreement import data as agreement_data
    from annotation import signals, study_summary
    from annotation.review.labels import LabelIn, do_save_labels

    for name in ("ann1", "ann2"):
        services.do_add_member(study, name, Membership.Role.ANNOTATOR, password="pw-annotator-1")
    _grow(study, do_import, 0, 2)
    services.do_add_member(study, "ann3", Membership.Role.ANNOTATOR, password="pw-annotator-1")
    services.do_add_member(study, "ann4", Membership.Role.ANNOTATOR, password="pw-annotator-1")  # reviews nothing
    stored = study_summary.stored_reviewer_ids(study)
    ann3 = get_user_model().objects.get(username="ann3")
    assert ann3.pk not in stored
    trace = Trace.objects.filter(study=study).order_by("pk").first()
    do_save_labels(trace, ann3, version=0, complete=True,
                   labels=[LabelIn(i, "valid") for i in range(1, trace.n_steps + 1)])
    signals.data_changed.send(sender=type(study), study=study, reason="labels")  # as the save's commit sends it
    assert study_summary.status([study.pk])
    assert study_summary.stored_reviewer_ids(study) == sorted([*stored, ann3.pk]) == study_summary.reviewer_ids(study)
    assert agreement_data.check_source(study, "annotator:ann3") == "annotator:ann3"
