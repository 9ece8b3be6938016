"""The one filter set of trace search (docs/search.md): the API's ``GET studies/<id>/traces/`` and
the search page read the same parameters through ``TraceSearchFilter``.

Filters that read labels name a label source (``source``): ``human`` (any annotator), ``mine``,
``annotator:USERNAME``, ``adjudicated`` or ``judge:NAME``. Every filter declares the label sources
it reads (``READS``, checked complete when this module loads); before any filter runs,
``filter_queryset`` asks the visibility gate (annotation.gate), so in a blind study an annotator who
does not see everything is refused (403, the gate's one message) every filter that reads another
source than the trace and her own labels: ``source=mine`` (or her own ``annotator:``) only.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable

import django_filters
from django import forms
from django.core.exceptions import ImproperlyConfigured
from django.db.models import (
    Exists,
    F,
    FloatField,
    Min,
    OuterRef,
    Q,
    QuerySet,
)
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast, Length
from django.http import QueryDict

from annotation import gate
from annotation.gate import Source
from annotation.models import Membership, Step, StepLabel, Study, Trace, TraceReview, Verdict
from annotation.review.filters import TRACE_FILTERS, filter_traces
from search import backends
from search.core import query as ql
from search.core.regex import Budget, BudgetSpent, RegexError, compile_bounded
from search.errors import bad as _bad

SOURCE_HELP = "label source: human, mine, annotator:USERNAME, adjudicated or judge:NAME"
# The regex option reads step texts in Python: at most this many steps and this long per request.
REGEX_MAX_STEPS = 200_000
# Seconds of matching a request may spend in all (search.core.regex.Budget), of which filtering
# leaves REGEX_MARK_RESERVE_S to the marking of the page's snippets.
REGEX_BUDGET_S = 2.0
REGEX_MARK_RESERVE_S = 0.5
_REGIME_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")


class FlagField(forms.Field):
    TRUE = ("1", "true", "yes", "on")
    FALSE = ("0", "false", "no", "off")

    def to_python(self, value):
        if value in (None, ""):
            return None
        v = str(value).strip().lower()
        if v in self.TRUE:
            return True
        if v in self.FALSE:
            return False
        raise forms.ValidationError("expected true or false")


class FlagFilter(django_filters.Filter):
    field_class = FlagField


def _sees_everything(membership: Membership) -> bool:
    return gate.may_read(membership, gate.OTHER_SOURCES)


class TraceSearchFilter(django_filters.FilterSet):
    """Filters of a study's traces; ``study`` and ``membership`` decide sources and refusals."""

    channel = django_filters.ChoiceFilter(choices=Step.Channel.choices, method="filter_nothing",
                                          help_text="the steps q and re read: thought or answer (default both)")
    model = django_filters.CharFilter(field_name="model")
    domain = django_filters.CharFilter(field_name="problem__domain")
    answer_correct = FlagFilter(field_name="answer_correct")
    flagged = FlagFilter(field_name="flagged")
    lucky_guess = FlagFilter(method="filter_review", help_text="a lucky guess under the default profile")
    needs_review = FlagFilter(method="filter_review", help_text="true: not labelled completely by you")
    disagreement = FlagFilter(method="filter_review", help_text="labels of some step disagree")
    function_tag = django_filters.CharFilter(method="filter_function_tag",
                                             help_text="a step tagged with this function by any source (docs/review.md)")
    source = django_filters.CharFilter(method="filter_source", help_text=SOURCE_HELP)
    labelled = FlagFilter(method="filter_labelled", help_text="some step has a label from `source`")
    verdict = django_filters.ChoiceFilter(choices=Verdict.choices, method="filter_verdict",
                                          help_text="some step has this verdict from `source`")
    first_error_min = django_filters.NumberFilter(method="filter_first_error", min_value=1)
    first_error_max = django_filters.NumberFilter(method="filter_first_error", min_value=1)
    first_error_rel_min = django_filters.NumberFilter(method="filter_first_error", min_value=0, max_value=1)
    first_error_rel_max = django_filters.NumberFilter(method="filter_first_error", min_value=0, max_value=1)
    judge = django_filters.CharFilter(method="filter_nothing", help_text="judge of human_judge_disagreement (default: the primary)")
    human_judge_disagreement = FlagFilter(method="filter_human_judge")
    adjudicated = FlagFilter(method="filter_adjudicated")
    review_flag = django_filters.ChoiceFilter(choices=[c for c in TraceReview.Flag.choices if c[0]],
                                              method="filter_review_flag")
    n_steps_min = django_filters.NumberFilter(field_name="n_steps", lookup_expr="gte", min_value=0)
    n_steps_max = django_filters.NumberFilter(field_name="n_steps", lookup_expr="lte", min_value=0)
    chars_min = django_filters.NumberFilter(method="filter_chars", min_value=0)
    chars_max = django_filters.NumberFilter(method="filter_chars", min_value=0)
    regime = django_filters.CharFilter(method="filter_regime", help_text="key=value (repeatable); dotted keys go deeper")
    coverage_min = django_filters.NumberFilter(method="filter_coverage", min_value=0, max_value=1)
    coverage_max = django_filters.NumberFilter(method="filter_coverage", min_value=0, max_value=1)
    intervention_changed = FlagFilter(method="filter_intervention")
    fidelity_failed = FlagFilter(method="filter_fidelity")
    cohort = django_filters.NumberFilter(method="filter_cohort", help_text="id of a cohort of the study")
    scanner = django_filters.CharFilter(method="filter_scanner",
                                        help_text="ID:yes, ID:no, ID:uncited or ID:failed (a scanner's answer)")
    # After every other filter: what they leave is the search without its text (``without_text``), which a broad text
    # query's first matches are found among (search.paging.SearchPaginator).
    q = django_filters.CharFilter(method="filter_q", help_text="text query (docs/search.md): words, \"phrases\", or, -word")
    # Last: the regex reads the texts of the traces every other filter left.
    re = django_filters.CharFilter(method="filter_re", help_text="a regular expression over step texts (bounded)")

    class Meta:
        model = Trace
        fields: list[str] = []

    def __init__(self, data=None, queryset=None, *, study: Study, membership: Membership, **kwargs) -> None:
        super().__init__(data, queryset, **kwargs)
        self.study, self.membership = study, membership
        self.parsed: ql.Query | None = None
        # The traces every filter but q and re selects, set when q is read (filter_q).
        self.without_text: QuerySet | None = None
        self.pattern = None
        self.regex_budget: Budget | None = None
        self.notes: list[str] = []

    # -- helpers -----------------------------------------------------------
    def _value(self, name: str):
        return self.form.cleaned_data.get(name)

    def label_q(self, source: str | None, *, prefix: str = "") -> Q:
        """Q over StepLabel for a source name, after the blind-mode check."""
        user = self.membership.user
        source, own = self.resolve_source(source)
        gate.check(self.membership, f"source={source}", gate.label_sources(source, own=own))
        p = prefix
        if own:
            return Q(**{f"{p}kind": StepLabel.Kind.HUMAN, f"{p}annotator": user})
        if source == "human":
            return Q(**{f"{p}kind": StepLabel.Kind.HUMAN})
        if source == "adjudicated":
            return Q(**{f"{p}kind": StepLabel.Kind.ADJUDICATION})
        if source.startswith("annotator:"):
            name = source.split(":", 1)[1]
            if not Membership.objects.filter(study=self.study, user__username=name).exists():
                raise _bad("source", f"no annotator named {name!r} in this study")
            return Q(**{f"{p}kind": StepLabel.Kind.HUMAN, f"{p}annotator__username": name})
        if source.startswith("judge:"):
            name = source.split(":", 1)[1]
            if not self.study.judges.filter(name=name).exists():
                raise _bad("source", f"no judge named {name!r} in this study")
            return Q(**{f"{p}kind": StepLabel.Kind.JUDGE, f"{p}judge__name": name})
        raise _bad("source", f"unknown label source {source!r}; use {SOURCE_HELP.split(': ', 1)[1]}")

    def resolve_source(self, source: str | None) -> tuple[str, bool]:
        """The source name (``human`` by default, ``mine`` for a blinded annotator) and whether it is the member's."""
        user = self.membership.user
        source = (source or "").strip() or ("human" if _sees_everything(self.membership) else "mine")
        own = source == "mine" or (user.pk is not None and source == f"annotator:{user.get_username()}")
        return source, own

    # -- the gate ----------------------------------------------------------
    def reads(self, name: str) -> frozenset[Source]:
        """What the filter ``name`` reads with this request's values (``READS``)."""
        declared = READS[name]
        return declared(self) if callable(declared) else declared

    def filter_queryset(self, queryset: QuerySet) -> QuerySet:
        # Every filter given a value passes the gate before any runs: a refusal never depends on the data.
        for name, value in self.form.cleaned_data.items():
            if value not in (None, "", [], ()):
                gate.check(self.membership, f"the {name} filter", self.reads(name))
        return super().filter_queryset(queryset)

    def _labelled_traces(self, source: str | None, **where) -> QuerySet:
        """Ids of the traces with a label from ``source`` (and ``where``), for ``pk__in``: one pass over
        the labels, not a correlated EXISTS per trace. SQLite (no statistics) ran the EXISTS as an
        index probe of every step of every trace of the study: 1,000,000 probes at 100,000 traces
        (docs/benchmarks.md). No study join here: the outer query keeps the study's traces, and a
        join through the trace's study made SQLite drive the pass from the study's traces again."""
        return StepLabel.objects.filter(self.label_q(source), **where).values("step__trace_id")

    # -- filters -----------------------------------------------------------
    def filter_nothing(self, qs: QuerySet, name: str, value) -> QuerySet:
        return qs  # read by other filters

    def filter_source(self, qs: QuerySet, name: str, value: str) -> QuerySet:
        self.label_q(value)  # validated (and refused in blind mode) even when no filter reads it
        return qs

    def filter_q(self, qs: QuerySet, name: str, value: str) -> QuerySet:
        try:
            self.parsed = ql.parse(value)
        except ql.QueryError as exc:
            raise _bad("q", str(exc)) from None
        if self.parsed is None:
            return qs
        self.without_text = qs
        where, params = self.step_where()
        label_where, label_params = self.label_where()
        sql, sql_params = backends.matching_traces(self.parsed, study_id=self.study.pk, step_where=where,
                                                   step_params=params, label_where=label_where,
                                                   label_params=label_params)
        return qs.filter(pk__in=RawSQL(sql, sql_params))

    def step_where(self) -> tuple[str, list]:
        channel = self._value("channel")
        return ("t.channel = %s", [channel]) if channel else ("", [])

    def label_where(self) -> tuple[str, list]:
        """Whose notes a text query reads: a blinded annotator only their own."""
        if _sees_everything(self.membership):
            return "", []
        return "t.kind = %s AND t.annotator_id = %s", [StepLabel.Kind.HUMAN, self.membership.user_id]

    def filter_review(self, qs: QuerySet, name: str, value: bool | None) -> QuerySet:
        if value is None:
            return qs
        return filter_traces(qs, {name: "true" if value else "false"}, self.study, self.membership)

    def filter_function_tag(self, qs: QuerySet, name: str, value: str) -> QuerySet:
        return filter_traces(qs, {name: value}, self.study, self.membership) if value else qs

    def filter_labelled(self, qs: QuerySet, name: str, value: bool | None) -> QuerySet:
        if value is None:
            return qs
        labelled = self._labelled_traces(self._value("source"))
        return qs.filter(pk__in=labelled) if value else qs.exclude(pk__in=labelled)

    def filter_verdict(self, qs: QuerySet, name: str, value: str) -> QuerySet:
        return qs.filter(pk__in=self._labelled_traces(self._value("source"), verdict=value))

    def filter_first_error(self, qs: QuerySet, name: str, value) -> QuerySet:
        if value is None:
            return qs
        # One grouped pass over the source's invalid labels (few), not a correlated MIN per trace:
        # traces whose first invalid step is in range. A trace with no invalid label has no first error.
        # No join through the trace's study (the outer query keeps the study's traces): with it SQLite
        # drove the pass from the study's traces, probing every step (450 ms CPU at 100,000 traces
        # against 30 ms from the labels).
        first = (StepLabel.objects.filter(self.label_q(self._value("source")), verdict=Verdict.INVALID)
                 .values("step__trace").annotate(first_error=Min("step__index")))
        op = "gte" if name.endswith("_min") else "lte"
        if "_rel_" in name:
            first = (first.annotate(n=Min("step__trace__n_steps"))
                     .annotate(rel=Cast(F("first_error"), FloatField()) / F("n")).filter(**{f"rel__{op}": value}))
        else:
            first = first.filter(**{f"first_error__{op}": value})
        return qs.filter(pk__in=first.values("step__trace"))

    def filter_human_judge(self, qs: QuerySet, name: str, value: bool | None) -> QuerySet:
        if value is None:
            return qs
        judge_name = (self._value("judge") or "").strip()
        judge = (self.study.judges.filter(name=judge_name).first() if judge_name
                 else self.study.primary_judge)
        if judge is None:
            raise _bad("judge", f"no judge named {judge_name!r} in this study" if judge_name
                       else "the study has no primary judge; name one with judge=NAME")
        judged = StepLabel.objects.filter(step=OuterRef("step"), kind=StepLabel.Kind.JUDGE, judge=judge)
        differs = StepLabel.objects.filter(
            step__trace=OuterRef("pk"), kind=StepLabel.Kind.HUMAN,
        ).filter(Exists(judged.exclude(verdict=OuterRef("verdict"))))
        return qs.filter(Exists(differs)) if value else qs.exclude(Exists(differs))

    def filter_adjudicated(self, qs: QuerySet, name: str, value: bool | None) -> QuerySet:
        if value is None:
            return qs
        done = StepLabel.objects.filter(step__trace=OuterRef("pk"), kind=StepLabel.Kind.ADJUDICATION)
        return qs.filter(Exists(done)) if value else qs.exclude(Exists(done))

    def filter_review_flag(self, qs: QuerySet, name: str, value: str) -> QuerySet:
        return qs.filter(Exists(TraceReview.objects.filter(trace=OuterRef("pk"), flag=value)))

    def filter_chars(self, qs: QuerySet, name: str, value) -> QuerySet:
        if value is None:
            return qs
        if "raw_chars" not in qs.query.annotations:
            qs = qs.annotate(raw_chars=Length("raw"))
        return qs.filter(**{f"raw_chars__{'gte' if name.endswith('_min') else 'lte'}": value})

    def filter_regime(self, qs: QuerySet, name: str, value: str) -> QuerySet:
        for pair in self.data.getlist(name) if hasattr(self.data, "getlist") else [value]:
            key, sep, raw = pair.partition("=")
            key = key.strip()
            if not sep or not _REGIME_KEY.match(key):
                raise _bad("regime", f"{pair!r}: give key=value, the key of letters, digits, _ . -")
            try:
                wanted = json.loads(raw)
            except ValueError:
                wanted = raw
            if isinstance(wanted, float) and not math.isfinite(wanted):
                wanted = raw  # NaN, Infinity, 1e999: no JSON document holds them, so only the text can match
            path = "__".join(key.split("."))
            if isinstance(wanted, (dict, list)):
                raise _bad("regime", f"{pair!r}: compare with a number, text, true/false or null")
            # A number may have been recorded as text (or the other way): accept either spelling.
            cond = Q(**{f"regime__{path}": wanted})
            if not isinstance(wanted, str):
                cond |= Q(**{f"regime__{path}": raw})
            qs = qs.filter(cond)
        return qs

    def filter_coverage(self, qs: QuerySet, name: str, value) -> QuerySet:
        from scoring.models import TraceScore

        if value is None:
            return qs
        scores = TraceScore.objects.filter(trace=OuterRef("pk"), score_set__source="final", l_gold__gt=0)
        if self.study.default_profile_id:
            scores = scores.filter(score_set__profile_id=self.study.default_profile_id)
        scores = scores.annotate(rel=Cast(F("coverage"), FloatField()) / F("l_gold"))
        op = "gte" if name.endswith("_min") else "lte"
        return qs.filter(Exists(scores.filter(**{f"rel__{op}": value})))

    def filter_intervention(self, qs: QuerySet, name: str, value: bool | None) -> QuerySet:
        from faithfulness.models import Intervention, Status

        if value is None:
            return qs
        # An intervention answered (status ok) with another answer than the original's.
        changed = Intervention.objects.filter(trace=OuterRef("pk"), status=Status.OK).exclude(
            new_answer=F("original_answer"))
        return qs.filter(Exists(changed)) if value else qs.exclude(Exists(changed))

    def filter_fidelity(self, qs: QuerySet, name: str, value: bool | None) -> QuerySet:
        from fidelity.models import Output

        if value is None:
            return qs
        # The trace answers a fidelity variant (a forward output of a variant problem) and is wrong.
        variant = Output.objects.filter(trace=OuterRef("pk"), role=Output.Role.FORWARD,
                                        problem__fidelity_variant__isnull=False)
        cond = Q(Exists(variant)) & Q(answer_correct=False)
        return qs.filter(cond) if value else qs.exclude(cond)

    def filter_cohort(self, qs: QuerySet, name: str, value) -> QuerySet:
        from search.models import CohortTrace

        if value is None:
            return qs
        if self.chosen_cohort() is None:
            raise _bad("cohort", f"no cohort {int(value)} in this study")
        return qs.filter(Exists(CohortTrace.objects.filter(cohort_id=int(value), trace=OuterRef("pk"))))

    def chosen_cohort(self):
        """The cohort of the ``cohort`` filter (None when absent or not of this study)."""
        from search.models import Cohort

        pk = self._value("cohort")
        if pk is None:
            return None
        if not hasattr(self, "_cohort"):
            self._cohort = Cohort.objects.filter(study=self.study, pk=int(pk)).select_related("created_by").first()
        return self._cohort

    def filter_scanner(self, qs: QuerySet, name: str, value: str) -> QuerySet:
        from search.scanners import scanner_condition

        return qs.filter(scanner_condition(self.study, self.membership, value))

    def filter_re(self, qs: QuerySet, name: str, value: str) -> QuerySet:
        try:
            self.pattern = compile_bounded(value)
        except RegexError as exc:
            raise _bad("re", str(exc)) from None
        # One budget for the request: filtering spends it but leaves REGEX_MARK_RESERVE_S to the
        # page's snippet marking (search.services.hits), which spends the rest.
        self.regex_budget = Budget(REGEX_BUDGET_S)
        matched: set[int] = set()
        steps = Step.objects.filter(trace__in=qs.order_by().values("pk"))
        if self._value("channel"):
            steps = steps.filter(channel=self._value("channel"))
        steps = (steps.order_by("trace_id", "index")
                 .values_list("trace_id", "text"))
        n = 0
        for trace_id, text in steps.iterator(chunk_size=2000):
            n += 1
            if trace_id in matched:
                continue
            try:
                if n > REGEX_MAX_STEPS:
                    raise BudgetSpent
                if self.pattern.search(text, self.regex_budget, reserve=REGEX_MARK_RESERVE_S):
                    matched.add(trace_id)
            except BudgetSpent:
                self.notes.append(f"the regular expression read the first {n - 1} steps only "
                                  f"(limits: {REGEX_MAX_STEPS} steps, {REGEX_BUDGET_S:g} s a request); "
                                  "narrow the search")
                break
            except TimeoutError:
                raise _bad("re", "the pattern took too long on a step; simplify it") from None
        if not matched:
            return qs.none()
        # Integers only, so inlining is safe; a parameter per id would pass SQLite's variable limit.
        ids = ",".join(str(int(pk)) for pk in sorted(matched))
        return qs.filter(pk__in=RawSQL(f"SELECT id FROM annotation_trace WHERE id IN ({ids})", []))


# --------------------------------------------------------------------------
# What every filter reads (annotation.gate): a set, or a function of the filter set (of the request's values)


def _source_reads(fs: TraceSearchFilter) -> frozenset[Source]:
    source, own = fs.resolve_source(fs._value("source"))
    return gate.label_sources(source, own=own)


def _cohort_reads(fs: TraceSearchFilter) -> frozenset[Source]:
    cohort = fs.chosen_cohort()
    return cohort_reads(cohort, fs.membership) if cohort is not None else frozenset({Source.TRACE})


def _registered(name: str):
    return lambda fs: TRACE_FILTERS[name].reads if name in TRACE_FILTERS else frozenset(Source)


def cohort_reads(cohort, viewer: Membership | None) -> frozenset[Source]:
    """The label sources a cohort's snapshot read, as ``viewer`` sees them: what its query's filters
    read for its author (annotation.gate) -- the author's own labels are another member's labels to
    anyone else, and an author who saw everything matched every source's notes with a text query."""
    if gate.readable(viewer) == frozenset(Source):
        return frozenset({Source.TRACE})  # nothing to decide: the viewer reads every source
    author = (Membership.objects.filter(study_id=cohort.study_id, user_id=cohort.created_by_id)
              .select_related("study", "user").first() if cohort.created_by_id else None)
    if author is None:  # the author left: assume they saw everything
        from django.contrib.auth import get_user_model

        author = Membership(study=cohort.study, user=get_user_model()(), role=Membership.Role.OWNER)
    data = QueryDict(mutable=True)
    for key, value in (cohort.query or {}).items():
        for v in value if isinstance(value, list) else [value]:
            data.appendlist(key, str(v))
    fs = TraceSearchFilter(data, queryset=Trace.objects.none(), study=cohort.study, membership=author)
    if not fs.is_valid():
        return frozenset(Source)  # a query that no longer parses: it may have read anything
    reads: set[Source] = {Source.TRACE}
    for name, value in fs.form.cleaned_data.items():
        if value not in (None, "", [], ()):
            reads |= fs.reads(name)
    if "q" in data and data.get("q"):
        reads |= gate.readable(author) - {Source.SCORES, Source.SCANNER}
    if viewer is None or author.user_id != viewer.user_id:
        reads = {Source.PEER if r == Source.OWN else r for r in reads}
    return frozenset(reads)



_T = frozenset({Source.TRACE})
#: Text queries read the trace, and the notes of labels: the member's own only unless she sees
#: everything (``label_where``), so a text query never reads what the gate would refuse.
_TEXT = frozenset({Source.TRACE, Source.OWN})
_OTHERS = frozenset({Source.OWN, Source.PEER, Source.JUDGE})
READS: dict[str, frozenset[Source] | Callable[[TraceSearchFilter], frozenset[Source]]] = {
    "channel": _T, "q": _TEXT, "re": _T, "model": _T, "domain": _T, "n_steps_min": _T, "n_steps_max": _T,
    "chars_min": _T, "chars_max": _T, "regime": _T,
    # Model runs' outputs on the trace (interventions, fidelity variants): no labels.
    "intervention_changed": _T, "fidelity_failed": _T,
    "answer_correct": _registered("answer_correct"), "flagged": _registered("flagged"),
    "lucky_guess": _registered("lucky_guess"), "needs_review": _registered("needs_review"),
    "disagreement": _registered("disagreement"), "function_tag": _registered("function_tag"),
    "source": _source_reads, "labelled": _source_reads, "verdict": _source_reads,
    "first_error_min": _source_reads, "first_error_max": _source_reads,
    "first_error_rel_min": _source_reads, "first_error_rel_max": _source_reads,
    "judge": frozenset({Source.JUDGE}), "human_judge_disagreement": _OTHERS,
    "adjudicated": frozenset({Source.ADJUDICATION}),
    # Any reviewer's flag ("bad problem", "can't judge"): peers' reviews.
    "review_flag": frozenset({Source.OWN, Source.PEER}),
    "coverage_min": frozenset({Source.SCORES}), "coverage_max": frozenset({Source.SCORES}),
    "cohort": _cohort_reads,
    "scanner": frozenset({Source.SCANNER}),
}
# Both ways: a filter without a declaration, or a declaration whose filter a method of the same name hid.


def usable_filters(study: Study, membership: Membership) -> set[str]:
    """The filters the member may use with their default values (the page shows only these)."""
    fs = TraceSearchFilter({}, queryset=Trace.objects.none(), study=study, membership=membership)
    fs.form.is_valid()
    return {name for name in fs.base_filters if gate.may_read(membership, fs.reads(name))}


_undeclared = sorted(set(TraceSearchFilter.base_filters) ^ set(READS))
if _undeclared:
    raise ImproperlyConfigured(f"search.filters.READS must say what each filter reads, no more: {', '.join(_undeclared)}")
