from __future__ import annotations

import json

from django import forms

from reasonlib import selection
from runs import params
from subjects.models import GenerationRun, PromptTemplate, SubjectModel
from subjects.serializers import EDITABLE_FIELDS


class SubjectModelForm(forms.ModelForm):
    check_server = forms.BooleanField(required=False, initial=True, label="Check the server first (GET /models)")

    class Meta:
        model = SubjectModel
        fields = [*EDITABLE_FIELDS, "prompt_template"]
        widgets = {"base_url": forms.URLInput(attrs={"placeholder": "http://127.0.0.1:8080/v1"}),
                   "system_prompt": forms.Textarea(attrs={"rows": 3}),
                   "chat_template": forms.Textarea(attrs={"rows": 4, "placeholder": "the chat_template of the "
                                                          "model's tokenizer_config.json (optional)"})}

    def __init__(self, *args, study, **kwargs):
        super().__init__(*args, **kwargs)
        self.study = study
        self.fields["prompt_template"].queryset = PromptTemplate.objects.filter(study=study).exclude(kind=PromptTemplate.Kind.SYSTEM).order_by("name", "-version")
        self.fields["stop"].required = False
        self.fields["chat_template"].strip = False  # whitespace is part of the prompt the template renders

    def clean_chat_template(self) -> str:
        # Browsers send a textarea's lines ending in CRLF; the model's template has LF, and every "\r" would
        # reach the raw prompt of the completions mode.
        return self.cleaned_data["chat_template"].replace("\r\n", "\n")


class GenerationForm(forms.Form):
    problems = forms.CharField(initial=GenerationRun.Scope.ALL, max_length=2000,
                               help_text="all, missing (lacking some of their K samples) or a filter: "
                                         "first:N, ids:A,B-C, pid:X,Y, sample:N@SEED")
    samples = params.form_field("samples", required=False, help_text="K (default: the model's; 1..100)")
    force = forms.BooleanField(required=False, help_text="ask again even where a cached answer exists")
    budget_usd = params.form_field("budget_usd", required=False, label="Budget (USD)")

    def clean_problems(self) -> str:
        try:
            scope, problem_filter = selection.scope_and_filter(self.cleaned_data["problems"])
        except selection.FilterError as exc:
            raise forms.ValidationError(str(exc)) from None
        return problem_filter or scope


class PromptTemplateForm(forms.Form):
    """The prompt-template editor: saving makes a new version of NAME (the text is kept as typed)."""

    name = forms.CharField(max_length=100)
    template = forms.CharField(widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false"}), strip=False,
                               help_text="A Django template over problem, problem_id and exemplars "
                                         "(rendered in a sandbox: no tag libraries, no include/extends/debug).")
    exemplars = forms.CharField(widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}), required=False,
                                help_text='JSON: [{"question": ..., "answer": ...}, ...] (k-shot; empty: zero-shot)')
    problem_id = forms.CharField(required=False, label="Preview on problem",
                                 help_text="a problem id of the study (default: its first problem)")

    def clean_template(self) -> str:
        return self.cleaned_data["template"].replace("\r\n", "\n")  # browsers send CRLF line ends

    def clean_exemplars(self) -> list:
        text = self.cleaned_data["exemplars"].strip()
        if not text:
            return []
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
