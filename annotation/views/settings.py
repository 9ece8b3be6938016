"""The owners' settings pages: a study's settings (name, description, blind review, segmenters, primary judge) and
the correction of a problem (statement, gold answer, domain, tags). Both go through the domain operations the API's
PATCH uses (annotation.services.do_update_study / do_update_problem), so a change the scores depend on queues the
same recompute whichever door it came through."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from annotation import access, services
from annotation.forms import ProblemEditForm, StudySettingsForm
from annotation.models import Problem

#: What a saved change is called in the confirmation.
FIELD_NAMES = {"name": "name", "description": "description", "blind": "blind review", "segmenter": "answer segmenter",
               "thought_segmenter": "thought segmenter", "primary_judge": "primary judge",
               "statement": "statement", "gold_answer": "gold answer", "domain": "domain", "tags": "tags"}
SCORED = {"primary_judge", "domain"}


def _saved(request: HttpRequest, changed: set[str]) -> None:
    if not changed:
        messages.info(request, "Nothing changed.")
        return
    names = ", ".join(FIELD_NAMES.get(name, name) for name in sorted(changed))
    tail = " The scores are being recomputed." if changed & SCORED else ""
    messages.success(request, f"Saved: {names}.{tail}")


@login_required
@require_http_methods(["GET", "POST"])
def study_settings(request: HttpRequest, study_id: int) -> HttpResponse:
    study, membership = access.check_study(request.user, study_id)
    access.check_owner(membership, "changing the study's settings")
    form = StudySettingsForm(request.POST or None, instance=study)
    if request.method == "POST" and form.is_valid():
        fields = {**{name: form.cleaned_data[name] for name in form.Meta.fields},
                  "primary_judge": form.cleaned_data["primary_judge"]}
        # A ModelForm writes its fields onto the instance while validating; reload it so the domain operation
        # compares the stored values with the new ones.
        study.refresh_from_db()
        try:
            changed = services.do_update_study(study, fields, user=request.user)
        except IntegrityError:  # another study took the name between the form's check and the save
            form.add_error("name", "A study with this name already exists.")
        else:
            _saved(request, changed)
            return redirect("study-settings", study_id=study.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "annotation/study_settings.html", {"study": study, "form": form}, status=status)


@login_required
@require_POST
def make_primary_judge(request: HttpRequest, study_id: int) -> HttpResponse:
    """The judge page's "Make primary": one field of the study's settings."""
    study, membership = access.check_study(request.user, study_id)
    access.check_owner(membership, "choosing the primary judge")
    judge_id = request.POST.get("judge", "")
    judge = study.judges.filter(pk=int(judge_id)).first() if judge_id.isdecimal() and len(judge_id) < 10 else None
    if judge is None:
        messages.error(request, "judge: choose one of the study's judges")
        return redirect("study-settings", study_id=study.pk)
    _saved(request, services.do_update_study(study, {"primary_judge": judge}, user=request.user))
    return redirect("judge", judge_id=judge.pk)


@login_required
@require_http_methods(["GET", "POST"])
def problem_edit(request: HttpRequest, problem_id: int) -> HttpResponse:
    problem = get_object_or_404(Problem.objects.select_related("study"), pk=problem_id)
    _study, membership = access.check_study(request.user, problem.study_id)
    access.check_owner(membership, "correcting a problem")
    form = ProblemEditForm(request.POST or None, instance=problem)
    if request.method == "POST" and form.is_valid():
        fields = {name: form.cleaned_data[name] for name in (*form.Meta.fields, "tags")}
        with transaction.atomic():
            problem.refresh_from_db()
            changed = services.do_update_problem(problem, fields, user=request.user)
        _saved(request, changed)
        return redirect("problem", problem_id=problem.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "annotation/problem_edit.html", {"study": problem.study, "problem": problem, "form": form},
                  status=status)
