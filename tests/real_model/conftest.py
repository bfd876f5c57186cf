"""A real model behind a real OpenAI-compatible server: one llama server for the
session (installed by scripts/ensure-llama-server.sh), a recording proxy per test.

If the server cannot be installed on this machine the tests skip, and the reason
is printed at the end of the run (``DURABLE_AGENTS_REQUIRE_REAL_MODEL=1`` makes
that a failure instead).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.real_model.proxy import RecordingProxy
from tests.real_model.server import REQUIRE_ENV, LlamaServer, Unavailable, find_install

N_CTX = 2048
"""The server's context window: small, so a prompt that overflows it is cheap to build."""
API_KEY = "sk-llama-needs-no-key"

_skipped: list[str] = []


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    try:
        install = find_install()
    except Unavailable as e:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {e}", pytrace=False)
        _skipped.append(str(e))
        pytest.skip(str(e))
    server = LlamaServer(install, log_path=tmp_path_factory.mktemp("llama") / "server.log", n_ctx=N_CTX)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def wire(llama: LlamaServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingProxy]:
    """A recording proxy in front of the server; in-process workers' ``openai`` SDK talks to it."""
    with RecordingProxy(llama.base_url) as proxy:
        monkeypatch.setenv("OPENAI_BASE_URL", proxy.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
        yield proxy


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _skipped:
        terminalreporter.write_line(f"real-model tests skipped: {_skipped[0]}", yellow=True)
