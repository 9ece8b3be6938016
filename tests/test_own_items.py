"""Benchmark items and suite variants never count as the study's own (issue 31: "abstraction items (384
zero-step traces) mix into the study's problem and trace lists and counts").

The study here holds its own traces, the abstraction benchmark's 384 imported items (model ``gpt-4o-mini``,
zero steps) and a fidelity suite's variants with labelled traces of their own (model ``suite-only``). What
is checked is gathered from the registries, not from a list written here, so a new door is covered by
construction:

* every filter of the search filter set and of the trace list, with every value its type takes
  (tests/test_blind_noninterference.py's values), through ``search.services.search`` and the traces API;
* every GET URL of the project (tests/test_permission_matrix.py's walk) as the owner: no page but those of
  the fidelity and abstraction apps names a suite trace's model;
* every export kind (``scoring.exports``): a kind not declared ``suites=True`` exports none of them;
* every kind of run (``runs.kinds``): a kind not declared ``suites=True`` must say here how its scope is
  read (``SCOPES``), and that scope holds none of them.

The opt-ins are checked too: the abstraction page and export still read every item, ``?suites=1`` lists them.
"""

from __future__ import annotations

import io
import json

import pytest
from django.test import Client
from django.urls import resolve

from abstraction.importing import import_outputs
from anchors import planning as anchor_planning
from annotation.importing.pipeline import import_stream
from annotation.models import Membership, Problem, Trace
from annotation.review.labels import LabelIn, do_save_labels
from faithfulness import planning as faith_planning
from fidelity.models import Variant
from runs import kinds
from runs.models import RunChunk
from scoring import exports, score_jobs
from search import services as search_services
from search.errors import SearchError
from subjects import services as subject_services
from subjects.models import Generation
from tests.conftest import jsonl
from tests.data_paths import ABSTRACTION_SAMPLE
from tests.test_blind_noninterference import EXPORT_EXTRA, all_filters, body
from tests.test_permission_matrix import World, _path, rule_for, url_patterns

pytestmark = pytest.mark.django_db

BENCHMARK_MODEL = "gpt-4o-mini"  # the abstraction items' model
VARIANT_MODEL = "suite-only"  # the fidelity variants' traces' model
MARKERS = (BENCHMARK_MODEL, VARIANT_MODEL)
#: The apps whose pages are about a suite or a benchmark: they read its items on purpose.
SUITE_APPS = ("fidelity.", "abstraction.")


@pytest.fixture
def world(django_user_model):
    users = {name: django_user_model.objects.create_user(name, password="pw") for name in ("olivia", "adam", "anna")}
    w = World("Own items", blind=False, owner=users["olivia"], adjudicator=users["adam"], annotator=users["anna"])
    w.owner, w.owner_m = users["olivia"], Membership.objects.get(study=w.study, user=users["olivia"])
    assert import_outputs(w.study, ABSTRACTION_SAMPLE, model=BENCHMARK_MODEL).committed
    # The world's fidelity suite's variants, each with a labelled trace (first step invalid, answer correct:
    # a lucky guess, a hazard event and agreement rows if they leaked into the scores).
    variants = list(Variant.objects.filter(suite__study=w.study).values_list("problem__problem_id", flat=True))
    assert variants
    records = [{"kind": "trace", "problem_id": pid, "model": VARIANT_MODEL, "trace_id": f"variant-{i}",
                "steps": ["1 + 1 = 3", "so 2"], "answer": "2", "answer_correct": True,
                "labels": [{"step": 1, "verdict": "invalid", "annotator": "anna"},
                           {"step": 2, "verdict": "valid", "annotator": "anna"}]}
               for i, pid in enumerate(variants)]
    report = import_stream(w.study, io.BytesIO(jsonl(*records)), "reasonaudit")
    assert report.committed, report
    w.suite_traces = set(Trace.objects.filter(study=w.study).suite_members().values_list("pk", flat=True))
    w.suite_problems = set(Problem.objects.filter(study=w.study).suite_members().values_list("pk", flat=True))
    w.own_traces = set(Trace.objects.of_study(w.study).values_list("pk", flat=True))
    assert len(w.suite_traces) == 384 + len(variants) and w.own_traces
    # The subject model "generated" one own trace and one variant trace: faithfulness and step-importance
    # runs read a subject's generations.
    own_trace = Trace.objects.get(pk=min(w.own_traces))
    variant_trace = Trace.objects.filter(model=VARIANT_MODEL, study=w.study).first()
    for sample, trace in enumerate((own_trace, variant_trace)):
        Generation.objects.create(subject=w.subject, config_version=w.subject.version, problem=trace.problem,
                                  sample=sample, trace=trace)
    Trace.objects.filter(pk__in=[own_trace.pk, variant_trace.pk]).update(n_thought_steps=1)
    # The own traces labelled completely, so they have scores beside which the variants' would show.
    for trace in Trace.objects.filter(pk__in=w.own_traces):
        do_save_labels(trace, users["anna"], version=0, complete=True,
                       labels=[LabelIn(i, "valid") for i in range(1, trace.n_steps + 1)])
    # A subject model with no run in progress, for a generation over the whole study.
    w.generator, _ = subject_services.do_save_subject(
        w.study, {"name": "fresh", "model": "fresh", "base_url": "http://127.0.0.1:9/v1"})
    score_jobs.recompute(w.study, warm=False)
    return w


def _leaks(text: str) -> list[str]:
    return [m for m in MARKERS if m in text]


def test_every_search_filter_leaves_the_suite_traces_out(world, client: Client):
    seen = 0
    for name, values in all_filters(world).items():
        for value in values:
            try:
                found = set(search_services.search(world.study, world.owner_m, {name: value}).traces
                            .values_list("pk", flat=True))
            except SearchError:
                continue
            assert not found & world.suite_traces, f"search {name}={value} finds benchmark items or variants"
            seen += len(found)
    assert seen, "no filter found anything: the check proved nothing"
    everything = set(search_services.search(world.study, world.owner_m, {}).traces.values_list("pk", flat=True))
    assert everything == world.own_traces
    client.force_login(world.owner)
    api = client.get(f"/api/v1/studies/{world.study.pk}/traces/", {"page_size": 1000}).json()
    rows = api["results"] if isinstance(api, dict) else api
    assert {r["id"] for r in rows} == world.own_traces


def test_no_page_outside_the_suites_counts_them(world, client: Client):
    client.force_login(world.owner)
    leaks = {}
    walked = 0
    for p in url_patterns():
        rule = rule_for(p)
        if p.is_admin or rule is None or rule.GET is None:
            continue
        path = "/" + _path(p, world)
        module = resolve(path).func.__module__
        if module.startswith(SUITE_APPS):
            continue
        response = client.get(path)
        walked += 1
        found = _leaks(body(response))
        if found:
            leaks[f"GET {p.key}"] = found
    assert walked > 50
    assert not leaks, f"pages that name benchmark items or suite variants: {leaks}"
    # The opt-ins still show them.
    assert BENCHMARK_MODEL in body(client.get(f"/studies/{world.study.pk}/abstraction/"))
    assert VARIANT_MODEL in body(client.get(f"/studies/{world.study.pk}/traces/", {"suites": "1"}))


def test_every_export_kind_but_the_suites_leaves_them_out(world):
    cohort = search_services.do_save_cohort(world.study, world.owner_m, name="all", data={})
    extra = {"cohort": cohort.pk, "versus": world.cohort.pk, "scanner": world.scanner.pk, "query": "q=step"}
    assert set(extra) == set(EXPORT_EXTRA)
    built, suite_rows = 0, {}
    for what in exports.kinds():
        kind = exports.kind(what)
        request = exports.ExportRequest(study=world.study, what=what, membership=world.owner_m, extra=dict(extra))
        try:
            table = exports.build(request)
        except exports.ExportError:
            continue
        text = json.dumps(list(table.records()), default=str)
        built += 1
        if kind.suites:
            suite_rows[what] = bool(_leaks(text))
            continue
        assert not _leaks(text), f"export {what!r} names benchmark items or suite variants"
    assert built > 20
    assert suite_rows.get("abstraction-items"), "the abstraction export lost its items"


def _started_items(name: str, world, data: dict) -> set[int]:
    row = kinds.start(name, world.study, data, world.owner)
    return {i for chunk in RunChunk.objects.filter(run=kinds.run_of(row)) for i in chunk.items}


#: How each kind of run (not about a suite) chooses its work: kind -> (namespace, the items it would
#: work on). A new kind must say here how its scope is read.
SCOPES = {
    "generation": lambda w: ("problem", _started_items("generation", w, {"model": w.generator.name})),
    "judge": lambda w: ("trace", _started_items("judge", w, {"judge": "gpt", "traces": "all"})),
    "step-tags": lambda w: ("trace", _started_items("step-tags", w, {"judge": "gpt"})),
    "scanner": lambda w: ("trace", _started_items("scanner", w, {"scanner": w.scanner.name})),
    "interventions": lambda w: ("trace", set(faith_planning.limited(w.subject, None).values_list("pk", flat=True))),
    "anytime": lambda w: ("trace", set(faith_planning.limited(w.subject, None).values_list("pk", flat=True))),
    "early_answering": lambda w: ("trace", set(faith_planning.limited(w.subject, None)
                                               .values_list("pk", flat=True))),
    "step_importance": lambda w: ("trace", set(anchor_planning.traces_of(w.subject).values_list("pk", flat=True))),
}


def test_every_run_kind_but_the_suites_works_on_own_items(world):
    for kind in kinds.all_kinds():
        if kind.suites:
            continue
        assert kind.name in SCOPES, f"say in SCOPES how a {kind.name!r} run chooses its items"
        namespace, items = SCOPES[kind.name](world)
        assert items, f"a {kind.name} run chose nothing: the check proves nothing"
        suite = world.suite_traces if namespace == "trace" else world.suite_problems
        assert not items & suite, f"a {kind.name} run over the whole study works on benchmark items or variants"


def test_scores_and_their_pages_count_own_traces_only(world):
    from scoring import analytics
    from scoring.models import ScoreSet, TraceScore

    scored = set(TraceScore.objects.filter(score_set__study=world.study).values_list("trace_id", flat=True))
    assert scored and not scored & world.suite_traces
    assert int(analytics.trace_counts(world.study)["traces"].sum()) == len(world.own_traces)
    assert ScoreSet.objects.filter(study=world.study).exists()
