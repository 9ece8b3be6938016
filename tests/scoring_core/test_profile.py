import json

import pytest

from reasonlib.refusals import Invalid
from scoring.core.profile import ABLATIONS, DEFAULT, Profile, ablation


def test_defaults_are_the_published_values():
    p = Profile()
    assert (p.alpha, p.beta, p.eta, p.omega, p.c_haz) == (4.0, 1.0, 1.5, 5.0, 5.0)
    assert (p.neutral_as, p.prm_hazard, p.w, p.tau, p.pinned_hazard) == (1.0, True, 0.7, 3.0, None)
    assert DEFAULT == p


def test_round_trip_through_json():
    p = Profile(alpha=3, omega=2.5, prm_hazard=False, pinned_hazard=[0.1, 0.2])
    d = json.loads(json.dumps(p.to_dict()))
    assert d["pinned_hazard"] == [0.1, 0.2]
    assert Profile.from_dict(d) == p
    assert isinstance(p.alpha, float) and p.pinned_hazard == (0.1, 0.2)
    assert hash(p) == hash(Profile.from_dict(d))


def test_from_dict_defaults_for_missing_keys():
    assert Profile.from_dict({}) == DEFAULT
    assert Profile.from_dict(None) == DEFAULT
    assert Profile.from_dict({"w": 0.5}).w == 0.5


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"alpha": -1}, "alpha"),
        ({"beta": -0.1}, "beta"),
        ({"eta": -2}, "eta"),
        ({"omega": -5}, "omega"),
        ({"c_haz": -1}, "c_haz"),
        ({"c_haz": 10.5}, "c_haz"),
        ({"alpha": 11}, "alpha"),
        ({"alpha": float("nan")}, "alpha"),
        ({"beta": "1"}, "beta"),
        ({"beta": True}, "beta"),
        ({"w": 1.5}, "w"),
        ({"w": -0.01}, "w"),
        ({"neutral_as": 0.5}, "neutral_as"),
        ({"neutral_as": 2}, "neutral_as"),
        ({"prm_hazard": "yes"}, "prm_hazard"),
        ({"prm_hazard": 1}, "prm_hazard"),
        ({"tau": -1}, "tau"),
        ({"tau": 11}, "tau"),
        ({"pinned_hazard": [0.1, 1.5]}, "pinned_hazard: h_2"),
        ({"pinned_hazard": [-0.1]}, "pinned_hazard: h_1"),
        ({"pinned_hazard": []}, "pinned_hazard"),
        ({"pinned_hazard": "0.1"}, "pinned_hazard"),
        ({"gamma": 1}, "gamma"),
    ],
)
def test_bad_values_name_the_field(bad, field):
    with pytest.raises(Invalid) as exc:  # the refusal family's bad input (a ValueError too)
        Profile.from_dict(bad)
    assert str(exc.value).startswith(field + ":") and exc.value.field == field.split(":")[0]


def test_neutral_as_accepts_0_and_1():
    assert Profile(neutral_as=0).neutral_as == 0.0
    assert Profile(neutral_as=1).neutral_as == 1.0


def test_ablations():
    assert ABLATIONS == {
        "no-format": {"beta": 0.0},
        "no-hazard": {"omega": 0.0},
        "no-penalties": {"beta": 0.0, "omega": 0.0},
    }
    assert ablation("no-format").beta == 0 and ablation("no-format").omega == 5
    assert ablation("no-hazard").omega == 0 and ablation("no-hazard").beta == 1
    nop = ablation("no-penalties", Profile(w=0.5))
    assert (nop.beta, nop.omega, nop.w) == (0, 0, 0.5)
    with pytest.raises(ValueError, match="ablation"):
        ablation("nope")


def test_replace_validates():
    with pytest.raises(ValueError, match="^w:"):
        DEFAULT.replace(w=2)
    with pytest.raises(ValueError, match="^zeta:"):
        DEFAULT.replace(zeta=2)
