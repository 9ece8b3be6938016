"""The instance-set accuracy distribution, against hand-computed values."""

from __future__ import annotations

import math

from fidelity.core.instance_sets import distribution


def test_three_templates_two_sets_by_hand():
    # set 0: a right, b right, c wrong -> 2/3; set 1: a right, b wrong, c wrong -> 1/3
    d = distribution([("a", 0, True), ("b", 0, True), ("c", 0, False),
                      ("a", 1, True), ("b", 1, False), ("c", 1, False)])
    assert [(s.index, s.correct, s.n) for s in d.sets] == [(0, 2, 3), (1, 1, 3)]
    assert math.isclose(d.mean, 0.5)
    assert math.isclose(d.sd, 1 / 6)  # |2/3 - 1/2| = |1/3 - 1/2| = 1/6, population sd
    assert d.per_template == {"a": (2, 2), "b": (1, 2), "c": (0, 2)}


def test_a_missing_answer_narrows_its_set_only():
    d = distribution([("a", 0, True), ("b", 0, False), ("a", 1, True)])
    assert [s.accuracy for s in d.sets] == [0.5, 1.0]
    assert math.isclose(d.mean, 0.75) and math.isclose(d.sd, 0.25)


def test_no_results_no_numbers():
    d = distribution([])
    assert d.sets == () and d.mean is None and d.sd is None and d.per_template == {}
