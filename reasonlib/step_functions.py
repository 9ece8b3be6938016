"""The functions a step of a thought can serve (pure: no Django).

The eight categories of *Thought Anchors* (Bogdan, Macar, Nanda, Conmy 2025, arXiv 2506.19143, their
``function_tags``): a step is tagged with what it does in the reasoning, not with whether it is right.
People tag steps on the review page, an LLM judge can tag them, and published analyses bring theirs; all
three use these names, so their tags can be compared category by category.
"""

from __future__ import annotations

from typing import Final

#: (name, label, one-line meaning), in the order of the paper's taxonomy.
FUNCTIONS: Final[tuple[tuple[str, str, str], ...]] = (
    ("problem_setup", "Problem setup", "restates or parses the problem"),
    ("plan_generation", "Plan generation", "states a plan or decides what to do next"),
    ("fact_retrieval", "Fact retrieval", "recalls a fact, formula or definition without computing"),
    ("active_computation", "Active computation", "computes: arithmetic or algebra"),
    ("uncertainty_management", "Uncertainty management", "expresses doubt, backtracks or re-plans"),
    ("result_consolidation", "Result consolidation", "sums up or aggregates intermediate results"),
    ("self_checking", "Self checking", "verifies an earlier step"),
    ("final_answer_emission", "Final answer emission", "states the final answer"),
)

FUNCTION_NAMES: Final[tuple[str, ...]] = tuple(name for name, _, _ in FUNCTIONS)
FUNCTION_LABELS: Final[dict[str, str]] = {name: label for name, label, _ in FUNCTIONS}


def normalize_function(name: str) -> str:
    """The category a published or model-written tag names (``"Plan Generation"``, ``"plan-generation"``
    -> ``"plan_generation"``); ``""`` when it names none of the eight."""
    key = "_".join(name.strip().lower().replace("-", " ").split())
    return key if key in FUNCTION_LABELS else ""
