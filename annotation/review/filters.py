"""Trace filters shared by the trace list, the review queue, the API and search,
and the trace conditions other apps contribute to them by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet

from annotation import gate
from annotation.gate import Source
from annotation.models import Membership, Problem, StepTag, Study, Trace, TraceReview, suite_q
from annotation.review.adjudication import traces_with_disagreement
from reasonlib.refusals import FieldInvalid
from reasonlib.step_functions import FUNCTION_NAMES, normalize_function


def study_models(study: Study) -> list[str]:
    """The distinct model names of a study's traces, for the filter menus.

    On PostgreSQL a recursive "loose index scan" over (study, model) reads one
    index entry per model instead of every trace (SELECT DISTINCT scans all
    100k rows of a big study: ~30 ms against ~0.1 ms).
    """
    from django.db import connection

    if connection.vendor != "postgresql":
        return list(Trace.objects.of_study(study).values_list("model", flat=True).distinct().order_by("model"))
    # The study's own traces only, as Trace.objects.of_study reads them: a model whose traces are all
    # benchmark items or suite variants is not in the menus.
    return _loose_distinct(study, Trace._meta.db_table, "model", "problem_id")


def study_domains(study: Study) -> list[str]:
    """The distinct domains of a study's own problems (empty ones too), as ``study_models`` reads the
    models: by the (study, domain) index on PostgreSQL (a DISTINCT read all 30,000 problems of the
    300,000-trace study, 28 ms, for every judge run form)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return list(Problem.objects.of_study(study).values_list("domain", flat=True).distinct().order_by("domain"))
    return _loose_distinct(study, Problem._meta.db_table, "domain", "id")


def _loose_distinct(study: Study, table: str, column: str, problem_column: str) -> list[str]:
    """The distinct values of ``column`` of the study's rows of ``table`` (PostgreSQL), one index probe
    per value over an index on (study_id, column); a row whose ``problem_column`` is a suite problem is
    skipped by a probe of that one problem. (A ``NOT IN`` the study's suite problems read every problem
    of the study twice, and its cost estimate brought in the JIT compiler: 50-100 ms a menu at 300,000
    traces, against 1 ms.)"""
    from django.db import connection
    from django.db.models.expressions import RawSQL

    q = suite_q()
    own, own_params = "", []
    if q is not None:
        suite = Problem.objects.filter(q).filter(pk=RawSQL(f"t.{problem_column}", ())).order_by().values("pk")
        sub, params = suite.query.sql_with_params()
        own, own_params = f" AND NOT EXISTS ({sub})", list(params)
    sql = f"""
        WITH RECURSIVE m(v) AS (
            (SELECT t.{column} FROM {table} t WHERE t.study_id = %s{own} ORDER BY t.{column} LIMIT 1)
            UNION ALL
            SELECT (SELECT t.{column} FROM {table} t WHERE t.study_id = %s{own} AND t.{column} > m.v
                    ORDER BY t.{column} LIMIT 1)
            FROM m WHERE m.v IS NOT NULL
        )
        SELECT v FROM m WHERE v IS NOT NULL"""
    with connection.cursor() as cur:
        cur.execute(sql, [study.pk, *own_params, study.pk, *own_params])
        return [row[0] for row in cur.fetchall()]


# The trace filters of the trace list, the queue and their API (search.filters delegates the flags among
# them too): each declares the label sources it reads, and filter_traces asks the visibility gate
# (annotation.gate) before applying it, so a blinded annotator is refused every filter that reads
# another source -- by construction, for a filter registered tomorrow too.
#
# Other apps contribute trace conditions by name (e.g. scoring's "lucky_guess"): annotation is the
# lowest app and never imports the apps above it, so they register here from their AppConfig.ready.
# A condition takes (study, prefix) -- prefix is the path from the filtered model to Trace -- and
# returns an expression to filter on.
TraceCondition = Callable[[Study, str], Exists | Q]
#: (queryset, value, study, membership, prefix) -> queryset; value is a str (text filters) or a bool (flags).
Apply = Callable[[QuerySet, Any, Study, "Membership | None", str], QuerySet]


@dataclass(frozen=True)
class TraceFilter:
    name: str
    reads: frozenset[Source]
    apply: Apply
    flag: bool = True  # a true/false filter (else a text value)
    help: str = ""


TRACE_FILTERS: dict[str, TraceFilter] = {}


def register_trace_filter(f: TraceFilter) -> None:
    TRACE_FILTERS[f.name] = f


def register_trace_condition(name: str, condition: TraceCondition, reads: frozenset[Source], help: str = "") -> None:
    """A true/false filter from another app: ``condition`` selects the traces where it holds."""

    def apply(qs: QuerySet, v: bool, study: Study, membership: Membership | None, p: str) -> QuerySet:
        cond = condition(study, p)
        return qs.filter(cond if v else ~cond)

    register_trace_filter(TraceFilter(name, frozenset(reads), apply, help=help))


def lucky_guess_available() -> bool:
    return "lucky_guess" in TRACE_FILTERS


TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def parse_flag(value: str | None) -> bool | None:
    if value is None:
        return None
    v = value.strip().lower()
    return True if v in TRUE else False if v in FALSE else None


def _mine_done(membership: Membership | None, p: str) -> Exists:
    return Exists(TraceReview.objects.filter(trace=OuterRef(f"{p}pk"), annotator=membership.user if membership
                                             else None, complete=True))


def _field(path: str) -> Apply:
    return lambda qs, v, study, m, p: qs.filter(**{f"{p}{path}": v})


def _needs_review(qs: QuerySet, v: bool, study: Study, m: Membership | None, p: str) -> QuerySet:
    return qs.exclude(_mine_done(m, p)) if v else qs.filter(_mine_done(m, p))


def _function_tag(qs: QuerySet, v: str, study: Study, m: Membership | None, p: str) -> QuerySet:
    """Traces with a step any source tagged with the function ``v`` (reasonlib.step_functions)."""
    name = normalize_function(v)
    if not name:
        raise FieldInvalid("function_tag", f"{v!r} is not one of {', '.join(FUNCTION_NAMES)}")
    return qs.filter(Exists(StepTag.objects.filter(step__trace=OuterRef(f"{p}pk"), tag=name)))


def _disagreement(qs: QuerySet, v: bool, study: Study, m: Membership | None, p: str) -> QuerySet:
    cond = Q(**{f"{p}pk__in": traces_with_disagreement(study)})
    return qs.filter(cond) if v else qs.exclude(cond)


_TRACE = frozenset({Source.TRACE})
for _f in (
    TraceFilter("model", _TRACE, _field("model"), flag=False),
    TraceFilter("domain", _TRACE, _field("problem__domain"), flag=False),
    # The answer verdict: the automatic check, or a reviewer's override (shown on every page as the trace's).
    TraceFilter("answer_correct", _TRACE, _field("answer_correct"), help="the answer verdict"),
    TraceFilter("flagged", frozenset({Source.OWN, Source.PEER}), _field("flagged"), help="flagged by any reviewer"),
    TraceFilter("needs_review", frozenset({Source.OWN}), _needs_review,
                help="true: not labelled completely by you"),
    TraceFilter("disagreement", frozenset({Source.OWN, Source.PEER, Source.JUDGE, Source.ADJUDICATION}),
                _disagreement, help="labels of some step disagree (annotator against annotator or the primary judge)"),
    # Every source's tags (annotators, judges, imported analyses): for whoever sees them all.
    TraceFilter("function_tag", frozenset({Source.OWN, Source.PEER, Source.JUDGE, Source.IMPORTED}), _function_tag,
                flag=False, help="a step tagged with this function by any source (docs/review.md)"),
):
    register_trace_filter(_f)


def visible_trace_filters(membership: Membership | None) -> set[str]:
    """The names of the filters the member may use (the pages show only these)."""
    return {name for name, f in TRACE_FILTERS.items() if gate.may_read(membership, f.reads)}


def filter_traces(qs: QuerySet, params, study: Study, membership: Membership | None, *,
                  prefix: str = "") -> QuerySet:
    """Apply the trace filters of ``params`` (a QueryDict or dict) to ``qs``, each after the gate.

    ``prefix`` is the path from the queryset's model to Trace (``"trace__"`` for assignments)."""
    for name, f in TRACE_FILTERS.items():
        raw = params.get(name)
        value = parse_flag(raw) if f.flag else (raw or None)
        if value is None:
            continue
        gate.check(membership, f"the {name} filter", f.reads)
        qs = f.apply(qs, value, study, membership, prefix)
    return qs
