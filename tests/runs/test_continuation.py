"""runs.continuation against the fake OpenAI-compatible server: the three
modes, forced answers, what every result records, and the probe's decision."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from runs.chat_template import render_chat
from runs.continuation import (
    COMPLETIONS,
    DEFAULT_CUE,
    INSTRUCTED,
    PREFILL,
    ContinuationError,
    ContinuationSpec,
    Continuer,
    ModelServer,
    ServerUnreachable,
    prefix_sha256,
    probe_model,
)
from runs.transport import CachedAnswer, FatalRunError
from tests.runs.fake_openai import CONTINUATION, FakeOpenAI, Fault

TEMPLATE_FILE = Path(__file__).parent / "data" / "smollm2_chat_template.jinja"
SMOLLM2 = TEMPLATE_FILE.read_text()
QUESTION = ("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
            "How many clips did Natalia sell altogether in April and May?")
MESSAGES = ({"role": "user", "content": QUESTION},)
# A GSM8K trace cut after an edited step (24 -> 30): what an intervention re-decodes from.
EDITED_PREFIX = "Natalia sold 48/2 = 30 clips in May.\nNatalia sold 48+30 = 78 clips"


@pytest.fixture(autouse=True)
def quick_retries(settings):
    settings.RUN_RETRY_BASE_SECONDS = 0.01
    settings.RUN_RETRY_MAX_SECONDS = 0.02


@pytest.fixture
def fake():
    servers: list[FakeOpenAI] = []

    def start(**options) -> FakeOpenAI:
        servers.append(FakeOpenAI(**options).start())
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def server_for(fake: FakeOpenAI, **options) -> ModelServer:
    return ModelServer(base_url=fake.url, model="subject", **{"chat_template": SMOLLM2, "max_retries": 0, **options})


def vllm_like(fake) -> FakeOpenAI:
    return fake(continue_completions=True, chat_prefill="continue_final_message", served_model="served/smollm2")


# -- the modes -------------------------------------------------------------------


def test_completions_mode_sends_the_chat_rendered_by_the_models_template_then_the_prefix(fake):
    server = vllm_like(fake)
    result = Continuer(server_for(server), COMPLETIONS).continue_prefix(ContinuationSpec(MESSAGES, EDITED_PREFIX))
    body = server.requests[0].body
    assert body["prompt"] == render_chat(SMOLLM2, list(MESSAGES)) + EDITED_PREFIX
    assert body["prompt"].endswith("<|im_start|>assistant\n" + EDITED_PREFIX)
    assert "messages" not in body and "continue_final_message" not in body
    assert (result.ok, result.mode, result.text, result.flagged) == (True, COMPLETIONS, CONTINUATION, False)


def test_every_result_records_mode_prefix_hash_cue_regime_tokens_and_latency(fake):
    server = vllm_like(fake)
    spec = ContinuationSpec(MESSAGES, EDITED_PREFIX, max_tokens=64, temperature=0.7, seed=11, top_p=0.9)
    result = Continuer(server_for(server, price_input_per_mtok=1.0, price_output_per_mtok=2.0),
                       COMPLETIONS).continue_prefix(spec)
    assert result.prefix_sha256 == hashlib.sha256(EDITED_PREFIX.encode()).hexdigest()
    assert result.cue == ""
    assert (result.regime.model, result.regime.temperature, result.regime.seed, result.regime.max_tokens,
            result.regime.top_p) == ("served/smollm2", 0.7, 11, 64, 0.9)
    body = server.requests[0].body
    assert (body["model"], body["temperature"], body["seed"], body["max_tokens"], body["top_p"]) == \
        ("subject", 0.7, 11, 64, 0.9)
    assert (result.prompt_tokens, result.completion_tokens, result.attempts) == (100, 20, 1)
    assert result.cost_usd == pytest.approx((100 * 1.0 + 20 * 2.0) / 1e6)
    assert result.latency_ms >= 0 and not result.cached
    data = result.to_dict()
    assert json.loads(json.dumps(data))["regime"]["model"] == "served/smollm2"
    assert (data["mode"], data["flagged"], data["truncated"]) == (COMPLETIONS, False, False)


def test_prefill_sends_the_partial_assistant_message_with_vllms_switches(fake):
    server = vllm_like(fake)
    result = Continuer(server_for(server), PREFILL).continue_prefix(ContinuationSpec(MESSAGES, EDITED_PREFIX))
    body = server.requests[0].body
    assert body["messages"] == [*MESSAGES, {"role": "assistant", "content": EDITED_PREFIX}]
    assert (body["continue_final_message"], body["add_generation_prompt"]) == (True, False)
    assert (result.mode, result.text) == (PREFILL, CONTINUATION)


def test_prefill_on_a_server_that_ignores_the_switch_gets_a_fresh_answer(fake):
    server = fake(chat_prefill="ignore")
    result = Continuer(server_for(server), PREFILL).continue_prefix(ContinuationSpec(MESSAGES, EDITED_PREFIX))
    assert result.text == "A fresh answer."  # why probe_model checks before a mode is trusted


def test_instructed_shows_the_partial_trace_with_an_instruction_and_is_flagged(fake):
    server = fake(chat_prefill="ignore")
    result = Continuer(server_for(server), INSTRUCTED).continue_prefix(ContinuationSpec(MESSAGES, EDITED_PREFIX))
    messages = server.requests[0].body["messages"]
    assert len(messages) == 1 and messages[0]["role"] == "user"  # joined to the user turn, roles still alternate
    assert messages[0]["content"].startswith(QUESTION + "\n\n")
    assert messages[0]["content"].endswith("Continue it from exactly where it stops. Do not repeat it, do not comment "
                                           "on it and do not start over: write only the text that comes next.\n\n"
                                           "BEGINNING OF THE ANSWER\n" + EDITED_PREFIX)
    assert "continue_final_message" not in server.requests[0].body
    # The fake echoes the partial answer before continuing; the result keeps only what it added.
    assert (result.mode, result.flagged, result.text) == (INSTRUCTED, True, CONTINUATION)
    assert result.to_dict()["flagged"] is True


def test_completions_mode_needs_a_chat_template(fake):
    server = vllm_like(fake)
    with pytest.raises(ContinuationError, match="chat template"):
        Continuer(server_for(server, chat_template=""), COMPLETIONS).continue_prefix(ContinuationSpec(MESSAGES, "x"))
    with pytest.raises(ContinuationError, match="unknown continuation mode"):
        Continuer(server_for(server), "beam")
    assert server.count == 0


def test_an_end_of_turn_token_written_as_text_ends_a_raw_continuation(fake):
    server = fake(continue_completions=True)
    server.inject(Fault(content=" 78 clips in total.<|im_end|>\n<|im_start|>user\nmore"))
    result = Continuer(server_for(server, eos_token="<|im_end|>"), COMPLETIONS).continue_prefix(
        ContinuationSpec(MESSAGES, EDITED_PREFIX))
    assert result.text == " 78 clips in total."


# -- forced answers ----------------------------------------------------------------


def test_forced_answer_appends_the_default_cue_decodes_greedily_and_caps_at_32_tokens(fake):
    server = vllm_like(fake)
    result = Continuer(server_for(server), COMPLETIONS).forced_answer(MESSAGES, EDITED_PREFIX)
    body = server.requests[0].body
    assert body["prompt"].endswith(EDITED_PREFIX + "\n\nFinal answer:")
    assert (body["temperature"], body["max_tokens"]) == (0.0, 32)
    assert result.cue == DEFAULT_CUE == "\n\nFinal answer:"
    assert result.prefix_sha256 == prefix_sha256(EDITED_PREFIX)  # the prefix, without the cue
    assert result.answer == "78"  # the fake answers with the last number before the cue
    # The fake goes on explaining; the cap cut it after 32 words and the result says so.
    assert len(result.text.split()) == 32 and result.truncated


def test_forced_answer_with_another_cue_and_cap_in_every_mode(fake):
    server = vllm_like(fake)
    for mode in (COMPLETIONS, PREFILL, INSTRUCTED):
        result = Continuer(server_for(server), mode).forced_answer(MESSAGES, EDITED_PREFIX, cue="\nAnswer:",
                                                                    max_tokens=3)
        assert (result.mode, result.cue, result.answer, result.regime.max_tokens) == (mode, "\nAnswer:", "78", 3)
        assert len(result.text.split()) == 3
    partials = [server.requests[0].body["prompt"], server.requests[1].body["messages"][-1]["content"],
                server.requests[2].body["messages"][-1]["content"]]
    assert all(p.endswith(EDITED_PREFIX + "\nAnswer:") for p in partials)
    assert [r.body["max_tokens"] for r in server.requests] == [3, 3, 3]


def test_prefix_hash_is_of_the_exact_prefix_text():
    assert prefix_sha256("Step 1: 2+2 = 4") == hashlib.sha256(b"Step 1: 2+2 = 4").hexdigest()
    assert prefix_sha256("Step 1: 2+2 = 4") != prefix_sha256("Step 1: 2+2 = 4 ")
    assert prefix_sha256("é") == hashlib.sha256("é".encode()).hexdigest()


# -- through the transport ------------------------------------------------------------


class MemoryStore:
    def __init__(self) -> None:
        self.answers: dict[str, CachedAnswer] = {}

    def lookup(self, keys: Sequence[str]) -> dict[str, CachedAnswer]:
        return {k: self.answers[k] for k in keys if k in self.answers}

    def save(self, answers: dict[str, CachedAnswer]) -> None:
        self.answers.update(answers)

    def remember_output_mode(self, output_mode: str) -> None:
        pass


def test_many_continuations_keep_their_order_and_a_repeat_comes_from_the_cache(fake):
    server = vllm_like(fake)
    store = MemoryStore()
    specs = [ContinuationSpec(MESSAGES, f"1, 2, {n}, ", max_tokens=2) for n in range(3, 9)]
    first = Continuer(server_for(server), COMPLETIONS, store=store).run(specs)
    assert [r.text for r in first] == [f"{n + 1}, {n + 2}," for n in range(3, 9)]
    again = Continuer(server_for(server), COMPLETIONS, store=store).run(specs)
    assert server.count == len(specs)  # nothing sent the second time
    assert [r.text for r in again] == [r.text for r in first]
    assert all(r.cached and r.regime.model == "served/smollm2" and r.latency_ms == 0 for r in again)


def test_a_failing_request_gives_a_result_with_the_reason_after_its_retries(fake):
    server = vllm_like(fake)
    server.inject(Fault(status=500, message="boom"), Fault(status=500, message="boom"))
    result = Continuer(server_for(server, max_retries=1), PREFILL).continue_prefix(ContinuationSpec(MESSAGES, "x"))
    assert (result.ok, result.text, result.attempts) == (False, "", 2)
    assert result.error == "HTTP 500: boom (gave up after 2 attempts)"
    assert result.prompt_tokens is None  # a 5xx may have generated: unknown, not zero


def test_an_unknown_model_stops_the_run(fake):
    server = vllm_like(fake)
    server.inject(Fault(status=404, message="model 'subject' not found"))
    with pytest.raises(FatalRunError, match="model 'subject' not found"):
        Continuer(server_for(server), COMPLETIONS).run([ContinuationSpec(MESSAGES, "x")])


# -- probe -----------------------------------------------------------------------------


def modes(result) -> dict[str, bool]:
    return {e.mode: e.supported for e in result.modes}


def test_probe_chooses_completions_on_a_server_that_continues_raw_prompts(fake):
    server = vllm_like(fake)
    result = probe_model(server_for(server))
    assert result.chosen == COMPLETIONS
    assert modes(result) == {COMPLETIONS: True, PREFILL: True, INSTRUCTED: True}
    completions = result.modes[0]
    assert (completions.status, completions.first_tokens[:8]) == (200, "0, 11, 1")
    assert result.model_reported == "served/smollm2"
    assert server.count == 3
    assert all(r.body["temperature"] == 0.0 and r.body["max_tokens"] == 8 for r in server.requests)


def test_probe_chooses_prefill_on_a_chat_server_that_continues_the_final_message(fake):
    server = fake(no_completions=True, chat_prefill="continue_final_message")
    result = probe_model(server_for(server))
    assert result.chosen == PREFILL
    assert modes(result) == {COMPLETIONS: False, PREFILL: True, INSTRUCTED: True}
    assert result.modes[0].status == 404 and "no answer: not found" in result.modes[0].reason
    assert result.modes[1].first_tokens.startswith("0, 11")


def test_probe_falls_back_to_instructed_on_a_server_that_answers_afresh(fake):
    server = fake(no_completions=True, chat_prefill="ignore")
    result = probe_model(server_for(server))
    assert result.chosen == INSTRUCTED
    assert modes(result) == {COMPLETIONS: False, PREFILL: False, INSTRUCTED: True}
    prefill = result.modes[1]
    assert (prefill.status, prefill.first_tokens[:7]) == (200, "1, 2, 3")  # started over
    assert "fresh answer" in prefill.reason


def test_probe_refuses_completions_that_do_not_continue_or_have_no_template(fake):
    restarts = fake(chat_prefill="continue_final_message")  # /v1/completions answers " 4" whatever it is given
    result = probe_model(server_for(restarts))
    assert (modes(result)[COMPLETIONS], result.chosen) == (False, PREFILL)
    assert result.modes[0].first_tokens == " 4"
    continues = vllm_like(fake)
    result = probe_model(server_for(continues, chat_template=""))
    assert (modes(result)[COMPLETIONS], result.chosen) == (False, PREFILL)
    assert "no chat template" in result.modes[0].reason


def test_probe_of_an_unreachable_url_names_it(fake):
    dead = fake()
    url = dead.url
    dead.stop()
    with pytest.raises(ServerUnreachable, match=f"no server answers at {url}: could not connect to {url}"):
        probe_model(ModelServer(base_url=url, model="subject"))


def test_probe_stops_on_a_refused_key(fake):
    server = vllm_like(fake)
    server.rule(lambda body: True, Fault(status=401, message="invalid api key"))
    with pytest.raises(FatalRunError, match="refused the API key"):
        probe_model(server_for(server))
    assert server.count == 1


# The probe_model command lives in subjects/ (it also records on subject models): tests/subjects/test_probe.py.
