"""The fake OpenAI-compatible server of the run tests (tests/runs/fake_openai.py) answering scanner
questions: a question with a quoted word ("Does the model say \"wait\"?") gets "yes" citing every step
that contains the word, else "no" citing none. ``cite_missing`` adds a step number no trace has."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass

from tests.runs.fake_openai import FakeOpenAI, Fault

STEP = re.compile(r"^(?:Thought step|Step) (\d+): (.*)$", re.MULTILINE)
QUOTED = re.compile(r'"([^"]+)"')


@dataclass
class FakeScanner(FakeOpenAI):
    cite_missing: bool = False

    def _completion(self, body: dict, fault: Fault) -> dict:
        prompt = body["messages"][-1]["content"] if "messages" in body else ""
        if fault.content is not None or not prompt.startswith("Question:"):
            return super()._completion(body, fault)
        question = prompt.split("\n", 1)[0]
        word = (QUOTED.search(question) or re.search(r"(\w+)\?", question)).group(1).lower()
        steps = [int(m.group(1)) for m in STEP.finditer(prompt) if word in m.group(2).lower()]
        cited = steps + ([999] if self.cite_missing else [])
        content = json.dumps({"answer": "yes" if steps else "no", "steps": cited,
                              "explanation": f"the word {word!r} appears in {len(steps)} steps"})
        pt, ct = self.usage
        return {"id": "chatcmpl-scan", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model"),
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}}


if __name__ == "__main__":  # a stand-in LLM judge for the README's scan command: python -m tests.search.fake_scanner [PORT]
    import sys
    from http.server import ThreadingHTTPServer

    scanner = FakeScanner()
    if len(sys.argv) > 1:  # a fixed port, as the README's commands name it
        scanner.server.server_close()
        scanner.server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), scanner.server.RequestHandlerClass)
        scanner.server.daemon_threads = True
    print(scanner.url, flush=True)
    scanner.server.serve_forever()
