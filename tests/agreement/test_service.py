"""The agreement service from the database: hand-computed figures (see
conftest), stored against computed scores, calibration, intervals, the
degenerate cases and reproducibility."""

from __future__ import annotations

import json
import math

import pytest

from agreement import data as ad
from agreement import services as svc
from agreement.core import intervals as agreement_intervals
from annotation import signals
from annotation.models import Step, StepLabel
from scoring import services
from tests.agreement.conftest import judge_labels

pytestmark = pytest.mark.django_db


def test_step_and_first_error_figures_of_the_worked_example(worked):
    m = svc.agreement(worked, "human", "judge:gpt")
    assert m["steps_compared"] == 10
    assert m["percent_agreement"] == pytest.approx(0.7)
    assert m["kappa"] == pytest.approx(0.29 / 0.59)  # p_o 0.7, p_e (5*6 + 3*3 + 2*1)/100 = 0.41
    assert m["kappa_binary"] == pytest.approx(0.22 / 0.42)  # p_o 0.8, p_e 0.3*0.3 + 0.7*0.7
    assert m["confusion"] == {"valid": {"valid": 4, "invalid": 1, "neutral": 0},
                              "invalid": {"valid": 1, "invalid": 2, "neutral": 0},
                              "neutral": {"valid": 1, "invalid": 0, "neutral": 1}}
    pos = {r["step"]: r for r in m["by_position"]}
    assert (pos[3]["steps"], pos[3]["agree"]) == (2, 1) and pos[5]["agree"] == 0 and pos[5]["candidate_invalid"] == 1
    # tA: reference none, judge 5; tB: both 1
    assert m["traces_compared"] == 2
    assert m["first_error_exact"] == 0.5 and m["first_error_within_1"] == 0.5
    assert (m["pb_error_traces"], m["pb_error_acc"]) == (1, 1.0)
    assert (m["pb_correct_traces"], m["pb_correct_acc"]) == (1, 0.0)
    assert m["pb_f1"] == 0.0
    # calibration: ece 0.4*0.43 + 0.4*0.465 + 0.2*0.05; brier mean of squared gaps
    assert m["steps_calibrated"] == 5
    assert m["ece"] == pytest.approx(0.368)
    assert m["brier"] == pytest.approx(0.2532)
    assert [b["count"] for b in m["reliability"]] == [1, 0, 0, 0, 0, 2, 0, 0, 0, 2]
    # provenance
    assert (m["reference"], m["candidate"], m["profile"], m["profile_version"], m["seed"]) == (
        "human", "judge:gpt", "default", 1, 0)
    assert m["scores"]["reference"]["from"] == "stored" and m["scores"]["candidate"]["from"] == "stored"


def test_too_few_traces_leave_the_correlations_undefined_with_the_reason(worked):
    m = svc.agreement(worked, "human", "judge:gpt")
    for key in ("pearson_r", "pearson_ci", "spearman_rho", "spearman_ci"):
        assert m[key] is None
        assert m["undefined"][key] == "fewer than 3 paired values (n = 2)"
    assert "pb_f1" not in m["undefined"]  # both accuracies defined: F1 is 0, not undefined
    json.dumps(m, allow_nan=False)
    for key, value in m.items():
        if key.endswith("_ci") and value is None:
            assert m["undefined"].get(key), key


def test_score_correlations_read_stored_scores_and_match_the_hand_computed_values(scored_pairs):
    no_hazard = services.resolve_profile(scored_pairs, "no-hazard")
    m = svc.agreement(scored_pairs, "human", "judge:gpt", no_hazard)
    assert m["traces_compared"] == 4 and m["profile"] == "no-hazard"
    assert m["pearson_r"] == pytest.approx(7 / 11)
    assert m["spearman_rho"] == pytest.approx(0.5)
    lo, hi = m["pearson_ci"]
    assert -1 <= lo <= m["pearson_r"] <= hi <= 1
    # ratings 9, 4, 1, 6 against the reference's P 10, 5, 0, 10
    assert m["ratings"]["traces_rated"] == 4
    assert m["ratings"]["reference"]["pearson_r"] == pytest.approx(45 / math.sqrt(34 * 68.75))


def test_sources_without_stored_scores_are_computed_like_a_recompute(scored_pairs):
    no_hazard = services.resolve_profile(scored_pairs, "no-hazard")
    stored = svc.agreement(scored_pairs, "human", "judge:gpt", no_hazard)
    # adjudicated = human here (no adjudication): same numbers, computed on the fly
    computed = svc.agreement(scored_pairs, "adjudicated", "judge:gpt", no_hazard)
    assert computed["scores"]["reference"]["from"] == "computed"
    for key in ("pearson_r", "pearson_ci", "spearman_rho", "first_error_exact", "kappa"):
        assert computed[key] == stored[key]
    # one annotator as a candidate: ann1 is the whole human consensus
    self_vs = svc.agreement(scored_pairs, "human", "annotator:ann1", no_hazard)
    assert self_vs["percent_agreement"] == 1.0 and self_vs["pearson_r"] == pytest.approx(1.0)
    assert any("own labels" in note for note in self_vs["notes"])


def test_identical_constant_sources_give_undefined_kappa_with_the_reason(study, do_import):
    from tests.agreement.conftest import labels_of, problem, trace
    from tests.conftest import jsonl

    do_import(jsonl(problem("p"), trace("t1", "p", "m", 3, labels=labels_of("ann1", "VVV"))))
    judge_labels(study, "gpt", {"t1": "VVV"})
    m = svc.agreement(study, "human", "judge:gpt")
    assert m["percent_agreement"] == 1.0
    assert m["kappa"] is None and m["kappa_binary"] is None and m["kappa_ci"] is None
    assert "same verdict ('valid')" in m["undefined"]["kappa"]
    assert m["undefined"]["kappa_ci"] == m["undefined"]["kappa"]
    assert m["pb_error_acc"] is None and "none of the compared traces" in m["undefined"]["pb_error_acc"]
    assert m["ece"] is None and m["undefined"]["ece"] == "the candidate reports no confidences"


def test_nothing_in_common_is_all_counts_zero_and_reasons(study, do_import):
    from tests.agreement.conftest import problem, trace
    from tests.conftest import jsonl

    do_import(jsonl(problem("p"), trace("t1", "p", "m", 2)))
    judge_labels(study, "gpt", {"t1": "VE"})
    m = svc.agreement(study, "human", "judge:gpt")
    assert m["steps_compared"] == 0 and m["traces_compared"] == 0
    assert m["percent_agreement"] is None
    assert m["undefined"]["percent_agreement"] == "no step was labelled by both sources"
    assert m["undefined"]["percent_agreement_ci"] == "no step was labelled by both sources"
    json.dumps(m, allow_nan=False)


def test_final_against_the_primary_judge_is_flagged(worked):
    from annotation.models import Study

    judge = worked.judges.get(name="gpt")
    Study.objects.filter(pk=worked.pk).update(primary_judge=judge)
    worked.refresh_from_db()
    m = svc.agreement(worked, "final", "judge:gpt")
    assert any("agree by construction" in note for note in m["notes"])


def test_the_same_inputs_give_the_same_numbers_and_the_seed_moves_only_intervals(worked):
    a = svc.agreement(worked, "human", "judge:gpt", seed=0)
    b = svc.agreement(worked, "human", "judge:gpt", seed=0)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    c = svc.agreement(worked, "human", "judge:gpt", seed=7)
    assert c["percent_agreement"] == a["percent_agreement"] and c["seed"] == 7
    assert c["bootstrap"]["seed"] == 7


def test_cached_report_moves_with_the_labels(worked):
    sel = svc.select(worked, {"candidate": "judge:gpt"})
    first = svc.agreement_report(sel)["metrics"]["percent_agreement"]
    assert first == pytest.approx(0.7)
    label = StepLabel.objects.get(step__trace__trace_id="tA", step__index=5, kind="judge")
    from django.utils import timezone

    label.verdict, label.updated_at = "valid", timezone.now()
    label.save()
    # As every writer of labels does (a judge run, once committed): the signal also drops the
    # study's stored summary, whose time keys the cache while it exists (agreement.data.data_version).
    signals.data_changed.send(sender=type(worked), study=worked, reason="judge")
    again = svc.agreement_report(svc.select(worked, {"candidate": "judge:gpt"}))["metrics"]["percent_agreement"]
    assert again == pytest.approx(0.8)


def test_a_calibration_scope_restricts_every_number(worked):
    from agreement import calibration
    from agreement.models import CalibrationStudy, CalibrationTrace

    cal = CalibrationStudy.objects.create(study=worked, name="only tB", reference="human", candidates=["judge:gpt"],
                                          sample_size=1)
    t_b = Step.objects.filter(trace__trace_id="tB").first().trace
    CalibrationTrace.objects.create(calibration=cal, trace=t_b, stratum="m2 / wrong", position=1)
    m = svc.agreement(worked, "human", "judge:gpt", calibration=cal)
    assert m["traces_in_scope"] == 1 and m["steps_compared"] == 5
    assert m["percent_agreement"] == pytest.approx(3 / 5)
    assert m["calibration"] == {"id": cal.pk, "name": "only tB"}
    report = calibration.calibration_report(cal)
    assert report["candidates"][0]["metrics"]["percent_agreement"] == pytest.approx(3 / 5)
    assert report["complete"] == {"human": 1, "judge:gpt": 1}


def test_unknown_sources_are_refused_with_a_plain_reason(worked):
    with pytest.raises(svc.BadSelection, match="candidate: no judge named 'nope'"):
        svc.select(worked, {"candidate": "judge:nope"})
    with pytest.raises(svc.BadSelection, match="reference: unknown label source 'robots'"):
        svc.select(worked, {"reference": "robots"})
    with pytest.raises(svc.BadSelection, match="seed: must be a whole number"):
        svc.select(worked, {"seed": "x"})
    assert ad.check_source(worked, "annotator:ann1") == "annotator:ann1"


def test_step_intervals_agree_with_a_plain_loop_over_the_same_resamples():
    import numpy as np
    import pandas as pd
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(3)
    rows = []
    for t in range(25):
        for s in range(1, rng.integers(2, 6)):
            r = rng.choice(["valid", "invalid", "neutral"], p=[0.6, 0.25, 0.15])
            c = r if rng.random() < 0.7 else rng.choice(["valid", "invalid", "neutral"])
            rows.append((t, s, r, c))
    pairs = pd.DataFrame(rows, columns=["trace_id", "step", "reference_verdict", "candidate_verdict"])
    pairs["confidence"] = np.nan
    got = agreement_intervals.step_intervals(pairs, n_resamples=200, seed=5)
    # the same index matrix, traces resampled with replacement, kappa per resample with sklearn
    traces = np.sort(pairs["trace_id"].unique())
    idx = np.random.default_rng(5).integers(0, len(traces), size=(200, len(traces)))
    by_trace = {t: g for t, g in pairs.groupby("trace_id")}
    kappas, percents = [], []
    for row in idx:
        d = pd.concat([by_trace[traces[i]] for i in row])
        percents.append(np.mean(d["reference_verdict"].to_numpy() == d["candidate_verdict"].to_numpy()))
        k = cohen_kappa_score(d["reference_verdict"], d["candidate_verdict"], labels=["valid", "invalid", "neutral"])
        kappas.append(k)
    assert got["percent_agreement_ci"] == pytest.approx(list(np.percentile(percents, [2.5, 97.5])))
    assert got["kappa_ci"] == pytest.approx(list(np.nanpercentile(kappas, [2.5, 97.5])))


def test_a_final_verdict_keeps_the_stored_summary_and_moves_the_cached_reports(worked, django_capture_on_commit_callbacks):
    """A final verdict changes no count of the study summary (it stays: the adjudication page keeps reading it),
    but the reports of the adjudicated source read it: the cache key moves with the final verdicts."""
    from annotation import study_summary
    from annotation.models import StudySummary
    from annotation.review.adjudication import do_adjudicate
    from annotation.study_summary_writer import store

    store(worked)
    before = ad.data_version(worked)
    step = Step.objects.select_related("trace__problem").get(trace__trace_id="tA", index=5)
    owner = worked.memberships.get(role="owner").user
    with django_capture_on_commit_callbacks(execute=False) as callbacks:  # the score job it queues: not yet
        do_adjudicate(step, owner, version=0, verdict="invalid", skeleton_refs=[], reason="checked by hand")
    assert ad.data_version(worked) != before
    signals.data_changed.send(sender=type(worked), study=worked, reason=study_summary.ADJUDICATION)
    assert len(callbacks) == 1 and StudySummary.objects.filter(study=worked).exists()
