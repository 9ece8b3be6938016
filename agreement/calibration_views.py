"""Calibration study pages: the list with the create form (owners), one
study's report (every metric per candidate, where in the chain, confusion
matrices, reliability, disagreements, the omega tuning experiment) and
queueing its sample (owners)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agreement import calibration
from agreement import charts as agreement_charts
from agreement import services as svc
from agreement.core import processbench
from agreement.models import CalibrationStudy
from agreement.views import AGREEMENT_PAGES, METRICS, export_forms, metric_rows, page_disagreements, study_for
from annotation import access, study_summary
from annotation.middleware import refusals_back_to, refusals_into
from annotation.models import Membership
from scoring import services


class CalibrationForm(forms.Form):
    name = forms.CharField(max_length=200)
    reference = forms.ChoiceField(help_text="what the candidates are measured against")
    candidates = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple,
                                           help_text="judges (one per prompt version to compare prompts) or annotators")
    size = forms.IntegerField(min_value=1, max_value=calibration.MAX_SAMPLE, initial=100, label="Sample size")
    allocation = forms.ChoiceField(choices=CalibrationStudy.Allocation.choices, initial="equal")
    seed = forms.IntegerField(min_value=0, max_value=svc.MAX_SEED, initial=0)
    models = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple,
                                       help_text="none ticked: every model")
    domain = forms.ChoiceField(required=False)
    profile = forms.ChoiceField(required=False, help_text="for the process scores (default: the study's)")
    validation_fraction = forms.FloatField(min_value=0.01, max_value=0.99, initial=0.5,
                                           help_text="share of the sample that chooses omega; the rest reports it")
    reference_complete = forms.BooleanField(required=False, label="Only traces the reference labelled completely",
                                            help_text="draw among the traces whose every step the reference has "
                                                      "labelled, so the whole sample can be compared now")
    note = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))

    def __init__(self, *args, menu=(), models=(), domains=(), profiles=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["reference"].choices = [(s, s) for s in menu]
        self.fields["reference"].initial = "human"
        self.fields["candidates"].choices = [(s, s) for s in menu if s.startswith(("judge:", "annotator:"))]
        self.fields["models"].choices = [(m, m) for m in models]
        self.fields["domain"].choices = [("", "every domain")] + [(d, d) for d in domains]
        self.fields["profile"].choices = [("", "the study's default")] + [(p, p) for p in profiles]


class QueueForm(forms.Form):
    annotators = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple)
    k = forms.IntegerField(min_value=1, max_value=20, initial=1, label="Annotators per trace")

    def __init__(self, *args, members=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["annotators"].choices = [(m.user_id, f"{m.user.username} ({m.role})") for m in members]


def _form_choices(study) -> dict[str, Any]:
    from annotation.models import Problem

    return {
        "menu": svc.menu_sources(study),
        "models": study_summary.trace_models(study),
        "domains": [d for d in Problem.objects.of_study(study).order_by("domain")
                    .values_list("domain", flat=True).distinct() if d],
        "profiles": list(services.ensure_profiles(study)),
    }


@login_required
@require_http_methods(["GET", "POST"])
def calibrations(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = study_for(request, study_id)
    form = None
    status = 200
    if membership.is_owner:
        form = CalibrationForm(request.POST or None, **_form_choices(study))
        if request.method == "POST":
            if form.is_valid():
                d = form.cleaned_data
                with refusals_into(form):  # a refusal stands under its field; the form is shown again
                    cal = calibration.do_create_calibration(
                        study, name=d["name"], reference=d["reference"], candidates=d["candidates"], size=d["size"],
                        seed=d["seed"], allocation=d["allocation"], models=d["models"], domain=d["domain"],
                        profile_name=d["profile"], validation_fraction=d["validation_fraction"], note=d["note"],
                        reference_complete=d["reference_complete"], user=request.user)
                    messages.success(request, f"{cal.name}: {cal.items.count()} traces sampled.")
                    return redirect(cal.get_absolute_url())
            status = 400
    elif request.method == "POST":
        access.check_owner(membership, "creating a calibration study")
    rows = (CalibrationStudy.objects.filter(study=study).select_related("created_by")
            .annotate(n_traces=Count("items")).order_by("-created_at", "-pk"))
    context = {"study": study, "membership": membership, "rows": rows, "form": form, "pages": AGREEMENT_PAGES,
               "page_name": "scoring-calibrations", "query": ""}
    return render(request, "agreement/calibrations.html", context, status=status)


def _calibration(study, cal_id: int) -> CalibrationStudy:
    cal = CalibrationStudy.objects.filter(study=study, pk=cal_id).select_related("study", "created_by").first()
    if cal is None:
        raise access.not_found("calibration study")
    return cal


def _metric_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per metric, one cell per candidate (value, interval, n, reason)."""
    # Rows by key: a candidate with ProcessBench items of several splits has a row per split and the
    # Average (agreement.views.metric_rows) that the others lack.
    per_candidate = [{r["key"]: r for r in metric_rows(row["metrics"])} if row["metrics"] else {} for row in rows]
    order: dict[str, dict[str, Any]] = {}
    for cells in per_candidate:
        for key, cell in cells.items():
            order.setdefault(key, cell)
    return [{"label": first["label"], "fmt": first["fmt"], "n_name": first["n_name"],
             "cells": [cells.get(key, {"value": None, "ci": None, "n": None, "fmt": first["fmt"],
                                       "why": "not measured"}) for cells in per_candidate]}
            for key, first in _ordered(order).items()]


def _ordered(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The rows in METRICS order, each split row and the Average right after the ProcessBench F1."""
    if not rows:
        return {key: {"label": label, "fmt": fmt, "n_name": n.replace("_", " ")} for key, label, fmt, n, _ in METRICS}
    extra = [k for k in rows if k not in {m[0] for m in METRICS}]
    out: dict[str, dict[str, Any]] = {}
    for key, *_ in METRICS:
        if key in rows:
            out[key] = rows[key]
        if key == "pb_f1":
            out.update({k: rows[k] for k in sorted(extra, key=lambda k: (k == "pb_average_f1", k))})
    return out


@login_required
@require_GET
def calibration_detail(request: HttpRequest, study_id: int, cal_id: int) -> HttpResponse:
    study, membership = study_for(request, study_id)
    cal = _calibration(study, cal_id)
    report = calibration.calibration_report(cal)
    ok = [r for r in report["candidates"] if r["metrics"] is not None]
    names = [r["candidate"] for r in ok]
    shown = request.GET.get("candidate") if request.GET.get("candidate") in names else (names[0] if names else None)
    row = next((r for r in ok if r["candidate"] == shown), None)
    judges = [n for n in names if n.startswith("judge:")]
    tune = request.GET.get("tune") if request.GET.get("tune") in judges else (judges[0] if judges else None)
    target = request.GET.get("target") if request.GET.get("target") in calibration.TARGETS else "process"
    tuning, tuning_error = None, None
    if tune:
        try:
            omegas = calibration.parse_grid(request.GET.get("omegas"), field="omegas", low=0.0, high=100.0)
            ws = calibration.parse_grid(request.GET.get("ws"), field="ws", low=0.0, high=1.0)
            tuning = calibration.cached_tuning(cal, tune, target=target, omegas=omegas, ws=ws)
        except calibration.CalibrationError as exc:
            tuning_error = str(exc)
    params = {"candidate": shown or "", "tune": tune or "", "target": target,
              "omegas": request.GET.get("omegas", ""), "ws": request.GET.get("ws", "")}
    queue_form = None
    if membership.is_owner:
        members = Membership.objects.filter(study=study).select_related("user").order_by("user__username")
        queue_form = QueueForm(members=members)
    context = {
        "study": study, "membership": membership, "cal": cal, "report": report, "pages": AGREEMENT_PAGES,
        "page_name": "scoring-calibrations", "query": "",
        "composition": calibration.composition(cal), "prompt_versions": calibration.prompt_versions(cal),
        "table": [{"candidate": r["candidate"], "m": r["metrics"], "error": r["error"]} for r in report["candidates"]],
        "metric_table": _metric_table(report["candidates"]),
        "processbench": processbench.comparison([(r["candidate"], r["metrics"]) for r in report["candidates"]]),
        "processbench_source": processbench.SOURCE,
        "verdicts": ["valid", "invalid", "neutral"],
        "position_chart": agreement_charts.position_lines({r["candidate"]: r["metrics"]["by_position"] for r in ok}),
        "reliability_chart": agreement_charts.reliability({r["candidate"]: r["metrics"]["reliability"] for r in ok}),
        "shown": shown, "names": names,
        "disagreements": page_disagreements(row["disagreements"] if row else [], request.GET.get("page"),
                                            {k: v for k, v in params.items() if v}),
        "judges": judges, "tune": tune, "target": target, "tuning": tuning, "tuning_error": tuning_error,
        "tuning_chart": agreement_charts.tuning_curve(tuning) if tuning else None,
        "grid_params": params,
        "queue_form": queue_form,
        "agreement_query": urlencode({"reference": cal.reference, "calibration": cal.pk,
                                      "profile": report["profile"], "seed": cal.seed or ""}),
        **export_forms(study, membership, {"calibration": str(cal.pk), "reference": cal.reference,
                                           "candidate": shown or "", "profile": report["profile"],
                                           "seed": str(cal.seed) if cal.seed else ""},
                       ["agreement", "agreement-steps", "agreement-traces", "labels", "prm-training"]),
    }
    return render(request, "agreement/calibration.html", context)


@login_required
@require_POST
def calibration_queue(request: HttpRequest, study_id: int, cal_id: int) -> HttpResponse:
    study, membership = study_for(request, study_id)
    access.check_owner(membership, "queueing a calibration sample")
    cal = _calibration(study, cal_id)
    members = list(Membership.objects.filter(study=study).select_related("user"))
    form = QueueForm(request.POST, members=members)
    if form.is_valid():
        chosen = {int(pk) for pk in form.cleaned_data["annotators"]}
        users = [m.user for m in members if m.user_id in chosen]
        refusals_back_to(request, cal.get_absolute_url())  # a refused queue: its reason flashed on the page
        n = calibration.do_queue_calibration(cal, request.user, users, form.cleaned_data["k"])
        messages.success(request, f"Queued {n} assignment{'' if n == 1 else 's'} of the sample.")
    else:
        messages.error(request, "Check the queue form: " + "; ".join(
            f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
    return redirect(cal.get_absolute_url())
