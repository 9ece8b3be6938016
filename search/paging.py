"""Paging a search (docs/search.md, "Paging"): a count bounded at COUNT_CAP, and the first matching ids found by the
planner or, for a text query that matches most of the study, by a walk of the study's traces."""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from django.core.exceptions import EmptyResultSet
from django.core.paginator import EmptyPage, Page, PageNotAnInteger, Paginator
from django.db import connections
from django.db.models import F, QuerySet

from annotation.models import Trace
from search import backends
from search.core import query as ql

# An OFFSET no table reaches, well inside a signed 64-bit integer.
_MAX_OFFSET = 2**62
#: How many matching traces a search counts (docs/search.md, "Paging"): past it the page and the API say "more than
#: 10,000" (``SearchPaginator.count_is_lower_bound``) instead of reading every match for an exact number, as
#: GitHub's code search does. ``q=wait`` matched 1,000,000 steps at 1M traces and took 7 s to count them.
COUNT_CAP = 10_000


@dataclass(frozen=True)
class TextWalk:
    """A search's text query as SearchPaginator walks it: the query, who may read which notes (the filter set's own
    conditions on steps and labels, blind mode's among them), and the search without it (every other filter)."""

    study_id: int
    query: ql.Query
    rest: QuerySet[Trace]
    step_where: tuple[str, list]
    label_where: tuple[str, list]


def ids_sql(qs: QuerySet, alias: str, limit: int | None = None) -> tuple[str, tuple] | None:
    """The SQL of ``qs``'s ids (in a column named ``alias``; the first ``limit`` in id order if given), or None when
    the queryset selects nothing by construction: Django raises EmptyResultSet compiling a filter it knows is empty
    (``qs.none()``, ``pk__in=[]``), which was a 500 for any regex that matched nothing (issue 29, L3)."""
    ids = qs.order_by().annotate(**{alias: F("pk")}).values(alias)
    if limit is not None:
        ids = ids.order_by(alias)[:limit]
    try:
        return ids.query.sql_with_params()
    except EmptyResultSet:
        return None


#: A walk (SearchPaginator) first reads this many of the study's traces to learn how dense the matches are ...
_WALK_SAMPLE = 500
#: ... and walks only when at least one trace in this many matches: it then reads at most this many times the ids it
#: needs (40,004 traces for a count to 10,000), each by a few index probes.
_WALK_MAX = 4


def _first_ids(qs: QuerySet, limit: int, per_page: int, bottom: int) -> tuple[int, list[int]]:
    """How many of the first ``limit`` ids ``qs`` selects, and the page's ids among them, by one query."""
    # An explicit alias: the column of a bare values("pk") has no name SQLite's outer query can use.
    ids = ids_sql(qs, "_search_id", limit)
    if ids is None:
        return 0, []
    select, params = ids
    with backends.planned_search(qs.db) as cursor:
        # The count joined to the page (not a column of its rows), so an empty page still has it.
        cursor.execute(f"WITH m AS MATERIALIZED ({select}) SELECT c.n, p._search_id "
                       f"FROM (SELECT COUNT(*) AS n FROM m) c LEFT JOIN (SELECT m._search_id FROM m "
                       f"ORDER BY m._search_id LIMIT %s OFFSET %s) p ON 1 = 1 ORDER BY p._search_id",
                       [*params, per_page, bottom])
        rows = cursor.fetchall()
    return rows[0][0], [pk for _n, pk in rows if pk is not None]


def _walk(walk: TextWalk, limit: int, using: str) -> list[int] | None:
    """The search's first ``limit`` ids (all of them when fewer match), found by walking the study's traces in id
    order (backends.walked_matches), or None when the matches are too sparse for a walk to pay."""
    rest = ids_sql(walk.rest, "_walk_id")
    if rest is None:  # the rest of the search selects nothing by construction
        return None
    read, kept = _walk_window(walk, rest, _WALK_SAMPLE, limit, using, each_trace=False)
    if len(kept) >= limit or read < _WALK_SAMPLE:  # enough, or the study's every trace read
        return kept
    if not kept or len(kept) * _WALK_MAX < read:
        return None
    window = ceil(limit * read / len(kept) * 1.25)  # a quarter more than the sample's density says
    if window > _WALK_MAX * limit:
        return None
    read, kept = _walk_window(walk, rest, window, limit, using)
    return kept if len(kept) >= limit or read < window else None


def _walk_window(walk: TextWalk, rest: tuple[str, tuple], window: int, limit: int, using: str, *,
                 each_trace: bool = True) -> tuple[int, list[int]]:
    """How many of the study's first ``window`` traces were read, and the first ``limit`` ids among them that the
    whole search (``rest`` and the text) selects (``each_trace``: backends.walked_matches)."""
    (step_where, step_params), (label_where, label_params) = walk.step_where, walk.label_where
    sql, params = backends.walked_matches(walk.query, study_id=walk.study_id, window=window, limit=limit,
                                          rest=(rest[0], list(rest[1])), step_where=step_where,
                                          step_params=step_params, label_where=label_where, label_params=label_params,
                                          each_trace=each_trace)
    with backends.planned_search(using) as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return rows[0][0], [pk for _n, pk in rows if pk is not None]


class SearchPaginator(Paginator):
    """Django's paginator for querysets in pk order (the search's) with a bounded count: it counts the matching
    traces up to ``limit = max(COUNT_CAP, the page's end) + 1``. When ``limit`` match, ``count`` is ``limit - 1`` with
    ``count_is_lower_bound`` set (more than that many match; ``num_pages`` counts the page after it, so ``has_next``
    holds), else ``count`` is exact. The first ``limit`` ids are found one of two ways, then the page's rows by id:

    * By the planner (every search; SQLite always): the ids are materialized once (``WITH m AS MATERIALIZED
      (... ORDER BY id LIMIT limit)``), counted, and the page is cut from them, in one query. Django's paginator
      counts in one query and slices in a second, so a text query matching much of the study evaluated its full-text
      match twice. Why not ``COUNT(*) OVER ()`` beside ``LIMIT``: PostgreSQL 15 costs the window as if it streamed,
      so the LIMIT made it choose "fast start" plans (the traces in pk order, a correlated probe of the labels per
      trace) that must still read every match for the count: 5.4 s for ``verdict=invalid`` over 100,000 traces,
      0.43 s materialized, at load 10 (docs/benchmarks.md). The LIMIT inside the CTE does not change that plan: a
      sparse filter is planned as before, for all its rows. Nor does it make a broad text query stop early: its
      union of three matches hides from the planner how many traces match (it estimates 200), so it still reads
      every match (``q=wait``: 7 s at 1M traces), and saves only counting and sorting them.
    * By a walk (``walk``: a text query without a regex, on PostgreSQL, pages within the cap): the study's traces in
      id order, each probed for the text (backends.walked_matches), then narrowed by the rest of the search. A
      sample of ``_WALK_SAMPLE`` traces first: when less than one in ``_WALK_MAX`` of them is found, or the sample
      says the walk would be longer than ``_WALK_MAX * limit`` traces, the planner's way is taken; else the walk
      reads as many traces as the sample says ``limit`` matches need, and if they fall short (the matches thin out
      further on), the planner's way still answers. ``q=wait``: about 12,500 traces read, not 1,000,000 steps.

    A page past the last still gets the count (counted beside the page, not on its rows), which is then exact:
    Django's clamping to the last page follows."""

    #: Whether ``count`` stopped at the bound of the last page read: more than ``count`` traces match.
    count_is_lower_bound = False

    def __init__(self, object_list, per_page, *args, walk: TextWalk | None = None, **kwargs) -> None:
        super().__init__(object_list, per_page, *args, **kwargs)
        self.walk = walk

    @property
    def num_pages(self) -> int:  # type: ignore[override]  # a cached_property in Paginator; count moves per page here
        if self.count_is_lower_bound:
            return ceil((self.count + 1) / self.per_page)  # at least one trace more than counted: one page more
        return super().num_pages

    def page(self, number) -> Page:
        try:
            n = int(number)
        except (TypeError, ValueError):
            raise PageNotAnInteger("That page number is not an integer") from None
        # What an earlier page of this paginator counted is not this page's count.
        self.__dict__.pop("count", None)
        self.count_is_lower_bound = False
        if n < 1:
            raise EmptyPage("That page number is less than 1")
        bottom = (n - 1) * self.per_page
        if bottom > _MAX_OFFSET:
            # Past every possible row, and past what the database's OFFSET takes (issue 29, L3).
            raise EmptyPage("That page contains no results")
        qs = self.object_list
        if tuple(qs.query.order_by) not in (("pk",), ("id",)):
            raise ValueError("SearchPaginator pages querysets ordered by pk")
        # One id beyond what is counted tells "more than" from "exactly"; a page past the cap counts to its end.
        limit = max(COUNT_CAP, bottom + self.per_page) + 1
        walked = None
        if self.walk is not None and limit == COUNT_CAP + 1 and backends.is_postgres(connections[qs.db]):
            walked = _walk(self.walk, limit, qs.db)
        if walked is not None:
            total, page_ids = len(walked), walked[bottom:bottom + self.per_page]
        else:
            total, page_ids = _first_ids(qs, limit, self.per_page, bottom)
        self.count_is_lower_bound = total >= limit
        self.__dict__["count"] = total - 1 if self.count_is_lower_bound else total  # a cached_property in Paginator
        n = self.validate_number(n)
        by_id = {obj.pk: obj for obj in qs.model._default_manager.filter(pk__in=page_ids)
                 .select_related(*self._related())}
        return self._get_page([by_id[pk] for pk in page_ids if pk in by_id], n, self)

    def _related(self) -> list[str]:
        related = self.object_list.query.select_related
        return list(related) if isinstance(related, dict) else []

    def get_page(self, number) -> Page:
        """Django's: a page that is no number is the first, an empty one the last. A page refused before its query
        (below 1, past any OFFSET) learns the count from the first page, not from Django's count of every match;
        when that count is bounded there is no last page to go to, and the first is shown."""
        try:
            return self.page(number)
        except PageNotAnInteger:
            return self.page(1)
        except EmptyPage:
            if "count" not in self.__dict__:
                first = self.page(1)
                if self.count_is_lower_bound or self.num_pages == 1:
                    return first
            return self.page(self.num_pages)
