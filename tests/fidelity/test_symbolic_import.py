"""``--format gsm-symbolic``: templates instantiated with a seed, published instances, each linked
to its GSM8K original; the per-instance-set accuracy distribution on the fake generation server."""

from __future__ import annotations

import io
import json
import math
import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotation.importing.pipeline import import_stream
from annotation.models import Problem
from fidelity.imported import symbolic_accuracy
from fidelity.models import Variant
from fidelity.symbolic_import import import_symbolic

pytestmark = pytest.mark.django_db
DATA = Path(__file__).resolve().parent.parent / "data"
SYM = DATA / "gsm_symbolic"


def _gsm8k(study) -> None:
    assert import_stream(study, io.BytesIO((DATA / "gsm8k" / "test_head.jsonl").read_bytes()), "gsm8k").committed


def test_templates_and_generated_instances_become_linked_problems(study):
    _gsm8k(study)
    report = import_symbolic(study, SYM, instances=4, seed=7)
    # 3 templates x 4 instances + 2 published instances
    assert report.committed and report.problems_created == 14, report.rejected
    p = Problem.objects.get(problem_id="gsmsym-symbolic-0000-s7-2")
    info = p.meta["fidelity_import"]
    values = p.meta["values"]
    assert p.gold_answer == str(int(values["x"]) + int(values["y"])) and int(values["x"]) > int(values["y"])
    assert f"has {values['x']} apples and buys {values['y']} more" in p.statement and "{" not in p.statement
    assert info["original_problem_id"] == "gsm8k-test-0000" and info["instance"] == 2
    v = Variant.objects.get(problem=p)
    assert v.original.problem_id == "gsm8k-test-0000" and v.suite.name == "gsm-symbolic" and v.strategy == "symbolic"
    assert Variant.objects.get(problem__problem_id="gsmsym-symbolic-0001-s7-0").original.problem_id == "gsm8k-test-0001"
    assert Variant.objects.filter(strategy="p1").count() == 4
    g = Problem.objects.get(problem_id="gsmsym-symbolic-0000-1")
    assert g.gold_answer == "17" and g.statement.startswith("Mia has 12 apples")
    assert Variant.objects.filter(suite__name="gsm-symbolic").count() == 14


def test_the_same_seed_gives_the_same_instances_and_another_seed_others(study, tmp_path):
    _gsm8k(study)
    import_symbolic(study, SYM, instances=3, seed=1)
    first = dict(Problem.objects.filter(problem_id__contains="-s1-").values_list("problem_id", "statement"))
    again = import_symbolic(study, SYM, instances=3, seed=1)
    assert again.problems_created == 0 and again.unchanged == 11
    import_symbolic(study, SYM, instances=3, seed=2)
    second = dict(Problem.objects.filter(problem_id__contains="-s2-").values_list("problem_id", "statement"))
    assert len(first) == len(second) == 9
    assert sorted(first.values()) != sorted(second.values())


def test_bad_files_are_named_and_nothing_is_written(study, tmp_path):
    root = tmp_path / "gsm"
    shutil.copytree(SYM, root)
    (root / "templates" / "symbolic" / "0002.json").write_text(json.dumps(
        {"id_orig": 0, "question_annotated": "{x} apples\n#init:\n- $x = range(1, 3)\n#conditions:\n- x > 5\n#answer: x"}))
    (root / "generated_data" / "GSM_p2.jsonl").write_text('{"id": 1, "instance": 0, "question": "q"}\n')
    report = import_symbolic(study, root, instances=2)
    reasons = " | ".join(r["reason"] for r in report.rejected)
    assert not report.committed and not Problem.objects.exists()
    assert "templates/symbolic/0002.json: instance 0: the template's conditions were not met" in reasons
    assert 'generated_data/GSM_p2.jsonl line 1: missing field "answer"' in reasons
    assert import_symbolic(study, root, instances=0).rejected[0]["reason"].startswith("--instances must be")
    assert "no templates/" in import_symbolic(study, tmp_path / "gsm" / "templates" / "p1" / "0000.json").rejected[0][
        "reason"]


def test_the_command_takes_instances_and_seed(study, capsys):
    call_command("import_traces", "--study", study.name, "--format", "gsm-symbolic", "--instances", "2", "--seed", "5",
                 str(SYM))
    assert "read" in capsys.readouterr().out
    assert Problem.objects.filter(problem_id__contains="-s5-").count() == 6
    with pytest.raises(CommandError, match="does not apply"):
        call_command("import_traces", "--study", study.name, "--format", "abstraction-outputs", "--model", "m",
                     "--seed", "5", str(SYM))


def test_accuracy_over_instance_sets_on_the_fake_generation_server(study, subject, tmp_path, capsys):
    """The fake server answers the sum of the question's numbers: right on every "x + y" instance,
    right on "x boxes of 2 pens" only when x is 2, wrong on the p1 "x + y - z" instances."""
    _gsm8k(study)
    report = import_symbolic(study, SYM / "templates", instances=6, seed=3)
    assert report.committed and report.problems_created == 18, report.rejected
    call_command("fidelity", "--study", study.name, "--model", "tiny", "--suite", "gsm-symbolic", "--axes", "imported",
                 "--problems", "first:2", "--wait")
    dists = symbolic_accuracy(study, "tiny")
    assert set(dists) == {"symbolic", "p1"}
    sym = dists["symbolic"]
    assert len(sym.sets) == 6 and all(s.n == 2 for s in sym.sets)
    boxes = [Problem.objects.get(problem_id=f"gsmsym-symbolic-0001-s3-{i}") for i in range(6)]
    twos = [p.meta["values"]["x"] == "2" for p in boxes]
    # set i: the sum template right, the boxes template right iff x == 2
    assert [s.correct for s in sym.sets] == [1 + t for t in twos]
    accs = [(1 + t) / 2 for t in twos]
    mean = sum(accs) / 6
    assert math.isclose(sym.mean, mean) and math.isclose(sym.sd, math.sqrt(sum((a - mean) ** 2 for a in accs) / 6))
    assert sym.per_template == {"symbolic/0000": (6, 6), "symbolic/0001": (sum(twos), 6)}
    assert dists["p1"].mean == 0.0 and dists["p1"].per_template == {"p1/0000": (0, 6)}
    # the tidy export: the same numbers, one row per set, per template, and the mean and sd
    out = tmp_path / "sym.jsonl"
    call_command("export", "--study", study.name, "--what", "gsm-symbolic", "--out", str(out))
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    sets = [r for r in rows if r["variant"] == "symbolic" and r["level"] == "set"]
    assert [r["correct"] for r in sets] == [s.correct for s in sym.sets] and {r["model"] for r in rows} == {"tiny"}
    summary = {r["level"]: r["accuracy"] for r in rows if r["variant"] == "symbolic" and r["level"] in ("mean", "sd")}
    assert summary == pytest.approx({"mean": sym.mean, "sd": sym.sd})
    assert {(r["key"], r["correct"]) for r in rows if r["level"] == "template"} == {
        ("symbolic/0000", 6), ("symbolic/0001", sum(twos)), ("p1/0000", 0)}


def test_the_fidelity_page_shows_the_distribution_to_members_only(client, study, member, outsider):
    _gsm8k(study)
    import_symbolic(study, SYM / "generated_data")
    from tests.conftest import jsonl

    recs = [{"kind": "trace", "problem_id": "gsmsym-symbolic-0000-0", "model": "<b>m</b>", "steps": ["x"], "answer": "10"},
            {"kind": "trace", "problem_id": "gsmsym-symbolic-0000-1", "model": "<b>m</b>", "steps": ["x"], "answer": "1"}]
    assert import_stream(study, io.BytesIO(jsonl(*recs)), "reasonaudit").committed
    study.blind = True  # a blind annotator still sees model accuracies (no one's verdicts are in them)
    study.save(update_fields=["blind"])
    client.force_login(member)
    page = client.get(f"/studies/{study.pk}/fidelity/").content.decode()
    assert "&lt;b&gt;m&lt;/b&gt;" in page and "<b>m</b>" not in page
    assert "1.00, 0.00" in page and "symbolic/0000 1/2" in page and "what=gsm-symbolic" in page
    client.force_login(outsider)
    assert client.get(f"/studies/{study.pk}/fidelity/").status_code == 404


@pytest.mark.parametrize("wrap", ["GSM-Symbolic", ""])
def test_an_uploaded_archive_imports_with_the_forms_instances_and_seed(client, owner, study, wrap,
                                                                      django_capture_on_commit_callbacks):
    import zipfile

    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    from annotation.models import Job

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for p in sorted(SYM.rglob("*")):
            if p.is_file():
                zf.write(p, f"{wrap}/{p.relative_to(SYM)}" if wrap else str(p.relative_to(SYM)))
    _gsm8k(study)
    client.force_login(owner)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("study-import", args=[study.pk]), {
            "format": "gsm-symbolic", "instances": "2", "seed": "4",  # no model name: this format needs none
            "file": SimpleUploadedFile("gsm-symbolic.zip", buffer.getvalue())})
    assert response.status_code == 302, response.content.decode()[:2000]
    job = Job.objects.get(study=study, kind=Job.Kind.IMPORT, params__format="gsm-symbolic")
    assert job.status == Job.Status.SUCCEEDED, (job.error, job.result)
    assert job.params["options"] == {"instances": 2, "seed": 4}
    assert Problem.objects.filter(problem_id__contains="-s4-").count() == 6  # 3 templates x 2
    assert Variant.objects.filter(suite__name="gsm-symbolic").count() == 8  # and the 2 published instances


def test_the_form_refuses_out_of_range_instances_with_the_field(client, owner, study):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    client.force_login(owner)
    response = client.post(reverse("study-import", args=[study.pk]), {
        "format": "gsm-symbolic", "instances": "500", "file": SimpleUploadedFile("g.zip", b"PK")})
    assert response.status_code == 400
    assert "less than or equal to 200" in response.content.decode()
