"""The evidence per model from what a study holds: tiers, SVR/VSR per verifier
and policy, halting, the report in three formats, and the leaderboard's tier
card coming from the same source."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from faithfulness.core import tiers
from faithfulness.evidence import evidence, report
from judges import services as judge_services
from judges.models import MECHANISTIC, JudgeConfig
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db

REGIME = {"model": "m0-2026", "temperature": 0.0, "top_p": None, "seed": 1, "max_tokens": 512, "k": 1,
          "prompt_template": "zero-shot", "tool_access": "none"}


def records():
    out = []
    for p in range(3):
        gold = p + 5
        out.append({"kind": "problem", "problem_id": f"p{p}", "statement": f"Ann has {p} and 5. Sum?",
                    "gold_answer": str(gold)})
        # m0: the answer only (no steps), with its regime
        out.append({"kind": "trace", "problem_id": f"p{p}", "model": "m0", "trace_id": f"p{p}/m0", "steps": [],
                    "answer": str(gold), "regime": REGIME})
        # m1: steps; the last trace ends before it reaches the gold answer
        steps = [f"{p} + 5 = {gold}", f"The answer is {gold}."] if p < 2 else [f"{p} + 4 = {gold - 1}"]
        out.append({"kind": "trace", "problem_id": f"p{p}", "model": "m1", "trace_id": f"p{p}/m1", "steps": steps,
                    "answer": str(gold if p < 2 else gold - 1)})
        # m2: human labels: p0 valid/valid, p1 valid/invalid, p2 neutral/neutral
        verdicts = [("valid", "valid"), ("valid", "invalid"), ("neutral", "neutral")][p]
        out.append({"kind": "trace", "problem_id": f"p{p}", "model": "m2", "trace_id": f"p{p}/m2",
                    "steps": [f"{p} + 5 = {gold}", f"So it is <b>{gold}</b>."], "answer": str(gold),
                    "labels": [{"step": i + 1, "verdict": v, "annotator": "ann"} for i, v in enumerate(verdicts)]})
    return jsonl(*out)


@pytest.fixture
def held(study, do_import):
    report = do_import(records())
    assert report.committed, report.rejected
    return study


def by_model(study, **kw):
    return {ev.model: ev for ev in evidence(study, **kw)}


def test_the_tier_of_each_model_follows_what_the_study_holds(held):
    evs = by_model(held)
    t = {m: tiers.tier(ev) for m, ev in evs.items()}
    assert (t["m0"].level, t["m0"].complete) == (0, True)
    assert (t["m1"].level, t["m1"].label) == (1, "L1 (incomplete)")
    assert (t["m2"].level, t["m2"].qualifier) == (2, "human")
    assert evs["m0"].regime["temperature"] == [0.0] and evs["m0"].with_regime == 3


def test_svr_vsr_per_verifier_with_the_neutral_policy_and_unverifiable_count(held):
    v = by_model(held)["m2"].verifiers[0]
    assert v.kind == "human"
    assert v.validity == {"policy": "exclude", "svr": pytest.approx(0.75), "vsr": 0.5, "vsr_and_correct": 0.5,
                          "n": 2, "unverifiable": 1}
    lenient = by_model(held, policy="valid")["m2"].verifiers[0].validity
    assert (lenient["n"], lenient["svr"], lenient["vsr"]) == (3, pytest.approx(2.5 / 3), pytest.approx(2 / 3))


def test_the_mechanistic_verifier_makes_level_2_mechanistic(held):
    mech = JudgeConfig.objects.get(study=held, name=MECHANISTIC)
    judge_services.run_inline(judge_services.do_start_run(mech, queue=False))
    evs = by_model(held)
    assert tiers.tier(evs["m1"]).qualifier == "mechanistic"
    assert [v.kind for v in evs["m2"].verifiers] == ["mechanistic", "human"]
    assert evs["m1"].checker_version.startswith("mechanistic verifier mechanistic v")


def test_halting_counts_false_and_late_stops_with_denominators(held):
    h = by_model(held)["m1"].halting
    # p0, p1: the gold answer is stated at step 1 and the trace goes on to step 2 (late); p2 never states it (false).
    assert {k: h[k] for k in ("instances", "k_star_defined", "false_stop", "late_stop")} == {
        "instances": 3, "k_star_defined": 2, "false_stop": 1, "late_stop": 2}
    assert by_model(held)["m0"].halting is None  # no steps: no k*


def test_the_report_names_every_missing_item_in_markdown_latex_and_json(held):
    md = report(held, "m1", "md")
    assert "## m1 — L1 (incomplete)" in md
    assert "5. SVR / VSR: no step labels" in md and "6. IFR: no interventions run" in md
    assert tiers.CAVEAT in md
    tex = report(held, None, "tex")
    assert tex.count(r" \\") == 4 and "L2 (incomplete) (human) + Halting" in tex
    data = json.loads(report(held, None, "json"))
    assert [d["model"] for d in data] == ["m0", "m1", "m2"]
    assert data[0]["tier"]["label"] == "L0" and data[2]["headline"]["svr"] == pytest.approx(0.75)
    with pytest.raises(ValueError, match="no traces of model 'zz'.*m0, m1, m2"):
        report(held, "zz", "md")
    with pytest.raises(ValueError, match="unknown report format"):
        report(held, None, "pdf")


def test_the_leaderboard_tier_card_comes_from_the_evidence_report(client, owner, held):
    from scoring import score_jobs

    score_jobs.recompute(held, warm=False)
    client.force_login(owner)
    page = client.get(reverse("scoring-leaderboard", args=[held.pk])).content.decode()
    assert page.count("Level 0</span>") == 1 and page.count("Level 1</span>") == 1
    assert page.count("Level 2</span>") == 1 and '<span class="tag">human</span>' in page
    assert page.count(">incomplete</span>") == 2  # m1 and m2 record no regime
    assert reverse("faithfulness-report", args=[held.pk]) in page


def test_the_report_command_writes_each_format(held, tmp_path, capsys):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    call_command("report", "--study", held.name, "--model", "m2", "--format", "md")
    assert "## m2 — L2 (incomplete) (human)" in capsys.readouterr().out
    out = tmp_path / "r.tex"
    call_command("report", "--study", held.name, "--format", "tex", "--out", str(out))
    assert out.read_text().startswith(r"\begin{table}")
    with pytest.raises(CommandError, match="no study named"):
        call_command("report", "--study", "nope")
