"""Web pages, one module per topic (mirroring annotation/review/, the services behind them). Each view starts
with an access helper that returns the object or raises 404 (not a member) / 403 (a member without the role),
then delegates to the domain modules (services, review, skeletons, members); htmx requests get the page's partial.

base.py          the access helpers every page uses, ``member_view``, the 403 handler, ``safe_next``
studies.py       the study list and page, new study, members, the profile, imports, jobs
settings.py      a study's settings and the correction of a problem (owners)
lists.py         the trace and problem lists
problems.py      a problem's page and its skeletons (save, approve, live check), the Markdown preview
review.py        the review page of a trace (long thoughts in blocks), saving labels
queues.py        an annotator's queue, assigning traces
adjudication.py  disagreements and their final verdicts
"""
