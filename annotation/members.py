"""Study membership managed by owners on the web and through the API.

Nobody is added to a study without consent, and nobody learns whether a username exists (issue 29, L5):
an owner *invites* a user by name (``do_invite``); the answer is the same whether the name exists or
not (``invited_message``), and the user becomes a member only by accepting the invitation on their
studies page (``do_respond``). Changing the role of someone who is already a member (listed on the
members page anyway) takes effect at once. Creating an account for someone who has none is for site
administrators (``do_create_account``): a free name would otherwise answer differently from a taken one.
The ``add_member`` command, run by the server's operator, still adds directly.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.db import transaction
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from annotation import access
from annotation.models import Invitation, Membership, OneTimePassword, Study
from annotation.services import generate_password
from reasonlib.refusals import Invalid


class MemberError(Invalid):
    """A membership change refused (an unknown role or user, the last owner); about the username unless the
    raiser names another field."""

    default_field = "username"


def invited_message(username: str, role: str) -> str:
    """The one answer to an invitation, whether the name exists or not."""
    return (f"If {username.strip()!r} has an account, they are invited as {role}: they join the study when they "
            "accept the invitation on their studies page.")


@transaction.atomic
def do_invite(study: Study, username: str, role: str, *, by=None) -> Membership | None:
    """Change a member's role (returns the membership), or invite a user who is not a member (returns None,
    whether the name exists or not: the caller answers ``invited_message``)."""
    if role not in Membership.Role.values:
        raise MemberError(f"unknown role {role!r}; choose one of {', '.join(Membership.Role.values)}", field="role")
    username = username.strip()
    current = (Membership.objects.select_for_update().select_related("user")
               .filter(study=study, user__username=username).first())
    if current is not None:
        if current.role == Membership.Role.OWNER and role != Membership.Role.OWNER:
            _keep_an_owner(study, current)
        current.role = role
        current.save(update_fields=["role"])
        return current
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is not None:
        Invitation.objects.update_or_create(study=study, user=user, defaults={"role": role, "invited_by": by})
    return None


def pending_invitations(user) -> list[Invitation]:
    """The user's invitations, newest first (their studies page)."""
    return list(Invitation.objects.filter(user=user).select_related("study", "invited_by").order_by("-created_at"))


@transaction.atomic
def do_respond(user, invitation_id: int, accept: bool) -> Membership | None:
    """Accept (the membership) or decline (None) one of the user's own invitations; another's is not found."""
    invitation = Invitation.objects.select_for_update().filter(pk=invitation_id, user=user).first()
    if invitation is None:
        raise access.not_found("invitation")
    membership = None
    if accept:
        membership, _ = Membership.objects.get_or_create(study=invitation.study, user=user,
                                                         defaults={"role": invitation.role})
    invitation.delete()
    return membership


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


CREATE_ACCOUNTS_REFUSAL = "creating accounts is for site administrators; invite an existing user instead"


def creates_accounts(user) -> bool:
    return user is not None and bool(user.is_staff or user.is_superuser)


@transaction.atomic
def do_create_account(study: Study, username: str, role: str, *, handover: str, by) -> tuple[Membership, str]:
    """Create an account for a new member of ``study`` (owners, checked by the caller, who are site
    administrators) and return the membership and the secret to show once: the one-time password, or the
    path of the link where the user sets their own. An existing username is refused, so nobody's password
    is ever reset through another study's owner; because that refusal tells a taken name from a free one,
    only site administrators create accounts (everyone else invites)."""
    if not creates_accounts(by):
        raise MemberError(CREATE_ACCOUNTS_REFUSAL)
    if role not in Membership.Role.values:
        raise MemberError(f"unknown role {role!r}; choose one of {', '.join(Membership.Role.values)}", field="role")
    if handover not in (HANDOVER_PASSWORD, HANDOVER_LINK):
        raise MemberError(f"unknown handover {handover!r}; choose {HANDOVER_PASSWORD!r} or {HANDOVER_LINK!r}",
                          field="handover")
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
        raise MemberError(' '.join(problems)) from None
    if handover == HANDOVER_PASSWORD:
        secret = generate_password()
        user.set_password(secret)
        user.save()
        OneTimePassword.objects.create(user=user)  # the first sign-in spends it (annotation.one_time)
    else:
        user.set_unusable_password()
        user.save()
        # The token hashes the (unusable) password and last login: it stops working once the user has set one.
        secret = reverse("password-set", args=[urlsafe_base64_encode(force_bytes(user.pk)),
                                               default_token_generator.make_token(user)])
    membership = Membership.objects.create(study=study, user=user, role=role)
    return membership, secret
