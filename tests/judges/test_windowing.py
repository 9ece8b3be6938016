import pytest

from judges.windowing import Window, merge_window_labels, plan_windows, step_tokens


def test_everything_that_fits_is_one_window():
    assert plan_windows([10, 10, 10], budget=30, overlap=1) == [Window(1, 3, 1, 3)]


def test_windows_overlap_and_cores_partition_the_steps():
    # 10 steps of 10 tokens, 40 per window (4 steps), 2 shared:
    # spans 1-4, 3-6, 5-8, 7-10; shared 3-4 splits at (3+4)//2 = 3 -> cores 1-3, 4-5, 6-7, 8-10
    w = plan_windows([10] * 10, budget=40, overlap=2)
    assert [(x.start, x.end) for x in w] == [(1, 4), (3, 6), (5, 8), (7, 10)]
    assert [(x.core_start, x.core_end) for x in w] == [(1, 3), (4, 5), (6, 7), (8, 10)]
    cores = [s for x in w for s in range(x.core_start, x.core_end + 1)]
    assert cores == list(range(1, 11))
    assert all(sum([10] * x.n_steps) <= 40 for x in w)


def test_a_step_dearer_than_the_budget_gets_its_own_window_and_windows_advance():
    w = plan_windows([5, 100, 5], budget=20, overlap=3)
    assert [(x.start, x.end) for x in w] == [(1, 1), (2, 2), (3, 3)]
    assert [(x.core_start, x.core_end) for x in w] == [(1, 1), (2, 2), (3, 3)]


def test_overlap_larger_than_a_window_still_advances_one_step():
    w = plan_windows([10] * 4, budget=20, overlap=5)
    assert [(x.start, x.end) for x in w] == [(1, 2), (2, 3), (3, 4)]
    assert [s for x in w for s in range(x.core_start, x.core_end + 1)] == [1, 2, 3, 4]


def test_merge_keeps_each_steps_label_from_its_core_window():
    w = plan_windows([10] * 6, budget=40, overlap=2)  # spans 1-4, 3-6; cores 1-3, 4-6
    first = [(s, f"a{s}") for s in range(1, 5)]
    second = [(s, f"b{s}") for s in range(3, 7)]
    assert merge_window_labels(w, [first, second]) == ["a1", "a2", "a3", "b4", "b5", "b6"]
    # the same answers in any order merge to the same labels
    assert merge_window_labels(w, [first[::-1], second[::-1]]) == ["a1", "a2", "a3", "b4", "b5", "b6"]


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="budget"):
        plan_windows([1], budget=0)
    with pytest.raises(ValueError, match="overlap"):
        plan_windows([1], budget=5, overlap=-1)
    assert plan_windows([], budget=5) == []


def test_step_tokens_counts_text_and_overhead():
    assert step_tokens("") == 4 and step_tokens("abcd") == 5 and step_tokens("abcde") == 6


def test_max_steps_bounds_a_window():
    w = plan_windows([1] * 7, budget=100, overlap=1, max_steps=3)
    assert [(x.start, x.end) for x in w] == [(1, 3), (3, 5), (5, 7)]
    assert [s for x in w for s in range(x.core_start, x.core_end + 1)] == list(range(1, 8))
