"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
JSON messages separated by NUL bytes, commands on the browser's fd 3, answers on its fd 4),
for pages that never go idle.

``tests/cli/test_ui_browser.py``'s ``browse`` (``--dump-dom`` with a virtual-time budget)
waits for the page to go idle: the UI's page of a *running* workflow long-polls its history
and never does (``browse`` then times out after 90 s). Here the page's DOM is read every
half second until it shows what the test waits for, or the deadline passes. The browser is
``chromium()`` of that file (installed by scripts/ensure-chromium.sh; never a skip).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.cli.test_ui_browser import CHROMIUM_FLAGS, chromium

FLAGS = [f for f in CHROMIUM_FLAGS if not f.startswith("--virtual-time-budget")]


class PipeBrowser:
    def __init__(self, proc: subprocess.Popen, commands: int, answers: int) -> None:
        self._proc = proc
        self._commands = commands
        self._answers = answers
        self._buffer = b""
        self._next_id = 0

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None,
             timeout: float = 30.0) -> dict[str, Any]:  # fmt: skip
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._receive(deadline, method)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"chromium refused {method}: {answer['error']}")
                return answer.get("result", {})

    def _receive(self, deadline: float, waiting_for: str) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"chromium did not answer {waiting_for}")
            ready, _, _ = select.select([self._answers], [], [], left)
            if ready:
                chunk = os.read(self._answers, 1 << 16)
                if not chunk:
                    raise RuntimeError(f"chromium closed its DevTools pipe (exit {self._proc.poll()})")
                self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def open(self, url: str) -> Tab:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Page.enable", session=session)
        self.send("Page.navigate", {"url": url}, session=session)
        return Tab(self, target, session)


PAGE_TEXT = """(() => {
  const parts = [document.documentElement.outerHTML];
  for (const frame of document.querySelectorAll("iframe")) {
    let text = null;
    try { text = frame.contentDocument && frame.contentDocument.body ? frame.contentDocument.body.innerText : null; }
    catch (e) { text = null; }
    parts.push(`<frame-text id="${frame.id}">${text === null ? "(not readable)" : text}</frame-text>`);
  }
  return parts.join("\\n");
})()"""
"""The page's DOM, then the rendered text of each of its frames (the UI renders a run's
Summary and Current Details in frames of its own)."""


class Tab:
    def __init__(self, browser: PipeBrowser, target: str, session: str) -> None:
        self._browser, self._target, self._session = browser, target, session

    def evaluate(self, expression: str) -> Any:
        done = self._browser.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=self._session
        )
        return done.get("result", {}).get("value")

    def wait_for(self, until: Callable[[str], bool], *, timeout: float) -> str:
        """The page (``PAGE_TEXT``) once ``until(page)`` holds, or at the deadline (the
        caller asserts on it), read every half second."""
        deadline = time.monotonic() + timeout
        while True:
            page = str(self.evaluate(PAGE_TEXT) or "")
            if until(page) or time.monotonic() > deadline:
                return page
            time.sleep(0.5)

    def click(self, text: str) -> bool:
        """Click the first button whose text is ``text``; False if there is none (yet)."""
        script = (
            "(() => { const b = [...document.querySelectorAll('button')]"
            f".find(b => b.innerText.trim() === {json.dumps(text)}); if (b) b.click(); return !!b; }})()"
        )
        return bool(self.evaluate(script))

    def screenshot(self, path: Path) -> None:
        shot = self._browser.send("Page.captureScreenshot", {"format": "png"}, session=self._session)
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        self._browser.send("Target.closeTarget", {"targetId": self._target})


@contextlib.contextmanager
def pipe_browser(profile: Path, log: Path) -> Iterator[PipeBrowser]:
    """Chromium with its DevTools protocol on fds 3 (commands) and 4 (answers).

    ``profile`` must be a fresh directory (a profile in use makes Chromium wait for its owner).
    """
    commands_read, commands_write = os.pipe()
    answers_read, answers_write = os.pipe()
    with log.open("wb") as log_file:
        proc = subprocess.Popen(  # bash puts the two pipe ends on fds 3 and 4, then becomes chromium
            ["bash", "-c", f'exec "$0" "$@" 3<&{commands_read} 4>&{answers_write}', chromium(), *FLAGS,
             "--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"],
            pass_fds=(commands_read, answers_write), stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file,
        )  # fmt: skip
    os.close(commands_read)
    os.close(answers_write)
    browser = PipeBrowser(proc, commands_write, answers_read)
    try:
        yield browser
    finally:
        with contextlib.suppress(Exception):
            browser.send("Browser.close", timeout=5)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        os.close(commands_write)
        os.close(answers_read)
