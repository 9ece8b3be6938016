"""reasonlib.calc_chain: replaying a calculator chain with changed numbers."""

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from reasonlib.calc_chain import chain_from_checks, parse_chain, replay

# GSM8K test item 0 (Janet's ducks).
JANET = ("Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\n"
         "She makes 9 * 2 = $<<9*2=18>>18 every day at the farmer's market.\n#### 18")


def test_it_reads_the_annotations_in_order():
    chain = parse_chain(JANET)
    assert [(s.expr, s.result, s.operands) for s in chain] == [
        ("16-3-4", 9, (16, 3, 4)), ("9*2", 18, (9, 2))]
    assert JANET[chain[0].span[0]:chain[0].span[1]] == "<<16-3-4=9>>"


def test_an_unchanged_chain_replays_to_its_own_answer():
    r = replay(parse_chain(JANET), {}, final=Fraction(18))
    assert r.traced and r.answer == 18 and r.results == (9, 18)


def test_a_changed_input_propagates_to_the_answer():
    r = replay(parse_chain(JANET), {Fraction(16): Fraction(20)}, final=Fraction(18))
    assert r.traced and r.answer == 26 and r.results == (13, 26) and r.used == {16}


def test_a_changed_derived_value_replays_from_the_next_step():
    # value_flip: step 0 derived 9; the edit says 10.
    r = replay(parse_chain(JANET), {Fraction(9): Fraction(10)}, start=1)
    assert r.traced and r.answer == 20 and r.results == (9, 20)


def test_a_value_absent_from_the_chain_is_not_traced():
    r = replay(parse_chain(JANET), {Fraction(7): Fraction(8)}, final=Fraction(18))
    assert not r.traced and r.answer is None and "7" in r.reason


def test_a_final_answer_the_chain_does_not_produce_is_not_traced():
    r = replay(parse_chain(JANET), {Fraction(16): Fraction(20)}, final=Fraction(99))
    assert not r.traced and r.answer is None and "99" in r.reason


def test_exact_rationals_and_percentages():
    sol = "Half: <<50%*30=15>>15. Each: <<15/4=3.75>>3.75\n#### 3.75"
    r = replay(parse_chain(sol), {Fraction(50): Fraction(60)}, final=Fraction(15, 4))
    assert r.traced and r.answer == Fraction(9, 2)
    r = replay(parse_chain(sol), {Fraction(30): Fraction(31)}, final=Fraction(15, 4))
    assert r.answer == Fraction(31, 8)


def test_division_by_zero_after_the_change_is_reported():
    sol = "<<10-4=6>>6 then <<12/6=2>>2\n#### 2"
    r = replay(parse_chain(sol), {Fraction(4): Fraction(10)}, final=Fraction(2))
    assert not r.traced and r.answer is None and "undefined" in r.reason


def test_skeleton_checks_form_a_chain():
    chain = chain_from_checks(["16-3-4=9", None, "<<9*2=18>>"])
    assert [s.result for s in chain] == [9, 18]
    assert replay(chain, {Fraction(3): Fraction(1)}).answer == 22


def test_unreadable_annotations_are_left_out():
    chain = parse_chain("<<3*A=6>>6 and <<2+2=4>>4")
    assert [(s.index, s.expr) for s in chain] == [(0, "2+2")]


@given(a=st.integers(1, 10_000), b=st.integers(1, 10_000), c=st.integers(1, 50), new=st.integers(1, 10_000))
def test_replay_agrees_with_direct_arithmetic(a, b, c, new):
    # (a + b) * c with a changed: the replay equals the arithmetic done directly.
    sol = f"<<{a}+{b}={a + b}>>{a + b} <<{a + b}*{c}={(a + b) * c}>>"
    r = replay(parse_chain(sol), {Fraction(a): Fraction(new)})
    if a in (b, c, a + b) or a == (a + b) * c:
        return  # the value also stands for another number: matching by value changes both
    assert r.traced and r.answer == (new + b) * c
