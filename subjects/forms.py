from __future__ import annotations

import json

from django import forms

from runs import params
from subjects import prompts
from subjects.models import GenerationRun, PromptTemplate, SubjectModel
from subjects.serializers import EDITABLE_FIELDS
from subjects.services import find_template


def _escape_stop(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")


def _unescape_stop(line: str) -> str:
    out, i = [], 0
    while i < len(line):
        if line[i] == "\\" and i + 1 < len(line) and line[i + 1] in "nt\\":
            out.append({"n": "\n", "t": "\t", "\\": "\\"}[line[i + 1]])
            i += 2
        else:
            out.append(line[i])
            i += 1
    return "".join(out)


class StopSequencesField(forms.Field):
    """Stop sequences as a list, one per line (not raw JSON). A stop string that holds a line break or a tab is
    written with ``\\n`` / ``\\t`` (``\\\\`` for a backslash), as the field's help says."""

    widget = forms.Textarea(attrs={"rows": 3, "spellcheck": "false", "placeholder": "Question:\n\\n\\n"})

    def prepare_value(self, value):
        if isinstance(value, list):
            return "\n".join(_escape_stop(s) for s in value)
        return value or ""

    def to_python(self, value):
        if isinstance(value, list):
            return value
        text = (value or "").strip()
        if text.startswith("[") and text.endswith("]"):
            # The old form (and scripts written against it) posted a JSON list: still read as one.
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError:
                parsed = None
            if isinstance(parsed, list) and all(isinstance(s, str) for s in parsed):
                return parsed
        lines = [line for line in (value or "").replace("\r\n", "\n").split("\n") if line.strip()]
        return [_unescape_stop(line) for line in lines]

    def validate(self, value):
        super().validate(value)
        if len(value) > 4:
            raise forms.ValidationError(f"give at most 4 stop sequences (you gave {len(value)})")


class SubjectModelForm(forms.ModelForm):
    check_server = forms.BooleanField(required=False, initial=True, label="Check the server after saving",
                                      help_text="a background job probes the server (three short requests); "
                                                "the model's page shows what it found")
    stop = StopSequencesField(required=False, label="Stop sequences",
                              help_text="one per line, at most 4; write a line break as \\n and a tab as \\t "
                                        "(e.g. \\n\\nQuestion:)")

    class Meta:
        model = SubjectModel
        fields = [*EDITABLE_FIELDS, "prompt_template"]
        labels = {
            "name": "Name", "base_url": "Base URL", "model": "Model", "api_key_env": "API key variable",
            "api": "API", "system_prompt": "System prompt", "prompt_template": "Prompt template",
            "temperature": "Temperature", "top_p": "Top-p", "seed": "Seed", "max_tokens": "Max tokens",
            "n_samples": "Samples per problem (K)", "concurrency": "Concurrent requests",
            "rate_limit_per_minute": "Rate limit (requests per minute)", "timeout_seconds": "Timeout (seconds)",
            "max_retries": "Retries", "price_input_per_mtok": "Price of input (USD per million tokens)",
            "price_output_per_mtok": "Price of output (USD per million tokens)", "chat_template": "Chat template",
            "eos_token": "EOS token",
        }
        help_texts = {
            "name": "how this study calls the model (letters, digits, . _ -)",
            "base_url": "the OpenAI-compatible endpoint, ending in /v1",
            "model": "the model name the server expects (the \"model\" of each request)",
            "api_key_env": "name of the environment variable holding the API key in the worker (never the key)",
            "api": "chat: /chat/completions with messages; completions: /completions with the rendered prompt",
            "system_prompt": "optional; sent first in chat mode",
            "prompt_template": "required: how a problem becomes the prompt (Prompt templates page); "
                               "a new model starts on the built-in zero-shot template",
            "temperature": "0 to 2; 0 is greedy",
            "top_p": "0 to 1; empty: the server's default",
            "seed": "empty: none sent; servers that honour it repeat their samples",
            "max_tokens": "1 or more: the longest answer generated",
            "n_samples": "1 to 100 samples of each problem (pass@k, maj@k)",
            "concurrency": "1 to 64 requests at once",
            "rate_limit_per_minute": "empty: no limit",
            "timeout_seconds": "the longest one request may take, answer included (at least 0.1)",
            "max_retries": "0 to 20 retries of a failed request",
            "chat_template": "optional: the chat_template of the model's tokenizer_config.json, for continuations "
                             "in completions mode",
            "eos_token": "the template's end-of-turn token (from the same tokenizer_config.json)",
        }
        widgets = {"base_url": forms.URLInput(attrs={"placeholder": "http://127.0.0.1:8080/v1"}),
                   "system_prompt": forms.Textarea(attrs={"rows": 3}),
                   "chat_template": forms.Textarea(attrs={"rows": 4, "placeholder": "the chat_template of the "
                                                          "model's tokenizer_config.json (optional)"})}

    def __init__(self, *args, study, **kwargs):
        super().__init__(*args, **kwargs)
        self.study = study
        self.fields["prompt_template"].queryset = PromptTemplate.objects.filter(study=study).exclude(kind=PromptTemplate.Kind.SYSTEM).order_by("name", "-version")
        self.fields["chat_template"].strip = False  # whitespace is part of the prompt the template renders
        self.fields["thinking_switch"].required = False  # only read when thinking is on or off
        if not self.instance.pk and not self.is_bound and not self.initial.get("prompt_template"):
            # The default do_save_subject gives too (the built-in zero-shot template): a new model needs no choice.
            self.initial["prompt_template"] = find_template(study, prompts.ZERO_SHOT).pk
        # The one required choice without a value of its own on the model, marked as the runs page marks one.
        self.fields["prompt_template"].label = "Prompt template *"

    def clean_thinking_switch(self) -> str:
        return self.cleaned_data.get("thinking_switch") or SubjectModel.ThinkingSwitch.TEMPLATE

    def clean_chat_template(self) -> str:
        # Browsers send a textarea's lines ending in CRLF; the model's template has LF, and every "\r" would
        # reach the raw prompt of the completions mode.
        return self.cleaned_data["chat_template"].replace("\r\n", "\n")


class GenerationForm(forms.Form):
    """The generation row's inputs on the subject models page, drawn only: the post is validated by the
    generation kind's serializer (runs.views.start_from_page), whose refusals stand under their fields."""

    problems = forms.CharField(initial=GenerationRun.Scope.ALL, max_length=2000,
                               help_text="all, missing (lacking some of their K samples) or a filter: "
                                         "first:N, ids:A,B-C, pid:X,Y, sample:N@SEED")
    samples = params.form_field("samples", required=False)
    force = forms.BooleanField(required=False, help_text="ask again even where a cached answer exists")
    budget_usd = params.form_field("budget_usd", required=False)


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
