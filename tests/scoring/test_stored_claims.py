"""The score recompute's thought recoveries read the claim keys the mechanistic judge stored
(annotation.TraceClaims) and parse only the traces without current ones: the numbers are the same
either way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotation import stored_claims
from annotation.models import Step, TraceClaims
from judges import services as judge_services
from reasonlib.verifier.corrections import claim_keys
from reasonlib.verifier.stored_claims import CLAIMS_VERSION
from reasonlib.verifier.verdicts import find_claims
from scoring import score_jobs
from scoring.models import ScoreSet, TraceScore
from tests.conftest import jsonl
from tests.judges.conftest import run_judge
from tests.scoring.thought_fixtures import seed_thinking

pytestmark = pytest.mark.django_db

GSM8K = Path(__file__).resolve().parents[2] / "annotation" / "demo_data" / "gsm8k" / "example_model_solutions.jsonl"
MODELS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")


def _lines(text: str) -> tuple[list[str], str]:
    """A GSM8K solution's steps and its final "A: N" line."""
    lines = [line for line in text.split("\n") if line.strip()]
    return lines[:-1], lines[-1]


def _recheck(steps: list[str]) -> list[str]:
    """A re-check of the steps' arithmetic as a reasoning model writes one: each claim that is false worked
    out again ("Wait, 16 - 3 = 13"), where the value is a whole number."""
    out = []
    for step in steps:
        for c in find_claims(step):
            if not c.ok and c.value is not None and c.value.denominator == 1:
                out.append(f"Wait, {c.lhs} = {c.value.numerator}.")
    return out


def thinking_demo(n_problems: int) -> bytes:
    """The demo's GSM8K solutions as reasoning models' traces: each solution's steps are the thought, its
    "A: N" line the answer; every second trace then checks its work in the thought with the reference
    solution's steps and works its false claims out again, so some errors are recovered and others not."""
    records: list[dict] = []
    for i, line in enumerate(GSM8K.read_text(encoding="utf-8").splitlines()[:n_problems]):
        rec = json.loads(line)
        ref_steps, ref_answer = _lines(rec["ground_truth"])
        gold = ref_answer.removeprefix("A:").strip()
        records.append({"kind": "problem", "problem_id": f"g{i}", "statement": rec["question"], "gold_answer": gold})
        for k, model in enumerate(MODELS):
            steps, answer = _lines(rec[model]["solution"])
            thought = steps + (["Let me check that again.", *ref_steps, *_recheck(steps)] if (i + k) % 2 else [])
            if not thought:
                continue
            records.append({"kind": "trace", "problem_id": f"g{i}", "model": model, "trace_id": f"g{i}/{model}",
                            "thought": "\n".join(thought), "thought_steps": thought, "steps": [answer],
                            "answer": answer.removeprefix("A:").strip(), "answer_correct": rec[model]["is_correct"]})
    return jsonl(*records)


def _numbers(study) -> dict[tuple, tuple]:
    """Every stored number of every trace under every source and profile, and each set's recoveries."""
    fields = [f.name for f in TraceScore._meta.concrete_fields if f.name not in ("id", "score_set", "trace")]
    out = {}
    for row in TraceScore.objects.filter(score_set__study=study).values(
            "score_set__source", "score_set__profile__name", "trace__trace_id", *fields):
        key = (row.pop("score_set__source"), row.pop("score_set__profile__name"), row.pop("trace__trace_id"))
        out[key] = tuple(row[f] for f in fields)
    assert "recovered_errors" in fields and "first_unrecovered" in fields
    for ss in ScoreSet.objects.filter(study=study).select_related("profile"):
        out[(ss.source, ss.profile.name, "recoveries")] = tuple(map(tuple, ss.recoveries))
    return out


def test_scores_are_the_same_from_stored_claims_and_from_parsing_the_steps(study, do_import):
    report = do_import(thinking_demo(150))
    assert report.committed, report.rejected[:3]
    run_judge(judge_services.ensure_mechanistic(study))
    n_traces = study.traces.count()
    assert TraceClaims.objects.filter(trace__study=study).count() == n_traces
    score_jobs.recompute(study, warm=False)
    from_stored = _numbers(study)

    TraceClaims.objects.filter(trace__study=study).delete()
    score_jobs.recompute(study, warm=False)
    parsed = _numbers(study)

    assert from_stored == parsed
    default = list(TraceScore.objects.filter(score_set__study=study, score_set__profile__name="default")
                   .values_list("recovered_errors", "thought_errors"))
    assert len(default) >= n_traces  # every trace scored under the judge (and the final labels)
    # The data has both kinds: errors a later step re-derives, and errors none does.
    assert sum(r for r, _ in default) > 0 and sum(t - r for r, t in default) > 0


def test_half_stored_half_parsed_gives_the_same_scores(study, do_import):
    report = do_import(thinking_demo(80))
    assert report.committed, report.rejected[:3]
    run_judge(judge_services.ensure_mechanistic(study))
    score_jobs.recompute(study, warm=False)
    all_stored = _numbers(study)
    pks = sorted(TraceClaims.objects.filter(trace__study=study).values_list("pk", flat=True))
    TraceClaims.objects.filter(pk__in=pks[::2]).delete()
    TraceClaims.objects.filter(pk__in=pks[1::4]).update(version=CLAIMS_VERSION - 1)
    score_jobs.recompute(study, warm=False)
    assert _numbers(study) == all_stored


def _r2(study):
    return TraceScore.objects.get(score_set__study=study, score_set__source="judge:mech",
                                  score_set__profile__name="default", trace__trace_id="r2")


def test_the_recompute_reads_what_is_stored_and_parses_what_is_stale(study):
    traces = seed_thinking(study)
    r2 = traces["r2"]
    texts = list(Step.objects.filter(trace=r2).order_by("index").values_list("text", flat=True))
    keys = [claim_keys(t) for t in texts]
    assert keys[0] == (("16-3",), ())  # "16 - 3 = 12": wrong, and no later step re-derives 16 - 3
    # Stored keys that say thought step 3 gets 16 - 3 right: only a recompute that reads them sees a recovery.
    keys[2] = ((), ("16-3",))
    stored_claims.write([(r2.pk, keys)])
    score_jobs.recompute(study, warm=False)
    assert (_r2(study).thought_errors, _r2(study).recovered_errors) == (1, 1)

    TraceClaims.objects.filter(pk=r2.pk).update(version=CLAIMS_VERSION - 1)  # an older parser's: parsed again
    score_jobs.recompute(study, warm=False)
    assert (_r2(study).thought_errors, _r2(study).recovered_errors) == (1, 0)

    stored_claims.write([(r2.pk, keys[:-1])])  # the current version again, but one step short: parsed again
    assert TraceClaims.objects.get(pk=r2.pk).version == CLAIMS_VERSION
    score_jobs.recompute(study, warm=False)
    assert (_r2(study).thought_errors, _r2(study).recovered_errors) == (1, 0)
