"""Web pages of judges: permissions on every page, the configuration form,
the prompt editor with history and a preview on a real trace, starting a run
and following it, and constant query counts on the lists."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from annotation.models import Job, StepLabel
from judges import services
from judges.models import MECHANISTIC, JudgeConfig, JudgeRun
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db


@pytest.fixture
def judge(study):
    judge, _ = services.do_save_judge(study, {"name": "gpt", "model": "gpt-x", "base_url": "http://127.0.0.1:9/v1"})
    return judge


@pytest.fixture
def run(study, make_traces):
    make_traces(2)
    mechanistic = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    run = services.do_start_run(mechanistic, queue=False)
    services.run_inline(run)
    return run


def read_pages(study, judge, run) -> list[str]:
    return [reverse("judge-list", args=[study.pk]), reverse("judge", args=[judge.pk]),
            reverse("judge-prompt", args=[judge.pk]), reverse("judge-disagreements", args=[judge.pk]),
            reverse("judge-run", args=[run.pk])]


def owner_pages(study, judge) -> list[str]:
    return [reverse("judge-create", args=[study.pk]), reverse("judge-edit", args=[judge.pk])]


def test_anonymous_users_sign_in_first_and_outsiders_get_404(client, study, judge, run, outsider):
    pages = read_pages(study, judge, run) + owner_pages(study, judge)
    for url in pages:
        assert client.get(url).status_code == 302, url
    assert client.post(reverse("judge-run-start", args=[judge.pk])).status_code == 302
    client.force_login(outsider)
    for url in pages:
        assert client.get(url).status_code == 404, url
    assert client.post(reverse("judge-run-start", args=[judge.pk])).status_code == 404


def test_members_see_the_pages_but_cannot_change_judges(client, study, judge, run, member):
    client.force_login(member)
    # The study is blind: the disagreements page lists other sources' verdicts (tests/test_security_defects.py).
    blind_only = reverse("judge-disagreements", args=[judge.pk])
    for url in read_pages(study, judge, run):
        assert client.get(url).status_code == (403 if url == blind_only else 200), url
    for url in owner_pages(study, judge):
        assert client.get(url).status_code == 403, url
    assert client.post(reverse("judge-run-start", args=[judge.pk])).status_code == 403
    response = client.post(reverse("judge-prompt", args=[judge.pk]), {"action": "save", "template": "x"})
    assert response.status_code == 403
    page = client.get(reverse("judge-list", args=[study.pk])).content.decode()
    assert "New LLM judge" not in page and "Run on unlabelled" not in page


def test_the_study_navigation_links_to_the_judges(client, study, member):
    client.force_login(member)
    page = client.get(reverse("study", args=[study.pk])).content.decode()
    assert f'href="{reverse("judge-list", args=[study.pk])}"' in page


def test_the_owner_creates_and_edits_a_judge_on_the_web(client, study, owner):
    client.force_login(owner)
    url = reverse("judge-create", args=[study.pk])
    data = {"name": "local", "model": "qwen", "base_url": "http://127.0.0.1:8080/v1", "mode": "reference-free",
            "output_mode": "auto", "temperature": 0, "max_tokens": 1024, "concurrency": 4, "max_retries": 3,
            "timeout_seconds": 60, "price_input_per_mtok": 0, "price_output_per_mtok": 0}
    response = client.post(url, data)
    judge = JudgeConfig.objects.get(study=study, name="local")
    assert response.status_code == 302 and response["Location"] == reverse("judge", args=[judge.pk])
    assert judge.mode == "reference-free" and judge.prompts.count() == 1
    assert client.post(url, data).status_code == 400  # the name is taken
    assert client.post(url, {**data, "name": "x2", "base_url": "not a url"}).status_code == 400
    edit = reverse("judge-edit", args=[judge.pk])
    assert client.post(edit, {**data, "model": "qwen-14b"}).status_code == 302
    judge.refresh_from_db()
    assert (judge.model, judge.version) == ("qwen-14b", 2)
    mechanistic = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    assert client.get(reverse("judge-edit", args=[mechanistic.pk])).status_code == 404


def test_the_prompt_editor_saves_versions_and_keeps_the_history(client, study, judge, owner):
    client.force_login(owner)
    url = reverse("judge-prompt", args=[judge.pk])
    assert client.post(url, {"action": "save", "template": "Steps: {{ n_steps }}", "note": "shorter"}).status_code == 302
    assert client.post(url, {"action": "save", "template": "Steps: {{ n_steps }}"}).status_code == 302  # unchanged
    response = client.post(url, {"action": "save", "template": "{% if %}"})
    assert response.status_code == 400 and "does not compile" in response.content.decode()
    judge.refresh_from_db()
    assert judge.prompt_version == "2" and judge.prompt_template == "Steps: {{ n_steps }}"
    page = client.get(url).content.decode()
    assert re.findall(r'<a href="\?version=(\d+)">', page) == ["2", "1"] and "shorter" in page
    old = client.get(url, {"version": "1"}).content.decode()
    assert "Gold answer: {{ gold_answer }}" in old  # the first (default) template, to look at or restore


def test_the_preview_renders_the_prompt_for_a_chosen_real_trace(client, study, judge, owner, member, do_import):
    do_import(jsonl({"kind": "problem", "problem_id": "p", "statement": "What is <b>2</b>+3?", "gold_answer": "5"},
                    {"kind": "trace", "problem_id": "p", "model": "m", "trace_id": "tr-1", "steps": ["2+3=5"],
                     "answer": "5"}))
    url = reverse("judge-prompt", args=[judge.pk])
    template = "Problem: {{ problem }}\n{% for s in steps %}Step {{ s.number }}: {{ s.text }}\n{% endfor %}"
    # A preview renders a template the user wrote: owners only (issue 20); members read the page.
    client.force_login(member)
    assert client.post(url, {"action": "preview", "template": template, "trace": "tr-1"}).status_code == 403
    page = client.get(url, {"trace": "tr-1"}).content.decode()
    assert "Step 1: 2+3=5" not in page and 'value="preview"' not in page
    client.force_login(owner)
    partial = client.post(url, {"action": "preview", "template": template, "trace": "tr-1"},
                          HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in partial and 'id="preview"' in partial
    assert "Problem: What is &lt;b&gt;2&lt;/b&gt;+3?" in partial  # escaped once, by the page
    assert "Step 1: 2+3=5" in partial and "Reply with one JSON object" in partial
    missing = client.post(url, {"action": "preview", "template": template, "trace": "nope"}).content.decode()
    assert "no trace" in missing
    # without JavaScript the same button renders the whole page with the preview
    page = client.get(url, {"trace": "tr-1"}).content.decode()
    assert "<html" in page and "Step 1: 2+3=5" in page
    assert judge.prompts.count() == 1  # previews save nothing


def test_the_owner_starts_a_run_and_follows_it(client, study, owner, make_traces, django_capture_on_commit_callbacks):
    make_traces(4)
    client.force_login(owner)
    mechanistic = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("judge-run-start", args=[mechanistic.pk]), {"traces": "all", "model": "m1"})
    run = JudgeRun.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("judge-run", args=[run.pk])
    assert run.job.total == 2 and StepLabel.objects.filter(kind="judge").count() == 6
    page = client.get(response["Location"]).content.decode()
    assert 'id="job-progress"' in page and "succeeded" in page and "6 new" in page
    partial = client.get(response["Location"], HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in partial and 'id="run-stats"' in partial
    detail = client.get(reverse("judge", args=[mechanistic.pk])).content.decode()
    assert f'href="{reverse("judge-run", args=[run.pk])}"' in detail


def test_a_running_run_polls_and_can_be_cancelled(client, study, owner, make_traces):
    make_traces(2)
    client.force_login(owner)
    mechanistic = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    run = services.do_start_run(mechanistic, queue=False)
    page = client.get(reverse("judge-run", args=[run.pk])).content.decode()
    assert f'hx-get="{reverse("judge-run", args=[run.pk])}"' in page and f'hx-get="{reverse("job", args=[run.job_id])}"' in page
    assert f'action="{reverse("job", args=[run.job_id])}"' in page  # the cancel button
    client.post(reverse("job", args=[run.job_id]))
    assert Job.objects.get(pk=run.job_id).status == Job.Status.CANCELLED
    second = client.post(reverse("judge-run-start", args=[mechanistic.pk]), {"traces": "all"})
    assert second.status_code == 302  # the cancelled run no longer blocks a new one


def test_a_second_run_while_one_is_active_is_refused_with_a_message(client, study, owner, make_traces):
    make_traces(2)
    client.force_login(owner)
    mechanistic = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    services.do_start_run(mechanistic, queue=False)
    response = client.post(reverse("judge-run-start", args=[mechanistic.pk]), {"traces": "all"}, follow=True)
    assert "already has run" in response.content.decode()


def test_text_from_judges_and_traces_is_escaped(client, study, owner, do_import):
    do_import(jsonl({"kind": "problem", "problem_id": "p", "statement": "s", "gold_answer": "1"},
                    {"kind": "trace", "problem_id": "p", "model": "m", "trace_id": "<script>x</script>",
                     "steps": ["<img src=x onerror=alert(1)> 2 + 2 = 5"], "answer": "1",
                     "labels": [{"step": 1, "verdict": "valid", "annotator": "ann"}]}))
    mechanistic = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    services.run_inline(services.do_start_run(mechanistic, queue=False))
    client.force_login(owner)  # the disagreements page of a blind study is for those who see every label
    page = client.get(reverse("judge-disagreements", args=[mechanistic.pk])).content.decode()
    assert "<script>x" not in page and "<img src=x" not in page and "&lt;script&gt;" in page


def test_list_pages_use_a_constant_number_of_queries(client, study, owner, do_import, django_assert_max_num_queries):
    client.force_login(owner)
    labels = [{"step": 1, "verdict": "valid", "annotator": "ann"}, {"step": 1, "verdict": "valid", "annotator": "bob"}]

    def grow(n: int, offset: int) -> None:
        records = [{"kind": "problem", "problem_id": f"p{offset + i}", "statement": "s", "gold_answer": "1"}
                   for i in range(n)]
        records += [{"kind": "trace", "problem_id": f"p{offset + i}", "model": "m", "steps": [f"{i} + 1 = {i + 2}"],
                     "answer": "1", "labels": labels} for i in range(n)]
        do_import(jsonl(*records))
        for k in range(n):
            services.do_save_judge(study, {"name": f"j{offset + k}", "model": "x", "base_url": "http://h/v1"})
        mechanistic = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
        services.run_inline(services.do_start_run(mechanistic, queue=False))

    grow(2, 0)
    mechanistic = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    urls = [reverse("judge-list", args=[study.pk]), reverse("judge", args=[mechanistic.pk]),
            reverse("judge-disagreements", args=[mechanistic.pk])]
    counts = {}
    for url in urls:
        with django_assert_max_num_queries(15) as small:
            assert client.get(url).status_code == 200
        counts[url] = len(small.captured_queries)
    grow(8, 10)
    for url in urls:
        with django_assert_max_num_queries(counts[url]):
            assert client.get(url).status_code == 200


def test_the_judge_form_labels_its_choices_as_people_write_them(client, owner, study):
    """Issue 31: the generated labels read "Json Schema" and "Reference Free"."""
    from django.urls import reverse

    client.force_login(owner)
    page = client.get(reverse("judge-create", args=[study.pk])).content.decode()
    assert "Json Schema" not in page and "Reference Free" not in page
    assert ">JSON schema<" in page and ">reference-free (no skeleton)<" in page
