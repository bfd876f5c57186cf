"""The CLI as a Unix tool: a closed pipe, Ctrl-C, re-attaching to a run (`watch`)."""

from __future__ import annotations

import signal
import subprocess

import pytest

from durable_agents.checkpoint import SqliteStore
from durable_agents.checkpoint.format import Checkpoint, Message
from tests.cli.conftest import CLI, ROOT

pytestmark = pytest.mark.integration

SIGPIPE_EXIT = 128 + signal.SIGPIPE


@pytest.fixture(scope="module")
def crowded_store(tmp_path_factory) -> str:
    """A store with more sessions than a pipe buffer holds as a table (or as JSON)."""
    path = tmp_path_factory.mktemp("crowded") / "store.db"
    store = SqliteStore(path, history_limit=0)
    try:
        for i in range(1500):
            sid = f"crowded-{i:05d}-" + "x" * 60
            store.save(Checkpoint(session_id=sid, agent="booker", messages=[Message.user("hi")]))
    finally:
        store.close()
    return f"sqlite:///{path}"


def _first_line_then_close(argv: list[str]) -> tuple[int, str, str]:
    """Like ``argv | head -1``: read one line, close the pipe, let the command finish."""
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline().decode()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(timeout=60), first, err


@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["table", "json"])
def test_sessions_piped_to_head_exits_quietly(crowded_store, json_flag):
    code, first, err = _first_line_then_close([*CLI, "--store", crowded_store, "sessions", *json_flag])
    assert first.strip()  # it printed
    assert err == "", err  # no BrokenPipeError, no traceback, no "Exception ignored"
    assert code == SIGPIPE_EXIT  # what a shell reports for `git log | head` too
