"""``Trace.regime`` and ``thought`` in the canonical format, on the review page and in the trace API."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import Trace
from tests.conftest import jsonl
from tests.evallogs.conftest import INSPECT_LOG

pytestmark = pytest.mark.django_db

PROBLEM = {"kind": "problem", "problem_id": "p1", "statement": "2+2?", "gold_answer": "4"}
REGIME = {"model": "m-1", "base_url_host": "10.0.0.5:8000", "temperature": 0.7, "stop": ["\n\n"], "seed": None}


def test_the_canonical_format_carries_a_regime_and_a_thought(study, do_import):
    report = do_import(jsonl(PROBLEM, {"kind": "trace", "problem_id": "p1", "model": "m", "trace_id": "t1",
                                       "raw": "2+2 = 4\n#### 4", "thought": "easy", "regime": REGIME}))
    assert report.committed, report.rejected
    trace = Trace.objects.get(trace_id="t1")
    assert trace.regime == REGIME
    assert trace.thought == "easy"
    # Neither is an unknown key kept in meta; meta["thought"] is what the thinking parser found.
    assert "regime" not in trace.meta
    assert trace.meta["thought"] == {"form": "field", "blocks": [{"start": 0, "end": 4, "source": "field"}]}


def test_a_trace_without_a_regime_has_an_empty_one(study, do_import):
    do_import(jsonl(PROBLEM, {"kind": "trace", "problem_id": "p1", "model": "m", "trace_id": "t1", "raw": "4"},
                    {"kind": "trace", "problem_id": "p1", "model": "m", "trace_id": "t2", "raw": "5", "regime": None}))
    assert list(Trace.objects.order_by("trace_id").values_list("regime", flat=True)) == [{}, {}]


def test_a_thought_given_and_a_tagged_thought_are_both_kept(study, do_import):
    raw = "let me think<Reasoning>2+2 = 4</Reasoning><Answer>4</Answer>"
    do_import(jsonl(PROBLEM, {"kind": "trace", "problem_id": "p1", "model": "m", "trace_id": "t1", "raw": raw,
                              "thought": "channel"}))
    assert Trace.objects.get(trace_id="t1").thought == "channel\n\nlet me think"


@pytest.mark.parametrize("bad", [["a list"], "text", 3])
def test_a_regime_that_is_not_an_object_is_a_bad_line(study, do_import, bad):
    report = do_import(jsonl(PROBLEM, {"kind": "trace", "problem_id": "p1", "model": "m", "raw": "4", "regime": bad}))
    assert not report.committed
    assert [r["line"] for r in report.rejected] == [2]
    assert report.rejected[0]["reason"].startswith('"regime":')


def test_the_review_page_shows_the_regime_and_the_reasoning_channel(client, study, member, import_file):
    import_file(INSPECT_LOG, "inspect")
    trace = Trace.objects.filter(study=study).order_by("pk").first()
    client.force_login(member)
    html = client.get(reverse("trace", args=[trace.pk])).content.decode()
    assert '<details class="raw card" id="regime">' in html
    assert "<dt>base_url_host</dt>" in html and f"<code>{trace.regime['base_url_host']}</code>" in html
    assert "<dt>stop</dt><dd><code>[&quot;Question:&quot;]</code></dd>" in html
    assert "<dt>temperature</dt><dd><code>0.0</code></dd>" in html
    # The spec's keys in the spec's order, whatever order the database kept, then the source's own keys.
    order = ["model", "base_url_host", "messages_hash", "seed", "code_version", "epoch", "provider_model", "source"]
    positions = [html.index(f"<dt>{key}</dt>") for key in order]
    assert positions == sorted(positions)
    # The reasoning channel is a trace of its own now: segmented into thought steps (issue 21).
    assert 'id="thought-bar"' in html and "carefully before answering." in html


def test_the_review_page_of_a_trace_without_a_regime_has_no_block(client, study, member, do_import):
    do_import(jsonl(PROBLEM, {"kind": "trace", "problem_id": "p1", "model": "m", "trace_id": "t1", "raw": "4"}))
    client.force_login(member)
    html = client.get(reverse("trace", args=[Trace.objects.get().pk])).content.decode()
    assert 'id="regime"' not in html and 'id="thought"' not in html


def test_the_trace_api_includes_the_regime(client, study, member, import_file):
    import_file(INSPECT_LOG, "inspect")
    trace = Trace.objects.filter(study=study).order_by("pk").first()
    client.force_login(member)
    body = client.get(f"/api/v1/traces/{trace.pk}/").json()
    assert body["regime"] == trace.regime and body["regime"]["seed"] == 7
    assert body["thought"] == trace.thought
