from django import forms
from django.conf import settings

from annotation.importing.adapters import FORMATS


class ImportForm(forms.Form):
    file = forms.FileField(help_text="JSONL (or a ProcessBench JSON array)")
    format = forms.ChoiceField(choices=[(f, f) for f in FORMATS], initial="reasonaudit")
    skip_invalid = forms.BooleanField(required=False, help_text="keep the good lines and report the bad ones")

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > settings.IMPORT_MAX_BYTES:
            raise forms.ValidationError(
                f"the file is {upload.size:,} bytes, over the import limit of {settings.IMPORT_MAX_BYTES:,} bytes"
            )
        return upload
