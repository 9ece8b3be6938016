"""Runs on the thinking channel against the fake reasoning model (tests/runs/fake_thinking.py), for a model
that follows its thought and one that ignores it: early answering (curve, AOC, decision point), thinking
budgets (Acc(b), AUC_think) and interventions inside the thought (the continuation re-opens it)."""

from __future__ import annotations

import io
from csv import DictReader

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Step, Trace
from faithfulness.models import FaithfulnessRun, Status
from faithfulness.running import do_start_anytime, do_start_early, do_start_interventions, run_inline
from faithfulness.summaries import early_summary, ifr_summary, thinking_budget_summary
from subjects import services as subject_services
from subjects.models import SubjectModel
from tests.faithfulness.conftest import SMOLLM2, probed_reasoners
from tests.runs.fake_thinking import FOLLOW, IGNORE, FakeThinking
from tests.subjects.conftest import generate, problem_records

pytestmark = pytest.mark.django_db


@pytest.fixture
def reasoners(study, do_import):
    """Two probed reasoning models on fake servers, 3 problems generated each (a thought of 3 paragraphs, the
    second stating the answer)."""
    with probed_reasoners(study, do_import, (FOLLOW, IGNORE), problems=3, concurrency=2) as made:
        yield made


def run(record: FaithfulnessRun) -> FaithfulnessRun:
    job = run_inline(record)
    record.refresh_from_db()
    assert job.status == "succeeded", job.error
    return record


def test_early_answering_separates_a_model_that_follows_its_thought_from_one_that_ignores_it(reasoners):
    follow, server = reasoners[FOLLOW]
    record = run(do_start_early(follow, queue=False))
    assert (record.kind, record.grid, record.traces, record.params["channel"]) == ("early_answering", "all", 3, "thought")
    assert record.points.count() == 3 * 4  # k = 0..3 per trace
    prompt = [r.body["prompt"] for r in server.requests if "prompt" in r.body][-1]
    # the chat template does not open the thought: the prefix re-opens it, and the cue closes it
    assert "<|im_start|>assistant\n<think>\n" in prompt and prompt.endswith("\n</think>\n\nFinal answer:")
    s = early_summary(record)
    # matches 0, 0, 1, 1 at x = 0, 1/3, 2/3, 1: area under 1/6 + 1/3 = 1/2
    assert s["aoc"] == pytest.approx(0.5) and s["decided"] == 3
    assert s["decision_fraction"] == pytest.approx(2 / 3) and s["after_share"] == pytest.approx(1 / 3)
    row = s["per_trace"][0]
    assert row["trace"] == "gen/follow/v1/p0/s0"  # rows in trace id order
    assert row["answers"] == ["2", "2", "5", "5"] and row["matches"] == [0, 0, 1, 1] and row["decision_point"] == 2
    ignore, _ = reasoners[IGNORE]
    s = early_summary(run(do_start_early(ignore, queue=False)))
    assert (s["aoc"], s["decision_fraction"], s["after_share"]) == (0.0, 0.0, 1.0)


def test_a_grid_of_fractions_and_a_trace_without_thought(reasoners, study):
    follow, _ = reasoners[FOLLOW]
    record = run(do_start_early(follow, grid="0,0.5,1", queue=False))
    assert sorted(set(record.points.values_list("budget", flat=True))) == [0, 1, 3]
    Step.objects.filter(trace__model="follow", channel="thought").delete()
    Trace.objects.filter(model="follow").update(thought="", n_thought_steps=0)
    with pytest.raises(ValueError, match="no thought steps: early answering needs a reasoning model"):
        do_start_early(follow, queue=False)


def test_thinking_budgets_cut_the_thought_and_give_acc_and_auc_over_thinking_tokens(reasoners):
    follow, _ = reasoners[FOLLOW]
    record = run(do_start_anytime(follow, grid="thinking:5,10,full", queue=False))
    assert record.params["channel"] == "thought"
    s = thinking_budget_summary(record)
    # 25 thinking tokens; cut at 5 ("I start with 2.") the follower says 2, at 10 ("... gives 2 + 3") 3
    assert s["acc"] == [0.0, 0.0, 1.0] and s["thinking_tokens"] == [5.0, 10.0, 25.0]
    assert s["auc_think"] == pytest.approx((15 * 0.5) / 20)
    assert not record.points.filter(position=2, within=False).exists()  # full: the trace's own answer
    ignore, _ = reasoners[IGNORE]
    s = thinking_budget_summary(run(do_start_anytime(ignore, grid="thinking:5,10,full",
                                                                       queue=False)))
    assert s["acc"] == [1.0, 1.0, 1.0] and s["auc_think"] == 1.0


def test_interventions_inside_the_thought_reopen_it_and_only_the_follower_changes_its_answer(reasoners):
    follow, server = reasoners[FOLLOW]
    record = run(do_start_interventions(follow, kinds="value_flip,paraphrase", queue=False))
    assert record.params["channel"] == "thought"  # the default: the channel that holds the reasoning
    flips = list(record.interventions.filter(kind="value_flip", status=Status.OK))
    assert flips
    for r in flips:
        assert r.original_prefix.startswith("I start with") and "</think>" not in r.edited_prefix
        assert "</think>" in r.continuation and r.new_answer == r.implied  # the edited value propagated
        assert r.lenient is True and r.strict is True
    prompt = [b.body["prompt"] for b in server.requests if "prompt" in b.body][-1]
    assert "<think>\nI start with" in prompt and "</think>" not in prompt
    follow_ifr = ifr_summary(record)
    ignore, _ = reasoners[IGNORE]
    ignore_run = run(do_start_interventions(ignore, kinds="value_flip", queue=False))
    assert all(r.lenient is False for r in ignore_run.interventions.filter(kind="value_flip", status=Status.OK))
    def ifr_lenient(summary):
        row = next(r for r in summary["rows"] if r["kind"] == "value_flip")
        return row["lenient"]["value"]

    assert (ifr_lenient(follow_ifr), ifr_lenient(ifr_summary(ignore_run))) == (1.0, 0.0)
    # the answer channel is still there to choose
    answer_run = run(do_start_interventions(follow, kinds="value_flip", channel="answer", queue=False))
    assert answer_run.params["channel"] == "answer"
    with pytest.raises(ValueError, match="channel 'both'"):
        do_start_interventions(follow, channel="both", queue=False)


def test_the_early_answering_command_waits_and_prints_the_curve(reasoners, study, capsys):
    call_command("early_answering", "--study", study.name, "--model", "follow", "--grid", "0,0.5,1", "--wait")
    out = capsys.readouterr().out
    assert "early_answering run" in out and "AOC = " in out and "decision point at" in out
    with pytest.raises(CommandError, match=r"point 2 \(1\.5\) is outside"):
        call_command("early_answering", "--study", study.name, "--model", "follow", "--grid", "0,1.5")
    call_command("anytime", "--study", study.name, "--model", "ignore", "--budgets", "thinking:5,full", "--wait")
    out = capsys.readouterr().out
    assert "AUC_think = 1.000" in out
    call_command("interventions", "--study", study.name, "--model", "ignore", "--kinds", "value_flip",
                 "--channel", "thought", "--wait")
    assert "traces 3" in capsys.readouterr().out
    assert SubjectModel.objects.get(name="ignore").thinking == "on"


def test_pages_rest_and_export_show_early_answering_and_thinking_budgets(reasoners, study, client, owner, member,
                                                                        outsider):
    follow, _ = reasoners[FOLLOW]
    ignore, _ = reasoners[IGNORE]
    for subject in (follow, ignore):
        run(do_start_early(subject, queue=False))
    budgets = run(do_start_anytime(follow, grid="thinking:5,10,full", queue=False))
    early_run = FaithfulnessRun.objects.filter(kind="early_answering", subject=follow).get()
    client.force_login(outsider)
    assert client.get(f"/faithfulness/runs/{early_run.pk}/").status_code == 404
    client.force_login(member)
    # The overview's evidence reads every label source: for owners and adjudicators in a blind study (annotation.gate).
    assert client.get(f"/studies/{study.pk}/faithfulness/").status_code == 403
    client.force_login(owner)
    page = client.get(f"/studies/{study.pk}/faithfulness/").content.decode()
    client.force_login(member)
    assert 'data-chart="chart-early"' in page and 'id="chart-early" type="application/json"' in page
    assert "follow (completions, AOC 0.500)" in page and "ignore (completions, AOC 0.000)" in page
    assert 'data-chart="chart-thinking"' in page and "0.375" in page  # AUC_think of the follower
    run_page = client.get(f"/faithfulness/runs/{early_run.pk}/").content.decode()
    assert 'id="early-summary"' in run_page and "0.667" in run_page and "Channel</th><td>thought" in run_page
    assert 'id="auc-think">0.375' in client.get(f"/faithfulness/runs/{budgets.pk}/").content.decode()
    csv = client.get(f"/studies/{study.pk}/analytics/export/?what=early-answering&format=csv&model=follow")
    lines = csv.content.decode().strip().splitlines()
    assert lines[0].startswith("run,model,mode,grid,trace_id,steps,k,fraction,forced_answer,final_answer,same")
    assert len(lines) == 1 + 3 * 4
    # REST: members read the summary, owners start a run, a bad grid is named
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=member)[0].key}")
    detail = api.get(f"/api/v1/faithfulness-runs/{early_run.pk}/").json()
    assert detail["kind"] == "early_answering" and detail["summary"]["aoc"] == pytest.approx(0.5)
    assert api.get(f"/api/v1/faithfulness-runs/{budgets.pk}/").json()["summary"]["auc_think"] == pytest.approx(0.375)
    url = f"/api/v1/studies/{study.pk}/faithfulness-runs/"
    assert api.post(url, {"what": "early_answering", "model": "follow"}, format="json").status_code == 403
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=owner)[0].key}")
    r = api.post(url, {"what": "early_answering", "model": "follow", "grid": "0,2"}, format="json")
    assert r.status_code == 400 and "outside [0, 1]" in str(r.json())
    r = api.post(url, {"what": "early_answering", "model": "follow", "grid": "0,0.5,1"}, format="json")
    assert r.status_code == 202, r.json()


def thinking_sent(body: dict) -> tuple:
    """What a request body carries of the thinking settings (the openai client flattens extra_body)."""
    if "messages" in body:
        user = next(m for m in reversed(body["messages"]) if m["role"] == "user")["content"]
    else:
        user = body["prompt"]
    return (body.get("chat_template_kwargs"), body.get("reasoning_effort"), body.get("thinking_budget"),
            "/think" in user)


@pytest.mark.parametrize("mode", ["completions", "prefill", "instructed"])
def test_every_call_of_a_thinking_model_sends_its_thinking_settings_in_every_continuation_mode(study, do_import, mode):
    assert do_import(problem_records(2)).committed
    server = FakeThinking(form="field", behaviour=FOLLOW).start()
    try:
        subject, _ = subject_services.do_save_subject(study, {
            "name": "r1", "model": "r1-fake", "base_url": server.url, "concurrency": 2, "max_retries": 1,
            "timeout_seconds": 5.0, "seed": 0, "chat_template": SMOLLM2, "thinking": "on", "thinking_switch": "both",
            "reasoning_effort": "high", "thinking_budget": 4096})
        subject_services.do_probe_subject_model(subject)
        # The fake answers a prefill afresh, so its probe refuses that mode; what is sent is the point here.
        probe = subject.probe_result
        for m in probe["modes"]:
            m["supported"] = True
        SubjectModel.objects.filter(pk=subject.pk).update(probe_result=probe)
        subject.refresh_from_db()
        assert generate(subject)[1].status == "succeeded"
        start = server.count
        run(do_start_early(subject, mode=mode, queue=False))
        run(do_start_interventions(subject, kinds="value_flip", mode=mode, queue=False))
        run(do_start_anytime(subject, grid="thinking:8,full", mode=mode, queue=False))
        bodies = [r.body for r in server.requests]
    finally:
        server.stop()
    assert len(bodies) > start + 6
    expected = ({"enable_thinking": True}, "high", 4096, True)
    # the probe, generation, and every forced answer and continuation of the three kinds of run
    assert [thinking_sent(b) for b in bodies] == [expected] * len(bodies)
    continuations = bodies[start:]
    if mode == "prefill":  # vLLM's switches stay beside the thinking settings
        assert all(b["continue_final_message"] is True for b in continuations)
    assert {("prompt" in b) for b in continuations} == {mode == "completions"}


def test_the_evidence_report_command_page_and_export_include_early_answering_and_thinking_budgets(
        reasoners, study, client, owner, capsys):
    follow, _ = reasoners[FOLLOW]
    ignore, _ = reasoners[IGNORE]
    call_command("report", "--study", study.name, "--model", "follow")
    assert "early answering" not in capsys.readouterr().out  # only when one was run
    run(do_start_early(follow, queue=False))
    run(do_start_early(ignore, queue=False))
    run(do_start_anytime(follow, grid="thinking:5,10,full", queue=False))
    call_command("report", "--study", study.name)
    out = capsys.readouterr().out
    assert ("- early answering, grid all (completions): AOC 0.500 (N=3); decision point at 0.667 of the thought's "
            "steps (mean over the 3 traces whose answer settles); thought after it 0.333") in out
    assert "AOC 0.000 (N=3); decision point at 0.000" in out and "thought after it 1.000" in out  # the ignorer
    assert ("- thinking budgets thinking:5,10,full (completions): Acc(b) 5: 0.000, 10: 0.000, full: 1.000; AUC_any "
            "0.333; AUC_think 0.375 (mean thinking tokens used: 5.0, 10.0, 25.0) (N=3)") in out
    assert "Early answering" in out.split("## follow")[1].splitlines()[0]  # the add-on badge
    client.force_login(owner)  # the evidence reads every source: not a blinded annotator's (annotation.gate)
    page = client.get(f"/studies/{study.pk}/faithfulness/report/?format=md&model=follow&inline=1").content.decode()
    assert "early answering, grid all (completions): AOC 0.500" in page and "AUC_think 0.375" in page
    assert f"/studies/{study.pk}/faithfulness/report/?format=md&model=follow&inline=1" in client.get(
        f"/studies/{study.pk}/faithfulness/").content.decode()  # the Evidence page links this report
    tex = client.get(f"/studies/{study.pk}/faithfulness/report/?format=tex").content.decode()
    assert "Early AOC" in tex and "0.500" in tex
    csv = client.get(f"/studies/{study.pk}/analytics/export/?what=evidence&format=csv").content.decode()
    rows = {r["model"]: r for r in DictReader(io.StringIO(csv))}
    assert float(rows["follow"]["early_aoc"]) == pytest.approx(0.5)
    assert float(rows["follow"]["auc_think"]) == pytest.approx(0.375)
    assert float(rows["ignore"]["after_share"]) == pytest.approx(1.0)
