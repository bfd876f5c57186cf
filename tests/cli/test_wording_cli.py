"""Errors the CLI prints name CLI flags and commands, never Python keywords (``interrupt=True``)."""

from __future__ import annotations

import re
import time

import pytest

from durable_agents.checkpoint import SqliteStore
from durable_agents.checkpoint.format import Checkpoint, Message
from tests.cli.conftest import one_line_error, session_id, stop

PYTHON_WORDING = re.compile(
    r"\w=(True|False|\)|\s|$)|\b\w+=\.\.\.|\bnew_session_id\b|allow_memory_store|pass agent\b|send new"
)


def no_python_wording(line: str) -> str:
    assert not PYTHON_WORDING.search(line), line
    return line


def _live(cli, sid: str):
    """A `run` of the slow agent (a 60 s tool) in the background, once its run is live."""
    proc = cli.popen("run", "slow", "Work on it", "--session", sid)
    store = SqliteStore(cli.store_path)
    try:
        deadline = time.monotonic() + 30
        while store.load_header(sid) is None:
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.05)
    finally:
        store.close()
    return proc


def test_busy_session_error_names_the_interrupt_flag(cli):
    sid = session_id("busy")
    running = _live(cli, sid)
    try:
        err = no_python_wording(one_line_error(cli("run", "slow", "again", "--session", sid), 1, "has a live run"))
        assert "--interrupt" in err and f"watch {sid}" in err
        err = no_python_wording(one_line_error(cli("resume", sid), 1, "has a live run"))
        assert f"cancel {sid}" in err and f"watch {sid}" in err and "--interrupt" not in err  # resume has no such flag
    finally:
        cli("cancel", sid)
        stop(running)


def test_awaiting_approval_error_names_the_approve_and_reject_commands(cli):
    sid = session_id("paused")
    cli.ok("run", "payments", "Charge the customer", "--session", sid)
    for argv in (["run", "payments", "more", "--session", sid], ["resume", sid]):
        err = no_python_wording(one_line_error(cli(*argv), 1, "is waiting for approval"))
        assert f"approve {sid}" in err and f"reject {sid}" in err, err


def test_fork_into_an_existing_session_names_the_new_session_id_flag(cli):
    sid = session_id("fork")
    taken = session_id("taken")
    cli.ok("run", "booker", "Book a table for 2", "--session", sid)
    cli.ok("run", "booker", "Book a table for 2", "--session", taken)
    err = no_python_wording(
        one_line_error(cli("fork", sid, "--from-step", "1", "--new-session-id", taken), 2, "already has a checkpoint")
    )
    assert "--new-session-id" in err


def test_resume_of_a_session_that_records_no_agent_names_the_agent_flag(cli):
    sid = session_id("agentless")
    store = SqliteStore(cli.store_path)
    try:
        store.save(Checkpoint(session_id=sid, messages=[Message.user("hi")]))
    finally:
        store.close()
    err = no_python_wording(one_line_error(cli.inproc("resume", sid), 2, "records no agent"))
    assert "--agent" in err


@pytest.mark.parametrize("command", ["worker", "dev"])
def test_a_worker_on_a_memory_store_names_the_store_flag(cli, command, tmp_path):
    argv = ["--store", "memory:", command, "--agent", "tests.agents:weather_agent"]
    if command == "dev":
        argv += ["--headless", "--db-file", str(tmp_path / "t.db")]
    err = no_python_wording(one_line_error(cli.inproc(*argv), 2, "memory:"))
    assert "--store sqlite:///" in err
