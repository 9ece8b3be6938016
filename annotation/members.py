"""Study membership managed by owners on the web and through the API."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.db import transaction
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from annotation.models import Membership, Study
from annotation.services import generate_password
from reasonlib.refusals import Invalid


class MemberError(Invalid):
    """A membership change refused (an unknown role or user, the last owner)."""


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


#: How an owner hands a new account over: a generated password they pass on, or a link with which the new
#: user sets their own password (Django's password-reset token: valid once, until the password changes).
HANDOVER_PASSWORD = "password"
HANDOVER_LINK = "link"


@transaction.atomic
def do_create_account(study: Study, username: str, role: str, *, handover: str) -> tuple[Membership, str]:
    """Create an account for a new member of ``study`` (owners only, checked by the caller) and return the
    membership and the secret to show the owner once: the one-time password, or the path of the link
    where the user sets their own. An existing username is refused, so nobody's password is ever reset
    through another study's owner."""
    if role not in Membership.Role.values:
        raise MemberError(f"unknown role {role!r}; choose one of {', '.join(Membership.Role.values)}")
    if handover not in (HANDOVER_PASSWORD, HANDOVER_LINK):
        raise MemberError(f"unknown handover {handover!r}; choose {HANDOVER_PASSWORD!r} or {HANDOVER_LINK!r}")
    username = username.strip()
    if not username:
        raise MemberError("a username is required")
    User = get_user_model()
    if User.objects.filter(username__iexact=username).exists():
        raise MemberError(f"the username {username!r} is taken; invite the existing user instead")
    user = User(username=username)
    # Validate the name the way Django's own forms do (letters, digits and @.+-_ only).
    try:
        user.full_clean(exclude=["password"])
    except ValidationError as exc:
        problems = exc.message_dict.get("username") or exc.messages
        raise MemberError(f"username: {' '.join(problems)}") from None
    if handover == HANDOVER_PASSWORD:
        secret = generate_password()
        user.set_password(secret)
        user.save()
    else:
        user.set_unusable_password()
        user.save()
        # The token hashes the (unusable) password and last login: it stops working once the user has set one.
        secret = reverse("password-set", args=[urlsafe_base64_encode(force_bytes(user.pk)),
                                               default_token_generator.make_token(user)])
    membership = Membership.objects.create(study=study, user=user, role=role)
    return membership, secret
