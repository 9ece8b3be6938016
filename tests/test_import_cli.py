"""``manage.py import_traces`` (README.md, docs/import-format.md): the study is created if
missing, the report is printed (one JSON object with ``--json``), the exit
status is 1 when anything was rejected, and every run is a recorded Job."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Job, Membership, Problem, Step, Study, Trace
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db

from tests.data_paths import GSM8K_SOLUTIONS  # noqa: E402

GOOD = jsonl(
    {"kind": "problem", "problem_id": "p1", "statement": "2+2?", "gold_answer": "4"},
    {"kind": "trace", "problem_id": "p1", "model": "m", "trace_id": "t1", "raw": "2+2 = 4\nA: 4"},
    {"kind": "trace", "problem_id": "p1", "model": "m", "steps": ["2+2 = 5"], "answer": "5"},
)
BAD = jsonl(
    {"kind": "problem", "problem_id": "p1", "statement": "2+2?", "gold_answer": "4"},
    "{broken",
    {"kind": "trace", "problem_id": "p1", "model": "m", "steps": ["2+2 = 4"]},
    {"kind": "trace", "problem_id": "nowhere", "model": "m", "steps": ["x"]},
)
REPORT_KEYS = {"read", "problems_created", "traces_created", "steps_created", "unchanged", "rejected"}


def run(path: Path, *, study: str = "CLI study", **opts) -> tuple[int, str]:
    """(exit status, stdout) of one import_traces run."""
    out = io.StringIO()
    try:
        call_command("import_traces", str(path), study=study, stdout=out, **opts)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


def write(tmp_path: Path, data: bytes, name: str = "traces.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_it_creates_the_study_and_prints_one_json_report(tmp_path):
    assert not Study.objects.filter(name="CLI study").exists()
    status, out = run(write(tmp_path, GOOD), json=True)
    assert status == 0
    assert len(out.strip().splitlines()) == 1
    report = json.loads(out)
    assert REPORT_KEYS <= set(report)
    assert report["read"] == 3
    assert (report["problems_created"], report["traces_created"], report["steps_created"]) == (1, 2, 2)
    assert report["unchanged"] == 0 and report["rejected"] == []
    study = Study.objects.get(name="CLI study")
    assert Trace.objects.filter(study=study).count() == 2
    assert Trace.objects.get(trace_id="t1").answer_correct is True


def test_it_imports_into_an_existing_study(tmp_path, study):
    status, out = run(write(tmp_path, GOOD), study=study.name, json=True)
    assert status == 0
    assert Study.objects.filter(name=study.name).count() == 1
    assert Problem.objects.get().study == study
    # The owner stays the owner; the command adds no members of its own.
    assert Membership.objects.filter(study=study).count() == 2


def test_a_second_run_reports_everything_unchanged(tmp_path):
    path = write(tmp_path, GOOD)
    run(path, json=True)
    status, out = run(path, json=True)
    report = json.loads(out)
    assert status == 0
    assert (report["problems_created"], report["traces_created"], report["steps_created"]) == (0, 0, 0)
    assert report["unchanged"] == 3
    assert Trace.objects.count() == 2


def test_a_bad_line_exits_1_and_writes_nothing(tmp_path):
    status, out = run(write(tmp_path, BAD), json=True)
    assert status == 1
    report = json.loads(out)
    assert [r["line"] for r in report["rejected"]] == [2, 4]
    assert "JSON" in report["rejected"][0]["reason"]
    assert "nowhere" in report["rejected"][1]["reason"]
    assert report["committed"] is False
    assert (report["problems_created"], report["traces_created"], report["steps_created"]) == (0, 0, 0)
    assert (Problem.objects.count(), Trace.objects.count(), Step.objects.count()) == (0, 0, 0)


def test_skip_invalid_keeps_the_good_lines_and_still_exits_1(tmp_path):
    status, out = run(write(tmp_path, BAD), json=True, skip_invalid=True)
    assert status == 1
    report = json.loads(out)
    assert report["committed"] is True and report["status"] == "partial"
    assert Job.objects.get(kind=Job.Kind.IMPORT).status == Job.Status.PARTIAL  # issue 23: not "succeeded"
    assert [r["line"] for r in report["rejected"]] == [2, 4]
    assert (report["problems_created"], report["traces_created"]) == (1, 1)
    assert (Problem.objects.count(), Trace.objects.count(), Step.objects.count()) == (1, 1, 1)


def test_the_text_report_names_every_rejected_line(tmp_path):
    status, out = run(write(tmp_path, BAD))
    assert status == 1
    assert "created study 'CLI study'" in out
    assert "read 4 lines" in out
    assert "line 2: not valid JSON" in out
    assert 'line 4: problem "nowhere"' in out
    assert "nothing was imported" in out


def test_the_text_report_of_a_good_file(tmp_path):
    status, out = run(write(tmp_path, GOOD))
    assert status == 0
    assert "read 3 lines: 1 problems, 2 traces, 2 steps" in out
    assert "0 rejected" in out


def test_each_run_is_recorded_as_an_import_job_with_its_report(tmp_path):
    path = write(tmp_path, GOOD)
    _, out = run(path, json=True)
    job = Job.objects.get(kind=Job.Kind.IMPORT)
    assert job.kind == Job.Kind.IMPORT and job.status == Job.Status.SUCCEEDED
    assert job.study.name == "CLI study"
    assert job.params["format"] == "reasonaudit" and job.params["skip_invalid"] is False
    assert job.params["filename"] == str(path.resolve())
    assert json.loads(out)["job"] == job.pk
    assert job.result["traces_created"] == 2 and job.result["rejected"] == []
    assert job.finished_at is not None and job.error == ""

    run(write(tmp_path, BAD, "bad.jsonl"), json=True)
    failed = Job.objects.filter(kind=Job.Kind.IMPORT).exclude(pk=job.pk).get()
    assert failed.status == Job.Status.FAILED
    assert [r["line"] for r in failed.result["rejected"]] == [2, 4]
    assert "2 line(s) rejected" in failed.error


def test_the_format_option_picks_the_adapter(tmp_path):
    rows = [{"prompt": "1+1?", "completions": ["1+1 = 2"], "labels": [True]}]
    status, out = run(write(tmp_path, jsonl(*rows)), format="trl-stepwise", json=True)
    assert status == 0
    assert json.loads(out)["traces_created"] == 1
    assert Job.objects.get(kind=Job.Kind.IMPORT).params["format"] == "trl-stepwise"


def test_a_missing_file_is_a_command_error(tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        run(tmp_path / "absent.jsonl")
    assert not Study.objects.exists()


def test_the_full_gsm8k_model_solutions_file(tmp_path):
    expected = Counter()
    totals = Counter()
    with GSM8K_SOLUTIONS.open() as fh:
        for line in fh:
            for model, sol in json.loads(line).items():
                if isinstance(sol, dict) and "solution" in sol:
                    totals[model] += 1
                    expected[model] += bool(sol["is_correct"])

    status, out = run(GSM8K_SOLUTIONS, study="GSM8K", format="gsm8k-solutions", json=True)
    assert status == 0, out
    report = json.loads(out)
    assert report["rejected"] == []
    assert (report["read"], report["problems_created"], report["traces_created"], report["steps_created"]) == (
        1319,
        1319,
        5276,
        17876,
    )
    study = Study.objects.get(name="GSM8K")
    assert Problem.objects.filter(study=study).count() == 1319
    assert Trace.objects.filter(study=study).count() == 5276
    assert Step.objects.filter(trace__study=study).count() == 17876
    assert Problem.objects.filter(study=study, approved_skeleton__isnull=True).count() == 0

    correct = Counter(Trace.objects.filter(study=study, answer_correct=True).values_list("model", flat=True))
    seen = Counter(Trace.objects.filter(study=study).values_list("model", flat=True))
    assert seen == totals
    assert len(totals) == 4
    for model in totals:
        assert correct[model] / seen[model] == expected[model] / totals[model], model


def test_the_demo_labels_match_the_demo_traces_exactly(tmp_path):
    """The bundled AI-annotator label files must import cleanly on top of the demo data."""
    from annotation.models import StepLabel
    from demo.management.commands import demo

    assert len(demo.DEMO_LABELS) == 2
    status, out = run(GSM8K_SOLUTIONS, study="Labels", format="gsm8k-solutions", json=True)
    assert status == 0
    for path in demo.DEMO_LABELS:
        status, out = run(path, study="Labels", json=True)
        report = json.loads(out)
        assert status == 0 and report["rejected"] == [] and report["traces_created"] == 0
        assert report["unchanged"] == 40 and report["labels_created"] == 121
    assert StepLabel.objects.filter(kind="human", annotator__username__startswith="ai-annotator-").count() == 242


def test_the_text_report_of_a_partial_import_says_partial(tmp_path):
    status, out = run(write(tmp_path, BAD), skip_invalid=True)
    assert status == 1
    assert "partial: 2 line(s) rejected and skipped; the rest was imported" in out
    assert "nothing was imported" not in out


def test_an_unterminated_object_is_reported_where_it_ends(tmp_path):
    # Issue 23: the error is at the end of the line (column 68 here), not "column 1".
    line = '{"kind": "problem", "problem_id": "p1", "statement": "2+2?", "gold"'
    assert len(line) == 67
    path = tmp_path / "cut.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    status, out = run(path)
    assert status == 1
    assert "line 1: not valid JSON: Expecting ':' delimiter at column 68" in out
