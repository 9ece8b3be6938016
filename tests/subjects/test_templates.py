"""The prompt-template editor, web and REST: saving makes a new version (an
unchanged text does not), bad input answers 400 naming the field, and the
preview renders the template on one problem of the study in the sandbox --
never as code, escaped on the page."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from subjects import prompts, services
from subjects.models import PromptTemplate
from tests.conftest import jsonl
from tests.subjects.test_api import api

pytestmark = pytest.mark.django_db


def web(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


K_SHOT = "{% for e in exemplars %}Q: {{ e.question }}\nA: {{ e.answer }}\n\n{% endfor %}Q: {{ problem }}\nA:"


def test_the_editor_saves_new_versions_owner_only(study, owner, member, outsider):
    url = f"/studies/{study.pk}/prompt-templates/"
    page = web(member).get(url).content.decode()
    assert "zero-shot" in page and "gsm8k-8shot-cot" in page and 'id="template-editor"' not in page
    assert web(member).post(url, {"name": "mine", "template": "{{ problem }}"}).status_code == 403
    assert web(outsider).get(url).status_code == 404
    assert 'id="template-editor"' in web(owner).get(url).content.decode()
    r = web(owner).post(url, {"name": "mine", "template": "Solve:\r\n{{ problem }}", "exemplars": ""})
    v1 = PromptTemplate.objects.get(study=study, name="mine")
    assert r.status_code == 302 and r["Location"] == f"/prompt-templates/{v1.pk}/"
    assert (v1.version, v1.kind, v1.template, v1.exemplars) == (1, "zero-shot", "Solve:\n{{ problem }}", [])
    # An edit posted on the version's page is the next version; v1 stays as it was.
    shots = '[{"question": "1 + 1?", "answer": "1 + 1 = 2. The answer is 2."}]'
    r = web(owner).post(f"/prompt-templates/{v1.pk}/", {"name": "mine", "template": K_SHOT, "exemplars": shots})
    v2 = PromptTemplate.objects.get(study=study, name="mine", version=2)
    assert r["Location"] == f"/prompt-templates/{v2.pk}/" and v2.kind == "k-shot" and len(v2.exemplars) == 1
    assert PromptTemplate.objects.get(pk=v1.pk).template == "Solve:\n{{ problem }}"
    # The same text again makes no version.
    r = web(owner).post(f"/prompt-templates/{v2.pk}/", {"name": "mine", "template": K_SHOT, "exemplars": shots})
    assert r["Location"] == f"/prompt-templates/{v2.pk}/" and PromptTemplate.objects.filter(name="mine").count() == 2
    # Members read every version; only owners get the editor and may post.
    html = web(member).get(f"/prompt-templates/{v1.pk}/").content.decode()
    assert "mine v1" in html and "Solve:\n{{ problem }}" in html and 'id="template-editor"' not in html
    assert web(member).post(f"/prompt-templates/{v1.pk}/", {"name": "mine", "template": "x {{ problem }}"}
                            ).status_code == 403
    assert web(outsider).get(f"/prompt-templates/{v1.pk}/").status_code == 404


@pytest.mark.parametrize("data, field, message", [
    ({"name": "mine", "template": "{% if %}"}, "template", "the template does not compile"),
    ({"name": "mine", "template": "{% debug %}{{ problem }}"}, "template", "tag is not allowed"),
    ({"name": "mine", "template": '{% include "x.html" %}{{ problem }}'}, "template", "tag is not allowed"),
    ({"name": "mine", "template": "{% load static %}{{ problem }}"}, "template", "not a registered tag library"),
    ({"name": "mine", "template": "Solve it."}, "template", "never puts the problem in the prompt"),
    ({"name": "mine", "template": "{{ problem }}", "exemplars": "[1, 2"}, "exemplars", "not JSON"),
    ({"name": "mine", "template": "{{ problem }}", "exemplars": '[{"q": 1}]'}, "exemplars", "exemplars must be"),
    ({"name": "no spaces", "template": "{{ problem }}"}, "name", "use 1-100 letters"),
])
def test_bad_templates_answer_400_naming_the_field(study, owner, data, field, message):
    r = web(owner).post(f"/studies/{study.pk}/prompt-templates/", data)
    assert r.status_code == 400 and message in r.content.decode()
    assert not PromptTemplate.objects.filter(study=study, name__in=["mine", "no spaces"]).exists()
    # The API: the same refusals, 400 with the field.
    body = {"name": data["name"], "template": data["template"]}
    if "exemplars" in data:
        try:
            body["exemplars"] = json.loads(data["exemplars"])
        except json.JSONDecodeError:
            body["exemplars"] = data["exemplars"]  # a JSON string, not a list
    r = api(owner).post(f"/api/v1/studies/{study.pk}/prompt-templates/", body, format="json")
    assert r.status_code == 400 and [e["field"] for e in r.json()["errors"]] == [field], r.json()
    assert message in r.json()["errors"][0]["message"] or field in ("exemplars", "name")


def test_the_preview_renders_on_a_problem_of_the_study_escaped(study, owner, member, make_problems, do_import):
    make_problems(2)
    do_import(jsonl({"kind": "problem", "problem_id": "html", "statement": "Is <b>5</b> > 3?", "gold_answer": "yes"}))
    url = f"/studies/{study.pk}/prompt-templates/preview/"
    r = web(owner).post(url, {"template": "Solve {{ problem_id }}: {{ problem }}", "name": ""})
    html = r.content.decode()
    assert r.status_code == 200 and html.lstrip().startswith('<div id="preview">')
    assert "Preview on problem p0" in html and "Solve p0: Ann has 2 apples and buys 3 more." in html
    r = web(owner).post(url, {"template": K_SHOT, "exemplars": '[{"question": "2?", "answer": "2."}]',
                              "problem_id": "html"})
    html = r.content.decode()
    assert "Q: 2?\nA: 2.\n\nQ: Is &lt;b&gt;5&lt;/b&gt; &gt; 3?\nA:" in html and "<b>5</b>" not in html
    # Attribute tricks are refused, as docs/generation.md says: the template does not compile (Django's
    # engine refuses names that start with an underscore), and the error names the field and the variable.
    r = web(owner).post(url, {"template": "{{ problem }}{{ problem.__class__ }}{{ exemplars.__len__ }}"})
    assert r.status_code == 400 and "Preview refused: template:" in r.content.decode()
    assert "may not begin with underscores: &#x27;problem.__class__&#x27;" in r.content.decode()
    r = web(owner).post(url, {"template": "{% debug %}{{ problem }}"})
    assert r.status_code == 400 and "Preview refused: template:" in r.content.decode()
    assert "the {% debug %} tag is not allowed" in r.content.decode()
    r = web(owner).post(url, {"template": "{{ problem }}", "problem_id": "nope"})
    assert r.status_code == 400 and "problem_id: no problem &#x27;nope&#x27; in this study" in r.content.decode()
    assert "problem_id: problem_id" not in r.content.decode()  # the field said once (the refusal's text)
    assert web(member).post(url, {"template": "{{ problem }}"}).status_code == 403
    # The API: the same text as a generation run would send.
    r = api(owner).post(f"/api/v1/studies/{study.pk}/prompt-templates/preview/",
                        {"template": prompts.ZERO_SHOT_TEMPLATE, "problem_id": "p1"}, format="json")
    assert r.status_code == 200 and r.json() == {
        "problem_id": "p1",
        "text": prompts.render(prompts.ZERO_SHOT_TEMPLATE, problem="Ann has 3 apples and buys 4 more. How many "
                                                                   "apples does she have?", problem_id="p1")}
    r = api(owner).post(f"/api/v1/studies/{study.pk}/prompt-templates/preview/",
                        {"template": "{{ problem }}", "problem_id": "nope"}, format="json")
    assert r.status_code == 400 and [e["field"] for e in r.json()["errors"]] == ["problem_id"]
    assert api(member).post(f"/api/v1/studies/{study.pk}/prompt-templates/preview/",
                            {"template": "{{ problem }}"}, format="json").status_code == 403


def test_the_api_lists_and_saves_versions(study, owner, member, outsider):
    url = f"/api/v1/studies/{study.pk}/prompt-templates/"
    names = [(t["name"], t["version"]) for t in api(member).get(url).json()["results"]]
    assert names == [("gsm8k-8shot-cot", 1), ("zero-shot", 1)]
    assert api(outsider).get(url).status_code == 404
    assert api(member).post(url, {"name": "mine", "template": "{{ problem }}"}, format="json").status_code == 403
    r = api(owner).post(url, {"name": "mine", "template": "{{ problem }}"}, format="json")
    assert r.status_code == 201 and (r.json()["version"], r.json()["kind"]) == (1, "zero-shot")
    assert r.json()["html_url"].endswith(f"/prompt-templates/{r.json()['id']}/")
    assert api(owner).post(url, {"name": "mine", "template": "{{ problem }}"}, format="json").status_code == 200
    r = api(owner).post(url, {"name": "mine", "template": K_SHOT,
                              "exemplars": [{"question": "1?", "answer": "1."}]}, format="json")
    assert r.status_code == 201 and (r.json()["version"], r.json()["kind"]) == (2, "k-shot")
    detail = api(member).get(f"/api/v1/prompt-templates/{r.json()['id']}/").json()
    assert detail["template"] == K_SHOT and detail["exemplars"] == [{"question": "1?", "answer": "1."}]
    assert api(outsider).get(f"/api/v1/prompt-templates/{r.json()['id']}/").status_code == 404
    # A subject model picks a version by name; the newest by default.
    assert services.find_template(study, "mine").version == 2


def test_a_system_prompt_template_needs_no_problem_and_keeps_its_kind(study):
    # A diagnostic's system prompt (abstraction's DP/CoT): the item goes in its own user turn.
    with pytest.raises(services.TemplateInvalid):
        services.do_save_template(study, "sys", "Answer with the result only.")
    first = services.do_save_template(study, "sys", "Answer with the result only.", system=True)
    assert first.kind == PromptTemplate.Kind.SYSTEM
    second = services.do_save_template(study, "sys", "Answer with the result only, nothing else.")
    assert (second.version, second.kind) == (2, PromptTemplate.Kind.SYSTEM)
