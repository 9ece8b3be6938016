"""Agreement of step-function tags in a study: the annotators page's section and the tag-agreement /
tag-confusion exports are the same rows (agreement.tags), and neither reaches a blinded annotator."""

from __future__ import annotations

import csv
import io

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from agreement.tags import tag_report
from annotation import services
from annotation.models import Membership, Step, StepTag, Study, Trace
from annotation.review.tags import do_save_tags
from judges.models import JudgeConfig
from scoring import exports
from tests.review.conftest import seed

pytestmark = pytest.mark.django_db


@pytest.fixture
def tagged(study, do_import, member, django_user_model):
    seed(do_import, n_problems=1, models=("m1",), n_steps=4)
    bob = django_user_model.objects.create_user("bob", password="pw")
    services.do_add_member(study, "bob", Membership.Role.ANNOTATOR)
    trace = Trace.objects.get()
    do_save_tags(trace, member, version=0, tags={1: ["problem_setup"], 2: ["plan_generation"],
                                                 3: ["active_computation"], 4: ["final_answer_emission"]})
    do_save_tags(trace, bob, version=0, tags={1: ["problem_setup"], 2: ["fact_retrieval"],
                                              3: ["active_computation", "self_checking"]})
    judge = JudgeConfig.objects.create(study=study, name="tagger", provider="fake")
    now = timezone.now()
    for index, tag in ((1, "problem_setup"), (2, "plan_generation")):
        StepTag.objects.create(step=Step.objects.get(trace=trace, index=index), kind="judge", judge=judge, tag=tag,
                               created_at=now)
    StepTag.objects.create(step=Step.objects.get(trace=trace, index=2), kind="imported", origin="thought-anchors",
                           tag="plan_generation", created_at=now)
    return study


def csv_rows(what: str, tmp_path) -> list[dict]:
    out = tmp_path / f"{what}.csv"
    call_command("export", study="Study A", what=what, format="csv", out=str(out), stderr=io.StringIO())
    return list(csv.DictReader(out.open()))


def test_the_report_compares_every_pair_on_the_steps_both_tagged(tagged):
    report = tag_report(tagged)
    assert [s["source"] for s in report["sources"]] == [
        "annotator:alice", "annotator:bob", "imported:thought-anchors", "judge:tagger"]
    assert report["pairs"] == 6 and len(report["kappa"]) == 6 * 8
    row = next(r for r in report["kappa"] if (r["source_a"], r["source_b"], r["category"]) == (
        "annotator:alice", "annotator:bob", "plan_generation"))
    # alice and bob both tagged steps 1-3; plan: alice on 2 only: n11=0 n10=1 n01=0 n00=2;
    # p_o = 2/3, p_a = 1/3, p_b = 0, p_e = 2/3: kappa = 0
    assert (row["steps"], row["both"], row["a_only"], row["neither"]) == (3, 0, 1, 2) and row["kappa"] == pytest.approx(0)
    # the confusion of alice and bob: steps 1 and 2 (step 3: bob gave two tags; step 4: bob gave none)
    assert [(r["tag_a"], r["tag_b"], r["steps"]) for r in report["confusion"]
            if (r["source_a"], r["source_b"]) == ("annotator:alice", "annotator:bob")] == [
        ("problem_setup", "problem_setup", 1), ("plan_generation", "fact_retrieval", 1)]


def test_the_page_shows_the_rows_the_exports_download(client, owner, tagged, tmp_path):
    client.force_login(owner)
    page = client.get(reverse("scoring-annotators", args=[tagged.pk])).content.decode()
    kappa = csv_rows("tag-agreement", tmp_path)
    confusion = csv_rows("tag-confusion", tmp_path)
    report = tag_report(tagged)
    assert len(kappa) == len(report["kappa"]) and len(confusion) == len(report["confusion"])
    body = page.split('id="tag-kappa"')[1].split("</table>")[0]
    assert body.count("<tr>") - 1 == len(kappa)  # the header's row, then one per exported row
    for r in kappa:
        assert f"<td>{r['source_a']}</td><td>{r['source_b']}</td><td>{r['category']}</td><td class=\"num\">{r['steps']}</td>" in body
    body = page.split('id="tag-confusion"')[1].split("</table>")[0]
    for r in confusion:
        assert f"<td>{r['tag_a']}</td><td>{r['tag_b']}</td><td class=\"num\">{r['steps']}</td>" in body


def test_a_blinded_annotator_gets_neither_the_page_nor_the_exports(client, member, tagged):
    Study.objects.filter(pk=tagged.pk).update(blind=True)
    client.force_login(member)
    assert client.get(reverse("scoring-annotators", args=[tagged.pk])).status_code == 403
    m = Membership.objects.select_related("study").get(study=tagged, user=member)
    for what in ("tag-agreement", "tag-confusion"):
        with pytest.raises(exports.ExportForbidden):
            exports.build(exports.ExportRequest(study=m.study, what=what, membership=m))
