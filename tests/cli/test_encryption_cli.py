"""Encryption from the command line: ``--encryption-key-file`` and ``--store-encryption``.

A worker process and CLI commands with the same key file: the run's text is in
neither Temporal's history nor the store's file, and every command still reads
it; a key that is missing, or a worker without ``--store-encryption``, fails
with an error that names the key id.
"""

from __future__ import annotations

import uuid

import pytest

from durable_agents.checkpoint.encryption import new_key
from tests.cli.conftest import Cli, one_line_error, stop

pytestmark = pytest.mark.integration

SECRET = "Marguerite-Okafor-7731"


@pytest.fixture
def keyed(env, tmp_path):
    """A CLI on the session's server, and a key file."""
    keys = tmp_path / "keys"
    keys.write_text(new_key("k1") + "\n")
    keys.chmod(0o600)
    cli = Cli(env.client.service_client.config.target_host, f"enc-{uuid.uuid4().hex[:8]}", tmp_path / "store.db")
    return cli, keys


class _WithFlags(Cli):
    """``Cli`` with more global flags on every command (and its workers)."""

    def __init__(self, cli: Cli, extra: list[str]) -> None:
        super().__init__(cli.address, cli.task_queue, cli.store_path, cli.env)
        self.extra = extra

    @property
    def flags(self) -> list[str]:
        return [*super().flags, *self.extra]


def _flags(cli: Cli, extra: list[str]) -> Cli:
    return _WithFlags(cli, extra)


async def test_a_run_encrypted_in_temporal_and_in_the_store(env, tmp_path, keyed):
    base, keys = keyed
    cli = _flags(base, ["--encryption-key-file", str(keys), "--store-encryption"])
    worker = cli.start_worker(["tests.agents:weather_agent"], tmp_path / "worker.log")
    try:
        assert "payloads encrypted (EncryptionCodec(key ids k1; newest k1))" in (tmp_path / "worker.log").read_text()
        out = cli("run", "booker", f"Book a table for {SECRET}", "--session", "enc-1")
        assert out.returncode == 0, out.stderr
        assert "Booked a table for 2 at Roscioli in Rome." in out.stdout
        shown = cli.ok("show", "enc-1")
        assert SECRET in shown and "Roscioli" in shown  # the CLI reads the store with the keys
    finally:
        stop(worker)
    history = await env.client.get_workflow_handle("enc-1").fetch_history()
    raw_history = b"".join(e.SerializeToString() for e in history.events)
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("store.db*"))
    for secret in (SECRET, "Roscioli", "Paris"):
        assert secret.encode() not in raw_history, secret
        assert secret.encode() not in stored, secret

    # without --store-encryption the CLI shows the sealed values, never the text
    plain = _flags(base, ["--encryption-key-file", str(keys)])
    assert SECRET not in plain.ok("show", "enc-1")
    # a worker without --store-encryption refuses to hand a model the ciphertext
    worker = plain.start_worker(["tests.agents:weather_agent"], tmp_path / "plain-worker.log")
    try:
        out = plain("run", "booker", "again", "--session", "enc-1")
    finally:
        stop(worker)
    one_line_error(out, 2, "are encrypted at rest (key id 'k1'), but this worker's store is not")


def test_a_lost_key_is_named(env, tmp_path, keyed):
    base, keys = keyed
    cli = _flags(base, ["--encryption-key-file", str(keys), "--store-encryption"])
    worker = cli.start_worker(["tests.agents:weather_agent"], tmp_path / "worker.log")
    try:
        assert cli("run", "booker", f"Book for {SECRET}", "--session", "enc-2").returncode == 0
    finally:
        stop(worker)
    other = tmp_path / "other-keys"
    other.write_text(new_key("k2") + "\n")
    rotated_wrongly = _flags(base, ["--encryption-key-file", str(other), "--store-encryption"])
    err = one_line_error(rotated_wrongly.inproc("show", "enc-2"), 2, "key id 'k1', which is not among the keys")
    assert str(other) in err and "add key 'k1' back" in err


def test_malformed_keys_and_missing_keys_are_usage_errors(tmp_path, keyed):
    base, _ = keyed
    bad = tmp_path / "bad-keys"
    bad.write_text("k1:tooshort\n")
    one_line_error(_flags(base, ["--encryption-key-file", str(bad)]).inproc("sessions"), 2, "AES-256 needs 32")
    no_keys = _flags(base, ["--store-encryption"])
    one_line_error(no_keys.inproc("sessions"), 2, "--store-encryption needs encryption keys")
