"""A fake OpenAI-compatible chat completions server on a real socket
(127.0.0.1, a free port or ``port``), for the real ``openai`` client to talk to.

It answers every request with verdicts for the steps it finds in the prompt
("Step N: text" lines; a step containing WRONG is invalid) -- or, asked for step-function tags
(judges.tag_protocol), with tags read off each step's words (``fake_tags``) -- and can be told
to misbehave: HTTP errors (with Retry-After), slow answers, malformed
content, steps out of range, and llama-cpp-python's refusal of json_schema
response formats -- and, like its grammar-based json_object mode, a small
model that without the schema echoes the schema back (``json_object_needs_schema``).
Faults queued with ``inject`` hit the next requests in arrival order;
``rule`` faults hit every request they match. ``item_counts()`` counts the
requests per work item (the trace number in "step k of trace N" lines).

For continuations (runs.continuation) it can act as a tiny deterministic
language model (``fake_continue``): ``continue_completions`` continues a raw
prompt on /v1/completions; ``chat_prefill`` says what its chat endpoint does
with a trailing assistant message -- continue it in place only when the
request sets vLLM's ``continue_final_message`` (``"continue_final_message"``),
always (``"native"``), or never, answering afresh (``"ignore"``);
``no_completions`` answers /v1/completions with 404 as chat-only servers do.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LLAMA_CPP_REFUSAL = (
    "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
    "'ctx': {'expected': \"'text' or 'json_object'\"}}]"
)
STEP_LINE = re.compile(r"^Step (\d+): (.*)$", re.MULTILINE)
ITEM = re.compile(r"of trace (\d+)")
SEQUENCE_END = re.compile(r"(\d+),( ?)(\d*)$")
CUE_END = re.compile(r"answer:\s*$", re.IGNORECASE)
INSTRUCTED_MARK = "BEGINNING OF THE ANSWER\n"
CONTINUATION = " and so the reasoning goes on."
EXPLANATION = "\n\nThis follows from the steps above," + " and each of them checks out," * 12


TAGGING_CUE = "Give every step the functions it serves"
#: The fake tagger's rules, first match wins: a word of the step's text -> its function.
FAKE_TAG_WORDS = (("plan", "plan_generation"), ("wait", "uncertainty_management"), ("check", "self_checking"),
                  ("answer is", "final_answer_emission"), ("=", "active_computation"))


def fake_tags(text: str) -> list[str]:
    """The fake tagger's functions of a step: the first rule of FAKE_TAG_WORDS whose word it holds (plus
    self checking for a step that also says "check"), else problem setup."""
    low = text.lower()
    tags = [tag for word, tag in FAKE_TAG_WORDS if word in low][:1] or ["problem_setup"]
    if "check" in low and "self_checking" not in tags:
        tags.append("self_checking")
    return tags


def fake_continue(text: str, max_tokens: int) -> tuple[str, str]:
    """What the fake model writes after ``text``, cut to ``max_tokens`` words,
    and the finish reason. A comma-separated count goes on from where it stops,
    even inside a number ("..., 9, 1" -> "0, 11, ..."); a text ending in an
    answer cue ("Final answer:") gets the last number before it, then a long
    explanation; anything else gets CONTINUATION."""
    m = SEQUENCE_END.search(text)
    if m and str(int(m.group(1)) + 1).startswith(m.group(3)):
        n, space, partial = int(m.group(1)), m.group(2), m.group(3)
        first = str(n + 1)[len(partial):] if partial else ("" if space else " ") + str(n + 1)
        out = first + "".join(f", {k}" for k in range(n + 2, max(n + 2, 21)))
    elif CUE_END.search(text):
        numbers = re.findall(r"-?\d+", text[: CUE_END.search(text).start()])
        out = f" {numbers[-1] if numbers else 'unknown'}{EXPLANATION}"
    else:
        out = CONTINUATION
    words = re.findall(r"\s*\S+", out)
    return "".join(words[:max_tokens]), "length" if len(words) > max_tokens else "stop"


@dataclass
class Fault:
    status: int | None = None  # answer with this HTTP error
    message: str = "injected failure"
    retry_after: str | None = None
    delay: float = 0.0  # seconds before answering
    content: str | None = None  # answer with this message content instead
    extra_steps: tuple[int, ...] = ()  # add verdicts for these (out of range) step numbers
    drop_steps: tuple[int, ...] = ()  # leave these steps out


@dataclass
class Seen:
    body: dict
    status: int
    started: float
    finished: float = 0.0
    authorization: str = ""


@dataclass
class FakeOpenAI:
    latency: float = 0.0
    reject_json_schema: bool = False  # as llama-cpp-python's server does
    reject_response_format: bool = False  # refuse any response_format (400)
    # json_object without a "schema": answer what SmolLM2 did on llama-cpp-python, the schema echoed back.
    json_object_needs_schema: bool = False
    usage: tuple[int, int] = (100, 20)  # prompt, completion tokens per answer
    continue_completions: bool = False  # /v1/completions continues the prompt (fake_continue)
    chat_prefill: str = ""  # "continue_final_message" | "native" | "ignore"; "" = the judge's answers
    no_completions: bool = False  # /v1/completions -> 404
    served_model: str = ""  # the model name answers carry ("" = the request's)
    # Generation mode (subject models): a short chain of thought adding the numbers of the
    # question, ending "The answer is N."; see _solve.
    generation: bool = False
    reasoning_field: str = ""  # "reasoning_content" / "reasoning": also answer a separate reasoning channel
    wrong_odd_seeds: bool = False  # a request with an odd seed gets a wrong sum
    down: bool = False  # a dead server: every POST's connection is closed without an answer
    requests: list[Seen] = field(default_factory=list)
    on_request: Callable[[dict], None] | None = None
    port: int = 0  # 0: a free port (the tests); a fixed one for a server others are told about (./run's stand-in)

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self.queue: deque[Fault] = deque()
        self.rules: list[tuple[Callable[[dict], bool], Fault]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.gets: list[str] = []  # paths of GET requests
        self.connections: set = set()  # open client connections (kept alive between requests)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Buffered: headers and body leave in one segment (no Nagle / delayed-ACK stall of ~40 ms).
            wbufsize = -1

            def log_message(self, *args) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                with fake.lock:
                    fake.connections.add(self.connection)

            def finish(self) -> None:
                with fake.lock:
                    fake.connections.discard(self.connection)
                super().finish()

            def do_POST(self) -> None:
                fake._handle(self)

            def do_GET(self) -> None:  # /v1/models (a reachability check); anything else (and /reset): /stats
                with fake.lock:
                    fake.gets.append(self.path)
                    if self.path.endswith("/reset"):  # a new measurement: the high-water mark starts again
                        fake.max_in_flight = fake.in_flight
                    if self.path.endswith("/models"):
                        data = json.dumps({"object": "list", "data": [{"id": "fake-model", "object": "model"}]}).encode()
                    else:
                        data = json.dumps({"count": len(fake.requests), "max_in_flight": fake.max_in_flight,
                                           "in_flight": fake.in_flight}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    # -- control --------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop as a server process that dies does: its kept-alive connections close too."""
        import socket

        self.server.shutdown()
        self.server.server_close()
        with self.lock:
            for conn in list(self.connections):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/v1"

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.requests)

    def inject(self, *faults: Fault) -> None:
        with self.lock:
            self.queue.extend(faults)

    def rule(self, when: Callable[[dict], bool], fault: Fault) -> None:
        with self.lock:
            self.rules.append((when, fault))

    def item_counts(self) -> dict[str, int]:
        """Requests per item: the trace number its prompt names ("step k of trace N")."""
        counts: dict[str, int] = {}
        with self.lock:
            for r in self.requests:
                m = ITEM.search(r.body["messages"][-1]["content"] if "messages" in r.body else r.body.get("prompt", ""))
                key = m.group(1) if m else "?"
                counts[key] = counts.get(key, 0) + 1
        return counts

    def started_after(self, when: float) -> int:
        with self.lock:
            return sum(r.started > when for r in self.requests)

    def formats(self) -> list[str | None]:
        with self.lock:
            return [(r.body.get("response_format") or {}).get("type") for r in self.requests]

    # -- serving --------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        try:
            raw: bytes | None = handler.rfile.read(length)
        except OSError:  # the client reset the connection while sending its body
            raw = None
        if raw is None or len(raw) < length:
            # The client died between its headers and the end of its body (a test killed the worker
            # sending it): nothing was asked. Recorded, it counted as a request with an empty body.
            handler.close_connection = True
            return
        body = json.loads(raw or b"{}")
        if self.down:
            handler.close_connection = True
            handler.connection.close()
            return
        seen = Seen(body, 200, time.monotonic(), authorization=handler.headers.get("authorization", ""))
        with self.lock:
            self.requests.append(seen)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            fault = self.queue.popleft() if self.queue else None
            if fault is None:
                fault = next((f for when, f in self.rules if when(body)), None)
        try:
            if self.on_request:
                self.on_request(body)
            fault = fault or Fault()
            time.sleep(self.latency + fault.delay)
            fmt = (body.get("response_format") or {}).get("type")
            if self.no_completions and handler.path.rstrip("/").endswith("/completions") \
                    and not handler.path.rstrip("/").endswith("/chat/completions"):
                status, payload = 404, {"error": {"message": "Not Found", "type": "not_found_error"}}
            elif self.reject_json_schema and fmt == "json_schema":
                status, payload = 500, {"error": {"code": 500, "message": LLAMA_CPP_REFUSAL, "type": "internal_server_error"}}
            elif self.reject_response_format and fmt:
                status, payload = 400, {"error": {"message": "response_format is not supported by this model",
                                                  "type": "invalid_request_error"}}
            elif self.json_object_needs_schema and fmt == "json_object" and "schema" not in body["response_format"]:
                status, payload = 200, self._completion(body, Fault(content=json.dumps(
                    {"type": "object", "properties": {"steps": {"type": "array"}}})))
            elif fault.status:
                status, payload = fault.status, {"error": {"message": fault.message, "type": "server_error"}}
            else:
                status, payload = 200, self._completion(body, fault)
            seen.status = status
            data = json.dumps(payload).encode()
            handler.send_response(status)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(data)))
            if fault.retry_after is not None:
                handler.send_header("retry-after", fault.retry_after)
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout)
        finally:
            seen.finished = time.monotonic()
            with self.lock:
                self.in_flight -= 1

    @staticmethod
    def _question(body: dict) -> str:
        text = body["messages"][-1]["content"] if "messages" in body else body.get("prompt", "")
        if "Q:" in text:  # k-shot: the last question
            return text.rsplit("Q:", 1)[-1].split("\nA:", 1)[0]
        return text.rsplit("\n\n", 1)[-1]

    def _solve(self, body: dict) -> tuple[str, str, str]:
        """(text, reasoning, finish_reason): the sum of the question's numbers
        (plus one for an odd seed with ``wrong_odd_seeds``); under 16 max_tokens
        the text is cut after its first line with finish_reason "length"."""
        numbers = [int(n) for n in re.findall(r"\d+", self._question(body))] or [0]
        total = sum(numbers)
        seed = body.get("seed")
        if self.wrong_odd_seeds and isinstance(seed, int) and seed % 2 == 1:
            total += 1
        lines = ["We add the numbers of the question.", f"{' + '.join(map(str, numbers))} = {total}.",
                 f"The answer is {total}."]
        reasoning = f"The question gives {len(numbers)} numbers; I add them." if self.reasoning_field else ""
        if (body.get("max_tokens") or 1000) < 16:
            return lines[0], reasoning, "length"
        return "\n".join(lines), reasoning, "stop"

    def _completion(self, body: dict, fault: Fault) -> dict:
        pt, ct = self.usage
        if fault.content is None and (self.continue_completions and "messages" not in body
                                      or self.chat_prefill and "messages" in body):
            return self._continuation(body)
        if self.generation and fault.content is None:
            text, reasoning, finish = self._solve(body)
            extra = {self.reasoning_field: reasoning} if self.reasoning_field else {}
            if "messages" not in body:
                choice = {"index": 0, "finish_reason": finish, "text": text, **extra}
                kind = "text_completion"
            else:
                choice = {"index": 0, "finish_reason": finish,
                          "message": {"role": "assistant", "content": text, **extra}}
                kind = "chat.completion"
            return {"id": "gen-fake", "object": kind, "created": int(time.time()), "model": f"{body.get('model')}-served",
                    "choices": [choice], "usage": {"prompt_tokens": pt, "completion_tokens": ct,
                                                   "total_tokens": pt + ct}}
        if "messages" not in body:  # /v1/completions: a raw prompt continued
            return {
                "id": "cmpl-fake", "object": "text_completion", "created": int(time.time()), "model": body.get("model"),
                "choices": [{"index": 0, "finish_reason": "stop", "text": fault.content or " 4"}],
                "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct},
            }
        if fault.content is not None:
            content = fault.content
        else:
            prompt = body["messages"][-1]["content"]
            steps = []
            for m in STEP_LINE.finditer(prompt):
                n = int(m.group(1))
                if n in fault.drop_steps:
                    continue
                verdict = "invalid" if "WRONG" in m.group(2) else "valid"
                steps.append({"step": n, "verdict": verdict, "skeleton_refs": [], "confidence": 0.8,
                              "reason": f"step {n} looks {verdict}"})
            for n in fault.extra_steps:
                steps.append({"step": n, "verdict": "valid", "skeleton_refs": [], "confidence": 0.5, "reason": "extra"})
            if TAGGING_CUE in prompt:  # judges.tag_protocol: the functions of each step, read off its words
                texts = {int(m.group(1)): m.group(2) for m in STEP_LINE.finditer(prompt)}
                steps = [{"step": st["step"], "tags": fake_tags(texts.get(st["step"], ""))} for st in steps]
            content = json.dumps({"steps": steps, "answer_correct": True})
            if body.get("response_format") is None:
                content = f"Here is my assessment.\n```json\n{content}\n```"
        return {
            "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": body.get("model"),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct},
        }


    def _continuation(self, body: dict) -> dict:
        pt, ct = self.usage
        cap = int(body.get("max_tokens") or 16)
        base = {"created": int(time.time()), "model": self.served_model or body.get("model"),
                "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}}
        if "messages" not in body:
            text, finish = fake_continue(body["prompt"], cap)
            return {**base, "id": "cmpl-fake", "object": "text_completion",
                    "choices": [{"index": 0, "finish_reason": finish, "text": text}]}
        messages = body["messages"]
        last = messages[-1]
        in_place = last["role"] == "assistant" and (
            self.chat_prefill == "native"
            or self.chat_prefill == "continue_final_message" and body.get("continue_final_message") is True)
        if in_place:
            text, finish = fake_continue(last["content"], cap)
        else:  # a fresh answer to the last user message
            question = next(m["content"] for m in reversed(messages) if m["role"] == "user")
            if INSTRUCTED_MARK in question:  # follows the instruction, but echoes the partial answer first
                partial = question.split(INSTRUCTED_MARK, 1)[1]
                more, finish = fake_continue(partial, cap)
                text = partial + more
            elif "Count from 1 to 20" in question:
                text, finish = fake_continue("0,", cap)  # starts over: " 1, 2, 3, ..."
                text = text.lstrip()
            else:
                text, finish = "A fresh answer.", "stop"
        return {**base, "id": "chatcmpl-fake", "object": "chat.completion",
                "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": text}}]}


def main(argv: list[str]) -> None:
    """A server of its own process: python -m demo.standin.fake_openai LATENCY [generation]."""
    server = FakeOpenAI(latency=float(argv[0]) if argv else 0.0, generation="generation" in argv[1:])
    print(server.url, flush=True)
    server.server.serve_forever()


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
