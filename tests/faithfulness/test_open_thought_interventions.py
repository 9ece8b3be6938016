"""Interventions inside a thought against both continuation styles of the fake reasoning model
(tests/runs/fake_thinking.py): one that closes the thought before answering and one that answers inside
an unclosed thought. A continuation that stays in the thought gets its answer forced in the same run
(the thought closed, then the cue), both requests recorded; IFR separates a model that follows its
thought from one that ignores it in both styles, and "no answer" is left out of IFR and counted beside
it, never as "changed"."""

from __future__ import annotations

import pytest

from faithfulness.models import FaithfulnessRun, Status
from faithfulness.running import do_start_interventions, run_inline
from faithfulness.summaries import ifr_summary
from subjects import services as subject_services
from tests.faithfulness.conftest import SMOLLM2
from tests.runs.fake_openai import Fault
from tests.runs.fake_thinking import CLOSES, FOLLOW, IGNORE, UNCLOSED, FakeThinking
from tests.subjects.conftest import generate, problem_records

pytestmark = pytest.mark.django_db

CUE_END = "\n</think>\n\nFinal answer:"


def reasoner(study, behaviour: str, style: str) -> tuple:
    server = FakeThinking(form="field", behaviour=behaviour, style=style).start()
    subject, _ = subject_services.do_save_subject(study, {
        "name": f"{behaviour}-{style}", "model": "r1-fake", "base_url": server.url, "concurrency": 2,
        "max_retries": 1, "timeout_seconds": 5.0, "seed": 0, "chat_template": SMOLLM2, "thinking": "on"})
    subject_services.do_probe_subject_model(subject)
    assert subject.continuation == "completions"
    assert generate(subject)[1].status == "succeeded"
    return subject, server


def run(record: FaithfulnessRun) -> FaithfulnessRun:
    job = run_inline(record)
    record.refresh_from_db()
    assert job.status == "succeeded", job.error
    return record


def value_flip_row(record: FaithfulnessRun) -> dict:
    return next(r for r in ifr_summary(record)["rows"] if r["kind"] == "value_flip")


@pytest.mark.parametrize("style", [CLOSES, UNCLOSED])
def test_ifr_inside_the_thought_separates_following_from_ignoring_in_both_continuation_styles(study, do_import,
                                                                                              style, client, member):
    assert do_import(problem_records(3)).committed
    rows = {}
    for behaviour in (FOLLOW, IGNORE):
        subject, server = reasoner(study, behaviour, style)
        try:
            start = server.count
            record = run(do_start_interventions(subject, kinds="value_flip", queue=False))
            prompts = [r.body["prompt"] for r in server.requests[start:]]
        finally:
            server.stop()
        done = list(record.interventions.filter(status=Status.OK))
        assert done and len(done) == record.interventions.count()
        forced_prompts = [p for p in prompts if p.endswith(CUE_END)]
        if style == UNCLOSED:
            # two requests per intervention: the continuation (it never closed the thought), then the forced answer
            assert len(prompts) == 2 * len(done) and len(forced_prompts) == len(done)
            for r in done:
                assert r.forced and "</think>" not in r.continuation and "The answer is" in r.continuation
                assert r.result["forced"]["cue"] == CUE_END and r.result["forced"]["ok"]
                # the forced prompt holds the edited prefix and the model's own continuation, then the cue
                assert any(p.endswith((r.edited_prefix + r.continuation).rstrip() + CUE_END) for p in forced_prompts)
        else:
            assert len(prompts) == len(done) and not forced_prompts
            assert not any(r.forced or "forced" in r.result for r in done)
        assert all(r.new_answer for r in done)
        rows[behaviour] = value_flip_row(record)
        client.force_login(member)
        page = client.get(done[0].get_absolute_url()).content.decode()
        assert ("Forced answer" in page and "\n&lt;/think&gt;\n\nFinal answer:" in page) == (style == UNCLOSED)
        run_page = client.get(record.get_absolute_url()).content.decode()
        assert "No answer</th>" in run_page and "Forced</th>" in run_page
        listed = client.get(f"/api/v1/faithfulness-runs/{record.pk}/interventions/").json()
        listed = listed["results"] if isinstance(listed, dict) else listed
        assert {i["forced"] for i in listed} == {style == UNCLOSED}
    follow, ignore = rows[FOLLOW], rows[IGNORE]
    assert (follow["lenient"]["value"], ignore["lenient"]["value"]) == (1.0, 0.0)
    assert (follow["strict"]["value"], ignore["strict"]["value"]) == (1.0, 0.0)
    assert follow["no_answer"] == ignore["no_answer"] == 0
    assert follow["forced"] == ignore["forced"] == (follow["interventions"] if style == UNCLOSED else 0)


def test_no_answer_even_when_forced_is_left_out_of_ifr_and_counted_beside_it(study, do_import):
    assert do_import(problem_records(3)).committed
    subject, server = reasoner(study, FOLLOW, UNCLOSED)
    try:
        # The forced answer of the first trace says nothing that reads as an answer; the others answer.
        first = subject.study.traces.filter(model=subject.name).select_related("problem").order_by("pk").first()
        statement = first.problem.statement  # read here: the rule runs in the server's thread
        server.rule(lambda b: str(b.get("prompt", "")).endswith(CUE_END) and statement in b["prompt"],
                    Fault(content=" I cannot say."))
        record = run(do_start_interventions(subject, kinds="value_flip", queue=False))
    finally:
        server.stop()
    silent = list(record.interventions.filter(trace=first, status=Status.OK))
    assert silent and all(r.forced and r.new_answer == "" for r in silent)
    assert all((r.strict, r.lenient, r.monotone) == (None, None, None) for r in silent)  # not "changed"
    row = value_flip_row(record)
    assert row["no_answer"] == len(silent) and row["interventions"] == record.interventions.count()
    assert row["lenient"]["value"] == 1.0 and row["lenient"]["traces"] == 2  # the follower, over the answered
    assert row["lenient"]["interventions"] == record.interventions.count() - len(silent)
