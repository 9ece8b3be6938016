"""``{% stand_in_notice study_or_subject %}``: the notice a page shows when numbers on it come from a stand-in
(the demo's deterministic server, subjects.models.STAND_IN_MODEL) rather than a language model."""

from __future__ import annotations

from django import template

from annotation.models import Study
from subjects.models import STAND_IN_MODEL, SubjectModel

register = template.Library()


@register.inclusion_tag("subjects/_stand_in_notice.html")
def stand_in_notice(obj: Study | SubjectModel) -> dict:
    if isinstance(obj, SubjectModel):
        names = [obj.name] if obj.is_stand_in else []
    else:
        names = list(SubjectModel.objects.filter(study=obj, model=STAND_IN_MODEL).values_list("name", flat=True))
    return {"names": names}
