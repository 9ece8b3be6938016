"""The tier ladder and the section-6 report (spec 2 and 6)."""

import json

from faithfulness.core import tiers
from faithfulness.core.tiers import Evidence, Verifier

VALID = {"policy": "exclude", "svr": 0.8, "vsr": 0.5, "vsr_and_correct": 0.4, "n": 10, "unverifiable": 2}


def ev(**kw):
    base = {"model": "m", "traces": 10, "with_regime": 10, "accuracy": 0.6, "accuracy_n": 10}
    return Evidence(**(base | kw))


def test_no_steps_is_level_0_and_steps_without_validity_level_1():
    assert tiers.tier(ev()).level == 0
    t = tiers.tier(ev(with_steps=8))
    assert (t.level, t.label, t.badges) == (1, "L1", [])


def test_validity_makes_level_2_qualified_by_the_strongest_verifier():
    t = tiers.tier(ev(with_steps=8, verifiers=[Verifier("judge", "gpt (prompt v2)", VALID),
                                                Verifier("mechanistic", "mechanistic", VALID)]))
    assert (t.level, t.qualifier) == (2, "mechanistic")
    t = tiers.tier(ev(with_steps=8, verifiers=[Verifier("judge", "gpt (prompt v2)", VALID)]))
    assert t.qualifier == "judge" and "rubric-based (weaker)" in t.scope


def test_a_verifier_that_verified_nothing_does_not_reach_level_2():
    t = tiers.tier(ev(with_steps=8, verifiers=[Verifier("mechanistic", "mechanistic", VALID | {"n": 0})]))
    assert t.level == 1


def test_without_a_regime_on_every_trace_the_tier_is_incomplete():
    t = tiers.tier(ev(with_regime=7))
    assert not t.complete and t.label == "L0 (incomplete)" and "7 of 10" in t.scope


def test_add_on_badges():
    t = tiers.tier(ev(with_steps=8, ifr={"rows": [{"kind": "value_flip"}]}, anytime=[{"grid": "x"}],
                      halting={"instances": 1}))
    assert t.badges == ["IFR", "Anytime", "Halting"]


def test_the_template_names_every_missing_item_and_the_caveat():
    rep = tiers.template(ev(with_steps=8, regime={"temperature": [0.0], "model": ["smol"]}))
    missing = "\n".join(rep["missing"])
    for item in ("5. SVR / VSR", "6. IFR", "7. anytime profile", "7. false / late STOP", "2. seed",
                 "8. generator and seed", "4. trace length in tokens"):
        assert item in missing
    assert "2. temperature" not in missing
    caveat = rep["sections"][-1]["items"][0]["value"]
    assert caveat == tiers.CAVEAT
    md = tiers.to_markdown([rep], "S")
    assert "## m — L1" in md and "**missing** — no step labels" in md and tiers.CAVEAT in md
    assert json.loads(tiers.to_json([rep]))[0]["tier"]["label"] == "L1"


def test_the_caveat_goes_once_validity_is_measured():
    rep = tiers.template(ev(with_steps=8, verifiers=[Verifier("mechanistic", "mechanistic", VALID)]))
    assert rep["sections"][-1]["items"][0]["value"] == ""
    assert rep["headline"]["svr"] == 0.8


def test_latex_is_a_pasteable_table_with_escaped_text():
    rep = tiers.template(ev(model="gpt_4o & friends%", with_steps=8,
                            verifiers=[Verifier("mechanistic", "mechanistic", VALID)]))
    tex = tiers.to_latex([rep])
    assert tex.startswith("\\begin{table}") and "\\end{tabular}" in tex
    assert "gpt\\_4o \\& friends\\%" in tex
    assert "L2 (mechanistic) & 0.600 & 0.800 & 0.500 & -- & -- & --" in tex
    assert "% Missing items:" in tex
