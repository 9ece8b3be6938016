"""The tests' fake OpenAI-compatible server, which lives in demo/standin/fake_openai.py (the demo starts
it as its stand-in model): imported from here by the tests and benchmarks, which also start it as
``python -m tests.runs.fake_openai LATENCY [generation]``."""

from demo.standin.fake_openai import CONTINUATION, SEQUENCE_END, FakeOpenAI, Fault, fake_continue, main

__all__ = ["CONTINUATION", "SEQUENCE_END", "FakeOpenAI", "Fault", "fake_continue"]

if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
