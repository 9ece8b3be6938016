"""REST API (docs/api.md): thin views over annotation.services, one module per topic (as annotation/views/);
access is decided by annotation.access.

base.py          a label's row, a boolean query parameter (errors: annotation/api/errors.py)
studies.py       studies, imports, jobs
traces.py        a study's traces, one trace, its labels
problems.py      a study's problems, one problem, its skeletons
adjudication.py  disagreements, the final verdict of a step
queues.py        my queue, assigning traces
members.py       a study's members
"""
