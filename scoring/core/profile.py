"""Scoring profiles: the named, versioned parameter sets of the scoring spec.

A :class:`Profile` is immutable and validated on construction, so every
profile that exists is usable.  Name and version of a profile belong to the
code that stores it; this module only knows the parameters.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import sys
from dataclasses import dataclass, fields
from typing import Any

from reasonlib.refusals import FieldInvalid

__all__ = ["ABLATIONS", "CHANNELS", "DEFAULT", "Profile", "ablation"]

#: What ``Profile.channels`` may name (the same tuple as ``thought.CHANNELS``,
#: kept here so profiles load without pandas).
CHANNELS: tuple[str, str, str] = ("answer", "thought", "both")

# Non-negative penalty / weight parameters (finite floats >= 0).
_NON_NEGATIVE = ("alpha", "beta", "eta", "omega", "c_haz")
# Caps of penalties: at most 10, the top of the score scale.
_CAPS = ("alpha", "c_haz")


def _is_bool(value: Any) -> bool:
    """True or False, Python's or NumPy's (``numpy.bool_`` is no ``bool``). A value can be NumPy's only once
    NumPy is loaded, so this module does not load it: scoring.models imports it in every process, a command's
    start-up among them (docs/benchmarks.md, "Import")."""
    np = sys.modules.get("numpy")
    return isinstance(value, bool) or (np is not None and isinstance(value, np.bool_))


def _as_float(name: str, value: Any, what: str = "") -> float:
    """``value`` as a finite float, else a refusal about the parameter ``name`` (``what``: which of its
    values, for a list)."""
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise FieldInvalid(name, f"{what}expected a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise FieldInvalid(name, f"{what}must be finite, got {value!r}")
    return value


@dataclass(frozen=True)
class Profile:
    """Parameters of the per-trace scores (defaults = published values).

    alpha        cap of the format penalty P_fmt
    beta         weight of the format penalty (0 switches P_fmt off)
    eta          extra factor for traces shorter than the skeleton (N < L)
    omega        weight of the hazard penalty (0 switches P_haz off)
    c_haz        cap of the hazard penalty P_haz
    neutral_as   1: neutral steps count as valid in S_PRM; 0: as failures
    prm_hazard   use S_PRM_haz (not S_PRM) as process score when L = 0
    w            weight of the process score in the holistic score
    tau          lucky guess: correct answer with process score <= tau
    pinned_hazard  fixed h_t vector (h_1, h_2, ...) replacing the estimate
    channels     which steps a score reads: "answer" (the answer channel, as
                 before the thinking channel existed), "thought" or "both"
                 (reading order: thought steps first)
    """

    alpha: float = 4.0
    beta: float = 1.0
    eta: float = 1.5
    omega: float = 5.0
    c_haz: float = 5.0
    neutral_as: float = 1.0
    prm_hazard: bool = True
    w: float = 0.7
    tau: float = 3.0
    pinned_hazard: tuple[float, ...] | None = None
    channels: str = "answer"

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        for name in _NON_NEGATIVE:
            v = _as_float(name, getattr(self, name))
            if v < 0:
                raise FieldInvalid(name, f"must be >= 0, got {v!r}")
            if name in _CAPS and v > 10:
                # caps are points on the 0..10 scale of the scores
                raise FieldInvalid(name, f"must be within [0, 10], got {v!r}")
            set_(self, name, v)
        na = _as_float("neutral_as", self.neutral_as)
        if na not in (0.0, 1.0):
            raise FieldInvalid("neutral_as", f"must be 0 or 1, got {self.neutral_as!r}")
        set_(self, "neutral_as", na)
        if not _is_bool(self.prm_hazard):
            raise FieldInvalid("prm_hazard", f"must be true or false, got {self.prm_hazard!r}")
        set_(self, "prm_hazard", bool(self.prm_hazard))
        w = _as_float("w", self.w)
        if not 0.0 <= w <= 1.0:
            raise FieldInvalid("w", f"must be within [0, 1], got {w!r}")
        set_(self, "w", w)
        tau = _as_float("tau", self.tau)
        if not 0.0 <= tau <= 10.0:
            raise FieldInvalid("tau", f"must be within [0, 10], got {tau!r}")
        set_(self, "tau", tau)
        ph = self.pinned_hazard
        if ph is not None:
            if isinstance(ph, (str, bytes, dict)) or not hasattr(ph, "__iter__"):
                raise FieldInvalid("pinned_hazard", f"expected a list of numbers or null, got {ph!r}")
            values = []
            for i, h in enumerate(ph, start=1):
                # The refusal names the parameter (the field of a form, of the API) and says which value.
                h = _as_float("pinned_hazard", h, f"h_{i}: ")
                if not 0.0 <= h <= 1.0:
                    raise FieldInvalid("pinned_hazard", f"h_{i}: must be within [0, 1], got {h!r}")
                values.append(h)
            if not values:
                raise FieldInvalid("pinned_hazard", "must not be empty (use null for 'estimate')")
            set_(self, "pinned_hazard", tuple(values))
        if self.channels not in CHANNELS:
            raise FieldInvalid("channels", f"expected one of {list(CHANNELS)}, got {self.channels!r}")

    # -- (de)serialisation -------------------------------------------------
    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Profile:
        """Build a profile from a JSON-like dict; missing keys take defaults.

        Raises reasonlib.refusals.Invalid (a ValueError) naming the offending field for unknown keys or bad
        values.
        """
        if d is None:
            return cls()
        if not isinstance(d, dict):
            raise FieldInvalid("profile", f"expected an object, got {type(d).__name__}")
        known = set(cls.field_names())
        unknown = sorted(str(k) for k in d if k not in known)
        if unknown:
            raise FieldInvalid(unknown[0], "unknown profile parameter")
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; ``from_dict(p.to_dict()) == p``."""
        d = dataclasses.asdict(self)
        if d["pinned_hazard"] is not None:
            d["pinned_hazard"] = list(d["pinned_hazard"])
        return d

    def replace(self, **changes: Any) -> Profile:
        """A validated copy with some parameters changed."""
        unknown = sorted(k for k in changes if k not in self.field_names())
        if unknown:
            raise FieldInvalid(unknown[0], "unknown profile parameter")
        return dataclasses.replace(self, **changes)


DEFAULT = Profile()

#: The spec's ablations, as overrides on a base profile.
ABLATIONS: dict[str, dict[str, Any]] = {
    "no-format": {"beta": 0.0},
    "no-hazard": {"omega": 0.0},
    "no-penalties": {"beta": 0.0, "omega": 0.0},
}


def ablation(name: str, base: Profile = DEFAULT) -> Profile:
    """The ablation ``name`` (a key of :data:`ABLATIONS`) applied to ``base``."""
    try:
        overrides = ABLATIONS[name]
    except KeyError:
        raise FieldInvalid("ablation", f"unknown ablation {name!r}; choose from {sorted(ABLATIONS)}") from None
    return base.replace(**overrides)
