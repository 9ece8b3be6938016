"""What the server log says about a refused request: one line.

A refusal is an answer, not a failure: a member without the role (403), an outsider (404), a stale version
or a run in progress (409), bad input (400). Django logs each 4xx through ``django.request`` with the
exception attached, which a handler prints as a full traceback; this filter keeps the line ("Forbidden
(Permission denied): /studies/1/adjudication/") and drops the traceback below 500. A 5xx keeps its
traceback: that one is a bug to read.
"""

from __future__ import annotations

import logging


class ExpectedRefusals(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and status < 500 and record.exc_info:
            record.exc_info = None
            record.exc_text = None
        return True
