"""Study membership managed by owners on the web and through the API."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction

from annotation.models import Membership, Study


class MemberError(ValueError):
    pass


@transaction.atomic
def do_set_role(study: Study, username: str, role: str) -> tuple[Membership, bool]:
    """Invite an existing user (or change their role). Unlike the
    ``add_member`` command, the web never creates accounts."""
    if role not in Membership.Role.values:
        raise MemberError(f"unknown role {role!r}; choose one of {', '.join(Membership.Role.values)}")
    user = get_user_model().objects.filter(username=username.strip(), is_active=True).first()
    if user is None:
        raise MemberError(f"no active user named {username.strip()!r}; an administrator creates accounts "
                          "(python manage.py add_member)")
    current = Membership.objects.select_for_update().filter(study=study, user=user).first()
    if current and current.role == Membership.Role.OWNER and role != Membership.Role.OWNER:
        _keep_an_owner(study, current)
    membership, created = Membership.objects.update_or_create(study=study, user=user, defaults={"role": role})
    return membership, created


@transaction.atomic
def do_remove_member(study: Study, username: str) -> None:
    membership = Membership.objects.select_for_update().filter(study=study, user__username=username).first()
    if membership is None:
        raise MemberError(f"{username!r} is not a member of this study")
    if membership.role == Membership.Role.OWNER:
        _keep_an_owner(study, membership)
    membership.delete()


def _keep_an_owner(study: Study, leaving: Membership) -> None:
    others = Membership.objects.filter(study=study, role=Membership.Role.OWNER).exclude(pk=leaving.pk)
    if not others.exists():
        raise MemberError("a study needs at least one owner; make someone else owner first")
