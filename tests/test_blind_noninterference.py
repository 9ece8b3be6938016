"""Non-interference of blind mode (issue 29): for an annotator of a blind study, changing the other
sources' labels -- a judge's, a peer's, the adjudications and the scores computed from them -- never
changes what she sees.

What she sees is gathered from the registries, not from a list written here, so a new filter, page,
endpoint or export kind is covered by construction:

* every filter of the search filter set (``TraceSearchFilter.base_filters``) and of the trace list's
  (``annotation.review.filters.TRACE_FILTERS``), each with every value its type takes, through every
  door that applies it (the search page and its API, the trace list, the queue and its API);
* every GET URL of the project (the URL resolver, as tests/test_permission_matrix.py walks it);
* every export kind (``scoring.exports`` registry), built as her.

Her view is taken twice, once with the other sources in state A and once in state B, and must be
identical byte for byte (after removing the per-response CSRF token). The same walk as the owner must
differ, or the perturbation proved nothing.
"""

from __future__ import annotations

import json
import re

import django_filters
import pytest
from django.test import Client

from annotation.gate import BlindRefusal
from annotation.models import Membership, Step, StepLabel, StepTag, Trace, TraceReview
from annotation.review.filters import TRACE_FILTERS
from annotation.review.labels import LabelIn, do_save_labels
from annotation.review.tags import do_save_tags
from reasonlib.step_functions import FUNCTION_NAMES
from scoring import exports, score_jobs
from search import services as search_services
from search.filters import TraceSearchFilter
from search.models import Cohort, ScanResult
from tests.test_permission_matrix import World, _path, rule_for, url_patterns

pytestmark = pytest.mark.django_db

# Sample values of the text filters: a new text filter must add one here (the test says so).
TEXT_VALUES = {
    "q": ["Step", "apples"], "re": [r"\d \+ 2"], "model": ["m1"], "domain": ["arithmetic"],
    "source": ["mine", "human", "judge:gpt", "adjudicated", "annotator:pete", "annotator:anna"],
    "judge": ["gpt"], "regime": ["temperature=0"], "function_tag": ["plan_generation", "self_checking"],
}
#: Export kinds' own parameters (``extra``), filled from the world.
EXPORT_EXTRA = ("cohort", "versus", "scanner", "query")


def filter_values(name: str, f: django_filters.Filter, world) -> list[str]:
    if name == "cohort":
        return [str(pk) for pk in Cohort.objects.filter(study=world.study).values_list("pk", flat=True)]
    if name == "scanner":
        return [f"{world.scanner.pk}:{answer}" for answer in ("yes", "no", "uncited", "failed")]
    if type(f).__name__ == "FlagFilter" or name in TRACE_FILTERS and TRACE_FILTERS[name].flag:
        return ["true", "false"]
    if isinstance(f, django_filters.ChoiceFilter):
        return [str(value) for value, _label in f.extra["choices"] if value]
    if isinstance(f, django_filters.NumberFilter):
        top = f.extra.get("max_value")
        return ["0.5"] if top == 1 else ["1", "2"]
    assert name in TEXT_VALUES, f"give the text filter {name!r} sample values in TEXT_VALUES"
    return TEXT_VALUES[name]


def all_filters(world) -> dict[str, list[str]]:
    """Every registered filter with its values: the search set's and the trace list's."""
    out = {name: filter_values(name, f, world) for name, f in TraceSearchFilter.base_filters.items()}
    for name, f in TRACE_FILTERS.items():
        out.setdefault(name, ["true", "false"] if f.flag else TEXT_VALUES[name])
    return out


_CSRF = re.compile(r'(csrfmiddlewaretoken" value="|"X-CSRFToken": "|\["X-CSRFTOKEN"\] = ")[^"]+')


def body(response) -> str:
    content = b"".join(response.streaming_content) if response.streaming else response.content
    return _CSRF.sub(r"\1-", content.decode("utf-8", "replace"))


def seen_by(client: Client, world) -> dict[str, str]:
    """Everything the signed-in member sees: (door, parameters) -> status and body."""
    study = world.study.pk
    seen: dict[str, str] = {}

    def get(key: str, path: str, params: dict | None = None) -> None:
        response = client.get(path, params or {})
        seen[key] = f"{response.status_code}\n{body(response)}"

    search_names = set(TraceSearchFilter.base_filters)
    for name, values in all_filters(world).items():
        for value in values:
            params = {name: value}
            if name in search_names:
                get(f"search page {name}={value}", f"/studies/{study}/search/", params)
                get(f"search API {name}={value}", f"/api/v1/studies/{study}/traces/", params)
            if name in TRACE_FILTERS:
                get(f"trace list {name}={value}", f"/studies/{study}/traces/", params)
                get(f"queue {name}={value}", f"/studies/{study}/queue/", params)
                get(f"queue API {name}={value}", f"/api/v1/studies/{study}/queue/", params)
    for p in url_patterns():
        rule = rule_for(p)
        if p.is_admin or rule is None or rule.GET is None:
            continue
        get(f"GET {p.key}", "/" + _path(p, world))
    return seen


def exported_for(membership: Membership | None, world) -> dict[str, str]:
    """Every export kind built as ``membership``: its rows, or its refusal."""
    out: dict[str, str] = {}
    cohorts = list(Cohort.objects.filter(study=world.study).order_by("pk").values_list("pk", flat=True))
    extra = {"cohort": cohorts[0], "versus": cohorts[-1], "scanner": world.scanner.pk, "query": "q=Step"}
    for what in exports.kinds():
        request = exports.ExportRequest(study=world.study, what=what, membership=membership, extra=dict(extra))
        try:
            table = exports.build(request)
            rows = [{k: _plain(v) for k, v in row.items()} for row in table.records()]
            out[what] = json.dumps(rows, sort_keys=True, default=str)
        except (exports.ExportError, BlindRefusal, exports.ExportForbidden) as exc:
            out[what] = f"refused: {type(exc).__name__}: {exc}"
    return out


def _plain(value):
    return value.item() if hasattr(value, "item") else value


def set_other_sources(world, state: int) -> None:
    """The judge's, the peer's and the adjudicator's labels in state 0 or 1, a scanner's answer, then the scores.
    The peer agrees with the judge on every step in state 0 and disagrees on every other step in state 1; in
    state 1 the judge has not labelled the last trace and the peer has not finished it (the counters move)."""
    verdicts = ("valid", "invalid")
    traces = list(Trace.objects.filter(study=world.study).order_by("pk"))
    for trace in traces:
        last = trace == traces[-1] and state == 1
        steps = list(Step.objects.filter(trace=trace).order_by("index"))
        for step in steps:
            if last:
                StepLabel.objects.filter(step=step, kind=StepLabel.Kind.JUDGE).delete()
                continue
            StepLabel.objects.update_or_create(
                step=step, kind=StepLabel.Kind.JUDGE, judge=world.judge,
                defaults={"verdict": verdicts[(step.index + state) % 2], "reason": f"judge state {state}"})
        review = TraceReview.objects.filter(trace=trace, annotator=world.peer).first()
        do_save_labels(trace, world.peer, version=review.version if review else 0, complete=not last,
                       labels=[LabelIn(s.index, verdicts[(s.index * (state + 1)) % 2], note=f"peer {state}")
                               for s in (steps[:1] if last else steps)])
        # The other sources' step-function tags: a peer's, the judge's and a published analysis'.
        StepTag.objects.filter(step__trace=trace).exclude(kind=StepTag.Kind.HUMAN, annotator=world.annotator).delete()
        for step in steps:
            tag = FUNCTION_NAMES[(step.index + 3 * state) % len(FUNCTION_NAMES)]
            StepTag.objects.create(step=step, kind=StepTag.Kind.HUMAN, annotator=world.peer, tag=tag)
            StepTag.objects.create(step=step, kind=StepTag.Kind.JUDGE, judge=world.judge, tag=tag)
            if not last:
                StepTag.objects.create(step=step, kind=StepTag.Kind.IMPORTED, origin="thought-anchors", tag=tag)
        StepLabel.objects.update_or_create(
            step=steps[0], kind=StepLabel.Kind.ADJUDICATION,
            defaults={"verdict": verdicts[state], "annotator": world.adjudicator_user, "reason": f"adj {state}"})
    ScanResult.objects.update_or_create(
        scanner=world.scanner, trace=world.trace,
        defaults={"status": ScanResult.Status.OK, "answer": bool(state), "cited": [1] if state else []})
    score_jobs.recompute(world.study, warm=False)


@pytest.fixture
def blind(django_user_model):
    users = {name: django_user_model.objects.create_user(name, password="pw")
             for name in ("olivia", "adam", "anna", "pete")}
    world = World("Blind study", blind=True, owner=users["olivia"], adjudicator=users["adam"],
                  annotator=users["anna"])
    Membership.objects.create(study=world.study, user=users["pete"], role=Membership.Role.ANNOTATOR)
    world.peer, world.adjudicator_user, world.owner, world.annotator = (users["pete"], users["adam"], users["olivia"],
                                                                        users["anna"])
    # Her own partial labels: she sees them, and the other sources must stay hidden around them.
    do_save_labels(world.trace, users["anna"], version=0, labels=[LabelIn(1, "valid", note="mine")])
    do_save_tags(world.trace, users["anna"], version=1, tags={1: ["plan_generation"]})
    owner_m = Membership.objects.get(study=world.study, user=users["olivia"])
    set_other_sources(world, 0)
    # Cohorts saved by the owner with label filters: their traces are what the other sources said.
    search_services.do_save_cohort(world.study, owner_m, name="judged invalid",
                                   data={"verdict": "invalid", "source": "judge:gpt"})
    search_services.do_save_cohort(world.study, owner_m, name="lucky", data={"lucky_guess": "false"})
    return world


def _differences(a: dict[str, str], b: dict[str, str]) -> list[str]:
    return sorted(k for k in a if a[k] != b.get(k))


def _explain(keys: list[str], a: dict[str, str], b: dict[str, str], lines: int = 12) -> str:
    """Each changed view with the first lines that changed (a leak is found by reading them)."""
    import difflib

    out = []
    for key in keys:
        diff = [d for d in difflib.unified_diff(a[key].splitlines(), b.get(key, "").splitlines(), lineterm="", n=0)
                if d[:1] in "+-" and not d.startswith(("+++", "---"))]
        out.append(f"{key}:\n      " + "\n      ".join(d[:200] for d in diff[:lines]))
    return "\n  ".join(out)


def test_a_blinded_annotator_sees_nothing_of_the_other_sources_change(blind):
    client = Client()
    client.force_login(blind.annotator)
    her = Membership.objects.select_related("study", "user").get(study=blind.study, user=blind.annotator)
    before, exported_before = seen_by(client, blind), exported_for(her, blind)
    owner = Client()
    owner.force_login(blind.owner)
    owner_before = seen_by(owner, blind)

    set_other_sources(blind, 1)
    after, exported_after = seen_by(client, blind), exported_for(her, blind)
    owner_after = seen_by(owner, blind)

    # The perturbation is real: the owner, who sees everything, sees it.
    assert _differences(owner_before, owner_after), "the other sources' change changed nothing anyone sees"
    changed = _differences(before, after)
    assert not changed, (f"{len(changed)} of {len(before)} views of the blinded annotator changed with the other "
                         "sources' labels:\n  " + _explain(changed, before, after))
    changed = _differences(exported_before, exported_after)
    assert not changed, "exports that changed with the other sources' labels: " + ", ".join(changed)
    # Her filters that read other sources are refused with the gate's one message.
    r = client.get(f"/api/v1/studies/{blind.study.pk}/traces/", {"verdict": "invalid", "source": "judge:gpt"})
    assert r.status_code == 403 and "blind study" in r.json()["detail"]
