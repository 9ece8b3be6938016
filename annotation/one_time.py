"""One-time passwords (issue 31: "the one-time password can be reused and never forces a change"). An account
made with a generated password (members.do_create_account, handover "password") has a OneTimePassword row.
Its first sign-in spends the password: the hash becomes unusable at once (the session is kept), so the same
password never signs in again, and every page but this one, sign-out and static files leads to
``/password/choose/`` until the user has set their own (Django's SetPasswordForm, no old password asked);
the sign-in marks its session, so the check costs other pages no query."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth import HASH_SESSION_KEY, update_session_auth_hash
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import SetPasswordForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from annotation.models import OneTimePassword

CHOOSE_URL_NAME = "password-choose"
# Set in the session by the sign-in that spends the password: the middleware reads it without a query of its own
# (pages count their queries), the page itself checks the row.
SESSION_FLAG = "must-choose-password"
# Paths a user who must choose a password may still reach (the page itself is added by name).
OPEN_PREFIXES = ("/logout/", "/static/", "/favicon")


def spend_on_sign_in(sender, request, user, **kwargs) -> None:
    """``user_logged_in`` receiver: a first sign-in with a generated password spends it."""
    updated = OneTimePassword.objects.filter(user=user, spent_at__isnull=True).update(spent_at=timezone.now())
    if updated:
        user.set_unusable_password()
        user.save(update_fields=["password"])
        session = getattr(request, "session", None)
        if session is not None:
            # The password changed: keep this session signed in (update_session_auth_hash, which needs
            # request.user, which a test client's sign-in does not set).
            session[HASH_SESSION_KEY] = user.get_session_auth_hash()
            session[SESSION_FLAG] = True


def must_choose(user) -> bool:
    return bool(user.is_authenticated and OneTimePassword.objects.filter(user=user).exists())


class ChoosePasswordMiddleware:
    """Every page of a user who signed in with a one-time password leads to the page where they choose their
    own (after the authentication middleware)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        session = getattr(request, "session", None)
        if session is not None and session.get(SESSION_FLAG) and not request.path.startswith(OPEN_PREFIXES) \
                and request.path != reverse(CHOOSE_URL_NAME) and request.user.is_authenticated:
            return redirect(CHOOSE_URL_NAME)
        return self.get_response(request)


@login_required
@require_http_methods(["GET", "POST"])
def choose_password(request: HttpRequest) -> HttpResponse:
    if not must_choose(request.user):
        request.session.pop(SESSION_FLAG, None)
        return redirect("studies")
    form = SetPasswordForm(request.user, request.POST or None)
    if request.method == "POST" and form.is_valid():
        form.save()
        OneTimePassword.objects.filter(user=request.user).delete()
        update_session_auth_hash(request, form.user)
        request.session.pop(SESSION_FLAG, None)
        messages.success(request, "Your password is set. The one-time password no longer works.")
        return redirect("studies")
    return render(request, "registration/password_choose.html", {"form": form},
                  status=400 if request.method == "POST" else 200)
