"""Pure core of the abstraction benchmark (paper 004; docs/abstraction.md): no ORM, no I/O.

generators.py builds the seeded instances of every sub-dataset, remap.py the symbol remappings of §6,
prompts.py the DP and CoT chat prompts of §5, checker.py the deterministic checker of §7 and the
published LLM checker's prompt, aggregate.py Γ, the paired Δ and their bootstrap intervals (§3.4)."""
