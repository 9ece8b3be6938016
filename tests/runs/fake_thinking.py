"""The tests' fake reasoning model, which lives in demo/standin/fake_thinking.py (the demo starts it as its
stand-in model): imported from here by the tests, which also start it as ``python -m tests.runs.fake_thinking
[follow|ignore|plan] [inline|r1|field|reasoning|silent] [PORT] [closes|unclosed]``."""

from demo.standin.fake_thinking import CLOSES, FOLLOW, IGNORE, PLAN, UNCLOSED, FakeThinking, main

__all__ = ["CLOSES", "FOLLOW", "IGNORE", "PLAN", "UNCLOSED", "FakeThinking"]

if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
