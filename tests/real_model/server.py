"""llama-cpp-python's OpenAI-compatible server, run by PID on a free port.

``scripts/ensure-llama-server.sh`` installs it (and the GGUF model) into
``.venv-llama/``, writing either a stamp (the pins, the model's path) or the
reason it cannot be installed on this machine; :func:`find_install` reads them.

    with LlamaServer(find_install(), log_path=tmp / "llama.log") as server:
        httpx.get(f"{server.base_url}/models")
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from durable_agents.devserver import free_port

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / os.environ.get("DURABLE_AGENTS_LLAMA_VENV", ".venv-llama")
"""Where scripts/ensure-llama-server.sh installs (the same variable, relative to the repository)."""
REQUIRE_ENV = "DURABLE_AGENTS_REQUIRE_REAL_MODEL"
"""Set to 1: an unavailable server fails the real-model tests instead of skipping them."""
CHAT_FORMAT = "chatml-function-calling"
"""The llama-cpp-python chat handler that implements OpenAI ``tools``/``tool_choice``."""
_LAUNCH = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG\n"
    "except (OSError, AttributeError):\n"
    "    pass\n"
    "os.execv(sys.argv[1], sys.argv[1:])\n"
)
"""Runs the server so that it gets SIGTERM if the test process dies without stopping it
(Linux; the flag survives the exec). It fires when the thread that started the server
ends, so start it from the main thread (as a pytest fixture does)."""


class Unavailable(Exception):
    """The server is not installed here; the message says why and what to do."""


@dataclass(frozen=True)
class LlamaInstall:
    python: Path
    model: Path


def find_install(venv: Path = VENV) -> LlamaInstall:
    """The installed server and model, or :class:`Unavailable` with the reason."""
    reason = venv / "unavailable"
    if reason.exists():
        raise Unavailable(f"scripts/ensure-llama-server.sh could not install the llama server: {reason.read_text()}")
    stamp = venv / ".installed"
    lines = stamp.read_text().splitlines() if stamp.exists() else []
    python, model = venv / "bin" / "python", Path(lines[1]) if len(lines) > 1 else None
    if model is None or not model.is_file() or not python.exists():
        raise Unavailable(
            f"no llama server installed in {venv}: run `bash scripts/ensure-llama-server.sh` (make test does)"
        )
    return LlamaInstall(python=python, model=model)


class LlamaServer:
    """``python -m llama_cpp.server`` with ``--chat_format chatml-function-calling``.

    ``n_ctx`` is the context window in tokens (a prompt beyond it is refused).
    ``n_threads`` generation threads: one by default, because on a small machine that
    also runs Temporal and workers, llama.cpp's spinning threads are slower than one
    (measured on 2 cores: 2-3 s per forced tool call with one thread, 4-7 s with two).
    """

    def __init__(
        self,
        install: LlamaInstall,
        *,
        log_path: Path,
        n_ctx: int = 2048,
        n_threads: int = 1,
        host: str = "127.0.0.1",
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.install, self.log_path, self.n_ctx, self.host = install, log_path, n_ctx, host
        self.n_threads = n_threads
        self.extra_args = extra_args
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        """What ``OPENAI_BASE_URL`` should be."""
        return f"http://{self.host}:{self.port}/v1"

    def command(self) -> list[str]:
        return [
            str(self.install.python),
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.install.model),
            "--chat_format",
            CHAT_FORMAT,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.n_threads),
            *self.extra_args,
        ]

    def start(self, timeout: float = 120.0) -> LlamaServer:
        """Start the server and wait until it answers ``GET /v1/models``."""
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError(f"llama server {self.proc.pid} is already running")
        self.port = free_port(self.host)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [str(self.install.python), "-c", _LAUNCH, *self.command()],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while not self._answers():
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"llama server exited with {self.proc.returncode} before answering:\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(
                    f"llama server did not answer {self.base_url}/models in {timeout}s:\n{self.log_tail()}"
                )
            time.sleep(0.2)
        return self

    def _answers(self) -> bool:
        try:
            return httpx.get(f"{self.base_url}/models", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds (its own process group only)."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
