"""The visibility gate (annotation.gate) as search, cohorts and exports use it: what each declares it
reads, and what a blinded annotator may use. The walk over every filter, URL and export kind is
tests/test_blind_noninterference.py; these are the rules, one by one."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from annotation import gate
from annotation.gate import BlindRefusal, Source
from annotation.models import Membership
from scoring import exports
from search import services
from search.filters import READS, TraceSearchFilter, usable_filters
from tests.search.conftest import label

pytestmark = pytest.mark.django_db


def test_who_reads_what(owner_m, member_m):
    assert gate.may_read(None, Source) and gate.may_read(owner_m, Source)  # the operator; an owner
    assert gate.may_read(member_m, {Source.TRACE, Source.OWN})
    for other in gate.OTHER_SOURCES:
        assert not gate.may_read(member_m, {other})
    with pytest.raises(BlindRefusal, match=r"blind study .* the x filter reads other sources \(judge, peer\)"):
        gate.check(member_m, "the x filter", {Source.OWN, Source.PEER, Source.JUDGE})
    member_m.study.blind = False  # an open study blinds nobody
    assert gate.may_read(member_m, Source)


def test_every_search_filter_declares_what_it_reads():
    assert set(READS) == set(TraceSearchFilter.base_filters)


def test_a_blinded_annotators_search_page_offers_only_what_she_may_use(study, member_m, owner_m):
    mine = usable_filters(study, member_m)
    assert {"q", "model", "verdict", "labelled", "needs_review", "source"} <= mine
    assert not mine & {"disagreement", "flagged", "lucky_guess", "coverage_min", "adjudicated", "scanner",
                       "human_judge_disagreement", "judge", "review_flag"}
    assert usable_filters(study, owner_m) == set(TraceSearchFilter.base_filters)


def test_a_cohort_is_what_its_query_read_for_its_author(study, owner, owner_m, member, member_m, traces):
    label(traces["t2"], 2, verdict="invalid", user=owner)
    judged = services.do_save_cohort(study, owner_m, name="owner's invalid", data={"verdict": "invalid"})
    plain = services.do_save_cohort(study, owner_m, name="m1", data={"model": "m1"})
    hers = services.do_save_cohort(study, member_m, name="mine", data={"verdict": "invalid", "source": "mine"})
    assert services.cohort_reads(judged, member_m) >= {Source.PEER}
    with pytest.raises(BlindRefusal):
        services.check_cohort(member, judged.pk)
    assert services.check_cohort(member, plain.pk)[0] == plain
    assert services.check_cohort(member, hers.pk)[0] == hers  # her own labels are hers
    # ... and another blinded annotator's: peers' labels to anyone else.
    bob = get_user_model().objects.create_user("bob", password="pw")
    Membership.objects.create(study=study, user=bob, role=Membership.Role.ANNOTATOR)
    with pytest.raises(BlindRefusal):
        services.check_cohort(bob, hers.pk)
    # Listed by name, size hidden; as a filter, refused.
    api = APIClient()
    api.force_authenticate(member)
    rows = {r["name"]: r["n_traces"] for r in api.get(f"/api/v1/studies/{study.pk}/cohorts/").json()}
    assert rows == {"owner's invalid": None, "m1": 2, "mine": hers.n_traces}
    r = api.get(f"/api/v1/studies/{study.pk}/traces/", {"cohort": judged.pk})
    assert r.status_code == 403 and "the cohort filter reads other sources" in r.json()["detail"]
    assert api.get(f"/api/v1/cohorts/{judged.pk}/").status_code == 403


def test_a_comparison_hides_the_scores_from_a_blinded_annotator(study, owner_m, member, traces):
    a = services.do_save_cohort(study, owner_m, name="a", data={"model": "m1"})
    b = services.do_save_cohort(study, owner_m, name="b", data={"model": "m2"})
    api = APIClient()
    api.force_authenticate(member)
    body = api.get(f"/api/v1/cohorts/{a.pk}/compare/", {"b": b.pk}).json()
    assert body["scores_hidden"] is True and body["a"]["scores"] is None and body["a"]["n_traces"] == 2
    shown = services.compare_cohorts(a, b, owner_m)
    assert shown["scores_hidden"] is False and set(shown["a"]["scores"]) == {"process", "holistic", "s_prm"}


def test_every_export_kind_is_gated_by_what_it_declares(study, member_m):
    for what in exports.kinds():
        if what in exports.PLANNED and what not in exports._REGISTRY:
            continue
        kind = exports.kind(what)
        request = exports.ExportRequest(study=study, what=what, membership=member_m)
        if kind.restricted or not gate.may_read(member_m, kind.reads):
            with pytest.raises(exports.ExportForbidden if kind.restricted else BlindRefusal):
                exports.allowed(request)
        else:
            exports.allowed(request)
    assert exports.kind("scores").reads == gate.SCORES_ONLY and exports.kind("abstraction").reads == gate.TRACE_ONLY
