"""``export --what traces``: the study in the canonical import format round-trips -- export, import
into a new study, export again gives a file with the same hash (issue 23 item 9)."""

from __future__ import annotations

import hashlib
import io
import json
from collections import Counter
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from annotation import services
from annotation.importing.pipeline import import_stream
from annotation.models import Membership, Problem, Skeleton, SkeletonStep, Step, Study, Trace, TraceReview
from scoring import exports
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db

DEMO = Path(settings.BASE_DIR) / "annotation" / "demo_data" / "gsm8k" / "example_model_solutions.jsonl"
DEMO_LABELS = sorted((Path(settings.BASE_DIR) / "annotation" / "demo_data" / "gsm8k_labels").glob("labels_*.jsonl"))
R1 = Path(settings.BASE_DIR) / "tests" / "data" / "thinking" / "r1_three_ways.jsonl"


def export_file(study: Study, path: Path) -> str:
    call_command("export", study=study.name, what="traces", out=path, stderr=io.StringIO())
    return hashlib.sha256(path.read_bytes()).hexdigest()


def round_trip(study: Study, owner, tmp_path: Path) -> tuple[Path, Path, Study]:
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    h1 = export_file(study, first)
    copy, _ = services.do_get_or_create_study(study.name + " copy", owner=owner)
    with first.open("rb") as fh:
        report = import_stream(copy, fh)
    assert report.committed, report.rejected[:3]
    assert not report.rejected
    h2 = export_file(copy, second)
    if h1 != h2:
        diff = next((a, b) for a, b in zip(first.read_text().splitlines(), second.read_text().splitlines(),
                                           strict=False) if a != b)
        pytest.fail(f"the re-exported file differs; first differing line:\n{diff[0][:600]}\n{diff[1][:600]}")
    return first, second, copy


def test_the_demo_study_round_trips(study, owner, do_import, tmp_path):
    report = do_import(DEMO.read_bytes(), "gsm8k-solutions")
    assert report.committed
    for path in DEMO_LABELS:
        assert do_import(path.read_bytes()).committed
    first, _, copy = round_trip(study, owner, tmp_path)
    lines = [json.loads(line) for line in first.read_text().splitlines()]
    assert sum(r["kind"] == "problem" for r in lines) == Problem.objects.filter(study=study).count() == 1319
    assert len({r["trace_id"] for r in lines if r["kind"] == "trace"}) == Trace.objects.filter(study=study).count() \
        == 5276
    # 40 traces rated by both annotators: a second line carries the second annotator's rating.
    assert sum(r["kind"] == "trace" for r in lines) == 5276 + 40
    # The copy holds the same steps, labels, ratings and correctness verdicts as the original.
    for field in ("trace_id", "n_steps", "answer", "answer_correct", "answer_origin"):
        assert sorted(Trace.objects.filter(study=study).values_list(field, flat=True)) == \
            sorted(Trace.objects.filter(study=copy).values_list(field, flat=True)), field
    labelled = [r for r in lines if r.get("labels")]
    assert len({lab["annotator"] for r in labelled for lab in r["labels"]}) == 2
    def reviews(s: Study) -> Counter:
        return Counter(TraceReview.objects.filter(trace__study=s).values_list("trace__trace_id", "annotator__username",
                                                                             "rating", "complete"))

    assert reviews(study) == reviews(copy) and sum(reviews(study).values()) > 0
    manifest = json.loads((tmp_path / "first.jsonl.manifest.json").read_text())
    assert manifest["counts"]["traces"] == 5276 and manifest["counts"]["rows"] == 1319 + 5276 + 40


EXTRA = [
    {"kind": "problem", "problem_id": "gsm8k/0", "statement": "Janet's ducks lay 16 eggs ...", "gold_answer": "18",
     "skeleton": [{"text": "16-3-4=9", "check": "16-3-4=9"}, {"text": "9*2=18", "check": "9*2=18"}],
     "skeleton_status": "draft", "meta": {"source": "md-eval-cot"}},
    {"kind": "trace", "problem_id": "gsm8k/0", "model": "openai/gpt-oss-120b", "trace_id": "oss/field",
     "reasoning": "We compute: 16 eggs total.\n\nShe eats 3, bakes 4 => uses 7. Remainder = 9 eggs sold at $2 = $18.",
     "raw": "Eggs left: 16 - 3 - 4 = 9\nShe makes 9 * 2 = $18.\nAnswer: 18",
     "labels": [{"step": 1, "verdict": "valid", "annotator": "carol"},
                {"step": 2, "verdict": "invalid", "annotator": "carol", "note": "bakes 4 <b>muffins</b>"},
                {"step": 3, "verdict": "valid", "annotator": "dave", "skeleton_refs": [1], "confidence": 0.5}],
     "rating": 7, "regime": {"model": "openai/gpt-oss-120b", "temperature": 0.6, "thinking": "on"}},
    {"kind": "trace", "problem_id": "gsm8k/0", "model": "openai/gpt-oss-120b", "trace_id": "oss/harmony",
     "raw": "<|channel|>analysis<|message|>We compute: 16-3-4=9; 9*2=18.<|end|><|start|>assistant<|channel|>final"
            "<|message|>She makes $18.\nAnswer: 18<|return|>"},
    {"kind": "trace", "problem_id": "gsm8k/0", "model": "api/encrypted", "trace_id": "inspect/blocks",
     "thought_blocks": [{"text": "Added the eggs up.", "redacted": True, "summary": True},
                        {"text": "Then doubled nine."}],
     "raw": "9 eggs at $2 is $18.\nAnswer: 18"},
]


def test_a_study_with_thought_steps_round_trips(study, owner, do_import, tmp_path):
    report = do_import(R1.read_bytes() + jsonl(*EXTRA))
    assert report.committed, report.rejected
    # A reviewer's decision and a later skeleton version are part of the study too.
    t = Trace.objects.get(study=study, trace_id="inspect/blocks")
    t.answer_correct, t.answer_origin = False, Trace.AnswerOrigin.REVIEWER
    t.save()
    problem = Problem.objects.get(study=study, problem_id="math/330")
    skel = Skeleton.objects.create(problem=problem, version=1, status=Skeleton.Status.APPROVED)
    SkeletonStep.objects.create(skeleton=skel, position=1, text="innermost 1+3=4", check_expr="1+3=4")
    problem.approved_skeleton = skel
    problem.save()

    first, _, copy = round_trip(study, owner, tmp_path)
    records = {r.get("trace_id") or r["problem_id"]: r for r in map(json.loads, first.read_text().splitlines())}
    assert records["gsm8k/0"]["skeleton_status"] == "draft" and records["math/330"]["skeleton_status"] == "approved"
    assert records["inspect/blocks"]["answer_correct"] is False
    assert records["oss/field"]["rating"] == 7 and records["oss/field"]["labels"][0]["annotator"] == "carol"
    assert "thought" not in records["oss/field"]["meta"]  # the parser's findings are derived again
    assert records["r1-330/cut"]["prompt_opens_thought"] is True
    for tid in ("r1-330/mid-thought", "r1-330/inline", "r1-330/separate", "r1-330/cut", "oss/field", "oss/harmony",
                "inspect/blocks"):
        a = Trace.objects.get(study=study, trace_id=tid)
        b = Trace.objects.get(study=copy, trace_id=tid)
        assert a.n_thought_steps > 0, tid
        assert (a.thought, a.raw, a.answer, a.n_thought_steps, a.n_steps, a.thought_truncated, a.steps_hash) == \
            (b.thought, b.raw, b.answer, b.n_thought_steps, b.n_steps, b.thought_truncated, b.steps_hash), tid
        assert a.meta == b.meta, tid  # meta["thought"] (form, blocks, redacted flags) is found again
        assert list(Step.objects.filter(trace=a).values_list("index", "channel", "text", "start", "end")) == \
            list(Step.objects.filter(trace=b).values_list("index", "channel", "text", "start", "end")), tid
    assert Trace.objects.get(study=copy, trace_id="inspect/blocks").answer_origin == Trace.AnswerOrigin.IMPORTED


def test_traces_exports_are_for_owners_and_adjudicators(study, owner, member, outsider, do_import, client):
    assert do_import(R1.read_bytes()).committed
    annotator = Membership.objects.get(study=study, user=member)
    with pytest.raises(exports.ExportForbidden):
        exports.build(exports.ExportRequest(study=study, what="traces", membership=annotator))
    url = f"/studies/{study.pk}/analytics/export/?what=traces&format=jsonl"
    client.force_login(member)
    assert client.get(url).status_code == 403
    client.force_login(outsider)
    assert client.get(url).status_code in (403, 404)
    client.force_login(owner)
    response = client.get(url)
    assert response.status_code == 200
    kinds = [json.loads(line)["kind"] for line in response.content.decode().splitlines()]
    assert kinds == ["problem"] + ["trace"] * 4
