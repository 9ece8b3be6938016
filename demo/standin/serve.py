"""The demo's stand-in reasoning model: what it is (``stand_in``) and its process (``python -m demo.standin.serve
PORT``), which ``./run`` keeps running beside the web server so that runs started from the pages against the demo's
stand-in subject model get answers. The process prints its base URL once it listens -- ``./run`` reads that line,
so a port already taken fails the start instead of a run later -- then serves until it is terminated."""

from __future__ import annotations

import sys

from demo.standin.fake_thinking import FOLLOW, FakeThinking


def stand_in(port: int = 0) -> FakeThinking:
    """Its thought in a separate ``reasoning_content`` field (as vLLM answers), and it follows its thought, so an
    edited or cut thought moves its answer (the interventions, thinking budgets and early answering show an
    effect). On 127.0.0.1 only; ``port`` 0 is a free one."""
    return FakeThinking(form="field", behaviour=FOLLOW, port=port)


def main(argv: list[str]) -> None:
    """python -m demo.standin.serve [PORT]"""
    server = stand_in(int(argv[0]) if argv else 0)
    try:  # from the URL on: whoever read it may stop the server at once
        print(server.url, flush=True)
        server.server.serve_forever()
    except KeyboardInterrupt:  # Ctrl-C in ./run's terminal reaches this process too: a stop, not an error
        pass


if __name__ == "__main__":
    main(sys.argv[1:])
