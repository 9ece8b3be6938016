"""Calculator annotations: GSM8K's ``<<expr=result>>`` markup inside a step.

The markup is cut out of the step (what a reader sees is left for
equations.py), and each annotation's inner text is a bare equation chain
that reasonlib.arithmetic evaluates.
"""

from __future__ import annotations

from reasonlib.arithmetic import ANNOTATION_RE, Claim, chain_claims


def visible_and_annotations(step_text: str) -> tuple[str, list[tuple[int, str]]]:
    """Step text with the ``<<...>>`` markup removed (what a reader sees),
    and (position in that text, inner text) for each annotation."""
    if "<<" not in step_text:
        return step_text, []
    parts = []
    anns = []
    pos = 0
    length = 0
    for m in ANNOTATION_RE.finditer(step_text):
        parts.append(step_text[pos:m.start()])
        length += m.start() - pos
        anns.append((length, m.group(1)))
        pos = m.end()
    parts.append(step_text[pos:])
    return "".join(parts), anns


def annotation_claims(annotations: list[tuple[int, str]], rounds: bool = False) -> list[tuple[Claim, int]]:
    """(claim, position in the visible text) of every annotation's claims;
    ``rounds``: the step says it rounds."""
    return [(claim, anchor) for anchor, inner in annotations
            for claim in chain_claims(inner, "annotation", rounds)]
