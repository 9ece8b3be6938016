"""Import of the published outputs (format abstraction-outputs): the sample of the GPT-4o-mini run
reproduces the per-sub-dataset accuracies of its llm_judge verdicts; bad input names path and index."""

from __future__ import annotations

import io
import json
import shutil

import pytest
from django.core.management import call_command

from abstraction import services
from abstraction.importing import import_outputs
from abstraction.models import Item, Result
from annotation.models import Trace
from tests.data_paths import ABSTRACTION_SAMPLE

pytestmark = pytest.mark.django_db

EXPECTED = {"fixed_len_chat_bit_raw_dataset": 0.990, "fixed_len_chat_bit_dataset": 0.156,
            "fixed_len_chat_bit_num_dataset": 0.177, "fixed_len_chat_bit_op_dataset": 0.719}


def test_the_sample_import_reproduces_the_published_per_sub_dataset_accuracies(study):
    report = import_outputs(study, ABSTRACTION_SAMPLE, model="gpt-4o-mini")
    assert report.committed and not report.rejected and report.read == 384
    assert Item.objects.filter(benchmark__study=study).count() == 384
    assert Trace.objects.filter(study=study, model="gpt-4o-mini").count() == 384
    (row,) = services.table(study, n_resamples=200)
    assert row.model == "gpt-4o-mini (DP)" and row.checker == "imported"
    for sub, value in EXPECTED.items():
        assert round(row.result.sub_datasets[sub], 3) == value
    s = row.result.stats
    assert s["EC"] == pytest.approx(95 / 96) and s["SR"] == pytest.approx((15 + 17 + 69) / 288)
    assert s["delta_all"] == pytest.approx((95 - 15) / 96)
    assert s["delta_num"] == pytest.approx((95 - 17) / 96)
    assert s["delta_op"] == pytest.approx((95 - 69) / 96)
    lo, hi = row.result.intervals["delta_all"]
    assert lo <= s["delta_all"] <= hi


def test_the_file_verdict_is_kept_beside_the_deterministic_one(study):
    import_outputs(study, ABSTRACTION_SAMPLE, model="gpt-4o-mini")
    results = Result.objects.filter(item__benchmark__study=study)
    assert all(r.imported_correct == r.correct for r in results)
    assert results.filter(det_correct__isnull=False).count() == 384
    r = results.get(item__sub_dataset="fixed_len_chat_bit_op_dataset", item__instance=0)
    assert r.item.question == "00100111 ldJSYfqSJT 01100111 =" and r.item.answer == "00100111"
    assert r.trace.raw == "Answer: The answer is 00100111." and r.trace.answer_correct is True


def test_a_second_import_changes_nothing(study):
    import_outputs(study, ABSTRACTION_SAMPLE, model="gpt-4o-mini")
    again = import_outputs(study, ABSTRACTION_SAMPLE, model="gpt-4o-mini")
    assert again.committed and again.traces_created == 0
    assert Result.objects.filter(item__benchmark__study=study).count() == 384


def _copy(tmp_path):
    root = tmp_path / "gpt-4o-mini"
    shutil.copytree(ABSTRACTION_SAMPLE, root)
    return root


def test_it_rejects_a_record_without_answer_naming_path_and_index(study, tmp_path):
    root = _copy(tmp_path)
    path = root / "l4_chat" / "fixed_len_chat_bit_num_dataset" / "output.json"
    records = json.loads(path.read_text())
    del records[7]["answer"]
    path.write_text(json.dumps(records))
    report = import_outputs(study, root, model="m")
    assert not report.committed
    assert [r["reason"] for r in report.rejected] == [
        'l4_chat/fixed_len_chat_bit_num_dataset/output.json[7]: missing "answer"']
    assert not Item.objects.filter(benchmark__study=study).exists()
    assert not Trace.objects.filter(study=study).exists()
    kept = import_outputs(study, root, model="m", skip_invalid=True)
    assert kept.committed and Result.objects.filter(item__benchmark__study=study).count() == 383


def test_it_rejects_an_unknown_level_and_a_missing_sub_dataset(study, tmp_path):
    root = _copy(tmp_path)
    (root / "l9_chat").mkdir()
    (root / "l4_chat" / "var_len_chat_set_dataset").mkdir()
    (root / "l1_chat" / "fixed_len_chat_bit_dataset").mkdir()
    report = import_outputs(study, root, model="m")
    reasons = sorted(r["reason"] for r in report.rejected)
    assert reasons == [
        "l1_chat/fixed_len_chat_bit_dataset: sub-dataset 'fixed_len_chat_bit_dataset' belongs to l4_chat, not l1_chat",
        "l4_chat/var_len_chat_set_dataset: missing sub-dataset outputs (no output.json)",
        "l9_chat: unknown level folder (expected one of l0_chat, l1_chat, l2_chat, l3_chat, l4_chat, l6_chat)",
    ]
    assert not report.committed and not Result.objects.exists()


def test_import_traces_takes_the_format_and_prints_the_rejections(tmp_path):
    root = _copy(tmp_path)
    (root / "l9_chat").mkdir()
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("import_traces", str(root), format="abstraction-outputs", study="cli", model="gpt-4o-mini",
                     stdout=out)
    assert exit_.value.code == 1
    assert "l9_chat: unknown level folder" in out.getvalue() and "nothing was imported" in out.getvalue()
    shutil.rmtree(root / "l9_chat")
    out = io.StringIO()
    call_command("import_traces", str(root), format="abstraction-outputs", study="cli", model="gpt-4o-mini",
                 stdout=out)
    assert "read 384 records" in out.getvalue()
    assert Result.objects.filter(item__benchmark__study__name="cli").count() == 384


def test_a_tree_with_every_published_folder_imports_whole(study, tmp_path):
    # Issue 23: all 82 folders of the published layout are accepted (one
    # record each here; the complete published outputs are measured in
    # docs/abstraction.md).
    from tests.data_paths import ABSTRACTION_LAYOUT

    layout = [line for line in ABSTRACTION_LAYOUT.read_text(encoding="utf-8").splitlines() if line.strip()]
    for rel in layout:
        folder = tmp_path / "tree" / rel
        folder.mkdir(parents=True)
        record = {"prompt": [{"role": "user", "content": "1 + 1 ="}], "raw_output": "2", "output": "2",
                  "answer": "2", "llm_judge": True}
        (folder / "output.json").write_text(json.dumps([record]), encoding="utf-8")
    report = import_outputs(study, tmp_path / "tree", model="m")
    assert report.rejected == [] and report.committed and report.read == 82
    assert Item.objects.filter(benchmark__study=study).values("sub_dataset").distinct().count() == 82
