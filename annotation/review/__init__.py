"""Reviewing traces. The web pages and the REST API both call these modules;
neither writes labels any other way.

base.py          where a change came from, ``ReviewError``, ``Conflict`` (a stale version)
visibility.py    blind mode: who sees which labels
labels.py        an annotator's labels (versions, history), the answer verdict, flags, skips
tags.py          an annotator's step-function tags (the same version), which tags a member sees
queues.py        the next trace to review, assignments
adjudication.py  disagreements and the final label of a step
progress.py      progress per annotator and per study
filters.py       the trace filters and the conditions other apps register for them
"""
