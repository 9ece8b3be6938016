"""A real llama-cpp-python server for the real-model tests (session fixture
``llama``: the server's /v1 URL), started on a free port and stopped at the end.

REASONAUDIT_LLAMA_GGUF names the GGUF and REASONAUDIT_LLAMA_PYTHON a python
with ``llama_cpp[server]`` (``eval "$(bin/setup-llama)"`` sets both). Outside
CI a missing one skips; with CI=true it fails (tests.integration.require)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import integration

STARTUP_SECONDS = 180


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def llama(tmp_path_factory) -> Iterator[str]:
    gguf = os.environ.get("REASONAUDIT_LLAMA_GGUF", "")
    python = os.environ.get("REASONAUDIT_LLAMA_PYTHON", "")
    integration.require(bool(gguf) and Path(gguf).is_file(), "REASONAUDIT_LLAMA_GGUF does not name a GGUF file")
    integration.require(bool(python) and Path(python).is_file(),
                        "REASONAUDIT_LLAMA_PYTHON does not name a python with llama_cpp[server]")
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    proc = subprocess.Popen(
        [python, "-m", "llama_cpp.server", "--model", gguf, "--host", "127.0.0.1", "--port", str(port),
         "--n_ctx", "4096"],
        stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        ready = False
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                ready = httpx.get(f"{url}/models", timeout=2).status_code == 200
            except httpx.HTTPError:
                ready = False
            if ready:
                break
            time.sleep(0.5)
        integration.require(ready, f"the llama-cpp-python server did not start: {log.read_text(errors='replace')[-1500:]}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


