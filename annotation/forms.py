from django import forms

from annotation.importing.adapters import UPLOAD_FORMATS
from annotation.services import upload_too_large


class ImportForm(forms.Form):
    file = forms.FileField(help_text="JSONL (or a ProcessBench JSON array, or an Inspect AI .eval / .json log)")
    format = forms.ChoiceField(choices=[(f, f) for f in UPLOAD_FORMATS], initial="reasonaudit")
    skip_invalid = forms.BooleanField(required=False, help_text="keep the good lines and report the bad ones")

    def clean_file(self):
        upload = self.cleaned_data["file"]
        problem = upload_too_large(upload.size)
        if problem is not None:
            raise forms.ValidationError(problem)
        return upload


class MemberForm(forms.Form):
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=[(r, r) for r in ("annotator", "adjudicator", "owner")], initial="annotator")


class AssignForm(forms.Form):
    annotators = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple, help_text="whose queues get the traces")
    k = forms.IntegerField(min_value=1, max_value=20, initial=1, label="Annotators per trace",
                           help_text="more than 1 gives overlap for agreement")
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
