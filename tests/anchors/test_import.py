"""The thought-anchors import format: a problem folder becomes a trace whose thought steps carry the published
per-sentence values and function tags (tests/data/thought_anchors: a small sample in the published layout);
the real base solutions of ../shared/data import as traces with thought and answer."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from anchors.importing import import_analysis
from anchors.models import StepImportance
from annotation.models import Membership, Step, StepTag, Trace
from scoring import exports

pytestmark = pytest.mark.django_db

DATA = Path(__file__).parent.parent / "data" / "thought_anchors"
SAMPLE = DATA / "tiny-r1"
# A real base solution, copied unchanged from ../shared/data (MIT; tests/data/thought_anchors/README.md).
REAL = DATA / "deepseek-r1-distill-qwen-14b" / "correct_base_solution" / "problem_330"


def test_a_problem_folder_becomes_a_trace_with_the_published_values_and_tags(study):
    report = import_analysis(study, SAMPLE)
    assert report.committed and not report.rejected
    assert (report.traces_created, report.chunks, report.chunks_aligned, report.steps_with_values) == (1, 10, 9, 9)
    assert report.notes == ["9 of 10 published chunks aligned to thought steps; 9 steps got the published values, "
                            "9 function tags imported"]
    trace = Trace.objects.get(study=study)
    assert trace.trace_id == "ta/tiny-r1/correct/7" and trace.model == "tiny-r1"
    assert trace.answer == "14" and trace.answer_correct is True and trace.problem.gold_answer == "14"
    assert trace.thought.startswith("Okay, so I need") and "</think>" not in trace.thought
    steps = list(Step.objects.filter(trace=trace, channel="thought").order_by("index"))
    assert len(steps) == 9 and steps[2].text == "Let me first work out the green marbles, then add everything up."
    rows = {r.step.index: r for r in StepImportance.objects.filter(trace=trace).select_related("step")}
    assert set(rows) == {s.index for s in steps}
    assert {r.source_name for r in rows.values()} == {"imported:thought-anchors"}
    plan = rows[steps[3].index]  # the chunk "Green marbles are twice ..." (index 3): accuracy 0.95
    assert plan.accuracy == 0.95 and plan.resampling_importance_accuracy == pytest.approx(-0.05)
    assert rows[steps[6].index].depends_on == [steps[3].index, steps[5].index]  # "3" and "5" as chunk indexes
    tags = dict(StepTag.objects.filter(step__trace=trace, kind="imported").values_list("step__index", "tag")
                .order_by("step__index"))
    assert tags[steps[2].index] == "plan_generation" and tags[steps[4].index] == "uncertainty_management"
    assert set(StepTag.objects.filter(step__trace=trace).values_list("origin", flat=True)) == {"thought-anchors"}

    again = import_analysis(study, SAMPLE)  # idempotent: the same trace, the values replaced, not doubled
    assert again.committed and again.traces_created == 0 and again.unchanged == 2  # the problem and the trace
    assert StepImportance.objects.filter(trace=trace).count() == 9
    assert StepTag.objects.filter(step__trace=trace).count() == 9


def test_the_command_says_how_many_chunks_aligned_and_the_export_names_the_source(study, owner, member):
    out = io.StringIO()
    call_command("import_traces", str(SAMPLE), "--study", study.name, "--format", "thought-anchors", stdout=out)
    assert "9 of 10 published chunks aligned to thought steps" in out.getvalue()
    out = io.StringIO()
    call_command("export", "--study", study.name, "--what", "step-importance", "--format", "csv", stdout=out)
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert len(rows) == 9 and {r["source"] for r in rows} == {"imported:thought-anchors"}
    assert rows[2]["tags"] == "imported:thought-anchors:plan_generation" and rows[6]["depends_on"]
    # A blinded annotator's export holds the values but no other source's tags.
    study.blind = True
    study.save()
    her = Membership.objects.get(study=study, user=member)
    table = exports.build(exports.ExportRequest(study=study, what="step-importance", membership=her))
    blind_rows = list(table.records())
    assert len(blind_rows) == 9 and {r["tags"] for r in blind_rows} == {""}


def test_a_broken_folder_is_refused_naming_the_file(study, tmp_path):
    folder = tmp_path / "problem_1"
    folder.mkdir()
    (folder / "base_solution.json").write_text(json.dumps({"solution": "x </think> 1"}))
    (folder / "problem.json").write_text(json.dumps({"problem": "1?", "gt_answer": "1"}))
    (folder / "chunks_labeled.json").write_text(json.dumps([{"no_chunk": 1}]))
    report = import_analysis(study, folder)
    assert not report.committed and "chunks_labeled.json" in report.rejected[0]["reason"]
    assert not Trace.objects.filter(study=study).exists()


def test_a_real_base_solution_imports_as_a_trace_with_thought_and_answer(study):
    report = import_analysis(study, REAL)
    assert report.committed and report.traces_created == 1 and report.chunks == 0 and report.notes == []
    trace = Trace.objects.get(study=study)
    assert trace.model == "deepseek-r1-distill-qwen-14b" and trace.answer == "88572" and trace.answer_correct
    assert trace.thought.startswith("Okay, so I've got this math problem") and trace.n_thought_steps > 5


def test_the_upload_form_takes_an_archive_of_problem_folders(owner, study, django_capture_on_commit_callbacks):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client
    from django.urls import reverse

    from annotation.models import Job
    from tests.annotation.views.test_studies import _zip_of

    web = Client()
    web.force_login(owner)
    with django_capture_on_commit_callbacks(execute=True):
        response = web.post(reverse("study-import", args=[study.pk]), {
            "format": "thought-anchors", "file": SimpleUploadedFile("ta.zip", _zip_of(DATA, wrap="thought_anchors"))})
    assert response.status_code == 302, response.content.decode()[:2000]
    job = Job.objects.get(study=study, kind=Job.Kind.IMPORT)
    assert job.status == Job.Status.SUCCEEDED, (job.error, job.result)
    assert job.result["traces_created"] == 2 and job.result["chunks_aligned"] == 9
    assert set(Trace.objects.filter(study=study).values_list("model", flat=True)) == {
        "tiny-r1", "deepseek-r1-distill-qwen-14b"}


def test_the_review_page_shows_the_heat_map_top_anchors_and_dependencies(study, owner, member):
    from django.test import Client

    import_analysis(study, SAMPLE)
    trace = Trace.objects.get(study=study)
    web = Client()
    web.force_login(owner)
    page = web.get(f"/traces/{trace.pk}/").content.decode()
    assert 'id="step-importance"' in page and page.count('<a class="heat') == 9
    assert "imported:thought-anchors" in page and 'id="top-anchors"' in page
    # the measure toggles (htmx): resampling importance in accuracy form; the largest |value| first
    panel = web.get(f"/traces/{trace.pk}/step-importance/",
                    {"measure": "resampling_importance_accuracy"}).content.decode()
    top = panel.split('id="top-anchors"')[1]
    assert top.index("Green marbles are twice") < top.index("Okay, so I need")  # 0.21 before 0.02
    assert 'title="imported:thought-anchors">active_computation<' in top  # the step's published tag
    assert '<a href="#s4">4</a>, <a href="#s6">6</a>' in web.get(
        f"/traces/{trace.pk}/step-importance/", {"measure": "forced_importance_accuracy"}).content.decode()
    # a blinded annotator sees the values but not the imported tags
    study.blind = True
    study.save()
    web.force_login(member)
    blind = web.get(f"/traces/{trace.pk}/step-importance/").content.decode()
    assert '<a class="heat' in blind and "uncertainty_management" not in blind and "none you may see" in blind
