from __future__ import annotations

from typing import Any

from django import forms

from annotation.middleware import refusals_into
from scoring.core.profile import Profile
from scoring.models import ScoringProfile

HELP = {
    "alpha": "cap of the format penalty",
    "beta": "weight of the format penalty (0 = off)",
    "eta": "extra factor when the trace is shorter than the skeleton",
    "omega": "weight of the hazard penalty (0 = off)",
    "c_haz": "cap of the hazard penalty",
    "w": "weight of the process score in the holistic score",
    "tau": "lucky guess: correct answer with process score ≤ tau",
}


class ProfileForm(forms.Form):
    name = forms.CharField(max_length=100, required=False)
    alpha = forms.FloatField(label="alpha", min_value=0, max_value=10, help_text=HELP["alpha"])
    beta = forms.FloatField(label="beta", min_value=0, help_text=HELP["beta"])
    eta = forms.FloatField(label="eta", min_value=0, help_text=HELP["eta"])
    omega = forms.FloatField(label="omega", min_value=0, help_text=HELP["omega"])
    c_haz = forms.FloatField(min_value=0, max_value=10, label="C_haz", help_text=HELP["c_haz"])
    neutral_as = forms.TypedChoiceField(choices=[("1", "pass (1)"), ("0", "fail (0)")], coerce=int,
                                        label="neutral steps in S_PRM")
    prm_hazard = forms.BooleanField(required=False, label="hazard penalty on S_PRM when there is no skeleton")
    w = forms.FloatField(label="w", min_value=0, max_value=1, help_text=HELP["w"])
    tau = forms.FloatField(label="tau", min_value=0, max_value=10, help_text=HELP["tau"])
    channels = forms.ChoiceField(
        choices=[("answer", "answer"), ("thought", "thought"), ("both", "both (thought, then answer)")],
        required=False, initial="answer", label="channels the scores read",
        help_text="answer: the visible answer's steps; thought: the thinking channel's; both: all in reading order",
    )
    pinned_hazard = forms.CharField(
        required=False, label="pinned hazard h(1), h(2), …",
        help_text="comma-separated values in [0, 1]; empty = estimate the hazard from the study's labels",
    )

    def __init__(self, *args, creating: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.creating = creating
        if creating:
            self.fields["name"].required = True

    @staticmethod
    def initial_from(profile: ScoringProfile) -> dict[str, Any]:
        p = profile.as_profile().to_dict()
        p["neutral_as"] = str(int(p["neutral_as"]))
        p["pinned_hazard"] = ", ".join(f"{h:g}" for h in p["pinned_hazard"]) if p["pinned_hazard"] else ""
        p["name"] = "" if profile is None else profile.name
        return p

    def clean_pinned_hazard(self) -> list[float] | None:
        text = self.cleaned_data.get("pinned_hazard", "").strip()
        if not text:
            return None
        try:
            return [float(x) for x in text.replace(";", ",").split(",") if x.strip()]
        except ValueError:
            raise forms.ValidationError("give numbers separated by commas") from None

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if not self.errors:
            with refusals_into(self):  # the core's refusal names the parameter, i.e. the field
                Profile.from_dict(self.params())
        return data

    def params(self) -> dict[str, Any]:
        d = self.cleaned_data
        return {
            "alpha": d["alpha"], "beta": d["beta"], "eta": d["eta"], "omega": d["omega"], "c_haz": d["c_haz"],
            "neutral_as": d["neutral_as"], "prm_hazard": bool(d.get("prm_hazard")), "w": d["w"], "tau": d["tau"],
            "pinned_hazard": d.get("pinned_hazard"), "channels": d.get("channels") or "answer",
        }
