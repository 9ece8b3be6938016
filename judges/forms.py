from __future__ import annotations

from django import forms

from judges.models import JudgeConfig, validate_template
from judges.protocol import MAX_TOKENS_BASE, MAX_TOKENS_CAP, MAX_TOKENS_PER_STEP
from judges.serializers import EDITABLE_FIELDS
from runs import params


class JudgeConfigForm(forms.ModelForm):
    class Meta:
        model = JudgeConfig
        fields = EDITABLE_FIELDS
        widgets = {"base_url": forms.URLInput(attrs={"placeholder": "http://127.0.0.1:8080/v1"})}
        labels = {
            "name": "Name", "model": "Model", "base_url": "Base URL", "api_key_env": "API key variable",
            "temperature": "Temperature", "max_tokens": "Max tokens", "mode": "Judging mode",
            "output_mode": "Output format", "concurrency": "Concurrent requests",
            "rate_limit_per_minute": "Rate limit (requests per minute)", "max_retries": "Retries",
            "timeout_seconds": "Timeout (seconds)", "price_input_per_mtok": "Price of input (USD per million tokens)",
            "price_output_per_mtok": "Price of output (USD per million tokens)",
        }
        help_texts = {
            "name": "how the study calls this judge (letters, digits, . _ -)",
            "model": "the model name the server expects",
            "base_url": "the OpenAI-compatible endpoint, ending in /v1",
            "temperature": "0 to 2; 0 is greedy",
            "mode": "skeleton: the judge also names the skeleton steps each step establishes",
            "output_mode": "auto finds what the server accepts (JSON schema, JSON mode or plain text)",
            "concurrency": f"{params.range_words('concurrency')} requests at once",
            "rate_limit_per_minute": f"{params.range_words('rate_limit_per_minute')}; empty: no limit",
            "max_retries": f"{params.range_words('max_retries')} retries of a failed request",
            "timeout_seconds": f"per request, {params.range_words('timeout_seconds')} seconds",
            "max_tokens": f"{params.range_words('max_tokens')}; empty: derived from each trace's steps "
                          f"({MAX_TOKENS_BASE} + {MAX_TOKENS_PER_STEP} per step, at most {MAX_TOKENS_CAP:,})",
            "price_input_per_mtok": "0 or more; with the output price, the run's estimated cost",
            "price_output_per_mtok": "0 or more",
        }

    def __init__(self, *args, study, **kwargs):
        super().__init__(*args, **kwargs)
        self.study = study
        for key in ("model", "base_url"):
            self.fields[key].required = True

    def clean_name(self):
        name = self.cleaned_data["name"]
        taken = JudgeConfig.objects.filter(study=self.study, name=name)
        if self.instance.pk:
            taken = taken.exclude(pk=self.instance.pk)
        if taken.exists():
            raise forms.ValidationError(f"the study has a judge named {name!r} already")
        return name


class PromptForm(forms.Form):
    template = forms.CharField(widget=forms.Textarea(attrs={"rows": 24, "cols": 100, "spellcheck": "false"}),
                               strip=False, validators=[validate_template], label="Prompt template")
    note = forms.CharField(max_length=200, required=False, label="Note", help_text="what changed, for the history")
    trace = forms.CharField(required=False, label="Preview on trace",
                            help_text="trace id (or number) to preview the prompt on")
