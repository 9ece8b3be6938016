"""MenatQA and GSM-Plus through the import pipeline, linked to their originals; PDR per perturbation type."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from annotation.importing.pipeline import import_stream
from annotation.models import Problem
from fidelity.core import complexity
from fidelity.imported import pdr
from fidelity.models import Variant
from fidelity.suites import link_imports
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db
DATA = Path(__file__).resolve().parent.parent / "data"
DEMO = Path(__file__).resolve().parents[2] / "annotation" / "demo_data" / "gsm8k" / "example_model_solutions.jsonl"


def test_menatqa_items_become_problems_with_their_dataset_counterfactual(study):
    report = import_stream(study, io.BytesIO((DATA / "menatqa_sample.json").read_bytes()), "menatqa")
    assert report.committed and report.problems_created == 6, report.rejected
    p = Problem.objects.get(problem_id="menatqa-1")
    assert p.gold_answer == "Thailand national football team" and p.meta["time_scope"] == ["1996", "1998"]
    assert p.statement.endswith("Question: Which team did Ann Lee play for from 1996 to 1998?")
    linked = link_imports(study)
    assert linked.linked == 3 and not linked.unmatched
    v = Variant.objects.get(problem__problem_id="menatqa-1-updated")
    assert v.original == p and v.gold == Variant.Gold.GIVEN and v.strategy == "menatqa-counterfactual"
    assert link_imports(study).linked == 0  # idempotent
    # the question alone decides the hops: one sentence, a time scope
    assert complexity.hops(p.meta["question"], p.meta["time_scope"]).category == "2-hop"


def test_a_menatqa_item_missing_a_field_names_the_index_and_field(study):
    items = json.loads((DATA / "menatqa_sample.json").read_text())
    del items[1]["updated_answer"]
    report = import_stream(study, io.BytesIO(json.dumps(items).encode()), "menatqa")
    assert not report.committed
    assert report.rejected[0]["line"] == 2 and 'missing field "updated_answer"' in report.rejected[0]["reason"]
    assert not Problem.objects.exists()


def test_gsm_plus_variants_link_to_the_gsm8k_problems_and_give_pdr(study):
    report = import_stream(study, io.BytesIO(DEMO.read_bytes()), "gsm8k-solutions")
    assert report.committed
    report = import_stream(study, io.BytesIO((DATA / "gsm_plus_sample.jsonl").read_bytes()), "gsm-plus")
    assert report.committed and report.problems_created == 24, report.rejected
    linked = link_imports(study)
    assert linked.linked == 24 and not linked.unmatched
    seed = Problem.objects.get(problem_id="gsm8k-test-0000")
    kinds = set(Variant.objects.filter(original=seed).values_list("strategy", flat=True))
    assert kinds == {"numerical substitution", "distractor insertion", "problem understanding"}
    # traces of a model on the seeds and variants: correct on every seed, wrong on the numerical substitutions
    recs = []
    for v in Variant.objects.select_related("problem", "original"):
        wrong = v.strategy == "numerical substitution"
        recs.append({"kind": "trace", "problem_id": v.problem.problem_id, "model": "m", "steps": ["x"],
                     "answer": "-1" if wrong else v.problem.gold_answer})
    for pid, gold in {(v.original.problem_id, v.original.gold_answer) for v in Variant.objects.select_related("original")}:
        recs.append({"kind": "trace", "problem_id": pid, "model": "m", "steps": ["x"], "answer": gold})
    assert import_stream(study, io.BytesIO(jsonl(*recs)), "reasonaudit").committed
    rows = {r.perturbation: r for r in pdr(study, "m")}
    assert rows["numerical substitution"].pdr == 1.0 and rows["numerical substitution"].seed_only == 8
    assert rows["distractor insertion"].pdr == 0.0 and rows["distractor insertion"].both == 8


def test_the_formats_are_offered_by_the_import_command(study, capsys):
    call_command("import_traces", "--study", study.name, "--format", "gsm-plus", str(DATA / "gsm_plus_sample.jsonl"))
    assert Problem.objects.filter(problem_id__startswith="gsmplus-").count() == 24


def test_the_command_prints_the_pdr_table(study, capsys):
    import_stream(study, io.BytesIO(DEMO.read_bytes()), "gsm8k-solutions")
    import_stream(study, io.BytesIO((DATA / "gsm_plus_sample.jsonl").read_bytes()), "gsm-plus")
    link_imports(study)
    recs = [{"kind": "trace", "problem_id": v.problem.problem_id, "model": "m", "steps": ["x"], "answer": "-1"}
            for v in Variant.objects.select_related("problem")]
    recs += [{"kind": "trace", "problem_id": pid, "model": "m", "steps": ["x"], "answer": gold} for pid, gold in
             {(v.original.problem_id, v.original.gold_answer) for v in Variant.objects.select_related("original")}]
    import_stream(study, io.BytesIO(jsonl(*recs)), "reasonaudit")
    call_command("fidelity", "--study", study.name, "--model", "m", "--pdr", "--suite", "gsm-plus")
    out = capsys.readouterr().out
    assert "problem understanding" in out and "1.000" in out


def test_a_run_over_the_imported_axis_gives_pdr_on_generated_traces(study, subject, capsys):
    import_stream(study, io.BytesIO(DEMO.read_bytes()), "gsm8k-solutions")
    import_stream(study, io.BytesIO((DATA / "gsm_plus_sample.jsonl").read_bytes()), "gsm-plus")
    call_command("fidelity", "--study", study.name, "--model", "tiny", "--suite", "gsm-plus", "--axes", "imported",
                 "--problems", "first:2", "--wait")
    out = capsys.readouterr().out
    assert "24 linked" in out and "on 8 problem(s), axes imported" in out  # 2 originals, 6 variants
    rows = pdr(study, "tiny")
    assert sum(r.n for r in rows) == 6
    assert {r.perturbation for r in rows} == {"numerical substitution", "distractor insertion", "problem understanding"}
