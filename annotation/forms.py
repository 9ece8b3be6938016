from django import forms
from django.core.validators import MaxLengthValidator

from annotation.importing.adapters import PATH_FORMAT_NEEDS_MODEL, PATH_FORMATS, UPLOAD_FORMATS, format_label
from annotation.importing.archives import is_archive
from annotation.models import DESCRIPTION_MAX, Problem, Study
from annotation.review import queues
from annotation.services import study_name_taken, upload_too_large


def upload_formats() -> list[str]:
    """Every format the CLI imports: the stream formats, lm-eval (two files) and the folder formats (an archive)."""
    return list(dict.fromkeys([*UPLOAD_FORMATS, "lm-eval", *PATH_FORMATS]))


class ImportForm(forms.Form):
    file = forms.FileField(label="File", help_text="JSONL, a JSON array, an Inspect AI log, an lm-eval samples_*.jsonl, "
                           "or for a folder format a .zip / .tar.gz archive of the folder")
    format = forms.ChoiceField(label="Format", initial="reasonaudit",
                               help_text="what wrote the file; docs/import-format.md describes each")
    results = forms.FileField(label="lm-eval results JSON", required=False,
                              help_text="lm-eval only: the results_<time>.json written beside the samples file "
                                        "(it names the model and the generation settings)")
    model = forms.CharField(label="Model name", required=False, max_length=200,
                            help_text="abstraction outputs only: the model that wrote them (the files do not say)")
    instances = forms.IntegerField(label="Instances per template", required=False, min_value=1, max_value=200,
                                   help_text="GSM-Symbolic templates only: instances drawn per template (1 to 200; "
                                             "default 10)")
    seed = forms.IntegerField(label="Seed", required=False, min_value=0, max_value=2**31 - 1,
                              help_text="GSM-Symbolic templates only: the same seed draws the same instances "
                                        "(0 to 2,147,483,647; default 0)")
    thought_segmenter = forms.ChoiceField(
        label="Split thoughts into steps by", required=False,
        choices=[("", "the study's setting"), *Study.Segmenter.choices],
        help_text="how a reasoning model's thoughts in this file are cut into steps (docs/import-format.md)")
    skip_invalid = forms.BooleanField(label="Skip invalid lines", required=False,
                                      help_text="keep the good lines and report the bad ones; otherwise one bad line "
                                                "imports nothing")

    #: The fields only some formats read: the page shows them for those formats only (static/js/format_fields.js;
    #: without JavaScript every field shows, each help text naming its formats).
    FORMAT_FIELDS = {"results": ("lm-eval",), "model": ("abstraction-outputs",), "instances": ("gsm-symbolic",),
                     "seed": ("gsm-symbolic",)}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Read at form time: other apps register their formats from AppConfig.ready.
        self.fields["format"].choices = [(f, format_label(f)) for f in upload_formats()]
        for name, formats in self.FORMAT_FIELDS.items():
            self.fields[name].widget.attrs["data-formats"] = " ".join(formats)

    def clean_file(self):
        upload = self.cleaned_data["file"]
        problem = upload_too_large(upload.size)
        if problem is not None:
            raise forms.ValidationError(problem)
        return upload

    def clean(self):
        data = super().clean()
        fmt, upload = data.get("format"), data.get("file")
        if fmt == "lm-eval" and not data.get("results"):
            self.add_error("results", "an lm-eval samples file is imported with the results_<time>.json written "
                                      "beside it: choose that file too")
        if fmt in PATH_FORMATS:
            if upload is not None and not is_archive(upload.name):
                self.add_error("file", f"this format is a folder: upload a .zip or .tar.gz archive of it, "
                                       f"not {upload.name}")
            if fmt in PATH_FORMAT_NEEDS_MODEL and not data.get("model", "").strip():
                self.add_error("model", "name the model that wrote these outputs")
        return data


ROLE_CHOICES = [("annotator", "Annotator"), ("adjudicator", "Adjudicator"), ("owner", "Owner")]


def _free_study_name(name: str, instance: Study) -> str:
    if study_name_taken(name, exclude=instance if instance.pk else None):
        raise forms.ValidationError("A study with this name already exists (names are compared ignoring case).")
    return name


class StudyForm(forms.ModelForm):
    """A new study: the creator becomes its owner (annotation.services.do_create_study)."""

    class Meta:
        model = Study
        fields = ["name", "description", "blind", "segmenter", "thought_segmenter"]
        labels = {"blind": "Blind review", "segmenter": "Split traces into steps by",
                  "thought_segmenter": "Split thoughts into steps by"}
        help_texts = {
            "name": "unique across the whole installation; shown in every page title",
            "description": "optional; what the study is for",
            "blind": "annotators see no judge verdicts and no other annotator's labels on a trace until they "
                     "have labelled it completely themselves",
            "segmenter": "how traces imported without explicit steps are cut into steps",
            "thought_segmenter": "how a reasoning model's thoughts are cut into steps; reasoning moves: paragraphs, "
                                 "cut again where \"Wait\", \"Hmm\", \"Actually\"... start a new move",
        }
        widgets = {"description": forms.Textarea(attrs={"rows": 3, "maxlength": DESCRIPTION_MAX})}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["description"].validators.append(MaxLengthValidator(DESCRIPTION_MAX))
        self.fields["thought_segmenter"].required = False  # left out: the default, reasoning moves

    def clean_name(self) -> str:
        return _free_study_name(self.cleaned_data["name"], self.instance)


class StudySettingsForm(StudyForm):
    """An owner's settings of a study (annotation.services.do_update_study, as PATCH /api/v1/studies/{id}/):
    the new-study form's fields, plus the primary judge, one of the study's own judges."""

    primary_judge = forms.ModelChoiceField(queryset=None, required=False, empty_label="none",
                                           label="Primary judge",
                                           help_text="the judge whose verdicts stand in for people's in the final "
                                                     "labels and that annotators are adjudicated against; changing "
                                                     "it recomputes the scores")

    class Meta(StudyForm.Meta):
        # What changes for a study that exists: the description is shown, segmenters apply to later imports.
        help_texts = {
            **StudyForm.Meta.help_texts,
            "description": f"shown on the study page; at most {DESCRIPTION_MAX:,} characters",
            "segmenter": "how traces imported without explicit steps are cut into steps (later imports)",
            "thought_segmenter": "how a reasoning model's thoughts are cut into steps (later imports)",
        }
        widgets = {"description": forms.Textarea(attrs={"rows": 4, "maxlength": DESCRIPTION_MAX})}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["thought_segmenter"].required = True  # an existing study has one; no default to fall back on
        self.fields["primary_judge"].queryset = self.instance.judges.order_by("name")
        self.fields["primary_judge"].initial = self.instance.primary_judge_id


class ProblemEditForm(forms.ModelForm):
    """An owner corrects a problem (annotation.services.do_update_problem, as PATCH /api/v1/problems/{id}/)."""

    tags = forms.CharField(required=False, max_length=2000, help_text="comma-separated")

    class Meta:
        model = Problem
        fields = ["statement", "gold_answer", "domain"]
        help_texts = {"gold_answer": "what the automatic answer check compares final answers with",
                      "domain": "groups and filters the analytics; changing it recomputes the scores"}
        widgets = {"statement": forms.Textarea(attrs={"rows": 8})}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["tags"].initial = ", ".join(self.instance.tags or [])

    def clean_tags(self) -> list[str]:
        tags = [t.strip() for t in self.cleaned_data["tags"].split(",") if t.strip()]
        if len(tags) > 100 or any(len(t) > 100 for t in tags):
            raise forms.ValidationError("at most 100 tags of at most 100 characters each")
        return tags


class MemberForm(forms.Form):
    username = forms.CharField(max_length=150, label="Username", help_text="an existing account on this installation")
    role = forms.ChoiceField(choices=ROLE_CHOICES, initial="annotator", label="Role")


class AccountForm(forms.Form):
    """An owner creates an account for someone who has none (annotation.members.do_create_account)."""

    username = forms.CharField(max_length=150, label="New username",
                               help_text="letters, digits and @ . + - _ only")
    role = forms.ChoiceField(choices=ROLE_CHOICES, initial="annotator", label="Role")
    handover = forms.ChoiceField(
        label="Password", widget=forms.RadioSelect, initial="password",
        choices=[("password", "Generate a one-time password (shown to you once; pass it on)"),
                 ("link", "Give me a link where they set their own password (works once)")],
    )

    def __init__(self, *args, **kwargs):
        # The Members page shows this form beside the invitation form, whose fields have the same names:
        # ids of their own keep each label tied to its own field.
        kwargs.setdefault("auto_id", "id_account_%s")
        super().__init__(*args, **kwargs)


class AssignForm(forms.Form):
    annotators = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple, help_text="whose queues get the traces")
    k = forms.IntegerField(min_value=queues.ANNOTATORS_PER_TRACE[0], max_value=queues.ANNOTATORS_PER_TRACE[1],
                           initial=1, label="Annotators per trace",
                           help_text=f"{queues.ANNOTATORS_PER_TRACE[0]} to {queues.ANNOTATORS_PER_TRACE[1]}; "
                                     "more than 1 gives overlap for agreement")
    stratify = forms.BooleanField(required=False, initial=True, label="Stratify by model",
                                  help_text="everyone gets the same share of each model's traces")
    only_unassigned = forms.BooleanField(required=False, initial=True, label="Only traces nobody has yet")

    def __init__(self, *args, members=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["annotators"].choices = [(m.user_id, f"{m.user.username} ({m.role})") for m in members]
        self.fields["annotators"].initial = [m.user_id for m in members if m.role == "annotator"]


def parse_skeleton_rows(data) -> list[dict]:
    """The editor's rows -> ``[{"text", "check"}]`` in their order.

    Rows are numbered ``text-J``, ``check-J``, ``pos-J``, ``del-J``: the
    script renumbers ``pos`` when steps are dragged or moved with the keys;
    without JavaScript the positions are typed and "remove" is a checkbox.
    Blank rows (the spare one at the end) are ignored.
    """
    rows = []
    for key in data:
        if not key.startswith("text-"):
            continue
        j = key[5:]
        if not j.isdigit() or data.get(f"del-{j}"):
            continue
        text, check = data.get(key, "").strip(), data.get(f"check-{j}", "").strip()
        if not text and not check:
            continue
        try:
            pos = float(data.get(f"pos-{j}") or 1e9)
        except ValueError:
            pos = 1e9
        rows.append((pos, int(j), {"text": text, "check": check}))
    return [row for _, _, row in sorted(rows, key=lambda r: (r[0], r[1]))]
