"""The review page's questions from scanners: a trace in a scanner's validation sample can be answered
where it is read (annotation's review template loads this library; annotation imports nothing of search)."""

from __future__ import annotations

from django import template

register = template.Library()


@register.inclusion_tag("search/_scanner_questions.html", takes_context=True)
def scanner_questions(context, trace) -> dict:
    from search.scanners import pending_questions

    request = context.get("request")
    user = request.user if request is not None else None
    return {"questions": pending_questions(trace, user), "trace": trace, "request": request,
            "csrf_token": context.get("csrf_token")}
