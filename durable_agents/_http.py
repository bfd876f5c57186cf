"""A small HTTP server (Starlette app, uvicorn) in a thread of its own.

Used by the codec server and the worker's health endpoint. Its own thread and
event loop: a slow or stuck worker loop never delays a health probe or a
codec request, and uvicorn installs no signal handlers off the main thread
(the CLI's own SIGTERM handling stays in charge).
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from durable_agents.checkpoint.errors import ConfigurationError


class HttpServerThread:
    """``start()`` binds ``host:port`` (0: a free port) and serves ``app``; ``stop()`` ends it."""

    def __init__(self, app: Any, host: str, port: int, what: str, flag: str) -> None:
        self.app, self.host, self.what, self.flag = app, host, what, flag
        self._requested = port
        self._socket: socket.socket | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._socket is not None, "not started"
        return self._socket.getsockname()[1]

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 10.0) -> HttpServerThread:
        import uvicorn

        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self._requested))
        except OSError as e:
            sock.close()
            raise ConfigurationError(
                f"cannot start the {self.what} on {self.host}:{self._requested} ({e.strerror or e}); "
                f"pick another port with {self.flag}, or stop what listens there"
            ) from None
        sock.listen(128)
        self._socket = sock
        config = uvicorn.Config(self.app, log_level="warning", lifespan="off", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name=f"durable-agents {self.what}", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise ConfigurationError(f"the {self.what} did not start on {self.host}:{self._requested}")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Idempotent."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        self._server = None

    def __enter__(self) -> HttpServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
