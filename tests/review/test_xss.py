"""Hostile text everywhere a reviewer looks: trace steps and raw output,
problem statements, notes, judge reasons, skeleton assertions. Markdown and
math are rendered; markup never comes through."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.urls import reverse

from annotation import skeletons
from annotation.models import Problem, Trace
from annotation.rendering import render_markdown
from annotation.review.labels import LabelIn, do_save_labels
from tests.conftest import jsonl
from tests.review.conftest import human_label, judge, judge_label

pytestmark = pytest.mark.django_db

ATTACKS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(2)>",
    '"><svg onload=alert(3)>',
    "[click](javascript:alert(4))",
    "$<img src=x onerror=alert(5)>$",
    "\\(<iframe src=javascript:alert(6)>\\)",
    "<a href='javascript:alert(7)'>x</a>",
]
class _Elements(HTMLParser):
    """Every element and attribute a browser would build from the page."""

    def __init__(self):
        super().__init__()
        self.found: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, attrs))


# Our own pages load scripts from /static/ only; user text must add none.
def _assert_clean(html: str) -> None:
    parser = _Elements()
    parser.feed(html)
    for tag, attrs in parser.found:
        assert tag not in ("img", "svg", "iframe", "object", "embed"), tag
        if tag == "script":
            assert dict(attrs).get("src", "").startswith("/static/"), attrs
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name, value)
            if name in ("href", "src", "action", "formaction"):
                assert not (value or "").strip().lower().startswith("javascript:"), (tag, name, value)


@pytest.mark.parametrize("attack", ATTACKS)
def test_render_markdown_never_lets_markup_through(attack):
    _assert_clean(str(render_markdown(f"Assertion **bold** {attack} and $x^2$")))


def test_markdown_and_math_still_render():
    html = str(render_markdown("**bold** and _it_ with $\\frac{1}{2}$ and \\[x^2\\] and costs $2 and $3"))
    assert "<strong>bold</strong>" in html and "<em>it</em>" in html
    assert '<span class="math">\\frac{1}{2}</span>' in html and '<span class="math display">x^2</span>' in html
    assert "costs $2 and $3" in html  # money is not math


@pytest.fixture
def hostile(study, do_import, member, annotator2):
    evil = " ".join(ATTACKS)
    do_import(jsonl(
        {"kind": "problem", "problem_id": "p", "statement": f"Statement {evil}", "gold_answer": "1",
         "skeleton": [{"text": f"Skeleton {evil}"}, {"text": "second"}]},
        {"kind": "trace", "problem_id": "p", "model": "m", "raw": f"Raw {evil}\nline two {evil}", "answer": "1"},
    ))
    trace = Trace.objects.select_related("problem", "study").get()
    config = judge(study)
    judge_label(trace, 1, config, "invalid", reason=f"Judge {evil}")
    human_label(trace, 1, annotator2, "valid", note=f"Bob {evil}")
    do_save_labels(trace, member, version=0,
                          labels=[LabelIn(1, "valid", note=f"Mine {evil}"), LabelIn(2, "valid")])
    return trace


@pytest.mark.parametrize("role", ["member", "adjudicator"])
def test_the_review_page_escapes_everything(client, request, hostile, role):
    client.force_login(request.getfixturevalue(role))
    page = client.get(reverse("trace", args=[hostile.pk])).content.decode()
    assert "Judge &lt;script&gt;" in page and "Bob &lt;script&gt;" in page  # revealed, and escaped
    if role == "member":  # my own note comes back as the input's value
        assert 'value="Mine &lt;script&gt;alert(1)&lt;/script&gt;' in page
    else:  # the adjudicator sees it among the other labels
        assert '<span class="reason">Mine &lt;script&gt;alert(1)&lt;/script&gt;' in page
    _assert_clean(page)


def test_the_adjudication_page_escapes_everything(client, hostile, adjudicator):
    client.force_login(adjudicator)
    page = client.get(reverse("adjudication", args=[hostile.study_id])).content.decode()
    assert "Judge" in page and "Bob" in page
    _assert_clean(page)


def test_the_problem_page_and_editor_escape_everything(client, hostile, owner):
    problem = Problem.objects.get()
    skeletons.do_save_skeleton(problem, owner, [{"text": "New " + " ".join(ATTACKS)}, {"text": "b"}], note="<b>note</b>")
    client.force_login(owner)
    page = client.get(reverse("problem", args=[problem.pk])).content.decode()
    assert "Skeleton" in page and "New" in page
    _assert_clean(page)
    for url in (reverse("problem-list", args=[hostile.study_id]), reverse("trace-list", args=[hostile.study_id]),
                reverse("queue", args=[hostile.study_id])):
        _assert_clean(client.get(url).content.decode())


def test_the_markdown_preview_is_sanitized(client, member):
    client.force_login(member)
    for attack in ATTACKS:
        _assert_clean(client.get(reverse("markdown-preview"), {"text-1": f"**x** {attack}"}).content.decode())


def test_step_rows_take_only_known_verdicts_into_attributes_and_escape_every_value():
    from annotation.rendering import step_rows_html

    evil = 'valid" onmouseover="alert(1)'
    rows = [{"index": 1, "text": "{i} <b>", "verdict": evil, "refs": [2], "note": 'a"b', "disagree": True,
             "others": [{"kind": 'judge" x="', "source": "<s>", "verdict": evil, "refs": [1], "reason": "<r>",
                         "confidence": None}]}]
    html = str(step_rows_html(rows, [1, 2], None))
    assert "onmouseover" not in html  # an unknown verdict is dropped, not escaped into a class
    assert '<li class="step" id="s1"' in html  # the unknown verdict: unlabelled
    assert '<li class="other ">' in html and 'x="' not in html
    assert "{i} &lt;b&gt;" in html and 'value="a&quot;b"' in html and "&lt;s&gt;" in html
    assert '<input type="checkbox" name="r1" value="2" checked>' in html
