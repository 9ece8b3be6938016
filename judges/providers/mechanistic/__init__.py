"""The mechanistic verifier: the built-in judge that checks the arithmetic a
reasoning step shows, with no model, no network and no configuration.

A step's checkable arithmetic is (a) GSM8K calculator annotations
``<<expr=result>>`` (calculator.py) and (b) visible equations such as
``16 - 3 - 4 = 9``, ``2 x 0.5 = 1.0``, ``$1,200 / 4 = $300``,
``60 pounds / 2 = 30 pounds`` or chains ``3 * 4 = 12 + 2 = 14``
(equations.py). A visible equation and the annotation behind its result are
one claim. Each claim is evaluated exactly by reasonlib.arithmetic (shared
with skeleton authoring, which checks a skeleton step's ``check`` with it);
skeleton.py refers a step to the skeleton steps whose check result one of
its true claims derives; verdicts.py combines them into a step's verdict and
provider.py labels the traces of a judge run with it.
"""
