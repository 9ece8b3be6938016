"""The add_judge and judge commands (docs/judges.md, "Using it")."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Job, StepLabel
from judges import services
from judges.models import MECHANISTIC, JudgeConfig

pytestmark = pytest.mark.django_db


def test_add_judge_creates_then_updates_an_llm_judge(study, capsys, tmp_path):
    call_command("add_judge", "--study", study.name, "--name", "qwen", "--base-url", "http://127.0.0.1:8080/v1",
                 "--model", "qwen2.5", "--mode", "reference-free", "--api-key-env", "QWEN_KEY", "--concurrency", "8",
                 "--temperature", "0.2", "--prompt-version", "v1")
    assert "created judge qwen" in capsys.readouterr().out
    judge = JudgeConfig.objects.get(study=study, name="qwen")
    assert (judge.provider, judge.mode, judge.api_key_env, judge.concurrency, judge.temperature) == (
        "llm", "reference-free", "QWEN_KEY", 8, 0.2)
    assert judge.prompt_version == "v1" and judge.prompts.get().version == "v1"
    prompt = tmp_path / "strict.txt"
    prompt.write_text("Be strict. {% for s in steps %}Step {{ s.number }}: {{ s.text }}\n{% endfor %}")
    call_command("add_judge", "--study", study.name, "--name", "qwen", "--base-url", "http://127.0.0.1:8080/v1",
                 "--model", "qwen2.5-14b", "--prompt-file", str(prompt), "--prompt-version", "strict")
    assert "updated judge qwen" in capsys.readouterr().out
    judge.refresh_from_db()
    assert (judge.model, judge.version, judge.prompt_version) == ("qwen2.5-14b", 2, "strict")
    assert judge.mode == "reference-free"  # not given: kept
    call_command("add_judge", "--study", study.name, "--name", "qwen", "--base-url", "http://127.0.0.1:8080/v1",
                 "--model", "qwen2.5-14b", "--prompt-version", "v1")
    judge.refresh_from_db()
    assert judge.prompt_version == "v1" and judge.version == 2 and judge.prompts.count() == 2


@pytest.mark.parametrize("args, message", [
    (["--study", "nope"], "no study named"),
    (["--name", MECHANISTIC], "built-in"),
    (["--base-url", "localhost:8080"], "base_url"),
    (["--concurrency", "0"], "concurrency"),
    (["--prompt-version", "v9"], None),
])
def test_add_judge_refuses_bad_input(study, args, message):
    base = {"--study": study.name, "--name": "j", "--base-url": "http://h/v1", "--model": "m"}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    argv = [x for pair in base.items() for x in pair]
    if message is None:  # a new judge names its first prompt version freely
        call_command("add_judge", *argv)
        assert JudgeConfig.objects.get(name="j").prompt_version == "v9"
        return
    with pytest.raises(CommandError, match=message):
        call_command("add_judge", *argv)


def test_judge_wait_runs_shows_progress_and_reports(study, make_traces, capsys):
    make_traces(4)
    call_command("judge", "--study", study.name, "--judge", MECHANISTIC, "--wait")
    captured = capsys.readouterr()
    assert "judge run" in captured.out and "succeeded: 4 of 4 traces judged, 0 failed" in captured.out
    assert "12 new" in captured.out
    assert "trace" in captured.err  # the progress bar
    assert StepLabel.objects.filter(kind="judge").count() == 12
    call_command("judge", "--study", study.name, "--judge", MECHANISTIC, "--traces", "unlabelled", "--wait")
    assert "0 of 0 traces" in capsys.readouterr().out


def test_judge_exits_non_zero_when_the_run_failed(study, make_traces, capsys):
    make_traces(2)
    JudgeConfig.objects.create(study=study, name="broken", provider="fake", model="fail")
    with pytest.raises(SystemExit) as exit_info:
        call_command("judge", "--study", study.name, "--judge", "broken", "--wait")
    assert exit_info.value.code == 1
    captured = capsys.readouterr()
    assert "failed: 2 of 2 traces judged, 2 failed" in captured.out and "every trace failed" in captured.err


def test_judge_names_the_judges_when_one_is_unknown(study):
    # The serializer's refusal, by the option's name, as the page and the API say it (by the field's).
    with pytest.raises(CommandError, match="--judge: no judge named 'gpt' in this study"):
        call_command("judge", "--study", study.name, "--judge", "gpt")


def test_judge_cancel_stops_the_run_in_progress(study, make_traces, capsys):
    make_traces(2)
    run = services.do_start_run(JudgeConfig.objects.get(study=study, name=MECHANISTIC), queue=False)
    call_command("judge", "--study", study.name, "--judge", MECHANISTIC, "--cancel")
    assert "cancelled" in capsys.readouterr().out
    assert Job.objects.get(pk=run.job_id).status == Job.Status.CANCELLED
    call_command("judge", "--study", study.name, "--judge", MECHANISTIC, "--cancel")
    assert "no run in progress" in capsys.readouterr().out
