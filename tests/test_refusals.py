"""One refusal family (reasonlib.refusals), rendered once per door: REST (annotation.api.errors), web
(annotation.middleware), CLI (annotation.commands); an expected refusal is logged as one line."""

from __future__ import annotations

import io
import logging
import pickle

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from rest_framework.test import APIClient

from agreement.calibration import CalibrationError
from agreement.services import BadSelection
from annotation.access import AccessDenied
from annotation.commands import RefusingCommand
from annotation.importing.archives import ArchiveError
from annotation.jobs import RunConflict
from annotation.members import MemberError
from annotation.review.base import Conflict, ReviewError
from annotation.review.queues import AssignError
from annotation.scopes import ScopeError
from annotation.skeletons import SkeletonError
from judges.services import ensure_mechanistic
from reasonlib.refusals import FieldInvalid, Invalid, Refusal
from reasonlib.selection import FilterError
from runs.chat_template import ChatTemplateError
from runs.outbound import OutboundRefused
from runs.params import ParamError
from runs.templating import PromptTemplateError
from scoring.analytics import BadFilter
from scoring.export_jobs import NotReady
from scoring.exports import ExportError
from scoring.services import UnknownProfile
from scoring.sources import UnknownSource
from search.core.query import QueryError
from search.core.regex import RegexError
from search.errors import SearchError
from search.scanners import ScannerError
from search.services import CohortError
from subjects.services import TemplateInvalid, Unreachable
from tests.conftest import signed_in

pytestmark = pytest.mark.django_db

#: Every refusal a researcher can meet, one of each shape, with the status every door answers.
REFUSALS = [
    (MemberError("no active user named 'x'"), 400), (ReviewError([("step 2", "unknown verdict")]), 400),
    (AssignError("k must be at least 1", field="k"), 400), (ScopeError("no cohort 9"), 400),
    (SkeletonError([("steps[0].text", "empty")]), 400), (ArchiveError("too many members"), 400),
    (CalibrationError("size", "at least 1"), 400), (BadSelection("candidate", "no judge"), 400),
    (SearchError({"q": ["empty"]}), 400), (ScannerError("cohort", "of another study"), 400),
    (CohortError("name", "1 to 200 characters"), 400), (QueryError("only excludes"), 400),
    (RegexError("not a valid pattern"), 400), (ExportError("format: choose one of csv"), 400),
    (UnknownProfile("no profile named 'x'"), 400), (UnknownSource("no judge named 'x'"), 400),
    (BadFilter("model", "no such model"), 400), (TemplateInvalid("name", "use letters"), 400),
    (ParamError("budget_usd", "must lie in 0..100000"), 400), (PromptTemplateError("does not compile"), 400),
    (ChatTemplateError("does not compile"), 400), (OutboundRefused("base_url", "not allowed"), 400),
    (FilterError("ids: 'x' is not a position"), 400), (Conflict("stale version", 3), 409),
    (RunConflict("a run is in progress"), 409), (NotReady("the export is running"), 409),
    (Unreachable("no model server answered"), 502), (AccessDenied("for owners; you are an annotator"), 403),
    (AccessDenied("No such study", outsider=True), 404),
]


@pytest.mark.parametrize("refusal, status", REFUSALS, ids=lambda v: type(v).__name__ if isinstance(v, Exception) else "")
def test_every_domain_refusal_is_of_the_family_with_its_status_and_survives_a_copy(refusal, status):
    assert isinstance(refusal, Refusal) and refusal.status == status and refusal.code
    assert isinstance(refusal, ValueError) == (status == 400)  # a conflict is never caught as bad input
    copy = pickle.loads(pickle.dumps(refusal))
    assert type(copy) is type(refusal) and str(copy) == str(refusal) and copy.errors == refusal.errors


def test_the_text_names_the_field_once_and_a_stale_version_says_its_sentence():
    assert str(FieldInvalid("cohort", "cohort 3 holds none")) == "cohort: cohort 3 holds none"
    assert str(Invalid(errors=[("a", "x"), ("", "y")])) == "a: x; y"
    stale = Conflict("someone saved since", 7)
    assert str(stale) == "someone saved since" and stale.errors == [("version", "the current version is 7")]
    assert str(ExportError("--profile: no profile")) == "--profile: no profile"
    assert ExportError("--profile: no profile").field == "profile"


# --------------------------------------------------------------------------------------------- REST
def test_the_api_answers_a_refusal_with_the_documented_body(owner, member, study):
    api = APIClient()
    api.force_authenticate(owner)
    # A domain refusal (a queue of a k no one can be given: annotation.review.queues.AssignError).
    answer = api.post(f"/api/v1/studies/{study.pk}/assignments/", {"annotators": ["alice"], "k": 2},
                      format="json")
    assert answer.status_code == 400, answer.json()
    body = answer.json()
    assert set(body) == {"detail", "errors"} and body["errors"] and body["detail"].startswith(body["errors"][0]["field"])
    api.force_authenticate(member)
    answer = api.post(f"/api/v1/studies/{study.pk}/members/", {"username": "x", "role": "owner"}, format="json")
    assert answer.status_code == 403 and answer.json() == {"detail": "managing members is for owners; you are an "
                                                                     "annotator", "errors": []}


# ---------------------------------------------------------------------------------------------- web
@pytest.fixture
def judge(study):
    return ensure_mechanistic(study)


def test_a_refused_run_start_on_the_judge_page_is_never_a_500(owner, study, judge):
    """Was 500: the judge form accepted any budget and the service refused 1e9. Now the kind's serializer
    (runs.kinds) refuses it, and the page shows why (a flash on the page the form was on), htmx or not."""
    web = signed_in(owner)
    url = reverse("judge-run-start", args=[judge.pk])
    form = {"traces": "all", "budget_usd": "1e9"}
    page = reverse("judge", args=[judge.pk])
    for extra in ({"HTTP_REFERER": f"http://testserver{page}"}, {}, {"HTTP_HX_REQUEST": "true"}):
        back = web.post(url, form, **extra)
        assert back.status_code == 302 and back["Location"].endswith(page)
        assert "Not started: Budget (USD): Ensure this value is less than or equal to 100000" in \
            web.get(page).content.decode()
    assert not judge.runs.exists()


class _Refuses(RefusingCommand):
    def handle(self, *args, **options):
        raise FieldInvalid("cohort", "cohort 3 holds none")


def test_a_command_turns_a_refusal_into_a_command_error_with_the_same_text():
    with pytest.raises(CommandError) as caught:
        call_command(_Refuses())
    assert str(caught.value) == "cohort: cohort 3 holds none"


def test_a_real_command_refuses_through_the_base(study):
    """``anytime`` no longer maps the grid's refusal itself."""
    with pytest.raises(CommandError, match="budget grid 'tokens:64,32' is not increasing"):
        call_command("anytime", study=study.name, model="nope", budgets="tokens:64,32", stdout=io.StringIO())


# ------------------------------------------------------------------------------------------ logging
def test_an_expected_refusal_is_one_line_in_the_log(member, owner, study):
    handler = next(h for h in logging.getLogger().handlers if type(h) is logging.StreamHandler)
    log = io.StringIO()
    previous = handler.setStream(log)
    try:
        assert signed_in(member).get(reverse("adjudication", args=[study.pk])).status_code == 403
        api = APIClient()
        api.force_authenticate(member)
        assert api.post(f"/api/v1/studies/{study.pk}/members/", {}, format="json").status_code == 403
        # A refusal a page shows on itself (annotation.middleware.refusals_shown_on): a filter naming nothing.
        leaderboard = reverse("scoring-leaderboard", args=[study.pk])
        assert signed_in(owner).get(leaderboard, {"profile": "nope"}).status_code == 400
    finally:
        handler.setStream(previous)
    lines = log.getvalue().splitlines()
    assert lines == [f"Forbidden (Permission denied): /studies/{study.pk}/adjudication/",
                     f"Forbidden: /api/v1/studies/{study.pk}/members/", f"Bad Request: {leaderboard}"]
