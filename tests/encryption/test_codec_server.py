"""The codec server over real HTTP: the requests the Temporal UI and CLI send.

The Temporal CLI (``temporal workflow show --codec-endpoint``) decodes an
encrypted run's history through it; ``durable-agents codec-server`` runs as
the operator would start it.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys

import httpx
import pytest

from durable_agents import AgentClient, build_worker, connect
from durable_agents.checkpoint.encryption import KEYS_ENV, new_key
from durable_agents.codec_server import codec_server
from durable_agents.devserver import find_temporal_binary, free_port
from durable_agents.encryption import EncryptionCodec
from tests import agents
from tests.conftest import session_id

K1 = new_key("k1")
UI = "http://127.0.0.1:8233"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _plain(text: str) -> dict:
    return {"metadata": {"encoding": _b64(b"json/plain")}, "data": _b64(json.dumps(text).encode())}


@pytest.fixture
def server():
    with codec_server(EncryptionCodec(K1), port=0, origins=[UI], token="s3cret") as running:
        yield running


AUTH = {"Authorization": "Bearer s3cret", "X-Namespace": "default"}


def test_encode_then_decode_round_trips_as_the_ui_sends_them(server):
    encoded = httpx.post(f"{server.url}/encode", json={"payloads": [_plain("Book for Marguerite")]}, headers=AUTH)
    assert encoded.status_code == 200, encoded.text
    [sealed] = encoded.json()["payloads"]
    assert base64.b64decode(sealed["metadata"]["encoding"]) == b"binary/encrypted"
    assert base64.b64decode(sealed["metadata"]["encryption-key-id"]) == b"k1"
    assert "Marguerite" not in encoded.text
    decoded = httpx.post(f"{server.url}/decode", json=encoded.json(), headers=AUTH)
    assert decoded.status_code == 200 and decoded.json() == {"payloads": [_plain("Book for Marguerite")]}


def test_cors_lets_the_ui_origin_call_with_its_headers(server):
    preflight = httpx.options(
        f"{server.url}/decode",
        headers={
            "Origin": UI,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,x-namespace,authorization",
        },
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == UI
    allowed = {h.strip().lower() for h in preflight.headers["access-control-allow-headers"].split(",")}
    assert {"x-namespace", "authorization", "content-type"} <= allowed
    assert "POST" in preflight.headers["access-control-allow-methods"]
    answer = httpx.post(f"{server.url}/decode", json={"payloads": []}, headers={**AUTH, "Origin": UI})
    assert answer.headers["access-control-allow-origin"] == UI
    other = httpx.options(
        f"{server.url}/decode", headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}
    )
    assert other.status_code == 400 and "access-control-allow-origin" not in other.headers


def test_without_the_token_nothing_is_decoded(server):
    encoded = httpx.post(f"{server.url}/encode", json={"payloads": [_plain("x")]}, headers=AUTH).json()
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
        refused = httpx.post(f"{server.url}/decode", json=encoded, headers=headers)
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert "json/plain" not in refused.text


def test_bad_requests_and_unknown_keys_get_clear_answers(server):
    malformed = httpx.post(f"{server.url}/decode", content=b"not json", headers=AUTH)
    assert malformed.status_code == 400 and '{"payloads"' in malformed.json()["error"]
    with codec_server(EncryptionCodec(new_key("k9")), port=0) as other:
        foreign = httpx.post(f"{other.url}/encode", json={"payloads": [_plain("x")]}).json()
    unknown = httpx.post(f"{server.url}/decode", json=foreign, headers=AUTH)
    assert unknown.status_code == 422 and "key id 'k9'" in unknown.json()["error"]


async def test_the_temporal_cli_reads_an_encrypted_history_through_it(env, store, task_queue, server):
    client = await connect(env.client.service_client.config.target_host, codec=EncryptionCodec(K1))
    sid = session_id()
    async with build_worker(client, agents=[agents.weather_agent], store=store, task_queue=task_queue):
        await AgentClient(client, store, task_queue).send("booker", "Book a table", session_id=sid)
    show = [str(find_temporal_binary()), "workflow", "show", "-w", sid, "-o", "json"]
    show += ["--address", env.client.service_client.config.target_host]
    plain = subprocess.run(show, capture_output=True, text=True, timeout=60)
    decoded = subprocess.run(
        [*show, "--codec-endpoint", server.url, "--codec-auth", "Bearer s3cret"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert plain.returncode == 0 and decoded.returncode == 0, (plain.stderr, decoded.stderr)

    def run_input(shown: str) -> tuple[bytes, bytes]:
        started = json.loads(shown)["events"][0]["workflowExecutionStartedEventAttributes"]
        [payload] = started["input"]["payloads"]
        return base64.b64decode(payload["metadata"]["encoding"]), base64.b64decode(payload["data"])

    encoding, data = run_input(plain.stdout)
    assert encoding == b"binary/encrypted" and str(store.location).encode() not in data
    encoding, data = run_input(decoded.stdout)
    assert encoding == b"json/plain"
    assert json.loads(data)["storeLocation"] == store.location  # the run's input, decrypted (camelCase wire)


def test_the_codec_server_command(tmp_path):
    port = free_port()
    key_file = tmp_path / "keys"
    key_file.write_text(K1 + "\n")
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "durable_agents.cli", "--encryption-key-file", str(key_file)),
            *("codec-server", "--port", str(port), "--ui-origin", UI),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "DURABLE_AGENTS_CODEC_TOKEN": "t0k", KEYS_ENV: ""},
    )
    try:
        line = proc.stdout.readline()
        assert f"codec server at http://127.0.0.1:{port} (keys k1; newest k1)" in line, (line, proc.stderr.read())
        assert "bearer token required" in line
        url = f"http://127.0.0.1:{port}"
        sealed = httpx.post(f"{url}/encode", json={"payloads": [_plain("hi")]}, headers={"Authorization": "Bearer t0k"})
        assert sealed.status_code == 200
        assert httpx.post(f"{url}/decode", json=sealed.json()).status_code == 401
        back = httpx.post(f"{url}/decode", json=sealed.json(), headers={"Authorization": "Bearer t0k"})
        assert back.json() == {"payloads": [_plain("hi")]}
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
