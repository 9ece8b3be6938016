"""The tests' fake reasoning model, which lives in demo/standin/fake_thinking.py (the demo starts it as its
stand-in model): imported from here by the tests."""

from demo.standin.fake_thinking import CLOSES, FOLLOW, IGNORE, UNCLOSED, FakeThinking, main

__all__ = ["CLOSES", "FOLLOW", "IGNORE", "UNCLOSED", "FakeThinking"]

if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
