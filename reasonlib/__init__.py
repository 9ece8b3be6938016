"""Pure reasoning code shared by every app: no Django, no ORM, no I/O.

Exact arithmetic of an equation (arithmetic.py), replay of a calculator chain with changed numbers
(calc_chain.py), segmentation into steps (segmentation.py), answer extraction and checking (answers.py),
and the mechanistic verifier's rules (verifier/). The diagnostics' pure cores import only this package; tests/test_import_cycles.py keeps
it free of the apps.
"""
