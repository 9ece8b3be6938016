"""The Evidence summaries read the study chunk by chunk of traces (issue 33: 1 GB at 1M traces): the result
is the same whatever the chunk size, for every model, verifier kind, neutral policy, the halting rates (the
skeleton references of the chosen source) and the step counts."""

from __future__ import annotations

import json

import pytest

from annotation.models import Step, StepLabel
from faithfulness.core import tiers
from faithfulness.core.step_counts import StepCounts
from faithfulness.evidence import HUMAN_SOURCE, _judge_sources, _refs_source, _scope_labels, compute_summaries
from faithfulness.models import EvidenceSummary
from judges import services as judge_services
from judges.models import MECHANISTIC, JudgeConfig
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db

VERDICTS = ("valid", "invalid", "neutral")


def records() -> bytes:
    out = []
    for p in range(5):
        a, b = p + 2, 3
        gold = a + b
        out.append({"kind": "problem", "problem_id": f"p{p}", "statement": f"Ann has {a} and gets {b}. Sum?",
                    "gold_answer": f"${gold}" if p == 3 else str(gold),
                    **({"skeleton": [{"text": f"{a} + {b} = {gold}"}, {"text": f"answer {gold}"}]} if p % 2 == 0
                       else {})})
        for m, model in enumerate(("m0", "m1", "m2")):
            n = (p + m) % 4  # 0..3 steps: some traces without steps, medians over odd and even counts
            steps = [f"{a} + {b} = {gold}" if i == n - 1 else f"Step {i + 1}: {a} and {b}" for i in range(n)]
            labels = [{"step": i + 1, "verdict": VERDICTS[(p + i + m) % 3], "annotator": "ann",
                       "skeleton_refs": [1] if i == 0 and p % 2 == 0 else []} for i in range(n)]
            if p % 2:
                labels += [{"step": i + 1, "verdict": VERDICTS[(p + i) % 3], "annotator": "bob"} for i in range(n)]
            out.append({"kind": "trace", "problem_id": f"p{p}", "model": model, "trace_id": f"p{p}/{model}",
                        "steps": steps, "answer": str(gold if (p + m) % 3 else gold + 1), "labels": labels,
                        "regime": {"model": model, "temperature": 0.1 * m, "seed": p % 2} if m != 1 else {}})
    return jsonl(*out)


@pytest.fixture
def rich(study, owner, do_import):
    report = do_import(records())
    assert report.committed, report.rejected
    mech = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    judge_services.run_inline(judge_services.do_start_run(mech, queue=False))
    # References on some of the verifier's labels (whatever it found): the source halting reads first.
    StepLabel.objects.filter(judge=mech, step__index=1, step__trace__problem__problem_id__in=["p0", "p4"]) \
        .update(skeleton_refs=[1])
    llm = JudgeConfig.objects.create(study=study, name="gpt", provider=JudgeConfig.Provider.LLM, model="m-judge")
    steps = list(Step.objects.filter(trace__study=study).order_by("trace_id", "index"))
    StepLabel.objects.bulk_create(
        [StepLabel(step=s, kind=StepLabel.Kind.JUDGE, judge=llm, verdict=VERDICTS[(s.pk + 1) % 3],
                   skeleton_refs=[2] if s.index == 2 else []) for s in steps[::2]]
        + [StepLabel(step=s, kind=StepLabel.Kind.ADJUDICATION, annotator=owner, verdict="invalid")
           for s in steps[1::5]])
    return study


def test_the_summaries_do_not_depend_on_the_chunk_size(rich):
    whole = compute_summaries(rich, chunk_size=10_000)
    part = whole["exclude"]
    assert sorted(part) == ["m0", "m1", "m2"]
    kinds = {v["kind"] for p in part.values() for v in p["verifiers"]}
    assert kinds == {tiers.MECHANISTIC, tiers.JUDGE, tiers.HUMAN}
    assert all(p["halting"] for p in part.values())
    assert any("on 0 traces" not in p["halting"]["basis"] for p in part.values())  # skeleton references read
    for size in (1, 2, 3):
        assert compute_summaries(rich, chunk_size=size) == whole
    one = compute_summaries(rich, "m1", chunk_size=1)
    assert one == compute_summaries(rich, "m1", chunk_size=10_000)
    assert list(one["exclude"]) == ["m1"]


def test_the_score_job_stores_what_is_computed(rich):
    from faithfulness.evidence import store_summaries

    assert store_summaries(rich) == 9  # 3 models x 3 policies
    stored = {(r.policy, r.model): r.data for r in EvidenceSummary.objects.filter(study=rich)}
    computed = compute_summaries(rich, chunk_size=1)
    # As JSON stores it: skeleton lengths as keys become text.
    assert stored == {(policy, name): json.loads(json.dumps(part))
                      for policy, per in computed.items() for name, part in per.items()}


def test_halting_reads_the_mechanistic_verifiers_references_first(rich):
    labels = _scope_labels(rich, None)
    judges = _judge_sources(rich)
    assert _refs_source(labels, judges)[0] == tiers.MECHANISTIC
    StepLabel.objects.filter(kind=StepLabel.Kind.JUDGE, judge__provider=JudgeConfig.Provider.MECHANISTIC).update(
        skeleton_refs=[])
    # The human source's first label comes before the LLM judge's.
    assert _refs_source(labels, judges) == HUMAN_SOURCE


def test_references_an_adjudication_replaced_do_not_count(study, owner, do_import):
    records = [{"kind": "problem", "problem_id": "p", "statement": "2 and 3?", "gold_answer": "5",
                "skeleton": [{"text": "2 + 3 = 5"}]},
               {"kind": "trace", "problem_id": "p", "model": "m", "steps": ["2 + 3 = 5"], "answer": "5",
                "labels": [{"step": 1, "verdict": "valid", "annotator": "ann", "skeleton_refs": [1]}]}]
    assert do_import(jsonl(*records)).committed
    labels, judges = _scope_labels(study, None), _judge_sources(study)
    assert _refs_source(labels, judges) == HUMAN_SOURCE
    StepLabel.objects.create(step=Step.objects.get(trace__study=study), kind=StepLabel.Kind.ADJUDICATION,
                             annotator=owner, verdict="valid")
    assert _refs_source(labels, judges) is None
    halting = compute_summaries(study)["exclude"]["m"]["halting"]
    assert halting["basis"].startswith("k* from skeleton references and the gold answer on 0 traces")


@pytest.mark.parametrize("counts", [[3], [1, 2], [2, 2, 5, 1], [4, 4, 4, 7, 1, 1, 9], list(range(1, 12))])
def test_step_counts_give_the_statistics_of_the_whole_list(counts):
    import statistics

    tally = StepCounts()
    for n in counts:
        tally.add(n)
    assert tally.mean() == statistics.fmean(counts)
    median = tally.median()
    assert median == statistics.median(counts) and type(median) is type(statistics.median(counts))
    assert tally.max() == max(counts)


def test_another_studys_traces_between_the_chunks_traces_are_not_counted(study, owner, do_import):
    from annotation import services

    other, _ = services.do_get_or_create_study("Study B", owner=owner)
    lines = records().decode().splitlines()
    problems = [line for line in lines if '"kind": "problem"' in line]
    traces = [line for line in lines if '"kind": "trace"' in line]
    half = len(traces) // 2
    for target, part in ((study, traces[:half]), (other, traces), (study, traces[half:])):
        assert do_import(("\n".join(problems + part) + "\n").encode(), target=target).committed
    # One chunk spans the other study's traces (and their labels); chunks of one trace never do.
    assert compute_summaries(study, chunk_size=10_000) == compute_summaries(study, chunk_size=1)
    assert compute_summaries(study)["exclude"]["m1"]["traces"] == 5


def test_the_mean_completion_tokens_are_of_each_subject_models_reported_counts(rich, study):
    """The tier card's trace length in tokens: the mean of the completion tokens the server reported, per subject
    model (averaged by the database, not read row by row); a generation without a count is left out."""
    from annotation.models import Trace
    from faithfulness.evidence import evidence
    from subjects import services as subject_services
    from subjects.models import Generation

    subject, _ = subject_services.do_save_subject(study, {"name": "m1", "model": "m1",
                                                          "base_url": "http://127.0.0.1:9/v1"})
    for trace, tokens in zip(Trace.objects.filter(study=study, model="m1").order_by("pk"), (10, 20, 35, None),
                             strict=False):
        Generation.objects.create(subject=subject, config_version=subject.version, problem=trace.problem, sample=0,
                                  trace=trace, completion_tokens=tokens)
    by_model = {ev.model: ev.tokens_mean for ev in evidence(study)}
    assert by_model["m1"] == pytest.approx(65 / 3) and by_model["m0"] is None
