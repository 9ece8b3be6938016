import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring.core.labels import (
    complete_traces,
    determined_first_errors,
    final_labels,
    human_consensus,
    normalize_refs,
    normalize_refs_many,
    normalize_verdict,
    verdict_codes,
)

COLS = ["trace_id", "step", "annotator", "verdict", "skeleton_refs"]


def consensus_of(rows):
    return human_consensus(pd.DataFrame(rows, columns=COLS))


def one(rows):
    c = consensus_of(rows)
    assert len(c) == 1
    return c.iloc[0]


def test_normalize_verdict():
    assert normalize_verdict(" Valid") == "valid"
    assert normalize_verdict("INVALID") == "invalid"
    for bad in ("ok", None, 1):
        with pytest.raises(ValueError, match="^verdict:"):
            normalize_verdict(bad)
    assert list(verdict_codes(pd.Series(["valid", "Invalid ", None, "neutral"]))) == [0, 1, -1, 2]
    with pytest.raises(ValueError, match="^verdict:"):
        verdict_codes(pd.Series(["valid", "wrong"]))


def test_normalize_refs():
    assert normalize_refs([3, 1, 1, 2.0, 2.5, "x"]) == (1, 2, 3)
    assert normalize_refs(None) == () and normalize_refs(float("nan")) == ()
    assert normalize_refs(4) == (4,)
    assert list(normalize_refs_many([[3, 1, 1], None, (2.5, 4), [], np.array([2, 1])])) == [
        (1, 3),
        (),
        (4,),
        (),
        (1, 2),
    ]


def test_majority_wins():
    # 2 valid vs 1 invalid -> valid
    r = one([("t", 1, "a", "valid", [1]), ("t", 1, "b", "valid", [1]), ("t", 1, "c", "invalid", [])])
    assert (r.verdict, r.n_annotators, r.n_agree) == ("valid", 3, 2)


@pytest.mark.parametrize(
    "verdicts, expected",
    [
        (["valid", "invalid"], "invalid"),
        (["valid", "neutral"], "neutral"),
        (["neutral", "invalid"], "invalid"),
        (["valid", "neutral", "invalid"], "invalid"),  # 1/1/1
        (["valid", "valid", "invalid", "invalid"], "invalid"),  # 2/2
        (["valid", "valid", "neutral", "neutral", "invalid"], "neutral"),  # 2/2/1: tie among the top two only
    ],
)
def test_ties_go_to_the_more_severe_verdict(verdicts, expected):
    rows = [("t", 1, f"ann{i}", v, []) for i, v in enumerate(verdicts)]
    assert one(rows).verdict == expected


def test_refs_cited_by_at_least_half_of_the_agreeing_annotators():
    # 3 annotators agree on valid: a [1,2], b [2,3], c [2]; d (invalid) cites 4.
    # cites: 1->1, 2->3, 3->1; keep 2*cites >= 3: only 2.  d's ref 4 is ignored.
    r = one(
        [
            ("t", 1, "a", "valid", [1, 2]),
            ("t", 1, "b", "valid", [2, 3]),
            ("t", 1, "c", "valid", [2]),
            ("t", 1, "d", "invalid", [4]),
        ]
    )
    assert r.verdict == "valid" and r.skeleton_refs == (2,)
    # 2 agree: a [1,2], b [2,3]: every ref has 2*1 >= 2 -> (1, 2, 3)
    r = one([("t", 1, "a", "valid", [1, 2]), ("t", 1, "b", "valid", [3, 2])])
    assert r.skeleton_refs == (1, 2, 3)
    # an annotator citing a step twice counts once: a [5,5], b, c [] -> 2*1 < 3
    r = one([("t", 1, "a", "valid", [5, 5]), ("t", 1, "b", "valid", []), ("t", 1, "c", "valid", None)])
    assert r.skeleton_refs == ()


def test_consensus_ignores_missing_verdicts_and_sorts():
    c = consensus_of(
        [
            ("u", 2, "a", "valid", [1]),
            ("t", 1, "a", None, [1]),
            ("t", 1, "b", "neutral", []),
            ("u", 1, "a", "invalid", []),
        ]
    )
    assert list(zip(c.trace_id, c.step, c.verdict, strict=True)) == [
        ("t", 1, "neutral"),
        ("u", 1, "invalid"),
        ("u", 2, "valid"),
    ]
    assert c.n_annotators.tolist() == [1, 1, 1]


def test_consensus_rejects_double_labels_and_handles_empty():
    with pytest.raises(ValueError, match="twice"):
        consensus_of([("t", 1, "a", "valid", []), ("t", 1, "a", "invalid", [])])
    empty = consensus_of([])
    assert len(empty) == 0 and list(empty.columns) == [
        "trace_id",
        "step",
        "verdict",
        "skeleton_refs",
        "n_annotators",
        "n_agree",
    ]


@settings(max_examples=60, deadline=None)
@given(
    labels=st.lists(
        st.tuples(
            st.sampled_from(["t1", "t2"]),
            st.integers(1, 3),
            st.sampled_from(["ann0", "ann1", "ann2", "ann3"]),
            st.sampled_from(["valid", "invalid", "neutral"]),
            st.lists(st.integers(1, 4), max_size=3),
        ),
        max_size=25,
        unique_by=lambda r: (r[0], r[1], r[2]),
    ),
    data=st.data(),
)
def test_consensus_is_invariant_to_annotator_and_row_order(labels, data):
    base = consensus_of(labels)
    # permute the rows and rename annotators with a random bijection
    perm = data.draw(st.permutations(range(len(labels))))
    names = ["ann0", "ann1", "ann2", "ann3"]
    renamed = dict(zip(names, data.draw(st.permutations(names)), strict=True))
    shuffled = [(t, s, renamed[a], v, list(reversed(r))) for (t, s, a, v, r) in (labels[i] for i in perm)]
    other = consensus_of(shuffled)
    pd.testing.assert_frame_equal(base.reset_index(drop=True), other.reset_index(drop=True))


def test_final_labels_precedence_per_step():
    cols = ["trace_id", "step", "verdict", "skeleton_refs"]
    adj = pd.DataFrame([("t", 2, "valid", [2])], columns=cols)
    human = pd.DataFrame([("t", 1, "neutral", []), ("t", 2, "invalid", [])], columns=cols)
    judge = pd.DataFrame(
        [("t", 1, "valid", [1]), ("t", 2, "invalid", []), ("t", 3, "Invalid", [3.0]), ("t", 4, None, [])],
        columns=cols,
    )
    f = final_labels(adj, human, judge)
    assert f.step.tolist() == [1, 2, 3]  # judge's null verdict on step 4 is no label
    assert f.verdict.tolist() == ["neutral", "valid", "invalid"]
    assert f.origin.tolist() == ["human", "adjudicated", "judge"]
    assert f.skeleton_refs.tolist() == [(), (2,), (3,)]
    assert final_labels(None, None, judge.iloc[:1]).origin.tolist() == ["judge"]
    assert len(final_labels(None, None, None)) == 0
    with pytest.raises(ValueError, match="twice"):
        final_labels(None, None, pd.concat([judge, judge]))


def test_complete_traces():
    traces = pd.DataFrame({"trace_id": ["a", "b", "c", "d"], "n_steps": [2, 2, 0, 1]})
    labels = pd.DataFrame(
        {
            "trace_id": ["a", "a", "b", "b", "b", "d", "x"],
            "step": [1, 2, 1, 3, 1, 1, 1],  # b: step 3 out of range, step 1 twice
            "verdict": ["valid", "invalid", "valid", "valid", "valid", None, "valid"],
        }
    )
    c = complete_traces(traces, labels)
    # a: 1,2 labelled; b: step 2 missing; c: N = 0 vacuously complete; d: null verdict
    assert c.to_dict() == {"a": True, "b": False, "c": True, "d": False}


def test_a_first_error_is_determined_by_the_labels_up_to_it():
    """ProcessBench's reference: labelled up to the earliest error, nothing after. Not complete, yet its first
    error is determined; "no error" needs every step; a gap before the error leaves it undetermined."""
    traces = pd.DataFrame({"trace_id": ["pb", "gap", "clean", "half", "late", "empty"], "n_steps": [5, 4, 3, 3, 3, 0]})
    labels = pd.DataFrame({
        "trace_id": ["pb", "pb", "gap", "gap", "clean", "clean", "clean", "half", "late", "late", "late", "x"],
        "step": [1, 2, 1, 3, 1, 2, 3, 1, 1, 2, 3, 1],
        "verdict": ["valid", "invalid", "valid", "invalid", "valid", "neutral", "valid", "valid", "valid", "valid",
                    "invalid", "invalid"],
    })
    d = determined_first_errors(traces, labels).set_index("trace_id")
    assert d["determined"].to_dict() == {"pb": True, "gap": False, "clean": True, "half": False, "late": True,
                                         "empty": True}
    assert d["first_error"].fillna(0).astype(int).to_dict() == {"pb": 2, "gap": 3, "clean": 0, "half": 0, "late": 3,
                                                                "empty": 0}
    assert not complete_traces(traces, labels)["pb"]  # its scores still need every step
