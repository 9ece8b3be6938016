"""Studies and people from the browser (issue 19 part 3): a new study, accounts made by an owner (one-time
password or a set-password link), roles and revocation, the profile page's API token, and the upload
form offering every format the CLI imports. Outsiders get 404, a blind annotator 403."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.forms import ImportForm
from annotation.importing.adapters import FORMAT_LABELS, cli_formats
from annotation.models import Invitation, Job, Membership, Study, Trace
from tests.conftest import signed_in
from tests.data_paths import ABSTRACTION_SAMPLE
from tests.evallogs.conftest import LM_EVAL_RESULTS, LM_EVAL_SAMPLES

pytestmark = pytest.mark.django_db
User = get_user_model()
ABSTRACTION = ABSTRACTION_SAMPLE


# --------------------------------------------------------------------------
# A new study


def test_a_signed_in_user_creates_a_study_and_owns_it(outsider):
    client = signed_in(outsider)
    page = client.get(reverse("study-create"))
    assert page.status_code == 200 and "Blind review" in page.content.decode()
    response = client.post(reverse("study-create"), {"name": "Pilot", "description": "", "blind": "",
                                                     "segmenter": "paragraphs"})
    study = Study.objects.get(name="Pilot")
    assert response.status_code == 302 and response["Location"] == reverse("study", args=[study.pk])
    assert (study.blind, study.segmenter, study.thought_segmenter) == (False, "paragraphs", "moves")
    assert Membership.objects.get(study=study).user == outsider
    assert Membership.objects.get(study=study).role == Membership.Role.OWNER



def test_the_new_study_form_chooses_the_thought_segmenter(outsider):
    client = signed_in(outsider)
    assert "Split thoughts into steps by" in client.get(reverse("study-create")).content.decode()
    client.post(reverse("study-create"), {"name": "Sentences", "segmenter": "lines", "thought_segmenter": "sentences"})
    assert Study.objects.get(name="Sentences").thought_segmenter == "sentences"
def test_a_taken_study_name_is_an_inline_error_on_the_form(owner, study):
    response = signed_in(owner).post(reverse("study-create"), {"name": study.name, "segmenter": "lines"})
    assert response.status_code == 400
    html = response.content.decode()
    assert 'class="field has-error"' in html and "already exists" in html
    assert Study.objects.filter(name=study.name).count() == 1


def test_an_anonymous_visitor_is_sent_to_sign_in_before_creating_a_study(client):
    response = client.post(reverse("study-create"), {"name": "X", "segmenter": "lines"})
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    assert not Study.objects.filter(name="X").exists()


# --------------------------------------------------------------------------
# Members: accounts, roles, revocation


def _site_admin(user):
    User.objects.filter(pk=user.pk).update(is_staff=True)
    user.refresh_from_db()
    return user


def test_an_owner_creates_an_account_whose_one_time_password_is_shown_once(owner, study):
    client = signed_in(_site_admin(owner))
    response = client.post(reverse("study-members", args=[study.pk]),
                           {"action": "create", "username": "bob", "role": "adjudicator", "handover": "password"})
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    html = response.content.decode()
    password = re.search(r'<code class="secret-value"[^>]*>([^<]+)</code>', html)[1]
    assert Membership.objects.get(study=study, user__username="bob").role == "adjudicator"
    bob = Client()
    assert bob.login(username="bob", password=password)
    # One-time: the first sign-in spends it, and bob chooses his own before any other page (issue 31).
    assert not Client().login(username="bob", password=password)
    assert bob.get(reverse("study", args=[study.pk]))["Location"] == "/password/choose/"
    assert bob.post("/password/choose/", {"new_password1": "bob's own secret 42", "new_password2": "x"}).status_code == 400
    chosen = bob.post("/password/choose/", {"new_password1": "bob's own secret 42",
                                            "new_password2": "bob's own secret 42"})
    assert chosen["Location"] == reverse("studies")
    assert bob.get(reverse("study", args=[study.pk])).status_code == 200  # still signed in, no more detour
    assert Client().login(username="bob", password="bob's own secret 42")
    assert not Client().login(username="bob", password=password)
    # Shown once: the members page never shows it again.
    assert password not in client.get(reverse("study-members", args=[study.pk])).content.decode()


def test_an_owner_creates_an_account_with_a_link_where_the_user_sets_the_password(owner, study):
    response = signed_in(_site_admin(owner)).post(reverse("study-members", args=[study.pk]),
                                     {"action": "create", "username": "carol", "role": "annotator",
                                      "handover": "link"})
    assert response.status_code == 200
    link = re.search(r'<code class="secret-value"[^>]*>http://testserver([^<]+)</code>', response.content.decode())[1]
    carol = User.objects.get(username="carol")
    assert not carol.has_usable_password()
    browser = Client()
    form = browser.get(link, follow=True)  # Django swaps the token for a session key, then shows the form
    assert form.status_code == 200 and "new_password1" in form.content.decode()
    done = browser.post(form.redirect_chain[-1][0], {"new_password1": "a long new secret",
                                                     "new_password2": "a long new secret"})
    assert done.status_code == 302 and "password-set" in done["Location"]
    assert Client().login(username="carol", password="a long new secret")
    # The link works once: the password it hashed is gone.
    again = Client().get(link, follow=True)
    assert "used up or not valid" in again.content.decode()


def test_creating_an_account_refuses_a_taken_username_and_resets_nobody(owner, member, study):
    response = signed_in(_site_admin(owner)).post(reverse("study-members", args=[study.pk]),
                                     {"action": "create", "username": member.username.upper(), "role": "owner",
                                      "handover": "password"})
    assert response.status_code == 400
    assert "is taken" in response.content.decode()
    member.refresh_from_db()
    assert member.check_password("pw-alice")
    assert Membership.objects.get(study=study, user=member).role == "annotator"


def test_an_owner_who_is_no_site_administrator_creates_no_account(owner, study):
    # A taken name answers differently from a free one, so only site administrators create accounts (issue 29, L5).
    response = signed_in(owner).post(reverse("study-members", args=[study.pk]),
                                     {"action": "create", "username": "bob", "role": "annotator", "handover": "password"})
    assert response.status_code == 400 and "site administrators" in response.content.decode()
    assert not User.objects.filter(username="bob").exists()
    assert "Create an account" not in signed_in(owner).get(reverse("study-members", args=[study.pk])).content.decode()


def test_an_invitation_answers_the_same_whether_the_name_exists_and_adds_nobody_without_consent(
        owner, outsider, study):
    url = reverse("study-members", args=[study.pk])
    answers = {}
    for name in (outsider.username, "nobody-by-that-name"):
        response = signed_in(owner).post(url, {"action": "set", "username": name, "role": "annotator"}, follow=True)
        answers[name] = re.sub(r'(csrfmiddlewaretoken" value="|"X-CSRFToken": ")[^"]+', "-",
                               response.content.decode().replace(name, "NAME"))
    assert answers[outsider.username] == answers["nobody-by-that-name"]
    api = APIClient()
    api.force_authenticate(owner)
    bodies = [api.post(f"/api/v1/studies/{study.pk}/members/", {"username": name, "role": "annotator"}, format="json")
              for name in (outsider.username, "nobody-by-that-name")]
    assert [b.status_code for b in bodies] == [202, 202]
    assert bodies[0].json()["detail"].replace(outsider.username, "N") == bodies[1].json()["detail"].replace(
        "nobody-by-that-name", "N")
    # Not a member until they accept; the study stays hidden from them until then.
    assert not Membership.objects.filter(study=study, user=outsider).exists()
    assert signed_in(outsider).get(reverse("study", args=[study.pk])).status_code == 404
    studies_page = signed_in(outsider).get(reverse("studies")).content.decode()
    assert "invites you to" in studies_page and study.name in studies_page
    invitation = Invitation.objects.get(study=study, user=outsider)
    # Nobody else answers someone's invitation (the owner included): not found.
    assert signed_in(owner).post(reverse("invitation-respond", args=[invitation.pk]),
                                 {"action": "accept"}).status_code == 404
    assert signed_in(outsider).post(reverse("invitation-respond", args=[invitation.pk]),
                                    {"action": "accept"}).status_code == 302
    assert Membership.objects.get(study=study, user=outsider).role == "annotator"
    assert not Invitation.objects.exists()


def test_a_declined_invitation_adds_nobody(owner, outsider, study):
    signed_in(owner).post(reverse("study-members", args=[study.pk]),
                          {"action": "set", "username": outsider.username, "role": "owner"})
    invitation = Invitation.objects.get(study=study, user=outsider)
    signed_in(outsider).post(reverse("invitation-respond", args=[invitation.pk]), {"action": "decline"})
    assert not Membership.objects.filter(study=study, user=outsider).exists() and not Invitation.objects.exists()


def test_assigning_work_names_members_only(owner, outsider, study):
    api = APIClient()
    api.force_authenticate(owner)
    answers = [api.post(f"/api/v1/studies/{study.pk}/assignments/", {"annotators": [name]}, format="json").json()
               for name in (outsider.username, "nobody-by-that-name")]
    assert [a["detail"] for a in answers] == [f"annotators: no member named {outsider.username!r}",
                                              "annotators: no member named 'nobody-by-that-name'"]


def test_an_owner_changes_a_role_and_revokes_a_member(owner, member, study):
    client = signed_in(owner)
    url = reverse("study-members", args=[study.pk])
    assert client.post(url, {"action": "set", "username": member.username, "role": "adjudicator"}).status_code == 302
    assert Membership.objects.get(study=study, user=member).role == "adjudicator"
    assert client.post(url, {"action": "remove", "username": member.username}).status_code == 302
    assert not Membership.objects.filter(study=study, user=member).exists()
    # Refusals of the members service stand under the form's field (annotation.middleware.refusals_into).
    refused = client.post(url, {"action": "remove", "username": owner.username})
    assert refused.status_code == 400 and Membership.objects.filter(study=study, user=owner).exists()
    refused = client.post(url, {"action": "remove", "username": "nobody-here"})
    assert refused.status_code == 400 and "nobody-here" in refused.content.decode()


@pytest.mark.parametrize("action", ["create", "set", "remove"])
def test_a_blind_annotator_may_not_manage_members_and_an_outsider_is_not_told_the_study_exists(
        member, outsider, study, action):
    assert study.blind and Membership.objects.get(study=study, user=member).role == "annotator"
    data = {"action": action, "username": "dave", "role": "owner", "handover": "password"}
    url = reverse("study-members", args=[study.pk])
    refused = signed_in(member).post(url, data)
    assert refused.status_code == 403 and "owner" in refused.content.decode()
    assert signed_in(outsider).post(url, data).status_code == 404
    assert not User.objects.filter(username="dave").exists()
    # The members page itself shows a blind annotator no forms.
    page = signed_in(member).get(url).content.decode()
    assert "Create an account" not in page and "Revoke" not in page


# --------------------------------------------------------------------------
# The profile page: the user's own API token


def test_a_user_makes_a_token_seen_once_that_works_on_the_api_and_revokes_it(member, study):
    client = signed_in(member)
    made = client.post(reverse("profile"), {"action": "token-create"})
    # Post/redirect/get: the key is shown on the GET after the POST, once; a reload neither shows it again nor
    # re-sends the POST that would replace it.
    assert made.status_code == 302 and made["Location"] == reverse("profile")
    shown = client.get(reverse("profile"))
    assert shown["Cache-Control"] == "no-store"
    key = Token.objects.get(user=member).key
    assert key in shown.content.decode()
    later = client.get(reverse("profile")).content.decode()
    assert key not in later and key[:4] in later
    assert Token.objects.get(user=member).key == key
    api = Client(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/v1/studies/").status_code == 200
    # Replacing stops the old key at once.
    client.post(reverse("profile"), {"action": "token-create"})
    assert api.get("/api/v1/studies/").status_code == 401
    assert client.post(reverse("profile"), {"action": "token-revoke"}).status_code == 302
    assert not Token.objects.filter(user=member).exists()


def test_the_profile_page_touches_only_the_signed_in_users_own_token(owner, member):
    Token.objects.create(user=owner)
    signed_in(member).post(reverse("profile"), {"action": "token-revoke"})
    assert Token.objects.filter(user=owner).exists()


def test_an_unknown_profile_action_is_a_styled_400_naming_the_field(member):
    response = signed_in(member).post(reverse("profile"), {"action": "sudo"})
    assert response.status_code == 400
    html = response.content.decode()
    assert 'class="topbar"' in html and "action: unknown value" in html


# --------------------------------------------------------------------------
# The upload form: every format of the CLI


def test_the_upload_form_offers_every_format_the_cli_imports():
    offered = [value for value, _label in ImportForm().fields["format"].choices]
    assert set(offered) == set(cli_formats())
    assert {"lm-eval", "inspect", "abstraction-outputs"} <= set(offered)


def test_every_registered_format_is_offered_under_the_label_it_was_registered_with():
    choices = dict(ImportForm().fields["format"].choices)
    for fmt in cli_formats():
        label = FORMAT_LABELS.get(fmt, "")
        assert label.strip() and label != fmt, f"format {fmt!r} was registered without a label"
        assert choices.get(fmt) == label, fmt
    # No label is left over from a format that is no longer registered.
    assert set(FORMAT_LABELS) == set(cli_formats())


def test_an_lm_eval_samples_file_uploads_with_its_results_json(owner, study, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = signed_in(owner).post(reverse("study-import", args=[study.pk]), {
            "format": "lm-eval",
            "file": SimpleUploadedFile(LM_EVAL_SAMPLES.name, LM_EVAL_SAMPLES.read_bytes()),
            "results": SimpleUploadedFile(LM_EVAL_RESULTS.name, LM_EVAL_RESULTS.read_bytes()),
        })
    assert response.status_code == 302, response.content.decode()[:2000]
    job = Job.objects.get(study=study, kind=Job.Kind.IMPORT)
    assert job.status == Job.Status.SUCCEEDED, job.error
    assert job.result["traces_created"] == 4
    assert Trace.objects.filter(study=study, regime__lm_eval_model="local-chat-completions").count() == 4


def test_an_lm_eval_upload_without_its_results_json_is_refused_on_the_page(owner, study):
    response = signed_in(owner).post(reverse("study-import", args=[study.pk]), {
        "format": "lm-eval", "file": SimpleUploadedFile(LM_EVAL_SAMPLES.name, LM_EVAL_SAMPLES.read_bytes())})
    assert response.status_code == 400
    html = response.content.decode()
    assert 'class="topbar"' in html  # the whole study page, not a bare fragment
    assert "results_&lt;time&gt;.json written beside it" in html
    assert not Job.objects.filter(study=study).exists()


def _zip_of(folder: Path, *, wrap: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, f"{wrap}/{path.relative_to(folder)}" if wrap else str(path.relative_to(folder)))
    return buffer.getvalue()


@pytest.mark.parametrize("wrap", ["gpt-4o-mini", ""])
def test_abstraction_outputs_upload_as_an_archive_of_the_folder(owner, study, django_capture_on_commit_callbacks,
                                                                wrap):
    with django_capture_on_commit_callbacks(execute=True):
        response = signed_in(owner).post(reverse("study-import", args=[study.pk]), {
            "format": "abstraction-outputs", "model": "gpt-4o-mini",
            "file": SimpleUploadedFile("outputs.zip", _zip_of(ABSTRACTION, wrap=wrap)),
        })
    assert response.status_code == 302, response.content.decode()[:2000]
    job = Job.objects.get(study=study, kind=Job.Kind.IMPORT)
    assert job.status == Job.Status.SUCCEEDED, (job.error, job.result)
    assert job.result["traces_created"] > 0
    assert Trace.objects.filter(study=study, model="gpt-4o-mini").count() == job.result["traces_created"]


def test_a_folder_format_needs_an_archive_and_a_model_name(owner, study):
    response = signed_in(owner).post(reverse("study-import", args=[study.pk]), {
        "format": "abstraction-outputs", "file": SimpleUploadedFile("output.json", b"[]")})
    assert response.status_code == 400
    html = response.content.decode()
    assert "upload a .zip or .tar.gz archive" in html and "name the model" in html


def test_an_archive_member_outside_the_folder_fails_the_job_with_its_name(owner, study,
                                                                         django_capture_on_commit_callbacks):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("../escape/output.json", "[]")
    with django_capture_on_commit_callbacks(execute=True):
        signed_in(owner).post(reverse("study-import", args=[study.pk]), {
            "format": "abstraction-outputs", "model": "m", "file": SimpleUploadedFile("bad.zip", buffer.getvalue())})
    job = Job.objects.get(study=study, kind=Job.Kind.IMPORT)
    assert job.status == Job.Status.FAILED
    assert "../escape/output.json: archive member outside" in job.result["rejected"][0]["reason"]


def test_an_empty_upload_returns_the_whole_page_with_the_error_in_place(owner, study):
    response = signed_in(owner).post(reverse("study-import", args=[study.pk]), {"format": "reasonaudit"})
    assert response.status_code == 400
    html = response.content.decode()
    assert 'class="topbar"' in html and "This field is required." in html


@pytest.mark.parametrize("who, status", [("member", 403), ("outsider", 404)])
def test_a_blind_annotator_and_an_outsider_may_not_upload(request, study, who, status):
    response = signed_in(request.getfixturevalue(who)).post(reverse("study-import", args=[study.pk]), {
        "format": "reasonaudit", "file": SimpleUploadedFile("x.jsonl", b"{}\n")})
    assert response.status_code == status
    assert not Job.objects.filter(study=study).exists()
