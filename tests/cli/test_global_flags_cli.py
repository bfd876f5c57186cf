"""Global flags (``--store``, ``--task-queue``, ``--address`` …) work before the command, as
before, and after it too, where people type them (``durable-agents worker … --task-queue X``)."""

from __future__ import annotations

import argparse
import subprocess
import time
import uuid

import pytest

from durable_agents._defaults import DEFAULT_TASK_QUEUE
from durable_agents.cli import build_parser
from durable_agents.cli._common import default_store_url
from tests.cli.conftest import CLI, ROOT, stop

GLOBALS = ["--address", "--namespace", "--store", "--task-queue", "--encryption-key-file", "--store-encryption"]


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every command and sub-command: (its words, its parser)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from _commands(sub, (*path, name))


@pytest.fixture(autouse=True)
def _no_ambient_store(monkeypatch):
    monkeypatch.delenv("DURABLE_AGENTS_STORE", raising=False)


def test_every_command_takes_the_global_flags_and_its_help_says_so():
    parser = build_parser()
    commands = list(_commands(parser))
    assert len(commands) > 25
    for words, sub in commands:
        flags = {flag for action in sub._actions for flag in action.option_strings}
        assert set(GLOBALS) <= flags, (words, set(GLOBALS) - flags)
        assert "--task-queue" in sub.format_help(), words


@pytest.mark.parametrize(
    "argv",
    [
        ["--store", "sqlite:///x.db", "--task-queue", "tq", "--namespace", "ns", "sessions"],
        ["sessions", "--store", "sqlite:///x.db", "--task-queue", "tq", "--namespace", "ns"],
        ["--store", "sqlite:///x.db", "sessions", "--task-queue", "tq", "--namespace", "ns"],
    ],
)
def test_a_global_flag_is_taken_before_or_after_the_command(argv):
    args = build_parser().parse_args(argv)
    assert (args.store, args.task_queue, args.namespace) == ("sqlite:///x.db", "tq", "ns")


def test_defaults_stay_when_no_flag_is_given_and_after_the_command_wins():
    args = build_parser().parse_args(["sessions"])
    assert (args.store, args.task_queue, args.address, args.store_encryption) == (
        default_store_url(), DEFAULT_TASK_QUEUE, None, False
    )  # fmt: skip
    args = build_parser().parse_args(["--task-queue", "before", "run", "a", "hi", "--task-queue", "after"])
    assert args.task_queue == "after" and args.input == ["hi"]
    args = build_parser().parse_args(["web-token", "add", "alice", "--role", "viewer", "--store-encryption"])
    assert args.store_encryption is True and args.name == "alice"


def test_sessions_reads_the_store_named_after_the_command(tmp_path):
    from durable_agents.checkpoint import SqliteStore
    from durable_agents.checkpoint.format import Checkpoint, Message

    store = SqliteStore(tmp_path / "after.db")
    store.save(Checkpoint(session_id="after-1", agent="a", messages=[Message.user("hi")]))
    store.close()
    out = subprocess.run(
        [*CLI, "sessions", "--store", f"sqlite:///{tmp_path / 'after.db'}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "after-1" in out.stdout


def test_a_worker_takes_its_task_queue_and_store_after_the_command(env, tmp_path):
    queue = f"after-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "worker.log"
    address = env.client.service_client.config.target_host
    with log.open("w") as handle:
        proc = subprocess.Popen(
            [*CLI, "worker", "--agent", "tests.agents:weather_agent", "--address", address,
             "--task-queue", queue, "--store", f"sqlite:///{tmp_path / 'w.db'}"],
            cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while "worker for" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
    finally:
        stop(proc)
    said = log.read_text()
    assert f"on task queue {queue!r}" in said and str(tmp_path / "w.db") in said, said
