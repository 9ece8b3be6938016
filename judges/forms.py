from __future__ import annotations

from django import forms

from judges.models import JudgeConfig, JudgeRun, validate_template
from judges.serializers import EDITABLE_FIELDS


class JudgeConfigForm(forms.ModelForm):
    class Meta:
        model = JudgeConfig
        fields = EDITABLE_FIELDS
        widgets = {"base_url": forms.URLInput(attrs={"placeholder": "http://127.0.0.1:8080/v1"})}

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
                               strip=False, validators=[validate_template])
    note = forms.CharField(max_length=200, required=False, help_text="what changed, for the history")
    trace = forms.CharField(required=False, help_text="trace id (or number) to preview the prompt on")


class RunForm(forms.Form):
    traces = forms.ChoiceField(choices=JudgeRun.Scope.choices, initial=JudgeRun.Scope.ALL)
    model = forms.ChoiceField(required=False, help_text="only the traces of this model")
    force = forms.BooleanField(required=False, help_text="ask again even where a cached answer exists")
    budget_usd = forms.FloatField(required=False, min_value=0, label="Budget (USD)",
                                  help_text="stop once the estimated cost reaches this")

    def __init__(self, *args, models=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["model"].choices = [("", "all models")] + [(m, m) for m in models]
