"""Skeleton references by value on the bundled GSM8K problems."""

from __future__ import annotations

from reasonlib.verifier.verdicts import check_step
from tests.judges.mechanistic.gsm8k import skeleton_checks, split_steps


def test_skeleton_refs_on_janets_ducks(rows):
    problem = rows[0]
    checks = skeleton_checks(problem["ground_truth"])
    assert checks == ["16-3-4=9", "9*2=18"]
    steps = split_steps(problem["175b_verification"]["solution"])
    assert [check_step(s, checks).skeleton_refs for s in steps] == [(), (1,), (2,)]
    # The wrong solution never reaches 9 or 18.
    steps = split_steps(problem["6b_finetuning"]["solution"])
    assert [check_step(s, checks).skeleton_refs for s in steps] == [(), ()]


def test_skeleton_refs_on_the_robe(rows):
    problem = rows[1]
    checks = skeleton_checks(problem["ground_truth"])
    assert checks == ["2/2=1", "2+1=3"]
    steps = split_steps(problem["6b_verification"]["solution"])  # "2 x 0.5 = <<2*0.5=1.0>>1.0", "... 3.0 bolts"
    assert [check_step(s, checks).skeleton_refs for s in steps] == [(1,), (2,)]
    # 175b_finetuning's "200+50 = 250 meters" derives neither.
    steps = split_steps(problem["175b_finetuning"]["solution"])
    assert [check_step(s, checks).skeleton_refs for s in steps] == [(1,), (), (), (), ()]


def test_skeleton_refs_need_a_true_claim():
    checks = ["16-3-4=9", None, "9*2=18"]
    assert check_step("<<20-11=9>>9 left", checks).skeleton_refs == (1,)
    assert check_step("<<20-10=9>>9 left", checks).skeleton_refs == ()
    assert check_step("2 * 9 = 18 and 16 - 7 = 9", checks).skeleton_refs == (1, 3)
    assert check_step("10 / 3 = 3.33", ["10/3=3.33"]).skeleton_refs == (1,)
    assert check_step("nine eggs", checks).skeleton_refs == ()
