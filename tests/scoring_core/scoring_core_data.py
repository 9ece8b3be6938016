"""Shared data for the scoring-core tests: the worked example of
docs/scoring.md (six traces A-F).  (A plain module, not a conftest, so that
its name cannot clash with other test packages' conftest modules.)"""

import pandas as pd

V, E, N = "valid", "invalid", "neutral"  # E = error (invalid)


def frames(trace_rows, step_rows):
    """trace_rows: (trace_id, N, L, a); step_rows: (trace_id, step, verdict, refs)."""
    traces = pd.DataFrame(trace_rows, columns=["trace_id", "n_steps", "l_gold", "answer_correct"])
    steps = pd.DataFrame(step_rows, columns=["trace_id", "step", "verdict", "skeleton_refs"])
    return traces, steps


WORKED_TRACES = [
    # id, N, L, a
    ("A", 4, 3, True),
    ("B", 3, 4, True),
    ("C", 5, 0, False),
    ("D", 2, 2, True),
    ("E", 0, 3, True),  # empty
    ("F", 6, 0, False),  # steps 4-6 unlabelled -> incomplete
]
WORKED_STEPS = [
    ("A", 1, V, [1]),
    ("A", 2, E, [2]),
    ("A", 3, V, [2, 7]),  # 7 > L = 3: does not count
    ("A", 4, N, [3]),  # neutral: does not cover
    ("B", 1, V, [1]),
    ("B", 2, V, [2]),
    ("B", 3, V, [3]),
    ("C", 1, E, []),
    ("C", 2, V, []),
    ("C", 3, V, []),
    ("C", 4, V, []),
    ("C", 5, V, []),
    ("D", 1, V, [1]),
    ("D", 2, E, [2]),
    ("F", 1, E, []),
    ("F", 2, V, []),
    ("F", 3, V, []),
]
WORKED_MODELS = {"A": "m1", "B": "m1", "E": "m1", "C": "m2", "D": "m2", "F": "m2"}


def worked_frames():
    """(traces, steps) of the worked example."""
    return frames(WORKED_TRACES, WORKED_STEPS)
