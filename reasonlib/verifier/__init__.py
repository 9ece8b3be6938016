"""The mechanistic verifier's rules: calculator annotations, visible equations, skeleton references by
value, and a step's verdict. judges/providers/mechanistic/provider.py adapts them to the judge interface."""
