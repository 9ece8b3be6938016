"""The study navigation needs the viewer's role; not every page's view puts
the membership in the context (judges, analytics), so look it up then."""

from django import template

from annotation import gate
from annotation.models import Membership

register = template.Library()


@register.simple_tag
def nav_sees_all(membership) -> bool:
    """Whether the visibility gate lets the member read every source (links to reports that read them)."""
    return membership is not None and gate.may_read(membership, gate.OTHER_SOURCES)


@register.simple_tag(takes_context=True)
def nav_membership(context, study):
    membership = context.get("membership")
    if isinstance(membership, Membership) and membership.study_id == study.pk:
        return membership
    request = context.get("request")
    if request is None or not request.user.is_authenticated:
        return None
    return Membership.objects.filter(study=study, user=request.user).first()
