"""Search, cohorts and their uses (docs/search.md): one place for the web page, the API and the CLI."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.core.paginator import Page, Paginator
from django.db import IntegrityError, connection, transaction
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL
from django.urls import reverse

from annotation import access, gate, study_summary
from annotation.gate import Source
from annotation.models import Membership, Step, StepLabel, Study, Trace
from annotation.paging import counted
from annotation.review.queues import do_assign
from reasonlib.ids import is_id
from reasonlib.refusals import FieldInvalid
from search import backends
from search.core import query as ql
from search.core.regex import Budget, BudgetSpent
from search.errors import SearchError
from search.filters import REGEX_BUDGET_S, TraceSearchFilter, cohort_reads
from search.models import Cohort, CohortTrace
from search.paging import SearchPaginator, TextWalk, ids_sql

# Parameters that are not filters (pagination, the API's format, the page's own switches, a download's).
NOT_FILTERS = frozenset({"page", "page_size", "format", "name", "note", "what", "manifest"})
MAX_HITS_PER_TRACE = 3
#: The mean scores' bootstrap in a cohort comparison: resamples and seed (named on the page and in its export).
COMPARE_RESAMPLES = 1000
COMPARE_SEED = 0


@dataclass
class Search:
    """A validated search: the traces (a lazy queryset, in id order) and what the hits need."""

    traces: QuerySet[Trace]
    filterset: TraceSearchFilter
    params: dict[str, Any] = field(default_factory=dict)
    # How many traces, when known without counting them: the search selects every trace of the study (no filter
    # narrowed it) and the score job's summary holds their number (SearchPaginator then only cuts a page).
    count: int | None = None
    # A text query without a regex: SearchPaginator may find its first matches by walking the study's traces.
    walk: TextWalk | None = None

    @property
    def notes(self) -> list[str]:
        return self.filterset.notes

    def paginator(self) -> Callable[..., Paginator]:
        """The pager of these traces: told its count when known (annotation.paging, a page cut by the pk index
        alone), else SearchPaginator (the count, bounded by COUNT_CAP, and the page's ids)."""
        if self.count is not None:
            return counted(self.count)
        return partial(SearchPaginator, walk=self.walk)


def search_params(data) -> dict[str, Any]:
    """The search's own parameters of a QueryDict (lists kept for repeatable ones), for cohorts."""
    out: dict[str, Any] = {}
    for key in data:
        if key in NOT_FILTERS:
            continue
        values = [v for v in data.getlist(key) if v != ""] if hasattr(data, "getlist") else [data[key]]
        if values:
            out[key] = values if len(values) > 1 else values[0]
    return out


def _querydict(params: dict[str, Any]):
    from django.http import QueryDict

    q = QueryDict(mutable=True)
    for key, value in params.items():
        for v in value if isinstance(value, list) else [value]:
            q.appendlist(key, str(v))
    return q


def search(study: Study, membership: Membership, data) -> Search:
    """Validate ``data`` (a QueryDict or dict) and build the traces it selects.

    Raises SearchError (400, naming the parameter) or AccessDenied (403 in blind mode)."""
    if not hasattr(data, "getlist"):
        data = _querydict(data)
    # The study's own traces: benchmark items and suite variants are searched on their own pages.
    qs = Trace.objects.of_study(study).select_related("problem").order_by("pk")
    fs = TraceSearchFilter(data, queryset=qs, study=study, membership=membership)
    if not fs.is_valid():
        raise SearchError({k: [str(m) for m in v] for k, v in fs.errors.items()})
    traces = fs.qs
    walk = None
    if fs.parsed is not None and fs.pattern is None and fs.without_text is not None:
        walk = TextWalk(study.pk, fs.parsed, fs.without_text, fs.step_where(), fs.label_where())
    return Search(traces, fs, search_params(data), count=_every_trace_count(study, qs, traces), walk=walk)


def _every_trace_count(study: Study, everything: QuerySet[Trace], selected: QuerySet[Trace]) -> int | None:
    """The number of the study's own traces from its stored summary when ``selected`` is ``everything`` (no filter,
    nor blind mode, added a condition: the same SQL), else None. Counting them took 0.9 s at 1M traces."""
    try:
        if str(selected.query) != str(everything.query):
            return None
    except EmptyResultSet:  # a filter Django knows selects nothing
        return None
    counts = study_summary.stored_counts(study)
    return None if counts is None else int(counts["traces"])


@dataclass(frozen=True)
class Hit:
    kind: str  # "step", "problem" or "label"
    html: str  # escaped text, matches in <mark>
    step: int | None = None  # the step's index (1-based, over both channels)
    channel: str = ""  # the step's channel: thought or answer
    url: str = ""  # the review page at that step


def hits(s: Search, traces: list[Trace]) -> dict[int, list[Hit]]:
    """Matching steps (with context), problem statement and visible notes of ``traces`` (one page)."""
    out: dict[int, list[Hit]] = {t.pk: [] for t in traces}
    if not traces:
        return out
    ids = [t.pk for t in traces]
    parsed: ql.Query | None = s.filterset.parsed
    pattern = s.filterset.pattern
    if parsed is not None:
        counts: dict[int, int] = {}
        channel = s.filterset.form.cleaned_data.get("channel") or ""
        for _step_id, trace_id, index, step_channel, marked in backends.step_snippets(parsed, ids, channel=channel):
            counts[trace_id] = counts.get(trace_id, 0) + 1
            if counts[trace_id] <= MAX_HITS_PER_TRACE:
                if ql.START not in marked:  # the database's parser cut a word differently: mark it here
                    marked = ql.mark_words(marked, parsed.words) or marked
                out[trace_id].append(_step_hit(trace_id, index, marked, step_channel))
        problems = {t.problem_id for t in traces}
        sql, params = backends.matching_ids(backends.PROBLEMS, parsed,
                                            where=f"t.id IN ({', '.join(['%s'] * len(problems))})",
                                            params=sorted(problems))
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            matched = {row[0] for row in cursor.fetchall()}
        for t in traces:
            if t.problem_id in matched:
                marked = ql.mark_words(t.problem.statement, parsed.words, context=100)
                out[t.pk].insert(0, Hit("problem", ql.snippet_html(marked or t.problem.statement[:200])))
        where, wparams = s.filterset.label_where()
        where = " AND ".join(x for x in (where, "t.step_id IN (SELECT id FROM annotation_step WHERE trace_id IN "
                                          f"({', '.join(['%s'] * len(ids))}))") if x)
        sql, params = backends.matching_ids(backends.LABELS, parsed, where=where, params=[*wparams, *ids])
        labels = (StepLabel.objects.filter(pk__in=RawSQL(sql, params)).select_related("step")
                  .order_by("step__trace_id", "step__index", "pk")[:200])
        for lab in labels:
            marked = ql.mark_words(lab.reason, parsed.words) or lab.reason[:200]
            out[lab.step.trace_id].append(Hit("label", ql.snippet_html(marked), lab.step.index,
                                              lab.step.channel, _review_url(lab.step.trace_id, lab.step.index)))
    if pattern is not None:
        _mark_regex(s, pattern, ids, out)
    return out


def _mark_regex(s: Search, pattern, ids: list[int], out: dict[int, list[Hit]]) -> None:
    """The regex's snippets of the page's traces, within what the request's regex budget has left
    after filtering (search.filters.REGEX_BUDGET_S); when it runs out, the marks so far stay and a
    note says they are partial -- the request never runs on."""
    budget = s.filterset.regex_budget or Budget(REGEX_BUDGET_S)
    seen: dict[int, int] = {}
    steps = Step.objects.filter(trace_id__in=ids)
    if s.filterset.form.cleaned_data.get("channel"):
        steps = steps.filter(channel=s.filterset.form.cleaned_data["channel"])
    read = 0
    for trace_id, index, step_channel, text in steps.order_by("trace_id", "index").values_list(
            "trace_id", "index", "channel", "text"):
        if seen.get(trace_id, 0) >= MAX_HITS_PER_TRACE:
            continue
        try:
            m = pattern.search(text, budget)
        except BudgetSpent:
            s.filterset.notes.append(
                f"partial marks: the regular expression's budget ({REGEX_BUDGET_S:g} s a request) ran out after "
                f"{read} steps of this page; {len(seen)} of its {len(ids)} traces show their matches")
            return
        except TimeoutError:
            continue  # too slow on this step: it shows no mark, the others still may
        finally:
            read += 1
        if m is None:
            continue
        seen[trace_id] = seen.get(trace_id, 0) + 1
        marked = text[:m.start()] + ql.START + m.group() + ql.STOP + text[m.end():]
        out[trace_id].append(_step_hit(trace_id, index, ql.window(marked, m.start(), 80), step_channel))


def _review_url(trace_pk: int, index: int) -> str:
    return reverse("trace", args=[trace_pk]) + f"#s{index}"


def _step_hit(trace_pk: int, index: int, marked: str, channel: str) -> Hit:
    return Hit("step", ql.snippet_html(marked), index, channel, _review_url(trace_pk, index))


# --------------------------------------------------------------------------
# Cohorts


class CohortError(FieldInvalid):
    """A cohort, or a use of one, refused; names the field at fault."""


def do_save_cohort(study: Study, membership: Membership, *, name: str, data, note: str = "") -> Cohort:
    """Save the search ``data`` as a named cohort with the snapshot of the traces it selects now.

    The snapshot is written by one INSERT ... SELECT of the search's own SQL."""
    name = (name or "").strip()
    if not name or len(name) > 200:
        raise CohortError("name", "give a name of 1 to 200 characters")
    s = search(study, membership, data)
    # An explicit alias: the column of a bare values("pk") has no name SQLite's outer query can use.
    ids = ids_sql(s.traces, "cohort_trace")
    try:
        with transaction.atomic():
            cohort = Cohort.objects.create(study=study, name=name, query=s.params, note=note,
                                           created_by=membership.user)
            table, col_c, col_t = (CohortTrace._meta.db_table, CohortTrace._meta.get_field("cohort").column,
                                   CohortTrace._meta.get_field("trace").column)
            n = 0
            if ids is not None:  # None: the search selects nothing, an empty cohort
                select, ids_params = ids
                with backends.planned_search() as cursor:
                    cursor.execute(f'INSERT INTO "{table}" ("{col_c}", "{col_t}") SELECT %s, sub.cohort_trace '
                                   f'FROM ({select}) sub', [cohort.pk, *ids_params])
                    n = cursor.rowcount
            cohort.n_traces = n
            cohort.save(update_fields=["n_traces"])
    except IntegrityError:
        raise CohortError("name", f"a cohort named {name!r} exists in this study") from None
    return cohort


def check_cohort(user, pk: int) -> tuple[Cohort, Membership]:
    """The cohort and the user's membership of its study (404 for outsiders), after the visibility
    gate: a cohort's traces are what its query read (``cohort_reads``)."""
    cohort = Cohort.objects.filter(pk=pk).select_related("study").first()
    if cohort is None:
        raise access.AccessDenied("no such cohort", outsider=True)
    _study, membership = access.check_study(user, cohort.study_id)
    gate.check(membership, f"cohort {cohort.name!r}", cohort_reads(cohort, membership))
    return cohort, membership


def readable_cohorts(study: Study, membership: Membership | None) -> list[Cohort]:
    """The study's cohorts, by name, that ``membership`` may use (menus offer only these)."""
    cohorts = Cohort.objects.filter(study=study).order_by("name")
    return [c for c in cohorts if readable_cohort(c, membership)]


def readable_cohort(cohort: Cohort, membership: Membership | None) -> bool:
    """Whether the cohort's size and traces may be shown to ``membership`` (lists hide the others' size)."""
    return gate.may_read(membership, cohort_reads(cohort, membership))


def cohort_traces(cohort: Cohort) -> QuerySet[Trace]:
    return Trace.objects.of_study(cohort.study_id).filter(cohort_memberships__cohort=cohort).order_by("pk")


class CohortMembers:
    """A cohort's traces in id order, as Django's Paginator reads them: the count is the size saved with
    the snapshot (``Cohort.n_traces``; its rows never change after the save), and a page's ids are cut
    from the (cohort, trace) index alone before the page's 50 traces are read by id. Paging the traces
    joined to the snapshot made PostgreSQL build and sort the whole study for every page (its estimate of
    the study's own traces was 150 of 300,000): 1.7 s a page at 300,000 traces."""

    def __init__(self, cohort: Cohort) -> None:
        self.cohort = cohort

    def count(self) -> int:
        return self.cohort.n_traces

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, cut: slice) -> list[Trace]:
        if not isinstance(cut, slice):
            raise TypeError("CohortMembers reads pages (slices) only")
        ids = list(CohortTrace.objects.filter(cohort=self.cohort).order_by("trace_id")
                   .values_list("trace_id", flat=True)[cut])
        # The study's own traces, as cohort_traces reads them.
        traces = Trace.objects.of_study(self.cohort.study_id).filter(pk__in=ids).select_related("problem")
        return sorted(traces, key=lambda t: t.pk) if ids else []


def cohort_page(cohort: Cohort, number, per_page: int = 50) -> Page:
    """One page of the cohort's traces (a bad or too large ``number``: the first or the last page)."""
    return Paginator(CohortMembers(cohort), per_page).get_page(number)


def cohort_trace_ids(cohort: Cohort) -> list[int]:
    return list(CohortTrace.objects.filter(cohort=cohort).order_by("trace_id").values_list("trace_id", flat=True))


def do_delete_cohort(cohort: Cohort, membership: Membership) -> None:
    if not (membership.is_owner or cohort.created_by_id == membership.user_id):
        raise access.AccessDenied("only the cohort's author or an owner may delete it")
    cohort.delete()


# Scopes: a cohort as the traces of other apps' operations.


def do_assign_cohort(cohort: Cohort, by, annotators: list, k: int = 1) -> int:
    """Queue the cohort's traces (in id order) for ``annotators``, ``k`` per trace."""
    return do_assign(cohort.study, by, annotators, k, trace_ids=cohort_trace_ids(cohort))


def do_judge_cohort(cohort: Cohort, judge, *, user=None, force: bool = False, budget_usd: float | None = None,
                    queue: bool = True):
    """A judge run over the cohort's traces (judges.services.do_start_run with their ids)."""
    from judges import services as judge_services

    if judge.study_id != cohort.study_id:
        raise CohortError("judge", "the judge belongs to another study")
    trace_ids = list(cohort_traces(cohort).values_list("trace_id", flat=True))
    if not trace_ids:
        raise CohortError("cohort", "the cohort is empty")
    return judge_services.do_start_run(judge, filters={"trace_ids": trace_ids}, force=force, budget_usd=budget_usd,
                                       user=user, queue=queue)


def _cohort_summary(cohort: Cohort, with_scores: bool) -> dict[str, Any]:
    from reasonlib.intervals import wilson
    from scoring.core.bootstrap import bootstrap_ci
    from scoring.models import TraceScore

    traces = cohort_traces(cohort)
    rows = list(traces.values_list("model", "answer_correct"))
    judged = [c for _m, c in rows if c is not None]
    correct = sum(1 for c in judged if c)
    models: dict[str, int] = {}
    for m, _c in rows:
        models[m] = models.get(m, 0) + 1
    scores = TraceScore.objects.filter(trace__in=traces.values("pk"), score_set__source="final")
    if cohort.study.default_profile_id:
        scores = scores.filter(score_set__profile_id=cohort.study.default_profile_id)
    out: dict[str, Any] = {
        "id": cohort.pk, "name": cohort.name, "n_traces": len(rows), "n_answer_judged": len(judged),
        "accuracy": correct / len(judged) if judged else None, "accuracy_ci": wilson(correct, len(judged)),
        "models": dict(sorted(models.items())), "scores": {},
    }
    if not with_scores:
        # Scores are computed from every source's labels (annotation.gate): hidden from a blinded annotator.
        out["scores"] = None
        return out
    values = list(scores.values_list("process", "holistic", "s_prm"))
    for i, name in enumerate(("process", "holistic", "s_prm")):
        col = [v[i] for v in values if v[i] is not None]
        out["scores"][name] = {"n": len(col), "mean": sum(col) / len(col) if col else None,
                               "ci": bootstrap_ci(col, n_resamples=COMPARE_RESAMPLES, seed=COMPARE_SEED)
                               if len(col) >= 2 else None}
    return out


#: What a comparison's mean scores read (annotation.gate): shown only to who may read them.
COMPARE_SCORES_READ = frozenset({Source.SCORES})


def compare_cohorts(a: Cohort, b: Cohort, membership: Membership | None = None) -> dict[str, Any]:
    """Side by side: counts, answer accuracy (Wilson 95%), mean scores of the final labels under the
    default profile (percentile bootstrap 95%), and the traces the two share. ``scores`` is None for a
    member the gate does not let read scores (``membership`` None: the operator, who reads everything);
    the cohorts themselves passed the gate in ``check_cohort``."""
    if a.study_id != b.study_id:
        raise CohortError("b", "the two cohorts belong to different studies")
    with_scores = gate.may_read(membership, COMPARE_SCORES_READ)
    shared = CohortTrace.objects.filter(cohort=a, trace__in=CohortTrace.objects.filter(cohort=b).values("trace"))
    return {"a": _cohort_summary(a, with_scores), "b": _cohort_summary(b, with_scores), "shared": shared.count(),
            "scores_hidden": not with_scores}


def cohort_choices(study: Study) -> list[tuple[str, str]]:
    """The study's cohorts as a run form's menu offers them (annotation.scopes): id, and name with size."""
    return [(str(pk), f"{name} ({n:,} traces)")
            for pk, name, n in Cohort.objects.filter(study=study).order_by("name").values_list("pk", "name", "n_traces")]


def cohort_scope(study: Study, value: str) -> QuerySet:
    """The "cohort" trace scope of annotation.scopes (exports' --cohort, calibration samples)."""
    from annotation.scopes import ScopeError

    value = str(value).strip()
    if not is_id(value):
        raise ScopeError(f"give a cohort's id, not {value!r}")
    cohort = Cohort.objects.filter(study=study, pk=int(value)).first()
    if cohort is None:
        raise ScopeError(f"no cohort {value} in this study")
    return CohortTrace.objects.filter(cohort=cohort).values("trace")
