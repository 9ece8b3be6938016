"""The permission matrix: every URL pattern of the project (web and API,
walked from the resolver) x six roles x GET and POST, checked against ONE
table of rules (``RULES``) that mirrors annotation.access.

A new URL without a rule fails ``test_every_url_pattern_has_a_rule`` with
its name and route; add a line to ``RULES`` saying who may GET and POST it.
A method a rule does not list must answer 405 (method guards), except to
anonymous visitors, who are sent to sign in first.

What the outcomes mean:
* ``ok``: anything but a refusal -- not 401/403/404/405 and no server error (502, a model
  server that does not answer, is the API's deliberate answer, not an error of ours)
  (an empty POST may well answer 400, 409 or a redirect back to the form);
* ``403``: a member without the role; ``404``: an outsider (the study is
  not revealed); ``login``: the sign-in redirect (web) or 401 (API);
* ``admin-login``: Django's admin sends every non-staff user to its login.

Size: (URL patterns) x 2 methods x 6 roles; ``test_the_permission_matrix``
counts its cells and names every cell that disagrees with the table.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from agreement.models import CalibrationStudy
from anchors.models import ImportanceRun
from annotation import services
from annotation.importing.pipeline import import_stream
from annotation.models import Invitation, Job, Membership, Skeleton, Step, Study, Trace
from faithfulness.models import FaithfulnessRun, Intervention
from fidelity.running import do_start_run
from fidelity.suites import do_create_suite
from judges import services as judge_services
from judges.models import MECHANISTIC, JudgeConfig
from runs import engine as run_engine
from search.models import Cohort, Scanner
from subjects import services as subject_services
from tests.review.conftest import seed

pytestmark = pytest.mark.django_db

# --------------------------------------------------------------------------
# Who: the rules name sets of roles.

OWNER, ADJUDICATOR, ANNOTATOR, BLIND_ANNOTATOR, OUTSIDER, ANONYMOUS = (
    "owner", "adjudicator", "annotator", "annotator-in-blind-study", "outsider", "anonymous")
ROLES = (OWNER, ADJUDICATOR, ANNOTATOR, BLIND_ANNOTATOR, OUTSIDER, ANONYMOUS)
MEMBER_ROLES = (OWNER, ADJUDICATOR, ANNOTATOR, BLIND_ANNOTATOR)


@dataclass(frozen=True)
class Who:
    name: str
    members: tuple[str, ...] = ()  # member roles let through; the other members get 403
    study_scoped: bool = True  # outsiders get 404 (False: any signed-in user is let through)
    public: bool = False  # anonymous visitors too
    staff: bool = False  # Django's admin: every role here is sent to the admin login
    invitee: bool = False  # only the invited user (the table's outsider); everyone else: 404


PUBLIC = Who("public", MEMBER_ROLES, study_scoped=False, public=True)
SIGNED_IN = Who("signed in", MEMBER_ROLES, study_scoped=False)
MEMBERS = Who("members", MEMBER_ROLES)
SEES_ALL = Who("sees every label (blind mode)", (OWNER, ADJUDICATOR, ANNOTATOR))
ADJUDICATORS = Who("owners and adjudicators", (OWNER, ADJUDICATOR))
OWNERS = Who("owners", (OWNER,))
# The job of the table was started by the owner: who started it, owners and adjudicators cancel.
JOB_CANCEL = Who("who started the job, owners and adjudicators", (OWNER, ADJUDICATOR))
STAFF = Who("staff (Django admin)", staff=True)
# The world's invitation is the owner's, to the outsider: only they answer it (annotation.members, issue 29 L5).
INVITEE = Who("the invited user", invitee=True)


@dataclass(frozen=True)
class Rule:
    """Who may GET and POST one URL; ``kwargs`` names the object of each URL
    argument (attributes of ``World``); a method left None must answer 405."""

    GET: Who | None = None
    POST: Who | None = None
    kwargs: dict[str, str] = field(default_factory=dict)


def study(**methods) -> Rule:
    return Rule(**methods, kwargs={"study_id": "study"})


def api(obj: str, **methods) -> Rule:
    return Rule(**methods, kwargs={"pk": obj})


# --------------------------------------------------------------------------
# THE TABLE: one line per URL name (or route, for unnamed patterns).

RULES: dict[str, Rule] = {
    # Sign-in and the API's own description
    "login": Rule(GET=PUBLIC, POST=PUBLIC),
    "logout": Rule(POST=PUBLIC),
    "api-schema": Rule(GET=PUBLIC),
    "api-docs": Rule(GET=PUBLIC),
    "favicon": Rule(GET=PUBLIC),
    # annotation: web
    "studies": Rule(GET=SIGNED_IN),
    "study-create": Rule(GET=SIGNED_IN, POST=SIGNED_IN),
    "invitation-respond": Rule(POST=INVITEE, kwargs={"invitation_id": "invitation"}),
    "profile": Rule(GET=SIGNED_IN, POST=SIGNED_IN),
    "password-set": Rule(GET=PUBLIC, POST=PUBLIC),  # the one-time link itself is the credential
    "password-choose": Rule(GET=SIGNED_IN, POST=SIGNED_IN),  # after a sign-in with a one-time password
    "study": study(GET=MEMBERS),
    "study-members": study(GET=MEMBERS, POST=OWNERS),
    "study-settings": study(GET=OWNERS, POST=OWNERS),
    "study-primary-judge": study(POST=OWNERS),
    "study-import": study(GET=MEMBERS, POST=OWNERS),
    "trace-list": study(GET=MEMBERS),
    "problem-list": study(GET=MEMBERS),
    "queue": study(GET=MEMBERS),
    "queue-assign": study(POST=OWNERS),
    "adjudication": study(GET=ADJUDICATORS),
    "problem": Rule(GET=MEMBERS, kwargs={"problem_id": "problem"}),
    "problem-edit": Rule(GET=OWNERS, POST=OWNERS, kwargs={"problem_id": "problem"}),
    "skeleton-save": Rule(POST=MEMBERS, kwargs={"problem_id": "problem"}),
    "skeleton-approve": Rule(POST=ADJUDICATORS, kwargs={"skeleton_id": "skeleton"}),
    "skeleton-check": Rule(GET=SIGNED_IN),
    "markdown-preview": Rule(GET=SIGNED_IN),
    "trace": Rule(GET=MEMBERS, kwargs={"trace_id": "trace"}),
    "trace-review": Rule(POST=MEMBERS, kwargs={"trace_id": "trace"}),
    "trace-thought": Rule(GET=MEMBERS, kwargs={"trace_id": "trace"}),
    "adjudicate": Rule(POST=ADJUDICATORS, kwargs={"step_id": "step"}),
    "job": Rule(GET=MEMBERS, POST=JOB_CANCEL, kwargs={"job_id": "import_job"}),
    # annotation: API
    "api-studies": Rule(GET=SIGNED_IN, POST=SIGNED_IN),
    "api-study": api("study", GET=MEMBERS),
    "api-study-imports": api("study", POST=OWNERS),
    "api-study-traces": api("study", GET=MEMBERS),
    "api-study-problems": api("study", GET=MEMBERS),
    "api-study-members": api("study", GET=MEMBERS, POST=OWNERS),
    "api-study-queue": api("study", GET=MEMBERS),
    "api-study-assignments": api("study", POST=OWNERS),
    "api-study-disagreements": api("study", GET=ADJUDICATORS),
    "api-import": api("import_job", GET=MEMBERS),
    "api-job": api("import_job", GET=MEMBERS),
    "api-problem": api("problem", GET=MEMBERS),
    "api-problem-skeletons": api("problem", GET=MEMBERS, POST=MEMBERS),
    "api-skeleton": api("skeleton", GET=MEMBERS),
    "api-trace": api("trace", GET=MEMBERS),
    "api-trace-labels": api("trace", GET=MEMBERS),
    "api-trace-tags": api("trace", GET=MEMBERS),
    "api-step-adjudication": api("step", GET=ADJUDICATORS),
    # scoring: web
    # Score analytics read scores, computed from every source's labels (annotation.gate): not for a blinded annotator.
    "scoring-leaderboard": study(GET=SEES_ALL),
    "scoring-hazard": study(GET=SEES_ALL),
    "scoring-distributions": study(GET=SEES_ALL),
    "scoring-lucky": study(GET=SEES_ALL),
    "scoring-ablations": study(GET=SEES_ALL),
    "scoring-export": study(GET=MEMBERS),
    "scoring-profiles": study(GET=MEMBERS, POST=OWNERS),
    "scoring-recompute": study(POST=OWNERS),
    "scoring-agreement": study(GET=SEES_ALL),
    "scoring-annotators": study(GET=SEES_ALL),
    "scoring-calibrations": study(GET=SEES_ALL, POST=OWNERS),
    "scoring-calibration": Rule(GET=SEES_ALL, kwargs={"study_id": "study", "cal_id": "calibration"}),
    "scoring-calibration-queue": Rule(POST=OWNERS, kwargs={"study_id": "study", "cal_id": "calibration"}),
    "scoring-export-create": study(POST=MEMBERS),
    "scoring-export-job": Rule(GET=MEMBERS, POST=JOB_CANCEL, kwargs={"study_id": "study", "job_id": "export_job"}),
    # The export job is of a restricted kind (labels).
    "scoring-export-download": Rule(GET=ADJUDICATORS, kwargs={"study_id": "study", "job_id": "export_job"}),
    # scoring: API
    "api-trace-scores": api("trace", GET=SEES_ALL),  # blind: only once the annotator finished the trace
    "api-study-leaderboard": api("study", GET=SEES_ALL),
    "api-study-hazard": api("study", GET=SEES_ALL),
    "api-study-lucky-guesses": api("study", GET=SEES_ALL),
    "api-study-profiles": api("study", GET=MEMBERS, POST=OWNERS),
    "api-study-profile": Rule(GET=MEMBERS, kwargs={"pk": "study", "name": "profile_name"}),
    "api-study-score": api("study", POST=OWNERS),
    "api-study-agreement": api("study", GET=SEES_ALL),
    "api-study-agreement-disagreements": api("study", GET=SEES_ALL),
    "api-study-annotator-agreement": api("study", GET=SEES_ALL),
    "api-study-calibrations": api("study", GET=SEES_ALL, POST=OWNERS),
    "api-calibration": api("calibration", GET=SEES_ALL),
    "api-calibration-tuning": api("calibration", GET=SEES_ALL),
    "api-calibration-queue": api("calibration", POST=OWNERS),
    "api-study-exports": api("study", POST=MEMBERS),
    "api-export-download": api("export_job", GET=ADJUDICATORS),
    # judges
    "judge-list": study(GET=MEMBERS),
    "judge-create": study(GET=OWNERS, POST=OWNERS),
    "judge": Rule(GET=MEMBERS, kwargs={"judge_id": "judge"}),
    "judge-edit": Rule(GET=OWNERS, POST=OWNERS, kwargs={"judge_id": "judge"}),
    # Previews (POST action=preview) render a template the user wrote: owners only, as saving (issue 20).
    "judge-prompt": Rule(GET=MEMBERS, POST=OWNERS, kwargs={"judge_id": "judge"}),
    "judge-run-start": Rule(POST=OWNERS, kwargs={"judge_id": "judge"}),
    "judge-disagreements": Rule(GET=SEES_ALL, kwargs={"judge_id": "judge"}),
    "judge-run": Rule(GET=MEMBERS, kwargs={"run_id": "run"}),
    "api-study-judges": api("study", GET=MEMBERS, POST=OWNERS),
    "api-study-judge-runs": api("study", GET=MEMBERS, POST=OWNERS),
    "api-judge": api("judge", GET=MEMBERS),
    "api-judge-run": api("run", GET=MEMBERS),
    # subjects
    "subject-model-list": study(GET=MEMBERS),
    "subject-model-create": study(GET=OWNERS, POST=OWNERS),
    "subject-model-edit": Rule(GET=OWNERS, POST=OWNERS, kwargs={"subject_id": "subject"}),
    "subject-model": Rule(GET=MEMBERS, kwargs={"subject_id": "subject"}),
    "subject-model-probe": Rule(POST=OWNERS, kwargs={"subject_id": "subject"}),
    "generation-start": Rule(POST=OWNERS, kwargs={"subject_id": "subject"}),
    "generation-run": Rule(GET=MEMBERS, kwargs={"run_id": "generation_run"}),
    "api-study-subject-models": api("study", GET=MEMBERS, POST=OWNERS),
    "api-subject-model": api("subject", GET=MEMBERS),  # PATCH: owners (tests/subjects/test_api.py)
    "api-subject-model-probe": api("subject", POST=OWNERS),  # 202 with the probe's job (409 while one runs)
    "api-study-generation-runs": api("study", GET=MEMBERS, POST=OWNERS),
    "api-generation-run": api("generation_run", GET=MEMBERS),
    # abstraction
    "abstraction-table": study(GET=MEMBERS),
    "abstraction-items": study(GET=MEMBERS),
    "abstraction-download": study(GET=MEMBERS),
    "api-abstraction-table": api("study", GET=MEMBERS),
    "api-abstraction-items": api("study", GET=MEMBERS),
    "prompt-template-list": study(GET=MEMBERS, POST=OWNERS),
    "prompt-template-preview": study(POST=OWNERS),
    "prompt-template": Rule(GET=MEMBERS, POST=OWNERS, kwargs={"template_id": "prompt_template"}),
    "api-study-prompt-templates": api("study", GET=MEMBERS, POST=OWNERS),
    "api-prompt-template-preview": api("study", POST=OWNERS),
    "api-prompt-template": api("prompt_template", GET=MEMBERS),
    # faithfulness
    # The evidence reads the judges', the annotators' and the adjudicated labels (annotation.gate).
    "faithfulness": study(GET=SEES_ALL),
    "faithfulness-report": study(GET=SEES_ALL),
    "faithfulness-run": Rule(GET=MEMBERS, kwargs={"run_id": "faithfulness_run"}),
    "faithfulness-intervention": Rule(GET=MEMBERS, kwargs={"pk": "intervention"}),
    # step importance: the study page and its downloads read the tags each member may read (own tags in blind mode)
    "anchors": study(GET=MEMBERS),
    "anchors-export": study(GET=MEMBERS),
    "anchors-run": Rule(GET=MEMBERS, kwargs={"run_id": "importance_run"}),
    "trace-importance": Rule(GET=MEMBERS, kwargs={"trace_id": "trace"}),
    "api-study-faithfulness-runs": api("study", GET=MEMBERS, POST=OWNERS),
    "api-faithfulness-run": api("faithfulness_run", GET=MEMBERS),
    "api-faithfulness-run-interventions": api("faithfulness_run", GET=MEMBERS),
    "api-study-evidence": api("study", GET=SEES_ALL),
    # fidelity diagnostics (docs/fidelity.md)
    "fidelity-list": study(GET=MEMBERS),
    "fidelity-report": Rule(GET=MEMBERS, kwargs={"run_id": "fidelity_run"}),
    "fidelity-item": Rule(GET=MEMBERS, kwargs={"run_id": "fidelity_run", "problem_id": "problem"}),
    "api-study-fidelity-runs": api("study", GET=MEMBERS, POST=OWNERS),
    "api-fidelity-run": api("fidelity_run", GET=MEMBERS),
    "api-fidelity-run-items": api("fidelity_run", GET=MEMBERS),
    # search: the page, cohorts (any member saves one; owners queue and judge them; the author or an owner deletes)
    "search": study(GET=MEMBERS),
    "search-download": study(GET=MEMBERS),
    "search-cohorts": study(GET=MEMBERS, POST=MEMBERS),
    "search-cohort": Rule(GET=MEMBERS, kwargs={"pk": "cohort"}),
    "search-cohort-compare": Rule(GET=MEMBERS, kwargs={"pk": "cohort"}),
    "search-cohort-assign": Rule(POST=OWNERS, kwargs={"pk": "cohort"}),
    "search-cohort-judge": Rule(POST=OWNERS, kwargs={"pk": "cohort"}),
    "search-cohort-delete": Rule(POST=OWNERS, kwargs={"pk": "doomed_cohort"}),
    "api-study-cohorts": api("study", GET=MEMBERS, POST=MEMBERS),
    "api-cohort": api("cohort", GET=MEMBERS),
    "api-cohort-compare": api("cohort", GET=MEMBERS),
    "api-cohort-assignments": api("cohort", POST=OWNERS),
    "api-cohort-judge-runs": api("cohort", POST=OWNERS),
    # search: scanners (owners create and run them, adjudicators draw samples, every member answers)
    "search-scanners": study(GET=MEMBERS, POST=OWNERS),
    "search-scanner": Rule(GET=MEMBERS, kwargs={"pk": "scanner"}),
    "search-scanner-run": Rule(POST=OWNERS, kwargs={"pk": "scanner"}),
    "search-scanner-sample": Rule(POST=ADJUDICATORS, kwargs={"pk": "scanner"}),
    "search-scanner-label": Rule(POST=MEMBERS, kwargs={"pk": "scanner"}),
    "api-study-scanners": api("study", GET=MEMBERS, POST=OWNERS),
    "api-scanner": api("scanner", GET=MEMBERS),
    "api-scanner-runs": api("scanner", POST=OWNERS),
    "api-scanner-sample": api("scanner", POST=ADJUDICATORS),
    "api-scanner-labels": api("scanner", POST=MEMBERS),
    "api-study-abstraction-runs": api("study", GET=MEMBERS, POST=OWNERS),
    # runs of every kind (runs.views)
    "study-runs": study(GET=MEMBERS, POST=OWNERS),
    "study-run-cancel": Rule(POST=JOB_CANCEL, kwargs={"study_id": "study", "run_id": "engine_run"}),
    "study-run-retry": Rule(POST=OWNERS, kwargs={"study_id": "study", "run_id": "engine_run"}),
    "api-study-runs": api("study", GET=MEMBERS, POST=OWNERS),  # POST {"kind": ...}: 202 with the run
    "api-run": api("engine_run", GET=MEMBERS),
    "api-run-cancel": api("engine_run", POST=JOB_CANCEL),
    "api-run-retry": api("engine_run", POST=OWNERS),
}
#: Django's admin site: its own staff check, one rule for all its patterns.
ADMIN_RULE = Rule(GET=STAFF, POST=STAFF)
ADMIN_PUBLIC = {"admin:login": Rule(GET=PUBLIC, POST=PUBLIC)}


# --------------------------------------------------------------------------
# The URL patterns of the project


@dataclass(frozen=True)
class Pattern:
    key: str  # the URL name (namespaced), or the route for an unnamed pattern
    route: str
    converters: dict[str, str]  # argument -> converter class name
    callback: object = field(compare=False, default=None)

    @property
    def is_admin(self) -> bool:
        return self.route.startswith("admin/")

    @property
    def is_api(self) -> bool:
        return self.route.startswith("api/")


def url_patterns() -> list[Pattern]:
    out: list[Pattern] = []

    def walk(patterns, prefix: str, namespace: str, converters: dict[str, str]) -> None:
        for p in patterns:
            conv = {**converters, **{k: type(v).__name__ for k, v in getattr(p.pattern, "converters", {}).items()}}
            if isinstance(p, URLResolver):
                ns = f"{namespace}{p.namespace}:" if p.namespace else namespace
                walk(p.url_patterns, prefix + str(p.pattern), ns, conv)
            elif isinstance(p, URLPattern):
                route = prefix + str(p.pattern)
                out.append(Pattern(f"{namespace}{p.name}" if p.name else route, route, conv, p.callback))

    walk(get_resolver().url_patterns, "", "", {})
    return out


def rule_for(pattern: Pattern) -> Rule | None:
    if pattern.is_admin:
        return ADMIN_PUBLIC.get(pattern.key, ADMIN_RULE)
    return RULES.get(pattern.key)


def test_every_url_pattern_has_a_rule():
    patterns = url_patterns()
    missing = [f"{p.key} ({p.route})" for p in patterns if rule_for(p) is None]
    assert not missing, ("URL patterns without a rule in tests/test_permission_matrix.py RULES -- say who may GET "
                         "and POST each:\n  " + "\n  ".join(missing))
    known = {p.key for p in patterns}
    stale = sorted(set(RULES) - known)
    assert not stale, f"RULES name URLs that no longer exist: {', '.join(stale)}"


def test_every_function_view_has_a_method_guard():
    """require_GET / require_POST / require_http_methods on every function view
    of the project (class-based views answer 405 themselves; the admin is Django's)."""
    unguarded = []
    for p in url_patterns():
        view = p.callback
        if p.is_admin or hasattr(view, "view_class") or hasattr(view, "cls"):
            continue
        if not _guarded(view):
            unguarded.append(f"{p.key} ({view.__module__}.{view.__name__})")
    assert not unguarded, "function views without a method guard:\n  " + "\n  ".join(unguarded)


def _guarded(view) -> bool:
    while view is not None:
        if "request_method_list" in getattr(getattr(view, "__code__", None), "co_freevars", ()):
            return True
        view = getattr(view, "__wrapped__", None)
    return False


# --------------------------------------------------------------------------
# The world every role is tested in


class World:
    """A study with one of everything a URL can name."""

    def __init__(self, name: str, *, blind: bool, owner, adjudicator, annotator, outsider=None) -> None:
        self.study, _ = services.do_get_or_create_study(name, owner=owner)
        Study.objects.filter(pk=self.study.pk).update(blind=blind)
        services.do_add_member(self.study, adjudicator.username, Membership.Role.ADJUDICATOR)
        services.do_add_member(self.study, annotator.username, Membership.Role.ANNOTATOR)
        seed(lambda data: import_stream(self.study, io.BytesIO(data), "reasonaudit"))
        self.problem = self.study.problems.order_by("pk").first()
        self.skeleton = Skeleton.objects.filter(problem=self.problem).order_by("pk").first()
        self.trace = Trace.objects.filter(study=self.study).order_by("pk").first()
        self.step = Step.objects.filter(trace=self.trace).order_by("index").first()
        self.import_job = services.do_create_import_job(self.study, fmt="reasonaudit", skip_invalid=False,
                                                        user=owner, path=Path("matrix.jsonl"))
        self.export_job = Job.objects.create(study=self.study, kind=Job.Kind.EXPORT, created_by=owner,
                                             params={"what": "labels", "format": "jsonl"})
        self.judge, _ = judge_services.do_save_judge(
            self.study, {"name": "gpt", "model": "gpt-x", "base_url": "http://127.0.0.1:9/v1"})
        mechanistic = JudgeConfig.objects.get(study=self.study, name=MECHANISTIC)
        self.run = judge_services.do_start_run(mechanistic, queue=False)
        self.engine_run = self.run.run
        self.calibration = CalibrationStudy.objects.create(study=self.study, name="pilot", sample_size=2,
                                                           candidates=["judge:gpt"], created_by=owner)
        self.profile_name = "default"
        self.subject, _ = subject_services.do_save_subject(
            self.study, {"name": "tiny", "model": "tiny", "base_url": "http://127.0.0.1:9/v1"})
        self.generation_run = subject_services.do_start_generation(self.subject, queue=False)
        self.prompt_template = self.subject.prompt_template
        # faithfulness: a run and one intervention (made directly: the world's server is down)
        fjob = Job.objects.create(study=self.study, kind="faithfulness", created_by=owner)
        self.faithfulness_run = FaithfulnessRun.objects.create(
            job=fjob, run=run_engine.create_run(fjob, "faithfulness", [], 1), subject=self.subject,
            kind="interventions", config_version=1, mode="instructed")
        self.intervention = Intervention.objects.create(frun=self.faithfulness_run, trace=self.trace,
                                                        kind="value_flip", step=1, why="matrix")
        ijob = Job.objects.create(study=self.study, kind="step_importance", created_by=owner)
        self.importance_run = ImportanceRun.objects.create(
            job=ijob, run=run_engine.create_run(ijob, "step_importance", [], 1), subject=self.subject,
            config_version=1, mode="instructed")
        suite = do_create_suite(self.study, "matrix", axes=["perturbation"],
                                                  problems=f"pid:{self.problem.problem_id}").suite
        self.fidelity_run = do_start_run(suite, self.subject, axes=["perturbation"],
                                                           problems=f"pid:{self.problem.problem_id}", queue=False)
        # search: two cohorts by the owner (the owner's POST to delete/ takes the second)
        self.cohort = Cohort.objects.create(study=self.study, name="matrix", created_by=owner)
        self.doomed_cohort = Cohort.objects.create(study=self.study, name="doomed", created_by=owner)
        # The outsider's invitation: the matrix's empty POST declines it, so they stay an outsider.
        self.invitation = (Invitation.objects.create(study=self.study, user=outsider, role=Membership.Role.ANNOTATOR,
                                                     invited_by=owner) if outsider is not None else None)
        self.scanner = Scanner.objects.create(study=self.study, name="waits", question="Does it say wait?",
                                              judge=self.judge, created_by=owner)


def _path(p: Pattern, world) -> str:
    rule = rule_for(p) or Rule()
    path = p.route
    for arg, conv in p.converters.items():
        obj = rule.kwargs.get(arg)
        if obj is not None:
            value = getattr(world, obj)
            value = value if isinstance(value, str) else value.pk
        else:  # admin patterns and the like: any value of the converter's type
            value = 1 if conv == "IntConverter" else "x"
        path = path.replace(f"<{_converter_name(conv)}:{arg}>", str(value)).replace(f"<{arg}>", str(value))
    return _regex_free(path)


def _converter_name(conv: str) -> str:
    return {"IntConverter": "int", "StringConverter": "str", "PathConverter": "path", "SlugConverter": "slug",
            "UUIDConverter": "uuid"}.get(conv, conv)


def _regex_free(route: str) -> str:
    """Admin's regex routes (``^(?P<app_label>auth)/$``) as a plain path."""
    import re

    route = route.replace("^", "").replace("$", "").replace("\\Z", "")
    route = re.sub(r"\(\?P<\w+>([a-z_|]+)\)", lambda m: m.group(1).split("|")[0], route)
    route = re.sub(r"\(\?P<\w+>[^)]*\)", "x", route)
    return route


# --------------------------------------------------------------------------
# The matrix


def expected(rule: Rule, method: str, role: str, pattern: Pattern) -> str:
    who: Who | None = getattr(rule, method)
    if who is not None and who.public:
        return "ok"
    # A public page answers 405 to its other methods without asking anyone to sign in.
    public_page = any(w is not None and w.public for w in (rule.GET, rule.POST))
    if role == ANONYMOUS and not public_page:
        return "admin-login" if pattern.is_admin else "login"
    if who is None:
        return "405"
    if who.staff:
        return "admin-login"
    if who.invitee:
        return "ok" if role == OUTSIDER else "404"
    if role == OUTSIDER:
        return "404" if who.study_scoped else "ok"
    return "ok" if role in who.members else "403"


def outcome(response) -> str:
    code = response.status_code
    location = response.get("Location", "")
    # The admin's logout sends a non-staff user to the admin index, which asks them to sign in.
    if code == 302 and (location.startswith("/admin/login/") or location == "/admin/"):
        return "admin-login"
    if (code == 302 and location.startswith("/login/")) or code == 401:
        return "login"
    if code in (403, 404, 405):
        return str(code)
    # 502 is a deliberate answer (the API's BadGateway: a model server that does not answer), not a crash.
    if code >= 500 and code != 502:
        return f"server error {code}"
    return "ok"


@pytest.fixture
def worlds(django_user_model):
    users = {name: django_user_model.objects.create_user(name, password="pw")
             for name in ("olivia", "adam", "anna", "mallory")}
    kw = {"owner": users["olivia"], "adjudicator": users["adam"], "annotator": users["anna"]}
    open_world = World("Open study", blind=False, outsider=users["mallory"], **kw)
    blind_world = World("Blind study", blind=True, outsider=users["mallory"], **kw)
    return {
        OWNER: (users["olivia"], open_world), ADJUDICATOR: (users["adam"], open_world),
        ANNOTATOR: (users["anna"], open_world), BLIND_ANNOTATOR: (users["anna"], blind_world),
        OUTSIDER: (users["mallory"], open_world), ANONYMOUS: (None, open_world),
    }


@pytest.mark.parametrize("role", ROLES)
def test_the_permission_matrix(client, worlds, role):
    user, world = worlds[role]
    mismatches = []
    cells = 0
    for p in url_patterns():
        rule = rule_for(p)
        assert rule is not None, f"no rule for {p.key} ({p.route}); see test_every_url_pattern_has_a_rule"
        path = "/" + _path(p, world)
        for method in ("GET", "POST"):
            if user is not None:
                client.force_login(user)  # a POST to logout/ signs out; sign in again for every cell
            else:
                client.logout()
            response = client.get(path) if method == "GET" else client.post(path)
            cells += 1
            who = getattr(rule, method)
            want = expected(rule, method, role, p)
            got = outcome(response)
            if got == "login" and want == "ok" and who is not None and who.public:
                got = "ok"  # a public page may send anyone to sign in (logout does)
            if got != want:
                mismatches.append(f"{method} {path} [{p.key}] as {role}: expected {want}, got {got} "
                                  f"({response.status_code})")
    assert cells == 2 * len(url_patterns())
    assert not mismatches, f"{len(mismatches)} of {cells} cells disagree with RULES:\n  " + "\n  ".join(mismatches)
