"""The Temporal UI, in headless Chromium, reads an encrypted run only through the codec server.

``durable-agents server`` with encryption keys starts the codec server and
points the UI at it (``--ui-codec-endpoint``): the run's input shows decrypted.
The same history, served by a dev server whose UI has no codec endpoint,
shows ciphertext. Both screenshots are kept: ``tests/artifacts/ui-codec-decoded.png``
and ``tests/artifacts/ui-codec-encrypted.png``.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from durable_agents.checkpoint.encryption import KEYS_ENV, EncryptionKeys, new_key
from durable_agents.devserver import DevServer, free_port
from tests.cli.conftest import CLI, ROOT, Cli, stop
from tests.cli.test_ui_browser import ARTIFACTS, browse, chromium, visible_text

pytestmark = pytest.mark.integration


def _start_server(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.Popen, dict[str, str]]:
    """``durable-agents server`` with keys; returns it and what it printed (addresses)."""
    port, ui_port, codec_port = free_port(), free_port(), free_port()
    proc = subprocess.Popen(
        [
            *CLI,
            *("server", "--port", str(port), "--ui-port", str(ui_port), "--codec-port", str(codec_port)),
            *("--db-file", str(tmp_path / "temporal.db")),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines, deadline = [], time.monotonic() + 90
    while not any("Ctrl-C to stop" in line for line in lines):
        line = proc.stdout.readline()
        if not line and (proc.poll() is not None or time.monotonic() > deadline):
            stop(proc)
            raise RuntimeError("server did not start:\n" + "".join(lines))
        lines.append(line)
    out = "".join(lines)
    assert f"codec server at http://127.0.0.1:{codec_port}: the UI decrypts payloads (keys k1)" in out, out
    return proc, {"address": f"127.0.0.1:{port}", "ui": f"http://127.0.0.1:{ui_port}"}


def test_the_ui_shows_the_input_decrypted_only_with_the_codec_server(tmp_path):
    chromium()  # first: a missing browser fails before anything starts
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    decoded_png, encrypted_png = ARTIFACTS / "ui-codec-decoded.png", ARTIFACTS / "ui-codec-encrypted.png"
    for old in (decoded_png, encrypted_png):
        old.unlink(missing_ok=True)
    env = {**{k: v for k, v in os.environ.items() if k != "DURABLE_AGENTS_UI_URL"}, KEYS_ENV: new_key("k1")}
    sid = f"codec-{uuid.uuid4().hex[:8]}"
    server, where = _start_server(tmp_path, env)
    try:
        cli = Cli(address=where["address"], task_queue="ui-codec", store_path=tmp_path / "store.db", env=env)
        worker = cli.start_worker(["tests.agents:weather_agent"], tmp_path / "worker.log")
        try:
            out = cli("run", "booker", "Book a table for 2 tonight", "--session", sid)
            assert out.returncode == 0, out.stderr
        finally:
            stop(worker)
        link = f"{where['ui']}/namespaces/default/workflows/{sid}"
        text = visible_text(browse(link, tmp_path / "profile-1", decoded_png))
        assert sid in text and "Completed" in text, text[:2000]
        # the run's input, decrypted (the UI renders it as JSON tokens)
        assert f'"storeLocation" : "{cli.store_path}"' in text and '"agent" : "booker"' in text, text[:3000]
    finally:
        stop(server)

    # the same history, through a UI that has no codec endpoint
    ui_port = free_port()
    with DevServer(ui=True, db_file=tmp_path / "temporal.db", port=free_port(), ui_port=ui_port):
        link = f"http://127.0.0.1:{ui_port}/namespaces/default/workflows/{sid}"
        text = visible_text(browse(link, tmp_path / "profile-2", encrypted_png))
    assert sid in text and "Completed" in text, text[:2000]
    assert str(cli.store_path) not in text and '"agent" : "booker"' not in text, text[:3000]
    # what it shows instead: the payloads' data, which is our ciphertext (it decrypts with the key)
    shown = re.findall(r'"([A-Za-z0-9+/]{200,}={0,2})"', text)
    assert len(shown) >= 2, text[:3000]  # input and result
    plain = EncryptionKeys.parse(env[KEYS_ENV]).open("k1", base64.b64decode(shown[0]))
    assert str(cli.store_path).encode() in plain
    print(f"screenshots: {decoded_png} (decoded), {encrypted_png} (encrypted)")
