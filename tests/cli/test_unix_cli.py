"""The CLI as a Unix tool: a closed pipe, Ctrl-C, re-attaching to a run (`watch`)."""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import time

import pytest

from durable_agents.checkpoint import SqliteStore
from durable_agents.checkpoint.format import Checkpoint, Message
from durable_agents.client.result import RunResult
from tests.cli.conftest import CLI, ROOT, one_line_error, session_id

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


# -- Ctrl-C while a run is waited for, and `watch` ------------------------------------------
_TOOK = re.compile(r", \d+\.\d\ds$", re.MULTILINE)


_AGO = re.compile(r"\(\d+[smhd] ago\)")


def _same_as_run(text: str) -> str:
    """``run`` output without its timing (``…, 3 tool calls, 0+0 tokens, 1.23s``) and ages (``(3s ago)``)."""
    return _AGO.sub("(… ago)", _TOOK.sub("", text))


def test_ctrl_c_during_run_says_the_run_goes_on_and_how_to_watch_it(cli):
    sid = session_id("ctrlc")
    proc = subprocess.Popen(
        [*CLI, *cli.flags, "run", "dozer", "nap", "--session", sid, "--progress"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = []
    deadline = time.monotonic() + 60
    while not any("tool nap" in line for line in seen):  # the run is in its tool now
        assert time.monotonic() < deadline and proc.poll() is None, (seen, proc.poll())
        seen.append(proc.stderr.readline())
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, (stdout, stderr)
    err = stderr.strip()
    assert "Traceback" not in err and "Error" not in err, err
    assert "\n" not in err, err  # one line
    assert f"session {sid}" in err and "goes on in Temporal" in err, err
    command = shlex.split(err.split("`")[1])  # the command it names, pasted
    assert command[0] == "durable-agents" and command[-2:] == ["watch", sid], err

    # it re-attaches: progress, then the outcome `run` would have printed
    watched = cli.run_argv([*CLI, *command[1:], "--progress"])
    assert watched.returncode == 0, watched.stderr
    assert "user       nap" in watched.stdout and "Rested at last." in watched.stdout
    assert f"session {sid}: stop, 2 steps" in watched.stdout
    assert f"] {sid}: step 1 · tool nap" in watched.stderr  # it was still napping


def test_watch_of_a_finished_session_prints_the_same_outcome_as_run_at_once(cli):
    sid = session_id("watch")
    ran = cli.ok("run", "booker", "Book a table for 2", "--session", sid)
    started = time.monotonic()
    watched = cli.ok("watch", sid)
    assert time.monotonic() - started < 20
    assert _same_as_run(watched) == _same_as_run(ran)
    assert RunResult.model_validate_json(cli.ok("watch", sid, "--json")).finish_reason == "stop"


def test_watch_of_a_paused_session_prints_the_pending_approval_at_once(cli):
    sid = session_id("watch")
    ran = cli.ok("run", "payments", "Charge the customer", "--session", sid)
    watched = cli.ok("watch", sid)
    assert f"session {sid}: awaiting-approval" in watched and "approve: durable-agents" in watched
    assert _same_as_run(watched) == _same_as_run(ran)


def test_watch_of_an_unknown_session_exits_2(cli):
    one_line_error(cli.inproc("watch", "no-such-session"), 2, "no session 'no-such-session'")


def test_watch_of_a_session_without_a_run_in_temporal_says_how_to_continue_it(cli):
    sid = session_id("watch")
    cli.ok("run", "booker", "Book a table for 2", "--session", sid)
    cli.ok("fork", sid, "--from-step", "1", "--new-session-id", f"{sid}-f")  # in the store, never run
    err = one_line_error(cli("watch", f"{sid}-f"), 1, "has no run in Temporal to watch")
    assert "in-progress" in err and f"resume {sid}-f" in err
